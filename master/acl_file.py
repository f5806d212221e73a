"""Reading an ACL file (``master.acl``; the format is in ``docs/security.md``): every typo is
refused, naming the file, the action, the rule and the key.

- an unknown action (or a misspelled ``permissive``) or an unknown key of a rule is refused
  with the closest known one ("did you mean");
- a value is a list of names, or one of the words ``"ANY"``, ``"NONE"`` (``"SELF"`` for
  ``framework_principals``), in any case, or Mesos's ``{"values": [...]}`` / ``{"type": "ANY"}``;
  any other single string (``"OWN"``, ``"alice"``) is refused, with the closest word and the
  list form ``["alice"]`` (a bare string is ambiguous: a misspelled word or a name); a word in a
  list (``["ANY"]``) is refused the same way (in a list it would be a name);
- a principal name (in ``principals``, ``framework_principals``) no caller can ever have is
  refused: empty, with surrounding spaces or control characters, longer than
  ``MAX_PRINCIPAL_LENGTH``. What callers the master can have depends on its settings and is
  checked after loading (``master.acl_checks``);
- roles must be role paths or subtrees ``R/*``; users POSIX user names; ``max_weight`` a number
  in the core's range; ``level`` ``"full"`` or ``"redacted"``.

Invariants: pure (no I/O); an ``AclError`` message always starts ``ACL file FILE`` and names
the action and rule number (and the key) of what is wrong.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

from fairshare.command import is_user_name
from fairshare.roles import DEFAULT_ROLE, RoleError, check_role

from master.acl_rules import (
    ANY,
    DEFAULT_MAX_WEIGHT,
    LEVELS,
    OBJECTS,
    SUBTREE,
    AclError,
    Rule,
    Values,
)
from master.core.checks import MAX_WEIGHT, MIN_WEIGHT

__all__ = ["MAX_PRINCIPAL_LENGTH", "RULE_KEYS", "did_you_mean", "parse_document"]

MAX_PRINCIPAL_LENGTH: Final = 128
"""The longest principal name (a credentials file's principals are 1-128 characters)."""
RULE_KEYS: Final = frozenset(
    {"principals", "max_weight", "level", *(key for key in OBJECTS.values() if key)}
)
"""Every key a rule of some action may have."""
WORDS: Final = ("ANY", "NONE", "SELF")
_PRINCIPAL_KEYS: Final = ("principals", "framework_principals")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` (one the word begins with or
    that begins with the word first, case aside), or ``""`` when none is close."""
    folded = {choice.lower(): choice for choice in choices}
    lower = word.lower()
    prefixed = [c for c in folded if c and (lower.startswith(c) or c.startswith(lower))]
    close = prefixed or difflib.get_close_matches(lower, list(folded), n=1, cutoff=0.6)
    return f" (did you mean {folded[close[0]]!r}?)" if close and lower else ""


def parse_document(
    document: Mapping[str, Any], source: str
) -> tuple[dict[str, tuple[Rule, ...]], bool]:
    """The rules of each action and ``permissive`` (``AclError`` naming what is wrong)."""
    permissive = document.get("permissive", False)
    if not isinstance(permissive, bool):
        raise AclError(f"ACL file {source}: permissive must be true or false")
    rules: dict[str, tuple[Rule, ...]] = {}
    for action, raw in document.items():
        if action == "permissive":
            continue
        if action not in OBJECTS:
            hint = did_you_mean(action, [*OBJECTS, "permissive"])
            raise AclError(
                f"ACL file {source}: unknown action {action!r}{hint} (known: permissive,"
                f" {', '.join(OBJECTS)})"
            )
        if not isinstance(raw, list):
            raise AclError(f"ACL file {source}: {action} must be a list of rules ([[{action}]])")
        rules[action] = tuple(
            _rule(action, item, f"ACL file {source}, {action} rule {number}")
            for number, item in enumerate(raw, start=1)
        )
    return rules, permissive


def _unknown_keys(action: str, keys: set[str], allowed: set[str], where: str) -> AclError:
    hints = []
    for key in sorted(keys):
        if key in RULE_KEYS:
            hints.append(f"{key!r} is not a key of {action} rules")
        else:
            hints.append(f"{key!r}{did_you_mean(key, allowed)}")
    return AclError(
        f"{where}: unknown keys {sorted(keys)}: {'; '.join(hints)} (allowed: {sorted(allowed)})"
    )


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
        raise _unknown_keys(action, unknown, allowed, where)
    if "principals" not in item:
        raise AclError(f"{where}: principals is missing")
    principals = _values(item["principals"], where, "principals", self_allowed=False)
    _check_principals(principals, f"{where}: principals")
    objects = ANY
    if object_key is not None and object_key in item:
        self_allowed = object_key == "framework_principals"
        objects = _values(item[object_key], where, object_key, self_allowed)
        if object_key == "roles":
            objects = _role_patterns(objects, f"{where}: roles")
        if object_key == "users":
            _check_users(objects, f"{where}: users")
        if object_key == "framework_principals":
            _check_principals(objects, f"{where}: framework_principals")
    max_weight = item.get("max_weight", DEFAULT_MAX_WEIGHT)
    if (
        isinstance(max_weight, bool)
        or not isinstance(max_weight, (int, float))
        or not math.isfinite(max_weight)
        or not MIN_WEIGHT <= max_weight <= MAX_WEIGHT
    ):
        raise AclError(
            f"{where}: max_weight must be a number in [{MIN_WEIGHT:g}, {MAX_WEIGHT:g}],"
            f" not {max_weight!r}"
        )
    level = item.get("level", "full")
    if level not in LEVELS:
        hint = did_you_mean(str(level), LEVELS)
        raise AclError(f"{where}: level must be one of {', '.join(LEVELS)}, not {level!r}{hint}")
    return Rule(principals, objects, float(max_weight), level)


def _values(raw: Any, rule: str, key: str, self_allowed: bool) -> Values:
    where = f"{rule}: {key}"
    if isinstance(raw, dict):  # Mesos's form: {"values": [...]} or {"type": "ANY"}
        if set(raw) == {"values"}:
            raw = raw["values"]
        elif set(raw) == {"type"} and isinstance(raw["type"], str):
            raw = raw["type"]
        else:
            raise AclError(f'{where}: a table must be {{"values": [...]}} or {{"type": "ANY"}}')
    words = WORDS if self_allowed else WORDS[:2]
    choices = ", ".join(f'"{word}"' for word in words)
    if isinstance(raw, str):
        word = raw.upper()
        if word in words:
            return {"ANY": ANY, "NONE": Values(), "SELF": Values(self_=True)}[word]
        raise AclError(
            f"{where}: {raw!r} is not one of {choices}{did_you_mean(raw, words)}; a name goes"
            f' in a list: {key} = ["{raw}"]'
        )
    if not isinstance(raw, list) or not raw or not all(isinstance(v, str) for v in raw):
        raise AclError(f"{where}: expected a non-empty list of names, or {choices}, not {raw!r}")
    for value in raw:
        if value.upper() in WORDS and not (self_allowed and value.upper() == "SELF"):
            raise AclError(
                f'{where}: "{value}" in a list would be a name: write {key} = "{value.upper()}"'
                " for the word"
            )
    names = frozenset(v for v in raw if not (self_allowed and v.upper() == "SELF"))
    return Values(names=names, self_=self_allowed and len(names) != len(set(raw)))


def _check_principals(values: Values, where: str) -> None:
    """``AclError`` naming a principal name no caller can have."""
    for name in sorted(values.names):
        if (
            not name
            or name != name.strip()
            or len(name) > MAX_PRINCIPAL_LENGTH
            or not name.isprintable()
        ):
            raise AclError(
                f"{where}: {name!r} can be no caller's principal (1-{MAX_PRINCIPAL_LENGTH}"
                " printable characters, no surrounding spaces)"
            )


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
