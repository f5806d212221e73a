"""HA masters on etcd (issue 12, docs/architecture.md §5),
with real processes: a real etcd on loopback (secured as docs/security.md says: TLS, client
certificates, an etcd user, signed registry rows),
three real masters, agents and frameworks that take the list of masters.

- one master leads; the followers serve health and refuse every other call UNAVAILABLE with the
  leader's address (message and ``fairshare-leader`` metadata); ``fairshare status`` through
  any master shows which one leads, since when and its epoch;
- kill -9 of the leader under a steady workload: another master takes over within the lease,
  recovers from etcd, agents reregister and frameworks resubscribe with their tasks (same ids
  on the same agents), nothing is launched twice;
- SIGSTOP of the leader: another takes over; woken up, the old leader has stopped acting as
  leader (its lease ran out first: it refuses calls, naming the new leader, and none of its
  commands reaches an agent), nothing is launched twice, and the frameworks left it because it
  did not answer their health check.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from daemons import ROOT, Daemon, daemon_env, start_agent, wait_for
from etcd_server import SecuredEtcd
from fairshare.masters import LEADER_METADATA
from faults import (
    FrameworkProcess,
    agent_states,
    cluster_state,
    pause,
    registered,
    resume,
    running_tasks,
)
from ha import HAMasters, acted_until, log_time, role, secured_flags
from wire_fakes import get_state

SETTLE = 60.0
AGENT_RESOURCES = "cpus:4;mem:2048"


def steady(
    master: Daemon, frameworks: list[FrameworkProcess], agents: int
) -> dict[str, str] | None:
    """``{task_id: agent_id}`` once ``master`` leads with every agent ACTIVE and every
    framework's tasks RUNNING."""
    state = cluster_state(master.address)
    if state is None or state.offers:
        return None
    if sorted(agent_states(state).values()) != ["ACTIVE"] * agents:
        return None
    running = running_tasks(state)
    for framework in frameworks:
        if len([t for t in running if t.startswith(f"{framework.name}-")]) != framework.tasks:
            return None
    return running


def status_text(masters: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "fairshare.cli", "status", "--master", masters],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def metrics_text(master: Daemon) -> str:
    url = f"http://{master.metrics_address}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return str(answer.read().decode())


def workload(
    ha: HAMasters, tmp_path: Path, agents: int = 3
) -> tuple[list[Daemon], list[FrameworkProcess], dict[str, str]]:
    started = [
        start_agent(ha.addresses, tmp_path / f"agent{i}", resources=AGENT_RESOURCES)
        for i in range(agents)
    ]
    a = FrameworkProcess(ha.addresses, "A", "cpus:1;mem:128", 5, tmp_path)
    b = FrameworkProcess(ha.addresses, "B", "cpus:2;mem:128", 2, tmp_path)
    leader = ha.leader()
    before = wait_for(lambda: steady(leader, [a, b], agents), SETTLE, "the workload running")
    wait_for(lambda: registered(started), SETTLE, "every agent registered")
    return started, [a, b], before


def test_one_leader_followers_redirect_and_status_names_the_leader(
    secured_etcd: SecuredEtcd, tmp_path: Path
) -> None:
    ha = HAMasters(tmp_path, secured_etcd.url(), flags=secured_flags(secured_etcd, tmp_path))
    leader = ha.leader()
    followers = [m for m in ha.masters if m is not leader]
    assert [role(m) for m in followers] == ["follower", "follower"]
    for follower in followers:
        wait_for(lambda f=follower: cluster_state(f.address) is None, 10, "follower refusing")
        with grpc.insecure_channel(follower.address) as channel:
            try:
                get_state(channel)
                raise AssertionError("a follower answered GetState")
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.UNAVAILABLE
                assert leader.address in (error.details() or "")
                trailing = dict(error.trailing_metadata() or ())
                assert trailing[LEADER_METADATA] == leader.address
    state = cluster_state(leader.address)
    assert state is not None and state.leader.address == leader.address
    assert state.leader.epoch > 0
    elected = state.leader.elected_at.ToSeconds()
    assert abs(elected - time.time()) < 120
    for master, leading in [(leader, 1), *((f, 0) for f in followers)]:
        assert f"fairshare_master_leader {leading}.0" in metrics_text(master)
    url = f"http://{leader.metrics_address}/api/v1/events"
    with urllib.request.urlopen(url, timeout=10) as answer:  # the dashboard's event list
        events = json.loads(answer.read())["events"]
    started = [e["fields"]["epoch"] for e in events if e["event"] == "leader.term.started"]
    assert started == [state.leader.epoch]
    text = status_text(",".join(f.address for f in followers))  # redirected to the leader
    assert f"leader {leader.address} since " in text and f"epoch {state.leader.epoch}" in text
    for master in ha.masters:
        assert master.stop() == 0


@pytest.mark.parametrize("workers", ["0", "2"], ids=["one-process", "io-workers"])
def test_kill_9_of_the_leader_another_takes_over_and_keeps_every_task(
    secured_etcd: SecuredEtcd, tmp_path: Path, workers: str
) -> None:
    flags = (*secured_flags(secured_etcd, tmp_path), "--io-workers", workers)
    ha = HAMasters(tmp_path, secured_etcd.url(), flags=flags)
    _, frameworks, before = workload(ha, tmp_path)
    old = ha.leader()
    old_state = cluster_state(old.address)
    assert old_state is not None
    ids = {f.name: f.framework_id() for f in frameworks}

    killed = time.monotonic()
    old.kill()
    new = ha.leader(exclude=old, timeout=15)
    took_over = time.monotonic() - killed
    after = wait_for(lambda: steady(new, frameworks, 3), SETTLE, "every task running again")
    assert after == before  # same task ids on the same agents
    state = cluster_state(new.address)
    assert state is not None and state.leader.epoch > old_state.leader.epoch
    wait_for(lambda: all(f.subscriptions() == 2 for f in frameworks), SETTLE, "resubscribed")
    assert {f.name: f.framework_id() for f in frameworks} == ids
    for framework in frameworks:  # nothing launched again
        assert sorted(framework.launched()) == sorted(
            t for t in before if t.startswith(f"{framework.name}-")
        )
    print(f"\nleader kill -9 -> another master leads: {took_over:.2f} s")

    # The killed master comes back as a follower of the new leader.
    back = ha.restart(old)
    wait_for(lambda: role(back) == "follower", 15, "the old leader back as a follower")


@pytest.mark.parametrize("workers", ["0", "2"], ids=["one-process", "io-workers"])
def test_paused_leader_stops_leading_before_another_starts(
    secured_etcd: SecuredEtcd, tmp_path: Path, workers: str
) -> None:
    flags = (*secured_flags(secured_etcd, tmp_path), "--io-workers", workers)
    ha = HAMasters(tmp_path, secured_etcd.url(), flags=flags)
    agents, frameworks, before = workload(ha, tmp_path)
    old = ha.leader()
    pause(old)
    try:
        new = ha.leader(exclude=old, timeout=15)
        after = wait_for(lambda: steady(new, frameworks, 3), SETTLE, "every task running again")
        assert after == before
    finally:
        resume(old)
    # Woken up, the old leader's lease has long run out: it refuses calls and names the leader.
    wait_for(lambda: role(old) == "follower", 10, "the paused leader a follower")
    ended = wait_for(lambda: acted_until(old), 10, "the paused leader deposed")
    assert ended[-1] < log_time(new, "leader.elected")  # it acted no later than that
    log = old.log()
    assert "leader.term.ended" in log, log[-3000:]
    with grpc.insecure_channel(old.address) as channel:
        try:
            get_state(channel)
            raise AssertionError("the deposed leader answered GetState")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.UNAVAILABLE
            assert dict(error.trailing_metadata() or ())[LEADER_METADATA] == new.address
    assert steady(new, frameworks, 3) == before  # the old leader's wake-up changed nothing
    for agent in agents:
        assert agent.proc.poll() is None
    # The frameworks left the silent leader because it did not answer a health check (within
    # about 15 s), not after their 25 s of missed heartbeats.
    wait_for(lambda: all(f.subscriptions() == 2 for f in frameworks), SETTLE, "resubscribed")
    for framework in frameworks:
        reasons = [r["reason"] for r in framework.records() if r["kind"] == "disconnected"]
        assert len(reasons) == 1 and "did not answer a health check" in reasons[0], reasons
    for framework in frameworks:
        assert len(framework.launched()) == len(set(framework.launched()))
        assert sorted(framework.launched()) == sorted(
            t for t in before if t.startswith(f"{framework.name}-")
        )
