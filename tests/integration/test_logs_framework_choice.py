"""``fairshare logs`` when a task id is shared by frameworks (issue 24, item 8), on a real
master, agent and SDK frameworks:

- without ``--framework`` it exits 2 listing the candidate frameworks by id and name and the
  flag that chooses, both while the master tracks the tasks and after it forgot them (the
  agent's refusal, rewritten with the frameworks' names);
- ``--framework`` takes a name as well as an id; a name two frameworks share, or a name no
  framework has, exits 2 saying so.

Every wait polls with a deadline; the tasks are killed and reaped at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from command_reaper import reap
from daemons import ROOT, Daemon, daemon_env

from framework_sdk import (
    Command,
    Framework,
    FrameworkInfo,
    OffersReceived,
    ResourceVector,
    StatusUpdate,
    TaskSpec,
    TaskState,
)

SETTLE = 60.0
SHAPE = ResourceVector.parse("cpus:0.2;mem:32")


@pytest.fixture
def reaped(tmp_path: Path) -> Iterator[None]:
    yield
    leaks = reap(tmp_path)
    assert leaks == [], f"command tasks left these behind: {leaks}"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *args],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


class Runner:
    """One framework that launches ``job`` (prints its framework's name, then sleeps)."""

    def __init__(self, framework: Framework, name: str) -> None:
        self.framework, self.name = framework, name
        self.states: list[TaskState] = []
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        launched = False
        async for event in self.framework.events():
            if isinstance(event, OffersReceived) and not launched:
                launched = True
                spec = TaskSpec("job", SHAPE, command=Command(shell=f"echo {self.name}; sleep 600"))
                await self.framework.launch(event.offers[0], [spec])
                await self.framework.suppress()
            elif isinstance(event, StatusUpdate) and event.task_id == "job":
                self.states.append(event.state)

    async def wait_for(self, condition: Callable[[], bool], what: str) -> None:
        async with asyncio.timeout(SETTLE):
            while not condition():
                await asyncio.sleep(0.1)
        assert condition(), what

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


@contextlib.asynccontextmanager
async def runner(master: Daemon, name: str) -> AsyncIterator[Runner]:
    info = FrameworkInfo(name=name, failover_timeout=60.0)
    async with Framework.connect(master.address, info) as connected:
        running = Runner(connected, name)
        try:
            yield running
        finally:
            await running.close()


def test_logs_names_the_candidate_frameworks_and_takes_a_name(
    reaped: None, master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    agent_factory(master, 1, "cpus:2;mem:512")
    at = ("--master", master.address)

    async def scenario() -> None:
        async with runner(master, "alpha") as alpha, runner(master, "beta") as beta:
            for one in (alpha, beta):
                await one.wait_for(lambda o=one: TaskState.RUNNING in o.states, "job RUNNING")
            ids = {one.name: one.framework.framework_id for one in (alpha, beta)}

            shared = await asyncio.to_thread(cli, "logs", *at, "job")
            assert shared.returncode == 2, shared.stderr
            for name, framework_id in ids.items():
                assert f"{framework_id} (name {name!r})" in shared.stderr
            assert "--framework" in shared.stderr

            by_name = await asyncio.to_thread(cli, "logs", *at, "job", "--framework", "alpha")
            assert (by_name.returncode, by_name.stdout) == (0, "alpha\n"), by_name.stderr
            by_id = await asyncio.to_thread(cli, "logs", *at, "job", "--framework", ids["beta"])
            assert (by_id.returncode, by_id.stdout) == (0, "beta\n"), by_id.stderr
            unknown = await asyncio.to_thread(cli, "logs", *at, "job", "--framework", "gamma")
            assert unknown.returncode == 2
            assert "--framework: no framework has the id or name 'gamma'" in unknown.stderr

            async with runner(master, "beta") as twin:  # a second framework named beta
                await twin.wait_for(lambda: TaskState.RUNNING in twin.states, "twin RUNNING")
                ambiguous = await asyncio.to_thread(cli, "logs", *at, "job", "--framework", "beta")
                assert ambiguous.returncode == 2
                assert "2 frameworks are named 'beta'" in ambiguous.stderr
                await twin.framework.kill("job")
                await twin.wait_for(lambda: TaskState.KILLED in twin.states, "twin KILLED")

            for one in (alpha, beta):
                await one.framework.kill("job")
            for one in (alpha, beta):
                await one.wait_for(lambda o=one: TaskState.KILLED in o.states, "job KILLED")

            async def forgotten() -> bool:  # acknowledged: the master no longer tracks them
                listed = await asyncio.to_thread(cli, "tasks", *at)
                rows = [line.split()[:1] for line in listed.stdout.splitlines()]
                return listed.returncode == 0 and ["job"] not in rows

            async with asyncio.timeout(SETTLE):
                while not await forgotten():
                    await asyncio.sleep(0.5)
            untracked = await asyncio.to_thread(cli, "logs", *at, "job")
            assert untracked.returncode == 2, untracked.stderr
            for name, framework_id in ids.items():
                assert f"{framework_id} (name {name!r})" in untracked.stderr
            assert "--framework" in untracked.stderr

    asyncio.run(scenario())
