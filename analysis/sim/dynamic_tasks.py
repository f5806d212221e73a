"""Task mode of the dynamic model (Bonald & Roberts §4, Fig. 6): integer tasks, real allocator.

Jobs of class ``k`` arrive as Poisson processes and carry ``N`` tasks whose durations are drawn
at arrival (``JobSource.durations``: the same jobs under every policy). The pool is one agent
with the scenario's capacity (the paper pools resources, §4.1). Whenever tasks end or jobs
arrive, free resources go task by task to the most deprived job, as the master's allocator does
("serve the most deprived job", §4.1, Ghodsi et al.'s progressive filling): the job with the
lowest fairness key among those that still want a task and whose task fits, ties broken by
times chosen, then job id. The keys and the PF prices are the core's own
(``master.core.fairness``): DRF ``phi_i max_j a_ij``; PF ``phi_i sum_j a_ij nu_j`` with ``nu``
from eq. 9 (``pf_prices``), recomputed whenever the jobs in progress or their demands change.

Why not the fluid allocation rounded: §4 simulates the task-by-task scheduler, not a rounding
of the ideal shares; the gap between the two (0.54 at zero load) is the very point of Fig. 6,
and the real allocator is what users of fairshare run. Two engines give that allocation:

- ``master``: drives ``master.core.MasterState`` itself (one framework per job declaring its
  shape and wanted tasks, offers accepted whole). Faithful by construction, but it costs about
  140 us per task under DRF and 280 us under PF on this machine (offers, task records and the
  placement scan per launch), i.e. hours for Fig. 6 (hundreds of thousands of tasks per point).
- ``direct`` (default): the same choice rule applied straight to per-job task counts, calling the
  core's ``FairnessPolicy.prepare``/``key`` with the same arguments (shape times running tasks,
  the pool total, the same demand list in the same order), so it makes the same decisions,
  about 10 times faster. ``tests/sim/test_bonald_roberts.py`` checks that both engines give
  identical completion times on the same seed, for DRF and PF.

Differences from the paper's scheduler, kept because they are the master's behaviour: when the
most deprived job's task does not fit, the paper freezes allocations until it does; the core
serves the next job whose task fits (Pareto efficiency). A job declares as ``wanted`` its tasks
not yet finished, which caps its PF share near its end (it cannot use more), as in the core.

Invariants: ``free`` plus the shapes of running tasks equals the capacity (milli-units); a job's
``wanted`` equals its unfinished tasks whenever at most ``bound_k`` remain (``bound_k``: the
class's tasks that fit in the empty pool) and exceeds ``bound_k`` otherwise, so the allocator
never offers a job more tasks than it has pending and PF caps are exact; events at one instant
are all applied before the single allocation run of that instant.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from fairshare.resources import ResourceVector

from analysis.sim.dynamic_base import JobSource, Meter, PointTally
from analysis.sim.dynamic_scenario import DynamicScenario
from master.core import CoreConfig, MasterState, SendOffers, TaskLaunch, TaskState
from master.core.fairness import DeclaredDemand, PoolShape, make_fairness_policy

__all__ = ["DirectTaskEngine", "MasterTaskEngine", "TaskEngine", "run_tasks"]

_FINISH, _ARRIVAL = 0, 1
_AGENT = "pool"


@dataclass(slots=True, eq=False)
class _Job:
    """A job in progress."""

    id: str
    k: int
    arrived: float
    remaining: int  # tasks not finished
    pending: int  # tasks not launched
    wanted: int  # declared to the allocator (see the module invariants)
    durations: list[float]
    running: int = 0
    chosen: int = 0  # times chosen by the allocator (the core's tie-break)


class TaskEngine:
    """The event loop shared by both engines; subclasses decide who gets freed resources."""

    def __init__(self, scenario: DynamicScenario, policy: str, rates: tuple[float, ...]) -> None:
        self.scenario = scenario
        self.policy_name = policy
        self.source = JobSource(scenario, rates)
        self.meter = Meter(scenario)
        self.shapes = [c.task for c in scenario.classes]
        capacity = scenario.capacity
        self.bounds = [
            min(capacity.millis(name) // millis for name, millis in shape.millis_items())
            for shape in self.shapes
        ]
        self.jobs: dict[str, _Job] = {}  # arrival order, like the core's frameworks
        self.in_progress = [0] * len(self.shapes)
        self.heap: list[tuple[float, int, int, str, str]] = []
        self._seq = 0
        self._job_seq = 0
        self.events = 0
        self.now = 0.0
        self.completions: list[tuple[str, float]] = []  # (job id, completion time), in order

    def _push(self, when: float, kind: int, key: str, task_id: str = "") -> None:
        self._seq += 1
        heapq.heappush(self.heap, (when, kind, self._seq, key, task_id))

    # -- hooks for the engines ----------------------------------------------------------------

    def _joined(self, job: _Job) -> None:
        """A job arrived (it is in ``jobs`` already)."""

    def _task_ended(self, job: _Job, task_id: str) -> None:
        """One of ``job``'s tasks ended; called before the bookkeeping."""

    def _left(self, job: _Job) -> None:
        """``job`` finished its last task (it is out of ``jobs`` already)."""

    def _demand_changed(self, job: _Job) -> None:
        """``job.wanted`` changed."""

    def _allocate(self) -> None:
        """Give free resources to jobs (one allocation run)."""
        raise NotImplementedError

    # -- the loop ---------------------------------------------------------------------------------

    def _launch(self, job: _Job, task_id: str) -> None:
        assert job.pending > 0, f"job {job.id} was offered a task it does not have"
        job.pending -= 1
        job.running += 1
        self._push(self.now + job.durations.pop(), _FINISH, job.id, task_id)

    def _arrive(self, k: int) -> None:
        self._job_seq += 1
        count = self.source.task_count(k)
        job = _Job(
            id=f"j{self._job_seq}",
            k=k,
            arrived=self.now,
            remaining=count,
            pending=count,
            wanted=count,
            durations=self.source.durations(k, count),
        )
        self.jobs[job.id] = job
        self.in_progress[k] += 1
        self._joined(job)

    def _finish(self, job: _Job, task_id: str) -> None:
        self._task_ended(job, task_id)
        job.running -= 1
        job.remaining -= 1
        if job.remaining == 0:
            del self.jobs[job.id]
            self.in_progress[job.k] -= 1
            self.meter.departure(job.k, self.now)
            self.completions.append((job.id, self.now))
            self._left(job)
        elif job.remaining <= self.bounds[job.k]:
            job.wanted = job.remaining
            self._demand_changed(job)

    def run(self) -> PointTally:
        """Simulate until the window closes; returns what the meter measured."""
        for k in range(len(self.shapes)):
            self._push(self.source.next_arrival(k, 0.0), _ARRIVAL, str(k))
        meter, heap = self.meter, self.heap
        while heap:
            now = heap[0][0]
            if meter.past_end(now):
                meter.advance(meter.end, self.in_progress)
                break
            meter.advance(now, self.in_progress)
            self.now = now
            stop = False
            while heap and heap[0][0] == now:
                _, kind, _, key, task_id = heapq.heappop(heap)
                self.events += 1
                if kind == _FINISH:
                    self._finish(self.jobs[key], task_id)
                    continue
                k = int(key)
                if meter.arrival(k, now):
                    stop = True
                    break
                self._arrive(k)
                self._push(self.source.next_arrival(k, now), _ARRIVAL, key)
            if stop:
                break
            self._allocate()
        return meter.tally(self.events)


class DirectTaskEngine(TaskEngine):
    """The core's choice rule on task counts (module docstring), about 10x faster."""

    def __init__(
        self,
        scenario: DynamicScenario,
        policy: str,
        rates: tuple[float, ...],
        exact_prices: bool = False,
    ) -> None:
        super().__init__(scenario, policy, rates)
        self.exact_prices = exact_prices
        self.policy = make_fairness_policy(policy)
        self.total = scenario.capacity
        self.names = sorted(self.total.names())
        self.free = [self.total.millis(name) for name in self.names]
        self.needs = [[shape.millis(name) for name in self.names] for shape in self.shapes]
        self.keys: dict[tuple[int, int], float] = {}
        self.stale = True

    def _key(self, k: int, running: int) -> float:
        """The core's fairness key of a class-``k`` job running ``running`` tasks (cached)."""
        key = self.keys.get((k, running))
        if key is None:
            shape = self.shapes[k]
            held = shape * running if running else ResourceVector()
            key = self.policy.key(held, self.total, 1.0, shape)
            self.keys[(k, running)] = key
        return key

    def _joined(self, job: _Job) -> None:
        self.stale = True

    def _left(self, job: _Job) -> None:
        self.stale = True

    def _demand_changed(self, job: _Job) -> None:
        """A lower ``wanted`` changes PF prices only if it caps the job's PF share.

        The cap ``wanted`` only falls. If the job's share at the current prices,
        ``phi_i = 1 / sum_j a_ij nu_j`` (eq. 3), is at most the new cap, the cap was not binding
        and still is not, so the prices still satisfy KKT (3)-(4) of the new problem: they are
        kept (up to the last bits a fresh solve would give; ``exact_prices`` re-solves anyway,
        as the core does). DRF and asset keys do not depend on demands at all.
        """
        if self.policy_name != "pf" or self.stale:
            return
        if self.exact_prices:
            self.stale = True
            return
        prices: dict[str, float] = getattr(self.policy, "prices", {})
        price = math.fsum(
            millis / self.total.millis(name) * prices.get(name, 1.0)
            for name, millis in self.shapes[job.k].millis_items()
        )
        if price <= 0 or 1.0 / price > job.wanted:
            self.stale = True

    def _task_ended(self, job: _Job, task_id: str) -> None:
        free = self.free
        for j, need in enumerate(self.needs[job.k]):
            free[j] += need

    def _prepare(self) -> None:
        """``FairnessPolicy.prepare`` with the demands the core would list (PF prices, eq. 9)."""
        demands = [
            DeclaredDemand(self.shapes[job.k], job.wanted, 1.0)
            for job in self.jobs.values()
            if job.wanted > 0
        ]
        self.policy.prepare(PoolShape(self.total, self.total), demands)
        self.keys.clear()
        self.stale = False

    def _allocate(self) -> None:
        """Serve the most deprived candidate, one task at a time, until no candidate is left.

        Prices are recomputed lazily: only when at least two jobs compete for a task (with one
        candidate the choice does not depend on them), and then from the current demands, which
        is what the core's latest ``prepare`` saw, so the keys are the core's bit for bit.
        """
        free, needs, keys = self.free, self.needs, self.keys
        while True:
            fits = [all(f >= n for f, n in zip(free, need, strict=True)) for need in needs]
            if not any(fits):
                return
            candidates = [
                job for job in self.jobs.values() if fits[job.k] and job.running < job.wanted
            ]
            if not candidates:
                return
            best = candidates[0]
            if len(candidates) > 1:
                if self.stale:
                    self._prepare()
                best_entry = (self._key(best.k, best.running), best.chosen, best.id)
                for job in candidates:
                    key = keys.get((job.k, job.running))
                    if key is None:
                        key = self._key(job.k, job.running)
                    entry = (key, job.chosen, job.id)
                    if entry < best_entry:
                        best, best_entry = job, entry
            for j, need in enumerate(needs[best.k]):
                free[j] -= need
            best.chosen += 1
            self._launch(best, "")


class MasterTaskEngine(TaskEngine):
    """``MasterState`` itself: one framework per job, offers accepted whole (slow, exact)."""

    def __init__(self, scenario: DynamicScenario, policy: str, rates: tuple[float, ...]) -> None:
        super().__init__(scenario, policy, rates)
        self.state = MasterState(CoreConfig(policy=policy, default_refuse_seconds=0.0))
        self.state.handle_add_agent(_AGENT, scenario.capacity, 0.0)
        self._task_seq = 0

    def _joined(self, job: _Job) -> None:
        self.state.handle_add_framework(job.id, self.now)
        self.state.handle_update_demand(job.id, self.shapes[job.k], job.wanted, self.now)

    def _task_ended(self, job: _Job, task_id: str) -> None:
        self.state.handle_task_status(_AGENT, job.id, task_id, TaskState.FINISHED, self.now)

    def _left(self, job: _Job) -> None:
        self.state.handle_remove_framework(job.id, self.now)

    def _demand_changed(self, job: _Job) -> None:
        self.state.handle_update_demand(job.id, self.shapes[job.k], job.wanted, self.now)

    def _allocate(self) -> None:
        for message in self.state.handle_allocate(self.now):
            if not isinstance(message, SendOffers):
                continue
            job = self.jobs[message.framework_id]
            shape = self.shapes[job.k]
            for offer in message.offers:
                launches = []
                for _ in range(offer.fair_tasks):
                    self._task_seq += 1
                    launches.append(TaskLaunch(f"t{self._task_seq}", "task", shape))
                self.state.handle_accept(
                    job.id, [offer.offer_id], launches, self.now, refuse_seconds=0.0
                )
                for launch in launches:
                    self._launch(job, launch.task_id)


def run_tasks(scenario: DynamicScenario, policy: str, rates: tuple[float, ...]) -> PointTally:
    """One task-mode run at arrival rates ``rates`` with the scenario's ``task_engine``."""
    engine: TaskEngine
    if scenario.task_engine == "master":
        engine = MasterTaskEngine(scenario, policy, rates)
    else:
        engine = DirectTaskEngine(scenario, policy, rates)
    return engine.run()
