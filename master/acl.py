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

    [[maintain_agents]]                 # Deactivate/ReactivateAgents, DrainAgent, RemoveAgent
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

A refusal says what is wrong: when rules of the action match the caller but none for this
object, it names what they grant ("teamb may register_frameworks only for roles ['x', 'y'],
not 'z'"); when none matches the caller, that no rule lets it.

The vocabulary (``Values``, ``Rule``, ``Decision``, the actions) is in ``master.acl_rules``;
reading a file, with its refusal of typos, in ``master.acl_file``; what a file's principals
are checked against once the master's authentication is known in ``master.acl_checks``.

Invariants: an ``Acl`` is immutable and validated when loaded (``AclError`` names the file,
the action, the rule and the key); ``decide`` is pure. Without an ACL file the master uses ``OPEN``:
every action allowed but tasks as root, subscribed weights capped at ``DEFAULT_MAX_WEIGHT``.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from master.acl_file import parse_document
from master.acl_rules import (
    ACTIONS,
    ANY,
    DEFAULT_MAX_WEIGHT,
    OBJECT_PHRASES,
    OBJECTS,
    ROOT_USER,
    AclError,
    Decision,
    Rule,
    Values,
)

__all__ = [
    "ACTIONS",
    "DEFAULT_MAX_WEIGHT",
    "OPEN",
    "Acl",
    "AclError",
    "Decision",
    "Rule",
    "Values",
    "parse",
]


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
        granted: list[Rule] = []  # rules for this caller whose object did not match
        for rule in self.rules.get(action, ()):
            if not rule.principals.matches(principal):
                continue
            if rule.objects.none:
                why = self._granted(action, who, target, granted)
                return Decision(False, rule, why or f"a rule of {self.source} refuses {action}")
            if as_root and ROOT_USER not in rule.objects.names:
                granted.append(rule)
                continue  # root only by a rule that names it
            if OBJECTS[action] is None or rule.objects.matches(target, principal):
                return Decision(True, rule, "allowed by a rule")
            granted.append(rule)
        if as_root:
            return Decision(
                False,
                Rule(ANY),
                f"no run_tasks rule of {self.source} names user 'root' for {who} (root is"
                ' never allowed by "ANY", permissive or the lack of an ACL file)',
            )
        if self.permissive:
            return Decision(True, Rule(ANY), "no rule: permissive")
        why = self._granted(action, who, target, granted)
        if why:
            return Decision(False, Rule(ANY), why)
        if action == "run_tasks":
            return Decision(
                False,
                Rule(ANY),
                f"no run_tasks rule of {self.source} lets {who} run tasks as user {target!r}",
            )
        return Decision(False, Rule(ANY), f"no rule of {self.source} lets {who} {action}")

    def _granted(self, action: str, who: str, target: str | None, granted: Sequence[Rule]) -> str:
        """ "WHO may ACTION only for roles [...], not 'T' (FILE)" when rules of ``action`` for
        the caller grant other objects; "" when none does."""
        key = OBJECTS[action]
        if not granted or key is None:
            return ""
        objects: list[str] = []
        for rule in granted:
            objects += [name for name in rule.objects.describe() if name not in objects]
        wanted = "every one" if target is None else repr(target)
        return (
            f"{who} may {action} only {OBJECT_PHRASES[key]} {objects}, not {wanted}"
            f" (rules of {self.source})"
        )

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
    """An ``Acl`` from a parsed document (``AclError`` naming what is wrong:
    ``master.acl_file``)."""
    rules, permissive = parse_document(document, source)
    return Acl(rules, permissive, source)


OPEN: Final = Acl()
"""No ACL file: everything allowed but tasks as root, subscribed weights capped at
``DEFAULT_MAX_WEIGHT``."""
