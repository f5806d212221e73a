"""``Dispatcher``: allocation runs, and the core's messages turned into I/O.

The core decides; the dispatcher delivers. Offers and rescinds go onto framework streams,
``LaunchTasks`` and ``KillTask`` (the core's own messages) onto agent streams as they are, and
states the master decided itself (``TaskStatusChange``: LOST, UNREACHABLE, KILLED...) are recorded
in the task book and forwarded to the framework.

Invariants:
- allocation runs every ``allocation_interval`` and when resources appear (agent connects, task
  ends, decline, revive, accept, demand change, offer timeout); triggers are merged so at most one
  run is pending, and a triggered run waits ``allocation_batch`` (5 ms) so that a burst of calls
  costs one run; nothing is offered once draining or while recovering after a restart;
- a launch is recorded in the task book before its ``LaunchTasks`` is queued for the agent;
- partition states (UNREACHABLE, GONE, DROPPED, UNKNOWN) reach a framework without the
  PARTITION_AWARE capability as LOST.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Sequence

from fairshare.logs import log_event
from fairshare.task_states import NOT_FORWARDED_WITHOUT_AWARENESS, TaskReason, TaskState

from master.core import (
    KillTask,
    LaunchTasks,
    Message,
    RescindOffer,
    SendOffers,
    TaskStatusChange,
)
from master.model import OffersEvent, RescindEvent, StatusUpdate, UpdateEvent
from master.runtime.sessions import FrameworkLink
from master.runtime.state import RuntimeState

__all__ = ["Dispatcher"]

log = logging.getLogger("fairshare.master")


class Dispatcher:
    """Schedules allocation runs and delivers what the core decided."""

    def __init__(self, state: RuntimeState) -> None:
        self.state = state
        self._allocation_pending = False
        self._faults = random.Random(state.config.core.seed)

    # -- allocation -------------------------------------------------------------------------------

    def request_allocation(self) -> None:
        """Schedule one allocation run soon, unless one is pending already."""
        state = self.state
        if self._allocation_pending or state.draining:
            return
        self._allocation_pending = True
        delay = state.config.allocation_batch
        if delay > 0:
            state.loop.call_later(delay, self._allocate)
        else:
            state.loop.call_soon(self._allocate)

    def _allocate(self) -> None:
        self._allocation_pending = False
        state = self.state
        if state.draining or state.recovering:
            return  # recovery ends with a run that sees every agent that came back
        started = time.perf_counter()
        now = state.now()
        self.dispatch(state.core.handle_tick(now))
        messages = state.core.handle_allocate(now)
        elapsed = time.perf_counter() - started
        counters = state.counters
        counters.allocation_runs += 1
        counters.allocation_seconds += elapsed
        counters.allocation_durations.observe(elapsed)
        self.dispatch(messages)
        timeout = state.config.core.offer_timeout
        if messages and timeout is not None:
            state.loop.call_later(timeout + 0.001, self.request_allocation)

    # -- the core's messages ----------------------------------------------------------------------

    def dispatch(self, messages: Sequence[Message]) -> None:
        """Deliver each message the core returned."""
        for message in messages:
            if isinstance(message, SendOffers):
                self._send_offers(message)
            elif isinstance(message, RescindOffer):
                self.state.counters.offers_rescinded += 1
                link = self.state.frameworks.get(message.framework_id)
                if link is not None:
                    link.send(RescindEvent(message.offer_id, message.reason))
            elif isinstance(message, KillTask):
                agent = self.state.agents.get(message.agent_id)
                if agent is not None:
                    agent.send(message)
            elif isinstance(message, TaskStatusChange):  # its reason is text, not a wire reason
                self.master_update(message, TaskReason.UNSPECIFIED, message.message)
            else:
                self.launch(message)

    def _send_offers(self, message: SendOffers) -> None:
        link = self.state.frameworks.get(message.framework_id)
        if link is None:
            return
        expires = None
        timeout = self.state.config.core.offer_timeout
        if timeout is not None and message.offers:
            expires = self.state.wall(message.offers[0].created_at + timeout)
        self.state.counters.offers_sent += len(message.offers)
        link.send(OffersEvent(message.offers, expires))

    def launch(self, message: LaunchTasks) -> None:
        """Record the accepted tasks and send the core's ``LaunchTasks`` to their agent."""
        for task in message.tasks:
            self.state.tasks.launch(message.framework_id, message.agent_id, task)
        self.state.agents[message.agent_id].send(message)
        log_event(
            log,
            "tasks.launched",
            framework_id=message.framework_id,
            agent_id=message.agent_id,
            tasks=len(message.tasks),
        )

    # -- status updates the master decides --------------------------------------------------------

    def for_framework(self, link: FrameworkLink, status: StatusUpdate) -> StatusUpdate:
        """What the framework is told: partition states become LOST unless it is aware."""
        if (
            status.state in NOT_FORWARDED_WITHOUT_AWARENESS
            and "PARTITION_AWARE" not in link.spec.capabilities
        ):
            return dataclasses.replace(status, state=TaskState.LOST)
        return status

    def master_update(self, change: TaskStatusChange, reason: TaskReason, message: str) -> None:
        """Record and forward a state the master decided (no uuid, never acknowledged)."""
        status = StatusUpdate(
            change.task_id, change.agent_id, change.state, reason, message, time.time()
        )
        self.state.tasks.set_state(change.framework_id, change.task_id, status)
        link = self.state.frameworks.get(change.framework_id)
        if link is not None:
            link.send(UpdateEvent(self.for_framework(link, status)))

    def drop_ack(self) -> bool:
        """Fault injection: True when this acknowledgement to an agent must be dropped."""
        rate = self.state.config.fault_drop_acks
        dropped = rate > 0 and self._faults.random() < rate
        if dropped:
            log_event(log, "fault.ack.dropped", rate=rate)
        return dropped
