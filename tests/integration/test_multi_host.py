"""A cluster across hosts (issue 12, docs/architecture.md §5):
real processes in Linux network namespaces
the test builds itself (``netns.Sandbox``: a private bridge, addresses only inside it) - an etcd
cluster of three members (TLS with client certificates and users, as docs/security.md sets it
up; the masters' registry rows signed), three HA masters, two agents, a framework and an
observer, each in its own namespace - and faults injected there, one after the other, each
followed by a bounded wait until the workload is whole again:

1. kill -9 of the leader: another master leads, every task runs on, nothing is launched again;
2. SIGSTOP of the leader: another leads; woken, the old one is a follower;
3. the leader cut off from etcd (but not from agents and frameworks): it stops acting as leader
   *before* another master is elected (its ``leader.deposed`` line says until when it may have
   acted; both on this one machine's clock), then another leads;
4. both agents cut off from every master: the leader marks them unreachable; back, they
   reregister with their tasks;
5. an etcd member lost (kill -9), then the leader killed: the two members left elect a leader.

Runs as root with ``ip`` and ``iptables``; skipped, saying so, otherwise. The namespaces and
every process are removed even when the test fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import daemons
import netns
import pytest
from daemons import ROOT, Daemon, daemon_env, wait_for
from etcd_server import EtcdMember, SecuredEtcd
from faults import FrameworkProcess, pause, resume
from ha import acted_until, log_time

SETTLE = 60.0
PROBE = Path(__file__).with_name("ns_probe.py")
MASTER_PORT, HTTP_PORT = 5050, 9100
ETCD_PORTS = (2379, 2380)
AGENT_RESOURCES = "cpus:4;mem:2048"
TASKS = 5


class Cluster:
    """The sandbox and what runs in it."""

    def __init__(self, sandbox: netns.Sandbox, directory: Path) -> None:
        self.sandbox = sandbox
        self.directory = directory
        for name in ("e0", "e1", "e2", "m0", "m1", "m2", "a0", "a1", "fw", "obs"):
            sandbox.host(name)
        hosts = sandbox.hosts
        secured = SecuredEtcd(  # TLS with client certificates, users: docs/security.md
            directory / "etcd",
            [hosts[f"e{i}"] for i in range(3)],
            wraps=[sandbox.wrap(f"e{i}") for i in range(3)],
            ports=[ETCD_PORTS] * 3,
        )
        self.etcd: list[EtcdMember] = secured.members
        key = directory / "registry.key"
        key.write_text(os.urandom(32).hex() + "\n", encoding="ascii")
        self.etcd_flags = (*secured.flags("fairshare-master"), "--registry-key", str(key))
        self.registry = secured.url("multi-host")
        self.masters = {f"m{i}": self.start_master(f"m{i}") for i in range(3)}
        self.addresses = ",".join(f"{hosts[m]}:{MASTER_PORT}" for m in self.masters)
        self.http = ",".join(f"{hosts[m]}:{HTTP_PORT}" for m in self.masters)
        self.agents = [self.start_agent(f"a{i}") for i in range(2)]
        self.framework = FrameworkProcess(
            self.addresses, "A", "cpus:1;mem:128", TASKS, directory, wrap=sandbox.wrap("fw")
        )

    def start_master(self, name: str) -> Daemon:
        argv = ["--host", self.sandbox.hosts[name], "--port", str(MASTER_PORT), "--allow-insecure"]
        argv += ["--metrics-port", str(HTTP_PORT), "--work-dir", str(self.directory / name)]
        argv += ["--registry", self.registry, "--election-ttl", "2s", "--agent-timeout", "5s"]
        argv += [*daemons.DEFAULT_MASTER_FLAGS, "--reregistration-timeout", "30s"]
        argv += self.etcd_flags
        (self.directory / name / "master.addr").unlink(missing_ok=True)
        master = Daemon("master", argv, self.directory / name, "master.addr", None,
                        self.sandbox.wrap(name))  # fmt: skip
        master.wait_ready(30)
        return master

    def start_agent(self, name: str) -> Daemon:
        argv = [
            "--master",
            "",
            "--host",
            self.sandbox.hosts[name],
            "--port",
            "0",
            "--allow-insecure",
        ]
        argv[1] = ",".join(f"{self.sandbox.hosts[f'm{i}']}:{MASTER_PORT}" for i in range(3))
        argv += ["--metrics-port", "0", "--work-dir", str(self.directory / name)]
        argv += ["--resources", AGENT_RESOURCES]
        agent = Daemon("agent", argv, self.directory / name, "agent.addr", None,
                       self.sandbox.wrap(name))  # fmt: skip
        agent.wait_ready(30)
        return agent

    def probe(self) -> dict[str, Any]:
        """What the observer sees (``ns_probe.py``)."""
        argv = [*self.sandbox.wrap("obs"), sys.executable, str(PROBE)]
        argv += ["--masters", self.addresses, "--http", self.http]
        done = subprocess.run(
            argv, cwd=ROOT, env=daemon_env(), capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0, done.stderr
        document: dict[str, Any] = json.loads(done.stdout)
        return document

    def leader(self, exclude: str | None = None) -> str:
        """The name of the master that leads (not ``exclude``), waited for."""

        def find() -> str | None:
            roles = self.probe()["roles"]
            leading = [
                name
                for name in self.masters
                if roles[_address(self, name)] == "leader" and name != exclude
            ]
            return leading[0] if len(leading) == 1 else None

        found: str = wait_for(find, SETTLE, "one master leading")
        return found

    def steady(self) -> dict[str, str]:
        """``{task_id: agent_id}`` once the leader has both agents ACTIVE and every task
        running (waited for)."""

        def whole() -> dict[str, str] | None:
            seen = self.probe()
            if sorted(seen.get("agents", {}).values()) != ["ACTIVE", "ACTIVE"]:
                return None
            running: dict[str, str] = seen["running"]
            return running if len(running) == TASKS and not seen["offers"] else None

        found: dict[str, str] = wait_for(whole, SETTLE, f"{TASKS} tasks running, agents ACTIVE")
        return found

    def stop(self) -> None:
        for member in self.etcd:
            member.kill()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    reason = netns.available()
    if reason is not None:
        pytest.skip(reason)
    since = len(daemons.STARTED)
    sandbox = netns.Sandbox()
    built: Cluster | None = None
    try:
        built = Cluster(sandbox, tmp_path)
        yield built
    finally:
        daemons.reap_started(since)
        if built is not None:
            built.stop()
        sandbox.close()


def restart(cluster: Cluster, name: str) -> None:
    cluster.masters[name].kill()
    cluster.masters[name] = cluster.start_master(name)


def test_a_cluster_across_hosts_survives_leader_agent_and_etcd_faults(cluster: Cluster) -> None:
    before = cluster.steady()
    launched = cluster.framework.launched
    assert sorted(launched()) == sorted(before)

    # 1. kill -9 of the leader.
    old = cluster.leader()
    cluster.masters[old].kill()
    cluster.leader(exclude=old)
    assert cluster.steady() == before
    restart(cluster, old)

    # 2. SIGSTOP of the leader, then SIGCONT.
    old = cluster.leader()
    pause(cluster.masters[old])
    try:
        cluster.leader(exclude=old)
        assert cluster.steady() == before
    finally:
        resume(cluster.masters[old])
    wait_for(lambda: cluster.probe()["roles"][_address(cluster, old)] == "follower", 20, "old")

    # 3. The leader cut off from etcd: it stops leading before another master starts.
    old = cluster.leader()
    terms_ended = len(acted_until(cluster.masters[old]))
    cluster.sandbox.block(old, ["e0", "e1", "e2"])
    try:
        new = cluster.leader(exclude=old)
        ended = wait_for(
            lambda: acted_until(cluster.masters[old])[terms_ended:], 20, "the old leader deposed"
        )
        elected = log_time(cluster.masters[new], "leader.elected")
        assert ended[0] < elected, (ended[0], elected)
        assert cluster.steady() == before
    finally:
        cluster.sandbox.unblock(old)

    # 4. Both agents cut off from every master, then back with their tasks.
    for agent in ("a0", "a1"):
        cluster.sandbox.block(agent, ["m0", "m1", "m2"])
    try:
        wait_for(
            lambda: (
                sorted(cluster.probe().get("agents", {}).values()) == ["UNREACHABLE", "UNREACHABLE"]
            ),
            SETTLE,
            "both agents unreachable",
        )
    finally:
        for agent in ("a0", "a1"):
            cluster.sandbox.unblock(agent)
    assert cluster.steady() == before

    # 5. An etcd member lost, then the leader killed: two members elect the next leader.
    cluster.etcd[0].kill()
    old = cluster.leader()
    cluster.masters[old].kill()
    cluster.leader(exclude=old)
    assert cluster.steady() == before

    assert sorted(launched()) == sorted(before)  # nothing launched twice, nothing replaced
    assert set(cluster.framework.latest().values()) == {"RUNNING"}


def _address(cluster: Cluster, name: str) -> str:
    return f"{cluster.sandbox.hosts[name]}:{MASTER_PORT}"
