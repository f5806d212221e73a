"""``AgentRuntime``: the asyncio shell that connects ``AgentState`` to the master over gRPC,
assembled from its parts.

One state (``AgentState``, restored from the checkpoint when there is one) with the parts
composed around it, each given exactly what it uses:

- ``persistence`` (``Persistence``): the state's changes written to the checkpoint, the
  recovery of its tasks when ``run()`` starts;
- ``reports`` (``TaskReports``): the executors' reports, turned into status updates;
- ``executor`` (``TaskExecutors``, built by the ``executors`` factory around ``reports``);
- ``commands`` (``Commands``): the master's messages applied to the state and the executors;
- ``outbox`` (``Outbox``): status updates and heartbeats;
- ``registrar`` (``Registrar``): the first message of a session and the master's answer;
- ``sessions`` (``Sessions``): one session after another over a fresh stream;
- ``reconnection`` (``Reconnection``) and ``settings`` (``MasterSettings``): the delay before the
  next session, and what the master said about heartbeats and jitter.

No part inherits from another and none imports one above it: ``persistence`` < ``reports`` <
``commands``, ``outbox``, ``registrar`` < ``sessions``. Two events tie them, created here: ``stop``
(``stop()``, or a failed checkpoint write) ends every wait; ``wake`` (a report, a command) makes
the outbox look for due updates.

Invariants: only this event loop touches ``state`` and ``executor`` (one owner of state);
``run()`` returns after ``stop()`` (its session drained when connected) and raises
``AgentFatalError`` when the master rejected the agent for good or a checkpoint write failed;
on the way out the tasks are killed (REASON_AGENT_SHUTDOWN, unless configured not to, or after a
failed write), the executors closed and the last changes written.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Callable

from fairshare.backoff import Backoff
from fairshare.logs import log_event
from fairshare.masters import MasterFinder

from agent.core.records import AgentMetrics, AgentSpec, TaskReason
from agent.core.state import AgentState
from agent.durability.checkpoint import CheckpointStore
from agent.runtime.commands import Commands
from agent.runtime.config import MasterSettings, RuntimeConfig
from agent.runtime.loop import AgentFatalError, sleep_unless_stopped
from agent.runtime.outbox import Outbox
from agent.runtime.persistence import Persistence
from agent.runtime.reconnect import Reconnection
from agent.runtime.registration import Registrar
from agent.runtime.reports import TaskReports
from agent.runtime.session import Sessions
from agent.runtime.stream import Outcome
from agent.tasks.executors.base import Report
from agent.tasks.executors.router import TaskExecutors

__all__ = ["AgentRuntime"]

_LOG = logging.getLogger("fairshare.agent")


class AgentRuntime:
    """Runs one agent against one master until ``stop()``."""

    def __init__(
        self,
        config: RuntimeConfig,
        spec: AgentSpec,
        *,
        rng: random.Random | None = None,
        new_uuid: Callable[[], bytes] | None = None,
        checkpoint: CheckpointStore | None = None,
        executors: Callable[[Report], TaskExecutors] = TaskExecutors,
    ) -> None:
        """``checkpoint``: restore the state from it (raises ``CheckpointError``) and keep it;
        ``executors`` builds the task executors (default: placeholder tasks only)."""
        self.config = config
        rng = rng or random.Random()
        retry = Backoff(config.status_retry_initial, config.status_retry_max).jittered(rng)
        minter = new_uuid or (lambda: uuid.uuid4().bytes)
        self.state = _initial_state(spec, checkpoint, retry, minter)
        stop, wake = asyncio.Event(), asyncio.Event()
        self._stop = stop
        self.reconnection = Reconnection(config.reconnect_initial, config.reconnect_max, rng)
        self.settings = MasterSettings(config.default_heartbeat_interval, self.reconnection)
        self.persistence = Persistence(self.state, checkpoint, stop)
        self.reports = TaskReports(self.state, self.persistence, wake)
        self.executor = executors(self.reports.on_task_event)
        self.commands = Commands(
            self.state,
            self.executor,
            self.persistence,
            self.settings,
            wake,
            self.reports.on_task_event,
        )
        self.outbox = Outbox(self.state, self.persistence, self.settings, wake)
        self._finder = MasterFinder(config.master, rng, etcd_security=config.security.etcd)
        self.registrar = Registrar(
            config, self.state, self.persistence, self.settings, stop, self._leader_epoch
        )
        self.sessions = Sessions(
            config,
            self.state,
            self._finder,
            registrar=self.registrar,
            commands=self.commands,
            outbox=self.outbox,
            executor=self.executor,
            persistence=self.persistence,
            stop=stop,
        )
        self.reconnects_total = 0
        # The seams the unit tests drive directly (tests/unit/agent: test_runtime, test_recovery).
        self._wake = wake
        self._persist = self.persistence.persist
        self._dispatch = self.commands.dispatch
        self._send_updates = self.outbox.send_updates

    async def _leader_epoch(self) -> int | None:
        """The epoch of the leader record in etcd now (0 while none leads); None when
        ``--master`` is not an etcd address (nothing to bound a master's epoch by)."""
        if self._finder.target.etcd is None:
            return None
        record = await self._finder.leader_record()
        return record.epoch if record is not None else 0

    def stop(self) -> None:
        """Ask ``run()`` to drain and return (safe to call from a signal handler)."""
        self._stop.set()

    def metrics(self) -> AgentMetrics:
        """Counters and gauges of the agent, built from the state at call time."""
        state = self.state
        return AgentMetrics(
            connected=state.connected,
            agent_id=state.agent_id,
            tasks_by_state=state.task_counts(),
            tasks_terminal_total=dict(state.terminal_total),
            pending_updates=state.pending_updates(),
            updates_sent_total=state.updates_sent_total,
            update_retries_total=state.update_retries_total,
            acks_total=state.acks_applied_total,
            acks_ignored_total=state.acks_ignored_total,
            reconnects_total=self.reconnects_total,
            registrations_total=self.registrar.registrations_total,
            reregistrations_total=self.registrar.reregistrations_total,
            heartbeats_total=self.outbox.heartbeats_total,
            heartbeat_failures_total=self.outbox.heartbeat_failures_total,
            resources_total_millis=dict(state.spec.resources.millis_items()),
            resources_used_millis=dict(state.used.millis_items()),
        )

    async def run(self) -> None:
        """Connect, serve and reconnect until ``stop()``; raises ``AgentFatalError``."""
        try:
            self.persistence.recover(self.executor)
            while not self._stop.is_set():
                outcome = await self.sessions.run_one()
                if outcome is Outcome.STOP or self._stop.is_set():
                    break
                if outcome is Outcome.REMOVED:
                    self.commands.forget()
                delay = self.reconnection.delay(outcome, self.sessions.healthy)
                self.reconnects_total += 1
                log_event(_LOG, "master.reconnecting", why=outcome.why, delay=f"{delay:.3f}")
                await sleep_unless_stopped(delay, self._stop)
        finally:
            if self.config.kill_tasks_on_shutdown and self.persistence.fatal is None:
                self.executor.kill_all(TaskReason.AGENT_SHUTDOWN)
            await self.executor.aclose()
            self.persistence.persist()
            await self._finder.close()
        if self.persistence.fatal is not None:
            raise AgentFatalError(self.persistence.fatal)


def _initial_state(
    spec: AgentSpec,
    checkpoint: CheckpointStore | None,
    retry: Callable[[int], float],
    new_uuid: Callable[[], bytes],
) -> AgentState:
    """A fresh state, or the one the checkpoint holds (raises ``CheckpointError``)."""
    if checkpoint is None:
        return AgentState(spec, retry=retry, new_uuid=new_uuid)
    return AgentState.restore(spec, checkpoint.load(), retry=retry, new_uuid=new_uuid)
