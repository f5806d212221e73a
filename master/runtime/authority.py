"""``Authority``: who may do what in the runtime (docs/architecture.md §6):
the ACL, ownership, and the
limits per principal.

The gRPC adapters hand every runtime call the caller's principal (``None``: anonymous, when
authentication is off); the call classes ask the authority before they change anything:

- ``allow(action, principal, target)``: the ACL's decision (``master.acl``); PERMISSION_DENIED
  when it refuses. The HTTP port (``master.web.routes``) asks it too, ``view_state`` once per
  request, so ``denied`` counts the refusals of both ports alike (one count, no label per port);
- ``allow_task_user(principal, task_id, user)``: the ACL's ``run_tasks`` for a command task
  with a named OS user (PERMISSION_DENIED naming the task and the user; ``root`` only by a rule
  naming it); a task without a user runs as the agent's ``--task-user`` and is not checked;
- ``check_owner(principal, owner, what)``: a framework acts on its own framework id only, an
  agent on its own registration only (the Kubernetes node authorizer's rule); the owner is the
  principal that registered it, kept in the registry. With authentication off there are no
  owners (everyone is anonymous) and the check passes;
- ``admit(principal, kind, registered, most)``: a new framework or agent, within its
  principal's count (``most``) and registration rate (a token bucket per principal:
  ``RuntimeLimits.registration_rate`` per second after a burst of ``registration_burst``);
  RESOURCE_EXHAUSTED otherwise (called once every other check of the registration passed);
- ``check_agent_size(resources, owner, others, known_names)``: no agent reports more of a
  resource than ``RuntimeLimits.max_agent_resources``, and no principal's agents together more
  than ``max_principal_resources`` (INVALID_ARGUMENT naming the resource and the flag: a fake
  agent with 4e15 cpus, or fifty at the per-agent cap, would shrink every framework's cpu share
  to nothing and bend DRF's order); every resource name is capped (``master.core.
  resource_caps``); an agent that would bring the cluster past ``max_resource_names`` distinct
  names is RESOURCE_EXHAUSTED.

Invariants: pure bookkeeping on the runtime's loop (no I/O); the rate buckets of at most
``MAX_BUCKETS`` principals are kept (least recently used forgotten: a forgotten principal
starts with a full burst again, which only ever errs towards admitting).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Final

from fairshare.resources import ResourceVector

from master.acl import OPEN, Acl, Rule
from master.core.errors import PermissionDenied, ResourceExhausted
from master.core.resource_caps import (
    DEFAULT_MAX_AGENT_RESOURCES,
    ResourceCap,
    check_agent,
    check_names,
    check_principal,
)
from master.settings.limits import LIMIT_DEFAULTS

__all__ = ["DEFAULT_MAX_AGENT_RESOURCES", "MAX_BUCKETS", "Authority", "RuntimeLimits"]

MAX_BUCKETS: Final = 4096


@dataclass(frozen=True, slots=True)
class RuntimeLimits:
    """Limits per principal and the registry's bounds on what left the cluster; the defaults are
    ``LIMIT_SETTINGS``'s (``master.settings.limits``), the one declaration of each limit."""

    max_frameworks_per_principal: int = LIMIT_DEFAULTS["max_frameworks_per_principal"]
    max_agents_per_principal: int = LIMIT_DEFAULTS["max_agents_per_principal"]
    registration_rate: float = LIMIT_DEFAULTS["registration_rate"]
    registration_burst: int = LIMIT_DEFAULTS["registration_burst"]
    registry_max_agent_age: float = LIMIT_DEFAULTS["registry_max_agent_age"]
    registry_max_agent_count: int = LIMIT_DEFAULTS["registry_max_agent_count"]
    registry_max_framework_age: float = LIMIT_DEFAULTS["registry_max_framework_age"]
    registry_max_framework_count: int = LIMIT_DEFAULTS["registry_max_framework_count"]
    max_agent_resources: ResourceCap = LIMIT_DEFAULTS["max_agent_resources"]
    max_principal_resources: ResourceCap = LIMIT_DEFAULTS["max_principal_resources"]
    max_resource_names: int = LIMIT_DEFAULTS["max_resource_names"]


class Authority:
    """The ACL, the ownership rule and the registration limits of one master."""

    def __init__(
        self,
        acl: Acl = OPEN,
        authenticated: bool = False,
        limits: RuntimeLimits | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.acl = acl
        self.authenticated = authenticated
        self.limits = limits or RuntimeLimits()
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self.denied = 0
        self.exhausted = 0

    def bind_clock(self, clock: Callable[[], float]) -> None:
        """Use ``clock`` (the runtime's monotonic clock) for the rate buckets."""
        self._clock = clock

    def allow(self, action: str, principal: str | None, target: str | None = None) -> Rule:
        """The rule allowing ``principal`` to do ``action`` on ``target``; PERMISSION_DENIED if
        the ACL refuses."""
        decision = self.acl.decide(action, principal, target)
        if not decision.allowed:
            self.denied += 1
            raise PermissionDenied(decision.why)
        return decision.rule

    def allow_task_user(self, principal: str | None, task_id: str, user: str) -> None:
        """PERMISSION_DENIED (naming the task and the user) unless the ACL's ``run_tasks``
        lets ``principal`` run a task as ``user``; an empty user (the agent's ``--task-user``)
        is not checked."""
        if not user:
            return
        decision = self.acl.decide("run_tasks", principal, user)
        if not decision.allowed:
            self.denied += 1
            raise PermissionDenied(f"task {task_id!r} may not run as user {user!r}: {decision.why}")

    def owner_of(self, principal: str | None) -> str:
        """The owner a new framework or agent of ``principal`` gets (``""`` when anonymous)."""
        return (principal or "") if self.authenticated else ""

    def check_owner(self, principal: str | None, owner: str, what: str) -> None:
        """PERMISSION_DENIED unless ``principal`` owns ``what`` (always passes without
        authentication)."""
        if self.authenticated and (principal or "") != owner:
            self.denied += 1
            raise PermissionDenied(f"{what} was registered by another principal")

    def check_agent_size(
        self,
        resources: ResourceVector,
        owner: str = "",
        others: Mapping[str, int] | None = None,
        known_names: Collection[str] = (),
    ) -> None:
        """INVALID_ARGUMENT naming the first resource above ``max_agent_resources``, or that
        would bring ``owner``'s agents (``others``: what its other agents report, in millis)
        above ``max_principal_resources``; RESOURCE_EXHAUSTED when its names not among
        ``known_names`` would make more than ``max_resource_names``."""
        limits = self.limits
        check_agent(resources, limits.max_agent_resources)
        check_principal(owner, others or {}, resources, limits.max_principal_resources)
        try:
            check_names(resources, known_names, limits.max_resource_names)
        except ResourceExhausted:
            self.exhausted += 1
            raise

    def admit(self, principal: str | None, kind: str, registered: int, most: int) -> None:
        """Charge one registration of ``kind`` to ``principal``, who has ``registered`` of them
        (at most ``most``); RESOURCE_EXHAUSTED when over the count or the rate."""
        key = principal or ""
        who = f"principal {key!r}" if key else "anonymous callers"
        if registered >= most:
            self.exhausted += 1
            raise ResourceExhausted(f"{who} registered {registered} {kind}s, the most allowed")
        now = self._clock() if self._clock is not None else 0.0
        limits = self.limits
        tokens, at = self._buckets.pop(key, (float(limits.registration_burst), now))
        burst, rate = float(limits.registration_burst), limits.registration_rate
        tokens = min(burst, tokens + (now - at) * rate)
        if tokens < 1.0:
            self._buckets[key] = (tokens, now)
            self.exhausted += 1
            wait = (1.0 - tokens) / limits.registration_rate
            raise ResourceExhausted(
                f"{who} registers {kind}s faster than {limits.registration_rate:g}/s: retry in"
                f" {wait:.2f}s"
            )
        self._buckets[key] = (tokens - 1.0, now)
        while len(self._buckets) > MAX_BUCKETS:
            self._buckets.popitem(last=False)
