"""``Registrar``: the first message of a session and the master's answer (agent.proto).

The first message is a register when the agent has no id, else a reregister with the agent id
and every tracked task (``AgentState.registration``); the master's ``registered`` answer makes
the agent registered: a new agent keeps the master-minted id, a known one the master's id, and
both take the heartbeat interval and reconnect jitter the master sends, and the log key the
agent's ``TaskLogService`` verifies the master's log credentials with (``log_key``: in memory
only, replaced at every registration; None until the first).

Invariants:
- the tasks a reregister reports are checkpointed before it is sent, and a registered id before
  it is used (a failed write raises ``Stopped``: the agent stops);
- a master whose leadership epoch is lower than the highest the agent admitted (checkpointed) is
  a former leader: its ``registered`` is refused (``RefusedError`` UNAVAILABLE, agent.proto:
  Leadership);
- a higher epoch is admitted (and checkpointed) only when ``leader_epoch`` allows it: with
  ``--master etcd://...`` the epoch of the leader record etcd holds now (a term's epoch is the
  create revision of that key, so no real leader has a higher one); a master claiming more (a
  fake leader record pointing at a fake master answering epoch 10^12) is refused, and the agent
  never checkpoints an epoch that would lock it out of the real leaders;
- INVALID_ARGUMENT in answer to the first message raises ``AgentFatalError`` (retrying cannot
  help); a removed agent's reregister is answered FAILED_PRECONDITION (the session ends REMOVED
  and the next one registers);
- the wait for the answer is bounded by ``rpc_timeout`` and ends at ``stop()``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import grpc
from fairshare.logs import log_event
from fairshare.v1 import agent_pb2

from agent.core.decisions import RegisterCall, ReregisterCall
from agent.core.state import AgentState
from agent.runtime.config import MasterSettings, RuntimeConfig
from agent.runtime.loop import AgentFatalError, Stopped, unless_stopped, within
from agent.runtime.persistence import Persistence
from agent.runtime.stream import MasterStream, RefusedError
from agent.wire import register_message, reregister_message

__all__ = ["Registrar"]

_LOG = logging.getLogger("fairshare.agent")


class Registrar:
    """Registers or reregisters the agent at the start of each session."""

    def __init__(
        self,
        config: RuntimeConfig,
        state: AgentState,
        persistence: Persistence,
        settings: MasterSettings,
        stop: asyncio.Event,
        leader_epoch: Callable[[], Awaitable[int | None]] | None = None,
    ) -> None:
        """``leader_epoch``: the highest epoch a leader may have now (None: no bound known)."""
        self._config = config
        self._leader_epoch = leader_epoch
        self._state = state
        self._persistence = persistence
        self._settings = settings
        self._stop = stop
        self.registrations_total = 0
        self.reregistrations_total = 0
        self.log_key: bytes | None = None

    async def open(self, stream: MasterStream) -> None:
        """Register, or reregister with every tracked task, and take the master's answer."""
        self._persistence.persist()  # the tasks a reregister reports are checkpointed first
        registration = self._state.registration()
        reregister = isinstance(registration, ReregisterCall)
        first = self._first_message(registration)
        what = "reregister" if reregister else "register"
        timeout = self._config.rpc_timeout
        try:
            answer = await unless_stopped(within(stream.open(first), timeout), self._stop)
        except RefusedError as error:
            if error.code == grpc.StatusCode.INVALID_ARGUMENT:
                raise AgentFatalError(f"the master rejected {what}: {error.details}") from None
            raise
        await self._check_epoch(answer.epoch)
        self._admit(answer, reregister)
        log_event(
            _LOG,
            "agent.reregistered" if reregister else "agent.registered",
            agent_id=answer.agent_id,
            master_id=answer.master_id,
            resources=str(self._state.spec.resources),
            tasks=len(first.reregister.tasks),
        )

    def _first_message(
        self, registration: RegisterCall | ReregisterCall
    ) -> agent_pb2.ConnectRequest:
        if isinstance(registration, ReregisterCall):
            return reregister_message(
                registration.agent_id,
                registration.spec,
                registration.tasks,
                registration.framework_ids,
            )
        return register_message(registration.spec)

    async def _check_epoch(self, epoch: int) -> None:
        """``RefusedError`` UNAVAILABLE for a higher epoch than ``leader_epoch`` allows."""
        if epoch <= self._state.epoch or self._leader_epoch is None:
            return
        try:
            bound = await within(self._leader_epoch(), self._config.rpc_timeout)
        except (grpc.RpcError, TimeoutError) as error:
            details = error.details() if isinstance(error, grpc.Call) else str(error)
            raise RefusedError(
                grpc.StatusCode.UNAVAILABLE, f"cannot check epoch {epoch} in etcd: {details}"
            ) from None
        if bound is not None and epoch > bound:
            log_event(_LOG, "master.epoch.implausible", logging.WARNING, epoch=epoch, bound=bound)
            raise RefusedError(
                grpc.StatusCode.UNAVAILABLE,
                f"epoch {epoch} is above what etcd allows ({bound}, the leader record's): refused",
            )

    def _admit(self, answer: agent_pb2.AgentRegistered, reregister: bool) -> None:
        """Take the master's ``registered`` answer, unless it comes from a former leader."""
        state = self._state
        if not state.admits(answer.epoch):
            raise RefusedError(
                grpc.StatusCode.UNAVAILABLE,
                f"a former leader (epoch {answer.epoch}; seen {state.epoch}): refused",
            )
        state.saw_epoch(answer.epoch)
        if reregister:
            state.on_reregistered(answer.master_id)
            self.reregistrations_total += 1
        else:
            state.on_registered(answer.agent_id, answer.master_id)
            self.registrations_total += 1
        if not self._persistence.persist():
            raise Stopped
        self._settings.apply(answer.heartbeat_interval, answer.reconnect_jitter)
        self.log_key = bytes(answer.log_key) or None
