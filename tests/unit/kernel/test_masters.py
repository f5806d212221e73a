"""Where the master is (``fairshare.master_target``, ``fairshare.masters``): the ``--master``
syntax, the order in which a client tries masters, and a command's call that follows a
follower's redirect to the leader (issue 12)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from fairshare.master_target import EtcdTarget, MasterTarget
from fairshare.masters import (
    LEADER_METADATA,
    UNREACHABLE_LEADER_METADATA,
    MasterFinder,
    MasterUnknown,
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
