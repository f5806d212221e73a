"""``AgentRuntime``: the asyncio shell that connects ``AgentState`` to the master over gRPC.

A session is one ``Connect`` stream (agent.proto, ``agent.session``): the first message is a
register, or a reregister with the agent id and every tracked task; the master's ``registered``
answer makes the agent connected. Then three loops share the stream until one of them ends the
session: read the master's messages (batched commands, applied in order with one checkpoint
write per message; settings), send due status updates (every due head of a task's FIFO in one
``updates`` message, re-sent with jittered backoff until acknowledged), and send a heartbeat
whenever nothing else was sent for ``heartbeat_interval``.

The master is found by ``fairshare.masters.MasterFinder`` (``--master``: one address, a list of
HA masters, or etcd://): a master that does not lead names the leader, which is tried next; a
master that did not answer, or whose session ended, is not tried first next time.

A master whose leadership epoch is lower than the highest the agent admitted (checkpointed) is a
former leader: its ``registered`` is refused and a ``commands`` message of it ends the session
unapplied (agent.proto: Leadership).

Error contract (agent.proto): NOT_FOUND -> reconnect at once and reregister;
FAILED_PRECONDITION -> stop every task silently, forget them and register afresh; anything else
(UNAVAILABLE, a stream the master ended, a timeout) -> reconnect after the delay
``agent.reconnect.Reconnection`` says (a jittered backoff, capped at 2 s once connected, spread
over the master's reconnect jitter after losing a session). INVALID_ARGUMENT in answer to
the first message raises ``AgentFatalError`` (retrying cannot help).

Checkpoint (issue 5): with a ``CheckpointStore`` the state is restored from it at construction
and its tasks are recovered when ``run()`` starts (``agent.recovery``); every state change is
written (only the changed rows, one transaction) before it can be externalized: before a launch
starts in the executor, before a registered id is used, before the reregister that reports the
tasks, before any update is sent. A failed write is fatal: the agent stops without draining
(what it would report could not be recovered) and ``run()`` raises ``AgentFatalError``.

Invariants:
- Only this event loop touches ``state`` and ``executor`` (one owner of state).
- A fresh channel and stream per session, closed when the session ends; nothing is sent while
  disconnected.
- Commands of one message are applied in order; the launches among them are checkpointed
  before they start, and before any later kill of the same message is applied.
- ``stop()`` makes ``run()`` return: when connected it first kills the tasks (KILLED,
  REASON_AGENT_SHUTDOWN), sends their updates, half-closes the stream and waits, for at most
  ``drain_timeout``, for the master to end it (applying the acknowledgements it still sends).
- Timeouts use ``asyncio.timeout``, never ``asyncio.wait_for``: on Python 3.11 ``wait_for``
  swallows a cancellation that races with its awaitable completing, which hung shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import grpc
from fairshare.logs import log_event
from fairshare.masters import MasterFinder, MasterUnknown
from fairshare.task_states import TaskState
from fairshare.transport import INSECURE, ClientSecurity
from fairshare.v1 import agent_pb2, common_pb2
from fairshare.wire import WireRangeError, seconds_from_duration
from google.protobuf.duration_pb2 import Duration

from agent.backoff import Backoff
from agent.checkpoint import CheckpointError, CheckpointStore
from agent.executors.base import Report, TaskEvent
from agent.executors.router import TaskExecutors
from agent.reconnect import Reconnection
from agent.records import AgentMetrics, AgentSpec, LaunchSpec, Reason, TaskKey
from agent.recovery import recover
from agent.session import PING_INTERVAL, PING_TIMEOUT, MasterStream, Outcome, RefusedError, classify
from agent.state import AgentState, KillDecision, Outgoing, ReregisterCall
from agent.wire import (
    duration_seconds,
    heartbeat_message,
    register_message,
    reregister_message,
    updates_message,
)

__all__ = ["AgentFatalError", "AgentMetrics", "AgentRuntime", "RuntimeConfig"]

T = TypeVar("T")
_LOG = logging.getLogger("fairshare.agent")
_TS = common_pb2.TaskStatus
_MAX_UPDATES_PER_MESSAGE = 1000
MAX_HEARTBEAT_INTERVAL = 3600.0
"""The longest heartbeat interval the agent accepts from a master (longer ones are clamped)."""
MAX_RECONNECT_JITTER = 600.0
"""The longest reconnect jitter the agent accepts from a master (longer ones are clamped)."""


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """Timing and retry settings of the runtime (seconds)."""

    master: str
    security: ClientSecurity = INSECURE  # TLS and the agent's identity to the master
    status_retry_initial: float = 1.0
    status_retry_max: float = 60.0
    reconnect_initial: float = 0.25
    reconnect_max: float = 10.0
    rpc_timeout: float = 10.0
    drain_timeout: float = 3.0
    default_heartbeat_interval: float = 5.0
    kill_tasks_on_shutdown: bool = True


def _seconds(message: Duration, most: float) -> float:
    """A duration the master sent, in [0, ``most``] (malformed ones count as 0)."""
    try:
        return min(seconds_from_duration(message, "duration"), most)
    except WireRangeError:
        return 0.0


class AgentFatalError(Exception):
    """The master rejected the agent in a way no retry can fix."""


class _Stopped(Exception):
    """``stop()`` was called while waiting for the master."""


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
        retry = Backoff(config.status_retry_initial, config.status_retry_max, rng)
        minter = new_uuid or (lambda: uuid.uuid4().bytes)
        self._checkpoint = checkpoint
        self._fatal: str | None = None
        if checkpoint is None:
            self.state = AgentState(spec, retry=retry, new_uuid=minter)
        else:
            snapshot = checkpoint.load()
            self.state = AgentState.restore(spec, snapshot, retry=retry, new_uuid=minter)
        self.executor = executors(self._on_task_event)
        self._finder = MasterFinder(config.master, rng)
        self.heartbeat_interval = config.default_heartbeat_interval
        self._reconnection = Reconnection(config.reconnect_initial, config.reconnect_max, rng)
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._healthy = False  # the current session was established (registered)
        self._last_sent = 0.0  # loop time of the last message to the master
        self.reconnects_total = 0
        self.registrations_total = 0
        self.reregistrations_total = 0
        self.heartbeats_total = 0
        self.heartbeat_failures_total = 0

    # -- public surface -----------------------------------------------------------------------

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
            registrations_total=self.registrations_total,
            reregistrations_total=self.reregistrations_total,
            heartbeats_total=self.heartbeats_total,
            heartbeat_failures_total=self.heartbeat_failures_total,
            resources_total_millis=dict(state.spec.resources.millis_items()),
            resources_used_millis=dict(state.used.millis_items()),
        )

    async def run(self) -> None:
        """Connect, serve and reconnect until ``stop()``; raises ``AgentFatalError``."""
        try:
            self._recover()
            while not self._stop.is_set():
                outcome = await self._session()
                if outcome is Outcome.STOP or self._stop.is_set():
                    break
                if outcome is Outcome.REMOVED:
                    self._forget()
                delay = self._reconnection.delay(outcome, self._healthy)
                self.reconnects_total += 1
                log_event(_LOG, "master.reconnecting", why=outcome.why, delay=f"{delay:.3f}")
                await self._sleep_unless_stopped(delay)
        finally:
            if self.config.kill_tasks_on_shutdown and self._fatal is None:
                self.executor.kill_all(_TS.REASON_AGENT_SHUTDOWN)
            await self.executor.aclose()
            self._persist()
            await self._finder.close()
        if self._fatal is not None:
            raise AgentFatalError(self._fatal)

    # -- checkpoint -----------------------------------------------------------------------------

    def _recover(self) -> None:
        """Resume, restart or report the checkpointed tasks, then checkpoint the outcome."""
        if self.state.agent_id is not None or self.state.tasks():
            recover(self.state, self.executor, time.time(), self._now())
            self._persist()

    def _persist(self) -> bool:
        """Write the state's changes to the checkpoint; False once a write has failed."""
        if self._fatal is not None:
            return False
        changes = self.state.take_changes()
        if self._checkpoint is None or not changes:
            return True
        try:
            self._checkpoint.write(changes)
        except CheckpointError as error:
            self._fatal = str(error)
            log_event(_LOG, "checkpoint.write.failed", logging.ERROR, error=self._fatal)
            self._stop.set()
            return False
        return True

    # -- one session ----------------------------------------------------------------------------

    async def _session(self) -> Outcome:
        self._healthy = False
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
        stream = MasterStream(address, self._finder.report(), self.config.security)
        try:
            await self._open(stream)
            self._finder.answered(address)
            self.state.on_connected(self._now())
            self._last_sent = self._now()
            log_event(
                _LOG,
                "master.connected",
                agent_id=self.state.agent_id,
                master=address,
                master_id=self.state.master_id,
            )
            outcome = await self._serve(stream)
            if outcome is Outcome.STOP and self._fatal is None:
                await self._drain(stream)
            return outcome
        except _Stopped:
            return Outcome.STOP
        except RefusedError as error:
            log_event(
                _LOG,
                "master.refused",
                logging.WARNING,
                master=address,
                code=error.code.name,
                details=error.details,
            )
            if error.code == grpc.StatusCode.UNAVAILABLE and self._finder.redirected(
                address, error.leader
            ):
                return Outcome.REDIRECTED
            return classify(error.code)
        except grpc.aio.AioRpcError as error:
            log_event(
                _LOG,
                "master.call.failed",
                logging.WARNING,
                code=error.code().name,
                details=error.details(),
            )
            return classify(error.code())
        except TimeoutError:
            log_event(_LOG, "master.unanswered", logging.WARNING, timeout=self._timeout)
            return Outcome.RECONNECT
        finally:
            if self.state.connected:
                log_event(_LOG, "master.disconnected", agent_id=self.state.agent_id)
            self.state.on_disconnected()
            await stream.close()

    async def _open(self, stream: MasterStream) -> None:
        """Register, or reregister with every tracked task; a removed agent's reregister is
        answered FAILED_PRECONDITION (the session ends REMOVED and the next one registers)."""
        self._persist()  # the tasks a reregister reports are checkpointed first
        registration = self.state.registration()
        if isinstance(registration, ReregisterCall):
            first = reregister_message(
                registration.agent_id,
                registration.spec,
                registration.tasks,
                registration.framework_ids,
            )
        else:
            first = register_message(self.state.spec)
        what = "reregister" if isinstance(registration, ReregisterCall) else "register"
        try:
            answer = await self._unless_stopped(self._within(stream.open(first), self._timeout))
        except RefusedError as error:
            if error.code == grpc.StatusCode.INVALID_ARGUMENT:
                raise AgentFatalError(f"the master rejected {what}: {error.details}") from None
            raise
        if not self.state.admits(answer.epoch):
            raise RefusedError(
                grpc.StatusCode.UNAVAILABLE,
                f"a former leader (epoch {answer.epoch}; seen {self.state.epoch}): refused",
            )
        self.state.saw_epoch(answer.epoch)
        if isinstance(registration, ReregisterCall):
            self.state.on_reregistered(answer.master_id)
            self.reregistrations_total += 1
        else:
            self.state.on_registered(answer.agent_id, answer.master_id)
            self.registrations_total += 1
        if not self._persist():
            raise _Stopped
        self._apply_settings(answer.heartbeat_interval, answer.reconnect_jitter)
        self._healthy = True
        log_event(
            _LOG,
            "agent.reregistered"
            if isinstance(registration, ReregisterCall)
            else "agent.registered",
            agent_id=answer.agent_id,
            master_id=answer.master_id,
            resources=str(self.state.spec.resources),
            tasks=len(first.reregister.tasks),
        )

    def _apply_settings(self, heartbeat: Duration, jitter: Duration) -> None:
        seconds = _seconds(heartbeat, MAX_HEARTBEAT_INTERVAL)
        self.heartbeat_interval = seconds if seconds > 0 else self.config.default_heartbeat_interval
        self._reconnection.jitter = _seconds(jitter, MAX_RECONNECT_JITTER)

    async def _serve(self, stream: MasterStream) -> Outcome:
        """Run the reader, the update sender and heartbeats until one ends the session."""
        loops = [
            asyncio.ensure_future(self._read(stream)),
            asyncio.ensure_future(self._heartbeats(stream)),
            asyncio.ensure_future(self._send_updates(stream)),
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
        loop = asyncio.get_running_loop()
        while True:
            silent = loop.time() - stream.last_received
            if silent < PING_INTERVAL:
                await asyncio.sleep(PING_INTERVAL - silent)
                continue
            if not await stream.ping(PING_TIMEOUT):
                log_event(_LOG, "master.unresponsive", logging.WARNING, silent=f"{silent:.1f}")
                return Outcome.RECONNECT
            stream.last_received = loop.time()

    async def _await_stop(self) -> Outcome:
        await self._stop.wait()
        return Outcome.STOP

    async def _read(self, stream: MasterStream) -> Outcome:
        try:
            async for message in stream.messages():
                if message.HasField("commands") and not self.state.admits(message.commands.epoch):
                    log_event(_LOG, "master.stale", logging.WARNING, epoch=message.commands.epoch)
                    return Outcome.RECONNECT  # a former leader's commands: none is applied
                self._dispatch(message)
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

    def _send(self, stream: MasterStream, message: agent_pb2.ConnectRequest) -> bool:
        """Queue one message for the stream; False if the stream is over (the reader then
        reports how it ended)."""
        if not stream.send(message):
            return False
        self._last_sent = self._now()
        return True

    async def _heartbeats(self, stream: MasterStream) -> Outcome:
        """A heartbeat whenever nothing was sent for ``heartbeat_interval``."""
        while True:
            idle = self._now() - self._last_sent
            if idle < self.heartbeat_interval:
                await asyncio.sleep(self.heartbeat_interval - idle)
                continue
            if self._send(stream, heartbeat_message(self.state.used)):
                self.heartbeats_total += 1
            else:
                self.heartbeat_failures_total += 1
                await asyncio.sleep(self.heartbeat_interval)

    # -- status updates -------------------------------------------------------------------------

    async def _send_updates(self, stream: MasterStream) -> Outcome:
        while True:
            self._wake.clear()
            if not self._persist():
                return Outcome.STOP
            due = self.state.take_due(self._now())
            if due:
                self._send_batch(stream, due)
            next_due = self.state.next_due()
            timeout = None if next_due is None else max(0.0, next_due - self._now())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()

    def _send_batch(self, stream: MasterStream, due: Sequence[Outgoing]) -> bool:
        """Send due updates, ``_MAX_UPDATES_PER_MESSAGE`` per message; False if the stream
        is over (their retries are due at once on the next session)."""
        agent_id = self.state.agent_id or ""
        for outgoing in due:
            if outgoing.attempt > 1:
                update = outgoing.update
                log_event(
                    _LOG,
                    "status_update.retried",
                    task_id=update.task_id,
                    state=update.state.value,
                    attempt=outgoing.attempt,
                    uuid=update.uuid.hex(),
                )
        for start in range(0, len(due), _MAX_UPDATES_PER_MESSAGE):
            chunk = due[start : start + _MAX_UPDATES_PER_MESSAGE]
            message = updates_message(agent_id, [(o.update, o.latest_state) for o in chunk])
            if not self._send(stream, message):
                return False
        return True

    async def _drain(self, stream: MasterStream) -> None:
        """On stop: kill the tasks, send their updates, half-close the stream and let the master
        end it (applying the acknowledgements it still sends) within ``drain_timeout``."""
        killed = 0
        if self.config.kill_tasks_on_shutdown:
            killed = self.executor.kill_all(_TS.REASON_AGENT_SHUTDOWN)
            await self.executor.wait_idle(self.config.drain_timeout)
        if not self._persist():
            return
        outgoing = self.state.take_due(self._now(), force=True)
        log_event(_LOG, "agent.draining", killed=killed, updates=len(outgoing))
        with contextlib.suppress(TimeoutError, grpc.aio.AioRpcError):
            async with asyncio.timeout(self.config.drain_timeout):
                if outgoing and not self._send_batch(stream, outgoing):
                    return
                async for message in stream.finish():
                    self._dispatch(message)

    # -- commands and task events --------------------------------------------------------------

    def _dispatch(self, message: agent_pb2.ConnectResponse) -> None:
        kind = message.WhichOneof("message")
        if kind == "commands":
            self._apply_commands(message.commands.commands)
        elif kind == "settings":
            settings = message.settings
            self._apply_settings(settings.heartbeat_interval, settings.reconnect_jitter)
            log_event(_LOG, "master.settings", heartbeat_interval=f"{self.heartbeat_interval:g}")
        else:
            log_event(_LOG, "message.ignored", logging.WARNING, kind=kind)

    def _apply_commands(self, commands: Sequence[agent_pb2.AgentCommand]) -> None:
        """Apply commands in order, with one checkpoint write for all of them; launches are
        checkpointed and started before a later command of the batch is applied."""
        starting: list[tuple[TaskKey, LaunchSpec]] = []
        for command in commands:
            kind = command.WhichOneof("command")
            if kind == "launch_tasks":
                starting += self._admit(command.launch_tasks)
                continue
            if starting and not self._start(starting):
                return
            starting = []
            if kind == "kill_task":
                self._kill_command(command.kill_task)
            elif kind == "acknowledge_status":
                ack = command.acknowledge_status
                applied = self.state.handle_ack(
                    ack.framework_id, ack.task_id, ack.uuid, self._now()
                )
                log_event(
                    _LOG,
                    "status_update.acknowledged" if applied else "acknowledgement.ignored",
                    logging.DEBUG,
                    task_id=ack.task_id,
                    uuid=ack.uuid.hex(),
                )
            else:
                log_event(_LOG, "command.ignored", logging.WARNING)
        if starting:
            self._start(starting)
        self._persist()
        self._wake.set()

    def _admit(self, command: agent_pb2.LaunchTasksCommand) -> list[tuple[TaskKey, LaunchSpec]]:
        """Admit the tasks of a launch into the state; returns the ones to start."""
        result = self.state.handle_launch(
            command.framework_id, command.tasks, self._now(), time.time()
        )
        for key, problem in result.rejected:
            log_event(
                _LOG,
                "task.rejected",
                logging.WARNING,
                framework_id=key[0],
                task_id=key[1],
                problem=problem,
            )
        for reason in result.ignored:
            log_event(_LOG, "launch.ignored", logging.WARNING, reason=reason)
        return list(result.accepted)

    def _start(self, accepted: Sequence[tuple[TaskKey, LaunchSpec]]) -> bool:
        """Checkpoint admitted tasks, then start them (Mesos does the same); False if the
        checkpoint write failed (nothing is started)."""
        if not self._persist():
            return False
        for key, spec in accepted:
            self.executor.launch(key, spec)
            fields = spec.log_fields()
            log_event(_LOG, "task.launched", framework_id=key[0], task_id=key[1], **fields)
        return True

    def _kill_command(self, kill: agent_pb2.KillTaskCommand) -> None:
        """A master's kill: its reason (one this agent does not know: none) and grace period
        (a negative one: the task's own)."""
        reason = kill.reason if kill.reason in _TS.Reason.values() else _TS.REASON_UNSPECIFIED
        grace = None
        if kill.HasField("grace_period"):
            with contextlib.suppress(ValueError):
                grace = duration_seconds(kill.grace_period)
        self._kill(kill.framework_id, kill.task_id, reason, grace)

    def _kill(
        self,
        framework_id: str,
        task_id: str,
        reason: Reason = _TS.REASON_UNSPECIFIED,
        grace: float | None = None,
    ) -> None:
        key = (framework_id, task_id)
        decision = self.state.handle_kill(framework_id, task_id, self._now(), time.time())
        log_event(
            _LOG,
            "task.kill.requested",
            framework_id=framework_id,
            task_id=task_id,
            decision=decision.value,
            reason=_TS.Reason.Name(reason),
        )
        if decision is KillDecision.KILL and not self.executor.kill(key, reason, grace=grace):
            # Admitted but not running in the executor (cannot normally happen): report it.
            self._on_task_event(TaskEvent(key, TaskState.KILLED, message="killed"))

    def _on_task_event(self, event: TaskEvent) -> None:
        update = self.state.handle_task_status(
            event.key,
            event.state,
            self._now(),
            time.time() if event.timestamp is None else event.timestamp,
            reason=event.reason,
            message=event.message,
            exit_code=event.exit_code,
            usage=event.usage,
        )
        self._persist()
        if update is not None:
            log_event(
                _LOG,
                "task.state.changed",
                framework_id=event.key[0],
                task_id=event.key[1],
                state=event.state.value,
                reason=_TS.Reason.Name(event.reason),
                exit_code=event.exit_code,
            )
        self._wake.set()

    def _forget(self) -> None:
        """The master removed the agent: stop its tasks silently, register afresh next."""
        keys: list[TaskKey] = self.state.on_removed()
        self._persist()  # the checkpoint forgets them too (agent.proto: "drops its checkpoint")
        for key in keys:
            self.executor.kill(key, silent=True)
        log_event(_LOG, "agent.removed", logging.WARNING, tasks_killed=len(keys))

    # -- helpers ---------------------------------------------------------------------------------

    @property
    def _timeout(self) -> float:
        return self.config.rpc_timeout

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    async def _unless_stopped(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` unless ``stop()`` comes first (then cancel it, raise _Stopped)."""
        work = asyncio.ensure_future(awaitable)
        stopper = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if work.done():
            return work.result()
        work.cancel()
        raise _Stopped

    @staticmethod
    async def _within(awaitable: Awaitable[T], seconds: float) -> T:
        async with asyncio.timeout(seconds):
            return await awaitable

    async def _sleep_unless_stopped(self, delay: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._stop.wait()
