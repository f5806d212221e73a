"""The discrete-event simulator: ``MasterState`` driven by a simulated clock.

Pure: no network, threads or wall clock; randomness only from the ``random.Random`` seeded with
the scenario's seed, so a run is a deterministic function of its scenario. Events live in a
``heapq`` ordered by (time, kind, sequence): at one instant task finishes come first, then users
leaving, then users joining; after each instant's events one allocation run happens, and each
simulated framework accepts every offer whole, launching ``fair_tasks`` tasks of its shape.

Invariants: a user's ``wanted`` (declared to the core) is always its tasks not yet finished, so
the core never offers more than the job can use; ``running`` counts its live tasks; time series
samples are taken after allocation, when no offer is outstanding.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from typing import Any

from framework_sdk.resources import ResourceVector
from master.core import CoreConfig, MasterState, SendOffers, TaskLaunch, TaskState
from master.sim.scenario import Duration, Scenario, UserSpec
from master.sim.servers import draw_servers

__all__ = ["SimResult", "Simulator", "sample_duration"]

_FINISH, _LEAVE, _JOIN = 0, 1, 2


def sample_duration(duration: Duration, rng: random.Random) -> float:
    """One task duration: deterministic, exponential or Erlang-k (sum of k exponentials)."""
    if duration.dist == "deterministic":
        return duration.mean
    if duration.dist == "exponential":
        return rng.expovariate(1.0 / duration.mean)
    rate = duration.k / duration.mean
    return sum(rng.expovariate(rate) for _ in range(duration.k))


@dataclass(slots=True)
class _User:
    spec: UserSpec
    pending: int  # tasks not launched yet
    running: int = 0
    completed: int = 0
    present: bool = False
    finished_at: float | None = None
    live: dict[str, str] = field(default_factory=dict)  # task id -> agent id


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

    def to_json(self) -> dict[str, Any]:
        """The results document (JSON-ready)."""
        return {
            "total": self.total,
            "events": self.events,
            "end_time": self.end_time,
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
                default_refuse_seconds=0.0,
            )
        )
        for agent in scenario.agents:
            self.state.handle_add_agent(agent.id, agent.resources, 0.0)
        if scenario.mix is not None:
            drawn = draw_servers(scenario.mix, scenario.mix_count, self.rng, scenario.mix_scale)
            for index, resources in enumerate(drawn):
                self.state.handle_add_agent(f"server-{index + 1}", resources, 0.0)
        self.users = {u.id: _User(u, pending=u.tasks) for u in scenario.users}
        self.heap: list[tuple[float, int, int, str, str]] = []
        self._seq = 0
        self._task_seq = 0
        self.events = 0
        self.now = 0.0
        self.resources = sorted(self.state.total.names())
        self.times: list[float] = []
        self.shares: dict[str, list[float | None]] = {u: [] for u in self.users}
        self.utilization: dict[str, list[float]] = {r: [] for r in self.resources}
        self._last_sample = -float("inf")
        for user in scenario.users:
            self._push(user.join, _JOIN, user.id, "")
            if user.leave is not None:
                self._push(user.leave, _LEAVE, user.id, "")

    def _push(self, when: float, kind: int, user_id: str, task_id: str) -> None:
        self._seq += 1
        heapq.heappush(self.heap, (when, kind, self._seq, user_id, task_id))

    # -- events -----------------------------------------------------------------------------------

    def _join(self, user: _User) -> None:
        spec = user.spec
        self.state.handle_add_framework(spec.id, self.now, name=spec.name, weight=spec.weight)
        self.state.handle_update_demand(spec.id, spec.task, user.pending, self.now)
        user.present = True
        if user.pending == 0:
            user.finished_at = self.now

    def _leave(self, user: _User) -> None:
        if user.present:
            self.state.handle_remove_framework(user.spec.id, self.now)
            user.present = False
            user.live.clear()
            user.running = 0

    def _finish(self, user: _User, task_id: str) -> None:
        agent_id = user.live.pop(task_id, None)
        if agent_id is None:
            return  # killed when its user left
        self.state.handle_task_status(agent_id, user.spec.id, task_id, TaskState.FINISHED, self.now)
        user.running -= 1
        user.completed += 1
        wanted = user.pending + user.running
        self.state.handle_update_demand(user.spec.id, user.spec.task, wanted, self.now)
        if wanted == 0:
            user.finished_at = self.now

    def _accept(self, message: SendOffers) -> None:
        user = self.users[message.framework_id]
        for offer in message.offers:
            count = min(offer.fair_tasks, user.pending)
            share = max(offer.fair_tasks, 1)
            per_task = ResourceVector.from_millis(
                {name: millis // share for name, millis in offer.resources.millis_items()}
            )
            launches = []
            for _ in range(count):
                self._task_seq += 1
                launches.append(TaskLaunch(f"t{self._task_seq}", "task", per_task))
            self.state.handle_accept(
                user.spec.id, [offer.offer_id], launches, self.now, refuse_seconds=0.0
            )
            for launch in launches:
                user.live[launch.task_id] = offer.agent_id
                done = self.now + sample_duration(user.spec.duration, self.rng)
                self._push(done, _FINISH, user.spec.id, launch.task_id)
            user.pending -= count
            user.running += count

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
        used: dict[str, int] = {}
        for user in self.users.values():
            for name, millis in user.spec.task.millis_items():
                used[name] = used.get(name, 0) + millis * user.running
        total = self.state.total
        for name in self.resources:
            self.utilization[name].append(used.get(name, 0) / total.millis(name))

    def _step(self) -> None:
        """Process every event of the next instant, then run the allocator once."""
        self.now = self.heap[0][0]
        while self.heap and self.heap[0][0] == self.now:
            _, kind, _, user_id, task_id = heapq.heappop(self.heap)
            self.events += 1
            user = self.users[user_id]
            if kind == _FINISH:
                self._finish(user, task_id)
            elif kind == _LEAVE:
                self._leave(user)
            else:
                self._join(user)
        for message in self.state.handle_allocate(self.now):
            if isinstance(message, SendOffers):
                self._accept(message)
        self._sample()

    def run(self) -> SimResult:
        """Run until no event is left or the scenario's ``until`` time."""
        until = self.scenario.until
        while self.heap and (until is None or self.heap[0][0] <= until):
            self._step()
        if until is not None:
            self.now = max(self.now, until)
        self._sample(force=True)
        return SimResult(
            times=self.times,
            shares=self.shares,
            utilization=self.utilization,
            users=[self._user_report(u) for u in self.users.values()],
            total=self.state.total.to_dict(),
            events=self.events,
            end_time=self.now,
        )

    def _user_report(self, user: _User) -> dict[str, Any]:
        spec = user.spec
        done = user.finished_at
        return {
            "id": spec.id,
            "name": spec.name,
            "join": spec.join,
            "leave": spec.leave,
            "tasks": spec.tasks,
            "tasks_completed": user.completed,
            "tasks_running": user.running,
            "finished_at": done,
            "completion_time": None if done is None else done - spec.join,
        }
