"""The processes of the live benchmark, as seen from its driver (``bench_live.py``).

- ``Master``: the real ``fairshare master`` (``python -m fairshare.cli master --port 0``, or under
  ``profiled_master.py``), waited for through ``<work-dir>/master.addr``; RSS and CPU from /proc.
- ``Worker``: a load process (``load_agents.py``/``load_frameworks.py``) driven over JSON lines
  (see ``load_common``); a thread reads its stdout.

Every wait has a deadline; every process gets its own session (process group) and is killed
with its group if it does not stop when asked; all processes get an environment without
``FAIRSHARE_*`` variables. Should the driver die without cleaning up, the master gets SIGTERM
(parent-death signal) and the load processes stop at EOF on stdin (or at ``--max-seconds``).
Logs (stderr) go to files under the run's log directory.
"""

from __future__ import annotations

import compileall
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
POLL_STEP = 0.02
FLEET_REGISTRATION = (
    "--registration-rate",
    "100000",
    "--registration-burst",
    "100000",
    "--max-agents-per-principal",
    "1000000",
)
"""Master flags for a benchmark's fleet: it registers at full speed as one anonymous principal,
far above the default limits (100/s, burst 1,000, which would take 90 s for 10,000 agents; at
most 20,000 agents per principal, which would stop a 50,000-agent fleet at 20,000)."""

SOURCE_DIRS = ("proto", "master", "agent", "framework_sdk", "client_commands")

__all__ = ["Master", "Worker", "cpu_seconds", "precompile", "wait_ready"]


def precompile() -> None:
    """Write the bytecode of the project's sources, as ``pip install`` does for an installed
    master: in an editable checkout run with ``PYTHONDONTWRITEBYTECODE=1`` (as these machines
    are) every start of the master would otherwise compile its sources again, which is most of
    its import time and no cost a deployed master pays."""
    for name in SOURCE_DIRS:
        compileall.compile_dir(ROOT / name, quiet=1)


def _load_prctl() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: no parent-death signal
        return None


_PRCTL = _load_prctl()  # looked up before any fork, so the child only makes the call
PR_SET_PDEATHSIG = 1


def _term_with_parent() -> None:
    """In the child before exec: get SIGTERM when the driver dies, even by SIGKILL."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM)


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRSHARE_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def cpu_seconds(*pids: int) -> float:
    """User + system CPU seconds used so far by ``pids`` (processes that are gone count 0)."""
    total = 0.0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = text.rpartition(")")[2].split()
        total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL the process group of ``proc`` (its own session) and reap it."""
    if proc.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    with suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class Master:
    """The master daemon process under test."""

    def __init__(
        self,
        work_dir: Path,
        allocation_interval: str,
        log_level: str,
        profile_prefix: str | None = None,
        port: int = 0,
        extra: tuple[str, ...] = (),
        log_name: str = "master.log",
    ) -> None:
        self.work_dir = work_dir
        self.profile_prefix = profile_prefix
        self.argv = ["master", "--port", str(port), "--metrics-port", "0"]
        self.argv += ["--work-dir", str(work_dir), "--allocation-interval", allocation_interval]
        self.argv += ["--log-level", log_level, *extra]
        self.log_path = work_dir.parent / log_name
        self.address = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self._profiles = 0

    def __enter__(self) -> Master:
        precompile()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if self.profile_prefix:
            command = [str(HERE / "profiled_master.py"), self.profile_prefix, *self.argv]
        else:
            command = ["-m", "fairshare.cli", *self.argv]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, *command],
                cwd=ROOT,
                env=clean_env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                preexec_fn=_term_with_parent,  # started before the driver has any thread
            )
        try:
            self.address = self._wait_address(20.0)
        except BaseException:
            kill_group(self.proc)
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc is not None:
            kill_group(self.proc)

    def _wait_address(self, timeout: float) -> str:
        path = self.work_dir / "master.addr"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"the master exited at start:\n{tail(self.log_path)}")
            if path.exists():
                text = path.read_text().strip()
                if text:
                    return text
            time.sleep(POLL_STEP)
        raise RuntimeError(f"no {path} after {timeout:g}s:\n{tail(self.log_path)}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def worker_pids(self) -> list[int]:
        """The master's child processes now (its I/O workers, with ``--io-workers N``)."""
        pids: list[int] = []
        with suppress(OSError):
            for task in Path(f"/proc/{self.pid}/task").iterdir():
                with suppress(OSError):
                    pids += [int(p) for p in (task / "children").read_text().split()]
        return pids

    def pids(self) -> list[int]:
        """The master's process and its I/O workers' (what its CPU figures add up)."""
        return [self.pid, *self.worker_pids()]

    def rss_kib(self) -> int:
        """``VmRSS`` of the master, in KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS in /proc/PID/status")

    @contextmanager
    def profiled(self, phase: str) -> Iterator[None]:
        """With a profile prefix: profile the master while the block runs (SIGUSR1/SIGUSR2);
        the profile is saved as ``PREFIX.PHASE.pstats``."""
        if not self.profile_prefix or not self.alive():
            yield
            return
        os.kill(self.pid, signal.SIGUSR1)
        try:
            yield
        finally:
            if self.alive():
                os.kill(self.pid, signal.SIGUSR2)
                self._profiles += 1
                written = Path(f"{self.profile_prefix}.{self._profiles}.pstats")
                deadline = time.monotonic() + 30.0
                while not written.exists() and time.monotonic() < deadline and self.alive():
                    time.sleep(POLL_STEP)
                time.sleep(0.5)  # dump_stats writes in one go; let it finish
                if written.exists():
                    written.rename(f"{self.profile_prefix}.{phase}.pstats")

    def kill(self) -> None:
        """SIGKILL (kill -9): no drain, nothing cleaned up."""
        assert self.proc is not None
        kill_group(self.proc)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (the master drains and exits 0); SIGKILL after ``timeout``. Exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                kill_group(self.proc)
        code = self.proc.wait()
        with suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # anything the master left behind
        return code


class Worker:
    """A load process driven over JSON lines on its stdin/stdout."""

    def __init__(self, name: str, argv: list[str], log_dir: Path, max_seconds: float) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, *argv, "--max-seconds", f"{max_seconds:g}"],
                cwd=ROOT,
                env=clean_env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
                text=True,
                bufsize=1,
            )
        self._cond = threading.Condition()
        self._replies: dict[int, dict[str, Any]] = {}
        self._events: list[dict[str, Any]] = []
        self._eof = False
        self._next_id = 0
        assert self.proc.stdout is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def __enter__(self) -> Worker:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                if "event" in message:
                    self._events.append(message)
                else:
                    self._replies[message.get("id", -1)] = message
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _gone(self) -> RuntimeError:
        return RuntimeError(f"{self.name} exited ({self.proc.poll()}):\n{tail(self.log_path)}")

    def request(self, cmd: str, timeout: float = 30.0, **fields: Any) -> dict[str, Any]:
        """Send one command and wait for its reply (raises on error, exit or timeout)."""
        with self._cond:
            self._next_id += 1
            ident = self._next_id
        line = json.dumps({"cmd": cmd, "id": ident, **fields}) + "\n"
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise self._gone() from None
        deadline = time.monotonic() + timeout
        with self._cond:
            while ident not in self._replies:
                left = deadline - time.monotonic()
                if self._eof:
                    raise self._gone()
                if left <= 0:
                    raise TimeoutError(f"{self.name}: no answer to {cmd!r} in {timeout:g}s")
                self._cond.wait(left)
            reply = self._replies.pop(ident)
        if "error" in reply:
            raise RuntimeError(f"{self.name}: {cmd!r} failed: {reply['error']}")
        return reply

    def event(self, name: str, deadline: float) -> dict[str, Any]:
        """Wait until the process emits event ``name`` (``failed`` or an exit raise)."""
        with self._cond:
            while True:
                for message in self._events:
                    if message["event"] == name:
                        return message
                    if message["event"] == "failed":
                        raise self._gone()
                if self._eof:
                    raise self._gone()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{self.name}: no {name!r} event in time")
                self._cond.wait(left)

    def stop(self, timeout: float = 15.0) -> None:
        """Ask the process to stop, close its stdin; kill its group if it lingers."""
        if self.proc.poll() is None:
            with suppress(RuntimeError, TimeoutError, OSError):
                self.request("stop", timeout=5.0)
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
            except OSError:
                pass
            with suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
        kill_group(self.proc)


def wait_ready(workers: list[Worker], timeout: float) -> list[dict[str, Any]]:
    """Wait for every worker's ``ready`` event (one deadline for all)."""
    deadline = time.monotonic() + timeout
    return [worker.event("ready", deadline) for worker in workers]
