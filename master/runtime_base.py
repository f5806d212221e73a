"""``RuntimeBase``: the state the master runtime owns and the steps every call shares.

Split from ``master.runtime`` to keep files small; ``MasterRuntime`` is the only class built
from it (``FrameworkCalls`` and ``AgentCalls`` add the request handlers). See ``master.runtime``
for the invariants; the ones kept here:
- ``now()`` is the loop's monotonic clock, the only time the core sees; wall clock only in values
  that leave the runtime;
- core messages become I/O only through ``_dispatch`` (offers, rescinds, kills) or the callers
  that asked for them (launches, status changes with a reason);
- at most one allocation run is pending; none is scheduled once draining.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from master.core import (
    CoreConfig,
    CoreError,
    FailedPrecondition,
    InvalidArgument,
    KillTask,
    LaunchTasks,
    MasterState,
    Message,
    NotFound,
    RescindOffer,
    SendOffers,
    TaskStatusChange,
)
from master.durations import DurationHistogram
from master.model import (
    FrameworkEvent,
    KillCommand,
    OffersEvent,
    RescindEvent,
    StatusUpdate,
    UpdateEvent,
)
from master.registry import Registry, RegistryWriteError
from master.sessions import AgentLink, Channel, FrameworkLink
from master.taskbook import TaskBook
from master.views import DepartedAgent

__all__ = [
    "DEPARTED_MEMORY",
    "UNLIMITED_TASKS",
    "RuntimeBase",
    "RuntimeConfig",
    "RuntimeCounters",
    "SubscribeResult",
    "Unavailable",
    "Unimplemented",
    "require_id",
]

log = logging.getLogger("fairshare.master")

UNLIMITED_TASKS = 2**62
"""The core's ``wanted`` for a demand without ``max_tasks`` (unlimited)."""
DEPARTED_MEMORY = 1000
NOT_FORWARDED_WITHOUT_AWARENESS = frozenset({"UNREACHABLE", "GONE", "DROPPED", "UNKNOWN"})


class Unavailable(CoreError):
    """The master is draining."""

    code = "UNAVAILABLE"


class Unimplemented(CoreError):
    """A request this master does not support yet."""

    code = "UNIMPLEMENTED"


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """Settings of the runtime (the daemon builds them from flags, env and TOML)."""

    policy: str = "drf"
    placement: str = "best-fit"
    allocation_interval: float = 1.0
    agent_timeout: float = 15.0
    offer_timeout: float | None = None
    heartbeat_interval: float = 5.0
    allocation_batch: float = 0.005  # a triggered run waits this long to merge more triggers
    agent_heartbeat_interval: float | None = None  # None: min(5 s, agent_timeout / 3)
    default_refuse_seconds: float = 5.0
    reregistration_timeout: float = 20.0  # after a restart: how long agents have to reregister
    fault_drop_acks: float = 0.0  # fault injection (tests): drop this share of acks to agents
    validate: bool = False
    seed: int = 0
    version: str = "0.1.0"

    @property
    def agent_heartbeat(self) -> float:
        """How often agents must call Heartbeat."""
        if self.agent_heartbeat_interval is not None:
            return self.agent_heartbeat_interval
        return min(5.0, self.agent_timeout / 3)


@dataclass(slots=True)
class RuntimeCounters:
    """Monotonic counters for logs and metrics (``master.metrics``), incremented on the loop.

    ``status_updates`` counts every agent update received; ``status_forwarded`` the updates
    forwarded to their framework the first time, ``status_retried`` those forwarded again (the
    agent retried a uuid still pending); ``acknowledgements`` the framework acknowledgements
    passed back to agents.
    """

    allocation_runs: int = 0
    allocation_seconds: float = 0.0
    allocation_durations: DurationHistogram = field(default_factory=DurationHistogram)
    registry_write_durations: DurationHistogram = field(default_factory=DurationHistogram)
    offers_sent: int = 0
    offers_accepted: int = 0
    offers_declined: int = 0
    offers_rescinded: int = 0
    status_updates: int = 0
    status_forwarded: int = 0
    status_retried: int = 0
    acknowledgements: int = 0

    def copy(self) -> RuntimeCounters:
        """An independent copy (take it on the runtime's loop)."""
        return dataclasses.replace(
            self,
            allocation_durations=self.allocation_durations.copy(),
            registry_write_durations=self.registry_write_durations.copy(),
        )


@dataclass(frozen=True, slots=True)
class SubscribeResult:
    """What the Subscribe adapter sends first, and the stream it then drains."""

    framework_id: str
    master_id: str
    heartbeat_interval: float
    resubscribed: bool
    weight: float
    channel: Channel[FrameworkEvent] = field(repr=False)


def require_id(value: str, what: str) -> None:
    """Raise INVALID_ARGUMENT when a required id is empty."""
    if not value:
        raise InvalidArgument(f"{what} is empty")


class RuntimeBase:
    """State of the master runtime and the helpers its request handlers share."""

    def __init__(
        self,
        config: RuntimeConfig | None = None,
        master_id: str | None = None,
        registry: Registry | None = None,
    ) -> None:
        self.config = config or RuntimeConfig()
        self.master_id = master_id or uuid.uuid4().hex
        self.core = MasterState(
            CoreConfig(
                policy=self.config.policy,
                placement=self.config.placement,
                seed=self.config.seed,
                default_refuse_seconds=self.config.default_refuse_seconds,
                offer_timeout=self.config.offer_timeout,
                offer_id_prefix=self.master_id[:8],
                validate=self.config.validate,
            )
        )
        self.tasks = TaskBook()
        self.frameworks: dict[str, FrameworkLink] = {}
        self.agents: dict[str, AgentLink] = {}
        self.departed: dict[str, DepartedAgent] = {}
        self.removed_frameworks: set[str] = set()
        self.counters = RuntimeCounters()
        self.registry = registry or Registry.in_memory()
        self.registry.on_write = self.counters.registry_write_durations.observe
        self.recovering = False  # after a restart, until recovered agents are back or time is up
        self._faults = random.Random(self.config.seed)
        self.started_at = time.time()
        self.draining = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timers: list[asyncio.Task[None]] = []
        self._allocation_pending = False

    def now(self) -> float:
        """The runtime clock (monotonic seconds) the core is given."""
        return self._event_loop().time()

    def wall(self, at: float) -> float:
        """Wall-clock time of runtime-clock time ``at``."""
        return time.time() - self.now() + at

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    # -- allocation -------------------------------------------------------------------------------

    def request_allocation(self) -> None:
        """Schedule one allocation run soon, unless one is pending already."""
        if self._allocation_pending or self.draining:
            return
        self._allocation_pending = True
        delay = self.config.allocation_batch
        if delay > 0:
            self._event_loop().call_later(delay, self._allocate)
        else:
            self._event_loop().call_soon(self._allocate)

    def _allocate(self) -> None:
        self._allocation_pending = False
        if self.draining or self.recovering:
            return  # recovery ends with a run that sees every agent that came back
        started = time.perf_counter()
        now = self.now()
        self._dispatch(self.core.handle_tick(now))
        messages = self.core.handle_allocate(now)
        elapsed = time.perf_counter() - started
        self.counters.allocation_runs += 1
        self.counters.allocation_seconds += elapsed
        self.counters.allocation_durations.observe(elapsed)
        self._dispatch(messages)
        timeout = self.config.offer_timeout
        if messages and timeout is not None:
            self._event_loop().call_later(timeout + 0.001, self.request_allocation)

    def _dispatch(self, messages: Sequence[Message]) -> None:
        for message in messages:
            if isinstance(message, SendOffers):
                self._send_offers(message)
            elif isinstance(message, RescindOffer):
                self.counters.offers_rescinded += 1
                link = self.frameworks.get(message.framework_id)
                if link is not None:
                    link.send(RescindEvent(message.offer_id, message.reason))
            elif isinstance(message, KillTask):
                agent = self.agents.get(message.agent_id)
                if agent is not None:
                    agent.send(KillCommand(message.framework_id, message.task_id))
            elif isinstance(message, TaskStatusChange):
                self._master_update(message, "", message.message)
            elif isinstance(message, LaunchTasks):  # only handle_accept makes these
                raise AssertionError("LaunchTasks outside accept")

    def _send_offers(self, message: SendOffers) -> None:
        link = self.frameworks.get(message.framework_id)
        if link is None:
            return
        expires = None
        if self.config.offer_timeout is not None and message.offers:
            expires = self.wall(message.offers[0].created_at + self.config.offer_timeout)
        self.counters.offers_sent += len(message.offers)
        link.send(OffersEvent(message.offers, expires))

    # -- the registry -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _durably(self) -> Iterator[None]:
        """Around a registry write made before a change: a failed write is UNAVAILABLE."""
        try:
            yield
        except RegistryWriteError as error:
            log.error("registry write failed: %s", error)
            raise Unavailable(f"{error}; nothing was changed, retry") from None

    def _drop_ack(self) -> bool:
        """Fault injection: True when this acknowledgement to an agent must be dropped."""
        rate = self.config.fault_drop_acks
        dropped = rate > 0 and self._faults.random() < rate
        if dropped:
            log.info("fault.ack.dropped (FAIRSHARE_MASTER_FAULT_DROP_ACKS=%g)", rate)
        return dropped

    # -- status updates to frameworks -------------------------------------------------------------

    def _for_framework(self, link: FrameworkLink, status: StatusUpdate) -> StatusUpdate:
        """What the framework is told: partition states become LOST unless it is aware."""
        if (
            status.state in NOT_FORWARDED_WITHOUT_AWARENESS
            and "PARTITION_AWARE" not in link.spec.capabilities
        ):
            return dataclasses.replace(status, state="LOST")
        return status

    def _master_update(self, change: TaskStatusChange, reason: str, message: str) -> None:
        """Record and forward a state the master decided (no uuid, never acknowledged)."""
        status = StatusUpdate(
            change.task_id,
            change.agent_id,
            change.state.value,
            reason,
            message,
            time.time(),
        )
        self.tasks.set_state(change.framework_id, change.task_id, status)
        link = self.frameworks.get(change.framework_id)
        if link is not None:
            link.send(UpdateEvent(self._for_framework(link, status)))

    # -- frameworks -------------------------------------------------------------------------------

    def _framework(self, framework_id: str) -> FrameworkLink:
        require_id(framework_id, "framework_id")
        link = self.frameworks.get(framework_id)
        if link is None:
            gone = "was removed" if framework_id in self.removed_frameworks else "is not registered"
            raise NotFound(f"framework {framework_id!r} {gone}")
        return link

    def _connected(self, framework_id: str) -> FrameworkLink:
        link = self._framework(framework_id)
        if link.channel is None:
            raise FailedPrecondition(
                f"framework {framework_id!r} is not subscribed: open Subscribe first"
            )
        return link
