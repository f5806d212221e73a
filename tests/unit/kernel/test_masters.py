"""Where the master is (``fairshare.master_target``, ``fairshare.masters``): the ``--master``
syntax, the order in which a client tries masters, and a command's call that follows a
follower's redirect to the leader (issue 12)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from fairshare.master_target import EtcdTarget, MasterTarget
from fairshare.masters import (
    ELECTION_METADATA,
    LEADER_METADATA,
    NO_LEADER_YET,
    UNREACHABLE_LEADER_METADATA,
    MasterFinder,
    MasterUnknown,
    NoLeaderYet,
    call_leader,
    leader_hint,
)
from fairshare.settings import master_address


def test_master_targets_parse_one_address_a_list_and_etcd() -> None:
    one = MasterTarget.parse(" m:5050 ")
    assert one.addresses == ("m:5050",) and one.etcd is None and str(one) == "m:5050"
    many = MasterTarget.parse("a:5050, b:5051,a:5050,[::1]:5052")
    assert many.addresses == ("a:5050", "b:5051", "[::1]:5052")
    assert MasterTarget.parse(str(many)) == many
    etcd = MasterTarget.parse("etcd://h1:2379,h2,[fd00::1]:2380/clusters/prod/")
    assert etcd.etcd == EtcdTarget(
        (("h1", 2379), ("h2", 2379), ("fd00::1", 2380)), "/clusters/prod"
    )
    assert str(etcd) == "etcd://h1:2379,h2:2379,[fd00::1]:2380/clusters/prod"
    assert MasterTarget.parse(str(etcd)) == etcd
    assert MasterTarget.parse("ETCD://h1").etcd == EtcdTarget((("h1", 2379),), "/fairshare")
    assert EtcdTarget((("h", 1),), "/p").key("leader") == b"/p/leader"
    assert master_address("a:1,b:2") == "a:1,b:2"
    assert master_address("etcd://h1:2379/x") == "etcd://h1:2379/x"


@pytest.mark.parametrize(
    "raw",
    ["", ",", "host", "a:5050,host", "a:0", "::1:5050", "etcd://", "etcd://h:0", "etcd://h:x/p"],
)
def test_bad_master_targets_are_refused(raw: str) -> None:
    with pytest.raises(ValueError):
        MasterTarget.parse(raw)


def test_the_finder_round_robins_the_list_prefers_who_answered_and_follows_a_hint_once() -> None:
    async def scenario() -> None:
        finder = MasterFinder("a:1,b:2,c:3", random.Random(0))
        first = await finder.next()
        order = ["a:1", "b:2", "c:3"]
        finder.failed(first)
        second = await finder.next()
        assert second == order[(order.index(first) + 1) % 3]
        third = order[(order.index(first) + 2) % 3]
        assert finder.redirected(second, first) is True
        assert await finder.next() == first  # the hint, once
        assert await finder.next() == third  # then the list, past the two that did not lead
        finder.answered("b:2")
        assert await finder.next() == "b:2" and finder.preferred == "b:2"
        finder.failed("b:2")
        assert finder.preferred is None
        assert finder.redirected("a:1", None) is False  # a follower that knows no leader
        assert finder.redirected("a:1", "a:1") is False  # nor one naming itself
        await finder.close()

    asyncio.run(scenario())


def test_an_etcd_target_that_cannot_be_read_names_no_master() -> None:
    async def scenario() -> None:
        finder = MasterFinder("etcd://127.0.0.1:1/x", etcd_timeout=0.5)
        with pytest.raises(MasterUnknown, match="cannot read the leader") as raised:
            await finder.next()
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE  # handled as a master down
        await finder.close()

    asyncio.run(scenario())


class Follower(grpc.GenericRpcHandler):  # type: ignore[misc]
    """A server that answers every call UNAVAILABLE naming ``leader`` (or echoes, if None)."""

    def __init__(self, leader: str | None) -> None:
        self.leader = leader
        self.calls = 0

    def service(self, details: Any) -> grpc.RpcMethodHandler[bytes, bytes]:
        def answer(request: bytes, context: grpc.ServicerContext) -> bytes:
            self.calls += 1
            if self.leader is None:
                return b"leader:" + request
            context.set_trailing_metadata(((LEADER_METADATA, self.leader),))
            context.abort(grpc.StatusCode.UNAVAILABLE, f"a follower of {self.leader}")
            raise AssertionError("abort raises")

        return grpc.unary_unary_rpc_method_handler(answer)


@pytest.fixture
def servers() -> Iterator[list[tuple[str, Follower]]]:
    started: list[tuple[grpc.Server, str, Follower]] = []

    def start(handler: Follower) -> str:
        server = grpc.server(futures.ThreadPoolExecutor(2))
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        started.append((server, f"127.0.0.1:{port}", handler))
        return f"127.0.0.1:{port}"

    leader = Follower(None)
    leader_address = start(leader)
    start(Follower(leader_address))
    try:
        yield [(address, handler) for _, address, handler in started]
    finally:
        for server, _, _ in started:
            server.stop(None)


def _echo(channel: grpc.Channel) -> bytes:
    call = channel.unary_unary("/test.Echo/Echo")
    answer: bytes = call(b"ping", timeout=5)
    return answer


def test_a_command_follows_the_redirect_of_a_follower(servers: list[tuple[str, Follower]]) -> None:
    (_, leading), (follower, following) = servers
    assert call_leader(follower, _echo) == b"leader:ping"
    assert following.calls == 1 and leading.calls == 1
    assert call_leader(f"127.0.0.1:1,{follower}", _echo) == b"leader:ping"  # one is down


def test_a_command_raises_the_last_error_when_no_master_leads() -> None:
    with pytest.raises(grpc.RpcError) as raised:
        call_leader("127.0.0.1:1,127.0.0.1:2", _echo)
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]


def test_leader_hints_are_read_from_trailing_metadata() -> None:
    assert leader_hint(((LEADER_METADATA, "a:1"), ("x", "y"))) == "a:1"
    assert leader_hint(((LEADER_METADATA, b"a:1"),)) == "a:1"
    assert leader_hint(()) is None and leader_hint(None) is None


def test_a_named_leader_that_did_not_answer_is_reported_until_a_leader_answers() -> None:
    async def scenario() -> None:
        finder = MasterFinder("a:1,b:2,c:3", random.Random(0))
        first = await finder.next()
        assert finder.redirected(first, "dead:9")
        assert await finder.next() == "dead:9"
        finder.failed("dead:9")
        assert finder.report() == ((UNREACHABLE_LEADER_METADATA, "dead:9"),)
        follower = await finder.next()
        finder.failed(follower)  # a plain failure elsewhere keeps the report
        assert finder.report() == ((UNREACHABLE_LEADER_METADATA, "dead:9"),)
        finder.answered(await finder.next())
        assert finder.report() == ()

    asyncio.run(scenario())


class Electing(grpc.GenericRpcHandler):  # type: ignore[misc]
    """A master during an election: names the dead leader ``dead`` until a caller says it did
    not answer, then knows no leader for ``rounds`` calls, then leads (echoes)."""

    def __init__(self, dead: str, rounds: int) -> None:
        self.dead = dead
        self.rounds = rounds
        self.reported: list[str] = []

    def service(self, details: Any) -> grpc.RpcMethodHandler[bytes, bytes]:
        def answer(request: bytes, context: grpc.ServicerContext) -> bytes:
            said = dict(context.invocation_metadata()).get(UNREACHABLE_LEADER_METADATA)
            if said is None:
                context.set_trailing_metadata(((LEADER_METADATA, self.dead),))
                context.abort(grpc.StatusCode.UNAVAILABLE, f"the leader is {self.dead}")
            self.reported.append(str(said))
            if self.rounds > 0:
                self.rounds -= 1
                context.set_trailing_metadata(((ELECTION_METADATA, "1"),))
                context.abort(grpc.StatusCode.UNAVAILABLE, "knows no leader now")
            return b"leader:" + request

        return grpc.unary_unary_rpc_method_handler(answer)


def _serve(handler: grpc.GenericRpcHandler) -> tuple[grpc.Server, str]:
    server = grpc.server(futures.ThreadPoolExecutor(2))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


def test_a_command_during_an_election_says_so_and_waits_for_the_new_leader() -> None:
    """Issue 24: the leader was killed; the follower names it until told it is dead, then
    knows none for a while: the command says "no leader yet" once and gets its answer."""
    electing = Electing("127.0.0.1:1", rounds=3)
    server, address = _serve(electing)
    told: list[str] = []
    try:
        started = time.monotonic()
        answer = call_leader(address, _echo, election_wait=10, on_election=told.append)
    finally:
        server.stop(None)
    assert answer == b"leader:ping"
    assert len(told) == 1 and told[0].startswith(NO_LEADER_YET), told
    assert electing.reported and set(electing.reported) == {"127.0.0.1:1"}  # the dead one named
    assert time.monotonic() - started < 8


def test_an_election_that_does_not_end_in_the_wait_is_named_as_such() -> None:
    server, address = _serve(Electing("127.0.0.1:1", rounds=10**6))
    try:
        started = time.monotonic()
        with pytest.raises(NoLeaderYet, match=NO_LEADER_YET) as raised:
            call_leader(address, _echo, election_wait=1.5)
    finally:
        server.stop(None)
    assert 1.5 <= time.monotonic() - started < 6
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE


def test_masters_that_are_all_down_fail_at_once_without_waiting_for_an_election() -> None:
    told: list[str] = []
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as raised:
        call_leader("127.0.0.1:1,127.0.0.1:2", _echo, on_election=told.append)
    assert not isinstance(raised.value, NoLeaderYet) and not told
    assert time.monotonic() - started < 5
