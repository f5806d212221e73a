"""Fuzzing a real agent's gRPC services and the master's Mesos v1 scheduler HTTP API (issue 23:
the fuzz suite extended beyond the master's wire API), bounded in time.

One master (``--validate``) with a real agent and a framework (``kept``) running a task on it.

- **The agent's gRPC port**: every method of every service it serves (the task-log service, the
  health service) gets raw random bytes, valid encodings with bytes flipped, cut or repeated,
  and well-typed random messages (``test_fuzz_master``'s strategies): never INTERNAL or
  UNKNOWN, the agent keeps serving, logs no traceback, stays registered with the same
  resources, and the kept task still runs.
- **The Mesos scheduler API** (``POST /api/v1/scheduler``): garbage bodies, truncated and
  mutated valid calls, random JSON values, and well-shaped calls of every type with hostile
  field values, with and without a ``Mesos-Stream-Id``, with odd content types: each answered
  with a precise 4xx (400 naming what is wrong, 404, 406, 413, 415) or, for a call that is
  valid, its 2xx; never 500; the master keeps serving, and the kept framework and its task are
  unchanged.

Budget: ``EXAMPLES`` examples per method and strategy.
"""

from __future__ import annotations

import http.client
import json
import random
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from daemons import DEFAULT_MASTER_FLAGS, Daemon, health_status, start_agent, start_master
from fairshare.health import HealthCheckRequest
from fairshare.v1 import task_logs_pb2
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fuzz_master import STRINGS, Target, _mutations, messages
from wire_fakes import C, FrameworkConn, get_state, task, task_counts

EXAMPLES = 60
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
LOG_METHODS = [
    (f"/fairshare.v1.TaskLogService/{method.name}", method)
    for method in task_logs_pb2.DESCRIPTOR.services_by_name["TaskLogService"].methods
]
HEALTH_PATHS = ("/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch")
CALL_TYPES = (
    "SUBSCRIBE",
    "TEARDOWN",
    "ACCEPT",
    "DECLINE",
    "REVIVE",
    "SUPPRESS",
    "KILL",
    "ACKNOWLEDGE",
    "RECONCILE",
    "SHUTDOWN",
    "MESSAGE",
    "REQUEST",
    "UNKNOWN",
    "UPDATE_FRAMEWORK",
    "",
)
SCHEDULER = "/api/v1/scheduler"
OK_HTTP = {200, 202, 307, 400, 401, 403, 404, 405, 406, 409, 413, 415, 503}


class Cluster:
    """The master, the agent and what must not change."""

    def __init__(self, master: Daemon, agent: Daemon, channel: grpc.Channel) -> None:
        self.master, self.agent, self.channel = master, agent, channel
        self.framework = FrameworkConn(channel, "kept")
        offer = self.framework.offers()[0]
        self.framework.accept([offer.offer_id], [task("kept-1", "cpus:0.5;mem:64", offer.agent_id)])
        for _ in range(50):  # acknowledge each update until the task runs
            update = self.framework.take("update", 30, status__task_id="kept-1")
            self.framework.ack(update.status)
            if update.status.state == C.TASK_STATE_RUNNING:
                break
        else:
            raise AssertionError("the kept task did not run")
        self.before = self.kept()
        self.http_codes: dict[int, int] = {}

    def kept(self) -> Any:
        state = get_state(self.channel)
        return (
            sorted(
                (a.agent_info.hostname, a.reachable, a.agent_info.resources.SerializeToString())
                for a in state.agents
            ),
            [
                sorted(task_counts(f).items())
                for f in state.frameworks
                if f.framework_info.framework_id == self.framework.id
            ],
        )

    def post(self, body: bytes, headers: dict[str, str]) -> int:
        """POST ``body`` to the scheduler API; its status (a stream is closed at once)."""
        host, _, port = self.master.metrics_address.rpartition(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=20)
        try:
            connection.request("POST", SCHEDULER, body=body, headers=headers)
            answer = connection.getresponse()
            status = answer.status
            if status != 200:
                answer.read()
        finally:
            connection.close()
        self.http_codes[status] = self.http_codes.get(status, 0) + 1
        assert status in OK_HTTP, (status, body[:120], headers)
        return status


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("fuzz-agent")
    master = start_master(base / "master", *DEFAULT_MASTER_FLAGS)
    agent = None
    try:
        agent = start_agent(master.address, base / "agent", resources="cpus:2;mem:1024")
        with grpc.insecure_channel(master.address) as channel:
            yield Cluster(master, agent, channel)
        for daemon in (master, agent):
            log = daemon.log()
            assert "Traceback" not in log and "rpc.failed" not in log, daemon.log_path
    finally:
        if agent is not None:
            agent.kill()
        master.kill()


@pytest.fixture(scope="module")
def agent_probe(cluster: Cluster) -> Iterator[Target]:
    with grpc.insecure_channel(cluster.agent.address) as channel:
        probe = Target.__new__(Target)
        probe.channel, probe.codes = channel, {}
        yield probe


def _unchanged(cluster: Cluster) -> None:
    assert health_status(cluster.agent.address) == 1
    assert health_status(cluster.master.address) == 1
    assert cluster.kept() == cluster.before


@pytest.mark.parametrize(("path", "method"), LOG_METHODS, ids=[m.name for _, m in LOG_METHODS])
def test_the_agents_log_service(
    cluster: Cluster, agent_probe: Target, path: str, method: Any
) -> None:
    valid = GetMessageClass(method.input_type)(task_id="kept-1").SerializeToString()
    for data in _mutations(valid, random.Random(path), EXAMPLES):
        agent_probe.call(path, method, data)

    @FUZZ
    @given(message=messages(method.input_type))
    def fuzz(message: Message) -> None:
        data = message.SerializeToString()
        agent_probe.call(path, method, data)
        for mutated in _mutations(data, random.Random(data), 1):
            agent_probe.call(path, method, mutated)

    fuzz()
    codes = agent_probe.codes[path]
    assert codes & {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAUTHENTICATED}
    _unchanged(cluster)


@pytest.mark.parametrize("path", HEALTH_PATHS)
def test_the_agents_health_service(cluster: Cluster, agent_probe: Target, path: str) -> None:
    method = type("Method", (), {"client_streaming": False, "server_streaming": "Watch" in path})
    valid = HealthCheckRequest(service="").SerializeToString()
    for data in _mutations(valid, random.Random(path), EXAMPLES):
        agent_probe.call(path, method, data)
    for service in ("", "fairshare.v1.TaskLogService", "x" * 300, "é\x00"):
        agent_probe.call(path, method, HealthCheckRequest(service=service).SerializeToString())
    _unchanged(cluster)


# -- the Mesos scheduler HTTP API -----------------------------------------------------------------

JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
JSON_VALUES = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), STRINGS
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(STRINGS, children, max_size=4)
    ),
    max_leaves=12,
)
IDS = st.one_of(st.fixed_dictionaries({"value": STRINGS}), JSON_VALUES)


@st.composite
def calls(draw: st.DrawFn) -> dict[str, Any]:
    """A call of a random type whose fields are hostile: wrong types, odd ids, deep values."""
    kind = draw(st.sampled_from(CALL_TYPES))
    call: dict[str, Any] = {"type": kind}
    if draw(st.booleans()):
        call["framework_id"] = draw(IDS)
    body_key = kind.lower() or "subscribe"
    if draw(st.booleans()):
        call[body_key] = draw(
            st.one_of(
                JSON_VALUES,
                st.fixed_dictionaries(
                    {},
                    optional={
                        "framework_info": st.fixed_dictionaries(
                            {"user": STRINGS, "name": STRINGS},
                            optional={
                                "roles": st.lists(STRINGS, max_size=3),
                                "failover_timeout": JSON_VALUES,
                                "capabilities": JSON_VALUES,
                                "id": IDS,
                            },
                        ),
                        "offer_ids": st.lists(IDS, max_size=3),
                        "operations": st.lists(JSON_VALUES, max_size=3),
                        "filters": JSON_VALUES,
                        "task_id": IDS,
                        "agent_id": IDS,
                        "uuid": STRINGS,
                        "tasks": JSON_VALUES,
                    },
                ),
            )
        )
    return call


def test_garbage_and_truncated_bodies(cluster: Cluster) -> None:
    rng = random.Random(SCHEDULER)
    valid = json.dumps(
        {"type": "SUBSCRIBE", "subscribe": {"framework_info": {"user": "u", "name": "fz"}}}
    ).encode()
    for data in _mutations(valid, rng, EXAMPLES):
        assert cluster.post(data, JSON_HEADERS) != 200 or data == valid
    for body, headers, expected in (
        (b"", JSON_HEADERS, 400),
        (b"{", JSON_HEADERS, 400),
        (b"[]", JSON_HEADERS, 400),
        (b'{"type": "SUBSCRIBE"}', {"Content-Type": "application/x-protobuf"}, 415),
        (b"\xff\xfe" * 8, JSON_HEADERS, 400),
        (b"[" * 10000 + b"]" * 10000, JSON_HEADERS, 400),  # nesting deeper than any parser's
        (b'{"type": "ACCEPT"}', {**JSON_HEADERS, "Mesos-Stream-Id": "not-a-stream"}, 400),
        (b'{"type": "REVIVE", "framework_id": {"value": "fw-none"}}', JSON_HEADERS, 400),
        (b" " * (5 << 20), JSON_HEADERS, 413),
    ):
        status = cluster.post(body, headers)
        assert status == expected, (body[:60], headers, status)
    _unchanged(cluster)


def test_hostile_well_shaped_calls(cluster: Cluster) -> None:
    @FUZZ
    @given(call=calls(), stream=st.sampled_from([None, "", "x" * 300, "00000000-0000"]))
    def fuzz(call: dict[str, Any], stream: str | None) -> None:
        headers = dict(JSON_HEADERS)
        if stream is not None:
            headers["Mesos-Stream-Id"] = stream
        body = json.dumps(call).encode()
        cluster.post(body, headers)
        for mutated in _mutations(body, random.Random(body), 1):
            cluster.post(mutated, headers)

    fuzz()
    _unchanged(cluster)
    assert 400 in cluster.http_codes and 500 not in cluster.http_codes
