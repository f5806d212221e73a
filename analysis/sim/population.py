"""The simulated population as the engine tracks it: users with their queued jobs, the agents
that join the pool, and task durations drawn from a job's law.

Invariants: a ``SimUser``'s ``running`` is the number of its tasks in ``live`` (task id -> agent
and job); ``pending`` counts the tasks of its queued jobs not launched yet; ``running_area`` is
the integral of ``running`` over time from ``measure_from`` on, brought up to date by
``count_running`` before every change of ``running``. Pure: randomness only from the
``random.Random`` passed in (the scenario's seed), so the engine stays deterministic.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from analysis.sim.scenario import Duration, JobSpec, Scenario, SimulatedAgent, UserSpec
from analysis.sim.servers import draw_servers
from master.core import MasterState

__all__ = ["Job", "SimUser", "all_agents", "declare_demands", "sample_duration"]


def sample_duration(duration: Duration, rng: random.Random) -> float:
    """One task duration: deterministic, exponential or Erlang-k (sum of k exponentials)."""
    if duration.dist == "deterministic":
        return duration.mean
    if duration.dist == "exponential":
        return rng.expovariate(1.0 / duration.mean)
    rate = duration.k / duration.mean
    return sum(rng.expovariate(rate) for _ in range(duration.k))


@dataclass(slots=True, eq=False)
class Job:
    """A submitted job: the durations of its tasks not launched yet, and how many are left."""

    index: int
    spec: JobSpec
    durations: list[float]  # of its tasks not launched yet (popped from the end)
    unfinished: int  # tasks not finished yet (pending + running)
    finished_at: float | None = None


@dataclass(slots=True, eq=False)
class SimUser:
    """A simulated user (one framework of the core) and what it runs and waits for."""

    spec: UserSpec
    shape: list[tuple[str, int]]
    queue: deque[Job] = field(default_factory=deque)  # submitted jobs with tasks to launch
    pending: int = 0  # tasks submitted, not launched yet
    running: int = 0
    completed: int = 0
    jobs_left: int = 0  # jobs not completed, submitted or not
    declared: int = -1  # the wanted count last sent to the core
    suppressed: bool = False  # offers suppressed in the core (nothing to launch)
    present: bool = False
    finished_at: float | None = None
    live: dict[str, tuple[str, Job]] = field(default_factory=dict)  # task id -> (agent, job)
    running_area: float = 0.0  # integral of ``running`` over the measured window
    running_since: float = 0.0

    def count_running(self, now: float, measure_from: float) -> None:
        """Add ``running * (now - since)`` (the part from ``measure_from`` on) to the running-task
        integral; call before ``running`` changes."""
        start = max(self.running_since, measure_from)
        if now > start:
            self.running_area += self.running * (now - start)
        self.running_since = now


def all_agents(scenario: Scenario, rng: random.Random) -> list[SimulatedAgent]:
    """The listed agents, then the servers drawn from the mix with their join times."""
    agents = list(scenario.agents)
    if scenario.mix is not None:
        drawn = draw_servers(scenario.mix, scenario.mix_count, rng, scenario.mix_scale)
        start, every = scenario.mix_join_start, scenario.mix_join_every
        agents.extend(
            SimulatedAgent(f"server-{index + 1}", resources, start + index * every)
            for index, resources in enumerate(drawn)
        )
    return agents


def declare_demands(
    state: MasterState,
    users: Mapping[str, SimUser],
    changed: Iterable[str],
    now: float,
    policy: str,
) -> None:
    """Declare the ``changed`` users' wanted counts (running + pending) to the core; suppress
    users with nothing to launch, revive the others.

    Suppressing idle users (as Mesos frameworks do) keeps them out of allocation runs; not
    under ``pf``, whose prices count every declared demand.
    """
    suppressing = policy != "pf"
    for user_id in sorted(changed):
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
