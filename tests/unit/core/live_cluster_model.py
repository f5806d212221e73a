"""A live cluster in miniature over the pure core: arrivals, allocation ticks, churning tasks.

``ClusterModel`` drives one ``MasterState`` (validate on) the way the master's runtime and the
built-in framework (``fairshare run``) drive it, without sockets or a clock:

- arrivals (an agent registering, a framework subscribing and declaring its demand) happen at
  given simulated times;
- every ``tick`` seconds the model ends the tasks whose time is up (``FINISHED``), runs one
  allocation, and every framework accepts each offer whole, launching ``fair_tasks`` tasks of its
  shape (``fairshare run`` keeps up to ``--count`` tasks; a task lasts ``duration`` seconds plus a
  seeded jitter, ``None``: forever);
- ``placement()`` reads who runs how many tasks where;
- with a ``rebalancer`` (``master.core.rebalance``), every ``check_every`` seconds the model
  shows it the cluster (every task preemptible unless ``pinned``) and kills what it says: the
  task is KILLING at once and ends (KILLED) ``grace`` seconds later, as an agent would report.

Invariant: only ``handle_*`` calls change the core; the model's own bookkeeping (task end times)
mirrors the core's live tasks exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from fairshare.resources import ResourceVector

from master.core import CoreConfig, MasterState, SendOffers, TaskLaunch, TaskState
from master.core.rebalance import RebalanceDecision, Rebalancer, view_of

R = ResourceVector.parse

# DRFH Fig. 1 (Wang, Li & Liang) with memory in MiB, as the issue measures it live.
FIG1_AGENTS = {"s1": R("cpus:2;mem:12288"), "s2": R("cpus:12;mem:2048")}
FIG1_FRAMEWORKS = {"u1": R("cpus:0.2;mem:1024"), "u2": R("cpus:1;mem:204.8")}
FIG1_DRFH = {"u1": {"s1": 10}, "u2": {"s2": 10}}  # DRFH Fig. 3: 10 and 10
FIG1_PER_SERVER_DRF = {"u1": {"s1": 5, "s2": 1}, "u2": {"s1": 1, "s2": 5}}  # Fig. 2: 6 and 6


@dataclass
class Arrival:
    """At ``at`` seconds: an agent (``kind == "agent"``) or a framework joins."""

    at: float
    kind: str
    id: str


@dataclass
class ClusterModel:
    """One core, its arrivals, and the tasks the frameworks keep running."""

    agents: dict[str, ResourceVector]
    frameworks: dict[str, ResourceVector]
    wanted: int = 30
    duration: float | None = 3.0
    jitter: float = 0.0
    tick: float = 0.5
    seed: int = 0
    config: CoreConfig = field(default_factory=lambda: CoreConfig(validate=True))
    state: MasterState = field(init=False)
    now: float = 0.0
    rebalancer: Rebalancer | None = None
    check_every: float = 2.0
    grace: float = 1.0
    pinned: set[str] = field(default_factory=set)  # task ids that are not preemptible
    ends: dict[tuple[str, str], float] = field(default_factory=dict)  # (fw, task) -> end time
    killed: dict[tuple[str, str], float] = field(default_factory=dict)  # (fw, task) -> end time
    decisions: list[tuple[float, RebalanceDecision]] = field(default_factory=list)
    _pending: list[Arrival] = field(default_factory=list)
    _launched: int = 0
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.state = MasterState(self.config)
        self._rng = random.Random(self.seed)

    def schedule(self, arrivals: list[Arrival]) -> None:
        """Arrivals to apply when their time comes (in ``run_until``)."""
        self._pending.extend(arrivals)
        self._pending.sort(key=lambda a: a.at)

    def _arrive(self, arrival: Arrival) -> None:
        if arrival.kind == "agent":
            self.state.handle_add_agent(arrival.id, self.agents[arrival.id], self.now)
        else:
            self.state.handle_add_framework(arrival.id, self.now)
            shape = self.frameworks[arrival.id]
            self.state.handle_update_demand(arrival.id, shape, self.wanted, self.now)

    def _end_due_tasks(self) -> None:
        for ends, state in ((self.killed, TaskState.KILLED), (self.ends, TaskState.FINISHED)):
            due = sorted(key for key, end in ends.items() if end <= self.now)
            for framework_id, task_id in due:
                del ends[(framework_id, task_id)]
                task = self.state.tasks.get((framework_id, task_id))
                if task is not None:
                    self.state.handle_task_status(
                        task.agent_id, framework_id, task_id, state, self.now
                    )

    def _rebalance(self) -> None:
        assert self.rebalancer is not None
        view = view_of(self.state, lambda _, task_id: task_id not in self.pinned)
        decision = self.rebalancer.check(view)
        self.decisions.append((self.now, decision))
        for task in decision.kills:
            self.state.handle_kill(task.framework_id, task.task_id, self.now)
            self.killed[(task.framework_id, task.task_id)] = self.now + self.grace
            self.ends.pop((task.framework_id, task.task_id), None)

    @property
    def kills(self) -> int:
        """Tasks the rebalancer had killed so far."""
        return sum(len(decision.kills) for _, decision in self.decisions)

    def _accept(self, message: SendOffers) -> None:
        shape = self.frameworks[message.framework_id]
        for offer in message.offers:
            launches = []
            for _ in range(offer.fair_tasks):
                self._launched += 1
                launches.append(TaskLaunch(f"t{self._launched}", "task", shape))
            self.state.handle_accept(
                message.framework_id, [offer.offer_id], launches, self.now, refuse_seconds=0.0
            )
            for launch in launches:
                if self.duration is not None:
                    end = self.now + self.duration + self._rng.uniform(0.0, self.jitter)
                    self.ends[(message.framework_id, launch.task_id)] = end

    def step(self) -> None:
        """One tick: arrivals due, tasks due to end, one allocation run, offers accepted."""
        while self._pending and self._pending[0].at <= self.now:
            self._arrive(self._pending.pop(0))
        self._end_due_tasks()
        for message in self.state.handle_allocate(self.now):
            if isinstance(message, SendOffers):
                self._accept(message)
        if self.rebalancer is not None and self._on_beat(self.check_every):
            self._rebalance()

    def _on_beat(self, every: float) -> bool:
        beats = self.now / every
        return abs(beats - round(beats)) < 1e-9

    def run_until(self, until: float) -> None:
        """Step every ``tick`` seconds up to and including ``until``."""
        while self.now <= until + 1e-9:
            self.step()
            self.now = round(self.now + self.tick, 6)

    def placement(self) -> dict[str, dict[str, int]]:
        """Framework id -> agent id -> live tasks."""
        out: dict[str, dict[str, int]] = {}
        for (framework_id, _), task in sorted(self.state.tasks.items()):
            per_agent = out.setdefault(framework_id, {})
            per_agent[task.agent_id] = per_agent.get(task.agent_id, 0) + 1
        return out


def fig1_model(
    order: list[str],
    gap: float = 1.0,
    duration: float | None = 3.0,
    jitter: float = 0.0,
    seed: int = 0,
    config: CoreConfig | None = None,
    rebalancer: Rebalancer | None = None,
) -> ClusterModel:
    """The Fig. 1 cluster with ``order`` (ids of s1, s2, u1, u2) arriving ``gap`` s apart."""
    model = ClusterModel(
        FIG1_AGENTS,
        FIG1_FRAMEWORKS,
        duration=duration,
        jitter=jitter,
        seed=seed,
        config=config or CoreConfig(validate=True),
        rebalancer=rebalancer,
    )
    model.schedule(
        [
            Arrival(index * gap, "agent" if name in FIG1_AGENTS else "framework", name)
            for index, name in enumerate(order)
        ]
    )
    return model
