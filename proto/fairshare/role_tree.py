"""The role tree as operators read it: ``GetStateResponse.roles`` as JSON and as table rows.

One definition for ``fairshare status`` (``client_commands.status_document``) and ``fairshare
roles`` (``client_commands.roles``), so both print the same keys and the same columns; the
master's HTTP API (``master.web.documents.role_document``) builds the same keys from its
snapshot. One role is::

    {"role", "parent" (null at the top level), "depth" (0 at the top level), "weight",
     "share", "weighted_share", "dominant_resource", "allocated": {resource: quantity},
     "frameworks", "subtree_frameworks", "running_tasks",
     "guarantee": {resource: quantity} (empty: none), "limit": {...} or null,
     "below_guarantee"}

``share`` is the role's share as the master's hierarchy computes it, ``weighted_share`` is
``share / weight`` (what the allocator orders sibling roles by); ``allocated``,
``subtree_frameworks`` and ``running_tasks`` are sums over the role and every role below it,
``frameworks`` counts the frameworks whose role is exactly this one (operator.proto's
``GetStateResponse.Role``).

Invariants: pure functions, no I/O; the list keeps the wire's pre-order (a role before the
roles below it); resources as ``ResourceVector.to_dict`` gives them; a row's role cell is the
full path indented by two spaces per level, so it can be pasted into ``fairshare weights
--role``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from fairshare.roles import parent
from fairshare.v1 import operator_pb2
from fairshare.wire import resources_from_pb

__all__ = [
    "ROLE_HEADER",
    "depth",
    "hierarchy_note",
    "role_rows",
    "role_to_dict",
    "roles_to_dicts",
]

ROLE_HEADER: Final = (
    "ROLE",
    "WEIGHT",
    "SHARE",
    "WEIGHTED",
    "DOMINANT",
    "FRAMEWORKS",
    "OWN",
    "RUNNING",
    "ALLOCATED",
    "GUARANTEE",
    "LIMIT",
)
"""The columns of ``role_rows``: FRAMEWORKS counts the subtree's, OWN the role's own;
GUARANTEE and LIMIT are the role's quota ("-": none; "(below)" when it holds less than its
guarantee)."""


def depth(path: str) -> int:
    """How deep ``path`` sits: 0 for a top-level role (``eng``, ``*``), 1 for ``eng/dev``."""
    return path.count("/")


def role_to_dict(role: operator_pb2.GetStateResponse.Role) -> dict[str, Any]:
    """One role's document (see the module docstring)."""
    return {
        "role": role.path,
        "parent": parent(role.path),
        "depth": depth(role.path),
        "weight": role.weight,
        "share": role.share,
        "weighted_share": role.weighted_share,
        "dominant_resource": role.dominant_resource,
        "allocated": resources_from_pb(role.allocated).to_dict(),
        "frameworks": role.frameworks,
        "subtree_frameworks": role.subtree_frameworks,
        "running_tasks": role.running_tasks,
        "guarantee": resources_from_pb(role.guarantee).to_dict(),
        "limit": resources_from_pb(role.limit).to_dict() if role.HasField("limit") else None,
        "below_guarantee": role.below_guarantee,
    }


def roles_to_dicts(roles: Iterable[operator_pb2.GetStateResponse.Role]) -> list[dict[str, Any]]:
    """Every role's document, in the wire's pre-order."""
    return [role_to_dict(role) for role in roles]


def _text(resources: dict[str, float]) -> str:
    return ";".join(f"{name}:{value:g}" for name, value in resources.items()) or "-"


def role_rows(roles: Sequence[dict[str, Any]]) -> list[list[str]]:
    """One row per role document, under ``ROLE_HEADER``, the role indented by its depth."""
    return [
        [
            "  " * role["depth"] + role["role"],
            f"{role['weight']:g}",
            f"{role['share']:.3f}",
            f"{role['weighted_share']:.3f}",
            role["dominant_resource"] or "-",
            str(role["subtree_frameworks"]),
            str(role["frameworks"]),
            str(role["running_tasks"]),
            _text(role["allocated"]),
            _guarantee(role),
            "-" if role.get("limit") is None else _text(role["limit"]),
        ]
        for role in roles
    ]


def _guarantee(role: dict[str, Any]) -> str:
    guarantee = role.get("guarantee") or {}
    if not guarantee:
        return "-"
    return _text(guarantee) + (" (below)" if role.get("below_guarantee") else "")


def hierarchy_note(hierarchy: str) -> str:
    """One line under the table: how the master's hierarchy uses the figures above."""
    if hierarchy == "flat":
        return "hierarchy flat: frameworks are ordered directly; a role's share is what it holds"
    return (
        f"hierarchy {hierarchy or '?'}: among sibling roles, the lowest WEIGHTED"
        " (share / weight) is served first"
    )
