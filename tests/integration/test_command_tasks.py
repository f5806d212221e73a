"""Command tasks on a real cluster: a master, agents and frameworks as separate processes
(issue 14's "tests with real processes").

- ``fairshare run --command`` runs a command that writes to stdout and exits 0: FINISHED, and
  ``fairshare logs`` prints its output (also after the master has forgotten the task);
- through the SDK: exit 3 is FAILED with code 3 and the end of stderr; ``sleep 1000`` killed is
  KILLED within its grace period plus 1 s; a memory hog over its limit is FAILED with
  MEMORY_LIMIT and the agent goes on; a program that does not exist is FAILED at once with
  LAUNCH_FAILED; an unknown user is ERROR with COMMAND_INVALID; terminal updates carry usage;
- the agent killed -9 while command tasks run and restarted on its work dir: the tasks were
  not launched again, each is reported once with its real exit code, one of them having ended
  while the agent was down.

A finished task's sandbox is garbage-collected after ``--sandbox-gc-delay``; the agent's
/metrics shows command tasks' usage (totals and a histogram, no series per task).

Bad shapes (empty command, too long argv, working dirs escaping with ``..`` or absolute) are
INVALID_ARGUMENT at Accept: ``test_master_bad_requests.py``. The CPU share and the sandbox's
symbolic links: ``tests/unit/agent/test_command_executor.py``.

Every wait polls with a deadline; every process and cgroup the tasks made is gone at the end
(``command_reaper``), or the test fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from command_reaper import reap
from daemons import (
    DEFAULT_MASTER_FLAGS,
    ROOT,
    STARTED,
    Daemon,
    daemon_env,
    fairshare_status,
    health_status,
    restart_agent,
    wait_for,
)

from framework_sdk import (
    Command,
    Framework,
    FrameworkInfo,
    OffersReceived,
    ResourceVector,
    StatusUpdate,
    TaskReason,
    TaskSpec,
    TaskState,
    stream_logs,
)

SETTLE = 30.0
SHAPE = ResourceVector.parse("cpus:0.2;mem:64")
AGENT_RESOURCES = "cpus:2;mem:1024"


@pytest.fixture
def reaped(tmp_path: Path) -> Iterator[list[Daemon]]:
    """Daemons to kill at the end (restarted agents); then nothing of the tasks may be left.

    Requested before ``agent_factory``, so it is torn down after the agents are killed."""
    extra: list[Daemon] = []
    yield extra
    for daemon in extra:
        daemon.kill()
    leaks = reap(tmp_path)
    assert leaks == [], f"command tasks left these behind: {leaks}"


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *args],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_run_command_and_logs_from_the_command_line(
    reaped: list[Daemon], master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    agent_factory(master, 1, AGENT_RESOURCES)
    script = 'echo "hello from $FAIRSHARE_TASK_ID"; echo second; echo oops >&2'
    run = cli("run", "--master", master.address, "--name", "hi", "--task", "cpus:0.2;mem:64",
              "--command", script)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout == "hi-1 FINISHED: exited 0  (fairshare logs hi-1)\n"
    logs = cli("logs", "--master", master.address, "hi-1")  # the master forgot the task
    assert (logs.returncode, logs.stdout) == (0, "hello from hi-1\nsecond\n"), logs.stderr
    assert cli("logs", "--master", master.address, "hi-1", "--stderr").stdout == "oops\n"
    assert cli("logs", "--master", master.address, "hi-1", "--tail", "1").stdout == "second\n"
    missing = cli("logs", "--master", master.address, "nobody-1")
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr
    failing = cli("run", "--master", master.address, "--name", "bad", "--task",
                  "cpus:0.2;mem:64", "--command", "echo no >&2; exit 3")  # fmt: skip
    assert failing.returncode == 1
    assert failing.stdout == "bad-1 FAILED: exited 3; stderr:\nno  (fairshare logs bad-1)\n"


def test_a_finished_tasks_sandbox_is_collected_after_the_gc_delay(
    reaped: list[Daemon], master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    (agent,) = agent_factory(master, 1, AGENT_RESOURCES, "--sandbox-gc-delay", "1s")
    run = cli("run", "--master", master.address, "--name", "gc", "--task", "cpus:0.2;mem:64",
              "--command", "echo bye")  # fmt: skip
    assert run.returncode == 0, run.stderr
    sandboxes, runs = agent.work_dir / "sandboxes", agent.work_dir / "runs"
    wait_for(lambda: "sandboxes.collected" in agent.log(), 20, "the sandbox to be collected")
    assert not list(sandboxes.glob("*/gc-1")) and not list(runs.glob("*/gc-1"))


class Recorder:
    """A framework's events in the background: updates recorded, offers queued."""

    def __init__(self, framework: Framework) -> None:
        self.framework = framework
        self.updates: list[tuple[float, StatusUpdate]] = []
        self.offers: asyncio.Queue[OffersReceived] = asyncio.Queue()
        self.changed = asyncio.Event()
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        async for event in self.framework.events():
            if isinstance(event, OffersReceived):
                self.offers.put_nowait(event)
            elif isinstance(event, StatusUpdate):
                self.updates.append((time.monotonic(), event))
                self.changed.set()

    def of(self, task_id: str) -> list[StatusUpdate]:
        return [u for _, u in self.updates if u.task_id == task_id]

    def states(self, task_id: str) -> list[TaskState]:
        return [u.state for u in self.of(task_id)]

    def end(self, task_id: str) -> StatusUpdate | None:
        ended = [u for u in self.of(task_id) if u.state.is_terminal]
        return ended[0] if ended else None

    async def wait(self, condition: Callable[[], object], what: str) -> None:
        async def loop() -> None:
            while not condition():
                self.changed.clear()
                await self.changed.wait()

        try:
            await asyncio.wait_for(loop(), SETTLE)
        except TimeoutError:
            seen = [(u.task_id, u.state.value, u.message) for _, u in self.updates]
            pytest.fail(f"timed out waiting for {what}; updates seen: {seen}")

    async def launch(self, tasks: list[TaskSpec]) -> str:
        """Launch ``tasks`` on the first offer, then suppress offers; returns the agent id."""
        event = await asyncio.wait_for(self.offers.get(), SETTLE)
        offer = event.offers[0]
        await self.framework.launch(offer, tasks)
        await self.framework.suppress()
        return offer.agent_id

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


@contextlib.asynccontextmanager
async def framework(master: Daemon, name: str) -> AsyncIterator[Recorder]:
    info = FrameworkInfo(name=name, failover_timeout=120.0)
    async with Framework.connect(master.address, info) as connected:
        recorder = Recorder(connected)
        try:
            yield recorder
        finally:
            await recorder.close()


def command(task_id: str, resources: ResourceVector = SHAPE, **fields: object) -> TaskSpec:
    return TaskSpec(task_id, resources, command=Command(**fields))  # type: ignore[arg-type]


def test_command_task_outcomes_through_the_sdk(
    reaped: list[Daemon], master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    (agent,) = agent_factory(master, 1, AGENT_RESOURCES)
    # tail buffers a line without end: 512 MiB against the task's 64 (a shell, not this test's
    # Python, which the agent's task user, nobody, may not be able to read)
    hog = ["sh", "-c", "head -c 536870912 /dev/zero | tail -n 1"]

    async def scenario() -> None:
        async with framework(master, "outcomes") as fw:
            await fw.launch(
                [
                    command("out", shell="echo out; echo err >&2"),
                    command("three", shell="echo first >&2; echo last >&2; exit 3"),
                    command("sleeper", argv=["sleep", "1000"], kill_grace_period=1.0),
                    command("hog", argv=hog),
                    command("missing", argv=["no-such-program"]),
                    command("stranger", shell="true", user="no-such-user"),
                ]
            )
            await fw.wait(lambda: TaskState.RUNNING in fw.states("sleeper"), "sleeper RUNNING")
            killed_at = time.monotonic()
            await fw.framework.kill("sleeper")
            ends = ("out", "three", "sleeper", "hog", "missing", "stranger")
            await fw.wait(lambda: all(fw.end(t) for t in ends), "every task to end")
            out, three = fw.end("out"), fw.end("three")
            assert out is not None and three is not None
            assert (out.state, out.exit_code) == (TaskState.FINISHED, 0)
            assert out.usage is not None and out.usage.memory_peak_bytes > 0
            assert [b async for b in stream_logs(master.address, "out")] == [b"out\n"]
            assert (three.state, three.reason, three.exit_code) == (
                TaskState.FAILED, TaskReason.COMMAND_FAILED, 3
            )  # fmt: skip
            assert three.message == "exited 3; stderr:\nfirst\nlast"
            sleeper = [(at, u) for at, u in fw.updates if u.task_id == "sleeper"][-1]
            assert sleeper[1].state is TaskState.KILLED and sleeper[0] - killed_at < 1.0 + 1.0
            hogged = fw.end("hog")
            assert hogged is not None and hogged.reason is TaskReason.MEMORY_LIMIT
            assert hogged.state is TaskState.FAILED
            missing, stranger = fw.end("missing"), fw.end("stranger")
            assert missing is not None and stranger is not None
            assert (missing.state, missing.reason) == (TaskState.FAILED, TaskReason.LAUNCH_FAILED)
            assert missing.message == "command not found: no-such-program"
            assert (stranger.state, stranger.reason) == (
                TaskState.ERROR, TaskReason.COMMAND_INVALID
            )  # fmt: skip
            assert fw.states("stranger") == [TaskState.ERROR]

    asyncio.run(scenario())
    assert agent.proc.poll() is None and health_status(agent.address) == 1  # unaffected
    assert "Traceback" not in agent.log()
    metrics = scrape(agent)  # usage as agent metrics, without a series per task
    assert metrics['fairshare_agent_isolation_info{mode="cgroups"}'] == 1
    assert metrics["fairshare_agent_command_task_cpu_seconds_total"] > 0
    assert metrics["fairshare_agent_command_task_memory_peak_bytes_count"] == 4  # ran and ended
    assert metrics["fairshare_agent_command_tasks"] == 0
    assert not any("task_id" in name for name in metrics)


def scrape(daemon: Daemon) -> dict[str, float]:
    """The daemon's /metrics as {sample with labels: value}."""
    url = f"http://{daemon.metrics_address}/metrics"
    with urllib.request.urlopen(url, timeout=5) as page:
        lines = page.read().decode().splitlines()
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in lines
        if line and not line.startswith("#")
    }


def test_kill9_agent_while_commands_run_and_restart_reports_real_exit_codes_once(
    reaped: list[Daemon], master_factory: Callable[..., Daemon],
    agent_factory: Callable[..., list[Daemon]],
) -> None:  # fmt: skip
    master = master_factory(*DEFAULT_MASTER_FLAGS, "--agent-timeout", "60s")
    flags = ("--status-update-retry", "10s")
    (agent,) = agent_factory(master, 1, AGENT_RESOURCES, *flags)
    release = agent.work_dir / "release"

    async def scenario() -> None:
        async with framework(master, "restart") as fw:
            await fw.launch(
                [
                    # Ends after the restart: when the test creates `release`.
                    command(
                        "after", shell=f"while [ ! -e {release} ]; do sleep 0.05; done; exit 7"
                    ),
                    command("during", shell="sleep 0.3; echo done; exit 4"),  # ends while down
                ]
            )
            await fw.wait(
                lambda: all(TaskState.RUNNING in fw.states(t) for t in ("after", "during")),
                "both RUNNING",
            )
            agent.kill()  # SIGKILL: the tasks are not its children, they run on
            during_exit = agent.work_dir / "runs"
            await poll(lambda: list(during_exit.glob("*/during/exit.json")), "during to end")
            restarted_at = time.time()
            restarted = restart_agent(agent, master.address, *flags, resources=AGENT_RESOURCES)
            reaped.append(restarted)
            await fw.wait(lambda: fw.end("during") is not None, "during reported")
            release.touch()
            await fw.wait(lambda: fw.end("after") is not None, "after reported")
            during, after = fw.end("during"), fw.end("after")
            assert during is not None and after is not None
            assert (during.state, during.exit_code, during.reason) == (
                TaskState.FAILED, 4, TaskReason.COMMAND_FAILED
            )  # fmt: skip
            assert (after.state, after.exit_code) == (TaskState.FAILED, 7)
            assert during.timestamp is not None  # stamped when it ended, not when reported
            assert during.timestamp.timestamp() < restarted_at
            for task_id in ("after", "during"):
                states = fw.states(task_id)
                assert states.count(states[-1]) == 1, states  # the end reported once
                assert states.count(TaskState.RUNNING) == 1, states  # RUNNING not repeated
            assert [b async for b in stream_logs(master.address, "during")] == [b"done\n"]
            log = restarted.log()
            assert "task.launched" not in log and "Traceback" not in log  # none started twice

    asyncio.run(scenario())


async def poll(condition: Callable[[], object], what: str, timeout: float = SETTLE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout:g}s waiting for {what}"
        await asyncio.sleep(0.05)


class _Pid:
    """A process this test did not start itself (the detached run's follower), killed at the
    end like the daemons (``daemons.STARTED``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def alive(self) -> bool:
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)


def _metric(address: str, name: str) -> float:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    (line,) = [line for line in text.splitlines() if line.startswith(name + " ")]
    return float(line.split()[1])


def test_a_detached_command_run_acknowledges_its_tasks_ends(
    reaped: list[Daemon], master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    """Issue 24, item 4: ``run --command ... --detach`` returns while its tasks run; their
    final updates are acknowledged all the same (the agent's pending updates drain to 0), the
    FINISHED tasks and the framework do not linger, and the follower ends by itself."""
    (agent,) = agent_factory(master, 1, AGENT_RESOURCES)
    run = cli("run", "--master", master.address, "--name", "nightly", "--task",
              "cpus:0.2;mem:64", "--count", "2", "--command", "sleep 2; echo done",
              "--detach")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "runs 2 task(s); detached" in run.stdout, run.stdout + run.stderr
    found = re.search(r"process (\d+) follows them .*\(log (\S+)\)", run.stdout)
    assert found, run.stdout
    follower = _Pid(int(found.group(1)))
    STARTED.append(follower)
    log = Path(found.group(2))
    pending = "fairshare_agent_status_updates_pending"

    def drained() -> bool:
        state = fairshare_status(master.address)
        return (
            _metric(agent.metrics_address, pending) == 0
            and not [t for t in state["tasks"] if t["task_id"].startswith("nightly-")]
            and not [f for f in state["frameworks"] if f["name"] == "nightly"]
        )

    wait_for(drained, SETTLE, "the final updates acknowledged, tasks and framework gone")
    wait_for(lambda: not follower.alive(), SETTLE, "the follower to end by itself")
    text = log.read_text()
    for task_id in ("nightly-1", "nightly-2"):
        assert f"task.ended task_id={task_id} state=FINISHED" in text, text
    time.sleep(2)  # nothing is re-sent afterwards
    assert _metric(agent.metrics_address, pending) == 0
    assert "status_update.retried" not in agent.log()
    logs = cli("logs", "--master", master.address, "nightly-1")
    assert (logs.returncode, logs.stdout) == (0, "done\n"), logs.stderr
