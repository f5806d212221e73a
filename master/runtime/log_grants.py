"""``LogGrants``: who may read a task's logs, and the credentials that say so to its agents
(``OperatorService.GrantLogAccess``; the format is ``fairshare.log_access``).

A principal may read the logs of a framework's tasks when it owns the framework (the principal
that registered it; with authentication off everyone is the anonymous owner of everything, as
for every other call), when the ACL's ``view_logs`` lets it read that framework principal's
logs, or when it has the full ``view_state`` (an operator). A redacted view is not enough.

``grant(task_id, framework_id, principal)``:
- the task is tracked (in the task book) in frameworks the caller may read: those frameworks;
  the agents asked are those the tasks run on;
- else (not tracked: it ended and the master forgot it, its sandbox stays on its agent; or
  tracked in others' frameworks only, which the answer does not tell apart): with
  ``framework_id``, that framework if the registry knows it (NOT_FOUND otherwise) and the caller
  may read it; without, every framework (``ANY``) for a caller who may read them all, else the
  frameworks the registry knows that the caller may read (at most ``MAX_GRANT_FRAMEWORKS``:
  FAILED_PRECONDITION beyond, name the framework; none: PERMISSION_DENIED). Every connected
  agent is asked.

The grant names the caller's principal (the agent counts its streams per principal), the task,
the frameworks and the expiry (``GRANT_TTL``); each agent listed gets its own signature, made with
its log key (``agent_key(state.log_secret, agent_id)``, the key it was given when it registered:
``AgentSession.log_key``). Only connected agents with a port are listed: they hold this master's
key.

Invariants: pure reads of the state (nothing changes, nothing is written); a refusal counts in
``Authority.denied`` like every other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fairshare.log_access import ANY, GRANT_TTL, Grant, agent_key, sign

from master.core import FailedPrecondition, NotFound, PermissionDenied
from master.runtime.sessions import AgentLink
from master.runtime.state import RuntimeState, require_id

__all__ = ["MAX_GRANT_FRAMEWORKS", "LogAgent", "LogGrant", "LogGrants"]

MAX_GRANT_FRAMEWORKS = 64
"""Frameworks a grant for an untracked task may name at most (more: name the framework)."""


@dataclass(frozen=True, slots=True)
class LogAgent:
    """An agent to ask for the task's logs, with its signature of the grant."""

    agent_id: str
    hostname: str
    port: int
    signature: str


@dataclass(frozen=True, slots=True)
class LogGrant:
    """A grant's text, when it expires (wall clock) and the agents that may have the logs."""

    grant: str
    expires_at: float
    agents: tuple[LogAgent, ...]


class LogGrants:
    """Decides log reads and issues their credentials."""

    def __init__(self, state: RuntimeState) -> None:
        self.state = state

    def may_read(self, principal: str | None, owner: str) -> bool:
        """May ``principal`` read the logs of the frameworks of principal ``owner``?"""
        authority = self.state.authority
        if not authority.authenticated or (principal or "") == owner:
            return True
        return authority.acl.decide("view_logs", principal, owner).allowed or self._full(principal)

    def may_read_all(self, principal: str | None) -> bool:
        """May ``principal`` read the logs of every framework?"""
        authority = self.state.authority
        if not authority.authenticated:
            return True
        return authority.acl.decide("view_logs", principal, None).allowed or self._full(principal)

    def _full(self, principal: str | None) -> bool:
        decision = self.state.authority.acl.decide("view_state", principal)
        return decision.allowed and decision.rule.level == "full"

    def _owner(self, framework_id: str) -> str | None:
        """The principal that registered ``framework_id``; None if it is not known."""
        state = self.state
        entry = state.registry.frameworks.get(framework_id)
        if entry is not None:
            return entry.spec.principal
        link = state.frameworks.get(framework_id)
        return link.spec.principal if link is not None else None

    def _refuse(self, message: str) -> PermissionDenied:
        self.state.authority.denied += 1
        return PermissionDenied(message)

    def grant(self, task_id: str, framework_id: str, principal: str | None) -> LogGrant:
        """A grant for ``principal`` to read the logs of ``task_id`` (see the module
        docstring)."""
        require_id(task_id, "task_id")
        if framework_id:
            require_id(framework_id, "framework_id")
        who = f"principal {principal!r}" if principal is not None else "anonymous callers"
        state = self.state
        if framework_id:
            tracked = [e for e in (state.tasks.get(framework_id, task_id),) if e is not None]
        else:
            tracked = [e for e in state.tasks if e.task_id == task_id]
        readable = [
            e for e in tracked if self.may_read(principal, self._owner(e.framework_id) or "")
        ]
        frameworks: tuple[str, ...]
        if readable:
            frameworks = tuple(sorted({e.framework_id for e in readable}))
            links = [state.agents.get(e.agent_id) for e in readable]
        else:  # not tracked, or only another's: as if untracked (the refusal tells no more)
            frameworks = self._untracked(task_id, framework_id, principal, who)
            links = list(state.agents.values())
        expires_at = time.time() + GRANT_TTL
        text = Grant(principal or "", task_id, frameworks, expires_at).encode()
        listed = {link.agent_id: link for link in links if link is not None and _listed(link)}
        agents = tuple(self._signed(link, text) for link in listed.values())
        return LogGrant(text, float(int(expires_at)), agents)

    def _untracked(
        self, task_id: str, framework_id: str, principal: str | None, who: str
    ) -> tuple[str, ...]:
        """The frameworks a grant for an untracked task covers."""
        if framework_id:
            owner = self._owner(framework_id)
            if owner is None:
                raise NotFound(f"framework {framework_id!r} is not known to this master")
            if not self.may_read(principal, owner):
                raise self._refuse(
                    f"{who} may not read the logs of framework {framework_id!r}'s tasks"
                )
            return (framework_id,)
        if self.may_read_all(principal):
            return ANY
        known = sorted(
            fid
            for fid, entry in self.state.registry.frameworks.items()
            if self.may_read(principal, entry.spec.principal)
        )
        if not known:
            raise self._refuse(f"{who} may read the logs of no framework (task {task_id!r})")
        if len(known) > MAX_GRANT_FRAMEWORKS:
            raise FailedPrecondition(
                f"task {task_id!r} is not tracked and {who} may read the logs of"
                f" {len(known)} frameworks: name the task's framework"
            )
        return tuple(known)

    def _signed(self, link: AgentLink, text: str) -> LogAgent:
        key = agent_key(self.state.log_secret, link.agent_id)
        return LogAgent(link.agent_id, link.spec.hostname, link.spec.port, sign(key, text))


def _listed(link: AgentLink) -> bool:
    """A connected agent serving a port: it holds this master's log key."""
    return link.connected and link.spec.port > 0
