"""The role tree of a case file (``fairshare allocate``): parsing ``roles``, ``role`` and
``hierarchy``, and the per-role section of the output.

A case may place its frameworks in roles (``"role": "eng/dev"``, ``fairshare.roles`` paths,
default ``*``) and weigh roles (``"roles": {"eng": {"weight": 3}}``); ``hierarchy`` (``hdrf``,
``naive`` or ``flat``) says how the tree is used (``master.core.hierarchy``). A role may carry
a quota (``"guarantee"`` and ``"limit"``, resources as a task's: ``{"cpus": 8}`` or
``"cpus:8"``; ``master.core.quota``'s rules). The output then lists every role (those of the
frameworks, their ancestors, and those named in ``roles``) with its weight, the tasks of the
frameworks in its subtree, what they hold and its dominant share; with quotas also its
guarantee, limit, consumption and whether it is below its guarantee.

Invariants: a bad entry raises ``CaseError`` naming the field (``roles.eng/dev.weight``,
``roles.eng.limit.cpus``, ``frameworks[2].role``); a quota table the core refuses raises it
with the core's message, which names the role; a case without ``roles`` and without any
framework ``role`` has no tree (``has_tree`` is False) and its output has no role section; a
case without quotas has exactly the role rows it had before quotas existed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from fairshare.resources import MILLI, ResourceError, ResourceVector, canonical_order
from fairshare.roles import DEFAULT_ROLE, RoleError, ancestors, check_role, is_within

from master.core.checks import check_weight, hierarchy_in_force, hierarchy_refusal
from master.core.errors import InvalidArgument
from master.core.hierarchy import HIERARCHIES
from master.core.quota import Quota, check_quotas

__all__ = [
    "CaseError",
    "RoleTree",
    "case_resources",
    "core_weight",
    "effective_hierarchy",
    "framework_role",
    "parse_quotas",
    "parse_roles",
    "role_rows",
]

_ROLE_KEYS = ("weight", "guarantee", "limit")


class CaseError(ValueError):
    """A case file that cannot be allocated; the message names the field."""


@dataclass(frozen=True)
class RoleTree:
    """The roles of a case: their operator weights and whether the case has a tree at all."""

    weights: dict[str, float]
    has_tree: bool


def case_resources(value: object, where: str) -> ResourceVector:
    """Resources as a case writes them (``{"cpus": 4}`` or ``"cpus:4;mem:8"``), some positive."""
    try:
        if isinstance(value, str):
            vector = ResourceVector.parse(value)
        elif isinstance(value, Mapping):
            vector = ResourceVector(value)
        else:
            raise CaseError(f"{where}: expected an object like {{\"cpus\": 4}} or 'cpus:4;mem:8'")
    except ResourceError as error:
        raise CaseError(f"{where}: {error}") from None
    if not vector:
        raise CaseError(f"{where}: no positive quantity")
    return vector


def _quota_vector(value: object, where: str) -> ResourceVector:
    """A guarantee or a limit: resources as a task's, each named one above 0 (a resource left
    out is not guaranteed or not limited; a 0 would read as "none" but mean "no limit")."""
    vector = case_resources(value, where)
    if isinstance(value, str):
        named = [part.split(":")[0].strip() for part in value.split(";") if part.strip()]
    else:
        assert isinstance(value, Mapping)
        named = [str(name) for name in value]
    zero = [name for name in named if name not in vector.names()]
    if zero:
        raise CaseError(
            f"{where}.{zero[0]}: a quota names each resource with a quantity above 0 (leave"
            " the resource out to not guarantee or limit it)"
        )
    return vector


def core_weight(value: object, where: str) -> float:
    """A weight by the core's one rule (``master.core.checks.check_weight``), or ``CaseError``
    naming ``where``."""
    try:
        return check_weight(value, where)
    except InvalidArgument as error:
        raise CaseError(str(error)) from None


def parse_roles(raw: Mapping[str, Any]) -> dict[str, float]:
    """``roles``: role path -> ``{"weight": w}`` (weight optional, default 1)."""
    listed = raw.get("roles", {})
    if not isinstance(listed, Mapping):
        raise CaseError('roles: expected an object like {"eng": {"weight": 3}}')
    weights: dict[str, float] = {}
    for path, entry in listed.items():
        where = f"roles.{path}"
        if not path:
            raise CaseError("roles: an empty role path ('*' is the default role)")
        try:
            role = check_role(path, where)
        except RoleError as error:
            raise CaseError(str(error)) from None
        if not isinstance(entry, Mapping):
            raise CaseError(f'{where}: expected an object like {{"weight": 3}}')
        unknown = sorted(set(entry) - set(_ROLE_KEYS))
        if unknown:
            raise CaseError(f"{where}.{unknown[0]}: unknown field (known: {', '.join(_ROLE_KEYS)})")
        weights[role] = core_weight(entry.get("weight", 1), f"{where}.weight")
    return weights


def parse_quotas(raw: Mapping[str, Any]) -> dict[str, Quota]:
    """The quotas of ``roles`` entries (``guarantee``, ``limit``), checked by the core's rules
    (``master.core.quota.check_quotas``); call after ``parse_roles`` (which checks the rest)."""
    quotas: dict[str, Quota] = {}
    for path, entry in raw.get("roles", {}).items():
        if "guarantee" not in entry and "limit" not in entry:
            continue
        where = f"roles.{path}"
        guarantee = (
            _quota_vector(entry["guarantee"], f"{where}.guarantee")
            if "guarantee" in entry
            else ResourceVector()
        )
        limit = _quota_vector(entry["limit"], f"{where}.limit") if "limit" in entry else None
        quotas[check_role(path)] = Quota(guarantee, limit)
    try:
        check_quotas(quotas)
    except InvalidArgument as error:
        raise CaseError(f"roles: {error}") from None
    return quotas


def framework_role(raw: Mapping[str, Any], where: str) -> str:
    """A framework's ``role`` (default ``*``), checked."""
    role = raw.get("role", DEFAULT_ROLE)
    if not isinstance(role, str) or not role:
        raise CaseError(f"{where}.role: expected a role path like 'eng/dev', got {role!r}")
    try:
        return check_role(role, f"{where}.role")
    except RoleError as error:
        raise CaseError(str(error)) from None


def effective_hierarchy(named: object, policy: str) -> str:
    """The hierarchy a case runs, by the core's rule (``master.core.hierarchy``): the one
    named, else hdrf under drf and flat otherwise; a tree hierarchy with another policy, or a
    name the core does not know, is refused."""
    if named is None:
        return hierarchy_in_force("", policy)
    if not isinstance(named, str) or not named:
        raise CaseError(f"hierarchy: {named!r} is unknown; choose one of {', '.join(HIERARCHIES)}")
    refusal = hierarchy_refusal(named, policy)
    if refusal is not None:
        raise CaseError(f"hierarchy: {refusal}")
    return hierarchy_in_force(named, policy)


def _paths(roles: Sequence[str], declared: Mapping[str, float]) -> list[str]:
    paths: set[str] = set(declared)
    for role in roles:
        paths.update(ancestors(role) if role != DEFAULT_ROLE else [role])
    return sorted(paths)


Number = int | float | Fraction


def _number(value: Number) -> int | float:
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 else float(value)
    return value


def role_rows(
    roles: Sequence[str],
    tasks: Sequence[Number],
    shapes: Sequence[ResourceVector],
    weights: Mapping[str, float],
    total: ResourceVector,
    quotas: Mapping[str, Quota] | None = None,
) -> list[dict[str, Any]]:
    """The output's ``roles``: per role path, sorted, its weight, the tasks of its subtree's
    frameworks, what they hold (resource units) and its dominant share of the pool; with
    ``quotas``, every row also has the role's ``guarantee`` (``{}`` without), ``limit``
    (``None`` without), ``consumption`` (what its subtree holds, what a limit caps) and
    ``below_guarantee`` (it holds less than its guarantee of some guaranteed resource).

    Whole tasks (tasks mode) are summed as resource vectors, exactly as the framework rows;
    fractional ones (fluid mode) exactly as ``Fraction`` (floats for pf/ceei)."""
    rows = []
    for path in _paths(roles, weights):
        members = [i for i, role in enumerate(roles) if is_within(role, path)]
        row: dict[str, Any] = {"path": path, "weight": weights.get(path, 1.0)}
        if all(isinstance(tasks[i], int) for i in members):
            allocated = sum((shapes[i] * int(tasks[i]) for i in members), ResourceVector())
            row["tasks"] = sum(int(tasks[i]) for i in members)
            row["dominant_share"] = allocated.dominant_share(total)
            row["allocated"] = allocated.to_dict()
            exact: dict[str, Number] = {
                name: Fraction(millis, MILLI) for name, millis in allocated.millis_items()
            }
        else:
            count: Number = sum((tasks[i] for i in members), Fraction(0))
            held: dict[str, Number] = {}
            for i in members:
                for name, millis in shapes[i].millis_items():
                    held[name] = held.get(name, Fraction(0)) + tasks[i] * Fraction(millis, MILLI)
            dominant: Number = max(
                (held[name] * MILLI / millis for name, millis in total.millis_items()
                 if name in held),
                default=Fraction(0),
            )  # fmt: skip
            row["tasks"] = _number(count)
            row["dominant_share"] = _number(dominant)
            row["allocated"] = {
                name: _number(held[name]) for name in sorted(held, key=canonical_order)
            }
            if isinstance(count, Fraction) and count.denominator != 1:
                row["tasks_exact"] = str(count)
                row["dominant_share_exact"] = str(dominant)
            exact = held
        if quotas:
            _quota_fields(row, quotas.get(path), exact)
        rows.append(row)
    return rows


def _quota_fields(row: dict[str, Any], quota: Quota | None, held: Mapping[str, Number]) -> None:
    """A role row's quota fields (``role_rows``); ``held``: what the subtree holds, exactly."""
    guarantee = quota.guarantee if quota is not None else ResourceVector()
    limit = quota.limit if quota is not None else None
    row["guarantee"] = guarantee.to_dict()
    row["limit"] = None if limit is None else limit.to_dict()
    row["consumption"] = dict(row["allocated"])
    row["below_guarantee"] = any(
        held.get(name, 0) < Fraction(millis, MILLI) for name, millis in guarantee.millis_items()
    )
