"""``Sessions``: one session after another with the master, each over its own ``Connect``
stream (``agent.runtime.stream``).

A session finds the master (``fairshare.masters.MasterFinder``, ``--master``: one address, a
list of HA masters, or etcd://; a master that does not lead names the leader, which is tried
next; a master that did not answer, or whose session ended, is not tried first next time),
opens the stream with a register or reregister (``agent.runtime.registration``), then runs
until one of its loops ends it: read the master's messages (``agent.runtime.commands``), send
due status updates and heartbeats (``agent.runtime.outbox``), watch that the master still
answers, and wait for ``stop()``. How it ended (``Outcome``) decides what comes next.

Error contract (agent.proto): NOT_FOUND -> reconnect at once and reregister;
FAILED_PRECONDITION -> stop every task silently, forget them and register afresh; anything else
(UNAVAILABLE, a stream the master ended, a timeout) -> reconnect after a delay
(``agent.runtime.reconnect``). A ``commands`` message whose leadership epoch is not the one the
session registered with (lower: a former leader; higher: never checked against etcd) ends the
session unapplied (agent.proto: Leadership).

Invariants: a fresh channel and stream per session, closed when the session ends; nothing is
sent while disconnected; ``stop()`` during a session drains it when it was established and no
checkpoint write failed: the tasks are killed (KILLED, REASON_AGENT_SHUTDOWN), their updates
sent, the stream half-closed, and the master given ``drain_timeout`` to end it (the
acknowledgements it still sends are applied).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import grpc
from fairshare.logs import log_event
from fairshare.masters import MasterFinder, MasterUnknown

from agent.core.records import TaskReason
from agent.core.state import AgentState
from agent.runtime.commands import Commands
from agent.runtime.config import RuntimeConfig
from agent.runtime.loop import Stopped, now
from agent.runtime.outbox import Outbox
from agent.runtime.persistence import Persistence
from agent.runtime.registration import Registrar
from agent.runtime.stream import (
    PING_INTERVAL,
    PING_TIMEOUT,
    MasterStream,
    Outcome,
    RefusedError,
    classify,
)
from agent.tasks.executors.router import TaskExecutors

__all__ = ["Sessions"]

_LOG = logging.getLogger("fairshare.agent")


class Sessions:
    """Runs one session with the master at a time; ``healthy``: the last one was established."""

    def __init__(
        self,
        config: RuntimeConfig,
        state: AgentState,
        finder: MasterFinder,
        *,
        registrar: Registrar,
        commands: Commands,
        outbox: Outbox,
        executor: TaskExecutors,
        persistence: Persistence,
        stop: asyncio.Event,
    ) -> None:
        self._config = config
        self._state = state
        self._finder = finder
        self._registrar = registrar
        self._commands = commands
        self._outbox = outbox
        self._executor = executor
        self._persistence = persistence
        self._stop = stop
        self.healthy = False  # the current session was established (registered)

    async def run_one(self) -> Outcome:
        """Find the master and hold one session with it; how it ended."""
        self.healthy = False
        try:
            address = await self._finder.next()
        except MasterUnknown as error:
            log_event(_LOG, "master.unknown", logging.WARNING, error=error.details())
            return Outcome.RECONNECT
        outcome = await self._session_with(address)
        if outcome is Outcome.RECONNECT:
            self._finder.failed(address)
        return outcome

    async def _session_with(self, address: str) -> Outcome:
        stream = MasterStream(address, self._finder.report(), self._config.security)
        try:
            await self._registrar.open(stream)
            self.healthy = True
            self._finder.answered(address)
            self._state.on_connected(now())
            self._outbox.last_sent = now()
            log_event(
                _LOG,
                "master.connected",
                agent_id=self._state.agent_id,
                master=address,
                master_id=self._state.master_id,
            )
            outcome = await self._serve(stream)
            if outcome is Outcome.STOP and self._persistence.fatal is None:
                await self._drain(stream)
            return outcome
        except Stopped:
            return Outcome.STOP
        except RefusedError as error:
            return self._refused(address, error)
        except grpc.aio.AioRpcError as error:
            log_event(
                _LOG,
                "master.call.failed",
                logging.WARNING,
                master=address,
                code=error.code().name,
                details=error.details(),
            )
            return classify(error.code())
        except TimeoutError:
            timeout = self._config.rpc_timeout
            log_event(_LOG, "master.unanswered", logging.WARNING, timeout=timeout)
            return Outcome.RECONNECT
        finally:
            if self._state.connected:
                log_event(_LOG, "master.disconnected", agent_id=self._state.agent_id)
            self._state.on_disconnected()
            await stream.close()

    def _refused(self, address: str, error: RefusedError) -> Outcome:
        """The master ended the stream in answer to the first message."""
        log_event(
            _LOG,
            "master.refused",
            logging.WARNING,
            master=address,
            code=error.code.name,
            details=error.details,
        )
        unavailable = error.code == grpc.StatusCode.UNAVAILABLE
        if unavailable and self._finder.redirected(address, error.leader):
            return Outcome.REDIRECTED
        return classify(error.code)

    async def _serve(self, stream: MasterStream) -> Outcome:
        """Run the reader, the update sender and heartbeats until one ends the session."""
        loops = [
            asyncio.ensure_future(self._read(stream)),
            asyncio.ensure_future(self._outbox.heartbeats(stream)),
            asyncio.ensure_future(self._outbox.send_updates(stream)),
            asyncio.ensure_future(self._watch_master(stream)),
            asyncio.ensure_future(self._await_stop()),
        ]
        try:
            done, _ = await asyncio.wait(loops, return_when=asyncio.FIRST_COMPLETED)
            return min((future.result() for future in done), key=lambda outcome: outcome.rank)
        finally:
            for future in loops:
                future.cancel()
            await asyncio.gather(*loops, return_exceptions=True)

    async def _watch_master(self, stream: MasterStream) -> Outcome:
        """End the session when the master, silent for ``PING_INTERVAL``, does not answer a
        health check on the session's connection within ``PING_TIMEOUT`` (it hangs)."""
        while True:
            silent = now() - stream.last_received
            if silent < PING_INTERVAL:
                await asyncio.sleep(PING_INTERVAL - silent)
                continue
            if not await stream.ping(PING_TIMEOUT):
                log_event(_LOG, "master.unresponsive", logging.WARNING, silent=f"{silent:.1f}")
                return Outcome.RECONNECT
            stream.last_received = now()

    async def _await_stop(self) -> Outcome:
        await self._stop.wait()
        return Outcome.STOP

    async def _read(self, stream: MasterStream) -> Outcome:
        try:
            async for message in stream.messages():
                epoch = message.commands.epoch if message.HasField("commands") else None
                if epoch is not None and epoch != self._state.epoch:
                    # a former leader's commands, or an epoch this session was not admitted
                    # with (only a registration's epoch is checked against etcd): none applied
                    log_event(_LOG, "master.stale", logging.WARNING, epoch=epoch)
                    return Outcome.RECONNECT
                self._commands.dispatch(message)
        except grpc.aio.AioRpcError as error:
            log_event(
                _LOG,
                "master.stream.ended",
                logging.WARNING,
                code=error.code().name,
                details=error.details(),
            )
            return classify(error.code())
        log_event(_LOG, "master.stream.ended", logging.WARNING, code="OK")
        return Outcome.RECONNECT

    async def _drain(self, stream: MasterStream) -> None:
        """On stop: kill the tasks, send their updates, half-close the stream and let the master
        end it (applying the acknowledgements it still sends) within ``drain_timeout``."""
        killed = 0
        if self._config.kill_tasks_on_shutdown:
            killed = self._executor.kill_all(TaskReason.AGENT_SHUTDOWN)
            await self._executor.wait_idle(self._config.drain_timeout)
        if not self._persistence.persist():
            return
        outgoing = self._state.take_due(now(), force=True)
        log_event(_LOG, "agent.draining", killed=killed, updates=len(outgoing))
        with contextlib.suppress(TimeoutError, grpc.aio.AioRpcError):
            async with asyncio.timeout(self._config.drain_timeout):
                if outgoing and not self._outbox.send_batch(stream, outgoing):
                    return
                async for message in stream.finish():
                    self._commands.dispatch(message)
