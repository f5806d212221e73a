"""Fuzzing a real master, every method of the wire API, and an agent's task-log service
(issue 13), bounded in time.

One master (``--validate``: the core checks its invariants after every change) with one agent
running two tasks of one framework. Per method: raw random bytes, valid encodings with bytes
flipped, cut or repeated, and well-typed random messages (hypothesis, built from the message
descriptors: every field, with boundary values for numbers, huge and odd strings, nested
messages to a bounded depth). Whatever comes in: never INTERNAL or UNKNOWN, the master keeps
serving and logs no traceback, and what existed before (the agent, the framework, its tasks)
is unchanged. Successful calls may add things (a random Subscribe registers a framework): those
are not what is checked.

Budget: ``EXAMPLES`` examples per method and strategy (about a minute in all on one core).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from daemons import DEFAULT_MASTER_FLAGS, Daemon, health_status, start_agent, start_master
from fairshare.v1 import agent_pb2, operator_pb2, scheduler_pb2, task_logs_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wire_fakes import C, FakeAgent, FrameworkConn, get_state, task, task_counts

EXAMPLES = 100
BAD = (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)
METHODS = [
    (f"/fairshare.v1.{service}/{method.name}", method)
    for module, service in (
        (scheduler_pb2, "SchedulerService"),
        (agent_pb2, "AgentService"),
        (operator_pb2, "OperatorService"),
    )
    for method in module.DESCRIPTOR.services_by_name[service].methods
]
INTS = st.sampled_from([0, 1, -1, 2**31 - 1, -(2**31), 2**32 - 1, 2**62, 2**63 - 1, -(2**63)])
FLOATS = st.sampled_from(
    [0.0, -0.0, 5e-324, 1e-7, 1.0, 1e6, 1e300, float("inf"), float("-inf"), float("nan")]
)
STRINGS = st.one_of(
    st.sampled_from(["", "*", "x", "a" * 300, "ag-x", "fw-x", "../../etc", "a;b:c", "é\x00"]),
    st.text(max_size=20),
)


def _scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    kind = field.type
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return (
            FLOATS
            if kind == FieldDescriptor.TYPE_DOUBLE
            else FLOATS.filter(lambda v: v != v or abs(v) < 3e38 or abs(v) == float("inf"))
        )
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind == FieldDescriptor.TYPE_STRING:
        return STRINGS
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.one_of(st.binary(max_size=20), st.just(uuid.uuid4().bytes))
    if kind == FieldDescriptor.TYPE_ENUM:
        int32 = INTS.filter(lambda v: -(2**31) <= v < 2**31)
        return st.one_of(st.sampled_from([v.number for v in field.enum_type.values]), int32)
    if kind in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return INTS.filter(lambda v: 0 <= v < 2**32)
    if kind in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return INTS.filter(lambda v: v >= 0)
    if kind in (
        FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32,
    ):  # fmt: skip
        return INTS.filter(lambda v: -(2**31) <= v < 2**31)
    return INTS


@st.composite
def messages(draw: st.DrawFn, descriptor: Descriptor, depth: int = 0) -> Message:
    """A random message of ``descriptor``: each field set or not, boundary values."""
    message = GetMessageClass(descriptor)()
    for field in descriptor.fields:
        if not draw(st.booleans()):
            continue
        is_map = field.message_type is not None and field.message_type.GetOptions().map_entry
        if field.message_type is not None and not is_map:
            if depth >= 3 or field.message_type.full_name.startswith("google.protobuf.Struct"):
                continue
            count = draw(st.integers(0, 3)) if field.is_repeated else 1
            for _ in range(count):
                value = draw(messages(field.message_type, depth + 1))
                if field.is_repeated:
                    getattr(message, field.name).add().CopyFrom(value)
                else:
                    getattr(message, field.name).CopyFrom(value)
        elif is_map:
            key_field, value_field = field.message_type.fields
            if value_field.message_type is None:
                for _ in range(draw(st.integers(0, 2))):
                    getattr(message, field.name)[draw(_scalar(key_field))] = draw(
                        _scalar(value_field)
                    )
        elif field.is_repeated:
            getattr(message, field.name).extend(draw(st.lists(_scalar(field), max_size=3)))
        else:
            setattr(message, field.name, draw(_scalar(field)))
    return message


class Target:
    """The fuzzed master and what must not change."""

    def __init__(self, master: Daemon, channel: grpc.Channel) -> None:
        self.master, self.channel = master, channel
        self.agent = FakeAgent(channel, "cpus:4;mem:4096")
        self.framework = FrameworkConn(channel, "kept")
        offer = self.framework.offers()[0]
        tasks = [task(f"t{i}", "cpus:1;mem:64", offer.agent_id) for i in (1, 2)]
        self.framework.accept([offer.offer_id], tasks)
        for _ in tasks:
            update = self.framework.take("update", status__state=C.TASK_STATE_RUNNING)
            self.framework.ack(update.status)
        self.before = self.kept()
        self.codes: dict[str, set[grpc.StatusCode]] = {}

    def kept(self) -> Any:
        state = get_state(self.channel)
        framework = [
            f for f in state.frameworks if f.framework_info.framework_id == self.framework.id
        ]
        agent = [a for a in state.agents if a.agent_id == self.agent.agent_id]
        return (
            [(a.state, a.reachable, a.used.SerializeToString()) for a in agent],
            [(f.state, sorted(task_counts(f).items())) for f in framework],
            sorted(
                (t.info.task_id, t.status.state)
                for t in state.tasks
                if t.framework_id == self.framework.id
            ),
        )

    def call(self, path: str, method: Any, data: bytes) -> grpc.StatusCode:
        """Send ``data`` as the request (the first stream message); the code it ended with."""
        code = grpc.StatusCode.OK
        call: Any = None
        try:
            if method.client_streaming:
                call = self.channel.stream_stream(path)(iter([data]), timeout=5)
                next(call)
            elif method.server_streaming:
                call = self.channel.unary_stream(path)(data, timeout=5)
                next(call)
            else:
                self.channel.unary_unary(path)(data, timeout=5)
        except StopIteration:
            pass
        except grpc.RpcError as error:
            code = error.code()
        finally:
            if call is not None:
                call.cancel()
        self.codes.setdefault(path, set()).add(code)
        assert code not in BAD, (path, data[:80])
        return code


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    # the kept agent is a wire-level fake that sends no heartbeats: a long agent timeout keeps
    # it reachable however long the suite takes (it tests the calls, not liveness)
    master = start_master(
        tmp_path_factory.mktemp("fuzz") / "master", *DEFAULT_MASTER_FLAGS, "--agent-timeout", "1h"
    )
    try:
        with grpc.insecure_channel(master.address) as channel:
            yield Target(master, channel)
        log = master.log()
        assert "Traceback" not in log and "rpc.failed" not in log
    finally:
        master.kill()


def _mutations(valid: bytes, rng: random.Random, count: int) -> Iterator[bytes]:
    """``count`` variants of ``valid``: bytes flipped, cut, a slice repeated, or random."""
    for _ in range(count):
        data = bytearray(valid or b"\x00")
        how = rng.randrange(4)
        if how == 0:  # flip bytes
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif how == 1:  # cut
            data = data[: rng.randrange(len(data))]
        elif how == 2:  # repeat a slice (fields given twice, lengths that overrun)
            start = rng.randrange(len(data))
            data = data + data[start:]
        else:  # raw random bytes
            data = bytearray(rng.randbytes(rng.randint(1, 64)))
        yield bytes(data)


@pytest.mark.parametrize(("path", "method"), METHODS, ids=[m.name for _, m in METHODS])
def test_raw_and_mutated_bytes(target: Target, path: str, method: Any) -> None:
    rng = random.Random(path)
    valid = GetMessageClass(method.input_type)().SerializeToString()
    for data in _mutations(valid, rng, EXAMPLES):
        target.call(path, method, data)
    assert health_status(target.master.address) == 1
    assert target.kept() == target.before


@pytest.mark.parametrize(("path", "method"), METHODS, ids=[m.name for _, m in METHODS])
def test_well_typed_random_messages(target: Target, path: str, method: Any) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(message=messages(method.input_type))
    def fuzz(message: Message) -> None:
        data = message.SerializeToString()
        target.call(path, method, data)
        for mutated in _mutations(data, random.Random(data), 2):  # and a well-typed one, mutated
            target.call(path, method, mutated)

    fuzz()
    assert health_status(target.master.address) == 1
    assert target.kept() == target.before


def test_the_fuzz_reached_the_servicers(target: Target) -> None:
    """Some fuzzed calls were served and most refused precisely (run alone: a few of its own)."""
    for path, method in METHODS[:3]:
        for data in _mutations(b"", random.Random(path), 5):
            target.call(path, method, data)
    seen = set().union(*target.codes.values())
    assert grpc.StatusCode.INVALID_ARGUMENT in seen and not seen & set(BAD)


@pytest.fixture(scope="module")
def agent_channel(
    target: Target, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Daemon, grpc.Channel]]:
    agent = start_agent(target.master.address, tmp_path_factory.mktemp("fuzz") / "agent")
    try:
        with grpc.insecure_channel(agent.address) as channel:
            yield agent, channel
        assert "Traceback" not in agent.log()
    finally:
        agent.kill()


def test_the_agents_task_log_service(target: Target, agent_channel: Any) -> None:
    agent, channel = agent_channel
    method = task_logs_pb2.DESCRIPTOR.services_by_name["TaskLogService"].methods_by_name[
        "StreamLog"
    ]
    path = "/fairshare.v1.TaskLogService/StreamLog"
    probe = Target.__new__(Target)
    probe.channel, probe.codes = channel, {}
    for data in _mutations(b"", random.Random(path), EXAMPLES):
        probe.call(path, method, data)

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(message=messages(method.input_type))
    def fuzz(message: Message) -> None:
        probe.call(path, method, message.SerializeToString())

    fuzz()
    assert health_status(agent.address) == 1
