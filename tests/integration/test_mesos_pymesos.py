"""Frameworks written for Mesos run unchanged on fairshare: real pymesos 0.3.15 (PyPI) frameworks
(``mesos_framework.py``, pymesos's public API only) against a real master's Mesos v1 scheduler
API (its HTTP port) and real agents running their command tasks.

- command tasks launched from offers finish and their output is in their sandboxes; updates are
  acknowledged implicitly (pymesos's default) or explicitly: an agent sends a task's next update
  only once the last one was acknowledged, so a FINISHED arrives after the RUNNING's ack;
- DECLINE with a filter: the agent is offered again after ``refuse_seconds``, not before;
  SUPPRESS stops offers until REVIVE, which clears a filter of an hour;
- RECONCILE explicit (the task's state, REASON_RECONCILIATION), implicit (every live task) and of
  an unknown task (TASK_LOST); KILL: TASK_KILLED;
- a framework that dies and subscribes again with its id within its failover timeout gets its
  running task back;
- two pymesos frameworks and one SDK framework (``fairshare run``) on one agent end with DRF's
  allocation: five tasks each, dominant shares equal;
- with ``--credentials`` (TLS, as every token on fairshare): HTTP basic auth with a valid secret
  subscribes, a wrong or missing one is 401 and the framework exits; pymesos speaks plaintext
  HTTP only, so it reaches the TLS port through a local TLS client proxy (what a deployment does
  with stunnel or a sidecar);
- a follower of HA masters redirects pymesos (307) to the leader's HTTP port.

pymesos's dependency http-parser builds its C extension on Python <= 3.10 only: the frameworks
run from a 3.10 venv, ``.venv-mesos`` at the top of the tree (``.ci/run`` makes it with pyenv's
3.10 and ``pip install pymesos==0.3.15``) or ``$FAIRSHARE_MESOS_PYTHON``. Without it the tests
skip saying so, except in CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from command_reaper import reap
from daemons import (
    DEFAULT_MASTER_FLAGS,
    ROOT,
    STARTED,
    Client,
    Daemon,
    daemon_env,
    fairshare_status,
    start_agent,
    wait_for,
)
from fairshare.credentials import entry_toml, hash_secret, new_secret
from ha import HAMasters
from secure import Pki

FRAMEWORK = Path(__file__).with_name("mesos_framework.py")
PYMESOS_VERSION = "0.3.15"
SETTLE = 40.0


def mesos_python() -> str:
    """The 3.10 interpreter with pymesos (skip, or fail in CI, when there is none)."""
    python = os.environ.get("FAIRSHARE_MESOS_PYTHON") or str(
        ROOT / ".venv-mesos" / "bin" / "python"
    )
    why = ""
    if not Path(python).exists():
        why = f"no Python venv with pymesos at {python} (.ci/run makes .venv-mesos)"
    else:
        probe = "import importlib.metadata as m, pymesos; print(m.version('pymesos'))"
        found = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
        if found.stdout.strip() != PYMESOS_VERSION:
            why = f"{python} has no pymesos {PYMESOS_VERSION}: {found.stdout}{found.stderr}"
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return python


@pytest.fixture(scope="module")
def python() -> str:
    return mesos_python()


class MesosFramework:
    """A pymesos framework process; ``events()`` are the JSON lines it printed."""

    def __init__(self, python: str, log_path: Path, master_http: str, *argv: str) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [python, str(FRAMEWORK), master_http, *argv],
            cwd=ROOT,
            env=daemon_env(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        STARTED.append(self)

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """The complete event lines so far (a line still being written is left for later)."""
        found = []
        text = self.log()
        for line in text[: text.rfind("\n") + 1].splitlines():
            if line.startswith('{"event"'):
                event = json.loads(line)
                if kind is None or event["event"] == kind:
                    found.append(event)
        return found

    def wait(self, kind: str, timeout: float = SETTLE, **match: Any) -> dict[str, Any]:
        def seen() -> dict[str, Any] | None:
            for event in self.events(kind):
                if all(event.get(k) == v for k, v in match.items()):
                    return event
            if self.proc.poll() is not None:
                raise AssertionError(f"the framework exited before {kind} {match}:\n{self.log()}")
            return None

        found: dict[str, Any] = wait_for(seen, timeout, f"{kind} {match} in {self.log_path}")
        return found

    def exit_code(self, timeout: float = SETTLE) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the framework did not exit:\n{self.log()}") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        if not self._log.closed:
            self._log.close()


@pytest.fixture
def pymesos(python: str, tmp_path: Path) -> Callable[..., MesosFramework]:
    """``pymesos(master_http, scenario, *options)``: a framework process."""
    count = 0

    def start(master_http: str, *argv: str) -> MesosFramework:
        nonlocal count
        count += 1
        return MesosFramework(python, tmp_path / f"pymesos{count}.log", master_http, *argv)

    return start


@pytest.fixture
def reaped(tmp_path: Path) -> Iterator[None]:
    """Nothing the command tasks started may be left at the end (agents killed first)."""
    yield
    for daemon in [d for d in STARTED if isinstance(d, Daemon)]:
        daemon.kill()
    leaks = reap(tmp_path)
    assert leaks == [], f"command tasks left these behind: {leaks}"


def updates(framework: MesosFramework, task_id: str) -> list[str]:
    return [e["state"] for e in framework.events("update") if e["task_id"] == task_id]


def test_command_tasks_their_output_and_acknowledgements(
    reaped: None,
    master: Daemon,
    agent_factory: Callable[..., list[Daemon]],
    pymesos: Callable[..., MesosFramework],
) -> None:
    (agent,) = agent_factory(master, 1, "cpus:2;mem:1024")
    http = master.metrics_address
    implicit = pymesos(http, "run", "--tasks", "3", "--name", "imp")
    assert implicit.exit_code() == 0, implicit.log()
    registered = implicit.events("registered")[0]
    assert registered["master"]["version"] == "1.11.0"
    framework_id = registered["framework_id"]
    for n in (1, 2, 3):
        assert updates(implicit, f"imp-{n}")[-1] == "TASK_FINISHED", implicit.log()
        stdout = agent.work_dir / "sandboxes" / framework_id / f"imp-{n}" / "stdout"
        assert stdout.read_text() == f"hello from imp-{n}\n"
    explicit = pymesos(http, "run", "--tasks", "2", "--name", "exp", "--explicit-acks",
                       "--ack-delay", "1.5")  # fmt: skip
    assert explicit.exit_code() == 0, explicit.log()
    for n in (1, 2):
        events = [e for e in explicit.events() if e.get("task_id") == f"exp-{n}"]
        running = next(e for e in events if e.get("state") == "TASK_RUNNING")
        running_ack = next(
            e for e in events if e["event"] == "ack" and e["uuid"] == running["uuid"]
        )
        finished = next(e for e in events if e.get("state") == "TASK_FINISHED")
        assert finished["t"] > running_ack["t"], explicit.log()  # the agent waited for the ack
        assert all(e["uuid"] for e in events if e["event"] == "update")
    assert fairshare_status(master.address)["frameworks"] == []  # both tore down


def test_decline_with_a_filter_and_suppress_then_revive(
    master: Daemon,
    agent_factory: Callable[..., list[Daemon]],
    pymesos: Callable[..., MesosFramework],
) -> None:
    agent_factory(master, 1, "cpus:2;mem:1024")
    http = master.metrics_address
    decline = pymesos(http, "decline", "--refuse", "2", "--rounds", "3")
    assert decline.exit_code() == 0, decline.log()
    times = [e["t"] for e in decline.events("offer")]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(gaps) == 2 and all(2.0 <= gap < 4.0 for gap in gaps), (gaps, decline.log())
    suppress = pymesos(http, "suppress", "--wait", "3")
    assert suppress.exit_code() == 0, suppress.log()
    suppressed, reviving = suppress.wait("suppressed")["t"], suppress.wait("reviving")["t"]
    offers = [e["t"] for e in suppress.events("offer")]
    assert not [t for t in offers if suppressed < t < reviving], suppress.log()
    after = [t for t in offers if t > reviving]
    assert after and after[0] - reviving < 2.0, suppress.log()  # the hour's filter is gone


def test_reconciliation_and_kill(
    reaped: None,
    master: Daemon,
    agent_factory: Callable[..., list[Daemon]],
    pymesos: Callable[..., MesosFramework],
) -> None:
    agent_factory(master, 1, "cpus:2;mem:1024")
    framework = pymesos(master.metrics_address, "reconcile", "--command", "sleep 600")
    assert framework.exit_code() == 0, framework.log()
    reconciled = [e for e in framework.events("update") if e["reason"] == "REASON_RECONCILIATION"]
    explicit, implicit, ghost = reconciled[:3]
    assert (explicit["task_id"], explicit["state"]) == ("pymesos-1", "TASK_RUNNING")
    assert (implicit["task_id"], implicit["state"]) == ("pymesos-1", "TASK_RUNNING")
    assert (ghost["task_id"], ghost["state"]) == ("ghost", "TASK_LOST")
    assert all(not e["uuid"] and e["source"] == "SOURCE_MASTER" for e in reconciled)
    assert updates(framework, "pymesos-1")[-1] == "TASK_KILLED"


def test_a_framework_back_within_its_failover_timeout_keeps_its_task(
    reaped: None,
    master: Daemon,
    agent_factory: Callable[..., list[Daemon]],
    pymesos: Callable[..., MesosFramework],
) -> None:
    agent_factory(master, 1, "cpus:2;mem:1024")
    http = master.metrics_address
    first = pymesos(http, "failover", "--command", "sleep 600", "--failover-timeout", "60")
    crash = first.wait("crash")
    assert first.exit_code() == 3
    framework_id, task_id = crash["framework_id"], crash["task_id"]

    def away() -> bool:
        (framework,) = fairshare_status(master.address)["frameworks"]
        return bool(framework["id"] == framework_id and framework["state"] == "DISCONNECTED")

    wait_for(away, 10, "the master to see the framework gone")
    again = pymesos(http, "failover", "--framework-id", framework_id, "--failover-timeout", "60")
    assert again.exit_code() == 0, again.log()
    assert again.events("reregistered")[0]["framework_id"] == framework_id
    assert "TASK_RUNNING" in updates(again, task_id)
    assert updates(again, task_id)[-1] == "TASK_KILLED"
    assert not again.events("launch")  # the task it got back is the one it launched before


def test_two_pymesos_and_one_sdk_framework_share_in_drf_order(
    reaped: None,
    master: Daemon,
    agent_factory: Callable[..., list[Daemon]],
    pymesos: Callable[..., MesosFramework],
    clients: Callable[..., Client],
) -> None:
    http = master.metrics_address
    common = ("run", "--tasks", "0", "--per-offer", "1", "--refuse", "0", "--command",
              "sleep 600", "--failover-timeout", "0")  # fmt: skip
    cpu_heavy = pymesos(http, *common, "--name", "cpu", "--cpus", "1", "--mem", "256")
    mem_heavy = pymesos(http, *common, "--name", "mem", "--cpus", "0.25", "--mem", "1024")
    sdk = clients("-m", "fairshare.cli", "run", "--master", master.address, "--name", "sdk",
                  "--task", "cpus:1;mem:1024", "--count", "12")  # fmt: skip

    def running() -> dict[str, int]:
        frameworks = fairshare_status(master.address)["frameworks"]
        return {f["name"]: f["tasks"].get("RUNNING", 0) for f in frameworks}

    def settled() -> dict[str, int] | None:
        now = running()
        return now if sum(now.values()) == 15 else None

    # all three are there before any resources (offers are not preempted: the first ones would
    # keep a full cluster), then one agent that holds exactly five tasks of each
    wait_for(lambda: len(running()) == 3, 30, "the three frameworks subscribed")
    agent_factory(master, 1, "cpus:12;mem:12288")

    counts = wait_for(settled, 60, "15 tasks running")
    time.sleep(1.0)  # nothing moves once the agent is full
    assert running() == counts == {"cpu": 5, "mem": 5, "sdk": 5}, (
        cpu_heavy.log(),
        mem_heavy.log(),
        sdk.log(),
    )
    for framework in (cpu_heavy, mem_heavy):
        framework.kill()  # failover timeout 0: removed at once, its tasks killed
    wait_for(lambda: set(running()) == {"sdk"}, 30, "the pymesos frameworks removed")


class TlsClientProxy:
    """Plaintext on 127.0.0.1:<port> to TLS at ``target``, trusting ``ca`` (what stunnel or a
    sidecar does for a client that speaks plaintext only)."""

    def __init__(self, target: str, ca: Path) -> None:
        host, _, port = target.rpartition(":")
        self._target = (host, int(port))
        self._context = ssl.create_default_context(cafile=str(ca))
        self._context.check_hostname = False
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        server = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        self.address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        STARTED.append(self)

    async def _start(self) -> asyncio.Server:
        return await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._target, ssl=self._context)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except OSError:
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def kill(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)


def test_http_basic_auth_with_principal_and_secret(
    tmp_path: Path, pymesos: Callable[..., MesosFramework]
) -> None:
    pki = Pki(tmp_path / "pki")
    secrets = {"mesos-fw": new_secret(), "agent": new_secret()}
    credentials = tmp_path / "credentials.toml"
    credentials.write_text("".join(entry_toml(p, hash_secret(s)) for p, s in secrets.items()))
    tls = pki.flags("master")[2:]  # TLS without client certificates: the tokens name principals
    argv = ["--port", "0", "--metrics-port", "0", "--work-dir", str(tmp_path / "m"),
            *DEFAULT_MASTER_FLAGS, *tls, "--credentials", str(credentials)]  # fmt: skip
    master = Daemon("master", argv, tmp_path / "m", "master.addr")
    master.wait_ready()
    token = tmp_path / "agent.token"
    token.write_text(f"agent:{secrets['agent']}")
    agent_flags = ("--tls-ca", str(pki.ca.cert), "--token-file", str(token))
    start_agent(master.address, tmp_path / "a", *agent_flags, resources="cpus:1;mem:512")
    proxy = TlsClientProxy(master.metrics_address, pki.ca.cert)
    good = pymesos(proxy.address, "subscribe", "--principal", "mesos-fw",
                   "--secret", secrets["mesos-fw"])  # fmt: skip
    assert good.exit_code() == 0, good.log()
    assert good.events("registered")
    for wrong in (("--principal", "mesos-fw", "--secret", "nope"), ()):
        refused = pymesos(proxy.address, "subscribe", *wrong)
        assert refused.exit_code() != 0, refused.log()
        assert "Failed with HTTP 401" in refused.log() and not refused.events("registered")
    master.stop()
    assert "Traceback" not in master.log()


def test_a_follower_redirects_pymesos_to_the_leader(
    tmp_path: Path, etcd_url: str, pymesos: Callable[..., MesosFramework]
) -> None:
    masters = HAMasters(tmp_path, etcd_url, count=2)
    leader = masters.leader()
    (follower,) = [m for m in masters.masters if m is not leader]
    framework = pymesos(follower.metrics_address, "subscribe")
    assert framework.exit_code() == 0, framework.log()
    registered = framework.events("registered")[0]["master"]
    assert f"127.0.0.1:{registered['port']}" == leader.metrics_address
    assert "redirect to new master" in framework.log()
