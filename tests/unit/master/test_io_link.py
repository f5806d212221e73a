"""The I/O workers' link in one process (``master.io_workers``): ``RemoteAgents`` (a worker's
``AgentCalls``) wired to ``CoreLink`` (the core's end) over the batches they exchange, with a real
runtime behind the gate. The processes, sockets and gRPC around them are
``tests/integration/test_io_workers.py``'s."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from fairshare.masters import LEADER_METADATA
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState

from master.core import CoreConfig
from master.io_workers.core_link import CoreLink, _fenced
from master.io_workers.protocol import COMMANDS, END, OPENED, REFUSED, decode
from master.io_workers.remote_agents import RemoteAgents, RemoteRefusal
from master.model import AgentCommand, AgentSpec, StatusUpdate, StreamEnd
from master.runtime import MasterRuntime, RuntimeConfig
from master.runtime.sessions import Channel
from master.service.agent import AgentServicer
from master.service.leader_gate import LeaderGate, Servicers

SPEC = AgentSpec("h", 0, ResourceVector(cpus=4, mem=64))


class _Context:
    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("fairshare-io-worker", "0"),)


def _with_link(body: Callable[[MasterRuntime, RemoteAgents, CoreLink], Awaitable[None]]) -> None:
    """Run ``body`` with a runtime whose gate leads, a ``CoreLink`` and one worker's
    ``RemoteAgents`` linked to it."""

    async def main() -> None:
        runtime = MasterRuntime(RuntimeConfig(core=CoreConfig(validate=True)))
        await runtime.start()
        gate = LeaderGate(lambda: True, lambda: None)
        gate.lead(Servicers(None, AgentServicer(runtime.agents), None))
        core, remote = CoreLink(gate), RemoteAgents()
        core.open()

        async def pump(responses: AsyncIterator[bytes]) -> None:
            async for data in responses:
                remote.deliver(data)
            remote.link_ended()

        link = asyncio.ensure_future(pump(core.serve(remote.batches(), _Context())))
        try:
            await body(runtime, remote, core)
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
    async def body(runtime: MasterRuntime, remote: RemoteAgents, core: CoreLink) -> None:
        session = await _session(remote.register(SPEC, "alice"))
        assert session.agent_id in runtime.state.agents
        assert runtime.state.agents[session.agent_id].channel is not None  # its stream is open
        assert session.epoch == runtime.state.leader.epoch
        assert set(core.depths()) == {"0"}  # one worker linked, its queues reported

    _with_link(body)


def test_a_refused_message_ends_its_session_with_its_code() -> None:
    async def body(runtime: MasterRuntime, remote: RemoteAgents, core: CoreLink) -> None:
        session = await _session(remote.register(SPEC))
        other = await _session(remote.register(SPEC))
        # An update naming another agent is refused, as in one process: INVALID_ARGUMENT.
        update = StatusUpdate("t1", other.agent_id, TaskState.RUNNING, uuid=b"u" * 16)
        remote.update_statuses(session.agent_id, session.channel, [("fw-1", update, None)])
        end = await _end(session.channel)
        assert end.code == "INVALID_ARGUMENT"
        assert runtime.state.agents[session.agent_id].channel is None  # the core detached it
        assert runtime.state.agents[other.agent_id].channel is not None

    _with_link(body)


def test_an_unknown_agent_is_refused_and_the_worker_hears_the_code() -> None:
    async def body(runtime: MasterRuntime, remote: RemoteAgents, core: CoreLink) -> None:
        with pytest.raises(RemoteRefusal) as refused:
            await _session(remote.reregister("ag-nobody", SPEC, []))
        assert refused.value.code == "FAILED_PRECONDITION"

    _with_link(body)


def test_a_follower_refuses_naming_the_leader_in_the_trailing_metadata() -> None:
    async def body(runtime: MasterRuntime, remote: RemoteAgents, core: CoreLink) -> None:
        core.gate.follow("10.0.0.2:5050")
        with pytest.raises(RemoteRefusal) as refused:
            await _session(remote.register(SPEC))
        assert refused.value.code == "UNAVAILABLE"
        assert refused.value.trailing_metadata == ((LEADER_METADATA, "10.0.0.2:5050"),)

    _with_link(body)


def test_an_open_during_an_election_waits_for_its_outcome() -> None:
    async def body(runtime: MasterRuntime, remote: RemoteAgents, core: CoreLink) -> None:
        servicers = Servicers(None, AgentServicer(runtime.agents), None)
        core.gate.follow(None)  # an election is on
        core.gate.hold = 5.0
        opened = asyncio.ensure_future(remote.register(SPEC))
        await asyncio.sleep(0.05)
        assert not opened.done()  # held, not refused
        core.gate.lead(servicers)  # this master won
        session = await _session(opened)
        assert session.agent_id in runtime.state.agents

    _with_link(body)


def test_the_end_of_the_link_ends_its_sessions_as_broken_streams() -> None:
    async def body(runtime: MasterRuntime, remote: RemoteAgents, core: CoreLink) -> None:
        session = await _session(remote.register(SPEC))
        remote.link_ended()  # the worker side goes away: its request stream ends
        end = await _end(session.channel)
        assert end.code == "UNAVAILABLE"
        for _ in range(100):
            if runtime.state.agents[session.agent_id].channel is None:
                break
            await asyncio.sleep(0.01)
        assert runtime.state.agents[session.agent_id].channel is None
        assert not core.links

    _with_link(body)


def test_a_full_queue_asks_the_reader_to_wait_until_it_drains() -> None:
    async def main() -> None:
        remote = RemoteAgents(limit=2)
        channel: Any = object()
        assert remote.heard("ag-1", channel) is None  # not a session of this link: ignored
        remote._push((0, 0))
        room = remote._push((0, 0))
        assert room is not None
        batches = remote.batches()
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
    ]
    assert _fenced(operations) == [
        (REFUSED, 1, "UNAVAILABLE", "this master no longer leads"),
        (END, 3, StreamEnd("OK")),
        (REFUSED, 4, "NOT_FOUND", "x"),
    ]
