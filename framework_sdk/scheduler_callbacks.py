"""The callbacks of the SDK's callback style and how each event becomes one.

``Scheduler`` is the base class an application subclasses (named like pymesos, in snake_case);
``dispatch`` turns one event of the client into the call of its callback.

Invariants:
- Every callback does nothing by default; an application overrides only those it needs.
- ``dispatch`` calls at most one callback per event and ignores heartbeats; ``error`` is the
  callback of an ``ErrorEvent``, the last event of a client.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING

from framework_sdk.events import (
    AgentLost,
    Disconnected,
    ErrorEvent,
    Event,
    Heartbeat,
    OfferRescinded,
    OffersReceived,
    StatusUpdate,
    Subscribed,
)
from framework_sdk.types import MasterInfo, Offer

if TYPE_CHECKING:
    from framework_sdk.scheduler import SchedulerDriver

__all__ = ["DriverStatus", "Scheduler", "dispatch"]


class DriverStatus(enum.Enum):
    """Lifecycle of a ``SchedulerDriver`` (Mesos' ``Status``)."""

    NOT_STARTED = "NOT_STARTED"
    RUNNING = "RUNNING"
    ABORTED = "ABORTED"
    STOPPED = "STOPPED"


class Scheduler:
    """Base class of callback-style frameworks; every callback does nothing by default."""

    def registered(
        self, driver: SchedulerDriver, framework_id: str, master_info: MasterInfo
    ) -> None:
        """The framework registered for the first time and got ``framework_id``."""

    def reregistered(self, driver: SchedulerDriver, master_info: MasterInfo) -> None:
        """The framework resubscribed (after a disconnection or failover); its tasks were kept."""

    def disconnected(self, driver: SchedulerDriver) -> None:
        """The connection was lost; the driver reconnects. Outstanding offers are void."""

    def resource_offers(self, driver: SchedulerDriver, offers: Sequence[Offer]) -> None:
        """New offers: launch tasks on them or decline them."""

    def offer_rescinded(self, driver: SchedulerDriver, offer_id: str) -> None:
        """An outstanding offer was withdrawn."""

    def status_update(self, driver: SchedulerDriver, update: StatusUpdate) -> None:
        """A task changed state (or a reconciliation answer)."""

    def agent_lost(self, driver: SchedulerDriver, agent_id: str) -> None:
        """An agent was lost; its tasks get their own status updates."""

    def error(self, driver: SchedulerDriver, message: str) -> None:
        """Fatal error: the master refused or ended the subscription; the driver is aborted."""


def dispatch(scheduler: Scheduler, driver: SchedulerDriver, event: Event) -> None:
    """Call the callback of ``event`` on ``scheduler`` (none for a heartbeat)."""
    match event:
        case Subscribed():
            master = MasterInfo(master_id=event.master_id, address=event.address)
            if event.resubscribed:
                scheduler.reregistered(driver, master)
            else:
                scheduler.registered(driver, event.framework_id, master)
        case OffersReceived():
            scheduler.resource_offers(driver, event.offers)
        case OfferRescinded():
            scheduler.offer_rescinded(driver, event.offer_id)
        case StatusUpdate():
            scheduler.status_update(driver, event)
        case AgentLost():
            scheduler.agent_lost(driver, event.agent_id)
        case Disconnected():
            scheduler.disconnected(driver)
        case ErrorEvent():
            scheduler.error(driver, event.message)
        case Heartbeat():
            pass
