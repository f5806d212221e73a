"""The rebalancer (``master.core.rebalance``) on random clusters of long-running tasks.

A cluster is built in stages: the first frameworks, the first agents, an allocation; the other
agents, an allocation; the late frameworks (often none fits any more), an allocation. Every
offer is accepted and tasks never end, so only the rebalancer moves anything. Each task is
preemptible with probability 0.85. Then rounds: the
rebalancer checks the cluster, its kills end at once (KILLED), one allocation run hands out the
freed resources, offers are accepted. The properties are checked on every decision, and over the
whole run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Fw, Instance, staged_instances, two_kind_instances

from master.core import CoreConfig, MasterState, SendOffers, TaskLaunch, TaskState
from master.core.fit import Direction, direction
from master.core.rebalance import RebalanceConfig, RebalanceDecision, Rebalancer, view_of

ROUNDS = 100
QUIET = 20  # rounds at the end without a kill
REBALANCE = RebalanceConfig(patience=2, cooldown=1, max_kills=3)


@dataclass
class LongRunning:
    """A core whose frameworks accept every offer and whose tasks never end by themselves."""

    instance: Instance
    pinned: set[tuple[str, str]]  # not preemptible
    coin: st.DataObject
    state: MasterState = field(init=False)
    launched: int = 0

    def __post_init__(self) -> None:
        self.state = MasterState(
            CoreConfig(validate=True, sample_size=max(16, len(self.instance.agents)))
        )

    def join(self, frameworks: Sequence[Fw]) -> None:
        for fw in frameworks:
            self.state.handle_add_framework(fw.id, 0.0, weight=float(fw.weight))
            self.state.handle_update_demand(fw.id, fw.shape, fw.wanted, 0.0)

    def allocate(self) -> None:
        for message in self.state.handle_allocate(0.0):
            assert isinstance(message, SendOffers)
            shape = self.state.frameworks[message.framework_id].demand
            assert shape is not None
            for offer in message.offers:
                launches = []
                for _ in range(offer.fair_tasks):
                    self.launched += 1
                    task_id = f"t{self.launched}"
                    launches.append(TaskLaunch(task_id, "task", shape))
                    if self.coin.draw(st.integers(0, 19), label="preemptible") >= 17:
                        self.pinned.add((message.framework_id, task_id))
                self.state.handle_accept(message.framework_id, [offer.offer_id], launches, 0.0)

    def kill(self, decision: RebalanceDecision) -> None:
        for task in decision.kills:
            self.state.handle_task_status(
                task.agent_id, task.framework_id, task.task_id, TaskState.KILLED, 0.0
            )


def build(case: tuple[Instance, int], data: st.DataObject) -> LongRunning:
    inst, split = case
    late = data.draw(st.integers(0, len(inst.frameworks) - 1), label="late frameworks")
    cluster = LongRunning(inst, set(), data)
    cluster.join(inst.frameworks[: len(inst.frameworks) - late])
    for agent_id, resources in inst.agents[:split]:
        cluster.state.handle_add_agent(agent_id, resources, 0.0)
    cluster.allocate()
    for agent_id, resources in inst.agents[split:]:
        cluster.state.handle_add_agent(agent_id, resources, 0.0)
    cluster.allocate()
    cluster.join(inst.frameworks[len(inst.frameworks) - late :])
    cluster.allocate()
    return cluster


def check_decision(cluster: LongRunning, decision: RebalanceDecision, acting: bool) -> None:
    """What every decision promises: only preemptible tasks, at most ``max_kills``, none
    unless acting, and each victim's framework above the target on its agent's kind."""
    state = cluster.state
    assert len(decision.kills) <= REBALANCE.max_kills
    if decision.kills:
        assert acting and decision.phase == "acting"
    kind = {agent.id: direction(agent.total) for agent in state.agent_list}
    on_kind = Counter((t.framework_id, kind[t.agent_id]) for t in state.tasks.values())
    target: Counter[tuple[str, Direction]] = Counter()
    for framework_id, per_agent in decision.target.items():
        for agent_id, count in per_agent.items():
            target[(framework_id, kind[agent_id])] += count
    for task in decision.kills:
        assert (task.framework_id, task.task_id) not in cluster.pinned
        assert task.preemptible
        where = (task.framework_id, kind[task.agent_id])
        assert on_kind[where] > target[where], "a task where the target wants it was killed"
        on_kind[where] -= 1


@settings(max_examples=60, deadline=None)
@given(
    case=st.one_of(staged_instances(weighted=True), two_kind_instances(weighted=True)),
    data=st.data(),
)
def test_kills_are_preemptible_excess_bounded_and_they_stop(
    case: tuple[Instance, int], data: st.DataObject
) -> None:
    """Every decision: kills only preemptible tasks, at most ``max_kills``, only while acting,
    and only tasks of a framework running more than the target puts on that kind of agent (so
    it never moves a framework away from the target). Over the run: the kills stop (the last
    rounds are quiet) and each round's kills made room the allocator gave to a framework below
    its target: the distance to the target is smaller after the round than before."""
    cluster = build(case, data)
    rebalancer = Rebalancer(REBALANCE, cluster.state.config)
    kills_by_round = []
    for _ in range(ROUNDS):
        view = view_of(cluster.state, lambda fid, tid: (fid, tid) not in cluster.pinned)
        was_acting = rebalancer.acting or rebalancer.streak + 1 >= REBALANCE.patience
        decision = rebalancer.check(view)
        check_decision(cluster, decision, was_acting)
        before = distance(cluster.state, decision)
        cluster.kill(decision)
        cluster.allocate()
        kills_by_round.append(len(decision.kills))
        if decision.kills:
            assert distance(cluster.state, decision) <= before
    assert sum(kills_by_round[-QUIET:]) == 0, kills_by_round


def distance(state: MasterState, decision: RebalanceDecision) -> int:
    """``sum |tasks - target|`` per framework and agent kind, after a round."""
    kind = {agent.id: direction(agent.total) for agent in state.agent_list}
    on_kind = Counter((t.framework_id, kind[t.agent_id]) for t in state.tasks.values())
    target: Counter[tuple[str, Direction]] = Counter()
    for framework_id, per_agent in decision.target.items():
        for agent_id, count in per_agent.items():
            target[(framework_id, kind[agent_id])] += count
    keys = set(target) | set(on_kind)
    return sum(abs(on_kind[k] - target[k]) for k in keys)
