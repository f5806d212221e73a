"""Scenario files for ``fairshare simulate``: parsing and validation into immutable specs.

Invariant: ``parse_scenario`` either returns a fully checked ``Scenario`` or raises
``ScenarioError`` whose ``field`` names the offending entry (``users[1].duration.k``); nothing
downstream re-validates. Format (see examples/scenarios/README.md)::

    {"seed": 1, "policy": "drf", "placement": "best-fit", "slots_per_agent": 14,
     "agents": [{"id": "s1", "resources": {"cpus": 9, "mem": 18}, "count": 1}],
     "servers": {"mix": "google", "count": 100, "scale": 1},
     "users": [{"id": "u1", "name": "user 1", "task": {"cpus": 0.2, "mem": 0.3},
                "tasks": 1000, "join": 0, "leave": 1080, "weight": 1,
                "duration": {"dist": "exponential", "mean": 100}}],
     "until": 1500, "sample_every": 5}

``agents`` and ``servers`` may be combined (listed agents first); at least one agent overall.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from framework_sdk.resources import ResourceError, ResourceVector
from master.sim.servers import MIXES

__all__ = ["AgentSpec", "Duration", "Scenario", "ScenarioError", "UserSpec", "parse_scenario"]

POLICIES = ("drf", "asset", "pf", "slots")
PLACEMENTS = ("best-fit", "first-fit", "random")
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
    """One simulated agent."""

    id: str
    resources: ResourceVector


@dataclass(frozen=True, slots=True)
class UserSpec:
    """One simulated user (framework): a job of ``tasks`` tasks of shape ``task``."""

    id: str
    name: str
    task: ResourceVector
    tasks: int
    duration: Duration
    join: float
    leave: float | None
    weight: float


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


def _number(raw: Mapping[str, Any], key: str, where: str, default: float | None = None) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScenarioError(f"{where}{key}", f"expected a finite number, got {value!r}")
    return float(value)


def _whole(raw: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"{where}{key}", f"expected a whole number, got {value!r}")
    return value


def _choice(raw: Mapping[str, Any], key: str, options: tuple[str, ...], default: str) -> str:
    value = raw.get(key, default)
    if value not in options:
        raise ScenarioError(key, f"expected one of {', '.join(options)}, got {value!r}")
    return str(value)


def _resources(value: Any, field: str) -> ResourceVector:
    if not isinstance(value, dict) or not value:
        raise ScenarioError(field, "expected a non-empty object of resource quantities")
    try:
        resources = ResourceVector(value)
    except (ResourceError, TypeError, ValueError) as exc:
        raise ScenarioError(field, str(exc)) from None
    if not resources:
        raise ScenarioError(field, "all quantities are zero")
    return resources


def _object(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ScenarioError(field, f"expected an object, got {type(value).__name__}")
    return value


def _duration(value: Any, field: str) -> Duration:
    raw = _object(value, field)
    dist = raw.get("dist", "deterministic")
    if dist not in DISTRIBUTIONS:
        raise ScenarioError(f"{field}.dist", f"expected one of {', '.join(DISTRIBUTIONS)}")
    mean = _number(raw, "mean", f"{field}.")
    if mean <= 0:
        raise ScenarioError(f"{field}.mean", "must be > 0")
    k = _whole(raw, "k", f"{field}.", 1)
    if k < 1:
        raise ScenarioError(f"{field}.k", "must be >= 1")
    return Duration(str(dist), mean, k)


def _user(value: Any, index: int) -> UserSpec:
    where = f"users[{index}]."
    raw = _object(value, where[:-1])
    user_id = raw.get("id", f"u{index + 1}")
    if not isinstance(user_id, str) or not user_id:
        raise ScenarioError(f"{where}id", "expected a non-empty string")
    tasks = _whole(raw, "tasks", where)
    if tasks < 0:
        raise ScenarioError(f"{where}tasks", "must be >= 0")
    join = _number(raw, "join", where, 0.0)
    leave = None if raw.get("leave") is None else _number(raw, "leave", where)
    if join < 0 or (leave is not None and leave <= join):
        raise ScenarioError(f"{where}leave" if leave is not None else f"{where}join", "bad time")
    weight = _number(raw, "weight", where, 1.0)
    if weight <= 0:
        raise ScenarioError(f"{where}weight", "must be > 0")
    if "duration" not in raw:
        raise ScenarioError(f"{where}duration", "missing")
    return UserSpec(
        id=user_id,
        name=str(raw.get("name", user_id)),
        task=_resources(raw.get("task"), f"{where}task"),
        tasks=tasks,
        duration=_duration(raw["duration"], f"{where}duration"),
        join=join,
        leave=leave,
        weight=weight,
    )


def _agents(raw: Mapping[str, Any]) -> tuple[AgentSpec, ...]:
    listed = raw.get("agents", [])
    if not isinstance(listed, list):
        raise ScenarioError("agents", "expected a list")
    agents: list[AgentSpec] = []
    for index, value in enumerate(listed):
        entry = _object(value, f"agents[{index}]")
        resources = _resources(entry.get("resources"), f"agents[{index}].resources")
        count = _whole(entry, "count", f"agents[{index}].", 1)
        if count < 1:
            raise ScenarioError(f"agents[{index}].count", "must be >= 1")
        base = entry.get("id", f"a{index + 1}")
        if not isinstance(base, str) or not base:
            raise ScenarioError(f"agents[{index}].id", "expected a non-empty string")
        for n in range(count):
            agents.append(AgentSpec(base if count == 1 else f"{base}-{n + 1}", resources))
    if len({a.id for a in agents}) != len(agents):
        raise ScenarioError("agents", "agent ids repeat")
    return tuple(agents)


def parse_scenario(raw: Any) -> Scenario:
    """Check a decoded scenario document; raises ``ScenarioError`` naming the bad field."""
    doc = _object(raw, "scenario")
    agents = _agents(doc)
    mix, mix_count, mix_scale = None, 0, 1.0
    if "servers" in doc:
        servers = _object(doc["servers"], "servers")
        mix = servers.get("mix", "google")
        if mix not in MIXES:
            raise ScenarioError("servers.mix", f"unknown mix {mix!r} (known: {', '.join(MIXES)})")
        mix_count = _whole(servers, "count", "servers.")
        mix_scale = _number(servers, "scale", "servers.", 1.0)
        if mix_count < 1 or mix_scale <= 0:
            raise ScenarioError("servers.count", "count must be >= 1 and scale > 0")
    if not agents and not mix_count:
        raise ScenarioError("agents", "no agents: list some or draw them from 'servers'")
    users_raw = doc.get("users")
    if not isinstance(users_raw, list) or not users_raw:
        raise ScenarioError("users", "expected a non-empty list")
    users = tuple(_user(value, i) for i, value in enumerate(users_raw))
    if len({u.id for u in users}) != len(users):
        raise ScenarioError("users", "user ids repeat")
    until = None if doc.get("until") is None else _number(doc, "until", "")
    sample_every = _number(doc, "sample_every", "", 0.0)
    slots = _whole(doc, "slots_per_agent", "", 14)
    if slots < 1 or sample_every < 0 or (until is not None and until <= 0):
        raise ScenarioError("slots_per_agent/sample_every/until", "out of range")
    return Scenario(
        seed=_whole(doc, "seed", "", 0),
        policy=_choice(doc, "policy", POLICIES, "drf"),
        placement=_choice(doc, "placement", PLACEMENTS, "best-fit"),
        slots_per_agent=slots,
        agents=agents,
        mix=None if mix is None else str(mix),
        mix_count=mix_count,
        mix_scale=mix_scale,
        users=users,
        until=until,
        sample_every=sample_every,
    )
