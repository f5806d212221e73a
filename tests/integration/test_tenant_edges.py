"""The smaller attacks between tenants (issue 23, item 6), on real daemons: each refused, nothing
changed, the owner still served.

- a flood of wrong tokens is throttled per address (RESOURCE_EXHAUSTED on gRPC, 429 on HTTP)
  after a small burst, while the owner whose token checked before is served during it;
- ``/metrics`` on an authenticated master needs the full ``view_state`` (a redacted viewer read
  other frameworks' ids and names there);
- a plaintext HTTP port answers only ``Host`` headers that name it (DNS rebinding): 421;
- an agent's "trust the master" (``--tls-ca``) and "verify my clients" (``--tls-client-ca``) are
  separate: in a token-only cluster the owner's ``fairshare logs`` (a token, no certificate)
  reads its task's output from an agent that trusts the master's CA; an agent with
  ``--tls-client-ca`` refuses a client without a certificate at the handshake.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from daemons import Daemon, reachable_work_dir, wait_for
from fairshare.credentials import entry_toml, hash_secret, new_secret
from fairshare.transport import ClientSecurity
from fairshare.v1 import operator_pb2
from secure import Pki, channel, fairshare_cli, health, start_secure_master
from wire_fakes import FrameworkConn, get_state, operator

PRINCIPALS = ("ops", "alice", "viewer", "agent-1")
ACL = """
[[register_frameworks]]
principals = ["alice"]
roles = "ANY"

[[register_agents]]
principals = ["agent-1"]

[[view_state]]
principals = ["ops"]

[[view_state]]
principals = ["viewer", "alice"]
level = "redacted"
"""
BURST = 10  # fairshare.auth_throttle.DEFAULT_BURST
RATE = 2.0  # fairshare.auth_throttle.DEFAULT_RATE


@dataclass
class TokenCluster:
    master: Daemon
    pki: Pki
    tokens: dict[str, str]
    directory: Path

    def token_file(self, who: str) -> Path:
        path = self.directory / f"{who}.token"
        path.write_text(self.tokens[who] + "\n")
        path.chmod(0o600)
        return path

    def client_flags(self, who: str) -> list[str]:
        """A token-only client: the CA and the token file, no certificate."""
        return ["--master", self.master.address, "--tls-ca", str(self.pki.ca.cert),
                "--token-file", str(self.token_file(who))]  # fmt: skip

    def security(self, who: str | None) -> ClientSecurity:
        return ClientSecurity(ca=self.pki.ca.cert, token=self.tokens[who] if who else None)

    def http(self, path: str, authorization: str | None) -> tuple[int, bytes]:
        host, _, port = self.master.metrics_address.rpartition(":")
        context = ssl.create_default_context(cafile=str(self.pki.ca.cert))
        connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=20)
        try:
            headers = {"Authorization": authorization} if authorization else {}
            connection.request("GET", path, headers=headers)
            answer = connection.getresponse()
            return answer.status, answer.read()
        finally:
            connection.close()


def basic(token: str) -> str:
    return "Basic " + base64.b64encode(token.encode()).decode()


@pytest.fixture
def tokens_cluster(tmp_path: Path) -> Iterator[TokenCluster]:
    pki = Pki(tmp_path / "pki")
    tokens = {p: f"{p}:{new_secret()}" for p in PRINCIPALS}
    credentials = tmp_path / "credentials.toml"
    credentials.write_text(
        "\n".join(entry_toml(p, hash_secret(t.partition(":")[2])) for p, t in tokens.items())
    )
    acls = tmp_path / "acls.toml"
    acls.write_text(ACL)
    flags = ("--credentials", str(credentials), "--acls", str(acls))
    master = start_secure_master(tmp_path / "master", pki, *flags, mutual=False)
    try:
        yield TokenCluster(master, pki, tokens, tmp_path)
        assert "Traceback" not in master.log()
    finally:
        master.kill()


def test_a_wrong_token_flood_is_throttled_and_the_owner_still_served(
    tokens_cluster: TokenCluster,
) -> None:
    cluster = tokens_cluster
    with channel(cluster.master.address, cluster.security("ops")) as owner:
        before = get_state(owner)  # the owner's token checked once, before the flood
        with channel(cluster.master.address, cluster.security(None)) as attacker:
            stub = operator(attacker)
            codes: list[grpc.StatusCode] = []
            owner_served: list[str] = []  # "ok" or the code of a refused call
            stop = threading.Event()

            def owner_calls() -> None:
                while not stop.is_set() and len(owner_served) < 200:
                    try:
                        get_state(owner)
                        owner_served.append("ok")
                    except grpc.RpcError as error:
                        owner_served.append(str(error.code()))

            serving = threading.Thread(target=owner_calls)
            started = time.monotonic()
            serving.start()
            try:  # 80 calls in flight at once, every token new: each would cost a scrypt
                calls = [
                    stub.GetState.future(
                        operator_pb2.GetStateRequest(),
                        metadata=(("authorization", f"Bearer ops:{new_secret()}-{n}"),),
                        timeout=120,
                    )
                    for n in range(80)
                ]
                for call in calls:
                    try:
                        call.result()
                        codes.append(grpc.StatusCode.OK)
                    except grpc.RpcError as error:
                        codes.append(error.code())
            finally:
                stop.set()
                serving.join(timeout=60)
            elapsed = time.monotonic() - started
        after = get_state(owner)
    assert grpc.StatusCode.OK not in codes
    hashed = codes.count(grpc.StatusCode.UNAUTHENTICATED)
    throttled = codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert hashed + throttled == len(codes)
    assert hashed <= BURST + RATE * elapsed + 1, (hashed, elapsed)  # the hashes are bounded
    assert throttled >= 1
    assert owner_served and set(owner_served) == {"ok"}  # the owner served during the flood
    assert after.frameworks == before.frameworks
    assert "auth.throttled" in cluster.master.log()
    # On the HTTP port of the same address: 429 with "retry in" once the bucket is empty (40
    # requests at once: the first take what refilled since, the rest are refused unhashed).
    with ThreadPoolExecutor(40) as pool:
        answers = list(
            pool.map(
                lambda _: cluster.http("/api/v1/state", basic(f"ops:{new_secret()}")),
                range(40),
            )
        )
    statuses = [status for status, _ in answers]
    assert set(statuses) <= {401, 429} and statuses.count(429) >= 1, statuses
    assert all(b"retry in" in body for status, body in answers if status == 429)
    assert cluster.http("/api/v1/state", basic(cluster.tokens["ops"]))[0] == 200


def test_metrics_need_the_full_view_and_a_redacted_viewer_gets_403(
    tokens_cluster: TokenCluster,
) -> None:
    cluster = tokens_cluster
    with channel(cluster.master.address, cluster.security("alice")) as alice_channel:
        alice = FrameworkConn(alice_channel, "alice-secret-framework")
        try:
            status, body = cluster.http("/metrics", basic(cluster.tokens["ops"]))
            assert status == 200 and b"alice-secret-framework" in body
            assert alice.id.encode() in body
            for redacted in ("viewer", "alice"):
                status, body = cluster.http("/metrics", basic(cluster.tokens[redacted]))
                assert status == 403 and b"needs the full view_state" in body
                assert b"alice-secret-framework" not in body and alice.id.encode() not in body
                # the rest of the port still serves the redacted viewer its redacted view
                status, body = cluster.http("/api/v1/frameworks", basic(cluster.tokens[redacted]))
                assert status == 200
                assert (b"alice-secret-framework" in body) == (redacted == "alice")
        finally:
            alice.close()


def _get_with_host(address: str, path: str, host: str | None) -> tuple[int, bytes]:
    name, _, port = address.rpartition(":")
    connection = http.client.HTTPConnection(name, int(port), timeout=20)
    try:
        connection.putrequest("GET", path, skip_host=True)
        if host is not None:
            connection.putheader("Host", host)
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def test_a_plaintext_http_port_answers_only_its_own_host_names(
    master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    """DNS rebinding: a page of evil.example makes a browser send its requests to 127.0.0.1."""
    (agent,) = agent_factory(master, 1)
    port = master.metrics_address.rpartition(":")[2]
    for daemon, paths in ((master, ("/", "/api/v1/state", "/metrics")), (agent, ("/metrics",))):
        for path in paths:
            for host in (f"evil.example:{port}", "evil.example", "127.0.0.1.evil.example"):
                status, body = _get_with_host(daemon.metrics_address, path, host)
                assert status == 421, (path, host, status)
                assert b"misdirected request" in body and b"fairshare" not in body
                assert json.loads(body)["error"].endswith(f"{host.partition(':')[0]!r}")
            for host in (
                daemon.metrics_address,
                f"localhost:{port}",
                "LOCALHOST.",
                socket.gethostname(),
                f"[::1]:{port}",
            ):
                status, _ = _get_with_host(daemon.metrics_address, path, host)
                assert status == 200, (path, host, status)
        status, _ = _get_with_host(daemon.metrics_address, "/health", "evil.example")
        assert status == 200  # probes of orchestrators use service names


def _token_agent(cluster: TokenCluster, work_dir: Path, *flags: str) -> Daemon:
    argv = ["--master", cluster.master.address, "--resources", "cpus:2;mem:1024",
            "--port", "0", "--metrics-port", "0", "--work-dir", str(work_dir),
            "--hostname", "127.0.0.1", *cluster.pki.flags("agent-1"),
            "--token-file", str(cluster.token_file("agent-1")), *flags]  # fmt: skip
    agent = Daemon("agent", argv, work_dir, "agent.addr")
    try:
        agent.wait_ready()
    except BaseException:
        agent.kill()
        raise
    return agent


def test_an_agent_trusting_the_masters_ca_serves_token_only_clients_their_logs(
    tokens_cluster: TokenCluster, tmp_path: Path
) -> None:
    """Issue 23, item 6: ``--tls-ca`` (trust the master) also demanded client certificates on
    the agent's own port, so a token-only client could not reach its log service."""
    cluster = tokens_cluster
    agent = _token_agent(cluster, reachable_work_dir(tmp_path / "agent"))
    try:
        run = fairshare_cli("run", "--name", "alice-job", "--task", "cpus:0.2;mem:64",
                            "--command", "echo alice output", *cluster.client_flags("alice"),
                            timeout=90)  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        logs = fairshare_cli("logs", "alice-job-1", *cluster.client_flags("alice"), timeout=60)
        assert (logs.returncode, logs.stdout) == (0, "alice output\n"), logs.stderr
        wait_for(lambda: "tls=tls" in agent.log(), what="tls=tls")  # no client certificate asked
        other = fairshare_cli("logs", "alice-job-1", *cluster.client_flags("viewer"))
        assert other.returncode == 1 and "alice output" not in other.stdout, other.stderr
    finally:
        agent.kill()
    # "verify my clients" is its own setting: with it, no certificate, no connection.
    mutual = _token_agent(
        cluster,
        reachable_work_dir(tmp_path / "mutual"),
        "--tls-client-ca",
        str(cluster.pki.ca.cert),
    )
    try:
        wait_for(lambda: "tls=mutual" in mutual.log(), what="the agent's tls=mutual line")
        assert health(mutual.address, cluster.pki.security(None)) == 0  # handshake refused
        assert health(mutual.address, cluster.pki.security("operator")) == 1
    finally:
        mutual.kill()
