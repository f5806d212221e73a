"""``CommandExecutor`` with real processes (no master): lifecycle, kills, isolation, sandbox
refusals and reattaching after an agent restart.

The cgroup tests run wherever CI runs (root, with writable memory and cpu controllers); without
cgroups they fail as root (CI must run them) and are skipped only for a non-root developer.
Every test cleans up every process and cgroup it made, even when it fails, and fails if the
executor left one behind.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from command_harness import FW, Harness, cgroup_isolation, task
from fairshare.task_states import TaskReason, TaskState
from fairshare.v1 import common_pb2

from agent.tasks.executors.supervisor import EXIT_FILE, SUPERVISOR_FILE, read_json
from agent.tasks.isolation import cgroup_discovery, cgroups
from agent.tasks.isolation.modes import Isolation

TS = common_pb2.TaskStatus
STARTING, RUNNING, FINISHED, FAILED, KILLED, ERROR = (
    TaskState.STARTING,
    TaskState.RUNNING,
    TaskState.FINISHED,
    TaskState.FAILED,
    TaskState.KILLED,
    TaskState.ERROR,
)
GRACE = 1.0
Body = Callable[[Harness], Awaitable[None]]


@pytest.fixture
def work_dir() -> Iterator[Path]:
    """A work dir other users can traverse (tasks may run as ``nobody``)."""
    path = Path(tempfile.mkdtemp(prefix="fairshare-exec-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def with_cgroups(work_dir: Path) -> Isolation:
    if cgroup_discovery.detect() is None:
        if os.geteuid() == 0:
            pytest.fail("no writable cgroup memory and cpu controllers: CI must run this test")
        pytest.skip("cgroups need root")
    return cgroup_isolation(work_dir)


# The test's own Python may sit where the default task user (nobody) cannot read it (a pyenv
# under a 0700 /root): the tests whose tasks run it let them run as root, the agent's switch.
AS_ROOT: Final = {"task_user": "root", "allow_root_tasks": True}


def run(
    work_dir: Path, isolation: Isolation, body: Body, grace: float = GRACE, **users: Any
) -> None:
    async def main() -> None:
        harness = Harness(work_dir, isolation, grace, **users)
        try:
            await body(harness)
        finally:
            leaks = await harness.cleanup()
        assert leaks == [], f"the executor left these behind: {leaks}"

    asyncio.run(main())


def test_a_command_writes_stdout_and_finishes(work_dir: Path, with_cgroups: Isolation) -> None:
    async def body(h: Harness) -> None:
        key = h.launch("hello", task(shell='echo "hello $FAIRSHARE_TASK_ID"; echo note >&2'))
        assert h.events == []  # reports come later, never from inside launch()
        end = await h.ended(key)
        assert h.states(key) == [STARTING, RUNNING, FINISHED]
        assert (end.exit_code, end.message) == (0, "exited 0")
        assert end.usage is not None and end.usage.memory_peak_bytes > 0
        assert h.stdout(key) == "hello hello\n" and h.stdout(key, "stderr") == "note\n"
        assert h.executor.running() == []

    run(work_dir, with_cgroups, body)


def test_exit_3_fails_with_the_code_and_the_end_of_stderr(
    work_dir: Path, with_cgroups: Isolation
) -> None:
    async def body(h: Harness) -> None:
        script = "for i in 1 2 3 4 5 6 7; do echo line$i >&2; done; exit 3"
        key = h.launch("three", task(shell=script))
        end = await h.ended(key)
        assert h.states(key) == [STARTING, RUNNING, FAILED]
        assert (end.reason, end.exit_code) == (TaskReason.COMMAND_FAILED, 3)
        assert end.message == "exited 3; stderr:\nline3\nline4\nline5\nline6\nline7"

    run(work_dir, with_cgroups, body)


@pytest.mark.parametrize("ignores_sigterm", [False, True], ids=["sigterm", "sigkill"])
def test_a_killed_sleep_is_killed_within_grace_plus_1s(
    work_dir: Path, with_cgroups: Isolation, ignores_sigterm: bool
) -> None:
    async def body(h: Harness) -> None:
        shell = ('trap "" TERM; ' if ignores_sigterm else "") + "echo ready; sleep 1000"
        key = h.launch("sleeper", task(shell=shell))
        await h.wait(lambda: RUNNING in h.states(key), "RUNNING")
        deadline = time.monotonic() + 10  # RUNNING: the shell runs; "ready": its trap is set
        while h.stdout(key) != "ready\n":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        killed_at = time.monotonic()
        assert h.executor.kill(key, TaskReason.FRAMEWORK_REMOVED)
        assert h.executor.running() == [key]  # until its processes are gone
        end = await h.ended(key)
        took = time.monotonic() - killed_at
        assert took < GRACE + 1.0, f"KILLED {took:.3f}s after the kill: {h.events}"
        if ignores_sigterm:
            assert took >= GRACE * 0.9, h.events
            assert end.message == "killed (SIGKILL after the grace period)", h.events
        else:
            assert end.message == "killed (SIGTERM)", h.events
        assert (end.state, end.reason, end.exit_code) == (
            KILLED,
            TaskReason.FRAMEWORK_REMOVED,
            None,
        )
        assert h.states(key) == [STARTING, RUNNING, KILLED], h.events

    run(work_dir, with_cgroups, body)


def test_a_kill_with_its_own_grace_period_replaces_the_tasks(
    work_dir: Path, with_cgroups: Isolation
) -> None:
    """A preemption (``KillTaskCommand.grace_period``): SIGKILL after the kill's grace (0.2 s),
    not the task's (``GRACE``, 1 s), and KILLED with the kill's reason."""

    async def body(h: Harness) -> None:
        key = h.launch("sleeper", task(shell='trap "" TERM; echo ready; sleep 1000'))
        await h.wait(lambda: RUNNING in h.states(key), "RUNNING")
        deadline = time.monotonic() + 10  # "ready": its trap is set
        while h.stdout(key) != "ready\n":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        killed_at = time.monotonic()
        assert h.executor.kill(key, TaskReason.PREEMPTED, grace=0.2)
        end = await h.ended(key)
        took = time.monotonic() - killed_at
        assert took < GRACE * 0.9, f"KILLED {took:.3f}s after the kill: {h.events}"
        assert end.message == "killed (SIGKILL after the grace period)", h.events
        assert (end.state, end.reason) == (KILLED, TaskReason.PREEMPTED)

    run(work_dir, with_cgroups, body)


def test_a_kill_before_the_start_starts_nothing(work_dir: Path, with_cgroups: Isolation) -> None:
    async def body(h: Harness) -> None:
        key = h.launch("never", task(argv=["sleep", "1000"]))
        assert h.executor.kill(key)
        end = await h.ended(key)
        assert h.states(key) == [KILLED] and end.reason == TaskReason.TASK_KILLED_DURING_LAUNCH
        assert not (h.executor.sandboxes.run_dir(key) / SUPERVISOR_FILE).exists()

    run(work_dir, with_cgroups, body)


def test_a_command_that_cannot_start_fails_at_once_saying_why(
    work_dir: Path, with_cgroups: Isolation
) -> None:
    async def body(h: Harness) -> None:
        script = h.work_dir / "not-executable.sh"
        script.write_text("#!/bin/sh\necho never\n")
        script.chmod(0o644)
        missing = h.launch("missing", task(argv=["no-such-program-here", "x"]))
        denied = h.launch("denied", task(argv=[str(script)]))
        for key, why in ((missing, "command not found: no-such-program-here"),
                         (denied, f"permission denied: cannot execute {script}")):  # fmt: skip
            end = await h.ended(key)
            assert h.states(key) == [STARTING, FAILED]
            assert (end.reason, end.message, end.exit_code) == (TaskReason.LAUNCH_FAILED, why, None)

    run(work_dir, with_cgroups, body)


def test_a_memory_hog_fails_with_memory_limit_and_the_agent_goes_on(
    work_dir: Path, with_cgroups: Isolation
) -> None:
    async def body(h: Harness) -> None:
        hog = [sys.executable, "-c", "b = bytearray(512 << 20)"]
        key = h.launch("hog", task("cpus:1;mem:64", argv=hog))
        end = await h.ended(key)
        assert (end.state, end.reason) == (FAILED, TaskReason.MEMORY_LIMIT)
        assert "64 MiB" in end.message
        assert end.usage is not None and end.usage.memory_peak_bytes <= 64 << 20
        after = h.launch("after", task(shell="echo still here"))  # the agent is unaffected
        assert (await h.ended(after)).state == FINISHED and h.stdout(after) == "still here\n"

    run(work_dir, with_cgroups, body, **AS_ROOT)


def test_a_cpu_hog_is_held_near_its_share(work_dir: Path, with_cgroups: Isolation) -> None:
    async def body(h: Harness) -> None:
        spin = f"{sys.executable} -c 'while 1: pass'"
        key = h.launch("spin", task("cpus:0.1;mem:64", shell=f"{spin} & {spin}; wait"))
        await h.wait(lambda: RUNNING in h.states(key), "RUNNING")
        assert with_cgroups.hierarchies is not None
        name = cgroup_discovery.task_cgroup(
            with_cgroups.hierarchies, with_cgroups.scope, cgroup_discovery.task_name(*key)
        )
        assert name.cpuacct is not None
        acct = Path(name.cpuacct) / "cpuacct.usage"

        def sample() -> tuple[float, float]:
            return time.monotonic(), int(acct.read_text()) / 1e9

        await asyncio.sleep(0.3)  # past the interpreter's start
        wall0, cpu0 = sample()
        await asyncio.sleep(2.0)
        wall1, cpu1 = sample()
        share = (cpu1 - cpu0) / (wall1 - wall0)
        throttled = int(
            cgroups._field((Path(name.cpu) / "cpu.stat").read_text(), "nr_throttled") or 0
        )
        # Two spinning processes would take two CPUs; the quota holds them to 0.1 together.
        assert share <= 0.1 * 1.25, f"used {share:.3f} CPUs with a quota of 0.1"
        assert throttled > 0, f"never throttled (used {share:.3f} CPUs)"
        h.executor.kill(key)
        end = await h.ended(key)
        assert end.usage is not None and end.usage.cpu_seconds <= 0.1 * (wall1 - wall0 + 2.5)

    run(work_dir, with_cgroups, body, **AS_ROOT)


def test_rlimits_limit_the_address_space_without_cgroups(work_dir: Path) -> None:
    async def body(h: Harness) -> None:
        hog = [sys.executable, "-c", "b = bytearray(512 << 20)"]
        key = h.launch("hog", task("cpus:1;mem:128", argv=hog))
        end = await h.ended(key)
        assert (end.state, end.reason, end.exit_code) == (FAILED, TaskReason.COMMAND_FAILED, 1)
        assert "MemoryError" in end.message
        assert end.usage is not None and end.usage.cpu_seconds > 0  # the kernel's accounting

    run(work_dir, Isolation("rlimits"), body, **AS_ROOT)


def test_environment_working_dir_and_user(work_dir: Path, with_cgroups: Isolation) -> None:
    async def body(h: Harness) -> None:
        script = 'pwd; echo "$GREETING $HOME"; id -u; touch made-here'
        command = task(shell=script, env={"GREETING": "hi"}, working_dir="a/b", user="nobody")
        key = h.launch("env", command)
        assert (await h.ended(key)).state == FINISHED
        sandbox = h.executor.sandboxes.sandbox(key)
        nobody = pwd.getpwnam("nobody")
        home = nobody.pw_dir if os.path.isdir(nobody.pw_dir) else str(sandbox)  # /nonexistent
        expected = [str(sandbox / "a/b"), f"hi {home}", str(nobody.pw_uid)]
        assert h.stdout(key).splitlines() == expected
        assert (sandbox / "a/b/made-here").stat().st_uid == nobody.pw_uid

    run(work_dir, with_cgroups, body)


def test_a_task_naming_no_user_runs_as_the_task_user_and_root_needs_the_switch(
    work_dir: Path, with_cgroups: Isolation
) -> None:
    nobody = pwd.getpwnam("nobody")

    async def body(h: Harness) -> None:
        plain = h.launch("plain", task(shell="id -u; id -g"))
        assert (await h.ended(plain)).state == FINISHED
        assert h.stdout(plain).split() == [str(nobody.pw_uid), str(nobody.pw_gid)]
        sandbox = h.executor.sandboxes.sandbox(plain)
        assert sandbox.stat().st_uid == nobody.pw_uid and sandbox.stat().st_mode & 0o777 == 0o700
        assert h.executor.sandboxes.root.stat().st_mode & 0o777 == 0o711  # not listable
        root = h.launch("root", task(shell="id -u > /tmp/should-not-exist", user="root"))
        end = await h.ended(root)
        assert h.states(root) == [ERROR] and end.reason == TaskReason.COMMAND_INVALID
        assert "uid 0 (root)" in end.message and "--allow-root-tasks" in end.message

    run(work_dir, with_cgroups, body)
    if os.geteuid() == 0:

        async def as_root(h: Harness) -> None:
            key = h.launch("root", task(shell="id -u", user="root"))
            assert (await h.ended(key)).state == FINISHED and h.stdout(key) == "0\n"

        run(work_dir, with_cgroups, as_root, **AS_ROOT)


def test_a_task_user_who_cannot_reach_the_sandboxes_is_refused_saying_where(
    with_cgroups: Isolation,
) -> None:
    hidden = Path(tempfile.mkdtemp(prefix="fairshare-private-", dir="/tmp"))  # mode 0700
    work_dir = hidden / "agent"
    work_dir.mkdir(mode=0o755)

    async def body(h: Harness) -> None:
        key = h.launch("t", task(shell="true"))
        end = await h.ended(key)
        assert h.states(key) == [ERROR] and end.reason == TaskReason.COMMAND_INVALID
        assert f"cannot reach this agent's sandboxes: {hidden} has mode 700" in end.message

    try:
        run(work_dir, with_cgroups, body)
    finally:
        shutil.rmtree(hidden, ignore_errors=True)


def test_escapes_from_the_sandbox_and_unknown_users_are_refused_before_starting(
    work_dir: Path, with_cgroups: Isolation
) -> None:
    async def body(h: Harness) -> None:
        first = h.launch(
            "reused", task(shell="ln -s / escape; rm stdout; ln -s /etc/shadow stdout")
        )
        assert (await h.ended(first)).state == FINISHED
        refused = [
            ("reused", task(shell="cat passwd", working_dir="escape/etc"), "symbolic link"),
            ("nobody-here", task(shell="true", user="no-such-user"), "does not exist"),
        ]
        for task_id, command, fragment in refused:
            h.events.clear()
            key = h.launch(task_id, command)
            end = await h.ended(key)
            assert h.states(key) == [ERROR]  # nothing started: not even STARTING
            assert end.reason == TaskReason.COMMAND_INVALID and fragment in end.message
        h.events.clear()  # a planted stdout link is never followed either
        key = h.launch("reused", task(shell="echo again"))
        end = await h.ended(key)
        assert end.state == ERROR and "stdout in the sandbox" in end.message
        assert Path("/etc/shadow").stat().st_size > 0  # not truncated through the link

    run(work_dir, with_cgroups, body)


def test_a_task_survives_an_agent_restart_and_its_real_exit_code_is_reported_once(
    work_dir: Path, with_cgroups: Isolation
) -> None:
    async def body(h: Harness) -> None:
        key = h.launch("long", task(shell="sleep 1; exit 7"))
        await h.wait(lambda: RUNNING in h.states(key), "RUNNING")
        await h.restart()  # the agent goes away: the task runs on
        h.events.clear()
        h.executor.reattach(key, task(shell="sleep 1; exit 7"), RUNNING)
        end = await h.ended(key)
        assert h.states(key) == [FAILED]  # not RUNNING again, the end once
        assert (end.exit_code, end.reason) == (7, TaskReason.COMMAND_FAILED)

    run(work_dir, with_cgroups, body)


def test_a_task_that_ended_while_the_agent_was_down_is_reported_from_its_record(
    work_dir: Path, with_cgroups: Isolation
) -> None:
    async def body(h: Harness) -> None:
        command = task(shell="sleep 0.3; exit 5")
        key = h.launch("quick", command)
        await h.wait(lambda: STARTING in h.states(key), "STARTING")
        await h.restart()
        exit_file = h.executor.sandboxes.run_dir(key) / EXIT_FILE
        deadline = time.monotonic() + 10
        while not exit_file.exists():
            assert time.monotonic() < deadline, "the task never ended"
            await asyncio.sleep(0.02)
        ended_at = read_json(exit_file)["ended_at"]  # type: ignore[index]
        h.events.clear()
        h.executor.reattach(key, command, STARTING)
        end = await h.ended(key)
        assert h.states(key) == [RUNNING, FAILED]  # it did run, then ended with its code
        assert (end.exit_code, end.timestamp) == (5, ended_at)

    run(work_dir, with_cgroups, body)


def test_reattach_without_a_supervisor_record_starts_the_task(
    work_dir: Path, with_cgroups: Isolation
) -> None:
    async def body(h: Harness) -> None:
        key = (FW, "late")
        h.executor.reattach(key, task(shell="echo late"), STARTING)  # the agent died before
        assert (await h.ended(key)).state == FINISHED and h.stdout(key) == "late\n"

    run(work_dir, with_cgroups, body)


def test_a_killed_supervisor_is_reported_and_its_task_ended(
    work_dir: Path, with_cgroups: Isolation
) -> None:
    async def body(h: Harness) -> None:
        command = task(argv=["sleep", "1000"])
        key = h.launch("orphan", command)
        await h.wait(lambda: RUNNING in h.states(key), "RUNNING")
        await h.restart()
        record = read_json(h.executor.sandboxes.run_dir(key) / SUPERVISOR_FILE)
        assert record is not None
        os.kill(record["pid"], signal.SIGKILL)
        os.waitpid(record["pid"], 0)  # it was this test process's child
        h.events.clear()
        h.executor.reattach(key, command, RUNNING)
        end = await h.ended(key)
        assert (end.state, end.reason) == (FAILED, TaskReason.EXECUTOR_TERMINATED)

    run(work_dir, with_cgroups, body)


def test_a_relaunch_while_the_silently_killed_run_still_ends_fails_at_once(
    work_dir: Path, with_cgroups: Isolation
) -> None:
    async def body(h: Harness) -> None:
        key = h.launch("again", task(shell='trap "" TERM; echo ready; sleep 1000'))
        deadline = time.monotonic() + 10
        while RUNNING not in h.states(key) or h.stdout(key) != "ready\n":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        assert h.executor.kill(key, silent=True)  # the master removed the agent
        h.events.clear()
        h.launch("again", task(shell="echo fresh"))
        end = await h.ended(key)
        assert (end.state, end.reason) == (FAILED, TaskReason.LAUNCH_FAILED)
        assert "still ending" in end.message
        assert await h.executor.wait_idle(GRACE + 5)  # the old run ends, unreported
        assert h.states(key) == [FAILED]
        h.events.clear()
        h.launch("again", task(shell="echo fresh"))
        assert (await h.ended(key)).state == FINISHED and h.stdout(key) == "fresh\n"

    run(work_dir, with_cgroups, body)
