"""The users of a scenario: listed ones (``users``, with their jobs) and generated ones
(``workload``, ``analysis.sim.workload``).

Invariant: ``parse_users`` returns users with distinct ids, each with its jobs sorted by
submission time (none before its join), or raises ``ScenarioError`` naming the field.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

from fairshare.resources import ResourceVector

from analysis.sim.scenario_fields import (
    DISTRIBUTIONS,
    ScenarioError,
    duration_field,
    number_field,
    object_field,
    resources_field,
    role_field,
    weight_field,
    whole_field,
)
from analysis.sim.scenario_specs import Duration, JobSpec, UserSpec
from analysis.sim.workload import GoogleLikeWorkload, generate

__all__ = ["parse_users"]


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
    weight = weight_field(raw, where)
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
        role=role_field(raw, where),
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
    """Users made by ``analysis.sim.workload`` (seeded by ``workload.seed``, else ``seed``)."""
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


def parse_users(doc: Mapping[str, Any], seed: int) -> list[UserSpec]:
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
