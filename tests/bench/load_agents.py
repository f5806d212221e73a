"""Many simulated agents in one process, each on its own ``Connect`` stream (agent.proto).

Started by ``bench_live.py`` and ``bench_restart.py`` (never by the test suite directly):
``python tests/bench/load_agents.py --master HOST:PORT --agents N --channels K``.

Each simulated agent does what the real agent daemon does on the wire, without running tasks:

- opens its stream with ``register`` (``reregister`` with its id and tasks once it has one) and
  waits for ``registered`` (from then on it is "connected"); sends a heartbeat whenever it sent
  nothing for the heartbeat interval the master gave (and later ``settings``); the first beat
  comes at a random phase so the beats of many agents are spread evenly;
- on a launch: every task reports STARTING then RUNNING, each update with a fresh 16-byte uuid
  and ``latest_state`` set to the newest state; only the oldest unacknowledged update of a task
  is in flight and the next one is sent when its acknowledgement arrives; an unacknowledged
  update is re-sent after 1 s, then 2 s, 4 s ... (as the real agent); the heads due at the same
  moment travel in one ``updates`` message per agent;
- a task with ``command.duration`` ends FINISHED (exit code 0) that long after its launch; on a
  kill a live task ends KILLED (``--kill-reports-killing`` adds KILLING first);
- a stream the master ends counts as lost; without ``--reconnect`` the agent then falls silent;
  with it the agent reconnects as the real one does (NOT_FOUND at once, otherwise after a
  backoff of 0.25 s doubling to 10 s with jitter, at most 2 s once it was connected, the first
  attempt after an established session also waiting a random share of the master's
  ``reconnect_jitter``), reregistering with its tasks and re-sending every pending update at
  once.

Counters (cumulative, read with the ``stats`` command, each reply stamped with ``now``):
``connected`` (sessions established), ``registered``, ``reregistered``, ``lost`` (streams the
master ended) with their codes in ``lost_codes``, ``connect_errors``, ``launched``,
``running_acked`` (RUNNING updates whose acknowledgement arrived: the full launch lifecycle),
``finished_acked``, ``updates_sent``, ``update_messages``, ``update_retries``, ``heartbeats``,
``heartbeat_errors``; ``live`` is the number of agents with an established stream now and
``last_established`` the CLOCK_MONOTONIC time of the latest establishment. ``stats`` with
``"latency": true`` also returns the last 20,000 launch-to-RUNNING-acknowledged times and
update-to-acknowledgement times (seconds).

Agents are spread over ``--channels`` gRPC channels (one TCP connection each, many streams on
it); everything runs on one asyncio loop. See ``load_common`` for the control protocol.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import grpc
from fairshare.masters import UNREACHABLE_LEADER_METADATA as UNREACHABLE
from fairshare.masters import leader_hint
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
RECONNECT_INITIAL = 0.25
RECONNECT_MAX = 10.0
RECONNECT_CAP_ONCE_CONNECTED = 2.0
CALL_TIMEOUT = 30.0
LATENCY_SAMPLES = 20_000


@dataclass(slots=True)
class Update:
    """One status update of a task, retried until acknowledged."""

    state: int
    uuid: bytes
    retry_in: float = RETRY_INITIAL
    timer: asyncio.TimerHandle | None = None
    sent_at: float = 0.0


@dataclass(slots=True, eq=False)
class SimTask:
    """A launched task: its FIFO of unacknowledged updates and its newest state."""

    framework_id: str
    task_id: str
    info: common_pb2.TaskInfo
    latest: int
    launched_at: float
    queue: deque[Update] = field(default_factory=deque)
    end_timer: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class SimAgent:
    """One simulated agent and its current stream."""

    index: int
    stub: agent_pb2_grpc.AgentServiceAsyncStub
    agent_id: str = ""
    interval: float = 5.0
    jitter: float = 0.0
    call: Any = None
    established: bool = False
    last_sent: float = 0.0
    due: list[SimTask] = field(default_factory=list)
    flushing: bool = False
    outbox: deque[agent_pb2.ConnectRequest] = field(default_factory=deque)
    writing: bool = False
    tasks: dict[tuple[str, str], SimTask] = field(default_factory=dict)


class Fleet:
    """The agents of this process, their counters, and the protocol rules."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.resources = resources_pb(args.resources)
        # HA masters (--master a,b,c): every agent dials the master believed to lead; a
        # follower's hint moves the fleet to the leader it names, a master that does not
        # answer moves it to the next one.
        self.masters = args.master.split(",")
        self.leader = self.masters[0]
        self.hinted: str | None = None  # the leader a follower named last
        self.unreachable: str | None = None  # a named leader that did not answer
        self.channels: list[grpc.aio.Channel] = []
        self._stubs: dict[str, list[agent_pb2_grpc.AgentServiceAsyncStub]] = {}
        stubs = self.stubs(self.leader)
        self.agents = [SimAgent(i, stubs[i % len(stubs)]) for i in range(args.agents)]
        self.counters: Counter[str] = Counter()
        self.lost_codes: Counter[str] = Counter()
        self.error_samples: list[str] = []
        self.running_latency: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        self.ack_latency: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        self.background: set[asyncio.Task[Any]] = set()
        self.loop = asyncio.get_running_loop()
        self.rng = random.Random()
        self.live = 0
        self.last_established = 0.0
        self.gate = asyncio.Semaphore(args.concurrency)
        self.first_round: asyncio.Future[None] = self.loop.create_future()
        self.pending_first = len(self.agents)

    def stubs(self, master: str) -> list[agent_pb2_grpc.AgentServiceAsyncStub]:
        """The stubs over ``--channels`` connections to ``master`` (made on first use)."""
        found = self._stubs.get(master)
        if found is None:
            made = [channel(master, i) for i in range(self.args.channels)]
            self.channels += made
            found = self._stubs[master] = [agent_pb2_grpc.AgentServiceStub(c) for c in made]
        return found

    def spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        """Run ``coroutine`` in the background, keeping a reference until it ends."""
        task = self.loop.create_task(coroutine)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return task

    # -- sessions ---------------------------------------------------------------------------------

    async def connect_all(self) -> None:
        """Start every agent; returns once each has connected or failed once."""
        for agent in self.agents:
            self.spawn(self.run(agent))
        if self.agents:
            await self.first_round

    def first_done(self) -> None:
        self.pending_first -= 1
        if self.pending_first == 0 and not self.first_round.done():
            self.first_round.set_result(None)

    async def run(self, agent: SimAgent) -> None:
        """Sessions of one agent until it falls silent (no ``--reconnect``) or the end."""
        attempt = 0
        first = True
        known = False
        while True:
            async with self.gate:
                outcome, established = await self.open(agent)
            if first:
                first = False
                self.first_done()
            if established:
                attempt = 0
                outcome = await self.serve(agent)
            if not self.args.reconnect:
                return
            attempt += 1
            known = known or established
            at_once = outcome == "REDIRECTED" or (outcome == "NOT_FOUND" and attempt == 1)
            delay = 0.0 if at_once else self.backoff(attempt)
            if known:  # as the real agent: at most 2 s apart once it was connected
                cap = max(RECONNECT_CAP_ONCE_CONNECTED, agent.jitter)
                delay = min(delay, cap * (0.5 + 0.5 * self.rng.random()))
            if attempt == 1 and established:
                delay += self.rng.random() * agent.jitter
            if outcome == "FAILED_PRECONDITION":
                agent.agent_id, agent.tasks = "", {}
            await asyncio.sleep(delay)

    def backoff(self, attempt: int) -> float:
        base = min(RECONNECT_MAX, RECONNECT_INITIAL * 2 ** (attempt - 1))
        return base * (0.5 + 0.5 * self.rng.random())

    def first_message(self, agent: SimAgent) -> agent_pb2.ConnectRequest:
        info = common_pb2.AgentInfo(
            hostname=f"{self.args.name}-{agent.index:05d}",
            resources=self.resources,
            version="bench",
        )
        if not agent.agent_id:
            return agent_pb2.ConnectRequest(register=agent_pb2.RegisterAgent(agent_info=info))
        tasks = [
            common_pb2.Task(
                framework_id=task.framework_id,
                info=task.info,
                status=common_pb2.TaskStatus(
                    task_id=task.task_id,
                    agent_id=agent.agent_id,
                    state=task.latest,  # type: ignore[arg-type]
                    source=TS.SOURCE_AGENT,
                ),
            )
            for task in agent.tasks.values()
        ]
        message = agent_pb2.ReregisterAgent(agent_id=agent.agent_id, agent_info=info, tasks=tasks)
        return agent_pb2.ConnectRequest(reregister=message)

    async def open(self, agent: SimAgent) -> tuple[str, bool]:
        """Open a stream and (re)register; (status code name, established)."""
        master = self.leader
        stubs = self.stubs(master)
        agent.stub = stubs[agent.index % len(stubs)]
        report = () if self.unreachable is None else ((UNREACHABLE, self.unreachable),)
        call = agent.stub.Connect(metadata=report or None)  # type: ignore[call-arg]
        first = self.first_message(agent)
        try:
            async with asyncio.timeout(CALL_TIMEOUT):
                await call.write(first)
                answer = await call.read()
            if not isinstance(answer, agent_pb2.ConnectResponse):  # EOF
                code = (await call.code()).name
                hint = leader_hint(await call.trailing_metadata())
                if hint:
                    self.leader = self.hinted = hint
                    return "REDIRECTED", False
                raise ConnectionError(code)
        except (
            grpc.aio.AioRpcError,
            TimeoutError,
            ConnectionError,
            asyncio.InvalidStateError,
        ) as e:
            call.cancel()
            if isinstance(e, grpc.aio.AioRpcError) and (hint := leader_hint(e.trailing_metadata())):
                self.leader = self.hinted = hint
                return "REDIRECTED", False
            if master == self.hinted:  # followers name a dead leader until its lease ends
                self.unreachable = master
            if master in self.masters and len(self.masters) > 1 and self.leader == master:
                self.leader = self.masters[(self.masters.index(master) + 1) % len(self.masters)]
            code = e.code().name if isinstance(e, grpc.aio.AioRpcError) else type(e).__name__
            if isinstance(e, ConnectionError):
                code = str(e)
            self.counters["connect_errors"] += 1
            self.lost_codes[f"connect:{code}"] += 1
            if len(self.error_samples) < 5:
                self.error_samples.append(f"connect: {code}")
            return code, False
        registered = answer.registered
        self.unreachable = None
        self.counters["connected"] += 1
        self.counters["reregistered" if agent.agent_id else "registered"] += 1
        agent.agent_id = registered.agent_id
        agent.interval = registered.heartbeat_interval.ToTimedelta().total_seconds() or 5.0
        agent.jitter = registered.reconnect_jitter.ToTimedelta().total_seconds()
        agent.call, agent.established = call, True
        agent.last_sent = self.loop.time() - self.rng.uniform(0, agent.interval)
        self.live += 1
        self.last_established = time.monotonic()
        return "OK", True

    async def serve(self, agent: SimAgent) -> str:
        """Read the stream until it ends; heartbeats meanwhile. The status code name."""
        call = agent.call
        beating = self.spawn(self.heartbeats(agent, call))
        for task in agent.tasks.values():  # every pending head at once after (re)registering
            if task.queue:
                self.mark_due(agent, task)
        code = "OK"
        try:
            while True:
                message = await call.read()
                if not isinstance(message, agent_pb2.ConnectResponse):  # EOF: ended with OK
                    break
                kind = message.WhichOneof("message")
                if kind == "commands":
                    for command in message.commands.commands:
                        self.on_command(agent, command)
                elif kind == "settings":
                    agent.interval = (
                        message.settings.heartbeat_interval.ToTimedelta().total_seconds()
                    )
                    agent.jitter = message.settings.reconnect_jitter.ToTimedelta().total_seconds()
        except grpc.aio.AioRpcError as error:
            code = error.code().name
        finally:
            beating.cancel()
            agent.established, agent.call = False, None
            agent.outbox.clear()  # pending heads are re-sent on the next stream
            self.live -= 1
        self.counters["lost"] += 1
        self.lost_codes[code] += 1
        return code

    def write(self, agent: SimAgent, message: agent_pb2.ConnectRequest) -> bool:
        """Queue a message for the agent's stream (one write at a time, in order, by a writer
        task started on demand); False if not connected."""
        if not agent.established:
            return False
        agent.last_sent = self.loop.time()
        agent.outbox.append(message)
        if not agent.writing:
            agent.writing = True
            self.spawn(self.writer(agent, agent.call))
        return True

    async def writer(self, agent: SimAgent, call: Any) -> None:
        try:
            while agent.outbox and agent.call is call:
                await call.write(agent.outbox.popleft())
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            self.counters["write_errors"] += 1  # the stream ended: its reader counts it
        finally:
            agent.writing = False

    async def heartbeats(self, agent: SimAgent, call: Any) -> None:
        """A heartbeat whenever the agent sent nothing for its interval."""
        message = agent_pb2.ConnectRequest(heartbeat=agent_pb2.AgentHeartbeat())
        while agent.call is call:
            idle = self.loop.time() - agent.last_sent
            if idle < agent.interval:
                await asyncio.sleep(agent.interval - idle)
                continue
            if self.write(agent, message):
                self.counters["heartbeats"] += 1
            else:
                self.counters["heartbeat_errors"] += 1
                return

    # -- commands ---------------------------------------------------------------------------------

    def on_command(self, agent: SimAgent, command: agent_pb2.AgentCommand) -> None:
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
        task = SimTask(framework_id, info.task_id, info, STARTING, self.loop.time())
        agent.tasks[key] = task
        self.report(agent, task, STARTING)
        self.report(agent, task, RUNNING)
        if info.command.HasField("duration"):
            seconds = info.command.duration.ToTimedelta().total_seconds()
            task.end_timer = self.loop.call_later(seconds, self.report, agent, task, FINISHED)

    def report(self, agent: SimAgent, task: SimTask, state: int) -> None:
        """Queue a new state of ``task``; it goes out now if nothing is in flight."""
        if task.latest in TERMINAL:
            return
        task.latest = state
        if state in TERMINAL and task.end_timer is not None:
            task.end_timer.cancel()
        task.queue.append(Update(state, uuid.uuid4().bytes))
        if len(task.queue) == 1:
            self.mark_due(agent, task)

    def mark_due(self, agent: SimAgent, task: SimTask) -> None:
        """Send the task's head with the next batch of this agent (end of this loop step)."""
        agent.due.append(task)
        if not agent.flushing:
            agent.flushing = True
            self.loop.call_soon(self.flush, agent)

    def flush(self, agent: SimAgent) -> None:
        """One ``updates`` message with the head of every due task; retries armed."""
        agent.flushing = False
        due, agent.due = agent.due, []
        heads = []
        now = self.loop.time()
        for task in dict.fromkeys(due):
            if not task.queue:
                continue
            head = task.queue[0]
            if head.timer is not None:
                head.timer.cancel()
            head.timer = self.loop.call_later(head.retry_in, self.retry, agent, task, head)
            head.sent_at = now
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
            heads.append(
                agent_pb2.StatusUpdate(
                    framework_id=task.framework_id,
                    status=status,
                    latest_state=task.latest,  # type: ignore[arg-type]
                )
            )
        if not heads:
            return
        message = agent_pb2.ConnectRequest(updates=agent_pb2.StatusUpdates(updates=heads))
        if self.write(agent, message):
            self.counters["updates_sent"] += len(heads)
            self.counters["update_messages"] += 1

    def retry(self, agent: SimAgent, task: SimTask, head: Update) -> None:
        if task.queue and task.queue[0] is head:
            head.timer = None
            head.retry_in = min(RETRY_MAX, head.retry_in * 2)
            self.counters["update_retries"] += 1
            self.mark_due(agent, task)

    def on_ack(self, agent: SimAgent, ack: agent_pb2.AcknowledgeStatusCommand) -> None:
        task = agent.tasks.get((ack.framework_id, ack.task_id))
        if task is None or not task.queue or task.queue[0].uuid != ack.uuid:
            self.counters["unknown_acks"] += 1
            return
        head = task.queue.popleft()
        if head.timer is not None:
            head.timer.cancel()
        now = self.loop.time()
        self.ack_latency.append(now - head.sent_at)
        if head.state == RUNNING:
            self.counters["running_acked"] += 1
            self.running_latency.append(now - task.launched_at)
        elif head.state in TERMINAL:
            self.counters["finished_acked"] += 1
        if task.queue:
            self.mark_due(agent, task)
        elif task.latest in TERMINAL:
            del agent.tasks[(task.framework_id, task.task_id)]

    # -- control ----------------------------------------------------------------------------------

    async def stats(self, command: dict[str, Any]) -> dict[str, Any]:
        live_tasks = sum(len(agent.tasks) for agent in self.agents)
        return {
            "now": time.monotonic(),
            "counters": dict(self.counters),
            "lost_codes": dict(self.lost_codes),
            "error_samples": self.error_samples,
            "live": self.live,
            "interval": statistics.median(a.interval for a in self.agents) if self.agents else 0,
            "last_established": self.last_established,
            "live_tasks": live_tasks,
            "running_latency": list(self.running_latency) if command.get("latency") else [],
            "ack_latency": list(self.ack_latency) if command.get("latency") else [],
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
    parser.add_argument("--reconnect", action="store_true", help="reconnect as the real agent")
    parser.add_argument("--max-seconds", type=float, default=900.0, help="hard lifetime")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args(sys.argv[1:])
    sys.exit(run_process(lambda stop: main(arguments, stop), arguments.max_seconds))
