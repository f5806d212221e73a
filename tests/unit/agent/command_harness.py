"""A ``CommandExecutor`` on a real work dir, with real processes, for the agent's unit tests.

``Harness`` records every ``TaskEvent``, waits for them with a deadline (never a bare sleep),
and ``cleanup()`` leaves nothing behind whatever the test did: it kills every supervisor and
task process recorded in the work dir's run directories and every process left in the agent's
cgroups, removes those cgroups, and reports what it had to clean (a leak is a test failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from fairshare.command import Command
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState

from agent.core.records import CommandTask, TaskKey
from agent.tasks.executors.base import TaskEvent
from agent.tasks.executors.command import CommandConfig, CommandExecutor
from agent.tasks.executors.supervisor import SUPERVISOR_FILE, TASK_FILE, read_json, record_alive
from agent.tasks.isolation import cgroup_discovery, cgroups
from agent.tasks.isolation.modes import Isolation

DEADLINE = 15.0
FW = "fw-1"
TERMINAL = {
    TaskState.FINISHED,
    TaskState.FAILED,
    TaskState.KILLED,
    TaskState.ERROR,
    TaskState.LOST,
}


def cgroup_isolation(work_dir: Path) -> Isolation:
    """cgroups isolation on this host (the caller made sure cgroups are there)."""
    found = cgroup_discovery.detect()
    assert found is not None, "no writable cgroup memory and cpu controllers"
    return Isolation("cgroups", found, cgroup_discovery.scope_name(work_dir))


def task(resources: str = "cpus:1;mem:128", **command: object) -> CommandTask:
    return CommandTask(Command(**command), ResourceVector.parse(resources))  # type: ignore[arg-type]


class Harness:
    """One executor plus its recorded events; ``restart()`` simulates an agent restart."""

    def __init__(
        self,
        work_dir: Path,
        isolation: Isolation,
        grace: float = 1.0,
        task_user: str = "nobody",
        allow_root_tasks: bool = False,
    ) -> None:
        self.work_dir = work_dir
        self.isolation = isolation
        self.grace = grace
        self.task_user = task_user
        self.allow_root_tasks = allow_root_tasks
        self.events: list[TaskEvent] = []
        self.changed = asyncio.Event()
        self.executor = self._executor()

    def _executor(self) -> CommandExecutor:
        config = CommandConfig(
            self.work_dir,
            self.isolation,
            kill_grace_period=self.grace,
            task_user=self.task_user,
            allow_root_tasks=self.allow_root_tasks,
        )
        return CommandExecutor(self._record, config)

    def _record(self, event: TaskEvent) -> None:
        self.events.append(event)
        self.changed.set()

    def launch(self, task_id: str, command_task: CommandTask) -> TaskKey:
        key = (FW, task_id)
        self.executor.launch(key, command_task)
        return key

    def states(self, key: TaskKey) -> list[TaskState]:
        return [e.state for e in self.events if e.key == key]

    def last(self, key: TaskKey) -> TaskEvent:
        return [e for e in self.events if e.key == key][-1]

    async def wait(self, condition: Callable[[], object], what: str) -> None:
        async def loop() -> None:
            while not condition():
                self.changed.clear()
                await self.changed.wait()

        try:
            await asyncio.wait_for(loop(), DEADLINE)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}; events: {self.events}") from None

    async def ended(self, key: TaskKey) -> TaskEvent:
        await self.wait(lambda: TERMINAL & set(self.states(key)), f"{key[1]} to end")
        return self.last(key)

    async def restart(self) -> None:
        """The agent goes away (its processes stay) and a new one takes over the work dir."""
        await self.executor.aclose()
        self.executor = self._executor()

    def stdout(self, key: TaskKey, name: str = "stdout") -> str:
        return (self.executor.sandboxes.sandbox(key) / name).read_text()

    async def cleanup(self) -> list[str]:
        """Stop everything; returns what was left that the executor should have ended."""
        self.executor.kill_all(silent=True)
        await self.executor.wait_idle(self.grace + 5)
        await self.executor.aclose()
        leaks = []
        runs = self.work_dir / "runs"
        for record_file in sorted(runs.glob(f"*/*/{SUPERVISOR_FILE}")) + sorted(
            runs.glob(f"*/*/{TASK_FILE}")
        ):
            record = read_json(record_file)
            if record is not None and record_alive(record):
                leaks.append(f"process {record['pid']} of {record_file}")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(int(record["pid"]), signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(record["pid"]), signal.SIGKILL)
        for directory in self.isolation.scope_dirs():
            for child in sorted(p for p in directory.glob("*") if p.is_dir()):
                leaks.append(f"cgroup {child}")
                found = cgroups.TaskCgroup(1, str(child), str(child))
                cgroups.kill_all(found)
                cgroups.remove(found, timeout=5.0)
        self.isolation.close()
        for directory in self.isolation.scope_dirs():
            if directory.exists():
                leaks.append(f"scope {directory}")
        _reap(runs)
        return leaks


def _reap(runs: Path) -> None:
    """Reap the supervisors of a 'dead' agent: they are this test process's children."""
    for record_file in runs.glob(f"*/*/{SUPERVISOR_FILE}"):
        record = read_json(record_file)
        if record is None:
            continue
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(int(record["pid"]), os.WNOHANG)
            except ChildProcessError:
                break
            if pid:
                break
            time.sleep(0.01)
