"""``LeaderGate`` (DESIGN.md §3b): a follower refuses every call UNAVAILABLE naming the leader;
a leader forwards calls only while its lease is valid, checked again before every answer and
every streamed message (a leader paused past its lease sends nothing when it wakes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from fairshare.masters import LEADER_METADATA

from master.service.leader_gate import LeaderGate, Servicers, _streaming, _unary


class Aborted(Exception):
    pass


class FakeContext:
    def __init__(self) -> None:
        self.trailing: tuple[tuple[str, str], ...] = ()
        self.code: grpc.StatusCode | None = None
        self.details = ""

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
    assert context.code == grpc.StatusCode.UNAVAILABLE and not context.trailing
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
