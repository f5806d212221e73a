"""The supervisor of one command task, and the files it shares with the agent.

The agent starts one supervisor per command task (``python -I -S``, standard library only:
about 10 MB resident, 4 MB of it its own, and 20-30 ms to start) in a session of its own, so
neither dies with the agent. The supervisor starts the
task's process, waits for it, and writes how it ended; a restarted agent finds the supervisor
again, or its record, in the task's run directory (``<work-dir>/runs/<framework>/<task>/``,
written by the agent and the supervisor only, never by the task):

- ``launch.json`` (agent): program, environment, working directory, stdout/stderr files, user,
  cgroup, rlimit and kill grace period;
- ``supervisor.json`` (agent, before it lets the supervisor start the task): the supervisor's
  pid, start time (``/proc/PID/stat`` field 22, clock ticks since boot) and the boot id, so a
  restarted agent never mistakes another process that reuses the pid for it;
- ``task.json`` (supervisor, once the task's process runs): the same for the task's process;
- ``kill.json`` (agent, before the SIGTERM of a kill that sets its own grace period, e.g. a
  preemption): ``{"grace": seconds}``, used instead of ``launch.json``'s;
- ``exit.json`` (supervisor, last): how the run ended. ``outcome`` is ``not_started`` (the
  agent went away before saying "go"), ``launch_failed`` (``error`` says why: program not
  found, permission denied, ...), or ``exited`` with ``exit_code`` or ``signal``, ``killed``
  (a kill was requested), ``oom`` (the OOM killer killed in its cgroup), ``cpu_seconds``,
  ``memory_peak_bytes`` and ``ended_at`` (wall clock).

Protocol: the supervisor reads ``launch.json``, then waits for the line ``go`` on stdin (the
agent writes it once ``supervisor.json`` is written: a supervisor the agent could not record
never starts anything), forks the task (its own session and process group, in its cgroup,
rlimits, user, working directory, stdout and stderr files, a clean signal state), writes
``task.json`` and ``running PID`` on stdout, waits for it. SIGTERM asks for a kill: SIGTERM to
the task's process group, SIGKILL to the group and the cgroup after the grace period, even if
the agent is gone meanwhile. When the task's process has ended, whatever is left of its group or
cgroup is killed, usage is read (the cgroup's, else the kernel's accounting of the process and
the children it waited for), the cgroup removed, ``exit.json`` written, and the supervisor
exits 0.

Invariants: every record file is written whole or not at all (a temporary file, then rename);
``exit.json`` is written at most once, last, and only after the task's processes are gone. The
module imports only the cheapest standard modules (no pathlib, typing or contextlib): a
supervisor's start time is part of every command task's launch.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time

from agent.tasks.isolation import cgroups

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs the supervisor's start time; annotations are not evaluated
    from typing import Any, Final

__all__ = [
    "EXIT_FILE",
    "KILL_FILE",
    "LAUNCH_FILE",
    "SUPERVISOR_FILE",
    "TASK_FILE",
    "LaunchError",
    "boot_id",
    "main",
    "process_record",
    "read_json",
    "record_alive",
    "start_ticks",
    "write_json",
]

LAUNCH_FILE: Final = "launch.json"
SUPERVISOR_FILE: Final = "supervisor.json"
TASK_FILE: Final = "task.json"
EXIT_FILE: Final = "exit.json"
KILL_FILE: Final = "kill.json"
_RESET_SIGNALS: Final = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGPIPE,
    signal.SIGALRM,
    signal.SIGQUIT,
)


class LaunchError(Exception):
    """The task's process could not be started; the message says why, for the user."""


class _Ignore:
    """``contextlib.suppress`` without loading contextlib."""

    def __init__(self, *errors: type[BaseException]) -> None:
        self._errors = errors

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        return kind is not None and issubclass(kind, self._errors)


def _text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as file:
        return file.read()


def write_json(path: str | os.PathLike[str], data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` whole or not at all (temporary file, then rename)."""
    target = os.fspath(path)
    with open(target + ".tmp", "w", encoding="utf-8") as file:
        file.write(json.dumps(data))
    os.replace(target + ".tmp", target)


def read_json(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The object in ``path``; None if the file is missing or not a JSON object."""
    try:
        data = json.loads(_text(os.fspath(path)))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def boot_id() -> str:
    """This boot's id (pids and start times mean nothing across a reboot)."""
    try:
        return _text("/proc/sys/kernel/random/boot_id").strip()
    except OSError:
        return ""


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = _text(f"/proc/{pid}/stat")
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # fields 3.. (the name may hold spaces)


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started (``/proc/PID/stat`` field 22), None if it is gone or a zombie."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def process_record(pid: int) -> dict[str, Any]:
    """What identifies process ``pid`` for good: pid, start time and boot id."""
    return {"pid": pid, "start_ticks": start_ticks(pid), "boot_id": boot_id()}


def record_alive(record: dict[str, Any] | None) -> bool:
    """True if the process ``record`` names still runs (same pid, start time and boot)."""
    if not record or record.get("boot_id") != boot_id():
        return False
    pid, ticks = record.get("pid"), record.get("start_ticks")
    return isinstance(pid, int) and ticks is not None and start_ticks(pid) == ticks


class _Supervisor:
    """One run: start the task, forward a kill, wait, record the end."""

    def __init__(self, run_dir: str, spec: dict[str, Any]) -> None:
        self.run_dir = run_dir
        self.spec = spec
        cgroup = spec.get("cgroup")
        self.cgroup = cgroups.TaskCgroup.from_json(cgroup) if cgroup else None
        self.pid: int | None = None
        self.kill_requested = False
        self.hard_killed = False

    def on_term(self, _signum: int, _frame: object) -> None:
        """A kill was asked for: SIGTERM the task now, SIGKILL after the grace period."""
        if self.kill_requested:
            return
        self.kill_requested = True
        if self.pid is not None:
            self.begin_kill()

    def begin_kill(self) -> None:
        assert self.pid is not None
        with _Ignore(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGTERM)
        grace = float(self.spec.get("grace", 3.0))
        override = read_json(os.path.join(self.run_dir, KILL_FILE))
        if override is not None and isinstance(override.get("grace"), int | float):
            grace = float(override["grace"])
        if grace <= 0:
            self.kill_hard(signal.SIGALRM, None)
        else:
            signal.setitimer(signal.ITIMER_REAL, grace)

    def kill_hard(self, _signum: int, _frame: object) -> None:
        """The grace period is over: SIGKILL the task's group and everything in its cgroup."""
        self.hard_killed = True
        if self.pid is not None:
            with _Ignore(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        if self.cgroup is not None:
            with _Ignore(OSError):
                cgroups.kill_all(self.cgroup, timeout=0.5)

    def spawn(self) -> int:
        """Fork the task's process; its pid once it has exec'd (``LaunchError`` otherwise)."""
        spec = self.spec
        if spec.get("uid") is not None:
            # os.execvpe imports warnings (PATH lookup): import it now, while the supervisor's
            # own Python is still readable; the task's user may not read it (~/.pyenv, a 0700
            # venv), and after setuid the child must import nothing.
            import warnings  # noqa: F401
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        # The child must not run this process's handlers: block them across the fork.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGALRM})
        pid = os.fork()
        if pid == 0:  # the task's process, until exec
            os.close(read_end)
            stage = "start"
            try:
                stage = self._prepare_child(spec)
                stage = "exec"
                program = list(spec["program"])
                os.execvpe(program[0], program, dict(spec["env"]))
            except BaseException as error:
                os.write(write_end, _explain(stage, error, spec).encode("utf-8", "replace"))
            finally:
                os._exit(127)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGALRM})
        os.close(write_end)
        chunks = []
        while chunk := os.read(read_end, 4096):
            chunks.append(chunk)
        os.close(read_end)
        if chunks:
            os.waitpid(pid, 0)
            raise LaunchError(b"".join(chunks).decode("utf-8", "replace"))
        return pid

    def _prepare_child(self, spec: dict[str, Any]) -> str:
        """In the forked child: session, signals, cgroup, rlimits, files, user; the stage
        reached (for the error message)."""
        os.setsid()
        for signum in _RESET_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        if self.cgroup is not None:
            cgroups.join(self.cgroup, os.getpid())
        if spec.get("rlimit_as"):
            limit = int(spec["rlimit_as"])
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        null = os.open(os.devnull, os.O_RDONLY)
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        out = os.open(spec["stdout"], flags)
        err = os.open(spec["stderr"], flags)
        for fd, target in ((null, 0), (out, 1), (err, 2)):
            os.dup2(fd, target)
            os.close(fd)
        if spec.get("uid") is not None:
            os.setgroups([int(g) for g in spec.get("groups", [])])
            os.setgid(int(spec["gid"]))
            os.setuid(int(spec["uid"]))
        stage = "chdir"
        os.chdir(spec["cwd"])
        return stage

    def usage(self, rusage: resource.struct_rusage) -> tuple[float, int]:
        cpu = rusage.ru_utime + rusage.ru_stime
        peak = rusage.ru_maxrss * 1024  # KiB on Linux
        if self.cgroup is not None:
            cgroup_cpu, cgroup_peak = cgroups.usage(self.cgroup)
            cpu = cpu if cgroup_cpu is None else cgroup_cpu
            peak = peak if cgroup_peak is None else cgroup_peak
        return cpu, peak

    def finish(self, status: int, rusage: resource.struct_rusage) -> dict[str, Any]:
        """After the task's process ended: end the rest, measure, clean up, the exit record."""
        signal.setitimer(signal.ITIMER_REAL, 0)
        assert self.pid is not None
        with _Ignore(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)  # what the task left running in its group
        oom = False
        if self.cgroup is not None:
            with _Ignore(OSError):
                cgroups.kill_all(self.cgroup)
            oom = cgroups.oom_killed(self.cgroup)
        cpu, peak = self.usage(rusage)
        if self.cgroup is not None:
            with _Ignore(OSError):
                cgroups.remove(self.cgroup)
        record: dict[str, Any] = {
            "outcome": "exited",
            "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "killed": self.kill_requested,
            "hard_killed": self.hard_killed,
            "oom": oom,
            "cpu_seconds": cpu,
            "memory_peak_bytes": peak,
            "ended_at": time.time(),
        }
        return record


def _explain(stage: str, error: BaseException, spec: dict[str, Any]) -> str:
    if stage == "exec" and isinstance(error, FileNotFoundError):
        return f"command not found: {spec['program'][0]}"
    if stage == "exec" and isinstance(error, PermissionError):
        return f"permission denied: cannot execute {spec['program'][0]}"
    if stage == "chdir" and isinstance(error, OSError):
        return f"cannot enter the working directory {spec['cwd']}: {error.strerror}"
    if isinstance(error, OSError):
        return f"cannot start the task ({stage}): {error.strerror or error}"
    return f"cannot start the task ({stage}): {error!r}"


def _tell(line: str) -> None:
    """One line to the agent on stdout (it may be gone: then nobody listens)."""
    with _Ignore(OSError, ValueError):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main(argv: list[str]) -> int:
    """Supervise the task of run directory ``argv[0]``; always exits 0 once it has a record."""
    run_dir = argv[0]
    spec = read_json(os.path.join(run_dir, LAUNCH_FILE))
    if spec is None:
        print(f"supervisor: no readable {os.path.join(run_dir, LAUNCH_FILE)}", file=sys.stderr)
        return 1
    supervisor = _Supervisor(run_dir, spec)
    signal.signal(signal.SIGTERM, supervisor.on_term)
    signal.signal(signal.SIGALRM, supervisor.kill_hard)
    for ignored in (signal.SIGINT, signal.SIGHUP):
        signal.signal(ignored, signal.SIG_IGN)
    if sys.stdin.readline() != "go\n":  # the agent could not record us: start nothing
        write_json(
            os.path.join(run_dir, EXIT_FILE), {"outcome": "not_started", "ended_at": time.time()}
        )
        return 0
    try:
        supervisor.pid = supervisor.spawn()
    except LaunchError as error:
        if supervisor.cgroup is not None:
            with _Ignore(OSError):
                cgroups.remove(supervisor.cgroup)
        record = {"outcome": "launch_failed", "error": str(error), "ended_at": time.time()}
        write_json(os.path.join(run_dir, EXIT_FILE), record)
        _tell("failed")
        return 0
    write_json(os.path.join(run_dir, TASK_FILE), process_record(supervisor.pid))
    _tell(f"running {supervisor.pid}")
    if supervisor.kill_requested:  # the kill came while the task was starting
        supervisor.begin_kill()
    _, status, rusage = os.wait4(supervisor.pid, 0)
    write_json(os.path.join(run_dir, EXIT_FILE), supervisor.finish(status, rusage))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
