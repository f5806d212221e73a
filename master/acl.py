"""``Acl``: who may do what on the master, from an ACL file like Mesos's ``--acls``
(docs/security.md).

The file (TOML, or JSON when it ends in ``.json``) lists rules per action; see
``docs/security.md`` for examples::

    permissive = false                  # an action no rule allows is refused (the default)

    [[register_frameworks]]             # Subscribe: with which roles, and the weight cap
    principals = ["batch"]
    roles = ["batch", "*"]
    max_weight = 4

    [[register_agents]]                 # Connect (register; reregister of its own agents)
    principals = ["agent-1", "agent-2"]

    [[teardown_frameworks]]             # OperatorService.TeardownFramework
    principals = ["ops"]
    framework_principals = "ANY"        # whose frameworks: "ANY", "SELF", or a list

    [[kill_tasks]]                      # OperatorService.KillTask
    principals = ["alice"]
    framework_principals = "SELF"

    [[set_weights]]                     # OperatorService.SetWeight (roles of the targets)
    principals = ["ops"]
    roles = "ANY"

    [[update_quota]]                    # OperatorService.SetQuota (the quota's role)
    principals = ["ops"]
    roles = ["eng", "eng/*"]

    [[reserve_resources]]               # OperatorService.Reserve/Unreserve (the role)
    principals = ["ops"]
    roles = "ANY"

    [[maintain_agents]]                 # Deactivate/ReactivateAgents, RemoveAgent
    principals = ["ops"]

    [[run_tasks]]                       # Accept: the OS users command tasks may run as
    principals = ["batch"]
    users = ["batch"]                   # "root" only where a rule names it

    [[view_logs]]                       # GrantLogAccess: whose frameworks' task logs
    principals = ["auditor"]
    framework_principals = ["batch"]

    [[view_state]]                      # GetState, GetWeights, GetQuotas, the dashboard, API
                                        # and /metrics
    principals = "ANY"
    level = "redacted"                  # "full" (default) or "redacted"

Matching, as in Mesos: the rules of an action are tried in order; the first whose ``principals``
match the caller decides if its object (``roles``, ``framework_principals``) matches too: a
rule whose object is ``"NONE"`` refuses, a rule whose object matches allows (with its
``max_weight`` or ``level``), otherwise the next rule is tried. When no rule decides,
``permissive`` does. Values are a list of names, ``"ANY"`` or ``"NONE"`` (Mesos's
``{"values": [...]}`` and ``{"type": "ANY"}`` forms are accepted too); ``"ANY"`` principals
match anonymous callers as well (a master without authentication).

``run_tasks`` governs who a command task runs as (Mesos's ``run_tasks``, principals -> users):
the framework's principal may launch a task whose ``user`` is in the rule's ``users`` (POSIX
user names). A task without a user runs as the agent's ``--task-user`` (an unprivileged user the
operator chose) and is not checked here. ``root`` is allowed only by a rule that names it: not
by ``users = "ANY"``, not by ``permissive`` and not without an ACL file (``OPEN``), so a cluster
never runs a task as root unless an operator wrote so (and the agent has
``--allow-root-tasks``: the agent checks every task's uid again, whatever its name).

``view_logs`` governs who may read the logs of other principals' frameworks' tasks
(``OperatorService.GrantLogAccess``), its object the ``framework_principals`` whose frameworks
(``"SELF"`` is always allowed: a framework's own principal reads its tasks' logs whatever the
ACL says, and so does a principal with the full ``view_state``).

Roles are paths (``eng``, ``eng/dev``; ``fairshare.roles``). A ``roles`` object names a role
exactly (``"eng"`` is ``eng`` only, ``"*"`` the default role) or a subtree with a trailing
``/*``: ``"eng/*"`` is every role strictly below ``eng`` (``eng/dev``, ``eng/dev/ci``), not
``eng`` itself (Mesos's convention; list both, ``["eng", "eng/*"]``, for the whole tree), read
by ``fairshare.roles.role_matches``. A rule of ``set_weights`` with ``roles = ["eng/*"]`` lets
its principals set the weights of the roles below ``eng`` and of their frameworks; one of
``update_quota`` lets them set or clear the quotas of those roles; one of
``reserve_resources`` lets them reserve agents' resources for those roles and unreserve them;
one of ``register_frameworks`` lets them subscribe in those roles. A malformed name or pattern
(``eng//dev``, ``eng/*/x``, ``/*``) refuses the file when it is loaded.

Invariants: an ``Acl`` is immutable and validated when loaded (``AclError`` names the file,
the action and the rule); ``decide`` is pure. Without an ACL file the master uses ``OPEN``:
every action allowed but tasks as root, subscribed weights capped at ``DEFAULT_MAX_WEIGHT``.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from fairshare.command import is_user_name
from fairshare.roles import DEFAULT_ROLE, RoleError, check_role, role_matches

from master.core.checks import MAX_WEIGHT, MIN_WEIGHT

__all__ = [
    "ACTIONS",
    "DEFAULT_MAX_WEIGHT",
    "OPEN",
    "Acl",
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


@dataclass(frozen=True, slots=True)
class Acl:
    """The rules of every action and what no rule decides (``permissive``)."""

    rules: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict)
    permissive: bool = True
    source: str = "(none)"

    def decide(self, action: str, principal: str | None, target: str | None = None) -> Decision:
        """May ``principal`` (None: anonymous) do ``action`` on ``target`` (a role, the
        principal of a framework, a user)? The first rule whose principals match and whose
        object matches (or is NONE) decides; else ``permissive``. ``run_tasks`` as ``root``
        needs a rule naming ``root``."""
        as_root = action == "run_tasks" and target == ROOT_USER
        who = principal if principal is not None else "anonymous callers"
        for rule in self.rules.get(action, ()):
            if not rule.principals.matches(principal):
                continue
            if rule.objects.none:
                return Decision(False, rule, f"a rule of {self.source} refuses {action}")
            if as_root and ROOT_USER not in rule.objects.names:
                continue  # root only by a rule that names it
            if OBJECTS[action] is None or rule.objects.matches(target, principal):
                return Decision(True, rule, "allowed by a rule")
        if as_root:
            return Decision(
                False,
                Rule(ANY),
                f"no run_tasks rule of {self.source} names user 'root' for {who} (root is"
                ' never allowed by "ANY", permissive or the lack of an ACL file)',
            )
        if self.permissive:
            return Decision(True, Rule(ANY), "no rule: permissive")
        if action == "run_tasks":
            return Decision(
                False,
                Rule(ANY),
                f"no run_tasks rule of {self.source} lets {who} run tasks as user {target!r}",
            )
        return Decision(False, Rule(ANY), f"no rule of {self.source} lets {who} {action}")

    @classmethod
    def load(cls, path: Path) -> Acl:
        """Read and check an ACL file (``AclError`` naming what is wrong)."""
        try:
            text = path.read_text(encoding="utf-8")
            document: Any = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        except (OSError, UnicodeDecodeError) as error:
            raise AclError(f"ACL file {path}: cannot read it: {error}") from None
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as error:
            raise AclError(f"ACL file {path}: not valid: {error}") from None
        if not isinstance(document, dict):
            raise AclError(f"ACL file {path}: expected a table of actions")
        return parse(document, str(path))


def parse(document: Mapping[str, Any], source: str) -> Acl:
    """An ``Acl`` from a parsed document (``AclError`` naming what is wrong)."""
    permissive = document.get("permissive", False)
    if not isinstance(permissive, bool):
        raise AclError(f"ACL file {source}: permissive must be true or false")
    rules: dict[str, tuple[Rule, ...]] = {}
    for action, raw in document.items():
        if action == "permissive":
            continue
        if action not in OBJECTS:
            raise AclError(
                f"ACL file {source}: unknown action {action!r} (known: {', '.join(ACTIONS)})"
            )
        if not isinstance(raw, list):
            raise AclError(f"ACL file {source}: {action} must be a list of rules")
        rules[action] = tuple(
            _rule(action, item, f"ACL file {source}, {action} rule {number}")
            for number, item in enumerate(raw, start=1)
        )
    return Acl(rules, permissive, source)


def _rule(action: str, item: Any, where: str) -> Rule:
    if not isinstance(item, dict):
        raise AclError(f"{where}: expected a table")
    object_key = OBJECTS[action]
    allowed = {"principals", *([object_key] if object_key else [])}
    if action == "register_frameworks":
        allowed.add("max_weight")
    if action == "view_state":
        allowed.add("level")
    unknown = set(item) - allowed
    if unknown:
        raise AclError(f"{where}: unknown keys {sorted(unknown)} (allowed: {sorted(allowed)})")
    if "principals" not in item:
        raise AclError(f"{where}: principals is missing")
    principals = _values(item["principals"], f"{where}: principals", self_allowed=False)
    objects = ANY
    if object_key is not None and object_key in item:
        self_allowed = object_key == "framework_principals"
        objects = _values(item[object_key], f"{where}: {object_key}", self_allowed)
        if object_key == "roles":
            objects = _role_patterns(objects, f"{where}: roles")
        if object_key == "users":
            _check_users(objects, f"{where}: users")
    max_weight = item.get("max_weight", DEFAULT_MAX_WEIGHT)
    if (
        isinstance(max_weight, bool)
        or not isinstance(max_weight, (int, float))
        or not math.isfinite(max_weight)
        or not MIN_WEIGHT <= max_weight <= MAX_WEIGHT
    ):
        raise AclError(f"{where}: max_weight must be a number in [{MIN_WEIGHT:g}, {MAX_WEIGHT:g}]")
    level = item.get("level", "full")
    if level not in LEVELS:
        raise AclError(f"{where}: level must be one of {', '.join(LEVELS)}")
    return Rule(principals, objects, float(max_weight), level)


def _values(raw: Any, where: str, self_allowed: bool) -> Values:
    if isinstance(raw, dict):  # Mesos's form: {"values": [...]} or {"type": "ANY"}
        if "values" in raw:
            raw = raw["values"]
        elif "type" in raw:
            raw = raw["type"]
    if isinstance(raw, str):
        word = raw.upper()
        if word == "ANY":
            return ANY
        if word == "NONE":
            return Values()
        if word == "SELF" and self_allowed:
            return Values(self_=True)
        raw = [raw]
    if not isinstance(raw, list) or not raw or not all(isinstance(v, str) and v for v in raw):
        choices = '"ANY", "NONE", "SELF"' if self_allowed else '"ANY", "NONE"'
        raise AclError(f"{where}: expected a non-empty list of names, or {choices}")
    names = frozenset(v for v in raw if not (self_allowed and v.upper() == "SELF"))
    return Values(names=names, self_=self_allowed and len(names) != len(set(raw)))


def _check_users(values: Values, where: str) -> None:
    """``AclError`` naming the rule when a name of a ``users`` object is not a user name."""
    for name in sorted(values.names):
        if not is_user_name(name):
            raise AclError(
                f"{where}: {name!r} is not a user name ([A-Za-z_][A-Za-z0-9_.-]{{0,31}})"
            )


def _role_patterns(values: Values, where: str) -> Values:
    """``values`` of a ``roles`` object with each name checked as a role path (``AclError``
    naming the rule if one is not) and the subtree patterns (``R/*``) set apart."""
    names, subtrees = set(), set()
    for name in sorted(values.names):
        base = name.removesuffix(SUBTREE) if name.endswith(SUBTREE) else None
        try:
            if base is None:
                names.add(check_role(name))
            elif base and check_role(base) != DEFAULT_ROLE:
                subtrees.add(name)
            else:
                raise RoleError(f"{name!r} names no role below which to match ('ROLE/*')")
        except RoleError as error:
            raise AclError(
                f"{where}: {name!r} is not a role or a subtree of one ('eng', 'eng/dev',"
                f" 'eng/*'): {error}"
            ) from None
    return Values(frozenset(names), values.any, values.self_, frozenset(subtrees))


OPEN: Final = Acl()
"""No ACL file: everything allowed but tasks as root, subscribed weights capped at
``DEFAULT_MAX_WEIGHT``."""
