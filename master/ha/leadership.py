"""``Leadership``: which runtime leads in this master process, if any (docs/architecture.md §5).

A *term* (``LeaderTerm``) is one run as leader: a registry read afresh, a new ``MasterRuntime``
recovered from it (agents reregister, frameworks resubscribe: ``Recovery``), its servicers
behind the ``LeaderGate`` and its timers. Nothing is carried from one term to the next.

- With the SQLite registry (one master) there is one term, from start to shutdown, epoch 0.
- With ``--registry etcd://...`` the ``Elector`` (on the etcd thread) campaigns; when it wins a
  term starts with the registry read from etcd and fenced by the term's epoch; when it loses
  (lease gone, etcd unreachable past the lease, a fenced write refused, or the lease simply
  running out: the watchdog and every gated call check ``valid``), the gate refuses calls at
  once, the term's streams end UNAVAILABLE ("no longer the leader") and its runtime stops; the
  process stays up as a follower that serves health and names the leader.

Invariants: transitions (start and end of a term) run one at a time, in the order they were
asked for, on the runtime's loop; a term ends before another starts; the gate forwards calls
only while a term runs and ``valid()`` holds (for etcd: ``time.monotonic()`` is before the
elector's ``valid_until``, which ends before etcd can elect anyone else); a registry that cannot
be used (``RegistryError``) ends the process with exit 1 after giving up leadership.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fairshare.etcd import LeaderRecord
from fairshare.etcd_security import PLAIN_ETCD, EtcdSecurity
from fairshare.logs import log_event
from fairshare.master_target import EtcdTarget

from master.ha.election import ElectionCallbacks, Elector
from master.ha.etcd_thread import EtcdThread
from master.metrics import LeadershipSample
from master.model import LeaderInfo, StreamEnd
from master.registry import Registry, RegistryError
from master.registry.etcd_store import EtcdRegistry
from master.runtime import MasterRuntime, RuntimeConfig
from master.runtime.events import EventKind, announce
from master.runtime.views import ClusterSnapshot, PoolSummary
from master.service.agent import AgentServicer
from master.service.leader_gate import LeaderGate, Servicers
from master.service.operator import OperatorServicer
from master.service.scheduler import SchedulerServicer

__all__ = ["LeaderTerm", "Leadership"]

log = logging.getLogger("fairshare.master")

WATCHDOG_PERIOD = 0.1
NO_LONGER_LEADER = StreamEnd("UNAVAILABLE", "this master is no longer the leader")


@dataclass
class LeaderTerm:
    """One run as leader: its registry, runtime and servicers."""

    info: LeaderInfo
    registry: Registry
    runtime: MasterRuntime
    servicers: Servicers

    @classmethod
    async def start(cls, config: RuntimeConfig, registry: Registry, info: LeaderInfo) -> LeaderTerm:
        """Recover a fresh runtime from ``registry`` and start its timers."""
        runtime = MasterRuntime(config, registry=registry)
        runtime.state.leader = info
        runtime.recovery.recover()
        await runtime.start()
        servicers = Servicers(
            SchedulerServicer(runtime.frameworks),
            AgentServicer(runtime.agents),
            OperatorServicer(runtime.operator),
        )
        return cls(info, registry, runtime, servicers)

    async def stop(self, end: StreamEnd) -> None:
        """End every stream with ``end``, stop the runtime, close the registry."""
        self.runtime.drain(end)
        await self.runtime.stop()
        self.registry.close()


class Leadership:
    """The current term (or none), the leader known to this follower, and the transitions."""

    def __init__(self, config: RuntimeConfig, on_fatal: Callable[[str], None]) -> None:
        self.config = config
        self.gate = LeaderGate(self.valid, self.expired)
        self.address = ""  # HOST:PORT clients reach this master at (set once bound)
        self.on_fatal = on_fatal
        self.term: LeaderTerm | None = None
        self.leader: LeaderRecord | None = None  # the leader seen, while following
        self.terms_won = 0
        self._transitions = asyncio.Lock()
        self._etcd: EtcdThread | None = None
        self._elector: Elector | None = None
        self._elector_run: object = None
        self._watchdog: asyncio.Task[None] | None = None
        self._etcd_target: EtcdTarget | None = None
        self._work_dir = Path(".")
        self._write_timeout = 2.0
        self._registry_key: bytes | None = None

    # -- what the process shows -----------------------------------------------------------------

    @property
    def leader_address(self) -> str | None:
        """The leader's HOST:PORT: this master's while it leads, else the one seen."""
        if self.term is not None:
            return self.term.info.address
        return self.leader.address if self.leader is not None else None

    def snapshot(self) -> ClusterSnapshot:
        """The leading runtime's snapshot (callers check ``follower_view`` first)."""
        term = self.term
        if term is None:
            raise RuntimeError("this master does not lead: it has no cluster state")
        return term.runtime.operator.snapshot()

    def view(self, principal: str | None = None) -> ClusterSnapshot:
        """What ``principal`` may see of the leading runtime's cluster (``OperatorCalls.view``:
        PERMISSION_DENIED for nothing, redacted when its rule says so)."""
        term = self.term
        if term is None:
            raise RuntimeError("this master does not lead: it has no cluster state")
        return term.runtime.operator.view(principal)

    def summary_or_none(self) -> PoolSummary | None:
        """The pool's summary while leading (``ShareHistory``), None otherwise."""
        return self.term.runtime.operator.pool_summary() if self.term is not None else None

    def follower_view(self) -> dict[str, str | None] | None:
        """None while leading; else the leader's gRPC address and dashboard (if known)."""
        if self.term is not None:
            return None
        leader = self.leader
        if leader is None:
            return {"leader": None, "dashboard": None}
        dashboard = f"http://{leader.http}/" if leader.http else None
        return {"leader": leader.address, "dashboard": dashboard}

    def sample(self) -> LeadershipSample:
        """For the metrics."""
        term = self.term
        epoch = term.info.epoch if term is not None else 0
        return LeadershipSample(term is not None, epoch, self.terms_won)

    # -- one master: SQLite --------------------------------------------------------------------

    async def lead_alone(self, registry: Registry) -> None:
        """Start the one term of a master with an embedded registry."""
        info = LeaderInfo(self.address, 0, time.time())
        self.term = await LeaderTerm.start(self.config, registry, info)
        self.gate.lead(self.term.servicers)
        self.terms_won += 1

    # -- HA masters: etcd ----------------------------------------------------------------------

    def campaign(
        self,
        target: EtcdTarget,
        me: LeaderRecord,
        ttl: float,
        work_dir: Path,
        security: EtcdSecurity = PLAIN_ETCD,
        registry_key: bytes | None = None,
    ) -> None:
        """Start the election on the etcd thread (and the lease watchdog on this loop); the
        registry's rows are signed with ``registry_key`` when given."""
        loop = asyncio.get_running_loop()
        self._etcd_target, self._work_dir = target, work_dir
        self._registry_key = registry_key
        self._write_timeout = max(1.0, ttl / 2)
        self._etcd = EtcdThread(target, timeout=min(1.0, ttl / 4), security=security)
        callbacks = ElectionCallbacks(
            loop.call_soon_threadsafe, self._elected, self._deposed, self._leader_seen
        )
        self._elector = Elector(self._etcd.client, me, ttl, callbacks)
        self.gate.hold = ttl  # a call during an election waits for its outcome
        self._elector_run = self._etcd.submit(self._elector.run())
        self._watchdog = loop.create_task(self._watch_lease())
        log_event(log, "election.started", etcd=str(target), ttl=f"{ttl:g}")

    def valid(self) -> bool:
        """This master may act as leader now."""
        if self._elector is None:
            return self.term is not None
        return time.monotonic() < self._elector.valid_until

    def expired(self) -> None:
        """The lease ran out while a term runs: end it now (idempotent)."""
        self._step_down("the leadership lease ran out")

    def _elected(self, record: LeaderRecord) -> None:
        asyncio.get_running_loop().create_task(self._begin(record))

    def _deposed(self, reason: str) -> None:
        self.gate.follow(None)
        asyncio.get_running_loop().create_task(self._end(reason))

    def _leader_seen(self, record: LeaderRecord | None) -> None:
        self.leader = record
        if self.term is None:
            self.gate.follow(record.address if record is not None else None)
            if record is not None:
                log_event(log, "leader.seen", leader=record.address, epoch=record.epoch)

    def _step_down(self, reason: str) -> None:
        """Stop acting as leader at once and tell the elector (fenced write, lapsed lease)."""
        if self.term is None and not self.gate.leading:
            return
        self.gate.follow(None)
        elector, etcd = self._elector, self._etcd
        if elector is not None and etcd is not None:
            elector.valid_until = 0.0
            etcd.submit(elector.resign(reason))
        asyncio.get_running_loop().create_task(self._end(reason))

    def _fenced(self, epoch: int, reason: str) -> None:
        """A registry write of term ``epoch`` was fenced: step down if that term still runs
        (a write of an ended term's runtime must not end a later term)."""
        term = self.term
        if term is not None and term.info.epoch == epoch:
            self._step_down(reason)

    async def _begin(self, record: LeaderRecord) -> None:
        async with self._transitions:
            if self.term is not None or not self.valid():
                return  # a transition still pending took over, or the lease already lapsed
            assert self._etcd is not None and self._etcd_target is not None
            registry = EtcdRegistry(
                self._etcd_target,
                self._etcd.client,
                self._etcd.run,
                record.epoch,
                self._write_timeout,
                on_fenced=functools.partial(self._fenced, record.epoch),
                key=self._registry_key,
            )
            try:
                registry.load(self._work_dir)
            except RegistryError as error:
                self.gate.follow(None)
                self.on_fatal(str(error))
                return
            info = LeaderInfo(record.address, record.epoch, record.elected_at)
            self.term = await LeaderTerm.start(self.config, registry, info)
            if not self.valid():  # lost while recovering: the end is queued behind us
                return
            self.gate.lead(self.term.servicers)
            self.terms_won += 1
            announce(
                log,
                self.config.events,
                EventKind.LEADER_TERM_STARTED,
                epoch=record.epoch,
                agents=len(registry.agents),
                frameworks=len(registry.frameworks),
            )

    async def _end(self, reason: str) -> None:
        async with self._transitions:
            term, self.term = self.term, None
            if term is None:
                return
            self.gate.follow(self.leader.address if self.leader else None)
            await term.stop(NO_LONGER_LEADER)
            announce(
                log,
                self.config.events,
                EventKind.LEADER_TERM_ENDED,
                logging.WARNING,
                epoch=term.info.epoch,
                reason=reason,
            )

    async def _watch_lease(self) -> None:
        while True:
            await asyncio.sleep(WATCHDOG_PERIOD)
            if self.term is not None and not self.valid():
                self.expired()

    # -- shutdown ----------------------------------------------------------------------------------

    def drain(self) -> None:
        """SIGTERM: refuse calls, end the term's streams (UNAVAILABLE), stop offering."""
        self.gate.hold = 0.0
        self.gate.follow(None)
        if self.term is not None:
            self.term.runtime.drain()

    async def stop(self) -> None:
        """End the term, give up the leadership key (another master takes over at once) and
        stop the etcd thread."""
        if self._watchdog is not None:
            self._watchdog.cancel()
        async with self._transitions:
            term, self.term = self.term, None
            if term is not None:
                await term.stop(StreamEnd("UNAVAILABLE", "the master is shutting down"))
        if self._etcd is not None and self._elector is not None:
            future = self._etcd.submit(self._elector.resign_now())
            with contextlib.suppress(Exception):  # best effort: the lease ends by itself
                await asyncio.wait_for(asyncio.wrap_future(future), self._write_timeout)
            self._etcd.stop()
