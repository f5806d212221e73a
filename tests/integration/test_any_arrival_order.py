"""DRFH from any starting point (issue 15), live: real master, two agents, two ``fairshare run``.

DRFH's Fig. 1: servers s1 ``cpus:2;mem:12288`` and s2 ``cpus:12;mem:2048``, users u1 (tasks
``cpus:0.2;mem:1024``) and u2 (``cpus:1;mem:204.8``), each wanting 30 tasks. DRFH runs 10 and 10
(u1 on s1, u2 on s2). Offers are never preempted, so the first allocation depends on who
arrived when; the tests start the four processes in every kind of order (servers one by one
either way with the frameworks first, one framework first, all at once), each arrival waited
for (in the pool, or subscribed with its demand) and given time to be served before the next.

- With churn (``--duration 3``: every task ends and is replaced), the fit-aware choice brings
  every order to 10 and 10 within 30 s of the last arrival.
- Without churn (tasks that never end), only preemption can: a master with ``--rebalance``
  kills preemptible placeholder tasks until the cluster is at 10 and 10, then stops.

Every wait polls ``GetState`` with a deadline; each order starts its own processes once.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import grpc
import pytest
from daemons import DEFAULT_MASTER_FLAGS, Client, Daemon, start_master, wait_for
from fairshare.v1 import common_pb2, operator_pb2
from wire_fakes import get_state

AGENTS = {"s1": "cpus:2;mem:12288", "s2": "cpus:12;mem:2048"}
TASKS = {"u1": "cpus:0.2;mem:1024", "u2": "cpus:1;mem:204.8"}
DRFH_PLACEMENT = {"u1": {"s1": 10}, "u2": {"s2": 10}}  # DRFH's 10 and 10, each on its server
REACH = 30.0  # seconds from the last arrival to 10 and 10 (the bound)
SERVED = 5.0  # at most this long for an arrival to be served before the next one
RUNNING = common_pb2.TASK_STATE_RUNNING

Order = Sequence[Sequence[str]]  # steps; the names of one step arrive together
ORDERS: dict[str, Order] = {
    "frameworks-then-s1-then-s2": [["u1", "u2"], ["s1"], ["s2"]],
    "frameworks-then-s2-then-s1": [["u1", "u2"], ["s2"], ["s1"]],
    "u1-then-s1-s2-then-u2": [["u1"], ["s1"], ["s2"], ["u2"]],
    "u2-then-s2-s1-then-u1": [["u2"], ["s2"], ["s1"], ["u1"]],
    "all-at-once": [["s1", "s2", "u1", "u2"]],
}


class LiveCluster:
    """One master and the arrivals of s1, s2, u1 and u2, each started once."""

    def __init__(self, master: Daemon, tmp_path: Path, run_flags: Sequence[str]) -> None:
        self.master = master
        self.tmp_path = tmp_path
        self.run_flags = list(run_flags)
        self.channel = grpc.insecure_channel(master.address)
        self.processes: list[Daemon | Client] = []
        self.last_arrival = 0.0  # monotonic time the last step was started

    def state(self) -> operator_pb2.GetStateResponse:
        return get_state(self.channel)

    def placement(self) -> dict[str, dict[str, int]]:
        """RUNNING tasks per framework name and agent (s1/s2)."""
        state = self.state()
        names = {fw.framework_info.framework_id: fw.framework_info.name for fw in state.frameworks}
        hosts = {a.agent_id: a.agent_info.hostname for a in state.agents}
        out: dict[str, dict[str, int]] = {}
        for task in state.tasks:
            if task.status.state == RUNNING:
                per = out.setdefault(names[task.framework_id], {})
                host = hosts.get(task.info.agent_id, "?")
                per[host] = per.get(host, 0) + 1
        return out

    def start(self, name: str) -> Daemon | Client:
        """Start one arrival without waiting for it."""
        if name in AGENTS:
            work_dir = self.tmp_path / name
            argv = [
                "--master", self.master.address, "--resources", AGENTS[name], "--hostname", name,
                "--port", "0", "--metrics-port", "0", "--work-dir", str(work_dir),
            ]  # fmt: skip
            process: Daemon | Client = Daemon("agent", argv, work_dir, "agent.addr")
        else:
            argv = [
                "-m", "fairshare.cli", "run", "--master", self.master.address,
                "--name", name, "--task", TASKS[name], "--count", "30", *self.run_flags,
            ]  # fmt: skip
            process = Client(argv, self.tmp_path / f"{name}.log")
        self.processes.append(process)
        return process

    def arrived(self, name: str) -> bool:
        state = self.state()
        if name in AGENTS:
            return any(a.agent_info.hostname == name for a in state.agents)
        return any(
            fw.framework_info.name == name and fw.HasField("demand") for fw in state.frameworks
        )

    def arrive(self, step: Sequence[str]) -> None:
        """Start a step's arrivals together, wait until each is there, then give the master
        time to serve them (no offer outstanding, or ``SERVED`` at most)."""
        self.last_arrival = time.monotonic()
        for process in [self.start(name) for name in step]:
            if isinstance(process, Daemon):
                process.wait_ready()
        for name in step:
            wait_for(lambda name=name: self.arrived(name), REACH, f"{name} to arrive")
        deadline = time.monotonic() + SERVED
        time.sleep(0.5)
        while self.state().offers and time.monotonic() < deadline:
            time.sleep(0.1)

    def reach(self, expected: dict[str, dict[str, int]], within: float) -> float:
        """Seconds from the start of the last arrival until ``placement() == expected`` (fails
        after ``within``). One snapshot decides: with churn, a framework's tasks end together
        and are replaced, so a second read could fall between the two."""
        left = within - (time.monotonic() - self.last_arrival)
        wait_for(lambda: self.placement() == expected, max(left, 0.0), f"{expected} running")
        return time.monotonic() - self.last_arrival

    def close(self) -> None:
        self.channel.close()
        for process in self.processes:
            process.kill()


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Callable[..., LiveCluster]]:
    """``live(master_flags, run_flags)``: a master and a ``LiveCluster`` over it."""
    made: list[LiveCluster] = []

    def make(master_flags: Sequence[str], run_flags: Sequence[str]) -> LiveCluster:
        master = start_master(tmp_path / "master", *DEFAULT_MASTER_FLAGS, *master_flags)
        cluster = LiveCluster(master, tmp_path, run_flags)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.close()
        cluster.master.kill()
        assert "Traceback" not in cluster.master.log(), cluster.master.log_path


def preempted(master: Daemon) -> int:
    """``fairshare_tasks_preempted_total`` summed over frameworks."""
    url = f"http://{master.metrics_address}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return round(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("fairshare_tasks_preempted_total{")
        )
    )


@pytest.mark.parametrize("order", list(ORDERS))
def test_every_arrival_order_reaches_drfh_with_churn(
    live: Callable[..., LiveCluster], order: str
) -> None:
    cluster = live([], ["--duration", "3"])
    for step in ORDERS[order]:
        cluster.arrive(step)
    first = cluster.placement()
    took = cluster.reach(DRFH_PLACEMENT, REACH)
    print(f"{order}: first {first}; 10 and 10 running {took:.1f}s after the last arrival")


REBALANCE_FLAGS = (
    "--rebalance",
    "--rebalance-interval", "1s",
    "--rebalance-hysteresis", "2s",
    "--rebalance-grace", "0s",
)  # fmt: skip


@pytest.mark.parametrize(
    "order", ["frameworks-then-s1-then-s2", "u1-then-s1-s2-then-u2", "all-at-once"]
)
def test_rebalance_moves_long_running_tasks_to_drfh(
    live: Callable[..., LiveCluster], order: str
) -> None:
    cluster = live(REBALANCE_FLAGS, [])
    for step in ORDERS[order]:
        cluster.arrive(step)
    first = cluster.placement()
    took = cluster.reach(DRFH_PLACEMENT, REACH)
    kills = preempted(cluster.master)
    print(f"{order}: first {first}; 10 and 10 {took:.1f}s after the last arrival, {kills} killed")
    if first != DRFH_PLACEMENT:
        assert kills >= 1  # tasks that never end moved only by preemption
        assert "rebalance.preempted" in cluster.master.log()
        agents = [p for p in cluster.processes if isinstance(p, Daemon)]
        assert any("reason=REASON_PREEMPTED" in agent.log() for agent in agents)
    # No thrash: at DRFH nothing more is killed and the tasks stay.
    time.sleep(4)
    assert preempted(cluster.master) == kills
    assert cluster.placement() == DRFH_PLACEMENT
    url = f"http://{cluster.master.metrics_address}/api/v1/state"  # what the dashboard shows
    with urllib.request.urlopen(url, timeout=10) as response:
        frameworks = json.load(response)["frameworks"]
    assert sum(f["preempted"] for f in frameworks) == kills


def test_rebalance_leaves_tasks_not_declared_preemptible(
    live: Callable[..., LiveCluster],
) -> None:
    """``--no-preemptible`` tasks are never killed, whatever the gap."""
    cluster = live(REBALANCE_FLAGS, ["--no-preemptible"])
    for step in ORDERS["frameworks-then-s1-then-s2"]:
        cluster.arrive(step)
    before = cluster.placement()
    time.sleep(5)  # hysteresis 2 s and more checks: the rebalancer had its chances
    assert preempted(cluster.master) == 0
    assert cluster.placement() == before
    assert all(not task.info.preemptible for task in cluster.state().tasks)
