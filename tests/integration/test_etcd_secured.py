"""etcd secured (issue 23, finding 2; docs/security.md, "etcd"), with a real etcd serving TLS
only, demanding client certificates and authentication, and real masters and agents:

- a process without etcd credentials reads nothing, and a daemon given wrong ones stops at
  start-up with exit 2 and one line naming the cause; the legitimate cluster (masters, agents
  and commands finding the leader in etcd with their credentials) works;
- rows rewritten in etcd with etcd's root credentials (an attacker with etcd access: a forged
  weight, an agent's owner changed, a framework row of another principal) are not loaded with
  authority by the next leader: their signature (``--registry-key``) does not verify;
- a fake leader record in etcd: an agent never registers with a fake master answering an epoch
  above etcd's revision of the leader key (it never runs its command, never checkpoints its
  epoch), nor with one that does not present a certificate of the cluster's CA; once the fake
  record is gone the real leader is followed again.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from aetcd import rpc as etcd_rpc
from daemons import ROOT, Daemon, daemon_env, start_agent, start_master, wait_for
from etcd_server import SecuredEtcd
from fairshare.etcd import EtcdClient, EtcdRefused, EtcdUnavailable, check_access, read_leader
from fairshare.etcd_security import EtcdSecurity
from fairshare.local_ca import DAEMON, LocalCa
from fairshare.master_target import EtcdTarget
from fairshare.v1 import agent_pb2, agent_pb2_grpc, common_pb2
from faults import agent_states, cluster_state
from ha import HA_FLAGS, role

from agent.durability.checkpoint import CHECKPOINT_FILE

FORGED_EPOCH = 10**12
SETTLE = 60.0


@pytest.fixture
def secured(secured_etcd: SecuredEtcd) -> SecuredEtcd:
    return secured_etcd


def registry_key(directory: Path) -> Path:
    path = directory / "registry.key"
    path.write_text("k" * 16 + "0123456789abcdef0123456789abcdef\n", encoding="ascii")
    path.chmod(0o600)
    return path


def secured_master(etcd: SecuredEtcd, url: str, work_dir: Path, key: Path, *flags: str) -> Daemon:
    master = start_master(
        work_dir, "--registry", url, "--registry-key", str(key), *etcd.flags(), *HA_FLAGS, *flags
    )
    wait_for(lambda: role(master) == "leader", 30, "the master leading")
    return master


def tls_master(etcd: SecuredEtcd, url: str, work_dir: Path, key: Path, *flags: str) -> Daemon:
    """A master serving TLS (its readiness: its address file; the agents' registration says
    it leads)."""
    for stale in ("master.addr", "metrics.addr"):
        (work_dir / stale).unlink(missing_ok=True)
    argv = [
        "--port", "0", "--metrics-port", "0", "--work-dir", str(work_dir), "--registry", url,
        "--registry-key", str(key), *etcd.flags(), *HA_FLAGS, *flags,
    ]  # fmt: skip
    master = Daemon("master", argv, work_dir, "master.addr")
    try:
        master.wait_ready()
    except BaseException:
        master.kill()
        raise
    return master


def fairshare(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *args],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def access(url: str, security: EtcdSecurity) -> str:
    """``ok`` with the leader's address, or the refusal."""

    async def once() -> str:
        client = EtcdClient(EtcdTarget.parse(url), 5.0, security)
        try:
            await check_access(client)
            record = await read_leader(client)
            return f"ok {record.address if record else None}"
        except (EtcdRefused, EtcdUnavailable) as error:
            return f"refused {error}"
        finally:
            await client.close()

    return asyncio.run(once())


def test_without_credentials_nothing_is_read_and_daemons_say_why(
    secured: SecuredEtcd, tmp_path: Path
) -> None:
    url = secured.url()
    master = secured_master(secured, url, tmp_path / "m0", registry_key(tmp_path))
    client = secured.client
    reader = secured.password_file("fairshare-reader").read_text().strip()
    other_ca = LocalCa.create(tmp_path / "other-ca")
    refused = {
        "plaintext": EtcdSecurity(),
        "no client certificate": EtcdSecurity(ca=secured.ca.cert),
        "another CA": EtcdSecurity(ca=other_ca.cert, cert=client.cert, key=client.key),
        "certificate, no user": EtcdSecurity(ca=secured.ca.cert, cert=client.cert, key=client.key),
        "wrong password": EtcdSecurity(
            secured.ca.cert, client.cert, client.key, "fairshare-reader", "wrong"
        ),
    }
    for what, security in refused.items():
        answer = access(url, security)
        assert answer.startswith("refused etcd "), (what, answer)
    ok = EtcdSecurity(secured.ca.cert, client.cert, client.key, "fairshare-reader", reader)
    assert access(url, ok) == f"ok {master.address}"
    with pytest.raises(AssertionError, match=r"user name is empty|permission denied"):
        secured.etcdctl("get", "--prefix", "/", user=None)  # a certificate alone reads nothing

    # Daemons given wrong etcd credentials stop at once: exit 2, one line naming the cause.
    wrong = tmp_path / "wrong.password"
    wrong.write_text("not-the-password\n")
    done = fairshare(
        "master", "--registry", url, "--work-dir", str(tmp_path / "m-wrong"), "--port", "0",
        *secured.flags(None), "--etcd-user", "fairshare-master",
        "--etcd-password-file", str(wrong),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "the user or password is wrong" in done.stderr, done.stderr
    done = fairshare("agent", "--master", url, "--work-dir", str(tmp_path / "a-open"))
    assert done.returncode == 2, done.stderr
    assert "etcd speaks TLS: give --etcd-tls-ca" in done.stderr, done.stderr
    done = fairshare(
        "agent", "--master", url, "--work-dir", str(tmp_path / "a-nocert"),
        "--etcd-tls-ca", str(secured.ca.cert),
    )  # fmt: skip
    assert done.returncode == 2 and "demands a client certificate" in done.stderr, done.stderr

    # The legitimate cluster works: an agent and the commands find the leader in etcd.
    agent = start_agent(url, tmp_path / "agent", *secured.flags("fairshare-reader"))
    wait_for(lambda: "agent.registered" in agent.log(), SETTLE, "the agent registered via etcd")
    done = fairshare("status", "--master", url, *secured.flags("fairshare-reader"))
    assert done.returncode == 0 and master.address in done.stdout, done.stderr
    done = fairshare("status", "--master", url)  # a command without etcd credentials says why
    assert done.returncode == 1 and "etcd speaks TLS: give --etcd-tls-ca" in done.stderr
    agent.stop()
    assert master.stop() == 0


def registry_rows(secured: SecuredEtcd, url: str) -> dict[str, dict[str, Any]]:
    prefix = EtcdTarget.parse(url).prefix + "/registry/"
    out = secured.etcdctl("get", "--prefix", prefix, "-w", "json")
    rows: dict[str, dict[str, Any]] = {}
    import base64

    for kv in json.loads(out).get("kvs", []):
        key = base64.b64decode(kv["key"]).decode()
        rows[key] = json.loads(base64.b64decode(kv["value"]))
    return rows


def weights(master: Daemon, secured: SecuredEtcd, url: str) -> str:
    done = fairshare("weights", "--master", url, *secured.flags("fairshare-reader"))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_rows_rewritten_in_etcd_are_not_loaded_by_the_next_leader(
    secured: SecuredEtcd, tmp_path: Path
) -> None:
    url = secured.url()
    key = registry_key(tmp_path)
    master = secured_master(secured, url, tmp_path / "m0", key)
    agent = start_agent(url, tmp_path / "agent", *secured.flags("fairshare-reader"))
    wait_for(lambda: "agent.registered" in agent.log(), SETTLE, "the agent registered")
    done = fairshare(
        "weights", "--role", "eng", "--set", "2", "--master", url,
        *secured.flags("fairshare-reader"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = registry_rows(secured, url)
    prefix = EtcdTarget.parse(url).prefix + "/registry/"
    agent_key = next(k for k in rows if k.startswith(prefix + "agents/"))
    assert all("mac" in row for row in rows.values())  # every row signed

    # An attacker with etcd access (root): a weight, an agent's owner, a framework of its own.
    forged_agent = dict(rows[agent_key], principal="mallory")
    secured.etcdctl("put", agent_key, json.dumps(forged_agent, sort_keys=True))
    weight = {"weight": 1000.0, "mac": "0" * 64}
    secured.etcdctl("put", prefix + "weights/role/eng", json.dumps(weight))
    secured.etcdctl("put", prefix + "weights/role/ops", json.dumps({"weight": 999.0}))
    framework = {
        "spec": {"framework_id": "fw-forged", "name": "x", "role": "ops", "principal": "mallory"},
        "registered_at": time.time(),
        "removed": False,
    }
    secured.etcdctl("put", prefix + "frameworks/fw-forged", json.dumps(framework))

    assert master.stop() == 0  # the next term reads the registry afresh
    master = secured_master(secured, url, tmp_path / "m0", key)
    log = master.log()
    for forged in (agent_key, "weights/role/eng", "weights/role/ops", "frameworks/fw-forged"):
        assert "registry.row.quarantined" in log and forged in log, (forged, log[-3000:])
    listed = weights(master, secured, url)
    assert "1000" not in listed and "999" not in listed, listed
    state = cluster_state(master.address)
    assert state is not None and "fw-forged" not in {f.framework_id for f in state.frameworks}
    # The real agent, whose row no longer counts, registers afresh and is served.
    wait_for(
        lambda: "ACTIVE" in agent_states(cluster_state(master.address) or state).values(),
        SETTLE,
        "the agent active under the new term",
    )
    agent.stop()
    assert master.stop() == 0


class FakeMaster(agent_pb2_grpc.AgentServiceServicer):  # type: ignore[misc]
    """Answers every Connect as a leader of ``epoch`` and sends a launch of a task that would
    leave ``marker``; records what it saw."""

    def __init__(self, epoch: int, marker: Path) -> None:
        self.epoch = epoch
        self.marker = marker
        self.connects = 0

    def Connect(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        first = next(requests)
        self.connects += 1
        agent_id = first.reregister.agent_id or "fake-agent"
        registered = agent_pb2.AgentRegistered(
            agent_id=agent_id, master_id="fake", epoch=self.epoch
        )
        registered.heartbeat_interval.seconds = 5
        yield agent_pb2.ConnectResponse(registered=registered)
        task = common_pb2.TaskInfo(
            task_id="forged", agent_id=agent_id,
            command=common_pb2.CommandInfo(value=f"touch {self.marker}"),
        )  # fmt: skip
        task.resources.CopyFrom(common_pb2.Resources())
        launch = agent_pb2.AgentCommand(
            launch_tasks=agent_pb2.LaunchTasksCommand(framework_id="fw-fake", tasks=[task])
        )
        yield agent_pb2.ConnectResponse(
            commands=agent_pb2.AgentCommands(commands=[launch], epoch=self.epoch)
        )
        deadline = time.monotonic() + 30
        while context.is_active() and time.monotonic() < deadline:
            time.sleep(0.1)


def fake_master(epoch: int, marker: Path) -> tuple[grpc.Server, FakeMaster, str]:
    server = grpc.server(futures.ThreadPoolExecutor(4))
    fake = FakeMaster(epoch, marker)
    agent_pb2_grpc.add_AgentServiceServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, fake, f"127.0.0.1:{port}"


def checkpointed_epoch(agent: Daemon) -> int:
    with sqlite3.connect(agent.work_dir / CHECKPOINT_FILE) as db:
        row = db.execute("SELECT value FROM meta WHERE key = 'leader_epoch'").fetchone()
    return 0 if row is None else int(row[0])


def put_fake_leader(secured: SecuredEtcd, url: str, address: str) -> None:
    record = {"address": address, "http": "", "master_id": "fake", "elected_at": time.time()}
    key = EtcdTarget.parse(url).prefix + "/leader"
    secured.etcdctl("put", key, json.dumps(record))


def remove_fake_leader(secured: SecuredEtcd, url: str) -> None:
    secured.etcdctl("del", EtcdTarget.parse(url).prefix + "/leader")


def leader_revision(secured: SecuredEtcd, url: str) -> int:
    out = secured.etcdctl("get", EtcdTarget.parse(url).prefix + "/leader", "-w", "json")
    return int(json.loads(out)["kvs"][0]["create_revision"])


def test_an_agent_refuses_a_fake_leader_claiming_an_epoch_etcd_does_not_allow(
    secured: SecuredEtcd, tmp_path: Path
) -> None:
    """An open cluster (masters without TLS), etcd secured: the fake master answers with an
    epoch of 10^12; the agent refuses it before applying anything."""
    url = secured.url()
    key = registry_key(tmp_path)
    master = secured_master(secured, url, tmp_path / "m0", key)
    agent = start_agent(url, tmp_path / "agent", *secured.flags("fairshare-reader"))
    wait_for(lambda: "agent.registered" in agent.log(), SETTLE, "the agent registered")
    real_epoch = checkpointed_epoch(agent)
    assert real_epoch > 0
    marker = tmp_path / "forged-task-ran"
    server, fake, address = fake_master(FORGED_EPOCH, marker)
    try:
        assert master.stop() == 0  # a leader change: the agent looks the leader up in etcd
        put_fake_leader(secured, url, address)
        wait_for(
            lambda: "master.epoch.implausible" in agent.log(), SETTLE, "the fake epoch refused"
        )
        assert fake.connects >= 1
        assert f"epoch={FORGED_EPOCH}" in agent.log()
        assert checkpointed_epoch(agent) == real_epoch  # not locked out of the real leaders
        assert not marker.exists()
    finally:
        server.stop(0)
    remove_fake_leader(secured, url)
    master = secured_master(secured, url, tmp_path / "m0", key)
    wait_for(lambda: "agent.reregistered" in agent.log(), SETTLE, "back with the real leader")
    assert checkpointed_epoch(agent) > real_epoch
    assert not marker.exists()
    agent.stop()
    assert master.stop() == 0


def test_an_agent_refuses_a_fake_leader_without_the_cluster_certificate(
    secured: SecuredEtcd, tmp_path: Path
) -> None:
    """A cluster with TLS: the fake master claims a plausible epoch (its record's own create
    revision) but has no certificate of the cluster's CA: the agent never speaks to it."""
    url = secured.url()
    key = registry_key(tmp_path)
    ca = secured.ca
    issued = ca.certificate("master", DAEMON)  # a daemon serves: serverAuth
    cluster_tls = ("--tls-ca", str(ca.cert))
    master_tls = ("--tls-cert", str(issued.cert), "--tls-key", str(issued.key), *cluster_tls)
    master = tls_master(secured, url, tmp_path / "m0", key, *master_tls)
    agent_cert = ca.certificate("agent-1", DAEMON)
    agent = start_agent(
        url, tmp_path / "agent", *secured.flags("fairshare-reader"), *cluster_tls,
        "--tls-cert", str(agent_cert.cert), "--tls-key", str(agent_cert.key),
    )  # fmt: skip
    wait_for(lambda: "agent.registered" in agent.log(), SETTLE, "the agent registered")
    real_epoch = checkpointed_epoch(agent)
    marker = tmp_path / "forged-task-ran"
    server, fake, address = fake_master(0, marker)
    try:
        assert master.stop() == 0
        put_fake_leader(secured, url, address)
        fake.epoch = leader_revision(secured, url)  # what etcd's revision allows
        wait_for(
            lambda: f"master={address}" in agent.log(), SETTLE, "the agent trying the fake leader"
        )
        assert fake.connects == 0  # the TLS handshake failed: no Connect reached it
        assert checkpointed_epoch(agent) == real_epoch
        assert not marker.exists()
    finally:
        server.stop(0)
    remove_fake_leader(secured, url)
    master = tls_master(secured, url, tmp_path / "m0", key, *master_tls)
    wait_for(lambda: "agent.reregistered" in agent.log(), SETTLE, "back with the real leader")
    agent.stop()
    assert master.stop() == 0


def test_an_expired_etcd_login_is_renewed(tmp_path: Path) -> None:
    """etcd's login tokens expire (``--auth-token-ttl``): a client that has been idle longer
    logs in again instead of failing (an agent reads etcd only when its master changes)."""
    etcd = SecuredEtcd(tmp_path / "etcd", token_ttl=1)
    try:
        password = etcd.password_file("fairshare-reader").read_text().strip()
        security = EtcdSecurity(
            etcd.ca.cert, etcd.client.cert, etcd.client.key, "fairshare-reader", password
        )
        client = EtcdClient(EtcdTarget.parse(etcd.url()), 5.0, security)

        async def run() -> None:
            assert await read_leader(client) is None  # logged in
            first = client._clients[0]
            token = dict(first.metadata)["token"]

            async def expired() -> bool:
                request = etcd_rpc.RangeRequest(key=b"x")
                try:
                    await first.kvstub.Range(request, metadata=(("token", token),), timeout=5)
                except grpc.aio.AioRpcError as error:
                    return error.code() == grpc.StatusCode.UNAUTHENTICATED
                return False

            # Every use of a token extends it: leave it unused for three TTLs before each look.
            deadline = time.monotonic() + 30
            await asyncio.sleep(3)
            while not await expired():
                assert time.monotonic() < deadline, "etcd's token did not expire"
                await asyncio.sleep(3)
            assert await read_leader(client) is None  # logged in again, no error
            assert dict(client._clients[0].metadata)["token"] != token
            await client.close()

        asyncio.run(run())
    finally:
        etcd.kill()
