"""``fairshare quota`` against real processes: a master, an agent and ``fairshare run``
frameworks in roles, quotas set and listed through the CLI.

- A role limited to ``cpus:4`` alone on a 12-cpu agent never holds more than 4 one-cpu tasks
  (GetState sampled for a few seconds), and the listing shows it consuming its limit.
- A role guaranteed ``cpus:8`` on 12 cpus beside two other roles, all churning
  (``--duration 2``), holds 8 (time-averaged >= 7), where H-DRF alone would give it a third.
- Quotas survive a master restart (kill -9): listed the same after it, overcommitted while the
  pool is empty.
- ``--force`` lowering a limit below what the role holds rescinds the role's offers and kills
  nothing: its tasks keep running.

Each test starts the agent once every framework has declared its demand (the first allocation
sees them all). Every wait polls ``GetState`` with a deadline; the samples are every 0.2 s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from daemons import DEFAULT_MASTER_FLAGS, Client, Daemon, wait_for
from fairshare.cli import main
from fairshare.v1 import common_pb2
from faults import restart_master
from role_cluster import RoleCluster
from wire_fakes import FrameworkConn, get_state

RUNNING = common_pb2.TASK_STATE_RUNNING
ENDED_BY_KILL = (common_pb2.TASK_STATE_KILLING, common_pb2.TASK_STATE_KILLED)
SETTLE = 30.0
TASK = "cpus:1;mem:64"


class Cluster(RoleCluster):
    """The shared cluster, with ``fairshare quota`` and one task shape."""

    def quota(self, *flags: str) -> int:
        return main(["quota", "--master", self.master.address, *flags])

    def run(self, name: str, role: str, count: int, *flags: str) -> None:  # type: ignore[override]
        super().run(name, role, TASK, count, *flags)

    def start_agent(self, resources: str = "cpus:12;mem:12288") -> None:
        super().start_agent(resources)


@pytest.fixture
def cluster(
    master_factory: Callable[..., Daemon],
    clients: Callable[..., Client],
    agent_factory: Callable[..., list[Daemon]],
) -> Iterator[Cluster]:
    made = Cluster(master_factory(*DEFAULT_MASTER_FLAGS), clients, agent_factory)
    yield made
    made.close()


def test_a_limited_role_alone_never_holds_more_than_its_limit(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cluster.quota("--role", "lim", "--limit", "cpus:4") == 0
    cluster.run("lim", "lim", 12)
    cluster.start_agent()
    wait_for(lambda: cluster.running()["lim"] == 4, SETTLE, "4 tasks of lim running")
    samples = cluster.samples(3.0)
    assert max(s["lim"] for s in samples) == 4, samples
    state = get_state(cluster.channel)
    allocated = [r.allocated for r in state.roles if r.path == "lim"]
    assert [{i.name: i.millis for i in a.items}["cpus"] for a in allocated] == [4000]
    capsys.readouterr()
    assert cluster.quota() == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ROLE", "GUARANTEE", "LIMIT", "CONSUMED", "RESERVED"]
    role, guarantee, limit, consumed, reserved = lines[1].split()
    assert reserved == "-"
    assert (role, guarantee, limit) == ("lim", "-", "cpus:4") and consumed.startswith("cpus:4;")
    assert len(lines) == 2  # 4 of 12 cpus: nothing is overcommitted


def test_a_guaranteed_role_holds_its_guarantee_beside_two_others(cluster: Cluster) -> None:
    assert cluster.quota("--role", "g", "--guarantee", "cpus:8") == 0
    for role in ("g", "x", "y"):
        cluster.run(role, role, 12, "--duration", "2")
    cluster.start_agent()
    wait_for(lambda: cluster.running()["g"] >= 8, SETTLE, "g to reach its guarantee")
    samples = cluster.samples(6.0)  # three task lifetimes
    average = sum(s["g"] for s in samples) / len(samples)
    others = [s["x"] + s["y"] for s in samples]
    assert average >= 7.0, (average, samples)
    assert max(others) >= 1, samples  # the others share what is left over


def test_quotas_survive_a_master_restart(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cluster.quota("--role", "eng", "--guarantee", "cpus:16;mem:65536", "--limit",
                         "cpus:32") == 0  # fmt: skip
    assert cluster.quota("--role", "eng/dev", "--limit", "cpus:8") == 0
    assert cluster.quota("--role", "sci", "--guarantee", "cpus:2") == 0
    assert cluster.quota("--role", "sci", "--clear") == 0
    capsys.readouterr()
    assert cluster.quota() == 0
    before = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in before] == ["ROLE", "eng", "eng/dev", "overcommitted:"]
    master = restart_master(cluster.master, *DEFAULT_MASTER_FLAGS)
    try:
        cluster.master = master
        assert cluster.quota() == 0
        assert capsys.readouterr().out.splitlines() == before
        # the recovered rules still hold: eng/dev may not be limited above eng
        assert cluster.quota("--role", "eng/dev", "--limit", "cpus:64") == 2
        assert "above its parent 'eng'" in capsys.readouterr().err
    finally:
        master.kill()


def test_force_below_use_rescinds_offers_and_kills_nothing(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.run("busy", "f", 6)
    cluster.start_agent()
    wait_for(lambda: cluster.running()["f"] == 6, SETTLE, "6 tasks of f running")
    holder = FrameworkConn(cluster.channel, "holder", role="f")  # keeps what it is offered
    held = holder.offers(SETTLE)
    assert held, "the holder was offered the rest of the agent"
    capsys.readouterr()
    assert cluster.quota("--role", "f", "--limit", "cpus:2") == 1
    assert "FAILED_PRECONDITION" in capsys.readouterr().err
    assert holder.pending("rescind") == []
    assert cluster.quota("--role", "f", "--limit", "cpus:2", "--force") == 0
    out = capsys.readouterr().out
    assert "set the quota of f: guarantee -, limit cpus:2" in out
    assert "offer(s) of its subtree; no task was killed" in out
    rescinded = holder.take("rescind", SETTLE)
    assert rescinded.offer_id in {o.offer_id for o in held}
    for sample in cluster.samples(3.0):
        assert sample["f"] == 6, sample
    state = get_state(cluster.channel)
    assert not [t for t in state.tasks if t.status.state in ENDED_BY_KILL]
    for fw in state.frameworks:  # over its limit, f is offered no more cpus
        cpus = {i.name: i.millis for i in fw.offered.items}.get("cpus", 0)
        assert cpus == 0, fw
