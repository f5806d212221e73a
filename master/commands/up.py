"""``fairshare up``: a master and N agents as local processes (and, with ``--demo``, a workload).

With ``--masters N`` above 1 it also starts one local etcd member (``master.commands.local_etcd``,
Debian's ``etcd-server``; TLS with client certificates of the local CA of ``--tls``, or of one
made for etcd alone, and etcd users: docs/security.md) and N HA masters on it
(``--registry etcd://...`` with their ``--etcd-*`` flags and ``--registry-key``; master i on ports
``--port + i`` and ``--metrics-port + i``); agents and frameworks get the list of the masters
and find the leader themselves (docs/architecture.md §5). etcd is stopped last.

Each daemon is the real ``fairshare master`` / ``fairshare agent`` command, started as a child
process with its own work directory under ``--work-dir`` and a port picked by the OS (the master's
port is ``--port``, default 5050). ``--demo`` adds two built-in frameworks (``fairshare run``)
with the task shapes of the DRF paper's example and prints the cluster status while they run.

Its settings (``UP_SETTINGS``: flags, ``FAIRSHARE_UP_<SETTING>``, the ``[up]`` TOML table) are
passed to the children as flags, ``--log-level`` and ``--log-format`` too, so they win over
anything the children would read from the environment or a settings file; each child's stderr
goes to a log file under the base directory.

A daemon that dies while the cluster runs (``kill -9`` of the leader, to watch a failover) is
started again in its slot, on the same work dir and ports, and ``up`` says so on its output
(``master 1 exited with code -9; restarting it on HOST:PORT``): the other HA masters elect a
leader meanwhile, the agents keep their tasks and find the new leader, the restarted master
joins as a follower. The HA masters' election lease is ``ELECTION_TTL`` (3 s), so a new leader
is there within seconds.

Invariants: every child is started in this process's session and stopped on exit, whatever the
reason (Ctrl-C, SIGTERM, ``--for`` elapsed, a daemon that cannot be restarted): frameworks
first, then agents, then the master, each with SIGTERM and a bounded wait before SIGKILL; the
exit code is 0 for a clean stop and 1 when a daemon failed to start, or died ``MAX_RESTARTS``
times within ``RESTART_WINDOW`` (it is not restarted in a loop), or did not serve again. A
daemon that fails is named with the last lines of its log, and the logs are kept (a temporary
base directory is removed only after a clean stop). A default port that is taken (5050, or
9100: node_exporter's too) is replaced by a free one, with a note; a port given explicitly that
is taken is an error naming its flag.

``--tls`` makes the secure path the easy one: a throwaway CA (``fairshare.local_ca``) under
``<base>/tls`` issues a daemon's certificate (server and client authentication, naming this
machine) to the master and to each agent (``agent-N``) and a client's (client authentication
only: it cannot pose as a daemon) to ``operator``, used by the demo frameworks and the status
lines; every daemon then serves mutual TLS (client certificates required: their common names
are the principals; the agents' ports by ``--tls-client-ca``) and the command to reach the
cluster is printed with its ``--tls-*`` flags.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Final

from fairshare.cli import command_settings
from fairshare.local_ca import CLIENT, DAEMON, LocalCa, LocalCaError
from fairshare.ports import port_problem
from fairshare.settings import (
    SHARED_SETTINGS,
    Setting,
    add_setting_flags,
    boolean,
    non_empty_text,
    optional_positive_duration,
    positive_int,
    resource_vector,
)

from master.commands.local_etcd import LocalEtcd, LocalEtcdError
from master.config import MASTER_SETTINGS, check_hierarchy, check_rebalance

__all__ = ["DEMO_FRAMEWORKS", "UP_SETTINGS", "LocalCluster", "add_arguments", "main"]

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
POLL = 0.05
ELECTION_TTL = "3s"  # the HA masters' --election-ttl: a dead leader is replaced in seconds
MAX_RESTARTS = 3  # a daemon that exits this often within RESTART_WINDOW is not started again
RESTART_WINDOW = 60.0
DEMO_AGENT = "cpus:9;mem:18432"
# DRF paper §4.1: A <1 CPU, 4 GB>, B <3 CPUs, 1 GB>; on one 9 CPU / 18 GB agent DRF runs 3 and 2.
DEMO_FRAMEWORKS = (("A", "cpus:1;mem:4096"), ("B", "cpus:3;mem:1024"))


_MASTER_SETTINGS: Final = {setting.name: setting for setting in MASTER_SETTINGS}


def _master_setting(name: str, help_text: str) -> Setting:
    """The master's own setting ``name`` (parser, default, choices, metavar declared once in
    ``master.settings``), with the help ``fairshare up`` shows for it."""
    return dataclasses.replace(_MASTER_SETTINGS[name], help=help_text)


def _resources(raw: Any) -> str:
    """An agent's ``--resources`` text, checked as the agent will check it."""
    resource_vector(raw)
    return str(raw).strip()


UP_SETTINGS: Final = (
    Setting("agents", positive_int, 2, "how many agents", metavar="N"),
    Setting(
        "masters",
        positive_int,
        1,
        "how many masters; above 1 they are HA masters electing a leader in a local etcd"
        " (Debian's etcd-server)",
        metavar="N",
    ),
    Setting(
        "resources",
        _resources,
        None,
        "each agent's resources, e.g. 'cpus:8;mem:16384' (default: this host's; with --demo"
        f" {DEMO_AGENT})",
    ),
    _master_setting("port", "the master's gRPC port, 0 picks a free one"),
    _master_setting(
        "metrics_port",
        "the master's metrics port; agent i gets the next ones (deploy/prometheus's targets);"
        " 0 picks free ports",
    ),
    Setting(
        "work_dir",
        non_empty_text,
        None,
        "base directory of the daemons' work dirs and logs (default: a temporary directory)",
        metavar="DIR",
    ),
    _master_setting("policy", "the master's fairness policy"),
    _master_setting("placement", "the master's placement policy"),
    _master_setting(
        "hierarchy",
        "how the master shares the pool between roles: hdrf (default under --policy drf),"
        " naive or flat (fairshare master --hierarchy)",
    ),
    Setting(
        "for",
        optional_positive_duration,
        None,
        "stop everything after this long (default: until Ctrl-C or SIGTERM)",
        metavar="DURATION",
    ),
    _master_setting(
        "rebalance",
        "the master preempts preemptible tasks toward DRFH's allocation (fairshare master"
        " --rebalance with its default settings; needs --policy drf)",
    ),
    Setting(
        "tls",
        boolean,
        False,
        "mutual TLS everywhere with a throwaway CA under the base directory (certificates for"
        " the master, each agent and an 'operator' client)",
        switch=True,
    ),
    *(setting for setting in SHARED_SETTINGS if setting.name != "master"),
)
"""The settings of ``fairshare up``, in the order ``--help`` shows them."""


class ClusterError(RuntimeError):
    """A daemon did not start, or died."""


def _fairshare(*args: str) -> list[str]:
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
            _fairshare(
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
        process = _spawn(_fairshare(*args, *self.log_flags), work / "agent.log")
        if index < len(self.agents):
            self.agents[index] = process
        else:
            self.agents.append(process)

    def start_framework(self, name: str, task: str, count: int) -> None:
        """Start a built-in framework keeping up to ``count`` tasks of ``task`` running."""
        args = ["run", "--master", self.address, "--name", name, "--task", task]
        args += ["--count", str(count), *self.log_flags, *self.tls_flags("operator")]
        log = self.base / f"framework-{name}.log"
        self.frameworks.append(_spawn(_fairshare(*args), log))

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


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt so both end the cluster the same way."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _show_status(cluster: LocalCluster) -> None:
    flags = cluster.tls_flags("operator")
    subprocess.run(_fairshare("status", "--master", cluster.address, *flags), check=False)


def _watch(cluster: LocalCluster, demo: bool, seconds: float | None) -> int:
    deadline = None if seconds is None else time.monotonic() + seconds
    next_status = time.monotonic() + 2.0
    while deadline is None or time.monotonic() < deadline:
        if cluster.dead():
            try:
                cluster.restart_dead(lambda line: print(f"fairshare up: {line}", flush=True))
            except ClusterError as error:
                print(f"fairshare up: {error}", file=sys.stderr)
                return 1
        if demo and time.monotonic() >= next_status:
            _show_status(cluster)
            next_status = time.monotonic() + 5.0
        time.sleep(0.2)
    if demo:
        _show_status(cluster)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare up``."""
    parser.description = (
        "Run a master and N agents as local processes (the real daemons, each with its own work"
        " dir and log file) until Ctrl-C, SIGTERM or --for elapses; a daemon that dies is"
        " restarted in its slot (kill -9 the leader of --masters 3 to watch a failover)."
    )
    add_setting_flags(parser, UP_SETTINGS)
    parser.add_argument(
        "--demo",
        action="store_true",
        help="also run the DRF paper's two frameworks and print the status as they run",
    )


def free_port_or_any(flag: str, value: int, default: int) -> tuple[int, str | None]:
    """``value`` if it can be listened on; 0 (any) with a note if it is the taken default;
    raises ``ClusterError`` naming ``flag`` if it was chosen and is taken."""
    problem = port_problem("", value)
    if problem is None:
        return value, None
    if value == default:
        return 0, f"{flag} {value} is taken ({problem}): using a free port instead"
    raise ClusterError(f"{flag} {value}: {problem} (pick a free port, or 0 for any)")


def main(args: argparse.Namespace) -> int:
    """``fairshare up``: run the cluster until Ctrl-C, SIGTERM or ``--for`` elapses."""
    values = command_settings("up", UP_SETTINGS, args)
    check_rebalance(values["rebalance"], values["policy"])
    check_hierarchy(values["policy"], values["hierarchy"], frozenset())
    log_flags = ("--log-level", values["log_level"], "--log-format", values["log_format"])
    temporary = not values["work_dir"]
    base = Path(values["work_dir"] or tempfile.mkdtemp(prefix="fairshare-up-"))
    if temporary:
        base.chmod(0o711)  # command tasks run as the agents' --task-user: let it reach its sandbox
    code = _run_cluster(args, values, base, log_flags)
    if code == 0 and temporary:
        shutil.rmtree(base, ignore_errors=True)
    elif code != 0:
        print(f"fairshare up: the daemons' logs are kept in {base}", file=sys.stderr)
    return code


def _run_cluster(
    args: argparse.Namespace, values: dict[str, Any], base: Path, log_flags: tuple[str, ...]
) -> int:
    with contextlib.ExitStack() as stack:
        try:
            port, note = free_port_or_any("--port", values["port"], 5050)
            metrics_port, metrics_note = free_port_or_any(
                "--metrics-port", values["metrics_port"], 9100
            )
        except ClusterError as error:
            print(f"fairshare up: {error}", file=sys.stderr)
            return 1
        for line in (note, metrics_note):
            if line:
                print(f"fairshare up: {line}")
        cluster = LocalCluster(
            base,
            port,
            metrics_port,
            values["policy"],
            values["placement"],
            log_flags,
            ("--rebalance",) * values["rebalance"]
            + (("--hierarchy", values["hierarchy"]) if values["hierarchy"] else ()),
        )
        stack.enter_context(_stop_on_signals())
        stack.callback(cluster.stop)
        resources = values["resources"] or (DEMO_AGENT if args.demo else None)
        try:
            if values["tls"]:
                cluster.ca = LocalCa.create(base / "tls")
            address = cluster.start_masters(values["masters"])
            if args.demo:  # frameworks first: offers are not preempted, so arrival order matters
                for name, task in DEMO_FRAMEWORKS:
                    cluster.start_framework(name, task, 20)
            cluster.start_agents(values["agents"], resources)
            masters = "master" if values["masters"] == 1 else f"{values['masters']} HA masters"
            scheme = "https" if cluster.ca is not None else "http"
            dashboards = " ".join(f"{scheme}://{d}/" for d in cluster.dashboards)
            print(
                f"fairshare up: {masters} at {address}, {values['agents']} agent(s), logs in"
                f" {base}; dashboard {dashboards} ; Ctrl-C stops everything"
            )
            if cluster.ca is not None:
                flags = " ".join(cluster.tls_flags("operator"))
                print(f"fairshare up: mutual TLS; try: fairshare status --master {address} {flags}")
                bundle = cluster.ca.browser_bundle(cluster.ca.certificate("operator"))
                print(
                    f"fairshare up: the dashboard asks for a client certificate: import {bundle}"
                    f" (no password) into your browser and trust {cluster.ca.cert}, then choose"
                    " the certificate 'operator' when asked (docs/security.md: the dashboard of a"
                    " mutual-TLS master)"
                )
            return _watch(cluster, args.demo, values["for"])
        except (
            ClusterError,
            LocalCaError,
            LocalEtcdError,
            OSError,
        ) as error:  # OSError: a work dir that cannot be made
            print(f"fairshare up: {error}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 0
    return 0
