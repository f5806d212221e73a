"""``LeaderGate`` (docs/architecture.md §5):
a follower refuses every call UNAVAILABLE naming the leader;
a leader forwards calls only while its lease is valid, checked again before every answer and
every streamed message (a leader paused past its lease sends nothing when it wakes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from fairshare.masters import ELECTION_METADATA, LEADER_METADATA, UNREACHABLE_LEADER_METADATA

from master.service.leader_gate import LeaderGate, Servicers, _streaming, _unary


class Aborted(Exception):
    pass


class FakeContext:
    def __init__(self, metadata: tuple[tuple[str, str], ...] = ()) -> None:
        self.metadata = metadata
        self.trailing: tuple[tuple[str, str], ...] = ()
        self.code: grpc.StatusCode | None = None
        self.details = ""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    def set_trailing_metadata(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self.trailing = metadata

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code, self.details = code, details
        raise Aborted


class Operator:
    async def GetState(self, request: Any, context: Any) -> str:
        return "state"


class Scheduler:
    def __init__(self, lease: list[bool]) -> None:
        self.lease = lease

    async def Subscribe(self, request: Any, context: Any) -> AsyncIterator[str]:
        yield "first"
        self.lease[0] = False  # the lease runs out between two messages
        yield "second"


def gate(valid: list[bool], expired: list[int]) -> LeaderGate:
    return LeaderGate(lambda: valid[0], lambda: expired.append(1))


def test_a_follower_refuses_with_the_leaders_address() -> None:
    the_gate = gate([True], [])
    the_gate.follow("10.0.0.2:5050")
    context = FakeContext()
    call = _unary(the_gate, "operator", "GetState")
    with pytest.raises(Aborted):
        asyncio.run(call(None, context))
    assert context.code == grpc.StatusCode.UNAVAILABLE
    assert "the leader is 10.0.0.2:5050" in context.details
    assert context.trailing == ((LEADER_METADATA, "10.0.0.2:5050"),)


def test_no_known_leader_is_said_without_a_hint() -> None:
    the_gate = gate([True], [])
    the_gate.follow(None)
    context = FakeContext()
    with pytest.raises(Aborted):
        asyncio.run(_unary(the_gate, "operator", "GetState")(None, context))
    assert context.code == grpc.StatusCode.UNAVAILABLE
    assert context.trailing == ((ELECTION_METADATA, "1"),)  # no hint: an election is on
    assert "knows no leader" in context.details


def test_a_leader_forwards_while_its_lease_is_valid_and_steps_down_when_not() -> None:
    valid, expired = [True], []
    the_gate = gate(valid, expired)
    the_gate.lead(Servicers(None, None, Operator()))
    assert asyncio.run(_unary(the_gate, "operator", "GetState")(None, FakeContext())) == "state"
    valid[0] = False
    context = FakeContext()
    with pytest.raises(Aborted):
        asyncio.run(_unary(the_gate, "operator", "GetState")(None, context))
    assert context.code == grpc.StatusCode.UNAVAILABLE and expired == [1]


def test_a_stream_sends_nothing_once_the_lease_ran_out() -> None:
    valid, expired = [True], []
    the_gate = gate(valid, expired)
    the_gate.lead(Servicers(Scheduler(valid), None, None))
    received: list[str] = []

    async def consume() -> None:
        async for message in _streaming(the_gate, "scheduler", "Subscribe")(None, FakeContext()):
            received.append(message)

    with pytest.raises(Aborted):
        asyncio.run(consume())
    assert received == ["first"] and expired == [1]


def test_a_call_during_an_election_waits_for_its_outcome() -> None:
    async def scenario() -> None:
        the_gate = gate([True], [])
        the_gate.hold = 5.0
        the_gate.follow(None)
        served = asyncio.ensure_future(_unary(the_gate, "operator", "GetState")(None, None))
        redirected_context = FakeContext()
        redirected = asyncio.ensure_future(
            _unary(the_gate, "operator", "GetState")(None, redirected_context)
        )
        await asyncio.sleep(0.05)
        assert not served.done() and not redirected.done()  # held: no leader known yet
        the_gate.lead(Servicers(None, None, Operator()))  # this master won
        assert await asyncio.wait_for(served, 1) == "state"
        assert await asyncio.wait_for(redirected, 1) == "state"

        the_gate.follow(None)
        context = FakeContext()
        held = asyncio.ensure_future(_unary(the_gate, "operator", "GetState")(None, context))
        await asyncio.sleep(0.05)
        the_gate.follow("10.0.0.3:5050")  # another master won
        with pytest.raises(Aborted):
            await asyncio.wait_for(held, 1)
        assert context.trailing == ((LEADER_METADATA, "10.0.0.3:5050"),)

    asyncio.run(scenario())


def test_without_a_hold_a_call_is_refused_at_once() -> None:
    async def scenario() -> None:
        the_gate = gate([True], [])
        the_gate.follow(None)
        with pytest.raises(Aborted):
            await asyncio.wait_for(
                _unary(the_gate, "operator", "GetState")(None, FakeContext()), 0.5
            )

    asyncio.run(scenario())


def test_a_caller_that_could_not_reach_the_named_leader_waits_for_the_next() -> None:
    async def scenario() -> None:
        the_gate = gate([True], [])
        the_gate.hold = 5.0
        the_gate.follow("10.0.0.1:5050")  # the dead leader's key has not expired yet
        plain = FakeContext()
        with pytest.raises(Aborted):  # a caller that says nothing is redirected at once
            await _unary(the_gate, "operator", "GetState")(None, plain)
        assert plain.trailing == ((LEADER_METADATA, "10.0.0.1:5050"),)
        reported = FakeContext(((UNREACHABLE_LEADER_METADATA, "10.0.0.1:5050"),))
        held = asyncio.ensure_future(_unary(the_gate, "operator", "GetState")(None, reported))
        await asyncio.sleep(0.05)
        the_gate.follow(None)  # the lease ended: an election is on
        await asyncio.sleep(0.05)
        assert not held.done()
        the_gate.follow("10.0.0.2:5050")  # another master won
        with pytest.raises(Aborted):
            await asyncio.wait_for(held, 1)
        assert reported.trailing == ((LEADER_METADATA, "10.0.0.2:5050"),)

    asyncio.run(scenario())
