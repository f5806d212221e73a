"""The child processes of ``fairshare up``: a master (or N HA masters on a local etcd), agents
and frameworks, each the real ``fairshare`` command started as a child of this process.

Each daemon gets its own work directory under the base directory and a log file there (stdout
and stderr appended); a daemon is ready once it writes its address file (``master.addr``,
``agent.addr``). With N masters above 1 a local etcd member (``master.commands.local_etcd``)
runs under TLS of the local CA, master i serves on ports ``port + i`` and ``metrics_port + i``
(any free ones when taken), and the masters' election lease is ``ELECTION_TTL`` (3 s), so a new
leader is there within seconds of a killed one. ``--tls`` (``LocalCluster.ca``) gives every
daemon a daemon certificate of the local CA (server and client authentication) and a client
its client certificate (``tls_flags``).

Invariants:
- a daemon that exits is started again in its slot, on the same work dir and ports
  (``restart_dead``), unless it died ``MAX_RESTARTS`` times within ``RESTART_WINDOW`` or does
  not serve again within ``START_TIMEOUT``: then ``ClusterError`` (never a restart loop);
- a daemon that fails to start or to come back is named with the last lines of its log;
- ``stop`` ends frameworks first, then agents, then the masters, each group with SIGTERM and a
  bounded wait (``STOP_TIMEOUT``) before SIGKILL; etcd is stopped last;
- a default port that is taken is replaced by a free one, with a note; a port given explicitly
  that is taken is a ``ClusterError`` naming its flag (``free_port_or_any``).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fairshare.local_ca import CLIENT, DAEMON, LocalCa
from fairshare.ports import port_problem

from master.commands.local_etcd import LocalEtcd

__all__ = [
    "ELECTION_TTL",
    "MAX_RESTARTS",
    "RESTART_WINDOW",
    "ClusterError",
    "LocalCluster",
    "fairshare_command",
    "free_port_or_any",
]

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
POLL = 0.05
ELECTION_TTL = "3s"  # the HA masters' --election-ttl: a dead leader is replaced in seconds
MAX_RESTARTS = 3  # a daemon that exits this often within RESTART_WINDOW is not started again
RESTART_WINDOW = 60.0


class ClusterError(RuntimeError):
    """A daemon did not start, or died."""


def fairshare_command(*args: str) -> list[str]:
    """The command line of ``fairshare ARGS...`` run by this Python."""
    return [sys.executable, "-m", "fairshare.cli", *args]


def _spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start a child with stdout and stderr appended to ``log``."""
    with log.open("ab") as sink:
        return subprocess.Popen(args, stdout=sink, stderr=subprocess.STDOUT)


def _log_tail(log: Path, lines: int = 3) -> str:
    """The last lines of a daemon's log, indented (empty if there is none)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "".join(f"\n    {line}" for line in text[-lines:])


def _wait_for_file(path: Path, process: subprocess.Popen[bytes], what: str, log: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if path.exists():
            text = path.read_text().strip()
            if text:
                return text
        if process.poll() is not None:
            raise ClusterError(
                f"{what} exited with code {process.returncode} before serving; the end of"
                f" {log}:{_log_tail(log)}"
            )
        time.sleep(POLL)
    raise ClusterError(f"{what} did not write {path} within {START_TIMEOUT:.0f} s")


@dataclass
class LocalCluster:
    """Child processes of one local cluster, stopped in reverse order of importance."""

    base: Path
    port: int
    metrics_port: int = 0  # the master's; agent i gets metrics_port + i (0: every port picked)
    policy: str = "drf"
    placement: str = "best-fit"
    log_flags: tuple[str, ...] = ()  # --log-level and --log-format of every child
    master_flags: tuple[str, ...] = ()  # more flags of every master (--rebalance, --hierarchy)
    masters: list[subprocess.Popen[bytes]] = field(default_factory=list)
    address: str = ""  # HOST:PORT of the master, or the list a,b,c of HA masters
    dashboards: list[str] = field(default_factory=list)
    agents: list[subprocess.Popen[bytes]] = field(default_factory=list)
    frameworks: list[subprocess.Popen[bytes]] = field(default_factory=list)
    ca: LocalCa | None = None  # --tls: every daemon serves mutual TLS with this CA's certificates
    etcd: LocalEtcd | None = None
    resources: str | None = None  # every agent's --resources
    master_addresses: list[str] = field(default_factory=list)  # each master's HOST:PORT
    agent_addresses: list[str] = field(default_factory=list)  # each agent's HOST:PORT
    agent_metrics: list[str] = field(default_factory=list)  # each agent's metrics HOST:PORT
    restarts: dict[str, list[float]] = field(default_factory=dict)  # daemon -> restart times

    def tls_flags(self, name: str, daemon: bool = False) -> tuple[str, ...]:
        """``--tls-ca/--tls-cert/--tls-key`` of ``name``'s certificate (issued on first use;
        nothing without ``--tls``): a daemon's (server and client authentication, naming this
        machine) or a client's (client authentication only: it cannot pose as a daemon)."""
        if self.ca is None:
            return ()
        issued = self.ca.certificate(name, DAEMON if daemon else CLIENT)
        return (
            "--tls-ca", str(self.ca.cert), "--tls-cert", str(issued.cert),
            "--tls-key", str(issued.key),
        )  # fmt: skip

    def start_masters(self, count: int) -> str:
        """Start ``count`` masters (above 1: a local etcd and HA masters on it) and return
        what clients take as ``--master`` once every one serves."""
        if count > 1:  # etcd serves TLS with the local CA (the one of --tls, if given)
            ca = self.ca or LocalCa.create(self.base / "tls")
            self.etcd = LocalEtcd.start(self.base / "etcd", ca)
            # A short lease: a killed leader is replaced within seconds (the masters' default
            # of 5 s is for real networks; one machine's loopback needs less).
            self.master_flags = (*self.master_flags, "--election-ttl", ELECTION_TTL)
        addresses = []
        for index in range(count):
            name = "master" if count == 1 else f"master-{index + 1}"
            self._spawn_master(index, name, _nth_port(self.port, index))
            what = "the master" if count == 1 else f"master {index + 1}"
            work = self.base / name
            addresses.append(
                _wait_for_file(work / "master.addr", self.masters[index], what, work / "master.log")
            )
            self.dashboards.append((work / "metrics.addr").read_text().strip())
        self.master_addresses = addresses
        self.address = ",".join(addresses)
        return self.address

    def _spawn_master(self, index: int, name: str, port: int, metrics: int | None = None) -> None:
        """Start master ``index`` (a new one, or again in its slot on ``port``)."""
        work = self.base / name
        work.mkdir(parents=True, exist_ok=True)
        for stale in ("master.addr", "metrics.addr"):
            (work / stale).unlink(missing_ok=True)
        registry: tuple[str, ...] = ()
        if self.etcd is not None:
            registry = ("--registry", self.etcd.url(), *self.etcd.master_flags())
        if metrics is None:
            metrics = _nth_port(self.metrics_port, index)
        process = _spawn(
            fairshare_command(
                "master", "--port", str(port), "--metrics-port", str(metrics),
                "--work-dir", str(work), "--policy", self.policy,
                "--placement", self.placement, *registry, *self.master_flags, *self.log_flags,
                *self.tls_flags(name, daemon=True),
            ),
            work / "master.log",
        )  # fmt: skip
        if index < len(self.masters):
            self.masters[index] = process
        else:
            self.masters.append(process)

    def start_agents(self, count: int, resources: str | None) -> None:
        """Start ``count`` agents and wait until each is connected."""
        self.resources = resources
        for index in range(count):
            metrics = self.metrics_port + len(self.masters) + index if self.metrics_port else 0
            if port_problem("", metrics) is not None:  # taken (node_exporter's 9101?): any port
                metrics = 0
            self._spawn_agent(index, 0, metrics)
            work = self.base / f"agent-{index + 1}"
            self.agent_addresses.append(
                _wait_for_file(
                    work / "agent.addr", self.agents[index], f"agent {index + 1}",
                    work / "agent.log",
                )
            )  # fmt: skip
            self.agent_metrics.append((work / "metrics.addr").read_text().strip())

    def _spawn_agent(self, index: int, port: int, metrics: int) -> None:
        """Start agent ``index`` (a new one, or again in its slot on ``port``)."""
        work = self.base / f"agent-{index + 1}"
        work.mkdir(parents=True, exist_ok=True)
        for stale in ("agent.addr", "metrics.addr"):
            (work / stale).unlink(missing_ok=True)
        args = ["agent", "--master", self.address, "--port", str(port)]
        args += ["--metrics-port", str(metrics)]
        args += ["--work-dir", str(work), "--hostname", f"agent-{index + 1}"]
        args += self.tls_flags(f"agent-{index + 1}", daemon=True)
        if self.ca is not None:  # mutual TLS on the agents' ports too, as on the master's
            args += ["--tls-client-ca", str(self.ca.cert)]
        if self.resources:
            args += ["--resources", self.resources]
        process = _spawn(fairshare_command(*args, *self.log_flags), work / "agent.log")
        if index < len(self.agents):
            self.agents[index] = process
        else:
            self.agents.append(process)

    def start_framework(self, name: str, task: str, count: int) -> None:
        """Start a built-in framework keeping up to ``count`` tasks of ``task`` running."""
        args = ["run", "--master", self.address, "--name", name, "--task", task]
        args += ["--count", str(count), *self.log_flags, *self.tls_flags("operator")]
        log = self.base / f"framework-{name}.log"
        self.frameworks.append(_spawn(fairshare_command(*args), log))

    def dead(self) -> str | None:
        """A description of the first daemon that exited, or None while all run."""
        for index, master in enumerate(self.masters):
            if master.poll() is not None:
                which = "the master" if len(self.masters) == 1 else f"master {index + 1}"
                return f"{which} exited with code {master.returncode}"
        for index, agent in enumerate(self.agents):
            if agent.poll() is not None:
                return f"agent {index + 1} exited with code {agent.returncode}"
        return None

    def restart_dead(self, say: Callable[[str], None]) -> None:
        """Start again, in its slot (work dir and ports), each daemon that exited, saying so;
        ``ClusterError`` when one died ``MAX_RESTARTS`` times within ``RESTART_WINDOW`` or
        does not serve again (a daemon that cannot run is not restarted in a loop)."""
        count = len(self.masters)
        for index, master in enumerate(self.masters):
            if master.poll() is None:
                continue
            what = "the master" if count == 1 else f"master {index + 1}"
            name = "master" if count == 1 else f"master-{index + 1}"
            address = self.master_addresses[index]
            self._may_restart(what, master.returncode)
            followers = " (the other masters elect a leader meanwhile)" if count > 1 else ""
            say(
                f"{what} exited with code {master.returncode}; restarting it on"
                f" {address}{followers}"
            )
            self._spawn_master(index, name, _port_of(address), _port_of(self.dashboards[index]))
            work = self.base / name
            _wait_for_file(work / "master.addr", self.masters[index], what, work / "master.log")
            say(f"{what} is back on {address}")
        for index, agent in enumerate(self.agents):
            if agent.poll() is not None:
                what = f"agent {index + 1}"
                self._may_restart(what, agent.returncode)
                address = self.agent_addresses[index]
                say(f"{what} exited with code {agent.returncode}; restarting it on {address}")
                self._spawn_agent(index, _port_of(address), _port_of(self.agent_metrics[index]))
                work = self.base / f"agent-{index + 1}"
                _wait_for_file(work / "agent.addr", self.agents[index], what, work / "agent.log")
                say(f"{what} is back on {address} (its tasks recovered)")

    def _may_restart(self, what: str, code: int | None) -> None:
        now = time.monotonic()
        recent = [t for t in self.restarts.get(what, []) if now - t < RESTART_WINDOW]
        if len(recent) >= MAX_RESTARTS:
            raise ClusterError(
                f"{what} exited with code {code}, its {len(recent) + 1}th time within"
                f" {RESTART_WINDOW:.0f} s: not restarting it again"
            )
        self.restarts[what] = [*recent, now]

    def stop(self) -> None:
        """SIGTERM every child (frameworks, agents, masters), SIGKILL what outlives the wait;
        then etcd."""
        for group in (self.frameworks, self.agents, self.masters):
            for process in group:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in group:
                try:
                    process.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if self.etcd is not None:
            self.etcd.stop()


def _port_of(address: str) -> int:
    """The port of ``HOST:PORT``."""
    return int(address.rsplit(":", 1)[1])


def _nth_port(first: int, index: int) -> int:
    """Port ``first + index`` if it is free (0 when ``first`` is 0 or it is taken: any)."""
    if not first or not index:
        return first
    wanted = first + index
    return wanted if port_problem("", wanted) is None else 0


def free_port_or_any(flag: str, value: int, default: int) -> tuple[int, str | None]:
    """``value`` if it can be listened on; 0 (any) with a note if it is the taken default;
    raises ``ClusterError`` naming ``flag`` if it was chosen and is taken."""
    problem = port_problem("", value)
    if problem is None:
        return value, None
    if value == default:
        return 0, f"{flag} {value} is taken ({problem}): using a free port instead"
    raise ClusterError(f"{flag} {value}: {problem} (pick a free port, or 0 for any)")
