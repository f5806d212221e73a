"""Many simulated agents in one process, speaking the real AgentService protocol (agent.proto).

Started by ``bench_live.py`` (never by the test suite directly):
``python tests/bench/load_agents.py --master HOST:PORT --agents N --channels K``.

Each simulated agent does what the real agent daemon does on the wire, without running tasks:

- Register (``--resources``), open its Commands stream and await the initial metadata (from then
  on it is "connected"), then sleep ``heartbeat_interval`` (as the master returned it) and call
  Heartbeat, forever (the first beat at a random phase, so beats are spread evenly);
- on LaunchTasks: every task reports STARTING then RUNNING, each update with a fresh 16-byte
  uuid and ``latest_state`` set to the newest state; only the oldest unacknowledged update of a
  task is in flight and the next one is sent when the AcknowledgeStatusCommand for it arrives;
  an unacknowledged update is re-sent after 1 s, then 2 s, 4 s ... (as the real agent);
- an agent whose Commands stream the master ends (e.g. NOT_FOUND: marked unreachable) is
  counted as lost and falls silent; unlike the real agent it does not reregister;
- a task with ``command.duration`` ends FINISHED (exit code 0) that long after its launch; on
  KillTask a live task ends KILLED (``--kill-reports-killing`` adds KILLING first).

Counters (cumulative, read with the ``stats`` command, each reply stamped with ``now``):
``connected``, ``lost`` (Commands streams the master ended), ``launched`` (tasks received),
``running_acked`` (RUNNING updates whose AcknowledgeStatusCommand arrived: the full launch
lifecycle), ``finished_acked``, ``updates_sent``, ``update_retries``, ``update_errors``,
``heartbeats``, ``heartbeat_errors``. ``stats`` with ``"latency": true`` also returns the
last 20,000 launch-to-RUNNING-acknowledged times (LaunchTasks received to the RUNNING update's
AcknowledgeStatusCommand received, seconds).

Agents are spread over ``--channels`` gRPC channels (one TCP connection each); everything runs
on one asyncio loop. See ``load_common`` for the control protocol.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import grpc
from fairshare.v1 import agent_pb2, agent_pb2_grpc, common_pb2
from load_common import channel, emit, resources_pb, run_process, serve_control

TS = common_pb2.TaskStatus
STARTING = common_pb2.TASK_STATE_STARTING
RUNNING = common_pb2.TASK_STATE_RUNNING
KILLING = common_pb2.TASK_STATE_KILLING
FINISHED = common_pb2.TASK_STATE_FINISHED
KILLED = common_pb2.TASK_STATE_KILLED
TERMINAL = frozenset({FINISHED, KILLED})
RETRY_INITIAL = 1.0
RETRY_MAX = 60.0
CALL_TIMEOUT = 30.0
HEARTBEAT_TIMEOUT = 10.0  # the real agent's rpc_timeout
LATENCY_SAMPLES = 20_000


@dataclass(slots=True)
class Update:
    """One status update of a task, retried until acknowledged."""

    state: int
    uuid: bytes
    retry_in: float = RETRY_INITIAL
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class SimTask:
    """A launched task: its FIFO of unacknowledged updates and its newest state."""

    framework_id: str
    task_id: str
    latest: int
    launched_at: float
    queue: deque[Update] = field(default_factory=deque)
    end_timer: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class SimAgent:
    """One simulated agent."""

    index: int
    stub: agent_pb2_grpc.AgentServiceAsyncStub
    agent_id: str = ""
    interval: float = 5.0
    beating: asyncio.Task[None] | None = None
    tasks: dict[tuple[str, str], SimTask] = field(default_factory=dict)


class Fleet:
    """The agents of this process, their counters, and the protocol rules."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.resources = resources_pb(args.resources)
        self.channels = [channel(args.master, i) for i in range(args.channels)]
        stubs = [agent_pb2_grpc.AgentServiceStub(c) for c in self.channels]
        self.agents = [SimAgent(i, stubs[i % len(stubs)]) for i in range(args.agents)]
        self.counters: Counter[str] = Counter()
        self.lost_codes: Counter[str] = Counter()
        self.error_samples: list[str] = []
        self.running_latency: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        self.update_rtt: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        self.background: set[asyncio.Task[Any]] = set()
        self.loop = asyncio.get_running_loop()

    def spawn(self, coroutine: Any) -> None:
        """Run ``coroutine`` in the background, keeping a reference until it ends."""
        task = self.loop.create_task(coroutine)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    # -- connecting -------------------------------------------------------------------------------

    async def connect_all(self) -> None:
        """Register every agent and open its Commands stream, ``--concurrency`` at a time."""
        gate = asyncio.Semaphore(self.args.concurrency)

        async def one(agent: SimAgent) -> None:
            async with gate:
                await self.connect(agent)

        await asyncio.gather(*(one(agent) for agent in self.agents))

    async def connect(self, agent: SimAgent) -> None:
        info = common_pb2.AgentInfo(
            hostname=f"{self.args.name}-{agent.index:05d}",
            resources=self.resources,
            version="bench",
        )
        try:
            answer = await agent.stub.Register(
                agent_pb2.RegisterRequest(agent_info=info), timeout=CALL_TIMEOUT
            )
            agent.agent_id = answer.agent_id
            agent.interval = answer.heartbeat_interval.ToTimedelta().total_seconds() or 5.0
            call = agent.stub.Commands(agent_pb2.CommandsRequest(agent_id=agent.agent_id))
            await asyncio.wait_for(call.initial_metadata(), CALL_TIMEOUT)
        except (grpc.aio.AioRpcError, TimeoutError) as error:
            self.counters["connect_errors"] += 1
            code = error.code().name if isinstance(error, grpc.aio.AioRpcError) else "TIMEOUT"
            self.lost_codes[f"connect:{code}"] += 1
            return
        self.counters["connected"] += 1
        self.spawn(self.read_commands(agent, call))
        agent.beating = self.loop.create_task(self.heartbeats(agent))
        self.background.add(agent.beating)
        agent.beating.add_done_callback(self.background.discard)

    async def read_commands(self, agent: SimAgent, call: Any) -> None:
        code = "OK"
        try:
            async for command in call:
                self.on_command(agent, command)
        except grpc.aio.AioRpcError as error:
            code = error.code().name
        except asyncio.CancelledError:
            call.cancel()
            raise
        self.counters["lost"] += 1
        self.lost_codes[code] += 1
        if agent.beating is not None:  # a dropped agent is not reconnected: it falls silent
            agent.beating.cancel()

    async def heartbeats(self, agent: SimAgent) -> None:
        """As the real agent: sleep the interval, then Heartbeat (10 s timeout), forever; the
        first beat comes at a random phase so the beats of many agents are spread evenly."""
        await asyncio.sleep(random.uniform(0, agent.interval))
        request = agent_pb2.HeartbeatRequest(agent_id=agent.agent_id)
        while True:
            try:
                await agent.stub.Heartbeat(request, timeout=HEARTBEAT_TIMEOUT)
                self.counters["heartbeats"] += 1
            except grpc.aio.AioRpcError as error:
                self.counters["heartbeat_errors"] += 1
                self.counters[f"heartbeat_error:{error.code().name}"] += 1
                if len(self.error_samples) < 5:
                    self.error_samples.append(f"Heartbeat {error.code().name}: {error.details()}")
            await asyncio.sleep(agent.interval)

    # -- commands ---------------------------------------------------------------------------------

    def on_command(self, agent: SimAgent, command: agent_pb2.CommandsResponse) -> None:
        kind = command.WhichOneof("command")
        if kind == "launch_tasks":
            for info in command.launch_tasks.tasks:
                self.launch(agent, command.launch_tasks.framework_id, info)
        elif kind == "kill_task":
            kill = command.kill_task
            task = agent.tasks.get((kill.framework_id, kill.task_id))
            if task is not None and task.latest not in TERMINAL:
                if self.args.kill_reports_killing:
                    self.report(agent, task, KILLING)
                self.report(agent, task, KILLED)
        elif kind == "acknowledge_status":
            self.on_ack(agent, command.acknowledge_status)

    def launch(self, agent: SimAgent, framework_id: str, info: common_pb2.TaskInfo) -> None:
        key = (framework_id, info.task_id)
        if key in agent.tasks:
            return  # a duplicate launch of a live task is ignored, as the real agent does
        self.counters["launched"] += 1
        task = SimTask(framework_id, info.task_id, STARTING, self.loop.time())
        agent.tasks[key] = task
        self.report(agent, task, STARTING)
        self.report(agent, task, RUNNING)
        if info.command.HasField("duration"):
            seconds = info.command.duration.ToTimedelta().total_seconds()
            task.end_timer = self.loop.call_later(seconds, self.report, agent, task, FINISHED)

    def report(self, agent: SimAgent, task: SimTask, state: int) -> None:
        """Queue a new state of ``task``; send it now if nothing is in flight."""
        if task.latest in TERMINAL:
            return
        task.latest = state
        if state in TERMINAL and task.end_timer is not None:
            task.end_timer.cancel()
        task.queue.append(Update(state, uuid.uuid4().bytes))
        if len(task.queue) == 1:
            self.spawn(self.send_head(agent, task))

    async def send_head(self, agent: SimAgent, task: SimTask) -> None:
        """Send the task's oldest unacknowledged update; a timer re-sends it until acknowledged."""
        if not task.queue:
            return
        head = task.queue[0]
        status = common_pb2.TaskStatus(
            task_id=task.task_id,
            agent_id=agent.agent_id,
            state=head.state,  # type: ignore[arg-type]
            uuid=head.uuid,
            source=TS.SOURCE_AGENT,
        )
        if head.state == FINISHED:
            status.exit_code = 0
        status.timestamp.GetCurrentTime()
        request = agent_pb2.UpdateStatusRequest(
            agent_id=agent.agent_id,
            framework_id=task.framework_id,
            status=status,
            latest_state=task.latest,  # type: ignore[arg-type]
        )
        try:
            sent = self.loop.time()
            await agent.stub.UpdateStatus(request, timeout=CALL_TIMEOUT)
            self.update_rtt.append(self.loop.time() - sent)
            self.counters["updates_sent"] += 1
        except grpc.aio.AioRpcError as error:
            self.counters["update_errors"] += 1
            self.counters[f"update_error:{error.code().name}"] += 1
        if task.queue and task.queue[0] is head:  # not acknowledged yet: arm the retry
            head.timer = self.loop.call_later(head.retry_in, self.retry, agent, task, head)

    def retry(self, agent: SimAgent, task: SimTask, head: Update) -> None:
        if task.queue and task.queue[0] is head:
            head.retry_in = min(RETRY_MAX, head.retry_in * 2)
            self.counters["update_retries"] += 1
            self.spawn(self.send_head(agent, task))

    def on_ack(self, agent: SimAgent, ack: agent_pb2.AcknowledgeStatusCommand) -> None:
        task = agent.tasks.get((ack.framework_id, ack.task_id))
        if task is None or not task.queue or task.queue[0].uuid != ack.uuid:
            self.counters["unknown_acks"] += 1
            return
        head = task.queue.popleft()
        if head.timer is not None:
            head.timer.cancel()
        if head.state == RUNNING:
            self.counters["running_acked"] += 1
            self.running_latency.append(self.loop.time() - task.launched_at)
        elif head.state in TERMINAL:
            self.counters["finished_acked"] += 1
        if task.queue:
            self.spawn(self.send_head(agent, task))
        elif task.latest in TERMINAL:
            del agent.tasks[(task.framework_id, task.task_id)]

    # -- control ----------------------------------------------------------------------------------

    async def stats(self, command: dict[str, Any]) -> dict[str, Any]:
        live = sum(len(agent.tasks) for agent in self.agents)
        return {
            "now": time.monotonic(),
            "counters": dict(self.counters),
            "lost_codes": dict(self.lost_codes),
            "error_samples": self.error_samples,
            "live_tasks": live,
            "running_latency": list(self.running_latency) if command.get("latency") else [],
            "update_rtt": list(self.update_rtt) if command.get("latency") else [],
        }

    async def close(self) -> None:
        for task in list(self.background):
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        for chan in self.channels:
            await chan.close(None)


async def main(args: argparse.Namespace, stop: asyncio.Event) -> None:
    fleet = Fleet(args)
    control = asyncio.create_task(serve_control({"stats": fleet.stats}, stop))
    try:
        started = time.monotonic()
        await fleet.connect_all()
        emit(
            {
                "event": "ready",
                "connected": fleet.counters["connected"],
                "seconds": time.monotonic() - started,
            }
        )
        await stop.wait()
    finally:
        control.cancel()
        await fleet.close()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--master", required=True, metavar="HOST:PORT")
    parser.add_argument("--agents", type=int, default=500)
    parser.add_argument("--channels", type=int, default=4)
    parser.add_argument("--resources", default="cpus:8;mem:16384")
    parser.add_argument("--name", default="sim", help="hostname prefix")
    parser.add_argument("--concurrency", type=int, default=64, help="registrations in flight")
    parser.add_argument("--kill-reports-killing", action="store_true")
    parser.add_argument("--max-seconds", type=float, default=900.0, help="hard lifetime")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args(sys.argv[1:])
    sys.exit(run_process(lambda stop: main(arguments, stop), arguments.max_seconds))
