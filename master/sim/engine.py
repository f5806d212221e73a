"""The discrete-event simulator: ``MasterState`` driven by a simulated clock.

Pure: no network, threads or wall clock; randomness only from the ``random.Random`` seeded with
the scenario's seed, so a run is a deterministic function of its scenario. Events live in a
``heapq`` ordered by (time, kind, sequence): at one instant task finishes come first, then users
leaving, then agents joining the pool (``agents[].join``, ``servers.join``; agents joining at 0
are there from the start), then users joining, then job submissions, then the allocation run.

Allocation: with ``allocation_interval`` 0 one allocation run follows every instant that had
events; with an interval ``I > 0`` a run happens at the next multiple of ``I`` after anything
changed (the master's periodic allocation, DESIGN.md §2), so the events in between are batched.
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

Measurement: ``mean_utilization`` is ``integral of used / integral of the pool`` per resource
over ``[measure_from, end]`` (the pool grows as agents join), and each user's ``mean_running``
the time average of its running tasks over the same window.

Invariants: a user's ``running`` equals the core's live tasks of its framework; ``used`` is the
sum of running tasks' shapes (what utilization reports: the task's demand, not the slots it is
charged); time series samples are taken after allocation, when no offer is outstanding.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fairshare.resources import ResourceVector

from master.core import CoreConfig, MasterState, SendOffers, TaskLaunch, TaskState
from master.core.rebalance import Rebalancer, view_of
from master.sim.scenario import AgentSpec, Duration, JobSpec, Scenario, UserSpec
from master.sim.servers import draw_servers

__all__ = [
    "ProgressCallback",
    "SimResult",
    "Simulator",
    "completion_summary",
    "results_document",
    "sample_duration",
]

_FINISH, _LEAVE, _AGENT, _JOIN, _SUBMIT, _KILLED, _REBALANCE, _ALLOCATE = range(8)
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


def sample_duration(duration: Duration, rng: random.Random) -> float:
    """One task duration: deterministic, exponential or Erlang-k (sum of k exponentials)."""
    if duration.dist == "deterministic":
        return duration.mean
    if duration.dist == "exponential":
        return rng.expovariate(1.0 / duration.mean)
    rate = duration.k / duration.mean
    return sum(rng.expovariate(rate) for _ in range(duration.k))


@dataclass(slots=True, eq=False)
class _Job:
    index: int
    spec: JobSpec
    durations: list[float]  # of its tasks not launched yet (popped from the end)
    unfinished: int  # tasks not finished yet (pending + running)
    finished_at: float | None = None


@dataclass(slots=True, eq=False)
class _User:
    spec: UserSpec
    shape: list[tuple[str, int]]
    queue: deque[_Job] = field(default_factory=deque)  # submitted jobs with tasks to launch
    pending: int = 0  # tasks submitted, not launched yet
    running: int = 0
    completed: int = 0
    jobs_left: int = 0  # jobs not completed, submitted or not
    declared: int = -1  # the wanted count last sent to the core
    suppressed: bool = False  # offers suppressed in the core (nothing to launch)
    present: bool = False
    finished_at: float | None = None
    live: dict[str, tuple[str, _Job]] = field(default_factory=dict)  # task id -> (agent, job)
    running_area: float = 0.0  # integral of ``running`` over the measured window
    running_since: float = 0.0


def _all_agents(scenario: Scenario, rng: random.Random) -> list[AgentSpec]:
    """The listed agents, then the servers drawn from the mix with their join times."""
    agents = list(scenario.agents)
    if scenario.mix is not None:
        drawn = draw_servers(scenario.mix, scenario.mix_count, rng, scenario.mix_scale)
        start, every = scenario.mix_join_start, scenario.mix_join_every
        agents.extend(
            AgentSpec(f"server-{index + 1}", resources, start + index * every)
            for index, resources in enumerate(drawn)
        )
    return agents


def completion_summary(times: list[float], submitted: int) -> dict[str, Any]:
    """Job completion times: count, mean, quantiles and the CDF (at most 101 points)."""
    ordered = sorted(times)
    count = len(ordered)
    summary: dict[str, Any] = {"submitted": submitted, "completed": count}
    if not count:
        summary.update(mean=None, p50=None, p90=None, p99=None, max=None, cdf=[])
        return summary

    def quantile(q: float) -> float:
        return ordered[min(count - 1, max(0, math.ceil(q * count) - 1))]

    points = (
        range(1, count + 1) if count <= 100 else (math.ceil(p * count / 100) for p in range(1, 101))
    )
    summary.update(
        mean=sum(ordered) / count,
        p50=quantile(0.5),
        p90=quantile(0.9),
        p99=quantile(0.99),
        max=ordered[-1],
        cdf=[[ordered[n - 1], n / count] for n in points],
    )
    return summary


@dataclass(slots=True)
class SimResult:
    """What a run produced (``to_json`` gives the results document)."""

    times: list[float]
    shares: dict[str, list[float | None]]
    utilization: dict[str, list[float]]
    users: list[dict[str, Any]]
    total: dict[str, float]
    events: int
    end_time: float
    event_counts: dict[str, int] = field(default_factory=dict)
    mean_utilization: dict[str, float] = field(default_factory=dict)
    jobs: dict[str, Any] = field(default_factory=dict)
    allocation_runs: int = 0

    def to_json(self) -> dict[str, Any]:
        """The results document (JSON-ready)."""
        return {
            "total": self.total,
            "events": self.events,
            "event_counts": self.event_counts,
            "allocation_runs": self.allocation_runs,
            "end_time": self.end_time,
            "mean_utilization": self.mean_utilization,
            "jobs": self.jobs,
            "users": self.users,
            "series": {
                "time": self.times,
                "dominant_share": self.shares,
                "utilization": self.utilization,
            },
        }


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
            )
        )
        agents = _all_agents(scenario, self.rng)
        self.users = {
            u.id: _User(u, list(u.task.millis_items()), jobs_left=len(u.jobs))
            for u in scenario.users
        }
        self.heap: list[tuple[Any, ...]] = []
        self._seq = 0
        self._task_seq = 0
        self._job_seq = 0
        self.counts = dict.fromkeys(EVENT_KINDS, 0)
        self.allocation_runs = 0
        self.now = 0.0
        self.resources = sorted({name for agent in agents for name in agent.resources.names()})
        self.used = dict.fromkeys(self.resources, 0)
        self._area = dict.fromkeys(self.resources, 0.0)  # integral of used over time (millis * s)
        self._pool_area = dict.fromkeys(self.resources, 0.0)  # integral of the pool total
        self._area_time = 0.0
        self.times: list[float] = []
        self.shares: dict[str, list[float | None]] = {u: [] for u in self.users}
        self.utilization: dict[str, list[float]] = {r: [] for r in self.resources}
        self._last_sample = -math.inf
        self._changed: set[str] = set()  # users whose wanted count may have changed
        self._allocation_due = False
        self.completion_times: list[float] = []
        self.jobs_submitted = 0
        spec = scenario.rebalance
        self.rebalancer = None if spec is None else Rebalancer(spec.config, self.state.config)
        if spec is not None:
            self._push(spec.every, _REBALANCE)
        self._schedule(agents)

    def _schedule(self, agents: list[AgentSpec]) -> None:
        """Agents joining at 0 join now; later ones, users and jobs become events."""
        for agent in agents:
            if agent.join <= 0:
                self.state.handle_add_agent(agent.id, agent.resources, 0.0)
            else:
                self._push(agent.join, _AGENT, agent)
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

    def _join(self, user: _User) -> None:
        spec = user.spec
        self.state.handle_add_framework(spec.id, self.now, name=spec.name, weight=spec.weight)
        user.present = True
        user.declared = -1
        user.suppressed = False
        self._changed.add(spec.id)
        if user.jobs_left == 0:
            user.finished_at = self.now

    def _leave(self, user: _User) -> None:
        if user.present:
            self.state.handle_remove_framework(user.spec.id, self.now)
            user.present = False
            used = self.used
            for name, millis in user.shape:
                used[name] -= millis * user.running
            user.live.clear()
            self._count_running(user)
            user.running = 0
            user.queue.clear()
            user.pending = 0

    def _submit(self, user: _User, job_spec: JobSpec) -> None:
        if not user.present:
            return  # submitted after its user left
        self._job_seq += 1
        self.jobs_submitted += 1
        rng, law = self.rng, job_spec.duration
        durations = [sample_duration(law, rng) for _ in range(job_spec.tasks)]
        durations.reverse()  # launched from the end: the first drawn runs first
        job = _Job(self._job_seq, job_spec, durations, job_spec.tasks)
        if job_spec.tasks == 0:
            self._job_done(user, job)
            return
        user.queue.append(job)
        user.pending += job_spec.tasks
        self._changed.add(user.spec.id)

    def _job_done(self, user: _User, job: _Job) -> None:
        job.finished_at = self.now
        self.completion_times.append(self.now - job.spec.submit)
        user.jobs_left -= 1
        if user.jobs_left == 0:
            user.finished_at = self.now

    def _finish(self, user: _User, task_id: str) -> None:
        entry = user.live.pop(task_id, None)
        if entry is None:
            return  # killed when its user left
        agent_id, job = entry
        self.state.handle_task_status(agent_id, user.spec.id, task_id, TaskState.FINISHED, self.now)
        self.counts["finishes"] += 1
        self._count_running(user)
        user.running -= 1
        user.completed += 1
        used = self.used
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

    def _preempted(self, user: _User, task_id: str) -> None:
        """A killed task ends; its job gets it back (a fresh duration) to launch again."""
        entry = user.live.pop(task_id, None)
        if entry is None:
            return  # it finished during the grace period, or its user left
        agent_id, job = entry
        self.state.handle_task_status(agent_id, user.spec.id, task_id, TaskState.KILLED, self.now)
        self._count_running(user)
        user.running -= 1
        used = self.used
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
            placed: list[tuple[_Job, float]] = []
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
            self._count_running(user)
            user.running += count
            used = self.used
            for name, millis in user.shape:
                used[name] += millis * count

    # -- the loop ---------------------------------------------------------------------------------

    def _sample(self, force: bool = False) -> None:
        every = self.scenario.sample_every
        if not force and every > 0 and self.now < self._last_sample + every:
            return
        if self.times and self.times[-1] == self.now:
            for shares in self.shares.values():
                shares.pop()
            for used_series in self.utilization.values():
                used_series.pop()
            self.times.pop()
        self._last_sample = self.now
        self.times.append(self.now)
        for user_id, user in self.users.items():
            share = self.state.dominant_share(user_id) if user.present else None
            self.shares[user_id].append(share)
        total = self.state.total
        for name in self.resources:
            pool = total.millis(name)
            self.utilization[name].append(self.used[name] / pool if pool else 0.0)

    def _count_running(self, user: _User) -> None:
        """Add ``running * (now - since)`` (the part from ``measure_from`` on) to the user's
        running-task integral; call before ``running`` changes."""
        start = max(user.running_since, self.scenario.measure_from)
        if self.now > start:
            user.running_area += user.running * (self.now - start)
        user.running_since = self.now

    def _integrate(self) -> None:
        """Add ``used * (now - last)`` and ``pool * (now - last)`` (the part from
        ``measure_from`` on) to the utilization integrals."""
        start = max(self._area_time, self.scenario.measure_from)
        elapsed = self.now - start
        if elapsed > 0:
            area, pool_area, total = self._area, self._pool_area, self.state.total
            for name, millis in self.used.items():
                area[name] += millis * elapsed
                pool_area[name] += total.millis(name) * elapsed
        self._area_time = max(self._area_time, self.now)

    def _declare_demands(self) -> None:
        """Declare changed wanted counts; suppress users with nothing to launch, revive others.

        Suppressing idle users (as Mesos frameworks do) keeps them out of allocation runs; not
        under ``pf``, whose prices count every declared demand.
        """
        users, state, now = self.users, self.state, self.now
        suppressing = self.scenario.policy != "pf"
        for user_id in sorted(self._changed):
            user = users[user_id]
            if not user.present:
                continue
            wanted = user.pending + user.running
            if wanted != user.declared:
                state.handle_update_demand(user_id, user.spec.task, wanted, now)
                user.declared = wanted
            if suppressing and (user.pending == 0) != user.suppressed:
                user.suppressed = user.pending == 0
                if user.suppressed:
                    state.handle_suppress(user_id, now)
                else:
                    state.handle_revive(user_id, now)
        self._changed.clear()

    def _allocate(self) -> None:
        self._declare_demands()
        self.allocation_runs += 1
        for message in self.state.handle_allocate(self.now):
            if isinstance(message, SendOffers):
                self._accept(message)
        self._sample()

    def _step(self) -> None:
        """Process every event of the next instant; allocate now or at the next tick."""
        heap = self.heap
        self.now = now = heap[0][0]
        self._integrate()
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
        self._integrate()
        self._sample(force=True)
        if progress is not None:
            progress(1.0)
        return self._result()

    def _result(self) -> SimResult:
        total = self.state.total
        for user in self.users.values():
            self._count_running(user)
        return SimResult(
            times=self.times,
            shares=self.shares,
            utilization=self.utilization,
            users=[self._user_report(u) for u in self.users.values()],
            total=total.to_dict(),
            events=sum(self.counts.values()),
            end_time=self.now,
            event_counts=dict(self.counts),
            mean_utilization={
                name: self._area[name] / pool if (pool := self._pool_area[name]) else 0.0
                for name in self.resources
            },
            jobs=completion_summary(self.completion_times, self.jobs_submitted),
            allocation_runs=self.allocation_runs,
        )

    def _user_report(self, user: _User) -> dict[str, Any]:
        spec = user.spec
        done = user.finished_at
        window = self.now - self.scenario.measure_from
        return {
            "id": spec.id,
            "name": spec.name,
            "join": spec.join,
            "leave": spec.leave,
            "jobs": len(spec.jobs),
            "tasks": spec.tasks,
            "tasks_completed": user.completed,
            "tasks_running": user.running,
            "mean_running": user.running_area / window if window > 0 else float(user.running),
            "finished_at": done,
            "completion_time": None if done is None else done - spec.join,
        }


def results_document(
    scenario: Scenario, progress: ProgressCallback | None = None
) -> dict[str, Any]:
    """Run ``scenario`` and return the results document (``results.json``)."""
    result = Simulator(scenario).run(progress)
    doc: dict[str, Any] = {
        "seed": scenario.seed,
        "policy": scenario.policy,
        "placement": scenario.placement,
        "agents": len(scenario.agents) + scenario.mix_count,
    }
    if scenario.policy == "slots":
        doc["slots_per_agent"] = scenario.slots_per_agent
    doc.update(result.to_json())
    return doc
