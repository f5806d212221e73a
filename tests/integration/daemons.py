"""Start real fairshare daemons on 127.0.0.1 with port 0 and wait for them
(docs/architecture.md §11).

- ``start_master(work_dir, *flags)``: a ``fairshare master`` process, waited for (bounded)
  through ``<work-dir>/master.addr`` and the health check;
- ``start_agent(master_address, work_dir, *flags, resources=...)``: a ``fairshare agent``
  process, waited for through ``<work-dir>/agent.addr`` (written once it serves);
- ``restart_agent(previous, master_address, *flags, resources=...)``: a new agent process on
  the work dir of one that exited (after ``kill()``, i.e. kill -9), recovering its checkpoint;
- ``wait_for(condition, timeout, what)``: poll with a deadline.

The fixtures over these live in ``conftest.py`` (``master``, ``master_factory``,
``agent_factory``, ``clients``). Every ``Daemon`` (and every ``Client``, and the fault tests'
framework processes) registers in ``STARTED``; an autouse fixture kills whatever a test started,
restarted daemons included, whether the test passed or not.

Every wait polls a condition with a deadline (``wait_for``), never a bare sleep; every process is
killed in teardown (SIGTERM, then SIGKILL); the daemons get an environment without ``FAIRSHARE_*``
variables so the caller's shell cannot change a test. On a failed start the daemon's stderr is
part of the error.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 20.0
DAEMON_START_TIMEOUT = 60.0
"""A daemon that has not exited serves within this (about 1 s when the machine is idle; a
daemon that exits fails the wait at once, so only a loaded machine ever waits long)."""
POLL_STEP = 0.02
ONE_PROCESS_MASTER = ("FAIRSHARE_MASTER_IO_WORKERS", "0")
"""In every daemon's environment: a master is one process whatever the machine's cores
(``--io-workers auto``); a test that wants workers passes ``--io-workers N`` (a flag wins)."""
DEFAULT_MASTER_FLAGS = ("--allocation-interval", "200ms", "--validate", "--shutdown-grace", "2s")


def wait_for(
    condition: Callable[[], Any], timeout: float = START_TIMEOUT, what: str = "condition"
) -> Any:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(POLL_STEP)


STARTED: list[Any] = []
"""Everything with a ``kill()`` started during the current test (``reap_started`` kills it)."""


def reap_started(since: int) -> None:
    """Kill everything ``STARTED`` from index ``since`` on (a test's teardown)."""
    while len(STARTED) > since:
        STARTED.pop().kill()


def daemon_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a daemon: no FAIRSHARE_* from the caller, unbuffered output, a master
    of one process unless its flags ask for workers (the test session's mark,
    ``PYTEST_FAIRSHARE_SESSION``, is kept: ``tests/conftest.py``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRSHARE_")}
    env["PYTHONUNBUFFERED"] = "1"
    env[ONE_PROCESS_MASTER[0]] = ONE_PROCESS_MASTER[1]
    env.update(extra or {})
    return env


class Daemon:
    """A daemon process started with ``python -m fairshare.cli``; stderr goes to a log file."""

    def __init__(
        self,
        kind: str,
        argv: list[str],
        work_dir: Path,
        addr_file: str,
        env: dict[str, str] | None = None,
        wrap: Sequence[str] = (),
        log_path: Path | None = None,
    ) -> None:
        self.kind = kind
        self.work_dir = work_dir
        self.addr_path = work_dir / addr_file
        self.log_path = log_path or work_dir.parent / f"{work_dir.name}.{kind}.log"
        work_dir.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [*wrap, sys.executable, "-m", "fairshare.cli", kind, *argv],  # wrap: ip netns exec
            cwd=ROOT,
            env=daemon_env(env),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        STARTED.append(self)
        self.address = ""

    def wait_ready(self, timeout: float = DAEMON_START_TIMEOUT) -> str:
        """Wait for the address file; returns ``HOST:PORT``."""

        def ready() -> str:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"{self.kind} exited with {self.proc.returncode} before serving:\n{self.log()}"
                )
            try:
                text = self.addr_path.read_text(encoding="utf-8")
            except FileNotFoundError:
                return ""
            return text.strip() if text.endswith("\n") else ""

        self.address = wait_for(ready, timeout, f"{self.addr_path}")
        return self.address

    @property
    def metrics_address(self) -> str:
        """``HOST:PORT`` of the daemon's /metrics (from ``<work-dir>/metrics.addr``)."""
        return (self.work_dir / "metrics.addr").read_text(encoding="utf-8").strip()

    def log(self) -> str:
        """Everything the daemon wrote so far."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def signal(self, signum: int = signal.SIGTERM) -> None:
        """Send ``signum`` if the process still runs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signum)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, wait (then SIGKILL); returns the exit code."""
        self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)
            raise AssertionError(f"{self.kind} ignored SIGTERM:\n{self.log()}") from None
        finally:
            self._log.close()

    def kill(self) -> None:
        """SIGKILL now (teardown of a process that may already be gone)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        if not self._log.closed:
            self._log.close()


class Client:
    """A framework or other client process (``python *argv``); its output goes to a log file."""

    def __init__(self, argv: list[str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, *argv],
            cwd=ROOT,
            env=daemon_env(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        STARTED.append(self)

    def log(self) -> str:
        """Everything the client wrote so far."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def kill(self) -> None:
        """SIGKILL now, if it still runs."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        if not self._log.closed:
            self._log.close()


def health_status(
    address: str, service: str = "", timeout: float = 5.0, fresh: bool = False
) -> int:
    """``grpc.health.v1.Health/Check`` of ``service``: 1 is SERVING (0 if unreachable).
    ``fresh``: on a connection of its own (gRPC otherwise shares one process-wide connection
    per address between channels, so a check may not open a new connection at all)."""
    from fairshare.health import HealthCheckRequest, HealthCheckResponse

    options = [("grpc.use_local_subchannel_pool", 1)] if fresh else []
    with grpc.insecure_channel(address, options=options) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=HealthCheckRequest.SerializeToString,
            response_deserializer=HealthCheckResponse.FromString,
        )
        try:
            response = check(HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError:
            return 0
    status: int = response.status  # type: ignore[attr-defined]
    return status


def start_master(work_dir: Path, *flags: str, env: dict[str, str] | None = None) -> Daemon:
    """Start ``fairshare master --port 0 --metrics-port 0 --work-dir work_dir *flags`` and wait
    until it serves (``--metrics-port`` in ``flags`` replaces the default)."""
    metrics = () if "--metrics-port" in flags else ("--metrics-port", "0")
    argv = ["--port", "0", *metrics, "--work-dir", str(work_dir), *flags]
    master = Daemon("master", argv, work_dir, "master.addr", env)
    try:
        master.wait_ready()
        wait_for(lambda: health_status(master.address) == 1, what="master health SERVING")
    except BaseException:
        master.kill()
        raise
    return master


_TASK_DIRS: list[Path] = []
"""This session's directory for agent work dirs (created on first use, removed at exit)."""


def _searchable(path: Path) -> bool:
    """True when every directory from ``/`` down to ``path`` may be searched by others."""
    return all(
        d.stat().st_mode & stat.S_IXOTH for d in (*reversed(path.parents), path) if d.exists()
    )


def reachable_work_dir(work_dir: Path) -> Path:
    """A work dir command tasks' users (``nobody``, the agent's default ``--task-user``) can
    reach, for an agent meant to be at ``work_dir``: ``work_dir`` itself when every directory
    above it may be searched by others or it exists already, else a directory of this session
    under ``/tmp`` (mode 0711 on the way), with ``work_dir`` a symbolic link to it. pytest keeps
    its temporary directories 0700 (and sets them so again whenever a session starts), and an
    agent refuses command tasks whose user cannot reach its sandboxes."""
    if work_dir.is_symlink():
        return work_dir.resolve()
    if work_dir.exists() or _searchable(work_dir.parent):
        work_dir.mkdir(parents=True, exist_ok=True)
        return work_dir
    if not _TASK_DIRS:
        base = Path(tempfile.mkdtemp(prefix="fairshare-agents-", dir="/tmp"))
        base.chmod(0o711)
        atexit.register(shutil.rmtree, base, True)
        _TASK_DIRS.append(base)
    prefix = f"{work_dir.parent.name}-{work_dir.name}-"
    real = Path(tempfile.mkdtemp(prefix=prefix, dir=_TASK_DIRS[0]))
    real.chmod(0o755)
    work_dir.parent.mkdir(parents=True, exist_ok=True)
    work_dir.symlink_to(real, target_is_directory=True)
    return real


def start_agent(
    master_address: str,
    work_dir: Path,
    *flags: str,
    resources: str = "cpus:4;mem:8192",
    log_path: Path | None = None,
) -> Daemon:
    """Start ``fairshare agent --master ADDRESS --resources R --port 0 --work-dir work_dir``
    (in ``reachable_work_dir(work_dir)``; its log beside ``work_dir`` unless ``log_path``)."""
    real = reachable_work_dir(work_dir)
    log_path = log_path or work_dir.parent / f"{work_dir.name}.agent.log"
    argv = [
        "--master",
        master_address,
        "--resources",
        resources,
        "--port",
        "0",
        "--metrics-port",
        "0",
        "--work-dir",
        str(real),
        *flags,
    ]
    agent = Daemon("agent", argv, real, "agent.addr", log_path=log_path)
    try:
        agent.wait_ready()
    except BaseException:
        agent.kill()
        raise
    return agent


def restart_agent(
    previous: Daemon, master_address: str, *flags: str, resources: str = "cpus:4;mem:8192"
) -> Daemon:
    """Start a new agent process on the work dir of ``previous``, which must have exited (e.g.
    ``previous.kill()``, a kill -9): it recovers from the checkpoint there. The old log is kept
    as ``<work-dir name>.agent.<n>.log`` (``previous.log_path`` follows it) and the stale
    address files are removed first, so the wait cannot read the dead process's address."""
    if previous.proc.poll() is None:
        raise AssertionError("restart_agent: the previous agent process still runs")
    previous.kill()  # closes its log (a no-op for the process, which has exited)
    n = 1
    original = previous.log_path
    stem = original.name.removesuffix(".agent.log")
    while (kept := original.with_name(f"{stem}.agent.{n}.log")).exists():
        n += 1
    original.rename(kept)
    previous.log_path = kept
    for stale in ("agent.addr", "metrics.addr"):
        (previous.work_dir / stale).unlink(missing_ok=True)
    return start_agent(
        master_address, previous.work_dir, *flags, resources=resources, log_path=original
    )


def fairshare_status(address: str) -> dict[str, Any]:
    """``fairshare status --json`` of the master at ``address`` (what an operator sees)."""
    done = subprocess.run(
        [sys.executable, "-m", "fairshare.cli", "status", "--master", address, "--json"],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document
