"""Scenario files for ``fairshare simulate``: parsing and validation into immutable specs.

Invariant: ``parse_scenario`` either returns a fully checked ``Scenario`` or raises
``ScenarioError`` whose ``field`` names the offending entry (``users[1].duration.k``); nothing
downstream re-validates. Format (see docs/scenarios.md)::

    {"seed": 1, "policy": "drf", "placement": "best-fit", "slots_per_agent": 14,
     "fit_window": 8,
     "agents": [{"id": "s1", "resources": {"cpus": 9, "mem": 18}, "count": 1, "join": 0}],
     "servers": {"mix": "google", "count": 100, "scale": 1,
                 "join": {"start": 0, "every": 10}},
     "users": [{"id": "u1", "name": "user 1", "task": {"cpus": 0.2, "mem": 0.3},
                "tasks": 1000, "join": 0, "leave": 1080, "weight": 1, "preemptible": false,
                "duration": {"dist": "exponential", "mean": 100},
                "jobs": [{"submit": 10, "tasks": 5, "duration": {"mean": 3}}]}],
     "workload": {"generator": "google-like", "users": 100, "jobs": 2000, ...},
     "until": 1500, "sample_every": 5, "allocation_interval": 1, "measure_from": 0,
     "rebalance": {"every": 10, "grace": 5, "threshold": 0.1, "release": 0.05,
                   "patience": 3, "max_kills": 4, "cooldown": 2},
     "variants": [{"name": "slots-14", "policy": "slots", "slots_per_agent": 14}, ...]}

``agents`` and ``servers`` may be combined (listed agents first); at least one agent overall.
An agent joins the pool at its ``join`` time (default 0); drawn servers join one by one,
server ``k`` (from 1) at ``start + (k - 1) * every``.
A user has one job of ``tasks`` tasks submitted when it joins, plus the jobs of ``jobs`` (each
submitted at or after its join); ``workload`` adds generated users (``master.sim.workload``).
``variants`` lists named changes of top-level keys; each variant is parsed as a whole scenario.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from fairshare.resources import ResourceError, ResourceVector

from master.core.fairness import FAIRNESS_POLICIES
from master.core.placement import PLACEMENT_POLICIES
from master.core.rebalance import RebalanceConfig
from master.sim.servers import MIXES
from master.sim.workload import GoogleLikeWorkload, generate

__all__ = [
    "AgentSpec",
    "Duration",
    "JobSpec",
    "RebalanceSpec",
    "Scenario",
    "ScenarioError",
    "UserSpec",
    "duration_field",
    "number_field",
    "object_field",
    "parse_scenario",
    "resources_field",
    "whole_field",
]

POLICIES = tuple(FAIRNESS_POLICIES)  # the core's strategy tables name the choices
PLACEMENTS = tuple(PLACEMENT_POLICIES)
DISTRIBUTIONS = ("deterministic", "exponential", "erlang")


class ScenarioError(ValueError):
    """A scenario entry is missing or invalid; ``field`` is its path in the file."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True, slots=True)
class Duration:
    """Task duration distribution: deterministic, exponential or Erlang-k with ``mean``."""

    dist: str
    mean: float
    k: int = 1


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """One simulated agent, joining the pool at ``join`` seconds."""

    id: str
    resources: ResourceVector
    join: float = 0.0


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job: ``tasks`` tasks of its user's shape, submitted at ``submit`` seconds."""

    submit: float
    tasks: int
    duration: Duration


@dataclass(frozen=True, slots=True)
class UserSpec:
    """One simulated user (framework) with task shape ``task`` and its jobs.

    ``tasks`` is the total over ``jobs`` (sorted by submission time); ``duration`` is the law of
    the job submitted at join (the first job) for users written with ``tasks``/``duration``.
    """

    id: str
    name: str
    task: ResourceVector
    tasks: int
    duration: Duration
    join: float
    leave: float | None
    weight: float
    jobs: tuple[JobSpec, ...] = ()
    preemptible: bool = False


@dataclass(frozen=True, slots=True)
class RebalanceSpec:
    """The core's rebalancer on a timer: a check every ``every`` s, kills end ``grace`` s later."""

    every: float
    grace: float
    config: RebalanceConfig


@dataclass(frozen=True, slots=True)
class Scenario:
    """A checked scenario; servers from a mix are drawn later, with ``seed``."""

    seed: int
    policy: str
    placement: str
    slots_per_agent: int
    agents: tuple[AgentSpec, ...]
    mix: str | None
    mix_count: int
    mix_scale: float
    users: tuple[UserSpec, ...]
    until: float | None
    sample_every: float
    allocation_interval: float = 0.0
    variants: tuple[tuple[str, Scenario], ...] = ()
    sample_size: int = 8
    mix_join_start: float = 0.0
    mix_join_every: float = 0.0
    fit_window: int = 8
    measure_from: float = 0.0
    rebalance: RebalanceSpec | None = None


def number_field(
    raw: Mapping[str, Any], key: str, where: str, default: float | None = None
) -> float:
    """A finite number at ``raw[key]`` (or ``default``); ``ScenarioError`` names ``where.key``."""
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScenarioError(f"{where}{key}", f"expected a finite number, got {value!r}")
    return float(value)


def whole_field(raw: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    """A whole number >= 0 at ``raw[key]`` (or ``default``); ``ScenarioError`` otherwise."""
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"{where}{key}", f"expected a whole number, got {value!r}")
    return value


def _choice(raw: Mapping[str, Any], key: str, options: tuple[str, ...], default: str) -> str:
    value = raw.get(key, default)
    if value not in options:
        raise ScenarioError(key, f"expected one of {', '.join(options)}, got {value!r}")
    return str(value)


def resources_field(value: Any, field: str) -> ResourceVector:
    """``value`` (``{"cpus": 1, "mem": 2}``) as a ``ResourceVector``; errors name ``field``."""
    if not isinstance(value, dict) or not value:
        raise ScenarioError(field, "expected a non-empty object of resource quantities")
    try:
        resources = ResourceVector(value)
    except (ResourceError, TypeError, ValueError) as exc:
        raise ScenarioError(field, str(exc)) from None
    if not resources:
        raise ScenarioError(field, "all quantities are zero")
    return resources


def object_field(value: Any, field: str) -> Mapping[str, Any]:
    """``value`` as a JSON object, or ``ScenarioError`` naming ``field``."""
    if not isinstance(value, dict):
        raise ScenarioError(field, f"expected an object, got {type(value).__name__}")
    return value


def duration_field(value: Any, field: str) -> Duration:
    """A duration distribution object (``dist``, ``mean``, ``k``); errors name ``field``."""
    raw = object_field(value, field)
    dist = raw.get("dist", "deterministic")
    if dist not in DISTRIBUTIONS:
        raise ScenarioError(f"{field}.dist", f"expected one of {', '.join(DISTRIBUTIONS)}")
    mean = number_field(raw, "mean", f"{field}.")
    if mean <= 0:
        raise ScenarioError(f"{field}.mean", "must be > 0")
    k = whole_field(raw, "k", f"{field}.", 1)
    if k < 1:
        raise ScenarioError(f"{field}.k", "must be >= 1")
    return Duration(str(dist), mean, k)


def _jobs(
    raw: Mapping[str, Any], where: str, join: float, default: Duration | None
) -> list[JobSpec]:
    listed = raw.get("jobs", [])
    if not isinstance(listed, list):
        raise ScenarioError(f"{where}jobs", "expected a list")
    jobs = []
    for index, value in enumerate(listed):
        at = f"{where}jobs[{index}]."
        entry = object_field(value, at[:-1])
        submit = number_field(entry, "submit", at, join)
        if submit < join:
            raise ScenarioError(f"{at}submit", "must be >= the user's join time")
        tasks = whole_field(entry, "tasks", at)
        if tasks < 0:
            raise ScenarioError(f"{at}tasks", "must be >= 0")
        if "duration" in entry:
            duration = duration_field(entry["duration"], f"{at}duration")
        elif default is not None:
            duration = default
        else:
            raise ScenarioError(f"{at}duration", "missing (and the user has no duration)")
        jobs.append(JobSpec(submit, tasks, duration))
    return jobs


def _user(value: Any, index: int) -> UserSpec:
    where = f"users[{index}]."
    raw = object_field(value, where[:-1])
    user_id = raw.get("id", f"u{index + 1}")
    if not isinstance(user_id, str) or not user_id:
        raise ScenarioError(f"{where}id", "expected a non-empty string")
    join = number_field(raw, "join", where, 0.0)
    leave = None if raw.get("leave") is None else number_field(raw, "leave", where)
    if join < 0 or (leave is not None and leave <= join):
        raise ScenarioError(f"{where}leave" if leave is not None else f"{where}join", "bad time")
    weight = number_field(raw, "weight", where, 1.0)
    if weight <= 0:
        raise ScenarioError(f"{where}weight", "must be > 0")
    has_jobs = "jobs" in raw
    if not has_jobs:
        whole_field(raw, "tasks", where)  # a user without jobs needs its tasks (checked first)
    duration = None
    if "duration" in raw:
        duration = duration_field(raw["duration"], f"{where}duration")
    elif not has_jobs:
        raise ScenarioError(f"{where}duration", "missing")
    jobs = _jobs(raw, where, join, duration)
    if "tasks" in raw or not has_jobs:
        tasks = whole_field(raw, "tasks", where)
        if tasks < 0:
            raise ScenarioError(f"{where}tasks", "must be >= 0")
        if duration is None:
            raise ScenarioError(f"{where}duration", "missing")
        jobs.insert(0, JobSpec(join, tasks, duration))
    jobs.sort(key=lambda job: job.submit)
    preemptible = raw.get("preemptible", False)
    if not isinstance(preemptible, bool):
        raise ScenarioError(f"{where}preemptible", "expected true or false")
    return UserSpec(
        preemptible=preemptible,
        id=user_id,
        name=str(raw.get("name", user_id)),
        task=resources_field(raw.get("task"), f"{where}task"),
        tasks=sum(job.tasks for job in jobs),
        duration=duration or (jobs[0].duration if jobs else Duration("deterministic", 1.0)),
        join=join,
        leave=leave,
        weight=weight,
        jobs=tuple(jobs),
    )


def _range(raw: Mapping[str, Any], key: str, default: tuple[float, float]) -> tuple[float, float]:
    value = raw.get(key, list(default))
    ok = isinstance(value, list) and len(value) == 2
    ok = ok and all(not isinstance(v, bool) and isinstance(v, int | float) for v in value)
    if not ok or not 0 < value[0] <= value[1] or not math.isfinite(value[1]):
        raise ScenarioError(
            f"workload.{key}", f"expected [low, high] with 0 < low <= high, got {value!r}"
        )
    return (float(value[0]), float(value[1]))


def _workload(value: Any, seed: int) -> list[UserSpec]:
    """Users made by ``master.sim.workload`` (seeded by ``workload.seed``, else ``seed``)."""
    raw = object_field(value, "workload")
    if raw.get("generator", "google-like") != "google-like":
        raise ScenarioError("workload.generator", "expected google-like")
    base = GoogleLikeWorkload()
    where = "workload."
    spec = GoogleLikeWorkload(
        users=whole_field(raw, "users", where, base.users),
        jobs=whole_field(raw, "jobs", where, base.jobs),
        span=number_field(raw, "span", where, base.span),
        zipf=number_field(raw, "zipf", where, base.zipf),
        cpus=_range(raw, "cpus", base.cpus),
        mem=_range(raw, "mem", base.mem),
        tasks_alpha=number_field(raw, "tasks_alpha", where, base.tasks_alpha),
        tasks_max=whole_field(raw, "tasks_max", where, base.tasks_max),
        duration=_range(raw, "duration", base.duration),
        duration_dist=str(raw.get("duration_dist", base.duration_dist)),
        duration_k=whole_field(raw, "duration_k", where, base.duration_k),
    )
    if spec.users < 1 or spec.jobs < 0 or spec.span <= 0 or spec.zipf < 0:
        raise ScenarioError("workload.users/jobs/span/zipf", "out of range")
    if spec.tasks_alpha <= 0 or spec.tasks_max < 1 or spec.duration_k < 1:
        raise ScenarioError("workload.tasks_alpha/tasks_max/duration_k", "out of range")
    if spec.duration_dist not in DISTRIBUTIONS:
        raise ScenarioError("workload.duration_dist", f"expected one of {', '.join(DISTRIBUTIONS)}")
    rng = random.Random(whole_field(raw, "seed", where, seed))
    users = []
    for generated in generate(spec, rng):
        jobs = tuple(
            JobSpec(
                job.submit,
                job.tasks,
                Duration(spec.duration_dist, job.mean_duration, spec.duration_k),
            )
            for job in generated.jobs
        )
        default = jobs[0].duration if jobs else Duration("deterministic", 1.0)
        users.append(
            UserSpec(
                id=generated.id,
                name=generated.id,
                task=ResourceVector(cpus=generated.cpus, mem=generated.mem),
                tasks=sum(job.tasks for job in jobs),
                duration=default,
                join=0.0,
                leave=None,
                weight=1.0,
                jobs=jobs,
            )
        )
    return users


def _agents(raw: Mapping[str, Any]) -> tuple[AgentSpec, ...]:
    listed = raw.get("agents", [])
    if not isinstance(listed, list):
        raise ScenarioError("agents", "expected a list")
    agents: list[AgentSpec] = []
    for index, value in enumerate(listed):
        entry = object_field(value, f"agents[{index}]")
        resources = resources_field(entry.get("resources"), f"agents[{index}].resources")
        count = whole_field(entry, "count", f"agents[{index}].", 1)
        if count < 1:
            raise ScenarioError(f"agents[{index}].count", "must be >= 1")
        base = entry.get("id", f"a{index + 1}")
        if not isinstance(base, str) or not base:
            raise ScenarioError(f"agents[{index}].id", "expected a non-empty string")
        join = number_field(entry, "join", f"agents[{index}].", 0.0)
        if join < 0:
            raise ScenarioError(f"agents[{index}].join", "must be >= 0")
        for n in range(count):
            agents.append(AgentSpec(base if count == 1 else f"{base}-{n + 1}", resources, join))
    if len({a.id for a in agents}) != len(agents):
        raise ScenarioError("agents", "agent ids repeat")
    return tuple(agents)


def _rebalance(value: Any) -> RebalanceSpec:
    """``rebalance``: ``every`` and ``grace`` seconds, and ``RebalanceConfig``'s settings."""
    raw = object_field(value, "rebalance")
    where = "rebalance."
    every = number_field(raw, "every", where, 10.0)
    grace = number_field(raw, "grace", where, 0.0)
    if every <= 0 or grace < 0:
        raise ScenarioError("rebalance.every/grace", "every must be > 0 and grace >= 0")
    base = RebalanceConfig()
    try:
        config = RebalanceConfig(
            threshold=Fraction(repr(number_field(raw, "threshold", where, float(base.threshold)))),
            release=Fraction(repr(number_field(raw, "release", where, float(base.release)))),
            patience=whole_field(raw, "patience", where, base.patience),
            max_kills=whole_field(raw, "max_kills", where, base.max_kills),
            cooldown=whole_field(raw, "cooldown", where, base.cooldown),
        )
    except ValueError as exc:
        raise ScenarioError("rebalance", str(exc)) from None
    return RebalanceSpec(every, grace, config)


def _servers(doc: Mapping[str, Any]) -> tuple[str | None, int, float, tuple[float, float]]:
    """``servers``: the mix, how many, their scale, and their join schedule (start, every)."""
    if "servers" not in doc:
        return None, 0, 1.0, (0.0, 0.0)
    servers = object_field(doc["servers"], "servers")
    mix = servers.get("mix", "google")
    if mix not in MIXES:
        raise ScenarioError("servers.mix", f"unknown mix {mix!r} (known: {', '.join(MIXES)})")
    count = whole_field(servers, "count", "servers.")
    scale = number_field(servers, "scale", "servers.", 1.0)
    if count < 1 or scale <= 0:
        raise ScenarioError("servers.count", "count must be >= 1 and scale > 0")
    return str(mix), count, scale, _join_schedule(servers.get("join", {}))


def _users(doc: Mapping[str, Any], seed: int) -> list[UserSpec]:
    """``users`` and the users of ``workload``, with distinct ids."""
    users_raw = doc.get("users", [] if "workload" in doc else None)
    if not isinstance(users_raw, list) or not (users_raw or "workload" in doc):
        raise ScenarioError("users", "expected a non-empty list")
    users = [_user(value, i) for i, value in enumerate(users_raw)]
    if "workload" in doc:
        users.extend(_workload(doc["workload"], seed))
    if len({u.id for u in users}) != len(users):
        raise ScenarioError("users", "user ids repeat")
    return users


def _join_schedule(value: Any) -> tuple[float, float]:
    """``servers.join``: ``{"start": S, "every": E}``, server k (from 1) at ``S + (k-1) E``."""
    raw = object_field(value, "servers.join")
    start = number_field(raw, "start", "servers.join.", 0.0)
    every = number_field(raw, "every", "servers.join.", 0.0)
    if start < 0 or every < 0:
        raise ScenarioError("servers.join", "start and every must be >= 0")
    return start, every


def _variants(doc: Mapping[str, Any]) -> tuple[tuple[str, Scenario], ...]:
    listed = doc.get("variants", [])
    if not isinstance(listed, list):
        raise ScenarioError("variants", "expected a list")
    base = {key: value for key, value in doc.items() if key != "variants"}
    variants = []
    for index, value in enumerate(listed):
        entry = dict(object_field(value, f"variants[{index}]"))
        name = entry.pop("name", None)
        if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
            raise ScenarioError(f"variants[{index}].name", "expected a file-name-safe string")
        if "variants" in entry:
            raise ScenarioError(f"variants[{index}].variants", "variants do not nest")
        try:
            variants.append((name, parse_scenario({**base, **entry})))
        except ScenarioError as exc:
            raise ScenarioError(
                f"variants[{index}].{exc.field}", str(exc).split(": ", 1)[-1]
            ) from None
    if len({name for name, _ in variants}) != len(variants):
        raise ScenarioError("variants", "variant names repeat")
    return tuple(variants)


SCENARIO_KEYS = frozenset(
    {
        "seed", "policy", "placement", "slots_per_agent", "agents", "servers", "users",
        "placement_sample", "until", "sample_every", "allocation_interval", "workload",
        "variants", "name", "description", "measure_from", "fit_window", "rebalance",
    }
)  # fmt: skip


def parse_scenario(raw: Any) -> Scenario:
    """Check a decoded scenario document; raises ``ScenarioError`` naming the bad field."""
    doc = object_field(raw, "scenario")
    unknown = sorted(set(doc) - SCENARIO_KEYS)
    if unknown:
        hint = (
            " (this looks like a case file of fairshare allocate: docs/cases.md;"
            " scenarios: docs/scenarios.md)"
            if "frameworks" in doc or "resources" in doc
            else f" (known: {', '.join(sorted(SCENARIO_KEYS))})"
        )
        raise ScenarioError(unknown[0], f"unknown key{hint}")
    agents = _agents(doc)
    mix, mix_count, mix_scale, mix_join = _servers(doc)
    if not agents and not mix_count:
        raise ScenarioError("agents", "no agents: list some or draw them from 'servers'")
    seed = whole_field(doc, "seed", "", 0)
    users = _users(doc, seed)
    until = None if doc.get("until") is None else number_field(doc, "until", "")
    sample_every = number_field(doc, "sample_every", "", 0.0)
    interval = number_field(doc, "allocation_interval", "", 0.0)
    measure_from = number_field(doc, "measure_from", "", 0.0)
    fit_window = whole_field(doc, "fit_window", "", 8)
    if measure_from < 0 or fit_window < 0:
        raise ScenarioError("measure_from/fit_window", "must be >= 0")
    rebalance = None if doc.get("rebalance") is None else _rebalance(doc["rebalance"])
    if rebalance is not None and until is None:
        raise ScenarioError("rebalance", "a rebalancing timer needs 'until'")
    slots = whole_field(doc, "slots_per_agent", "", 14)
    if slots < 1 or sample_every < 0 or (until is not None and until <= 0):
        raise ScenarioError("slots_per_agent/sample_every/until", "out of range")
    if interval < 0:
        raise ScenarioError("allocation_interval", "must be >= 0")
    sample = doc.get("placement_sample", 8)
    if sample == "all":
        sample = len(agents) + mix_count
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 1:
        raise ScenarioError(
            "placement_sample", f"expected a whole number >= 1 or 'all', got {sample!r}"
        )
    return Scenario(
        seed=seed,
        policy=_choice(doc, "policy", POLICIES, "drf"),
        placement=_choice(doc, "placement", PLACEMENTS, "best-fit"),
        slots_per_agent=slots,
        agents=agents,
        mix=mix,
        mix_count=mix_count,
        mix_scale=mix_scale,
        users=tuple(users),
        until=until,
        sample_every=sample_every,
        allocation_interval=interval,
        variants=_variants(doc),
        sample_size=sample,
        mix_join_start=mix_join[0],
        mix_join_every=mix_join[1],
        fit_window=fit_window,
        measure_from=measure_from,
        rebalance=rebalance,
    )
