"""``MasterRuntime``: the asyncio shell around the allocation core, assembled from its parts.

One state object (``RuntimeState``) with the parts composed around it, each given exactly what it
uses:

- ``dispatcher`` (``Dispatcher``): allocation runs, and the core's messages turned into I/O;
- ``agents`` (``AgentCalls``): the Agent API; ``loss`` (``AgentLoss``): liveness, unreachable and
  gone agents;
- ``frameworks`` (``FrameworkCalls``): the Scheduler API, failover timers, heartbeats;
- ``operator`` (``OperatorCalls``): the Operator API (state, weights, maintenance, teardown,
  kills and agent removal on the operator's behalf);
- ``recovery`` (``Recovery``): the restart from the registry;
- ``rebalancer`` (``RebalanceTimer``, only with ``--rebalance``): preemptions toward DRFH.

The gRPC adapters (``master.service``) each take the part they serve. No part inherits from
another and none imports one above it: ``dispatcher`` < ``loss`` < ``agents``; ``frameworks`` <
``recovery``; the one upward notice (an agent reregistered, which may end the recovery) is the
``agents.on_rejoined`` callback wired here.

Invariants (docs/architecture.md §10):
every call runs synchronously on the runtime's event loop, so each
is one atomic step over the state (no locks); timers run the periodic allocation, framework
heartbeats, the liveness check and the agents' drains
(``master.runtime.agent_drains``); ``drain`` (SIGTERM, or the end of a leadership term) stops
offering and ends every stream with UNAVAILABLE, removing nothing. ``collect_garbage`` (at the
start and every ``housekeeping`` period) makes the registry forget agents and frameworks that left
long ago (``RuntimeLimits``: age and count, as Mesos's registry_max_agent_age/_count), and the
runtime forget them with it (a forgotten agent that comes back must register afresh).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from fairshare.logs import log_event

from master.model import StreamEnd
from master.registry import Registry, RegistryWriteError
from master.runtime.agent_drains import CHECK_PERIOD
from master.runtime.agent_loss import AgentLoss
from master.runtime.agents import AgentCalls
from master.runtime.dispatch import Dispatcher
from master.runtime.events import EventKind
from master.runtime.frameworks import FrameworkCalls
from master.runtime.operator import OperatorCalls
from master.runtime.rebalancing import RebalanceTimer
from master.runtime.recovery import Recovery
from master.runtime.state import RuntimeConfig, RuntimeState

__all__ = ["MasterRuntime"]

log = logging.getLogger("fairshare.master")

SHUTTING_DOWN = StreamEnd("UNAVAILABLE", "the master is shutting down")


GC_PERIOD = 60.0
"""Seconds between two garbage collections of the registry (``housekeeping``)."""


class MasterRuntime:
    """The master's state with its call classes, timers and shutdown."""

    def __init__(
        self,
        config: RuntimeConfig | None = None,
        master_id: str | None = None,
        registry: Registry | None = None,
    ) -> None:
        self.state = RuntimeState(config, master_id, registry)
        self.dispatcher = Dispatcher(self.state)
        self.loss = AgentLoss(self.state, self.dispatcher)
        self.agents = AgentCalls(self.state, self.dispatcher, self.loss)
        self.frameworks = FrameworkCalls(self.state, self.dispatcher)
        self.operator = OperatorCalls(self.state, self.dispatcher, self.frameworks)
        self.recovery = Recovery(self.state, self.dispatcher, self.loss, self.frameworks)
        self.agents.on_rejoined = self.recovery.agent_back
        settings = self.state.config.rebalance
        self.rebalancer = (
            None if settings is None else RebalanceTimer(self.state, self.dispatcher, settings)
        )
        self._timers: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Bind to the running loop and start the periodic timers."""
        state = self.state
        state.loop  # noqa: B018 - binds the loop now, before the first call
        config = state.config
        liveness = max(0.05, min(1.0, config.agent_timeout / 4))
        self._timers = [
            asyncio.create_task(
                _every(config.allocation_interval, self.dispatcher.request_allocation)
            ),
            asyncio.create_task(_every(config.heartbeat_interval, self.frameworks.heartbeat)),
            asyncio.create_task(_every(liveness, self.loss.check_liveness)),
            asyncio.create_task(_every(CHECK_PERIOD, self.operator.drains.check)),
        ]
        self._timers.append(asyncio.create_task(self.housekeeping(GC_PERIOD)))
        if self.rebalancer is not None:
            self._timers.append(asyncio.create_task(self.rebalancer.run()))
        state.announce(
            EventKind.MASTER_STARTED,
            master_id=state.master_id,
            policy=config.core.policy,
            hierarchy=config.core.effective_hierarchy,
            rebalance="on" if self.rebalancer is not None else "off",
        )

    def drain(self, end: StreamEnd = SHUTTING_DOWN) -> None:
        """Stop offering and end every stream with ``end`` (UNAVAILABLE: SIGTERM, or this
        master no longer leads)."""
        state = self.state
        if state.draining:
            return
        state.draining = True
        for timer in self._timers:
            timer.cancel()
        for link in state.frameworks.values():
            link.detach_current(None, end)
            if link.failover_timer is not None:
                link.failover_timer.cancel()
        for agent in state.agents.values():
            if agent.channel is not None:
                agent.channel.close(end)
        log_event(
            log, "master.draining", frameworks=len(state.frameworks), agents=len(state.agents)
        )

    async def stop(self, end: StreamEnd = SHUTTING_DOWN) -> None:
        """Drain and wait for the timers to end."""
        self.drain(end)
        await asyncio.gather(*self._timers, return_exceptions=True)

    def collect_garbage(self) -> None:
        """Forget what left the cluster long ago (registry first; a failed write is logged)."""
        state, limits = self.state, self.state.config.limits
        try:
            agents, frameworks = state.registry.collect_garbage(
                time.time(),
                limits.registry_max_agent_age,
                limits.registry_max_agent_count,
                limits.registry_max_framework_age,
                limits.registry_max_framework_count,
            )
        except RegistryWriteError as error:
            log_event(log, "registry.gc.failed", logging.ERROR, error=error)
            return
        for agent_id in agents:
            state.departed.pop(agent_id, None)
        state.removed_frameworks.difference_update(frameworks)
        if agents or frameworks:
            log_event(log, "registry.gc", agents=len(agents), frameworks=len(frameworks))

    async def housekeeping(self, period: float) -> None:
        """``collect_garbage`` now and every ``period`` seconds, until cancelled."""
        self.collect_garbage()
        await _every(period, self.collect_garbage)


async def _every(period: float, action: Callable[[], None]) -> None:
    while True:
        await asyncio.sleep(period)
        try:
            action()
        except Exception:  # a timer must survive a bug in one run; the log shows it
            log.exception("timer.failed")
