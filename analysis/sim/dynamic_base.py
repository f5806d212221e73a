"""Pieces shared by the dynamic model's engines (Bonald & Roberts §3): job streams and the meter.

Invariants:
- ``JobSource`` draws arrivals and job sizes from per-class ``random.Random`` streams seeded
  from the scenario seed and the class index only, so two runs with the same seed see the same
  jobs whatever the policy (common random numbers: DRF and PF are compared on the same traffic)
  and, in a load sweep, the same arrival pattern scaled in time (inter-arrival times are
  ``Exp(1) / lambda_k`` from the same variates).
- ``Meter`` integrates the number of jobs in progress of each class over the measurement window
  only: from the ``warmup_jobs``-th arrival to the ``(warmup_jobs + jobs)``-th (``jobs`` runs),
  or over ``[warmup, until]`` (``until`` runs). Arrivals and completions are counted in the same
  window, so ``arrivals / area`` is Little's law ``lambda_k / E[n_k]`` (§3.3) on the window.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from analysis.sim.dynamic_scenario import DynamicScenario

__all__ = ["ClassTally", "JobSource", "Meter", "PointTally", "gamma_of"]


class JobSource:
    """Per-class Poisson arrivals and job sizes (see the module invariants)."""

    def __init__(self, scenario: DynamicScenario, rates: tuple[float, ...]) -> None:
        seed = scenario.seed
        self.classes = scenario.classes
        self.rates = rates
        count = len(scenario.classes)
        self._arrivals = [random.Random(f"{seed}:arrivals:{k}") for k in range(count)]
        self._sizes = [random.Random(f"{seed}:sizes:{k}") for k in range(count)]

    def next_arrival(self, k: int, now: float) -> float:
        """The time of class ``k``'s next arrival after one at ``now`` (rate ``lambda_k``)."""
        return now + self._arrivals[k].expovariate(1.0) / self.rates[k]

    def task_count(self, k: int) -> int:
        """Tasks of a new class-``k`` job: the class's ``tasks``, or geometric with that mean."""
        job_class = self.classes[k]
        if job_class.tasks_dist == "fixed" or job_class.tasks == 1:
            return job_class.tasks
        stop = 1.0 / job_class.tasks  # P(a task is the job's last)
        uniform = 1.0 - self._sizes[k].random()  # in (0, 1]
        return 1 + int(math.log(uniform) / math.log1p(-stop))

    def work(self, k: int) -> float:
        """Fluid mode: a new job's work, the sum of its tasks' durations (task-seconds).

        Drawn in one variate: a sum of ``n`` exponentials (or of ``n`` Erlang-``k``) is
        Gamma(``n``, resp. ``n k``); with geometric counts and exponential tasks it is
        exponential, the paper's Markovian job size (§3.1).
        """
        job_class = self.classes[k]
        count = self.task_count(k)
        duration = job_class.duration
        if duration.dist == "deterministic":
            return count * duration.mean
        phases = 1 if duration.dist == "exponential" else duration.k
        return self._sizes[k].gammavariate(count * phases, duration.mean / phases)

    def durations(self, k: int, count: int) -> list[float]:
        """Task mode: the durations of a new job's ``count`` tasks, drawn at its arrival.

        Erlang-``k`` is drawn as Gamma(``k``, mean / ``k``), the same law as a sum of ``k``
        exponentials in one variate (``analysis.sim.engine.sample_duration`` draws ``k``).
        """
        duration = self.classes[k].duration
        rng = self._sizes[k]
        if duration.dist == "deterministic":
            return [duration.mean] * count
        if duration.dist == "exponential":
            rate = 1.0 / duration.mean
            return [rng.expovariate(rate) for _ in range(count)]
        phases = duration.k
        scale = duration.mean / phases
        return [rng.gammavariate(phases, scale) for _ in range(count)]


@dataclass(frozen=True, slots=True)
class ClassTally:
    """One class over the measurement window."""

    arrivals: int
    completed: int
    area: float  # integral of the number of jobs in progress

    def mean_jobs(self, window: float) -> float:
        """``E[n_k]``: the time-average number of class-``k`` jobs in progress."""
        return self.area / window if window > 0 else 0.0


@dataclass(frozen=True, slots=True)
class PointTally:
    """What one run measured: per class, the window length and the events processed."""

    classes: tuple[ClassTally, ...]
    window: float
    events: int


class Meter:
    """Little's-law bookkeeping over the measurement window (module invariants)."""

    def __init__(self, scenario: DynamicScenario) -> None:
        count = len(scenario.classes)
        self.area = [0.0] * count
        self.arrivals = [0] * count
        self.completed = [0] * count
        self.arrived = 0
        self._last = 0.0
        self.jobs = scenario.jobs
        self.warmup_jobs = scenario.warmup_jobs
        if scenario.jobs is not None:
            self.start = 0.0 if scenario.warmup_jobs == 0 else math.inf
            self.end = math.inf
        else:
            self.start = scenario.warmup
            self.end = scenario.until if scenario.until is not None else math.inf

    def advance(self, now: float, in_progress: list[int]) -> None:
        """Integrate ``in_progress`` (jobs per class) from the last event to ``now``."""
        low = self._last if self._last > self.start else self.start
        high = now if now < self.end else self.end
        if high > low:
            span = high - low
            for k, n in enumerate(in_progress):
                if n:
                    self.area[k] += n * span
        self._last = now

    def arrival(self, k: int, now: float) -> bool:
        """Count an arrival of class ``k``; True when it ends a ``jobs`` run."""
        self.arrived += 1
        if self.jobs is None:
            if self.start < now <= self.end:
                self.arrivals[k] += 1
            return False
        if self.arrived > self.warmup_jobs:
            self.arrivals[k] += 1
        if self.arrived == self.warmup_jobs:
            self.start = now
        if self.arrived == self.warmup_jobs + self.jobs:
            self.end = now
            return True
        return False

    def departure(self, k: int, now: float) -> None:
        """Count a completion of class ``k`` if it falls in the window."""
        if self.start < now <= self.end:
            self.completed[k] += 1

    def past_end(self, now: float) -> bool:
        """True when an event at ``now`` lies beyond an ``until`` window (the run is over)."""
        return self.jobs is None and now > self.end

    def tally(self, events: int) -> PointTally:
        """The window's results (call once the run is over)."""
        closed = math.isfinite(self.start) and math.isfinite(self.end)
        window = self.end - self.start if closed else 0.0
        classes = tuple(
            ClassTally(a, c, area)
            for a, c, area in zip(self.arrivals, self.completed, self.area, strict=True)
        )
        return PointTally(classes, window, events)


def gamma_of(tally: ClassTally, service_rate: float) -> float | None:
    """Normalised mean service rate ``gamma_k = lambda_k / E[n_k] / mu_k`` (§3.3, §4.2).

    ``lambda_k / E[n_k]`` is estimated as arrivals over the integral of ``n_k`` on the window
    (Little's law with the measured arrival rate); dividing by ``mu_k`` (``service_rate``), the
    fluid service rate of an isolated job, gives 1 for a fluid job alone, as in Fig. 1, and the
    task-based discrepancy (about 0.54 at zero load for 500 exponential tasks on capacity 100)
    in Fig. 6. ``None`` when the window saw no class-``k`` job.
    """
    if tally.area <= 0 or tally.arrivals == 0:
        return None
    return tally.arrivals / tally.area / service_rate
