"""Values that used to break a real master (issue 13): extreme timestamps and durations,
undecodable bytes, absurd weights and names. Each is refused with INVALID_ARGUMENT or accepted
and written back out; GetState keeps working, the stream keeps working, no traceback is logged,
and refusals are logged a few lines a second at most."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest
from daemons import Daemon
from fairshare.v1 import agent_pb2, common_pb2, operator_pb2, scheduler_pb2
from google.protobuf.timestamp_pb2 import Timestamp
from wire_fakes import FakeAgent, FrameworkConn, get_state, task

C = common_pb2
Code = grpc.StatusCode
LAST_INSTANT = Timestamp(
    seconds=253_402_300_799, nanos=999_999_999
)  # 9999-12-31T23:59:59.999999999
METHODS = [
    (f"/fairshare.v1.{service}/{method.name}", method.client_streaming, method.server_streaming)
    for module, service in (
        (scheduler_pb2, "SchedulerService"),
        (agent_pb2, "AgentService"),
        (operator_pb2, "OperatorService"),
    )
    for method in module.DESCRIPTOR.services_by_name[service].methods
]


@pytest.fixture
def channel(master: Daemon) -> Any:
    with grpc.insecure_channel(master.address) as opened:
        yield opened


def _status(agent: FakeAgent, framework_id: str, task_id: str, stamp: Timestamp) -> None:
    status = C.TaskStatus(
        task_id=task_id,
        agent_id=agent.agent_id,
        state=C.TASK_STATE_RUNNING,
        uuid=uuid.uuid4().bytes,
        source=C.TaskStatus.SOURCE_AGENT,
        timestamp=stamp,
    )
    update = agent_pb2.StatusUpdate(
        framework_id=framework_id, status=status, latest_state=status.state
    )
    agent.send(agent_pb2.ConnectRequest(updates=agent_pb2.StatusUpdates(updates=[update])))


def test_the_last_instant_and_the_longest_failover_are_written_back_out(
    master: Daemon, channel: grpc.Channel
) -> None:
    agent = FakeAgent(channel, "cpus:2;mem:2048", auto=False)
    framework = FrameworkConn(channel, "late", failover_timeout={"seconds": 315_576_000_000})
    offer = framework.offers()[0]
    framework.accept([offer.offer_id], [task("t", "cpus:1;mem:1", offer.agent_id)])
    agent.take("launch_tasks")
    _status(agent, framework.id, "t", LAST_INSTANT)
    update = framework.take("update").status
    assert update.timestamp.seconds <= LAST_INSTANT.seconds  # written back out, in range
    framework.ack(update)
    framework.close()  # disconnected with the longest failover timeout
    state = get_state(channel)  # not INTERNAL
    assert state.frameworks[0].failover_deadline.seconds <= LAST_INSTANT.seconds
    again = FrameworkConn(channel, "late", framework_id=framework.id)  # resubscribes fine
    assert again.id == framework.id
    # One step beyond the range: INVALID_ARGUMENT, the agent's stream ends, nothing changed.
    _status(agent, framework.id, "t", Timestamp(seconds=253_402_300_800))
    assert agent.ended() == Code.INVALID_ARGUMENT
    get_state(channel)
    assert "Traceback" not in master.log()


@pytest.mark.parametrize(
    ("info", "named"),
    [
        ({"weight": 5e-324}, "weight"),
        ({"weight": 1e300}, "weight"),
        ({"name": "n" * 100_000}, "framework_info.name"),
        ({"principal": "p" * 10_000}, "framework_info.principal"),
        ({"role": "r" * 10_000}, "framework_info.role"),
        ({"failover_timeout": {"seconds": 315_576_000_001}}, "failover_timeout"),
    ],
)
def test_absurd_subscriptions_are_invalid(
    channel: grpc.Channel, info: dict[str, Any], named: str
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        FrameworkConn(channel, info.pop("name", "x"), **info)
    assert caught.value.code() == Code.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert named in caught.value.details()  # type: ignore[attr-defined]
    assert not get_state(channel).frameworks


def test_an_agent_bigger_than_any_machine_is_refused(channel: grpc.Channel) -> None:
    """4*10^15 cpus (near the largest quantity the wire carries) would shrink every
    framework's cpu share to nothing: INVALID_ARGUMENT naming the resource and the flag, nothing
    registered. The largest machines are admitted; a resource the cap does not name is capped
    by its ``*`` entry (issue 23: a million of it)."""
    with pytest.raises(grpc.RpcError) as caught:
        FakeAgent(channel, "cpus:4000000000000000;mem:64")
    assert caught.value.code() == Code.INVALID_ARGUMENT  # type: ignore[attr-defined]
    details = caught.value.details()  # type: ignore[attr-defined]
    assert "cpus" in details and "--max-agent-resources" in details, details
    assert not get_state(channel).agents
    with pytest.raises(grpc.RpcError) as caught:
        FakeAgent(channel, "cpus:1920;mem:33554432;widgets:1000000000000")
    assert "--max-agent-resources *:1000000" in caught.value.details()  # type: ignore[attr-defined]
    FakeAgent(channel, "cpus:1920;mem:33554432;widgets:1000000")
    assert len(get_state(channel).agents) == 1


def test_undecodable_bytes_to_every_method_are_invalid_without_a_traceback(
    master: Daemon, channel: grpc.Channel
) -> None:
    garbage = (b"\xff\xff\xff\xff", b"\x0a\xff\x01", b"\x08" + b"\xff" * 11, bytes(range(64)))
    for _ in range(10):
        for path, client_stream, server_stream in METHODS:
            for data in garbage:
                try:
                    if client_stream:
                        next(channel.stream_stream(path)(iter([data]), timeout=10))
                    elif server_stream:
                        next(channel.unary_stream(path)(data, timeout=10))
                    else:
                        channel.unary_unary(path)(data, timeout=10)
                except grpc.RpcError as error:
                    assert error.code() in (Code.INVALID_ARGUMENT,), (path, data, error)
                else:
                    pytest.fail(f"{path} accepted {data!r}")
    get_state(channel)
    log = master.log()
    assert "Traceback" not in log and "rpc.failed" not in log
    # 10 x 19 x 4 = 760 refusals logged in a few rate-limited lines (per method: a burst of 5,
    # then about one a second).
    lines = [line for line in log.splitlines() if "rpc.undecodable" in line]
    assert 0 < len(lines) <= 19 * 5 + 19 * 10, len(lines)
