"""The vocabulary of the ACL (``master.acl``): its actions and the object each rule of an
action names, ``Values`` (a set of names, ``ANY``, ``NONE``, ``SELF``, role subtrees), ``Rule``
and ``Decision``.

Invariants: values are immutable; ``Values.matches`` is pure; ``Values.describe`` lists what a
set holds in a stable order (names, then subtrees, then ``SELF``), for messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from fairshare.roles import role_matches

__all__ = [
    "ACTIONS",
    "ANY",
    "DEFAULT_MAX_WEIGHT",
    "LEVELS",
    "OBJECTS",
    "OBJECT_PHRASES",
    "ROOT_USER",
    "SUBTREE",
    "AclError",
    "Decision",
    "Rule",
    "Values",
]

DEFAULT_MAX_WEIGHT: Final = 100.0
"""The largest weight a framework may ask for when no rule says otherwise (an operator may set
larger ones, up to the core's ``MAX_WEIGHT``)."""
OBJECTS: Final[Mapping[str, str | None]] = {
    "register_frameworks": "roles",
    "register_agents": None,
    "teardown_frameworks": "framework_principals",
    "kill_tasks": "framework_principals",
    "set_weights": "roles",
    "update_quota": "roles",
    "reserve_resources": "roles",
    "maintain_agents": None,
    "run_tasks": "users",
    "view_logs": "framework_principals",
    "view_state": None,
}
ACTIONS: Final = tuple(OBJECTS)
LEVELS: Final = ("full", "redacted")
SUBTREE: Final = "/*"
"""The suffix of a role pattern naming the roles strictly below a role (``eng/*``)."""
OBJECT_PHRASES: Final[Mapping[str, str]] = {
    "roles": "for roles",
    "framework_principals": "on the frameworks of principals",
    "users": "as users",
}
"""How a refusal names a rule's object: "teamb may register_frameworks only for roles ..."."""
ROOT_USER: Final = "root"
"""The user ``run_tasks`` allows only by a rule naming it (never by ANY or ``permissive``)."""


class AclError(ValueError):
    """An ACL file that cannot be used (the message names the file, action and rule)."""


@dataclass(frozen=True, slots=True)
class Values:
    """A set of names, or everything (``ANY``), or nothing (``NONE``); ``SELF`` (framework
    principals only) is the caller itself; ``subtrees`` (roles only) are patterns ``R/*``, each
    matching the roles strictly below ``R``."""

    names: frozenset[str] = frozenset()
    any: bool = False
    self_: bool = False
    subtrees: frozenset[str] = frozenset()

    @property
    def none(self) -> bool:
        """True for ``NONE``."""
        return not (self.names or self.any or self.self_ or self.subtrees)

    def matches(self, value: str | None, caller: str | None = None) -> bool:
        """True if ``value`` is in the set (``caller``: who ``SELF`` is)."""
        if self.any:
            return True
        if value is None:
            return False
        if self.self_ and value == (caller or ""):
            return True
        return value in self.names or any(role_matches(p, value) for p in self.subtrees)

    def describe(self) -> list[str]:
        """What the set holds, for a message: names, subtrees, then ``SELF``."""
        if self.any:
            return ["ANY"]
        return [*sorted(self.names), *sorted(self.subtrees), *(["SELF"] if self.self_ else [])]


ANY: Final = Values(any=True)


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of an action."""

    principals: Values
    objects: Values = ANY
    max_weight: float = DEFAULT_MAX_WEIGHT
    level: str = "full"


@dataclass(frozen=True, slots=True)
class Decision:
    """What ``decide`` answers: allowed or not, with the rule that said so."""

    allowed: bool
    rule: Rule
    why: str
