"""Field readers shared by the scenario parsers (``analysis.sim.scenario``, ``dynamic_scenario``).

Invariant: each reader returns a checked value or raises ``ScenarioError`` whose ``field`` is
the entry's path in the file (``users[1].duration.k``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fairshare.resources import ResourceError, ResourceVector
from fairshare.roles import DEFAULT_ROLE, RoleError, check_role

from analysis.sim.scenario_specs import Duration, RoleQuota
from master.core.checks import check_weight
from master.core.errors import InvalidArgument
from master.core.quota import Quota, check_quotas

__all__ = [
    "DISTRIBUTIONS",
    "ScenarioError",
    "choice_field",
    "duration_field",
    "number_field",
    "object_field",
    "quotas_field",
    "resources_field",
    "role_field",
    "roles_field",
    "whole_field",
]

DISTRIBUTIONS = ("deterministic", "exponential", "erlang")
ROLE_KEYS = ("weight", "guarantee", "limit", "quota_at")


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


def weight_field(raw: Mapping[str, Any], where: str) -> float:
    """``raw["weight"]`` (default 1) by the core's one weight rule (``check_weight``: a role's
    and a user's framework alike); ``ScenarioError`` names ``where.weight``."""
    try:
        return check_weight(raw.get("weight", 1.0), "weight")
    except InvalidArgument as error:
        raise ScenarioError(f"{where}weight", str(error).removeprefix("weight: ")) from None


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


def role_field(raw: Mapping[str, Any], where: str) -> str:
    """A user's ``role``: a role path (``fairshare.roles``), default ``*``."""
    value = raw.get("role", DEFAULT_ROLE)
    if not isinstance(value, str) or not value:
        raise ScenarioError(f"{where}role", f"expected a role path like 'eng/dev', got {value!r}")
    try:
        return check_role(value)
    except RoleError as exc:
        raise ScenarioError(f"{where}role", str(exc)) from None


def roles_field(doc: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
    """``roles``: ``{"eng": {"weight": 3}, ...}``, the operator weight of each role path
    (default 1), sorted by path."""
    raw = object_field(doc.get("roles", {}), "roles")
    weights = []
    for path, value in raw.items():
        if not isinstance(path, str) or not path:
            raise ScenarioError("roles", "an empty role path ('*' is the default role)")
        try:
            role = check_role(path)
        except RoleError as exc:
            raise ScenarioError(f"roles.{path}", str(exc)) from None
        entry = object_field(value, f"roles.{path}")
        unknown = sorted(set(entry) - set(ROLE_KEYS))
        if unknown:
            raise ScenarioError(
                f"roles.{path}.{unknown[0]}", f"unknown key (known: {', '.join(ROLE_KEYS)})"
            )
        weights.append((role, weight_field(entry, f"roles.{path}.")))
    return tuple(sorted(weights))


def _quota_resources(value: Any, field: str) -> ResourceVector:
    """A guarantee or a limit: resources as an agent's, each named one above 0."""
    resources = resources_field(value, field)
    zero = sorted(name for name in value if name not in resources.names())
    if zero:
        raise ScenarioError(
            f"{field}.{zero[0]}",
            "a quota names each resource with a quantity above 0 (leave it out to not"
            " guarantee or limit it)",
        )
    return resources


def quotas_field(doc: Mapping[str, Any]) -> tuple[RoleQuota, ...]:
    """The quotas of ``roles`` entries (``guarantee``, ``limit``, set at ``quota_at`` seconds,
    default 0), by path, checked by the core's rules (``master.core.quota.check_quotas``,
    the whole table: a subset of a valid table is valid, so every moment's is); call after
    ``roles_field``, which checks the rest."""
    quotas = []
    for path, entry in doc.get("roles", {}).items():
        if not {"guarantee", "limit", "quota_at"} & set(entry):
            continue
        where = f"roles.{path}."
        if "guarantee" not in entry and "limit" not in entry:
            raise ScenarioError(f"{where}quota_at", "a quota_at without a guarantee or a limit")
        guarantee = (
            _quota_resources(entry["guarantee"], f"{where}guarantee")
            if "guarantee" in entry
            else ResourceVector()
        )
        limit = _quota_resources(entry["limit"], f"{where}limit") if "limit" in entry else None
        at = number_field(entry, "quota_at", where, 0.0)
        if at < 0:
            raise ScenarioError(f"{where}quota_at", "must be >= 0")
        quotas.append(RoleQuota(check_role(path), Quota(guarantee, limit), at))
    try:
        check_quotas({spec.role: spec.quota for spec in quotas})
    except InvalidArgument as exc:
        raise ScenarioError("roles", str(exc)) from None
    return tuple(sorted(quotas, key=lambda spec: spec.role))
