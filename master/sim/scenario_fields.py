"""Field readers shared by the scenario parsers (``master.sim.scenario``, ``dynamic_scenario``).

Invariant: each reader returns a checked value or raises ``ScenarioError`` whose ``field`` is
the entry's path in the file (``users[1].duration.k``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fairshare.resources import ResourceError, ResourceVector

from master.sim.scenario_specs import Duration

__all__ = [
    "DISTRIBUTIONS",
    "ScenarioError",
    "choice_field",
    "duration_field",
    "number_field",
    "object_field",
    "resources_field",
    "whole_field",
]

DISTRIBUTIONS = ("deterministic", "exponential", "erlang")


class ScenarioError(ValueError):
    """A scenario entry is missing or invalid; ``field`` is its path in the file."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


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


def choice_field(raw: Mapping[str, Any], key: str, options: tuple[str, ...], default: str) -> str:
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
