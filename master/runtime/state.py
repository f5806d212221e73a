"""``RuntimeState``: the one state object of the master runtime, and its settings.

Everything the master knows lives here: the pure allocation core (``MasterState``), the task
book, the links to frameworks and agents, the agents that departed, the durable registry and the
counters. The call classes (``AgentCalls``, ``FrameworkCalls``, ``OperatorCalls``, ``Recovery``)
and the ``Dispatcher`` are composed around one ``RuntimeState``; none of them keeps state of its
own beyond what they are given here.

Invariants:
- one owner: only code running on the runtime's event loop reads or changes this state, each call
  synchronously (a gRPC handler's whole request, a timer's run), so every call is one atomic step;
- ``now()`` is the loop's monotonic clock, the only time the core sees; wall clock only in values
  that leave the runtime (``wall()`` converts);
- a registry write comes before the change it records (``durably``): a failed write is
  UNAVAILABLE and nothing changed;
- ``authority`` decides who may do what (the ACL, owners, limits per principal) before any
  call changes anything;
- ``log_secret`` is drawn at random for this runtime and never leaves it: each agent gets its
  own key derived from it when it registers (``fairshare.log_access``), to check the log
  credentials this runtime grants (``master.runtime.log_grants``);
- ``frameworks`` holds the registered frameworks (connected or within their failover timeout),
  ``removed_frameworks`` the ids that may never come back; ``agents`` the agents with a live or
  recovering registration, ``departed`` the last ``DEPARTED_MEMORY`` unreachable or gone ones
  (for display only); ``liveness`` the deadlines of the agents in the pool (``agents`` minus the
  recovering ones) and the heartbeat interval they were told; ``awaited`` the recovering agents.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fairshare.log_access import new_secret
from fairshare.logs import log_event
from fairshare.task_states import TaskReason

from master.acl import OPEN, Acl
from master.core import (
    CoreConfig,
    CoreError,
    FailedPrecondition,
    InvalidArgument,
    MasterState,
    NotFound,
)
from master.model import LeaderInfo, TaskDetails
from master.registry import Registry, RegistryWriteError, SqliteRegistry
from master.runtime.authority import Authority, RuntimeLimits
from master.runtime.counters import RuntimeCounters
from master.runtime.events import NO_EVENTS, EventKind, EventSink, announce
from master.runtime.liveness import Liveness, base_interval
from master.runtime.rebalance_settings import RebalanceSettings
from master.runtime.sessions import AgentLink, DepartedAgent, FrameworkLink
from master.runtime.taskbook import TaskBook, TaskEntry
from master.settings import MASTER_DEFAULTS

__all__ = [
    "DEPARTED_MEMORY",
    "Aborted",
    "RuntimeConfig",
    "RuntimeState",
    "Unavailable",
    "require_id",
]

log = logging.getLogger("fairshare.master")

DEPARTED_MEMORY = 1000


class Unavailable(CoreError):
    """The master is draining, or its registry cannot be written: nothing changed, retry."""

    code = "UNAVAILABLE"


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """Settings of the runtime (the daemon builds them from flags, env and TOML by field name,
    ``fairshare.setting_tables.built_from``); a field that is a master setting takes its default
    from ``MASTER_SETTINGS`` (``master.settings``), never a copy of it.

    ``core`` is the allocation core's own configuration, held as is (policy, placement, sample
    size, offer timeout, default refuse filter, seed, validation).
    """

    core: CoreConfig = field(default_factory=CoreConfig)
    allocation_interval: float = MASTER_DEFAULTS["allocation_interval"]
    agent_timeout: float = MASTER_DEFAULTS["agent_timeout"]
    heartbeat_interval: float = MASTER_DEFAULTS["heartbeat_interval"]
    allocation_batch: float = 0.005  # a triggered run waits this long to merge more triggers
    agent_heartbeat_interval: float | None = None  # None: min(5 s, agent_timeout / 3); grows
    # with the cluster either way (``master.runtime.liveness``)
    reregistration_timeout: float = MASTER_DEFAULTS["reregistration_timeout"]  # after a restart
    fault_drop_acks: float = MASTER_DEFAULTS["fault_drop_acks"]  # tests: drop this share of acks
    rebalance: RebalanceSettings | None = None  # None: no rebalancer (``--rebalance`` off)
    version: str = "0.1.0"
    acl: Acl = OPEN  # who may do what (``master.acl``); OPEN: everything, weights capped
    authenticated: bool = False  # every caller has a principal: ownership is enforced
    limits: RuntimeLimits = field(default_factory=RuntimeLimits)
    events: EventSink = NO_EVENTS  # told the noteworthy events (``master.runtime.events``)

    @property
    def agent_heartbeat(self) -> float:
        """How often agents of a small cluster heartbeat (the liveness's base interval)."""
        if self.agent_heartbeat_interval is not None:
            return self.agent_heartbeat_interval
        return base_interval(self.agent_timeout)


class Aborted(CoreError):
    """The call came on a stream a newer one replaced: nothing changed."""

    code = "ABORTED"


MAX_ID = 256
"""Characters of an id at most (the service's ``MAX_NAME``)."""


def require_id(value: str, what: str) -> None:
    """Raise INVALID_ARGUMENT when a required id is empty or longer than ``MAX_ID`` characters."""
    if not value:
        raise InvalidArgument(f"{what} is empty")
    if len(value) > MAX_ID:
        raise InvalidArgument(f"{what} has {len(value)} characters; at most {MAX_ID}")


class RuntimeState:
    """What the master runtime knows; the call classes act on it."""

    def __init__(
        self,
        config: RuntimeConfig | None = None,
        master_id: str | None = None,
        registry: Registry | None = None,
    ) -> None:
        self.config = config or RuntimeConfig()
        self.master_id = master_id or uuid.uuid4().hex
        core_config = dataclasses.replace(self.config.core, offer_id_prefix=self.master_id[:8])
        self.core = MasterState(core_config)
        self.tasks = TaskBook()
        self.tasks.on_end = self._task_ended
        self.frameworks: dict[str, FrameworkLink] = {}
        self.agents: dict[str, AgentLink] = {}
        self.departed: dict[str, DepartedAgent] = {}
        self.removed_frameworks: set[str] = set()
        self.counters = RuntimeCounters()
        self.registry: Registry = registry or SqliteRegistry.in_memory()
        self.registry.on_write = self.counters.registry_write_durations.observe
        self.liveness = Liveness(self.config.agent_timeout, self.config.agent_heartbeat)
        self.authority = Authority(self.config.acl, self.config.authenticated, self.config.limits)
        self.log_secret = new_secret()  # this term's; agents get keys derived from it
        self.recovering = False  # after a restart, until recovered agents are back or time is up
        self.awaited: set[str] = set()  # while recovering: the agents not back yet
        self.draining = False
        self.started_at = time.time()
        self.leader = LeaderInfo("", 0, self.started_at)  # the term this runtime serves
        self._loop: asyncio.AbstractEventLoop | None = None

    def announce(self, kind: EventKind, level: int = logging.INFO, /, **fields: Any) -> None:
        """Log a noteworthy event and tell ``config.events`` (``master.runtime.events``)."""
        announce(log, self.config.events, kind, level, **fields)

    def _task_ended(self, entry: TaskEntry) -> None:
        """A tracked task reached a terminal state: ``task.ended`` (at DEBUG), with what the
        dashboard's completed tasks show."""
        status = entry.status
        details = entry.launch.details
        self.announce(
            EventKind.TASK_ENDED,
            logging.DEBUG,
            framework_id=entry.framework_id,
            task_id=entry.task_id,
            name=entry.launch.name or entry.task_id,
            agent_id=entry.agent_id,
            state=entry.state.value,
            resources=str(entry.launch.resources),
            reason=(
                status.reason.value
                if status is not None and status.reason is not TaskReason.UNSPECIFIED
                else ""
            ),
            message=status.message if status is not None else "",
            exit_code=status.exit_code if status is not None else None,
            source=status.source if status is not None else "MASTER",
            updated_at=status.timestamp if status is not None else None,
            command=isinstance(details, TaskDetails) and details.command is not None,
        )

    # -- clocks -----------------------------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the runtime runs on (bound on first use)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self.authority.bind_clock(self._loop.time)
        return self._loop

    def now(self) -> float:
        """The runtime clock (monotonic seconds) the core is given."""
        return self.loop.time()

    def wall(self, at: float) -> float:
        """Wall-clock time of runtime-clock time ``at``."""
        return time.time() - self.now() + at

    # -- the registry -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def durably(self) -> Iterator[None]:
        """Around a registry write made before a change: a failed write is UNAVAILABLE."""
        try:
            yield
        except RegistryWriteError as error:
            log_event(log, "registry.write.failed", logging.ERROR, error=error)
            raise Unavailable(f"{error}; nothing was changed, retry") from None

    def refuse_if_draining(self) -> None:
        """UNAVAILABLE once the master is shutting down."""
        if self.draining:
            raise Unavailable("the master is shutting down")

    # -- lookups that raise precise errors ---------------------------------------------------------

    def framework(self, framework_id: str) -> FrameworkLink:
        """A registered framework (connected or not); NOT_FOUND otherwise."""
        require_id(framework_id, "framework_id")
        link = self.frameworks.get(framework_id)
        if link is None:
            gone = "was removed" if framework_id in self.removed_frameworks else "is not registered"
            raise NotFound(f"framework {framework_id!r} {gone}")
        return link

    def connected(self, framework_id: str) -> FrameworkLink:
        """A framework with an open Subscribe stream; FAILED_PRECONDITION if it is away."""
        link = self.framework(framework_id)
        if link.channel is None:
            raise FailedPrecondition(
                f"framework {framework_id!r} is not subscribed: open Subscribe first"
            )
        return link
