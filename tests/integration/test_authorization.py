"""Principals and the ACL on a real master (issue 13): every RPC without credentials, with wrong
ones and from a principal the ACL does not let; each impersonation of the issue refused with its
code; the state unchanged after all of them.

The master serves TLS with bearer tokens (``--credentials``, salted hashes) and an ACL file;
frameworks and agents are the raw-protocol fakes of ``wire_fakes`` over token channels.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from daemons import Client, Daemon, wait_for
from fairshare.credentials import entry_toml, hash_secret, new_secret
from fairshare.health import HealthCheckRequest, HealthCheckResponse
from fairshare.transport import ClientSecurity
from fairshare.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    common_pb2,
    operator_pb2,
    scheduler_pb2,
    scheduler_pb2_grpc,
)
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from secure import Pki, channel, fairshare_cli, start_secure_master
from wire_fakes import FakeAgent, FrameworkConn, demand, get_state, res, task, task_counts
from wire_fakes import operator as operator_stub

C, S, OP, A = common_pb2, scheduler_pb2, operator_pb2, agent_pb2
PRINCIPALS = ("ops", "alice", "bob", "agent-1", "agent-2", "viewer", "nobody")
ACL = """
permissive = false

[[register_frameworks]]
principals = ["alice", "bob"]
roles = ["*", "a"]
max_weight = 4

[[register_agents]]
principals = ["agent-1", "agent-2"]

[[teardown_frameworks]]
principals = ["ops"]
framework_principals = "ANY"

[[teardown_frameworks]]
principals = ["alice", "bob"]
framework_principals = "SELF"

[[kill_tasks]]
principals = ["ops"]
framework_principals = "ANY"

[[set_weights]]
principals = ["ops"]
roles = "ANY"

[[maintain_agents]]
principals = ["ops"]

[[view_state]]
principals = ["ops"]

[[view_state]]
principals = ["viewer"]
level = "redacted"
"""


@dataclass
class Secured:
    """A master with tokens and the ACL above, one framework of alice running two tasks on
    agent-1's agent."""

    master: Daemon
    pki: Pki
    tokens: dict[str, str]
    alice: FrameworkConn
    agent: FakeAgent
    channels: list[grpc.Channel]

    def security(self, who: str | None, token: str | None = None) -> ClientSecurity:
        """TLS trusting the cluster CA, with ``who``'s token (or ``token``; None: none)."""
        return ClientSecurity(ca=self.pki.ca.cert, token=token or (who and self.tokens[who]))

    def channel(self, who: str | None, token: str | None = None) -> grpc.Channel:
        opened = channel(self.master.address, self.security(who, token))
        self.channels.append(opened)
        return opened

    def state(self) -> OP.GetStateResponse:
        return get_state(self.channel("ops"))


@pytest.fixture
def secured(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Secured]:
    """The cluster; ``indirect`` parameters are more master flags (``--io-workers 2``)."""
    extra: tuple[str, ...] = getattr(request, "param", ())
    pki = Pki(tmp_path / "pki")
    tokens = {p: f"{p}:{new_secret()}" for p in PRINCIPALS}
    credentials = tmp_path / "credentials.toml"
    credentials.write_text(
        "\n".join(entry_toml(p, hash_secret(t.partition(":")[2])) for p, t in tokens.items())
    )
    acls = tmp_path / "acls.toml"
    acls.write_text(ACL)
    flags = ("--credentials", str(credentials), "--acls", str(acls), *extra)
    master = start_secure_master(tmp_path / "master", pki, *flags, mutual=False)
    cluster = Secured(master, pki, tokens, None, None, [])  # type: ignore[arg-type]
    cluster.agent = FakeAgent(cluster.channel("agent-1"), "cpus:4;mem:4096", hostname="a1")
    cluster.alice = FrameworkConn(cluster.channel("alice"), "alice-fw", role="a")
    offers = cluster.alice.offers()
    tasks = [task(f"t{i}", "cpus:1;mem:512", offers[0].agent_id) for i in (1, 2)]
    cluster.alice.accept([offers[0].offer_id], tasks)
    for _ in tasks:
        cluster.alice.ack(cluster.alice.take("update", status__state=C.TASK_STATE_RUNNING).status)
    try:
        yield cluster
        assert "Traceback" not in master.log()
        for secret in tokens.values():
            assert secret.partition(":")[2] not in master.log()  # secrets never logged
    finally:
        for opened in cluster.channels:
            opened.close()


def _summary(state: OP.GetStateResponse) -> Any:
    """What no refused call may change: agents, frameworks (weights, roles), tasks."""
    return (
        sorted((a.agent_id, a.state, a.reachable) for a in state.agents),
        sorted(
            (
                f.framework_info.framework_id,
                f.framework_info.role,
                f.framework_info.weight,
                sorted(task_counts(f).items()),
            )
            for f in state.frameworks
        ),
        sorted((t.framework_id, t.info.task_id, t.status.state) for t in state.tasks),
    )


def _methods() -> Iterator[tuple[str, bool, bool, type[Message]]]:
    """Every method of the three fairshare services: (path, client stream, server stream)."""
    for module, service in ((S, "SchedulerService"), (A, "AgentService"), (OP, "OperatorService")):
        for method in module.DESCRIPTOR.services_by_name[service].methods:
            request = GetMessageClass(method.input_type)
            path = f"/fairshare.v1.{service}/{method.name}"
            yield path, method.client_streaming, method.server_streaming, request


def _call(open_channel: grpc.Channel, path: str, streams: tuple[bool, bool], request: Any) -> Any:
    """Call ``path`` with ``request``; the status code it ends with (OK if it answers)."""

    def serialize(message: Message) -> bytes:
        return message.SerializeToString()

    try:
        if streams[0]:
            call = open_channel.stream_stream(path, serialize, bytes)(iter([request]), timeout=10)
            next(call)
        elif streams[1]:
            next(open_channel.unary_stream(path, serialize, bytes)(request, timeout=10))
        else:
            open_channel.unary_unary(path, serialize, bytes)(request, timeout=10)
    except grpc.RpcError as error:
        return error.code()
    return grpc.StatusCode.OK


def _requests(cluster: Secured) -> dict[str, Message]:
    """A well-formed request per method, aimed at alice's framework and agent-1's agent."""
    fw, agent = cluster.alice.id, cluster.agent.agent_id
    ack = S.AcknowledgeRequest.Acknowledgement(
        agent_id=agent, task_id="t1", uuid=uuid.uuid4().bytes
    )
    info = C.AgentInfo(hostname="x", resources=res("cpus:1;mem:1"), version="test")
    return {
        "Subscribe": S.SubscribeRequest(framework_info=C.FrameworkInfo(name="x")),
        "Accept": S.AcceptRequest(framework_id=fw, offer_ids=["of-x"]),
        "Decline": S.DeclineRequest(framework_id=fw, offer_ids=["of-x"]),
        "Revive": S.ReviveRequest(framework_id=fw),
        "Suppress": S.SuppressRequest(framework_id=fw),
        "Kill": S.KillRequest(framework_id=fw, task_id="t1", agent_id=agent),
        "Acknowledge": S.AcknowledgeRequest(framework_id=fw, acknowledgements=[ack]),
        "Reconcile": S.ReconcileRequest(framework_id=fw),
        "Teardown": S.TeardownRequest(framework_id=fw),
        "UpdateDemand": S.UpdateDemandRequest(framework_id=fw, demand=demand("cpus:1;mem:1", 1)),
        "Connect": A.ConnectRequest(register=A.RegisterAgent(agent_info=info)),
        "GetState": OP.GetStateRequest(),
        "SetWeight": OP.SetWeightRequest(role="a", weight=2.0),
        "GetWeights": OP.GetWeightsRequest(),
        "SetQuota": OP.SetQuotaRequest(role="a", guarantee=res("cpus:1")),
        "GetQuotas": OP.GetQuotasRequest(),
        "Reserve": OP.ReserveRequest(agent_id=agent, role="a", resources=res("cpus:1")),
        "Unreserve": OP.UnreserveRequest(agent_id=agent, role="a", resources=res("cpus:1")),
        "DeactivateAgents": OP.DeactivateAgentsRequest(agent_ids=[agent]),
        "ReactivateAgents": OP.ReactivateAgentsRequest(agent_ids=[agent]),
        "DrainAgent": OP.DrainAgentRequest(agent_id=agent),
        "TeardownFramework": OP.TeardownFrameworkRequest(framework_id=fw),
        "KillTask": OP.KillTaskRequest(framework_id=fw, task_id="t1"),
        "RemoveAgent": OP.RemoveAgentRequest(agent_id=agent),
        "GrantLogAccess": OP.GrantLogAccessRequest(task_id="t1"),
    }


@pytest.mark.parametrize(
    "secured", [(), ("--io-workers", "2")], ids=["one-process", "io-workers"], indirect=True
)
def test_every_rpc_without_credentials_with_wrong_ones_and_without_permission(
    secured: Secured,
) -> None:
    before = _summary(secured.state())
    requests = _requests(secured)
    callers = {
        "no credentials": (secured.channel(None), grpc.StatusCode.UNAUTHENTICATED),
        "wrong secret": (
            secured.channel(None, "alice:not-the-secret"),
            grpc.StatusCode.UNAUTHENTICATED,
        ),
        "unknown principal": (
            secured.channel(None, f"mallory:{new_secret()}"),
            grpc.StatusCode.UNAUTHENTICATED,
        ),
        "malformed token": (secured.channel(None, "no-colon"), grpc.StatusCode.UNAUTHENTICATED),
        "principal without permission": (
            secured.channel("nobody"),
            grpc.StatusCode.PERMISSION_DENIED,
        ),
    }
    seen = set()
    for why, (open_channel, expected) in callers.items():
        for path, client_stream, server_stream, _ in _methods():
            name = path.rpartition("/")[2]
            seen.add(name)
            code = _call(open_channel, path, (client_stream, server_stream), requests[name])
            assert code == expected, (why, name, code)
    assert seen == set(requests)  # every method of the three services was called
    assert _summary(secured.state()) == before
    # The health service stays open for probes, over TLS, without credentials.
    check = secured.channel(None).unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=HealthCheckRequest.SerializeToString,
        response_deserializer=HealthCheckResponse.FromString,
    )
    assert check(HealthCheckRequest(service=""), timeout=10).status == 1  # type: ignore[attr-defined]
    assert "auth.refused" in secured.master.log()


@pytest.mark.parametrize(
    "secured", [(), ("--io-workers", "2")], ids=["one-process", "io-workers"], indirect=True
)
def test_each_impersonation_is_refused_and_changes_nothing(secured: Secured) -> None:
    before = _summary(secured.state())
    fw, agent_id = secured.alice.id, secured.agent.agent_id
    code = grpc.StatusCode

    # Another agent principal reregisters the live agent claiming no tasks: refused, and the
    # real agent's session is untouched (it still gets its commands).
    claim = A.ReregisterAgent(agent_id=agent_id, agent_info=secured.agent.info)
    stream = secured.channel("agent-2")
    with pytest.raises(grpc.RpcError) as caught:
        first = iter([A.ConnectRequest(reregister=claim)])
        next(agent_pb2_grpc.AgentServiceStub(stream).Connect(first))
    assert caught.value.code() == code.PERMISSION_DENIED  # type: ignore[attr-defined]

    # Another agent, with a session of its own, forges updates: FINISHED for a task of
    # agent-1 (INVALID_ARGUMENT, its stream ends), RUNNING for a task that does not exist (not
    # forwarded: the master kills it on that agent instead).
    other = FakeAgent(secured.channel("agent-2"), "cpus:1;mem:512", hostname="a2", auto=False)
    other.update(fw, "ghost", C.TASK_STATE_RUNNING)
    kill = other.take("kill_task")
    assert (kill.framework_id, kill.task_id) == (fw, "ghost")
    other.update(fw, "t1", C.TASK_STATE_FINISHED)
    assert other.ended() == code.INVALID_ARGUMENT

    # Another framework principal acts on alice's framework: PERMISSION_DENIED, every call.
    bob = secured.channel("bob")
    stub = scheduler_pb2_grpc.SchedulerServiceStub(bob)
    for name in ("Teardown", "Kill", "Decline", "Revive", "Suppress", "Reconcile", "Accept"):
        request = _requests(secured)[name]
        with pytest.raises(grpc.RpcError) as caught:
            getattr(stub, name)(request, timeout=10)
        assert caught.value.code() == code.PERMISSION_DENIED, name  # type: ignore[attr-defined]
    with pytest.raises(grpc.RpcError) as caught:
        FrameworkConn(bob, "alice-fw", framework_id=fw, role="a")  # take over alice's id
    assert caught.value.code() == code.PERMISSION_DENIED  # type: ignore[attr-defined]
    # Subscribing above the weight cap, with a role the ACL does not give, claiming another
    # principal: PERMISSION_DENIED.
    for info in ({"weight": 1e6}, {"role": "prod"}, {"principal": "alice"}):
        with pytest.raises(grpc.RpcError) as caught:
            FrameworkConn(bob, "greedy", **info)
        assert caught.value.code() == code.PERMISSION_DENIED, info  # type: ignore[attr-defined]

    # Operator calls by a framework principal: PERMISSION_DENIED.
    ops = operator_stub(secured.channel("alice"))
    for call in (
        lambda: ops.SetWeight(OP.SetWeightRequest(role="a", weight=100.0), timeout=10),
        lambda: ops.DeactivateAgents(OP.DeactivateAgentsRequest(agent_ids=[agent_id]), timeout=10),
        lambda: ops.KillTask(OP.KillTaskRequest(framework_id=fw, task_id="t1"), timeout=10),
        lambda: ops.GetState(OP.GetStateRequest(), timeout=10),
    ):
        with pytest.raises(grpc.RpcError) as caught:
            call()
        assert caught.value.code() == code.PERMISSION_DENIED  # type: ignore[attr-defined]

    # Nothing changed: alice's two tasks run on agent-1, which still answers heartbeats.
    after = secured.state()
    agents = {a.agent_id for a in after.agents}
    assert agent_id in agents
    summary = _summary(after)
    summary[0][:] = [a for a in summary[0] if a[0] == agent_id]  # agent-2's own agent left
    assert summary == before
    secured.agent.heartbeat()
    assert secured.agent.commands.ended is None


def test_a_redacted_view_shows_figures_not_others_ids(secured: Secured) -> None:
    state = get_state(secured.channel("viewer"))
    assert state.frameworks and not state.tasks and not state.offers
    assert all(not f.framework_info.framework_id for f in state.frameworks)
    assert all(not a.agent_id and a.agent_info.port == 0 for a in state.agents)
    assert state.agents[0].agent_info.resources == secured.agent.info.resources


def test_clients_use_a_token_file_made_by_fairshare_credential(
    secured: Secured, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch.toml"
    token = tmp_path / "ops.token"
    done = fairshare_cli("credential", "ops", "--credentials", str(scratch), "--token-file",
                         str(token))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert token.stat().st_mode & 0o777 == 0o600
    principal, _, secret = token.read_text().strip().partition(":")
    assert principal == "ops" and secret not in scratch.read_text() and secret not in done.stdout
    again = fairshare_cli("credential", "ops", "--credentials", str(scratch), "--token-file",
                          str(token))  # fmt: skip
    assert again.returncode == 2  # an existing principal and token file are left alone
    # The cluster's own ops token, in a file, works with every client command.
    mine = tmp_path / "mine.token"
    mine.write_text(secured.tokens["ops"] + "\n")
    ca = str(secured.pki.ca.cert)
    done = fairshare_cli("status", "--master", secured.master.address, "--json",
                         "--tls-ca", ca, "--token-file", str(mine))  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = fairshare_cli("status", "--master", secured.master.address, "--tls-ca", ca)
    assert done.returncode == 1 and "UNAUTHENTICATED" in done.stderr, done.stderr


def test_the_http_port_serves_tls_and_asks_for_a_principal(secured: Secured) -> None:
    context = ssl.create_default_context(cafile=str(secured.pki.ca.cert))
    base = f"https://{secured.master.metrics_address}"

    def get(path: str, authorization: str | None = None) -> tuple[int, bytes]:
        request = urllib.request.Request(base + path)
        if authorization is not None:
            request.add_header("Authorization", authorization)
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def basic(token: str) -> str:
        return "Basic " + base64.b64encode(token.encode()).decode()

    status, body = get("/health")  # open to probes: whether it serves, no ids
    assert status == 200 and set(json.loads(body)) <= {"status", "daemon"}
    assert get("/metrics")[0] == 401
    assert get("/metrics", basic("ops:wrong"))[0] == 401
    assert get("/metrics", basic(secured.tokens["nobody"]))[0] == 403
    status, body = get("/metrics", basic(secured.tokens["ops"]))
    assert status == 200 and b"fairshare_" in body
    assert get("/api/v1/state", "Bearer " + secured.tokens["ops"])[0] == 200
    plain = urllib.request.Request(f"http://{secured.master.metrics_address}/health")
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(plain, timeout=10)  # plaintext to a TLS port: refused


def test_a_real_agent_and_run_with_tokens(secured: Secured, tmp_path: Path) -> None:
    tokens = {}
    for who in ("agent-2", "alice"):
        tokens[who] = tmp_path / f"{who}.token"
        tokens[who].write_text(secured.tokens[who] + "\n")
    ca = str(secured.pki.ca.cert)
    secured.alice.call_unary("Suppress")  # alice's fake framework would hold the new offers
    argv = ["--master", secured.master.address, "--resources", "cpus:2;mem:8192", "--port", "0"]
    argv += ["--metrics-port", "0", "--work-dir", str(tmp_path / "agent"), "--tls-ca", ca]
    agent = Daemon("agent", [*argv, "--token-file", str(tokens["agent-2"])], tmp_path / "agent",
                   "agent.addr")  # fmt: skip
    agent.wait_ready()
    run = Client(
        ["-m", "fairshare.cli", "run", "--master", secured.master.address, "--name", "by-token",
         "--role", "a", "--task", "cpus:1;mem:4000", "--count", "2", "--tls-ca", ca,
         "--token-file", str(tokens["alice"])],
        tmp_path / "run.log",
    )  # fmt: skip

    def two_running() -> bool:  # on the real agent: the fake one has not the memory
        state = secured.state()
        named = [f for f in state.frameworks if f.framework_info.name == "by-token"]
        return bool(named) and task_counts(named[0]).get("RUNNING") == 2

    wait_for(two_running, 30, "two tasks of a token framework RUNNING on a token agent")
    state = secured.state()
    assert len(state.agents) == 2  # agent-1's fake and agent-2's real agent
    run.proc.terminate()
    assert run.proc.wait(20) == 0, run.log()
    assert agent.stop() == 0


def test_a_denied_role_names_the_roles_the_principal_may_use(secured: Secured) -> None:
    """Issue 24, item 7: bob may subscribe in roles '*' and 'a' only; asking for 'b' is refused
    naming them, not as if bob had no rule at all."""
    before = _summary(secured.state())
    stub = scheduler_pb2_grpc.SchedulerServiceStub(secured.channel("bob"))
    request = S.SubscribeRequest(framework_info=C.FrameworkInfo(name="bob-fw", role="b"))
    with pytest.raises(grpc.RpcError) as refused:
        next(stub.Subscribe(request, timeout=10))
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "bob may register_frameworks only for roles ['*', 'a'], not 'b'" in str(
        refused.value.details()
    )
    assert _summary(secured.state()) == before
