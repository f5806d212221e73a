"""What an ACL file's principals are checked against once the master's authentication is
known (``master.security`` calls ``check_principals`` when it loads ``--acls``).

Who a caller can be depends on the settings:

- with ``--tls-ca`` a caller may be the common name of any certificate the CA signs: the master
  cannot know them, nothing more is checked;
- without it, callers are the principals of tokens: a name that is not a principal name
  (``fairshare.credentials.PRINCIPAL_RE``: 1-128 of ``[A-Za-z0-9_.@-]``, starting with a letter
  or a digit) can never match and is an error (the master exits 2 before serving); with
  ``--credentials`` a name absent from the credentials file is a warning (logged once at
  start, with the closest principal of the file), not an error: as Mesos and Nomad let an
  operator write a policy before the principal's credential exists, a rule may name a principal
  whose credential is added at the next restart;
- with no authentication at all every caller is anonymous: rules naming principals never match
  (only ``principals = "ANY"`` does), a warning.

Invariants: pure (no I/O, no logging: the caller logs the warnings); errors and warnings name
the file, the action, the rule number, the key and the name.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from fairshare.credentials import PRINCIPAL_RE

from master.acl import Acl
from master.acl_file import did_you_mean

__all__ = ["PrincipalFindings", "check_principals", "named_principals"]


@dataclass(frozen=True, slots=True)
class PrincipalFindings:
    """Errors (the file is refused) and warnings (logged) about an ACL's principal names."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def named_principals(acl: Acl) -> Iterator[tuple[str, str, str]]:
    """``(where, key, name)`` for every principal an ACL names: in ``principals`` and in
    ``framework_principals``; ``where`` is "ACL file F, ACTION rule N"."""
    for action, rules in acl.rules.items():
        for number, rule in enumerate(rules, start=1):
            where = f"ACL file {acl.source}, {action} rule {number}"
            for name in sorted(rule.principals.names):
                yield where, "principals", name
            if action in ("teardown_frameworks", "kill_tasks", "view_logs"):
                for name in sorted(rule.objects.names):
                    yield where, "framework_principals", name


def check_principals(
    acl: Acl, credentials: frozenset[str] | None, certificates: bool
) -> PrincipalFindings:
    """The findings about ``acl``'s principals for a master whose callers are proved by the
    principals of ``credentials`` (None: no credentials file) and, if ``certificates``, by
    client certificates (see the module docstring)."""
    found = PrincipalFindings()
    if certificates:
        return found
    named = list(named_principals(acl))
    if credentials is None:
        if named:
            where, key, name = named[0]
            found.warnings.append(
                f"{where}: {key} names {name!r} (and {len(named) - 1} more), but the master"
                " authenticates no one (no --credentials, no --tls-ca): every caller is"
                ' anonymous, and only principals = "ANY" matches'
            )
        return found
    for where, key, name in named:
        if not PRINCIPAL_RE.match(name):
            found.errors.append(
                f"{where}: {key}: {name!r} is not a principal name (1-128 of [A-Za-z0-9_.@-],"
                " starting with a letter or a digit), and without --tls-ca no certificate names"
                " a caller: no caller can ever be it"
            )
        elif name not in credentials:
            hint = did_you_mean(name, sorted(credentials))
            found.warnings.append(
                f"{where}: {key}: principal {name!r} is not in the --credentials file{hint}:"
                " no caller can be it until it is added and the master restarted"
            )
    return found
