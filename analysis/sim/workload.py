"""A synthetic Google-like workload for DRFH §VI "Resource utilization" (Table II, Fig. 5).

The paper replays 24 hours of the Google cluster trace (Reiss et al.), which we do not have. This
generator draws a workload with the trace's main traits instead, from a ``random.Random`` passed
in (so it is a pure function of its parameters and the seed):

1. ``users`` users; user ``u`` (1-based) has one task shape, as in DRFH's model (§III-A: user i
   has one demand vector D_i): CPU and memory drawn independently and log-uniformly from the
   ``cpus`` and ``mem`` ranges (normalized so the maximum server of Table I is 1 CPU, 1 memory),
   rounded to milli units (at least 0.001). Independent draws make the shapes heterogeneous:
   CPU-heavy, memory-heavy and balanced users.
2. ``jobs`` job submissions over ``[0, span)``: the arrival times are ``jobs`` uniform draws,
   sorted (a Poisson process conditioned on its count). Each job belongs to a user drawn with
   probability proportional to ``1 / u ** zipf`` (a few users submit most jobs, as in the trace).
3. Tasks per job: ``min(tasks_max, floor(X))`` with ``X`` Pareto with index ``tasks_alpha``
   (``random.paretovariate``, X >= 1): with the default 1.2 about 56% of the jobs have one task
   and a few have hundreds, the trace's heavy tail.
4. Each job has a mean task duration drawn log-uniformly from ``duration`` (seconds); the
   simulator draws each task's duration from ``duration_dist`` (default exponential) with that
   mean when the job is submitted.

Draw order (fixed, part of the contract): all users' CPU then memory, user by user; then the
``jobs`` arrival times; then per job in arrival order its user, task count and mean duration.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

__all__ = ["GeneratedJob", "GeneratedUser", "GoogleLikeWorkload", "generate"]


@dataclass(frozen=True, slots=True)
class GoogleLikeWorkload:
    """Parameters of the generator (defaults: the shipped Table II scenario's)."""

    users: int = 100
    jobs: int = 2000
    span: float = 86_400.0
    zipf: float = 1.0
    cpus: tuple[float, float] = (0.005, 0.15)
    mem: tuple[float, float] = (0.005, 0.15)
    tasks_alpha: float = 1.2
    tasks_max: int = 1000
    duration: tuple[float, float] = (120.0, 7200.0)
    duration_dist: str = "exponential"
    duration_k: int = 1


@dataclass(frozen=True, slots=True)
class GeneratedJob:
    """One job: when it is submitted, how many tasks, the mean duration of its tasks."""

    submit: float
    tasks: int
    mean_duration: float


@dataclass(frozen=True, slots=True)
class GeneratedUser:
    """One user: its task shape (normalized units) and its jobs in submission order."""

    id: str
    cpus: float
    mem: float
    jobs: tuple[GeneratedJob, ...]


def _log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def _milli(value: float) -> float:
    return max(0.001, round(value, 3))


def generate(spec: GoogleLikeWorkload, rng: random.Random) -> list[GeneratedUser]:
    """The users of the workload, ids ``w1``… (users that got no job are kept, idle)."""
    shapes = []
    for _ in range(spec.users):
        cpus = _milli(_log_uniform(rng, *spec.cpus))
        mem = _milli(_log_uniform(rng, *spec.mem))
        shapes.append((cpus, mem))
    arrivals = sorted(rng.uniform(0.0, spec.span) for _ in range(spec.jobs))
    weights = [1.0 / (u + 1) ** spec.zipf for u in range(spec.users)]
    cumulative = []
    running = 0.0
    for weight in weights:
        running += weight
        cumulative.append(running)
    jobs: list[list[GeneratedJob]] = [[] for _ in range(spec.users)]
    for submit in arrivals:
        (owner,) = rng.choices(range(spec.users), cum_weights=cumulative)
        tasks = min(spec.tasks_max, int(rng.paretovariate(spec.tasks_alpha)))
        mean = _log_uniform(rng, *spec.duration)
        jobs[owner].append(GeneratedJob(submit, tasks, mean))
    return [
        GeneratedUser(f"w{u + 1}", cpus, mem, tuple(jobs[u]))
        for u, (cpus, mem) in enumerate(shapes)
    ]
