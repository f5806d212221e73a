"""Drains survive a failover of HA masters on etcd (issue 24, item 11), with real processes:
two masters on a real etcd, two agents, a framework with one task.

One agent is drained with a deadline while its task runs (DRAINING), the other, idle, is
DRAINED at once; kill -9 of the leader: the new leader shows both states, the same deadline,
kills the task at that deadline (never before) and marks the agent DRAINED.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from daemons import ROOT, daemon_env, start_agent, wait_for
from faults import FrameworkProcess, agent_states, cluster_state, registered, running_tasks
from ha import HAMasters

SETTLE = 60.0
GRACE = 15.0  # outlasts the failover (a few seconds), so the new leader shows DRAINING


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *args],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_drain_goes_on_after_the_leader_is_killed(etcd_url: str, tmp_path: Path) -> None:
    ha = HAMasters(tmp_path, etcd_url, count=2)
    agents = [
        start_agent(ha.addresses, tmp_path / f"agent{i}", resources="cpus:2;mem:512")
        for i in range(2)
    ]
    FrameworkProcess(ha.addresses, "A", "cpus:1;mem:128", 1, tmp_path)
    leader = ha.leader()
    wait_for(lambda: registered(agents), SETTLE, "both agents registered")
    running = wait_for(
        lambda: (s := cluster_state(leader.address)) is not None and running_tasks(s),
        SETTLE,
        "A's task running",
    )
    (busy,) = set(running.values())
    state = cluster_state(leader.address)
    assert state is not None
    (idle,) = [a for a in agent_states(state) if a != busy]

    draining = cli("agents", "--master", ha.addresses, "--drain", busy, "--deadline", f"{GRACE:g}s")
    assert draining.returncode == 0, draining.stderr
    assert cli("agents", "--master", ha.addresses, "--drain", idle).returncode == 0
    state = cluster_state(leader.address)
    assert state is not None
    assert agent_states(state) == {busy: "DRAINING", idle: "DRAINED"}
    (before,) = [a.drain_deadline.ToNanoseconds() for a in state.agents if a.agent_id == busy]

    leader.kill()
    new = ha.leader(exclude=leader, timeout=30)
    after = wait_for(
        lambda: (
            (s := cluster_state(new.address)) is not None
            and agent_states(s).get(busy) in ("DRAINING", "DRAINED")
            and s
        ),
        SETTLE,
        "the busy agent back at the new leader",
    )
    assert not isinstance(after, bool)
    assert agent_states(after)[idle] in ("DRAINED", "RECOVERING")
    if agent_states(after)[busy] == "DRAINING":  # (DRAINED already if the failover was slow)
        (deadline,) = [a.drain_deadline for a in after.agents if a.agent_id == busy]
        assert deadline.ToNanoseconds() == before  # the same deadline, from etcd
    wait_for(
        lambda: (
            (s := cluster_state(new.address)) is not None
            and agent_states(s) == {busy: "DRAINED", idle: "DRAINED"}
        ),
        SETTLE + GRACE,
        "the busy agent DRAINED after its deadline",
    )
    assert time.time() * 1e9 >= before  # drained (its task killed) no earlier than the deadline
    final = cluster_state(new.address)
    assert final is not None and not running_tasks(final) and not final.offers
