"""Role paths: the tenant tree's names, their one syntax and how a path relates to another.

A role is a path of segments separated by ``/`` (``eng``, ``eng/dev``, ``eng/dev/ci``), as in
Mesos's hierarchical roles (Mesos 1.4+, docs/roles.md): each segment is letters, digits, ``_``,
``.`` and ``-``; no segment is empty, ``.`` or ``..``, and none starts with ``-``. ``*`` is the
default role and stands alone (it has no children and is never a segment of a longer path).
A path has at most ``MAX_ROLE_DEPTH`` segments and ``MAX_ROLE_LENGTH`` characters.

ACL objects may name a subtree with a trailing ``/*`` (``eng/*`` is every role strictly below
``eng``, Mesos's convention); ``role_matches`` is the one reading of such a pattern.

Every process speaks this vocabulary: the master's wire checks, its core (which splits paths
into the tree), the ACL, the SDK and the CLI. Pure: the standard library only.

Invariants: ``check_role`` accepts exactly the paths ``ancestors`` and ``parent`` are defined
on; ``check_role("") == "*"``; a checked path never starts or ends with ``/``.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "DEFAULT_ROLE",
    "MAX_ROLE_DEPTH",
    "MAX_ROLE_LENGTH",
    "RoleError",
    "ancestors",
    "check_role",
    "is_within",
    "parent",
    "role_matches",
]

DEFAULT_ROLE: Final = "*"
MAX_ROLE_DEPTH: Final = 16
"""Segments of a role path at most (an org tree deeper than this is a way to slow every run)."""
MAX_ROLE_LENGTH: Final = 256
"""Characters of a role path at most (the same bound as any other name on the wire)."""
_SEGMENT: Final = re.compile(r"^[A-Za-z0-9_.\-]+$")


class RoleError(ValueError):
    """A role path breaks the syntax; the message names the path and the rule."""


def check_role(role: str, what: str = "role") -> str:
    """``role`` as a checked path (``"*"`` for empty); ``RoleError`` naming ``what`` if not.

    >>> check_role("eng/dev")
    'eng/dev'
    """
    if role in ("", DEFAULT_ROLE):
        return DEFAULT_ROLE
    if len(role) > MAX_ROLE_LENGTH:
        raise RoleError(f"{what} has {len(role)} characters; at most {MAX_ROLE_LENGTH}")
    segments = role.split("/")
    if len(segments) > MAX_ROLE_DEPTH:
        raise RoleError(f"{what} {role!r} has {len(segments)} levels; at most {MAX_ROLE_DEPTH}")
    for segment in segments:
        if segment == DEFAULT_ROLE:
            raise RoleError(f"{what} {role!r}: '*' is the default role, not a segment of a path")
        if not segment:
            raise RoleError(f"{what} {role!r} has an empty segment (a leading, trailing or '//')")
        if segment in (".", ".."):
            raise RoleError(f"{what} {role!r} has a {segment!r} segment")
        if segment.startswith("-"):
            raise RoleError(f"{what} {role!r}: segment {segment!r} starts with '-'")
        if not _SEGMENT.match(segment):
            raise RoleError(
                f"{what} {role!r} is malformed (segments of letters, digits, '_', '.', '-'"
                " separated by '/')"
            )
    return role


def parent(role: str) -> str | None:
    """The parent path of a checked ``role`` (``None`` for a top-level role)."""
    head, slash, _ = role.rpartition("/")
    return head if slash else None


def ancestors(role: str) -> list[str]:
    """Every path from the top level down to ``role`` itself: ``a/b/c`` -> ``[a, a/b, a/b/c]``."""
    segments = role.split("/")
    return ["/".join(segments[: depth + 1]) for depth in range(len(segments))]


def is_within(role: str, subtree: str) -> bool:
    """Is ``role`` the role ``subtree`` or below it?"""
    return role == subtree or role.startswith(subtree + "/")


def role_matches(pattern: str, role: str) -> bool:
    """Does an ACL role object ``pattern`` match ``role``? ``eng/*`` matches every role strictly
    below ``eng`` (not ``eng`` itself); any other pattern matches only itself."""
    if pattern.endswith("/*"):
        return role.startswith(pattern[:-1])
    return pattern == role
