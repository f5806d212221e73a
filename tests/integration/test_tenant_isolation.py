"""Isolation between tenants on real processes (issue 23, findings 1, 3 and 4): each attack
refused with its precise code, nothing changed, the legitimate owner still served.

1. Who a task runs as (the test runs as root, like an agent that runs command tasks):
   a task naming no user runs as the agent's ``--task-user`` (``nobody``: ``id -u`` in its
   sandbox's stdout); ``user=root`` is PERMISSION_DENIED at Accept without a ``run_tasks`` rule
   naming root, and TASK_ERROR at an agent without ``--allow-root-tasks`` when the ACL names
   it; only both together run it as root. An agent asked to make root its task user does not
   start.
3. Secrets stay with their owner: a rogue agent (a plain gRPC server registered as an agent
   with an agent principal's certificate) receives no token from ``fairshare logs``, only a
   credential for itself, which is worth nothing at the master (UNAUTHENTICATED, no weight
   changed) or at the real agent (UNAUTHENTICATED).
4. The agent authorizes log reads: without a credential (also on a plaintext agent of an
   insecure cluster) UNAUTHENTICATED; with another principal's task's credential
   PERMISSION_DENIED; the master grants only the owner, the ACL's ``view_logs`` and the full
   view (PERMISSION_DENIED to another tenant); one principal's 16 follow streams take 8 slots
   (RESOURCE_EXHAUSTED after) and the owner still reads; the owner's ``fairshare logs`` works
   under a redacted view.

The secured cluster: a master with mutual TLS, bearer tokens and an ACL, a real agent with its
certificate; clients present a certificate and a token (the token names the principal).
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from daemons import ROOT, Daemon, daemon_env, reachable_work_dir, wait_for
from fairshare.credentials import entry_toml, hash_secret, new_secret
from fairshare.transport import ClientSecurity, client_channel_sync
from fairshare.v1 import common_pb2, operator_pb2, task_logs_pb2, task_logs_pb2_grpc
from secure import Pki, channel, start_secure_master
from wire_fakes import FakeAgent, FrameworkConn, res
from wire_fakes import operator as operator_stub

C, OP = common_pb2, operator_pb2
NOBODY = pwd.getpwnam("nobody")
SETTLE = 30.0
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs an agent as root")


def process_task(
    task_id: str, agent_id: str, shell: str, user: str = "", resources: str = "cpus:0.1;mem:32"
) -> common_pb2.TaskInfo:
    """A command task running ``shell`` (as ``user``; empty: the agent's --task-user)."""
    return C.TaskInfo(
        task_id=task_id,
        agent_id=agent_id,
        resources=res(resources),
        process=C.ProcessInfo(shell=shell, user=user),
    )


def run_to_end(fw: FrameworkConn, task_id: str) -> common_pb2.TaskStatus:
    """Acknowledge the task's updates until a terminal one; that status."""
    terminal = {
        C.TASK_STATE_FINISHED,
        C.TASK_STATE_FAILED,
        C.TASK_STATE_KILLED,
        C.TASK_STATE_ERROR,
        C.TASK_STATE_LOST,
    }
    while True:
        status = fw.take("update", SETTLE, status__task_id=task_id).status
        fw.ack(status)
        if status.state in terminal:
            return status


def run_until(fw: FrameworkConn, task_id: str, state: int) -> None:
    """Acknowledge the task's updates until it reaches ``state``."""
    while True:
        status = fw.take("update", SETTLE, status__task_id=task_id).status
        fw.ack(status)
        if status.state == state:
            return


SPARE: dict[int, list[common_pb2.Offer]] = {}
"""Offers received and not used yet, per framework connection (an event may carry several)."""


def offer_on(fw: FrameworkConn, agent_id: str | None = None) -> common_pb2.Offer:
    """An offer received and not used yet (of ``agent_id`` when given)."""
    spare = SPARE.setdefault(id(fw), [])
    deadline = time.monotonic() + SETTLE
    while True:
        for offer in spare:
            if agent_id is None or offer.agent_id == agent_id:
                spare.remove(offer)
                return offer
        if time.monotonic() > deadline:
            raise AssertionError(f"no offer of agent {agent_id} within {SETTLE}s")
        spare.extend(fw.offers(SETTLE))


def cli(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *argv],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def stream_first(
    open_channel: grpc.Channel, request: task_logs_pb2.StreamLogRequest
) -> tuple[Any, grpc.StatusCode]:
    """Open a log stream; (the call, OK) once its first page came, or (None, its code)."""
    call = task_logs_pb2_grpc.TaskLogServiceStub(open_channel).StreamLog(request, timeout=30)
    try:
        next(call)
    except grpc.RpcError as error:
        return None, error.code()  # type: ignore[attr-defined]
    return call, grpc.StatusCode.OK


def tasks_named(state: operator_pb2.GetStateResponse, task_id: str) -> list[Any]:
    return [t for t in state.tasks if t.info.task_id == task_id]


# -- 1. who a task runs as -------------------------------------------------------------------------


@as_root
def test_a_task_runs_as_the_task_user_and_root_is_refused_without_the_acl(
    master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    (agent,) = agent_factory(master, 1, "cpus:2;mem:1024")
    marker = Path(f"/tmp/fairshare-root-{os.getpid()}")
    with grpc.insecure_channel(master.address) as opened:
        fw = FrameworkConn(opened, "owner")
        offer = offer_on(fw)
        fw.accept([offer.offer_id], [process_task("plain", offer.agent_id, "id -u; id -g")])
        assert run_to_end(fw, "plain").state == C.TASK_STATE_FINISHED
        sandbox = agent.work_dir / "sandboxes" / fw.id / "plain"
        expected = f"{NOBODY.pw_uid}\n{NOBODY.pw_gid}\n"
        assert (sandbox / "stdout").read_text() == expected  # as nobody, the --task-user
        assert sandbox.stat().st_uid == NOBODY.pw_uid and sandbox.stat().st_mode & 0o777 == 0o700
        logs = cli("logs", "--master", master.address, "plain")
        assert (logs.returncode, logs.stdout) == (0, expected), logs.stderr

        # user=root, no ACL file: refused at Accept, naming the user; nothing launched.
        offer = offer_on(fw)
        as_root_task = process_task("as-root", offer.agent_id, f"id -u > {marker}", user="root")
        with pytest.raises(grpc.RpcError) as refused:
            fw.accept([offer.offer_id], [as_root_task])
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
        assert "'as-root'" in refused.value.details() and "'root'" in refused.value.details()  # type: ignore[attr-defined]
        state = operator_stub(opened).GetState(OP.GetStateRequest(), timeout=10)
        assert not tasks_named(state, "as-root") and not marker.exists()
        assert not list((agent.work_dir / "sandboxes" / fw.id).glob("as-root"))
        # The owner is still served, on the very offer the refused Accept left alone.
        fw.accept([offer.offer_id], [process_task("after", offer.agent_id, "echo served")])
        assert run_to_end(fw, "after").state == C.TASK_STATE_FINISHED
        assert (agent.work_dir / "sandboxes" / fw.id / "after" / "stdout").read_text() == (
            "served\n"
        )
        fw.close()


@as_root
def test_root_runs_only_with_both_the_acl_and_the_agents_switch(
    tmp_path: Path,
    master_factory: Callable[..., Daemon],
    agent_factory: Callable[..., list[Daemon]],
) -> None:
    acls = tmp_path / "acls.toml"
    acls.write_text('permissive = true\n[[run_tasks]]\nprincipals = "ANY"\nusers = ["root"]\n')
    master = master_factory("--allocation-interval", "200ms", "--acls", str(acls))
    (plain,) = agent_factory(master, 1, "cpus:1;mem:512")
    (allowed,) = agent_factory(master, 1, "cpus:2;mem:512", "--allow-root-tasks")
    marker = Path(f"/tmp/fairshare-root-{os.getpid()}")
    with grpc.insecure_channel(master.address) as opened:

        def both() -> Any:
            found = operator_stub(opened).GetState(OP.GetStateRequest(), timeout=10)
            return found if len(found.agents) == 2 else None

        state = wait_for(both, SETTLE, "both agents registered")
        by_cpus = {
            next(r.millis for r in a.agent_info.resources.items if r.name == "cpus"): a.agent_id
            for a in state.agents
        }
        fw = FrameworkConn(opened, "root-runner")
        # The ACL names root, the agent has not --allow-root-tasks: TASK_ERROR, saying why.
        offer = offer_on(fw, by_cpus[1000])
        fw.accept([offer.offer_id], [process_task("r1", offer.agent_id, f"touch {marker}", "root")])
        end = run_to_end(fw, "r1")
        assert (end.state, end.reason) == (C.TASK_STATE_ERROR, C.TaskStatus.REASON_COMMAND_INVALID)
        assert "uid 0" in end.message and "--allow-root-tasks" in end.message
        assert not marker.exists()
        # Both allow it: it runs as root.
        offer = offer_on(fw, by_cpus[2000])
        fw.accept([offer.offer_id], [process_task("r2", offer.agent_id, "id -u", "root")])
        assert run_to_end(fw, "r2").state == C.TASK_STATE_FINISHED
        stdout = allowed.work_dir / "sandboxes" / fw.id / "r2" / "stdout"
        assert stdout.read_text() == "0\n"
        fw.close()
    assert "Traceback" not in plain.log() + allowed.log()
    # An agent told to run tasks as root by default, without the switch, does not start.
    refused = cli("agent", "--master", master.address, "--task-user", "root",
                  "--work-dir", str(tmp_path / "never"), timeout=30)  # fmt: skip
    assert refused.returncode == 2 and "--allow-root-tasks" in refused.stderr, refused.stderr


def test_an_agent_without_tls_serves_no_log_without_the_masters_credential(
    master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    (agent,) = agent_factory(master, 1, "cpus:2;mem:1024")
    with grpc.insecure_channel(master.address) as opened:
        fw = FrameworkConn(opened, "owner")
        offer = offer_on(fw)
        fw.accept([offer.offer_id], [process_task("t", offer.agent_id, "echo private")])
        assert run_to_end(fw, "t").state == C.TASK_STATE_FINISHED
        fw.close()
    with grpc.insecure_channel(agent.address) as plain:  # anyone on the host, no identity
        bare = task_logs_pb2.StreamLogRequest(task_id="t", framework_id=fw.id)
        assert stream_first(plain, bare)[1] == grpc.StatusCode.UNAUTHENTICATED
        forged = task_logs_pb2.StreamLogRequest(task_id="t", framework_id=fw.id)
        forged.credential.grant, forged.credential.signature = "e30", "AAAA"
        assert stream_first(plain, forged)[1] == grpc.StatusCode.UNAUTHENTICATED
    logs = cli("logs", "--master", master.address, "t")  # the master's grant: served
    assert (logs.returncode, logs.stdout) == (0, "private\n"), logs.stderr


# -- 3 and 4: a secured cluster ------------------------------------------------------------------

PRINCIPALS = ("ops", "alice", "bob", "auditor", "agent-1", "agent-2")
ACL = """
permissive = false

[[register_frameworks]]
principals = ["alice", "bob"]
roles = ["*"]

[[register_agents]]
principals = ["agent-1", "agent-2"]

[[run_tasks]]
principals = ["alice", "bob"]
users = ["nobody"]

[[view_logs]]
principals = ["auditor"]
framework_principals = ["alice"]

[[set_weights]]
principals = ["ops"]
roles = "ANY"

[[view_state]]
principals = ["ops"]

[[view_state]]
principals = ["alice", "bob", "auditor"]
level = "redacted"
"""


@dataclass
class Tenants:
    """A secured master, agent-1's real agent, alice's finished task ``alice-job-1`` (its
    framework ``alice_framework``) and bob's running task ``bob-sleep``."""

    master: Daemon
    agent: Daemon
    pki: Pki
    tokens: dict[str, str]
    token_files: dict[str, Path]
    alice_framework: str = ""
    bob: FrameworkConn | None = None
    opened: list[grpc.Channel] = field(default_factory=list)

    def security(self, who: str, token: bool = True) -> ClientSecurity:
        """``who``'s certificate (``operator`` for ops), with its token unless not ``token``."""
        cert = "operator" if who == "ops" else who
        return self.pki.security(cert, self.tokens[who] if token else None)

    def channel(self, address: str, who: str, token: bool = True) -> grpc.Channel:
        opened = channel(address, self.security(who, token))
        self.opened.append(opened)
        return opened

    def flags(self, who: str) -> list[str]:
        """The client flags of ``who``: certificate and token file."""
        cert, key = self.pki.files("operator" if who == "ops" else who)
        return ["--master", self.master.address, "--tls-ca", str(self.pki.ca.cert),
                "--tls-cert", str(cert), "--tls-key", str(key),
                "--token-file", str(self.token_files[who])]  # fmt: skip

    def logs(self, who: str, *argv: str) -> subprocess.CompletedProcess[str]:
        return cli("logs", *argv, *self.flags(who))

    def grant(self, who: str, task_id: str, framework_id: str = "") -> Any:
        ops = operator_stub(self.channel(self.master.address, who))
        request = OP.GrantLogAccessRequest(task_id=task_id, framework_id=framework_id)
        return ops.GrantLogAccess(request, timeout=10)


def signed(granted: Any, agent_index: int = 0, **fields: Any) -> task_logs_pb2.StreamLogRequest:
    request = task_logs_pb2.StreamLogRequest(**fields)
    request.credential.grant = granted.grant
    request.credential.signature = granted.agents[agent_index].signature
    return request


@pytest.fixture
def tenants(tmp_path: Path) -> Iterator[Tenants]:
    pki = Pki(tmp_path / "pki")
    tokens = {p: f"{p}:{new_secret()}" for p in PRINCIPALS}
    token_files = {}
    for principal, token in tokens.items():
        token_files[principal] = tmp_path / f"{principal}.token"
        token_files[principal].write_text(token + "\n")
    credentials = tmp_path / "credentials.toml"
    credentials.write_text(
        "\n".join(entry_toml(p, hash_secret(t.partition(":")[2])) for p, t in tokens.items())
    )
    acls = tmp_path / "acls.toml"
    acls.write_text(ACL)
    master = start_secure_master(
        tmp_path / "master", pki, "--credentials", str(credentials), "--acls", str(acls)
    )
    work_dir = reachable_work_dir(tmp_path / "agent")
    argv = ["--master", master.address, "--resources", "cpus:2;mem:1024", "--port", "0",
            "--metrics-port", "0", "--work-dir", str(work_dir), "--hostname", "127.0.0.1",
            *pki.flags("agent-1")]  # fmt: skip
    agent = Daemon("agent", argv, work_dir, "agent.addr", log_path=tmp_path / "agent.log")
    cluster = Tenants(master, agent, pki, tokens, token_files)
    try:
        agent.wait_ready()
        run = cli("run", "--name", "alice-job", "--task", "cpus:0.2;mem:64", "--command",
                  "echo alice output", *cluster.flags("alice"))  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        (sandbox,) = (work_dir / "sandboxes").glob("*/alice-job-1")
        cluster.alice_framework = sandbox.parent.name
        bob = FrameworkConn(cluster.channel(master.address, "bob"), "bob-fw")
        offer = offer_on(bob)
        bob.accept([offer.offer_id], [process_task("bob-sleep", offer.agent_id, "sleep 120")])
        run_until(bob, "bob-sleep", C.TASK_STATE_RUNNING)
        bob.call_unary("Suppress")
        cluster.bob = bob
        yield cluster
        for daemon in (master, agent):
            assert "Traceback" not in daemon.log()
            for token in tokens.values():
                assert token.partition(":")[2] not in daemon.log()
    finally:
        for opened in cluster.opened:
            opened.close()
        agent.kill()
        master.kill()


def test_logs_go_to_the_owner_under_a_redacted_view_and_to_no_other_tenant(
    tenants: Tenants,
) -> None:
    t = tenants
    # The owner, whose view is redacted (GetState hides the agent's address): served.
    mine = t.logs("alice", "alice-job-1")
    assert (mine.returncode, mine.stdout) == (0, "alice output\n"), mine.stderr
    # view_logs on alice and the full view: served.
    for reader in ("auditor", "ops"):
        read = t.logs(reader, "alice-job-1")
        assert (read.returncode, read.stdout) == (0, "alice output\n"), (reader, read.stderr)
    # Another tenant: the master refuses a grant for alice's framework (PERMISSION_DENIED);
    # asked without the framework, its grant covers bob's frameworks only and no agent has
    # the task there (NOT_FOUND). Not a byte of alice's output either way.
    denied = t.logs("bob", "alice-job-1", "--framework", t.alice_framework)
    assert denied.returncode == 1 and "PERMISSION_DENIED" in denied.stderr, denied.stderr
    missing = t.logs("bob", "alice-job-1")
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr, missing.stderr
    assert "alice output" not in denied.stdout + missing.stdout
    # view_logs on alice's frameworks does not reach bob's: refused naming bob's framework;
    # without it the grant covers alice's frameworks and the agent has no such sandbox there.
    assert t.bob is not None
    with pytest.raises(grpc.RpcError) as refused:
        t.grant("auditor", "bob-sleep", t.bob.id)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
    audit = t.grant("auditor", "bob-sleep")
    as_auditor = t.channel(t.agent.address, "auditor", token=False)
    found = stream_first(as_auditor, signed(audit, task_id="bob-sleep"))[1]
    assert found == grpc.StatusCode.NOT_FOUND

    # Straight at the agent with bob's certificate: no credential, a credential for his own
    # task, his credential naming alice's framework: refused, each with its code.
    to_agent = t.channel(t.agent.address, "bob", token=False)
    bare = task_logs_pb2.StreamLogRequest(task_id="alice-job-1")
    assert stream_first(to_agent, bare)[1] == grpc.StatusCode.UNAUTHENTICATED
    own = t.grant("bob", "bob-sleep")
    assert [a.port for a in own.agents] == [int(t.agent.address.rpartition(":")[2])]
    other_task = signed(own, task_id="alice-job-1", framework_id=t.alice_framework)
    assert stream_first(to_agent, other_task)[1] == grpc.StatusCode.PERMISSION_DENIED
    other_framework = signed(own, task_id="bob-sleep", framework_id=t.alice_framework)
    assert stream_first(to_agent, other_framework)[1] == grpc.StatusCode.PERMISSION_DENIED
    # Nothing changed: alice still reads her output whole.
    again = t.logs("alice", "alice-job-1")
    assert (again.returncode, again.stdout) == (0, "alice output\n"), again.stderr


def test_sixteen_follow_streams_of_one_principal_do_not_lock_the_owner_out(
    tenants: Tenants,
) -> None:
    t = tenants
    to_agent = t.channel(t.agent.address, "bob", token=False)
    held, codes = [], []
    for _ in range(16):
        granted = t.grant("bob", "bob-sleep")
        call, code = stream_first(to_agent, signed(granted, task_id="bob-sleep", follow=True))
        codes.append(code)
        if call is not None:
            held.append(call)
    assert codes == [grpc.StatusCode.OK] * 8 + [grpc.StatusCode.RESOURCE_EXHAUSTED] * 8
    mine = t.logs("alice", "alice-job-1")  # the owner is still served
    assert (mine.returncode, mine.stdout) == (0, "alice output\n"), mine.stderr
    for call in held:
        call.cancel()


class RogueAgent(grpc.GenericRpcHandler):
    """A plain gRPC server posing as an agent's TaskLogService: records what it is sent."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[tuple[str, Any], ...], bytes]] = []
        self.lock = threading.Lock()

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        if handler_call_details.method != "/fairshare.v1.TaskLogService/StreamLog":
            return None
        metadata = tuple(handler_call_details.invocation_metadata or ())  # type: ignore[attr-defined]

        def handle(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
            with self.lock:
                self.calls.append((metadata, request))
            context.abort(grpc.StatusCode.NOT_FOUND, "nothing here")
            yield b""

        return grpc.unary_stream_rpc_method_handler(handle)


def test_a_rogue_agent_gets_no_token_and_its_credential_is_worth_nothing_elsewhere(
    tenants: Tenants,
) -> None:
    t = tenants
    rogue = RogueAgent()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[rogue])
    cert, key = t.pki.files("agent-2")
    credentials = grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())])
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    try:
        fake = FakeAgent(
            t.channel(t.master.address, "agent-2", token=False),  # agent-2 by its certificate
            "cpus:0.1;mem:16",
            hostname="127.0.0.1",
            port=port,
        )
        ops = operator_stub(t.channel(t.master.address, "ops"))
        weights_before = ops.GetWeights(OP.GetWeightsRequest(), timeout=10)
        # The operator reads a task the master no longer tracks: every agent is asked.
        read = t.logs("ops", "alice-job-1")
        assert (read.returncode, read.stdout) == (0, "alice output\n"), read.stderr
        wait_for(lambda: rogue.calls, 10, "the rogue agent to be asked")
        metadata, request_bytes = rogue.calls[0]
        secret = t.tokens["ops"].partition(":")[2]
        assert "authorization" not in {k for k, _ in metadata}
        assert all(secret not in str(v) for _, v in metadata)
        assert secret.encode() not in request_bytes
        captured = task_logs_pb2.StreamLogRequest.FromString(request_bytes).credential
        assert captured.grant and captured.signature

        # Replayed at the master as a bearer token: UNAUTHENTICATED, no weight set.
        for token in (captured.grant, f"ops:{captured.signature}",
                      f"{captured.grant}:{captured.signature}"):  # fmt: skip
            replay = client_channel_sync(t.master.address, t.pki.security("agent-2", token))
            t.opened.append(replay)
            with pytest.raises(grpc.RpcError) as refused:
                operator_stub(replay).SetWeight(
                    OP.SetWeightRequest(role="*", weight=50.0), timeout=10
                )
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]
        assert ops.GetWeights(OP.GetWeightsRequest(), timeout=10) == weights_before
        # Replayed at the real agent: signed for the rogue only, UNAUTHENTICATED.
        replayed = task_logs_pb2.StreamLogRequest(task_id="alice-job-1")
        replayed.credential.CopyFrom(captured)
        to_agent = t.channel(t.agent.address, "agent-2", token=False)
        assert stream_first(to_agent, replayed)[1] == grpc.StatusCode.UNAUTHENTICATED
        # The owner is still served.
        mine = t.logs("alice", "alice-job-1")
        assert (mine.returncode, mine.stdout) == (0, "alice output\n"), mine.stderr
        fake.call.cancel()
    finally:
        server.stop(None)
