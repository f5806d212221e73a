"""The discrete-event simulator: ``MasterState`` driven by a simulated clock.

Pure: no network, threads or wall clock; randomness only from the ``random.Random`` seeded with
the scenario's seed, so a run is a deterministic function of its scenario. Events live in a
``heapq`` ordered by (time, kind, sequence): at one instant task finishes come first, then users
leaving, then agents joining the pool (``agents[].join``, ``servers.join``; agents joining at 0
are there from the start), then users joining, then job submissions, then the allocation run.

Allocation: with ``allocation_interval`` 0 one allocation run follows every instant that had
events; with an interval ``I > 0`` a run happens at the next multiple of ``I`` after anything
changed (the master's periodic allocation, docs/architecture.md §2),
so the events in between are batched.
Before a run every user whose counts changed declares ``wanted`` = its tasks submitted and not
finished (running + pending), so the core never offers more than the user can use; each
simulated framework accepts every offer whole, launching ``fair_tasks`` tasks, taken from its
jobs in submission order (FIFO within a user, fairness between users).

Jobs: a job's task durations are drawn when it is submitted (submission order does not depend
on the policy, so every policy sees the same durations for a seed). A job completes when its
last task finishes; its completion time is that instant minus its submission time.

Events (what ``events`` counts, ``event_counts`` itemizes): users joining and leaving, agents
joining after the start, job submissions, offers made by the core, task launches and task
finishes, and tasks preempted. Allocation runs, rebalancer checks and samples are not events.

Preemption (``rebalance``): every ``every`` seconds the core's rebalancer
(``master.core.rebalance``) looks at the cluster, tasks of ``preemptible`` users only; a task it
kills ends ``grace`` seconds later (KILLED, when it has not finished by then) and goes back to
its job's queue with a fresh duration, to be launched again.

Measurement (``analysis.sim.measurement.Meter``): utilization and tasks-per-user integrals over
``[measure_from, end]`` and time series sampled after allocation; the users and their jobs are
``analysis.sim.population``'s. Users may sit in roles: the core walks the role tree under the
scenario's ``hierarchy`` with its ``roles`` weights, and each role's holding is measured
(``analysis.sim.role_meter``). Roles' quotas (``guarantee``, ``limit``) are set on the core
(``MasterState.handle_set_quota``, with force: nothing is offered and not accepted) from the
start, or at their ``quota_at`` time (an operator's change: after agents joining and before
users joining at the same instant; not counted as an event).

Invariants: a user's ``running`` equals the core's live tasks of its framework; ``meter.used`` is
the sum of running tasks' shapes.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable
from typing import Any

from fairshare.resources import ResourceVector

from analysis.sim.measurement import Meter, SimResult, completion_summary, user_report
from analysis.sim.population import Job, SimUser, all_agents, declare_demands, sample_duration
from analysis.sim.role_meter import RoleMeter
from analysis.sim.scenario import JobSpec, RoleQuota, Scenario, SimulatedAgent
from master.core import CoreConfig, MasterState, SendOffers, TaskLaunch, TaskState
from master.core.rebalance import Rebalancer, view_of

__all__ = [
    "ProgressCallback",
    "SimResult",
    "Simulator",
    "completion_summary",
    "results_document",
    "sample_duration",
]

_FINISH, _LEAVE, _AGENT, _QUOTA, _JOIN, _SUBMIT, _KILLED, _REBALANCE, _ALLOCATE = range(9)
EVENT_KINDS = (
    "joins",
    "leaves",
    "agent_joins",
    "job_submissions",
    "offers",
    "launches",
    "finishes",
    "preemptions",
)
ProgressCallback = Callable[[float], None]


class Simulator:
    """One run of a scenario; ``run()`` returns the ``SimResult``."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.rng = random.Random(scenario.seed)
        self.state = MasterState(
            CoreConfig(
                policy=scenario.policy,
                placement=scenario.placement,
                seed=scenario.seed,
                slots_per_agent=scenario.slots_per_agent,
                sample_size=scenario.sample_size,
                default_refuse_seconds=0.0,
                fit_window=scenario.fit_window,
                hierarchy=scenario.hierarchy,
            )
        )
        for role, weight in scenario.role_weights:
            self.state.handle_set_weight(role, weight, 0.0)
        agents = all_agents(scenario, self.rng)
        self.users = {
            u.id: SimUser(u, list(u.task.millis_items()), jobs_left=len(u.jobs))
            for u in scenario.users
        }
        self.heap: list[tuple[Any, ...]] = []
        self._seq = 0
        self._task_seq = 0
        self._job_seq = 0
        self.counts = dict.fromkeys(EVENT_KINDS, 0)
        self.allocation_runs = 0
        self.now = 0.0
        for quota in scenario.role_quotas:
            if quota.at <= 0:
                self._set_quota(quota)
        resources = sorted({name for agent in agents for name in agent.resources.names()})
        self.meter = Meter(resources, self.users, scenario.measure_from, scenario.sample_every)
        if scenario.has_roles:
            self.meter.roles = RoleMeter(
                self.users, dict(scenario.role_weights), resources, scenario.role_quotas
            )
        self._changed: set[str] = set()  # users whose wanted count may have changed
        self._allocation_due = False
        self.completion_times: list[float] = []
        self.jobs_submitted = 0
        spec = scenario.rebalance
        self.rebalancer = None if spec is None else Rebalancer(spec.config, self.state.config)
        if spec is not None:
            self._push(spec.every, _REBALANCE)
        self._schedule(agents)

    def _schedule(self, agents: list[SimulatedAgent]) -> None:
        """Agents joining at 0 join now; later ones, users and jobs become events."""
        for agent in agents:
            if agent.join <= 0:
                self.state.handle_add_agent(agent.id, agent.resources, 0.0)
            else:
                self._push(agent.join, _AGENT, agent)
        for spec in self.scenario.role_quotas:
            if spec.at > 0:
                self._push(spec.at, _QUOTA, spec)
        for user in self.scenario.users:
            self._push(user.join, _JOIN, user.id)
            if user.leave is not None:
                self._push(user.leave, _LEAVE, user.id)
            for job in user.jobs:
                self._push(job.submit, _SUBMIT, user.id, job)

    def _push(self, when: float, kind: int, *payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self.heap, (when, kind, self._seq, *payload))

    # -- events -----------------------------------------------------------------------------------

    def _set_quota(self, spec: RoleQuota) -> None:
        quota = spec.quota
        self.state.handle_set_quota(spec.role, quota.guarantee, quota.limit, self.now, force=True)

    def _join(self, user: SimUser) -> None:
        spec = user.spec
        self.state.handle_add_framework(
            spec.id, self.now, name=spec.name, role=spec.role, weight=spec.weight
        )
        user.present = True
        user.declared = -1
        user.suppressed = False
        self._changed.add(spec.id)
        if user.jobs_left == 0:
            user.finished_at = self.now

    def _leave(self, user: SimUser) -> None:
        if user.present:
            self.state.handle_remove_framework(user.spec.id, self.now)
            user.present = False
            used = self.meter.used
            for name, millis in user.shape:
                used[name] -= millis * user.running
            user.live.clear()
            user.count_running(self.now, self.scenario.measure_from)
            user.running = 0
            user.queue.clear()
            user.pending = 0

    def _submit(self, user: SimUser, job_spec: JobSpec) -> None:
        if not user.present:
            return  # submitted after its user left
        self._job_seq += 1
        self.jobs_submitted += 1
        rng, law = self.rng, job_spec.duration
        durations = [sample_duration(law, rng) for _ in range(job_spec.tasks)]
        durations.reverse()  # launched from the end: the first drawn runs first
        job = Job(self._job_seq, job_spec, durations, job_spec.tasks)
        if job_spec.tasks == 0:
            self._job_done(user, job)
            return
        user.queue.append(job)
        user.pending += job_spec.tasks
        self._changed.add(user.spec.id)

    def _job_done(self, user: SimUser, job: Job) -> None:
        job.finished_at = self.now
        self.completion_times.append(self.now - job.spec.submit)
        user.jobs_left -= 1
        if user.jobs_left == 0:
            user.finished_at = self.now

    def _finish(self, user: SimUser, task_id: str) -> None:
        entry = user.live.pop(task_id, None)
        if entry is None:
            return  # killed when its user left
        agent_id, job = entry
        self.state.handle_task_status(agent_id, user.spec.id, task_id, TaskState.FINISHED, self.now)
        self.counts["finishes"] += 1
        user.count_running(self.now, self.scenario.measure_from)
        user.running -= 1
        user.completed += 1
        used = self.meter.used
        for name, millis in user.shape:
            used[name] -= millis
        self._changed.add(user.spec.id)
        job.unfinished -= 1
        if job.unfinished == 0:
            self._job_done(user, job)

    def _rebalance(self) -> None:
        """One check of the rebalancer: its kills end after the grace period."""
        spec, rebalancer, users = self.scenario.rebalance, self.rebalancer, self.users
        assert spec is not None and rebalancer is not None
        view = view_of(self.state, lambda framework_id, _: users[framework_id].spec.preemptible)
        decision = rebalancer.check(view)
        for task in decision.kills:
            self.state.handle_kill(task.framework_id, task.task_id, self.now)
            self._push(self.now + spec.grace, _KILLED, users[task.framework_id], task.task_id)
        self.counts["preemptions"] += len(decision.kills)
        until = self.scenario.until
        if until is not None and self.now + spec.every <= until:
            self._push(self.now + spec.every, _REBALANCE)

    def _preempted(self, user: SimUser, task_id: str) -> None:
        """A killed task ends; its job gets it back (a fresh duration) to launch again."""
        entry = user.live.pop(task_id, None)
        if entry is None:
            return  # it finished during the grace period, or its user left
        agent_id, job = entry
        self.state.handle_task_status(agent_id, user.spec.id, task_id, TaskState.KILLED, self.now)
        user.count_running(self.now, self.scenario.measure_from)
        user.running -= 1
        used = self.meter.used
        for name, millis in user.shape:
            used[name] -= millis
        job.durations.append(sample_duration(job.spec.duration, self.rng))
        if job not in user.queue:
            user.queue.appendleft(job)
        user.pending += 1
        self._changed.add(user.spec.id)

    def _accept(self, message: SendOffers) -> None:
        user = self.users[message.framework_id]
        now = self.now
        counts = self.counts
        for offer in message.offers:
            counts["offers"] += 1
            count = min(offer.fair_tasks, user.pending)
            share = max(offer.fair_tasks, 1)
            per_task = ResourceVector.from_millis(
                {name: millis // share for name, millis in offer.resources.millis_items()}
            )
            launches = []
            placed: list[tuple[Job, float]] = []
            queue = user.queue
            for _ in range(count):
                self._task_seq += 1
                launches.append(TaskLaunch(f"t{self._task_seq}", "task", per_task))
                job = queue[0]
                placed.append((job, job.durations.pop()))
                if not job.durations:
                    queue.popleft()
            self.state.handle_accept(
                user.spec.id, [offer.offer_id], launches, now, refuse_seconds=0.0
            )
            live = user.live
            agent_id = offer.agent_id
            for launch, (job, duration) in zip(launches, placed, strict=True):
                live[launch.task_id] = (agent_id, job)
                self._push(now + duration, _FINISH, user, launch.task_id)
            counts["launches"] += count
            user.pending -= count
            user.count_running(self.now, self.scenario.measure_from)
            user.running += count
            used = self.meter.used
            for name, millis in user.shape:
                used[name] += millis * count

    # -- the loop ---------------------------------------------------------------------------------

    def _declare_demands(self) -> None:
        """Declare changed wanted counts; suppress idle users (``declare_demands``)."""
        declare_demands(self.state, self.users, self._changed, self.now, self.scenario.policy)
        self._changed.clear()

    def _allocate(self) -> None:
        self._declare_demands()
        self.allocation_runs += 1
        for message in self.state.handle_allocate(self.now):
            if isinstance(message, SendOffers):
                self._accept(message)
        if self.meter.roles is not None and self.meter.roles.met_at:
            self.meter.roles.observe(self.now, self.users)
        self.meter.sample(self.now, self.state, self.users)

    def _step(self) -> None:
        """Process every event of the next instant; allocate now or at the next tick."""
        heap = self.heap
        self.now = now = heap[0][0]
        self.meter.integrate(self.now, self.state.total)
        users, counts = self.users, self.counts
        changed = False
        while heap and heap[0][0] == now:
            event = heapq.heappop(heap)
            kind = event[1]
            if kind == _FINISH:
                self._finish(event[3], event[4])
            elif kind == _ALLOCATE:
                self._allocation_due = False
                self._allocate()
                changed = False  # the events before it at this instant are served
                continue
            elif kind == _REBALANCE:
                self._rebalance()
                continue
            elif kind == _KILLED:
                self._preempted(event[3], event[4])
            elif kind == _LEAVE:
                counts["leaves"] += 1
                self._leave(users[event[3]])
            elif kind == _JOIN:
                counts["joins"] += 1
                self._join(users[event[3]])
            elif kind == _QUOTA:
                self._set_quota(event[3])
            elif kind == _AGENT:
                counts["agent_joins"] += 1
                agent = event[3]
                self.state.handle_add_agent(agent.id, agent.resources, now)
            else:
                counts["job_submissions"] += 1
                self._submit(users[event[3]], event[4])
            changed = True
        if not changed:
            return
        interval = self.scenario.allocation_interval
        if interval <= 0:
            self._allocate()
        elif not self._allocation_due:
            self._allocation_due = True
            tick = math.floor(now / interval) * interval
            self._push(tick if tick >= now else tick + interval, _ALLOCATE)

    def run(self, progress: ProgressCallback | None = None) -> SimResult:
        """Run until no event is left or the scenario's ``until`` time.

        ``progress(fraction)`` is called now and then with the fraction done (simulated time
        over ``until``, or tasks finished over tasks submitted in all).
        """
        until = self.scenario.until
        total_tasks = sum(u.spec.tasks for u in self.users.values()) or 1
        heap = self.heap
        steps = 0
        while heap and (until is None or heap[0][0] <= until):
            self._step()
            steps += 1
            if progress is not None and not steps & 1023:
                done = self.now / until if until else self.counts["finishes"] / total_tasks
                progress(min(1.0, done))
        if until is not None:
            self.now = max(self.now, until)
        self.meter.integrate(self.now, self.state.total)
        self.meter.sample(self.now, self.state, self.users, force=True)
        if progress is not None:
            progress(1.0)
        return self._result()

    def _result(self) -> SimResult:
        total, meter, measure_from = self.state.total, self.meter, self.scenario.measure_from
        for user in self.users.values():
            user.count_running(self.now, measure_from)
        roles = meter.roles
        return SimResult(
            roles=None
            if roles is None
            else roles.report(self.users.values(), self.now - measure_from, meter.pool_area),
            role_shares=None if roles is None else roles.shares,
            times=meter.times,
            shares=meter.shares,
            utilization=meter.utilization,
            users=[user_report(u, self.now, measure_from) for u in self.users.values()],
            total=total.to_dict(),
            events=sum(self.counts.values()),
            end_time=self.now,
            event_counts=dict(self.counts),
            mean_utilization=meter.mean_utilization(),
            jobs=completion_summary(self.completion_times, self.jobs_submitted),
            allocation_runs=self.allocation_runs,
        )


def results_document(
    scenario: Scenario, progress: ProgressCallback | None = None
) -> dict[str, Any]:
    """Run ``scenario`` and return the results document (``results.json``)."""
    simulator = Simulator(scenario)
    result = simulator.run(progress)
    doc: dict[str, Any] = {
        "seed": scenario.seed,
        "policy": scenario.policy,
        "placement": scenario.placement,
        "agents": len(scenario.agents) + scenario.mix_count,
    }
    if scenario.policy == "slots":
        doc["slots_per_agent"] = scenario.slots_per_agent
    if scenario.has_roles:
        doc["hierarchy"] = simulator.state.hierarchy  # the one in force
    doc.update(result.to_json())
    return doc
