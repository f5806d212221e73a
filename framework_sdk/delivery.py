"""``DeliveryLedger``: which status updates the application has already been given.

Status updates are at-least-once on the wire: the master forwards an update until the framework
acknowledges it, so the same update (same task id and uuid) arrives again when the agent retries
it or when the framework resubscribes. The ledger lets the SDK hand each one to the application
once, and answer a copy of an update the application already acknowledged with a fresh
acknowledgement (the first one may have been lost) instead of a second delivery.

Invariants:
- only updates with a uuid are tracked; updates without one (reconciliation answers, updates the
  master or the SDK generated) need no acknowledgement and are always delivered;
- ``admit`` answers DELIVER for a (task id, uuid) at most once while it is remembered; after
  that, DUPLICATE while the application has not acknowledged it and REACKNOWLEDGE once it has;
- ``release`` forgets an update whose handling failed, so its next copy is delivered again;
- the ledger never reorders anything: it only tells the caller to drop a copy;
- memory is bounded: at most ``capacity`` (task id, uuid) pairs are remembered, the least
  recently seen forgotten first (about 150 bytes each, so the default 65,536 is ~10 MB at most).
  A copy arriving after its pair was forgotten is delivered again, so the bound only matters for
  copies older than the last ``capacity`` updates, far past any retry or failover window in
  practice. Pure: no I/O, no clock, no gRPC.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from typing import Final

__all__ = ["DEFAULT_DELIVERY_MEMORY", "Delivery", "DeliveryLedger"]

DEFAULT_DELIVERY_MEMORY: Final = 65_536
"""Default number of (task id, uuid) pairs a ``DeliveryLedger`` remembers."""


class Delivery(enum.Enum):
    """What to do with an incoming status update."""

    DELIVER = "deliver"
    """Not seen before (or carries no uuid): hand it to the application."""
    DUPLICATE = "duplicate"
    """Already handed out and not yet acknowledged: drop the copy."""
    REACKNOWLEDGE = "reacknowledge"
    """Already handed out and acknowledged: drop the copy and acknowledge it again."""


class DeliveryLedger:
    """Delivered and acknowledged status updates, keyed by (task id, uuid), LRU-bounded."""

    __slots__ = ("_acked", "_capacity")

    def __init__(self, capacity: int = DEFAULT_DELIVERY_MEMORY) -> None:
        if capacity < 1:
            raise ValueError(f"a DeliveryLedger needs a capacity >= 1, got {capacity}")
        self._capacity = capacity
        self._acked: OrderedDict[tuple[str, bytes], bool] = OrderedDict()

    def __len__(self) -> int:
        return len(self._acked)

    @property
    def capacity(self) -> int:
        """How many (task id, uuid) pairs are remembered at most."""
        return self._capacity

    def admit(self, task_id: str, uuid: bytes) -> Delivery:
        """Classify an incoming update; a DELIVER verdict records it as delivered."""
        if not uuid:
            return Delivery.DELIVER
        key = (task_id, uuid)
        acked = self._acked.get(key)
        if acked is None:
            self._remember(key, acked=False)
            return Delivery.DELIVER
        self._acked.move_to_end(key)
        return Delivery.REACKNOWLEDGE if acked else Delivery.DUPLICATE

    def acknowledged(self, task_id: str, uuid: bytes) -> None:
        """The application acknowledged the update: its later copies are acknowledged again."""
        if uuid:
            self._remember((task_id, uuid), acked=True)

    def release(self, task_id: str, uuid: bytes) -> None:
        """Forget a delivered update that was not handled, so its next copy is delivered."""
        key = (task_id, uuid)
        if self._acked.get(key) is False:
            del self._acked[key]

    def _remember(self, key: tuple[str, bytes], *, acked: bool) -> None:
        self._acked[key] = acked
        self._acked.move_to_end(key)
        while len(self._acked) > self._capacity:
            self._acked.popitem(last=False)
