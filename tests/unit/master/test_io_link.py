"""The I/O workers' link in one process (``master.io_workers``): ``RemoteAgents`` and
``RemoteFrameworks`` (a worker's ``AgentCalls`` and ``FrameworkCalls``) on one ``WorkerLink``,
wired to ``CoreLink`` (the core's end) over the batches they exchange, with a real runtime behind
the gate. The processes, sockets and gRPC around them are
``tests/integration/test_io_workers.py``'s."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from fairshare.masters import LEADER_METADATA
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState

from master.core import CoreConfig, TaskLaunch
from master.io_workers.core_link import CoreLink, _fenced
from master.io_workers.protocol import (
    ANSWERED,
    CALL,
    COMMANDS,
    END,
    EVENTS,
    HEARD,
    OPEN,
    OPENED,
    REFUSED,
    RPC_COUNTS,
    SUBSCRIBED,
    decode,
    encode,
    read_frame,
    write_frame,
)
from master.io_workers.remote_agents import RemoteAgents, RemoteRefusal
from master.io_workers.remote_frameworks import UNREACHABLE_LEADER, RemoteFrameworks
from master.io_workers.worker_link import WorkerLink
from master.model import (
    AgentCommand,
    AgentSpec,
    FrameworkInfo,
    OffersEvent,
    StatusUpdate,
    StreamEnd,
)
from master.runtime import MasterRuntime, RuntimeConfig
from master.runtime.sessions import Channel
from master.service.agent import AgentServicer
from master.service.leader_gate import LeaderGate, Servicers
from master.service.scheduler import SchedulerServicer

SPEC = AgentSpec("h", 0, ResourceVector(cpus=4, mem=64))


class _Worker:
    """One worker's end: its link, and the two ports on it."""

    def __init__(self) -> None:
        self.link = WorkerLink()
        self.agents = RemoteAgents(self.link)
        self.frameworks = RemoteFrameworks(self.link)


def _with_link(body: Callable[[MasterRuntime, _Worker, CoreLink], Awaitable[None]]) -> None:
    """Run ``body`` with a runtime whose gate leads, a ``CoreLink`` and one worker's end linked
    to it."""

    async def main() -> None:
        runtime = MasterRuntime(RuntimeConfig(core=CoreConfig(validate=True)))
        await runtime.start()
        gate = LeaderGate(lambda: True, lambda: None)
        scheduler = SchedulerServicer(runtime.frameworks)
        gate.lead(Servicers(scheduler, AgentServicer(runtime.agents), None))
        core, worker = CoreLink(gate), _Worker()
        core.open()

        async def pump(responses: AsyncIterator[bytes]) -> None:
            async for data in responses:
                worker.link.deliver(data)
            worker.link.link_ended()

        link = asyncio.ensure_future(pump(core.serve(worker.link.batches(), "0")))
        try:
            await body(runtime, worker, core)
        finally:
            link.cancel()
            await asyncio.gather(link, return_exceptions=True)
            await runtime.stop()

    asyncio.run(main())


async def _session(opened: Any) -> Any:
    return await asyncio.wait_for(opened, 5)


async def _end(channel: Channel[AgentCommand]) -> StreamEnd:
    while True:
        _, end = await asyncio.wait_for(channel.get_batch(100), 5)
        if end is not None:
            return end


def test_a_registration_over_the_link_is_the_runtimes() -> None:
    async def body(runtime: MasterRuntime, worker: _Worker, core: CoreLink) -> None:
        session = await _session(worker.agents.register(SPEC, "alice"))
        assert session.agent_id in runtime.state.agents
        assert runtime.state.agents[session.agent_id].channel is not None  # its stream is open
        assert session.epoch == runtime.state.leader.epoch
        assert set(core.depths()) == {"0"}  # one worker linked, its queues reported

    _with_link(body)


def test_a_refused_message_ends_its_session_with_its_code() -> None:
    async def body(runtime: MasterRuntime, worker: _Worker, core: CoreLink) -> None:
        session = await _session(worker.agents.register(SPEC))
        other = await _session(worker.agents.register(SPEC))
        # An update naming another agent is refused, as in one process: INVALID_ARGUMENT.
        update = StatusUpdate("t1", other.agent_id, TaskState.RUNNING, uuid=b"u" * 16)
        worker.agents.update_statuses(session.agent_id, session.channel, [("fw-1", update, None)])
        end = await _end(session.channel)
        assert end.code == "INVALID_ARGUMENT"
        assert runtime.state.agents[session.agent_id].channel is None  # the core detached it
        assert runtime.state.agents[other.agent_id].channel is not None

    _with_link(body)


def test_an_unknown_agent_is_refused_and_the_worker_hears_the_code() -> None:
    async def body(runtime: MasterRuntime, worker: _Worker, core: CoreLink) -> None:
        with pytest.raises(RemoteRefusal) as refused:
            await _session(worker.agents.reregister("ag-nobody", SPEC, []))
        assert refused.value.code == "FAILED_PRECONDITION"

    _with_link(body)


def test_a_follower_refuses_naming_the_leader_in_the_trailing_metadata() -> None:
    async def body(runtime: MasterRuntime, worker: _Worker, core: CoreLink) -> None:
        core.gate.follow("10.0.0.2:5050")
        with pytest.raises(RemoteRefusal) as refused:
            await _session(worker.agents.register(SPEC))
        assert refused.value.code == "UNAVAILABLE"
        assert refused.value.trailing_metadata == ((LEADER_METADATA, "10.0.0.2:5050"),)

    _with_link(body)


def test_an_open_during_an_election_waits_for_its_outcome() -> None:
    async def body(runtime: MasterRuntime, worker: _Worker, core: CoreLink) -> None:
        servicers = Servicers(None, AgentServicer(runtime.agents), None)
        core.gate.follow(None)  # an election is on
        core.gate.hold = 5.0
        opened = asyncio.ensure_future(worker.agents.register(SPEC))
        await asyncio.sleep(0.05)
        assert not opened.done()  # held, not refused
        core.gate.lead(servicers)  # this master won
        session = await _session(opened)
        assert session.agent_id in runtime.state.agents

    _with_link(body)


def test_the_end_of_the_link_ends_its_sessions_as_broken_streams() -> None:
    async def body(runtime: MasterRuntime, worker: _Worker, core: CoreLink) -> None:
        session = await _session(worker.agents.register(SPEC))
        worker.link.link_ended()  # the worker side goes away: its request stream ends
        end = await _end(session.channel)
        assert end.code == "UNAVAILABLE"
        for _ in range(100):
            if runtime.state.agents[session.agent_id].channel is None:
                break
            await asyncio.sleep(0.01)
        assert runtime.state.agents[session.agent_id].channel is None
        assert not core.links

    _with_link(body)


async def _events(channel: Channel[Any], kind: type) -> Any:
    """The next event of ``kind`` on a framework's channel (others are skipped)."""
    while True:
        event = await asyncio.wait_for(channel.get(), 5)
        assert not isinstance(event, StreamEnd), event
        if isinstance(event, kind):
            return event


def test_a_subscription_over_the_link_gets_its_offers_and_its_calls_apply() -> None:
    async def body(runtime: MasterRuntime, worker: _Worker, core: CoreLink) -> None:
        subscribed = await asyncio.wait_for(
            worker.frameworks.subscribe(FrameworkInfo(name="fw"), None, False, "alice"), 5
        )
        framework_id = subscribed.framework_id
        link = runtime.state.frameworks[framework_id]
        assert link.channel is not None and link.spec.name == "fw"
        assert subscribed.master_id == runtime.state.master_id
        await _session(worker.agents.register(SPEC))
        offers = await _events(subscribed.channel, OffersEvent)  # the core's events, batched
        offer = offers.offers[0]
        launch = TaskLaunch("t1", "t1", ResourceVector(cpus=1, mem=8), offer.agent_id)
        await asyncio.wait_for(
            worker.frameworks.accept(framework_id, [offer.offer_id], [launch], None, "alice"), 5
        )
        assert (framework_id, "t1") in runtime.state.core.tasks  # applied before the answer
        worker.frameworks.unsubscribe(framework_id, subscribed.channel)  # the client went away
        for _ in range(100):
            if link.channel is None:
                break
            await asyncio.sleep(0.01)
        assert link.channel is None  # the core heard the stream end: failover begins

    _with_link(body)


def test_a_refused_call_carries_the_cores_code_and_changes_nothing() -> None:
    async def body(runtime: MasterRuntime, worker: _Worker, core: CoreLink) -> None:
        with pytest.raises(RemoteRefusal) as refused:
            await asyncio.wait_for(worker.frameworks.decline("fw-nobody", ["o1"], None), 5)
        assert refused.value.code == "NOT_FOUND"
        subscribed = await asyncio.wait_for(
            worker.frameworks.subscribe(FrameworkInfo(name="fw"), None, False, "alice"), 5
        )
        with pytest.raises(RemoteRefusal) as refused:  # not the framework's role
            await asyncio.wait_for(
                worker.frameworks.suppress(subscribed.framework_id, "other", "alice"), 5
            )
        assert refused.value.code == "INVALID_ARGUMENT"
        assert not runtime.state.core.frameworks[subscribed.framework_id].suppressed
        assert subscribed.framework_id in runtime.state.frameworks
        # Only ``FrameworkCalls``' calls may be named: anything else is refused, not run.
        future = worker.frameworks._ask(CALL, "alice", "heartbeat", ())
        with pytest.raises(RemoteRefusal) as refused:
            await asyncio.wait_for(future, 5)
        assert refused.value.code == "INTERNAL"

    _with_link(body)


def test_a_call_during_an_election_waits_and_a_follower_names_the_leader() -> None:
    async def body(runtime: MasterRuntime, worker: _Worker, core: CoreLink) -> None:
        servicers = Servicers(
            SchedulerServicer(runtime.frameworks), AgentServicer(runtime.agents), None
        )
        core.gate.follow("10.0.0.2:5050")
        with pytest.raises(RemoteRefusal) as refused:
            await asyncio.wait_for(worker.frameworks.revive("fw-1", "", None), 5)
        assert refused.value.code == "UNAVAILABLE"
        assert refused.value.trailing_metadata == ((LEADER_METADATA, "10.0.0.2:5050"),)
        core.gate.hold = 5.0
        # The caller could not reach the leader this master names: the call waits.
        UNREACHABLE_LEADER.set("10.0.0.2:5050")
        subscribing = asyncio.ensure_future(
            worker.frameworks.subscribe(FrameworkInfo(name="fw"), None, False, None)
        )
        await asyncio.sleep(0.05)
        assert not subscribing.done()  # held, not refused
        core.gate.lead(servicers)  # this master won
        subscribed = await asyncio.wait_for(subscribing, 5)
        assert subscribed.framework_id in runtime.state.frameworks

    _with_link(body)


def test_the_end_of_the_link_ends_its_subscriptions_and_fails_its_calls() -> None:
    async def body(runtime: MasterRuntime, worker: _Worker, core: CoreLink) -> None:
        subscribed = await asyncio.wait_for(
            worker.frameworks.subscribe(FrameworkInfo(name="fw"), None, False, None), 5
        )
        link = runtime.state.frameworks[subscribed.framework_id]
        worker.link.link_ended()
        assert (await _end(subscribed.channel)).code == "UNAVAILABLE"
        with pytest.raises(RemoteRefusal) as refused:
            await asyncio.wait_for(worker.frameworks.suppress(subscribed.framework_id), 5)
        assert refused.value.code == "UNAVAILABLE"
        for _ in range(100):
            if link.channel is None:
                break
            await asyncio.sleep(0.01)
        assert link.channel is None

    _with_link(body)


def test_a_workers_call_counts_add_to_the_cores() -> None:
    async def body(runtime: MasterRuntime, worker: _Worker, core: CoreLink) -> None:
        core.rpc_counts[("OperatorService/GetState", "OK")] = 2  # counted by the core itself
        accepted = ("SchedulerService/Accept", "OK")
        worker.link.push((RPC_COUNTS, 0, {accepted: 3}))
        worker.link.push((RPC_COUNTS, 0, {accepted: 1, ("AgentService/Connect", "CANCELLED"): 1}))
        await _session(worker.agents.register(SPEC))  # answered after the counts were applied
        assert core.rpc_counts == {
            ("OperatorService/GetState", "OK"): 2,
            accepted: 4,
            ("AgentService/Connect", "CANCELLED"): 1,
        }

    _with_link(body)


def test_a_full_queue_asks_the_reader_to_wait_until_it_drains() -> None:
    async def main() -> None:
        link = WorkerLink(limit=2)
        remote = RemoteAgents(link)
        channel: Any = object()
        assert remote.heard("ag-1", channel) is None  # not a session of this link: ignored
        link.push((0, 0))
        room = link.push((0, 0))
        assert room is not None
        batches = link.batches()
        depth, operations = decode(await anext(batches))
        assert (depth, len(operations)) == (2, 2)
        await asyncio.wait_for(room, 1)  # drained: the reader goes on

    asyncio.run(main())


def test_a_deposed_leaders_batch_keeps_only_the_ends() -> None:
    operations = [
        (OPENED, 1, "ag-1", "m", 5.0, 0.1, 3, b""),
        (COMMANDS, 2, ["launch"]),
        (END, 3, StreamEnd("OK")),
        (REFUSED, 4, "NOT_FOUND", "x"),
        (SUBSCRIBED, 5, "fw-1", "m", 5.0, False, 1.0),
        (EVENTS, 6, ["offers"]),
        (ANSWERED, 7),
    ]
    no_longer = "this master no longer leads"
    assert _fenced(operations) == [
        (REFUSED, 1, "UNAVAILABLE", no_longer),
        (END, 3, StreamEnd("OK")),
        (REFUSED, 4, "NOT_FOUND", "x"),
        (REFUSED, 5, "UNAVAILABLE", no_longer),
        (REFUSED, 7, "UNAVAILABLE", no_longer),
    ]


def test_frames_cross_a_socket_whole_and_in_order_and_its_end_is_none() -> None:
    async def main() -> None:
        left, right = socket.socketpair()
        reader, left_writer = await asyncio.open_connection(sock=left)
        right_reader, writer = await asyncio.open_connection(sock=right)
        batches = [encode([(HEARD, n)]) for n in range(3)] + [b"x" * 300_000, b""]
        for batch in batches:
            write_frame(writer, batch)
        await writer.drain()
        writer.close()
        assert [await read_frame(reader) for _ in batches] == batches
        assert await read_frame(reader) is None
        left_writer.close()
        assert right_reader is not None

    asyncio.run(main())


def test_a_workers_connection_carries_its_link_and_its_end_ends_its_sessions() -> None:
    """``CoreLink.serve_connection`` over a real socket pair: the worker's index, then its
    batches; the connection's end ends the worker's sessions as broken streams."""

    async def main() -> None:
        runtime = MasterRuntime(RuntimeConfig(core=CoreConfig(validate=True)))
        await runtime.start()
        gate = LeaderGate(lambda: True, lambda: None)
        gate.lead(Servicers(None, AgentServicer(runtime.agents), None))
        core = CoreLink(gate)
        core.open()
        core_end, worker_end = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=core_end)
        served = asyncio.ensure_future(core.serve_connection(reader, writer))
        from_core, to_core = await asyncio.open_connection(sock=worker_end)
        try:
            write_frame(to_core, encode(7))
            assert decode(await asyncio.wait_for(read_frame(from_core), 5)) == []  # core ready
            write_frame(to_core, encode((1, [(OPEN, 1, None, None, SPEC, ())])))
            await to_core.drain()
            opened = decode(await asyncio.wait_for(read_frame(from_core), 5))
            assert opened[0][:2] == (OPENED, 1) and set(core.links) == {"7"}
            agent_id = opened[0][2]
            assert runtime.state.agents[agent_id].channel is not None
            to_core.close()  # the worker died
            await asyncio.wait_for(served, 5)
            assert runtime.state.agents[agent_id].channel is None  # its session ended
            assert not core.links
        finally:
            served.cancel()
            await runtime.stop()

    asyncio.run(main())
