"""The REAL agent process (``python -m fairshare.cli agent``) against a protocol-level fake master.

The fake is a grpc.aio ``AgentService`` servicer on 127.0.0.1:0 in the test process that records
every message of the agent's ``Connect`` stream and scripts the master's side of agent.proto: it
answers register/reregister with ``registered``, pushes commands down the stream, acknowledges
status updates (optionally only on their N-th copy, and twice, to prove retries without double
application) and can end the stream with the contract's codes at the next heartbeat. Messages
are recorded under the names of what they are: Register, Reregister, Connect (a stream
established), Heartbeat and UpdateStatus (one record per update of a batch). (End-to-end tests
against the real master live elsewhere.)

Every wait is bounded: ``FakeMaster.wait_for`` wakes on each recorded message and gives up after
a deadline; nothing relies on a sleep being long enough, except the explicit "nothing more
arrives" checks, which wait several retry intervals.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from fairshare.health import SERVING, HealthCheckRequest, HealthCheckResponse
from fairshare.v1 import agent_pb2, agent_pb2_grpc, common_pb2
from google.protobuf import duration_pb2

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 20.0
TS = common_pb2.TaskStatus
STARTING, RUNNING, KILLING = (
    common_pb2.TASK_STATE_STARTING,
    common_pb2.TASK_STATE_RUNNING,
    common_pb2.TASK_STATE_KILLING,
)
FINISHED, FAILED, KILLED = (
    common_pb2.TASK_STATE_FINISHED,
    common_pb2.TASK_STATE_FAILED,
    common_pb2.TASK_STATE_KILLED,
)
ERROR, DROPPED = common_pb2.TASK_STATE_ERROR, common_pb2.TASK_STATE_DROPPED
FW = "fw-1"
INTERVAL = duration_pb2.Duration(nanos=200_000_000)


@dataclass(frozen=True)
class Session:
    """A stream the fake master established (``registered`` sent)."""

    agent_id: str


@dataclass(frozen=True)
class Beat:
    """A heartbeat on the stream of ``agent_id``."""

    agent_id: str
    used: common_pb2.Resources


@dataclass(frozen=True)
class Update:
    """One status update of a batch, on the stream of ``agent_id``."""

    agent_id: str
    framework_id: str
    status: common_pb2.TaskStatus
    latest_state: int


@dataclass
class FakeMaster(agent_pb2_grpc.AgentServiceServicer):
    """Records messages; scripts acknowledgements, commands and stream ends."""

    master_id: str = "m-1"
    epoch: int = 0  # the leadership epoch on ``registered`` (HA masters)
    command_epoch: int | None = None  # on ``commands`` (None: ``epoch``)
    ack_on_copy: int = 1  # acknowledge an update when its N-th copy arrives; 0: never
    duplicate_acks: bool = False
    stream_errors: list[grpc.StatusCode] = field(default_factory=list)  # at the next heartbeat
    calls: list[tuple[str, Any]] = field(default_factory=list)
    acked: set[bytes] = field(default_factory=set)
    copies: dict[bytes, int] = field(default_factory=dict)
    registrations: int = 0
    stream: asyncio.Queue[agent_pb2.AgentCommand | grpc.StatusCode | None] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def record(self, method: str, request: Any) -> None:
        self.calls.append((method, request))
        self.changed.set()

    def of(self, method: str) -> list[Any]:
        return [request for name, request in self.calls if name == method]

    def updates(self, task_id: str | None = None) -> list[Update]:
        return [u for u in self.of("UpdateStatus") if task_id in (None, u.status.task_id)]

    def states(self, task_id: str) -> list[int]:
        """Distinct updates of a task in arrival order (copies collapsed)."""
        seen: list[bytes] = []
        states = []
        for update in self.updates(task_id):
            if update.status.uuid not in seen:
                seen.append(update.status.uuid)
                states.append(update.status.state)
        return states

    def last_used(self) -> dict[str, int] | None:
        """Resources the newest heartbeat reported in use (None before the first heartbeat)."""
        beats = self.of("Heartbeat")
        return {i.name: i.millis for i in beats[-1].used.items} if beats else None

    async def wait_for(self, predicate: Callable[[], bool], what: str) -> None:
        async def loop() -> None:
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

        try:
            await asyncio.wait_for(loop(), DEADLINE)
        except TimeoutError:
            pytest.fail(f"timed out waiting for {what}; calls: {[n for n, _ in self.calls]}")

    def send(self, command: agent_pb2.AgentCommand) -> None:
        assert self.stream is not None, "no stream open"
        self.stream.put_nowait(command)

    def launch(self, *tasks: common_pb2.TaskInfo) -> None:
        launch = agent_pb2.LaunchTasksCommand(framework_id=FW, tasks=tasks)
        self.send(agent_pb2.AgentCommand(launch_tasks=launch))

    def kill(self, task_id: str) -> None:
        kill = agent_pb2.KillTaskCommand(framework_id=FW, task_id=task_id)
        self.send(agent_pb2.AgentCommand(kill_task=kill))

    # -- AgentService ----------------------------------------------------------------------------

    async def Connect(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        requests = aiter(request_iterator)
        first = await anext(requests)
        kind = first.WhichOneof("message")
        if kind == "register":
            self.registrations += 1
            self.record("Register", first.register)
            agent_id = f"ag-{self.registrations}"
        else:
            assert kind == "reregister", first
            self.record("Reregister", first.reregister)
            agent_id = first.reregister.agent_id
        queue: asyncio.Queue[agent_pb2.AgentCommand | grpc.StatusCode | None] = asyncio.Queue()
        self.stream = queue  # a new stream replaces the old one
        registered = agent_pb2.AgentRegistered(
            agent_id=agent_id,
            master_id=self.master_id,
            heartbeat_interval=INTERVAL,
            epoch=self.epoch,
        )
        yield agent_pb2.ConnectResponse(registered=registered)
        self.record("Connect", Session(agent_id))
        reader = asyncio.ensure_future(self._read(requests, agent_id, queue))
        try:
            while True:
                commands = [await queue.get()]
                while not queue.empty():
                    commands.append(queue.get_nowait())
                end = next((c for c in commands if not isinstance(c, agent_pb2.AgentCommand)), 0)
                batch = [c for c in commands if isinstance(c, agent_pb2.AgentCommand)]
                if batch:
                    epoch = self.epoch if self.command_epoch is None else self.command_epoch
                    message = agent_pb2.AgentCommands(commands=batch, epoch=epoch)
                    yield agent_pb2.ConnectResponse(commands=message)
                if isinstance(end, grpc.StatusCode):
                    await context.abort(end, "scripted by the test")
                if end is None:
                    return  # the agent half-closed: end the stream too
        finally:
            reader.cancel()

    async def _read(self, requests: Any, agent_id: str, queue: asyncio.Queue[Any]) -> None:
        with contextlib.suppress(grpc.aio.AbortError, grpc.RpcError):
            async for message in requests:
                if message.HasField("heartbeat"):
                    self.record("Heartbeat", Beat(agent_id, message.heartbeat.used))
                    if self.stream_errors:
                        queue.put_nowait(self.stream_errors.pop(0))
                for update in message.updates.updates:
                    self.on_update(agent_id, update, queue)
            queue.put_nowait(None)

    def on_update(
        self, agent_id: str, update: agent_pb2.StatusUpdate, queue: asyncio.Queue[Any]
    ) -> None:
        self.record(
            "UpdateStatus",
            Update(agent_id, update.framework_id, update.status, update.latest_state),
        )
        uuid = update.status.uuid
        self.copies[uuid] = self.copies.get(uuid, 0) + 1
        if self.ack_on_copy and self.copies[uuid] == self.ack_on_copy:
            ack = agent_pb2.AcknowledgeStatusCommand(
                framework_id=update.framework_id, task_id=update.status.task_id, uuid=uuid
            )
            for _ in range(2 if self.duplicate_acks else 1):
                queue.put_nowait(agent_pb2.AgentCommand(acknowledge_status=ack))
            self.acked.add(uuid)


def task(task_id: str, resources: dict[str, int], **command: Any) -> common_pb2.TaskInfo:
    info = common_pb2.TaskInfo(task_id=task_id, agent_id="")
    for name, millis in sorted(resources.items()):
        info.resources.items.add(name=name, millis=millis)
    if "duration" in command:
        info.command.duration.FromMilliseconds(int(command.pop("duration") * 1000))
    for key, value in command.items():
        setattr(info.command, key, value)
    return info


SMALL = {"cpus": 1000, "mem": 128_000}


async def start_fake(fake: FakeMaster, port: int = 0) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    agent_pb2_grpc.add_AgentServiceServicer_to_server(fake, server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server, bound


@dataclass
class Agent:
    process: asyncio.subprocess.Process
    work_dir: Path
    log: Path

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.asynccontextmanager
async def agent_process(tmp_path: Path, port: int, *extra: str) -> AsyncIterator[Agent]:
    work_dir, log = tmp_path / "agent", tmp_path / "agent.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRSHARE_")}
    with log.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "fairshare.cli",
            "agent",
            "--master",
            f"127.0.0.1:{port}",
            "--resources",
            "cpus:4;mem:4096",
            "--attributes",
            "rack:r1;zone:a",
            "--metrics-port",
            "0",
            "--work-dir",
            str(work_dir),
            "--status-update-retry",
            "100ms",
            *extra,
            stderr=sink,
            stdout=sink,
            cwd=ROOT,
            env=env,
        )
    agent = Agent(process, work_dir, log)
    try:
        yield agent
    except BaseException:
        print(f"--- agent stderr ---\n{agent.stderr()}")  # shown by pytest on failure
        raise
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@contextlib.asynccontextmanager
async def cluster(tmp_path: Path, fake: FakeMaster, *extra: str) -> AsyncIterator[Agent]:
    server, port = await start_fake(fake)
    try:
        async with agent_process(tmp_path, port, *extra) as agent:
            await fake.wait_for(lambda: bool(fake.of("Connect")), "the stream")
            yield agent
    finally:
        await server.stop(0)


def run(coro: Any) -> None:
    asyncio.run(coro)


# -- registration and heartbeats -----------------------------------------------------------------


def test_registers_with_resources_attributes_and_its_port_then_heartbeats(tmp_path: Path) -> None:
    async def scenario() -> None:
        fake = FakeMaster()
        async with cluster(tmp_path, fake) as agent:
            (register,) = fake.of("Register")
            info = register.agent_info
            resources = {item.name: item.millis for item in info.resources.items}
            assert resources == {"cpus": 4000, "mem": 4_096_000}
            assert [i.name for i in info.resources.items] == ["cpus", "mem"]  # sorted on the wire
            assert [(a.name, a.value) for a in info.attributes] == [("rack", "r1"), ("zone", "a")]
            assert info.hostname and info.version
            address = (agent.work_dir / "agent.addr").read_text()
            assert address == f"127.0.0.1:{info.port}\n" and info.port > 0
            assert fake.of("Connect")[0].agent_id == "ag-1"
            await fake.wait_for(lambda: len(fake.of("Heartbeat")) >= 3, "three heartbeats")
            assert {hb.agent_id for hb in fake.of("Heartbeat")} == {"ag-1"}
            assert "listening address=127.0.0.1:" in agent.stderr()

    run(scenario())


# -- launch, status updates, acknowledgements ---------------------------------------------------


def test_updates_are_retried_until_acknowledged_in_order_and_never_applied_twice(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        fake = FakeMaster(ack_on_copy=3, duplicate_acks=True)  # drop the first 2 copies' acks
        async with cluster(tmp_path, fake):
            fake.launch(
                task("t-ok", SMALL, duration=0.1), task("t-bad", SMALL, duration=0.05, exit_code=3)
            )
            await fake.wait_for(lambda: len(fake.acked) == 6, "6 acknowledged updates")
            for task_id, last in (("t-ok", FINISHED), ("t-bad", FAILED)):
                updates = fake.updates(task_id)
                assert fake.states(task_id) == [STARTING, RUNNING, last]
                blocks: list[list[Update]] = []
                for update in updates:  # copies of one update are contiguous: FIFO, head only
                    if blocks and blocks[-1][0].status.uuid == update.status.uuid:
                        blocks[-1].append(update)
                    else:
                        blocks.append([update])
                assert len(blocks) == 3, [(u.status.state, u.status.uuid.hex()) for u in updates]
                for block in blocks:
                    assert len(block) >= 3  # re-sent until the third copy was acknowledged
                    assert len({u.status.SerializeToString() for u in block}) == 1  # same update
                    assert len(block[0].status.uuid) == 16
                    assert block[0].status.source == TS.SOURCE_AGENT
                    assert block[0].agent_id == "ag-1" and block[0].framework_id == FW
                final = blocks[-1][0].status
                assert final.exit_code == (0 if last == FINISHED else 3)
                assert blocks[-1][0].latest_state == last
            bad_final = fake.updates("t-bad")[-1].status
            assert bad_final.reason == TS.REASON_COMMAND_FAILED
            count = len(fake.updates())
            await asyncio.sleep(0.5)  # five first-retry intervals: nothing more may arrive
            assert len(fake.updates()) == count

    run(scenario())


def test_kill_reports_killing_then_killed_and_unknown_tasks_dropped(tmp_path: Path) -> None:
    async def scenario() -> None:
        fake = FakeMaster()
        async with cluster(tmp_path, fake):
            fake.launch(task("t-long", SMALL))
            await fake.wait_for(lambda: RUNNING in fake.states("t-long"), "RUNNING")
            fake.kill("t-long")
            fake.kill("t-ghost")
            await fake.wait_for(lambda: KILLED in fake.states("t-long"), "KILLED")
            await fake.wait_for(lambda: bool(fake.states("t-ghost")), "DROPPED")
            assert fake.states("t-long") == [STARTING, RUNNING, KILLING, KILLED]
            assert fake.states("t-ghost") == [DROPPED]
            await fake.wait_for(
                lambda: fake.last_used() == {},
                "a heartbeat with nothing used",
            )

    run(scenario())


def test_launch_that_does_not_fit_or_fails_on_start(tmp_path: Path) -> None:
    async def scenario() -> None:
        fake = FakeMaster()
        async with cluster(tmp_path, fake):
            fake.launch(
                task("t-huge", {"cpus": 64_000}),
                task("t-fail", SMALL, fail_on_start=True),
                task("t-run", SMALL),
            )
            await fake.wait_for(lambda: bool(fake.states("t-huge")), "ERROR")
            await fake.wait_for(lambda: FAILED in fake.states("t-fail"), "FAILED")
            await fake.wait_for(lambda: RUNNING in fake.states("t-run"), "RUNNING")
            (error,) = fake.updates("t-huge")
            assert (error.status.state, error.status.reason) == (ERROR, TS.REASON_TASK_INVALID)
            assert "do not fit" in error.status.message
            assert fake.updates("t-fail")[-1].status.reason == TS.REASON_EXECUTOR_TERMINATED
            await fake.wait_for(
                lambda: fake.last_used() == SMALL,
                "a heartbeat reporting the running task's resources",
            )

    run(scenario())


# -- the error contract: NOT_FOUND, FAILED_PRECONDITION, master restart --------------------------


def test_a_stream_ended_not_found_makes_the_agent_reregister_with_its_running_tasks(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        fake = FakeMaster(ack_on_copy=0)  # nothing acknowledged: STARTING stays the head
        async with cluster(tmp_path, fake, "--status-update-retry", "60s"):
            fake.launch(task("t-long", SMALL))
            await fake.wait_for(lambda: bool(fake.updates("t-long")), "the first update")
            await fake.wait_for(lambda: len(fake.of("Heartbeat")) >= 1, "a heartbeat")
            fake.stream_errors.append(grpc.StatusCode.NOT_FOUND)
            await fake.wait_for(lambda: bool(fake.of("Reregister")), "Reregister")
            (rereg,) = fake.of("Reregister")
            assert rereg.agent_id == "ag-1" and len(fake.of("Register")) == 1
            assert list(rereg.framework_ids) == [FW]
            (reported,) = rereg.tasks
            assert (reported.framework_id, reported.info.task_id) == (FW, "t-long")
            assert reported.status.state == RUNNING and reported.info.agent_id == "ag-1"
            assert {i.name: i.millis for i in reported.info.resources.items} == SMALL
            assert rereg.agent_info.resources.items
            await fake.wait_for(lambda: len(fake.of("Connect")) == 2, "a new stream")
            # the unacknowledged head is re-sent at once after reregistering (retry is 60 s)
            await fake.wait_for(lambda: len(fake.updates("t-long")) == 2, "the re-sent update")
            first, again = fake.updates("t-long")
            assert first.status.uuid == again.status.uuid and again.status.state == STARTING
            assert again.latest_state == RUNNING
            beats = len(fake.of("Heartbeat"))
            await fake.wait_for(lambda: len(fake.of("Heartbeat")) > beats, "heartbeats resume")

    run(scenario())


def test_a_stream_the_master_ends_brings_a_reregistration_and_its_new_master_id(
    tmp_path: Path,
) -> None:
    """A master that restarted (or failed over) ends the stream: the agent comes back with a
    reregister, never a register, and checkpoints the master_id it is answered with."""

    async def scenario() -> None:
        fake = FakeMaster()
        async with cluster(tmp_path, fake) as agent:
            await fake.wait_for(lambda: len(fake.of("Heartbeat")) >= 1, "a heartbeat")
            fake.master_id = "m-2"
            fake.stream_errors.append(grpc.StatusCode.UNAVAILABLE)
            await fake.wait_for(lambda: bool(fake.of("Reregister")), "Reregister")
            assert len(fake.of("Register")) == 1
            await fake.wait_for(lambda: len(fake.of("Connect")) == 2, "a new stream")
            checkpoint = agent.work_dir / "agent.sqlite"

            def checkpointed_master_id() -> str:
                with contextlib.closing(sqlite3.connect(checkpoint)) as db:
                    (master_id,) = db.execute("SELECT master_id FROM agent").fetchone()
                return str(master_id)

            deadline = asyncio.get_running_loop().time() + DEADLINE
            while checkpointed_master_id() != "m-2":  # written once `registered` is read
                assert asyncio.get_running_loop().time() < deadline, checkpointed_master_id()
                await asyncio.sleep(0.02)

    run(scenario())


def test_failed_precondition_kills_tasks_silently_and_registers_afresh(tmp_path: Path) -> None:
    async def scenario() -> None:
        fake = FakeMaster()
        async with cluster(tmp_path, fake):
            fake.launch(task("t-old", SMALL))
            await fake.wait_for(lambda: RUNNING in fake.states("t-old"), "RUNNING")
            await fake.wait_for(lambda: len(fake.acked) == 2, "both updates acknowledged")
            fake.stream_errors.append(grpc.StatusCode.FAILED_PRECONDITION)
            await fake.wait_for(lambda: len(fake.of("Register")) == 2, "a fresh Register")
            await fake.wait_for(lambda: len(fake.of("Connect")) == 2, "a new stream")
            assert fake.of("Reregister") == []
            assert fake.of("Connect")[-1].agent_id == "ag-2"
            await fake.wait_for(lambda: fake.of("Heartbeat")[-1].agent_id == "ag-2", "heartbeat")
            assert fake.states("t-old") == [STARTING, RUNNING]  # killed silently (GONE already)
            assert not fake.of("Heartbeat")[-1].used.items  # its resources are free again

    run(scenario())


def test_master_restart_on_the_same_port_gets_a_reregistration(tmp_path: Path) -> None:
    async def scenario() -> None:
        first = FakeMaster()
        server, port = await start_fake(first)
        async with agent_process(tmp_path, port) as agent:
            await first.wait_for(lambda: bool(first.of("Connect")), "the stream")
            first.launch(task("t-long", SMALL))
            await first.wait_for(lambda: len(first.acked) == 2, "STARTING and RUNNING acked")
            await server.stop(0)
            second = FakeMaster(master_id="m-2")
            server, _ = await start_fake(second, port)
            try:
                await second.wait_for(lambda: bool(second.of("Connect")), "a new stream")
                (rereg,) = second.of("Reregister")
                assert second.of("Register") == []
                assert [t.info.task_id for t in rereg.tasks] == ["t-long"]
                assert rereg.tasks[0].status.state == RUNNING
                assert agent.process.returncode is None
            finally:
                await server.stop(0)

    run(scenario())


# -- health, SIGTERM ------------------------------------------------------------------------------


def test_health_serving_and_sigterm_drains_and_exits_0(tmp_path: Path) -> None:
    async def scenario() -> None:
        fake = FakeMaster()
        async with cluster(tmp_path, fake) as agent:
            address = (agent.work_dir / "agent.addr").read_text().strip()
            async with grpc.aio.insecure_channel(address) as channel:
                check = channel.unary_unary(
                    "/grpc.health.v1.Health/Check",
                    request_serializer=HealthCheckRequest.SerializeToString,
                    response_deserializer=HealthCheckResponse.FromString,
                )
                answer = await check(HealthCheckRequest(service=""), timeout=5)
                assert answer.status == SERVING  # type: ignore[attr-defined]
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await check(HealthCheckRequest(service="nope"), timeout=5)
                assert caught.value.code() == grpc.StatusCode.NOT_FOUND
            fake.launch(task("t-long", SMALL))
            await fake.wait_for(lambda: len(fake.acked) == 2, "STARTING and RUNNING acked")
            fake.kill("t-ghost")  # commands are applied in order: once DROPPED arrives, the
            await fake.wait_for(lambda: bool(fake.states("t-ghost")), "DROPPED")  # acks were too
            agent.process.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(agent.process.wait(), DEADLINE)
            assert code == 0, agent.stderr()
            assert fake.states("t-long") == [STARTING, RUNNING, KILLED]
            assert fake.updates("t-long")[-1].status.reason == TS.REASON_AGENT_SHUTDOWN
            assert not (agent.work_dir / "agent.addr").exists()
            assert "Traceback" not in agent.stderr()

    run(scenario())


def test_agent_waits_for_a_master_that_starts_later(tmp_path: Path) -> None:
    async def scenario() -> None:
        fake = FakeMaster()
        server, port = await start_fake(fake)
        await server.stop(0)  # reserve a port, then leave it closed for a while
        async with agent_process(tmp_path, port, "--log-format", "json") as agent:
            deadline = asyncio.get_running_loop().time() + DEADLINE
            while (
                "master.reconnecting" not in agent.stderr()
            ):  # the agent keeps trying with backoff
                assert asyncio.get_running_loop().time() < deadline, agent.stderr()
                await asyncio.sleep(0.05)
            server, _ = await start_fake(fake, port)
            try:
                await fake.wait_for(lambda: bool(fake.of("Connect")), "the stream")
                assert len(fake.of("Register")) == 1
                first_line = agent.stderr().splitlines()[0]
                assert json.loads(first_line)["event"] == "listening"
            finally:
                await server.stop(0)

    run(scenario())


def test_an_agent_refuses_a_former_leader_and_its_commands(tmp_path: Path) -> None:
    """HA masters (agent.proto: Leadership): commands of an epoch older than the highest the
    agent admitted end the stream unapplied; a master of an older epoch is not admitted."""

    async def scenario() -> None:
        fake = FakeMaster(epoch=7)
        async with cluster(tmp_path, fake) as agent:
            fake.launch(task("t-new", SMALL))
            await fake.wait_for(lambda: bool(fake.updates("t-new")), "t-new launched")
            fake.command_epoch = 6  # a deposed leader's commands reach the agent
            fake.launch(task("t-stale", SMALL))
            await fake.wait_for(lambda: bool(fake.of("Reregister")), "the agent left the stream")
            assert not fake.updates("t-stale")  # never applied
            (rereg,) = fake.of("Reregister")
            assert [t.info.task_id for t in rereg.tasks] == ["t-new"]
            assert "master.stale" in agent.stderr()

            fake.epoch, fake.command_epoch = 5, None  # a master of an older term answers
            fake.stream_errors.append(grpc.StatusCode.UNAVAILABLE)
            await fake.wait_for(lambda: len(fake.of("Reregister")) >= 3, "more attempts")
            beats = len(fake.of("Heartbeat"))
            assert "a former leader (epoch 5; seen 7)" in agent.stderr()
            fake.epoch = 8  # the current leader
            await fake.wait_for(lambda: len(fake.of("Heartbeat")) > beats, "a session again")

            # Issue 23, finding 2: commands of a higher epoch than the session was admitted
            # with (never checked against etcd) end the stream unapplied too.
            sessions = len(fake.of("Reregister"))
            fake.command_epoch = 9
            fake.launch(task("t-higher", SMALL))
            await fake.wait_for(lambda: len(fake.of("Reregister")) > sessions, "left again")
            assert not fake.updates("t-higher")

    run(scenario())
