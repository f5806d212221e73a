"""``Elector``: a master's campaign for leadership in etcd (docs/architecture.md §5),
run on the etcd
thread (``master.ha.etcd_thread``).

The leader holds the key ``<prefix>/leader`` (``fairshare.etcd.leader_key``) under a lease of
``ttl`` seconds; its value is the ``LeaderRecord`` (gRPC and HTTP addresses, master id, when it
was elected), and its create revision is the term's *epoch*: etcd revisions only grow, so every
term has a higher epoch than the ones before. A follower holds no lease: it reads the key every
``poll`` seconds and, when it is gone, grants itself a lease and campaigns with a
create-if-absent transaction; the loser revokes its lease. The leader refreshes its lease every
``ttl / 4`` seconds and checks that the key is still its own.

Invariants:
- ``valid_until`` (``time.monotonic()``) is in the future only while this master leads: it is
  ``t + ttl * VALID_SHARE`` for ``t`` the time the last successful lease grant or refresh was
  *sent*; etcd ends the lease no earlier than ``ttl`` after it *received* that request, so this
  master stops acting as leader (``master.ha.leadership`` checks ``valid_until`` on every call
  and by a watchdog) before etcd can let another master win;
- the leader steps down (``deposed``) as soon as it learns it lost: the lease is gone, the key
  is not its own, it could not refresh the lease before ``valid_until``, or the runtime's side
  saw a fenced registry write fail or the lease lapse (``resign``); it then revokes its lease
  (best effort) and follows; its ``leader.deposed`` log line says (``acted_until``, wall clock)
  the latest time it may have acted as leader;
- callbacks (``elected``, ``deposed``, ``leader``) reach the runtime's loop through ``post``,
  in the order they happened; ``leader`` only when the leader seen changes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final

from fairshare.etcd import EtcdClient, EtcdUnavailable, LeaderRecord, leader_key
from fairshare.logs import log_event

__all__ = ["VALID_SHARE", "ElectionCallbacks", "Elector"]

log = logging.getLogger("fairshare.master")

VALID_SHARE: Final = 0.8
"""The share of the lease's TTL a master leads for after the request that granted or refreshed
it was sent (the rest is margin for etcd's clock and its lease checks)."""


@dataclass(frozen=True, slots=True)
class ElectionCallbacks:
    """What the elector tells the runtime's loop (each called there, through ``post``)."""

    post: Callable[..., Any]  # loop.call_soon_threadsafe of the runtime's loop
    elected: Callable[[LeaderRecord], None]
    deposed: Callable[[str], None]
    leader: Callable[[LeaderRecord | None], None]


class Elector:
    """One master's campaign; ``run`` on the etcd thread's loop until cancelled."""

    def __init__(
        self,
        client: EtcdClient,
        me: LeaderRecord,
        ttl: float,
        callbacks: ElectionCallbacks,
    ) -> None:
        self.client = client
        self.me = me
        self.ttl = ttl
        self.poll = min(0.5, max(0.05, ttl / 10))
        self.callbacks = callbacks
        self.key = leader_key(client.target)
        self.valid_until = 0.0
        self.acted_until = 0.0  # the last valid_until granted (monotonic), for the logs
        self._lease: int | None = None
        self._term: LeaderRecord | None = None
        self._seen: LeaderRecord | None = None

    @property
    def leading(self) -> bool:
        """This master holds the key (as far as it knows)."""
        return self._term is not None

    async def resign(self, reason: str) -> None:
        """Step down now (run on the etcd loop: ``EtcdThread.submit``)."""
        await self._step_down(reason)

    async def run(self) -> None:
        """Follow, campaign and lead until cancelled."""
        while True:
            try:
                if self._term is None:
                    await self._follow()
                else:
                    await self._lead()
            except Exception as error:  # EtcdUnavailable, or etcd refused: try again soon
                level = logging.WARNING if isinstance(error, EtcdUnavailable) else logging.ERROR
                log_event(log, "etcd.call.failed", level, error=error, leading=self.leading)
                if self._term is not None and time.monotonic() >= self.valid_until:
                    await self._step_down("etcd did not answer within the lease")
                await asyncio.sleep(self.poll)

    # -- following and campaigning ----------------------------------------------------------------

    async def _follow(self) -> None:
        found = await self.client.call(lambda etcd: etcd.get(self.key))
        if found is None:
            await self._campaign()
            return
        self._saw(_record(found))
        await asyncio.sleep(self.poll)

    def _saw(self, record: LeaderRecord | None) -> None:
        if record != self._seen:
            self._seen = record
            self.callbacks.post(self.callbacks.leader, record)

    async def _campaign(self) -> None:
        sent = time.monotonic()
        lease = await self.client.call(lambda etcd: etcd.lease(_seconds(self.ttl)))
        self._lease = int(lease.id)
        candidate = replace(self.me, elected_at=time.time())
        value = candidate.to_json()

        async def create(etcd: Any) -> None:
            absent = etcd.transactions.create(self.key) == 0
            put = etcd.transactions.put(self.key, value, lease=self._lease)
            await etcd.transaction(compare=[absent], success=[put], failure=[])

        await self.client.call(create)
        found = await self.client.call(lambda etcd: etcd.get(self.key))
        if found is not None and int(found.lease) == self._lease:  # won (maybe on a retry)
            self.valid_until = self.acted_until = sent + self.ttl * VALID_SHARE
            self._term = replace(candidate, epoch=int(found.create_revision))
            self._seen = self._term
            log_event(log, "leader.elected", epoch=self._term.epoch, ttl=f"{self.ttl:g}")
            self.callbacks.post(self.callbacks.elected, self._term)
            return
        await self._revoke()
        self._saw(None if found is None else _record(found))

    # -- leading ------------------------------------------------------------------------------

    async def _lead(self) -> None:
        await asyncio.sleep(self.ttl / 4)
        term, lease = self._term, self._lease
        sent = time.monotonic()
        # A slow etcd (a loaded machine) may answer late but still within the lease: wait for
        # the answer as long as this master leads anyway, not just the client's usual timeout.
        budget = max(self.client.timeout, self.valid_until - sent)
        reply = await self.client.call(lambda etcd: etcd.refresh_lease(lease), budget)
        if term is not self._term or term is None:
            return  # stepped down meanwhile
        if reply is None or int(reply.TTL) <= 0:
            await self._step_down("the lease ended")
            return
        budget = max(self.client.timeout, self.valid_until - time.monotonic())
        found = await self.client.call(lambda etcd: etcd.get(self.key), budget)
        if term is not self._term:
            return
        if found is None or int(found.create_revision) != term.epoch:
            await self._step_down("the leader key is no longer this master's")
            return
        if sent >= self.valid_until:
            await self._step_down("the lease was not refreshed in time")
            return
        self.valid_until = self.acted_until = sent + self.ttl * VALID_SHARE

    async def _step_down(self, reason: str) -> None:
        if self._term is None:
            return
        acted_until = min(self.acted_until, time.monotonic())  # it acted no longer than this
        self.valid_until = 0.0
        epoch = self._term.epoch
        self._term, self._seen = None, None
        wall = time.time() - (time.monotonic() - acted_until)
        log_event(
            log,
            "leader.deposed",
            logging.WARNING,
            epoch=epoch,
            reason=reason,
            acted_until=f"{wall:.3f}",
        )
        self.callbacks.post(self.callbacks.deposed, reason)
        await self._revoke()

    async def _revoke(self) -> None:
        lease, self._lease = self._lease, None
        if lease is None:
            return
        try:
            await self.client.call(lambda etcd: etcd.revoke_lease(lease))
        except Exception as error:  # best effort: the lease ends by itself anyway
            log_event(log, "lease.revoke.failed", logging.DEBUG, error=error)

    async def resign_now(self) -> None:
        """On shutdown: give up the key (revoking the lease deletes it) so another master takes
        over at once instead of after the TTL."""
        if self._term is not None:
            await self._step_down("shutting down")
        else:
            await self._revoke()


def _seconds(ttl: float) -> int:
    return max(1, round(ttl))


def _record(found: Any) -> LeaderRecord | None:
    try:
        return LeaderRecord.from_json(found.value, int(found.create_revision))
    except ValueError:
        return None
