"""``MasterRuntime``: the asyncio shell that owns the allocation core (DESIGN.md §3, §8).

One owner of state: every method runs on the runtime's event loop and is synchronous, so each
call (a gRPC handler's whole request, a timer's run) is one atomic step over ``MasterState``, the
task book and the connection links; no locks. The gRPC adapters (``master.service``) only convert
and call these methods. Core messages are turned into I/O here: events queued on framework
streams, commands queued on agent streams.

Invariants:
- a method that raises ``CoreError`` has changed nothing (checks come before changes);
- allocation runs every ``allocation_interval`` and when resources appear (agent connects, task
  ends, decline, revive, accept, demand change, offer timeout); triggers are merged so at most
  one run is pending, and a triggered run waits ``allocation_batch`` (5 ms) so that a burst of
  calls costs one run; nothing is offered once draining;
- an agent joins the pool when its first Commands stream attaches; an agent unheard for
  ``agent_timeout`` leaves it (offers rescinded, tasks UNREACHABLE) and must register afresh;
- an agent status update is forwarded to its framework until acknowledged (the agent retries)
  and each framework acknowledgement goes back to the agent as an ``AckCommand``; updates no
  framework will acknowledge (framework gone, KILLING to a framework without the capability)
  are acknowledged by the master itself so the agent never retries forever;
- an agent the operator deactivated stays in the pool with its tasks but is offered to nobody
  (its offers rescinded) until reactivated; a call naming several agents checks them all before
  changing any, and reactivating several costs one allocation run that sees them all;
- frameworks get a HeartbeatEvent every ``heartbeat_interval``; draining ends every stream with
  UNAVAILABLE and removes nothing.

Durable state (agents admitted, frameworks, weights) will be written through a registry before
the calls that change it return (issue 5); ``register``, ``subscribe``, ``_remove_framework`` and
``set_weight`` are the places it hooks in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from fairshare.logs import log_event

from master.core import InvalidArgument, NotFound
from master.core.checks import check_weight
from master.model import HeartbeatEvent, StreamEnd
from master.runtime_base import (
    UNLIMITED_TASKS,
    RuntimeConfig,
    RuntimeCounters,
    SubscribeResult,
    Unavailable,
    Unimplemented,
)
from master.runtime_recovery import RecoveryCalls
from master.views import ClusterSnapshot, build_snapshot

__all__ = [
    "UNLIMITED_TASKS",
    "MasterRuntime",
    "RuntimeConfig",
    "RuntimeCounters",
    "SubscribeResult",
    "Unavailable",
    "Unimplemented",
]

log = logging.getLogger("fairshare.master")


class MasterRuntime(RecoveryCalls):
    """The master's state and the rules that turn requests and timers into I/O."""

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind to the running loop and start the periodic timers."""
        self._loop = asyncio.get_running_loop()
        self._timers = [
            asyncio.create_task(
                self._every(self.config.allocation_interval, self.request_allocation)
            ),
            asyncio.create_task(self._every(self.config.heartbeat_interval, self._heartbeat)),
            asyncio.create_task(self._every(self._liveness_period(), self._check_liveness)),
        ]
        log_event(log, "master.started", master_id=self.master_id, policy=self.config.policy)

    def drain(self) -> None:
        """Stop offering and end every stream with UNAVAILABLE (SIGTERM)."""
        if self.draining:
            return
        self.draining = True
        for timer in self._timers:
            timer.cancel()
        end = StreamEnd("UNAVAILABLE", "the master is shutting down")
        for link in self.frameworks.values():
            link.detach_current(None, end)
            if link.failover_timer is not None:
                link.failover_timer.cancel()
        for agent in self.agents.values():
            if agent.channel is not None:
                agent.channel.close(end)
        log_event(log, "master.draining", frameworks=len(self.frameworks), agents=len(self.agents))

    async def stop(self) -> None:
        """Drain and wait for the timers to end."""
        self.drain()
        await asyncio.gather(*self._timers, return_exceptions=True)

    async def _every(self, period: float, action: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(period)
            try:
                action()
            except Exception:  # a timer must survive a bug in one run; the log shows it
                log.exception("timer action failed")

    def _liveness_period(self) -> float:
        return max(0.05, min(1.0, self.config.agent_timeout / 4))

    def _heartbeat(self) -> None:
        event = HeartbeatEvent(time.time())
        for link in self.frameworks.values():
            link.send(event)

    # -- operator ---------------------------------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        """The whole cluster state, in one step of the loop."""
        return build_snapshot(self)

    def set_weight(
        self, role: str | None, framework_id: str | None, weight: float, clear: bool
    ) -> tuple[str, str, float] | None:
        """Set (or, with ``clear``, remove) the operator weight of a role or of one framework;
        returns the stored (kind, target, weight), None when cleared. Durable before it applies.

        Precedence: a framework's operator weight, else its role's, else the weight it
        subscribed with.
        """
        if framework_id is not None:
            self._framework(framework_id)
            kind, target = "framework", framework_id
        elif role:
            kind, target = "role", role
        else:
            raise InvalidArgument("set role or framework_id")
        value = None if clear else check_weight(weight, f"{kind} {target!r}")
        with self._durably():
            self.registry.set_weight(kind, target, value)
        if kind == "framework":
            self.core.handle_set_framework_weight(target, value, self.now())
        else:
            self.core.handle_set_weight(target, value, self.now())
        self.request_allocation()
        log_event(log, "weight.set", kind=kind, target=target, weight=value)
        return None if value is None else (kind, target, value)

    def deactivate_agents(self, agent_ids: Sequence[str]) -> None:
        """Maintenance: rescind the agents' offers and offer nothing of them; all or none."""
        self._pooled_agents(agent_ids)
        with self._durably():
            self.registry.set_agents_active(list(agent_ids), False)
        now = self.now()
        for agent_id in dict.fromkeys(agent_ids):
            if self.core.agents[agent_id].active:
                self._dispatch(self.core.handle_deactivate_agent(agent_id, now))
                log_event(log, "agent.deactivated", agent_id=agent_id)
        self.request_allocation()  # frameworks that lost offers may be due others

    def reactivate_agents(self, agent_ids: Sequence[str]) -> None:
        """Offer the agents again; all or none, and one allocation run sees them all."""
        self._pooled_agents(agent_ids)
        with self._durably():
            self.registry.set_agents_active(list(agent_ids), True)
        now = self.now()
        for agent_id in dict.fromkeys(agent_ids):
            if not self.core.agents[agent_id].active:
                self.core.handle_reactivate_agent(agent_id, now)
                log_event(log, "agent.reactivated", agent_id=agent_id)
        self.request_allocation()

    def _pooled_agents(self, agent_ids: Sequence[str]) -> None:
        """Check every id before any change: INVALID_ARGUMENT, or NOT_FOUND if not in the pool."""
        if not agent_ids:
            raise InvalidArgument("agent_ids is empty")
        for agent_id in agent_ids:
            if not agent_id:
                raise InvalidArgument("agent_ids holds an empty id")
            if agent_id not in self.core.agents:
                raise NotFound(f"agent {agent_id!r} is not connected to this master")

    def weights(self) -> list[tuple[str, str, float]]:
        """Operator-set weights as (kind, target, weight): roles, then frameworks, sorted."""
        roles = [("role", role, w) for role, w in sorted(self.registry.role_weights.items())]
        frameworks = sorted(self.registry.framework_weights.items())
        return roles + [("framework", fid, w) for fid, w in frameworks]
