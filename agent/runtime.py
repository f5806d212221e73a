"""``AgentRuntime``: the asyncio shell that connects ``AgentState`` to the master over gRPC.

A session: open a channel, Register (or Reregister with the agent id and every tracked task),
open the Commands stream and await its initial metadata (the master now counts the agent as
connected), then run three loops until one of them ends the session: read commands (launch,
kill, acknowledge), Heartbeat every ``heartbeat_interval``, and send due status updates with
UpdateStatus (each head of a task's FIFO, re-sent with jittered backoff until acknowledged).

Error contract (agent.proto): NOT_FOUND -> Reregister at once; FAILED_PRECONDITION -> stop every
task silently, forget them and Register afresh; anything else (UNAVAILABLE, deadlines, a stream
the master ended) -> reconnect after a jittered exponential backoff, reset once a heartbeat
succeeds. A changed master_id in a Heartbeat response also triggers a Reregister.

Checkpoint (issue 5): with a ``CheckpointStore`` the state is restored from it at construction
and its tasks are recovered when ``run()`` starts (``agent.recovery``); every state change is
written (only the changed rows, one transaction) before it can be externalized: before a launch
starts in the executor, before Register's id is used, before the Reregister that reports the
tasks, before any UpdateStatus. A failed write is fatal: the agent stops without draining (what
it would report could not be recovered) and ``run()`` raises ``AgentFatalError``.

Invariants:
- Only this event loop touches ``state`` and ``executor`` (one owner of state).
- A fresh channel per session, closed when the session ends; nothing is sent while disconnected.
- ``stop()`` makes ``run()`` return: when connected it first kills the tasks (KILLED,
  REASON_AGENT_SHUTDOWN) and tries, for at most ``drain_timeout``, to deliver their updates.
- Register/Reregister answered INVALID_ARGUMENT raise ``AgentFatalError`` (retrying cannot help).
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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, TypeVar

import grpc
from fairshare.logs import log_event
from fairshare.task_states import TaskState
from fairshare.v1 import agent_pb2, agent_pb2_grpc, common_pb2
from fairshare.wire import resources_to_pb

from agent.backoff import Backoff
from agent.checkpoint import CheckpointError, CheckpointStore
from agent.executors.base import Report, TaskEvent
from agent.executors.router import TaskExecutors
from agent.records import AgentMetrics, AgentSpec, TaskKey
from agent.recovery import recover
from agent.state import AgentState, KillDecision, Outgoing, ReregisterCall
from agent.wire import agent_info, reregister_request, update_request

__all__ = ["AgentFatalError", "AgentMetrics", "AgentRuntime", "RuntimeConfig"]

T = TypeVar("T")
_LOG = logging.getLogger("fairshare.agent")
_TS = common_pb2.TaskStatus
_CHANNEL_OPTIONS: Final = [
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
]


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """Timing and retry settings of the runtime (seconds)."""

    master: str
    status_retry_initial: float = 1.0
    status_retry_max: float = 60.0
    reconnect_initial: float = 0.25
    reconnect_max: float = 10.0
    rpc_timeout: float = 10.0
    drain_timeout: float = 3.0
    default_heartbeat_interval: float = 5.0
    max_inflight_updates: int = 128
    kill_tasks_on_shutdown: bool = True


class AgentFatalError(Exception):
    """The master rejected the agent in a way no retry can fix."""


class _Outcome(Enum):
    """Why a session ended, most urgent first (the lowest value wins when several coincide)."""

    STOP = (0, "stopping")
    REMOVED = (1, "removed by the master: registering afresh")
    REREGISTER = (2, "registration lost or new master: reregistering")
    RECONNECT = (3, "master unavailable")

    @property
    def rank(self) -> int:
        return self.value[0]

    @property
    def why(self) -> str:
        return self.value[1]


class _Stopped(Exception):
    """``stop()`` was called while waiting for the master."""


def _classify(error: grpc.aio.AioRpcError) -> _Outcome:
    code = error.code()
    if code == grpc.StatusCode.NOT_FOUND:
        return _Outcome.REREGISTER
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return _Outcome.REMOVED
    return _Outcome.RECONNECT


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
        self.heartbeat_interval = config.default_heartbeat_interval
        self._reconnect = Backoff(config.reconnect_initial, config.reconnect_max, rng)
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._session_end: asyncio.Future[_Outcome] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        self._send_slots = asyncio.Semaphore(config.max_inflight_updates)
        self._healthy = False  # a heartbeat succeeded in the current session
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
        attempt = 0
        try:
            self._recover()
            while not self._stop.is_set():
                outcome = await self._session()
                if outcome is _Outcome.STOP or self._stop.is_set():
                    break
                if outcome is _Outcome.REMOVED:
                    self._forget()
                attempt = 1 if self._healthy else attempt + 1
                immediate = outcome is not _Outcome.RECONNECT and attempt == 1
                delay = 0.0 if immediate else self._reconnect.delay(attempt)
                self.reconnects_total += 1
                log_event(_LOG, "master.reconnecting", why=outcome.why, delay=f"{delay:.3f}")
                await self._sleep_unless_stopped(delay)
        finally:
            if self.config.kill_tasks_on_shutdown and self._fatal is None:
                self.executor.kill_all(_TS.REASON_AGENT_SHUTDOWN)
            await self.executor.aclose()
            self._persist()
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

    async def _session(self) -> _Outcome:
        self._healthy = False
        channel = grpc.aio.insecure_channel(self.config.master, options=_CHANNEL_OPTIONS)
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        call: Any = None
        try:
            await self._register(stub)
            request = agent_pb2.CommandsRequest(agent_id=self.state.agent_id or "")
            call = stub.Commands(request)
            await self._unless_stopped(self._within(call.initial_metadata(), self._timeout))
            self.state.on_connected(self._now())
            log_event(
                _LOG,
                "master.connected",
                agent_id=self.state.agent_id,
                master=self.config.master,
                master_id=self.state.master_id,
            )
            outcome = await self._serve(stub, call)
            if outcome is _Outcome.STOP and self._fatal is None:
                await self._drain(stub)
            return outcome
        except _Stopped:
            return _Outcome.STOP
        except grpc.aio.AioRpcError as error:
            log_event(
                _LOG,
                "master.call.failed",
                logging.WARNING,
                code=error.code().name,
                details=error.details(),
            )
            return _classify(error)
        except TimeoutError:
            log_event(_LOG, "master.unanswered", logging.WARNING, timeout=self._timeout)
            return _Outcome.RECONNECT
        finally:
            if self.state.connected:
                log_event(_LOG, "master.disconnected", agent_id=self.state.agent_id)
            self.state.on_disconnected()
            for send in list(self._sends):
                send.cancel()
            if call is not None:
                call.cancel()
            await channel.close(None)

    async def _register(self, stub: agent_pb2_grpc.AgentServiceAsyncStub) -> None:
        """Reregister if the agent has an id (Register afresh if it was removed), else Register."""
        self._persist()  # the tasks a Reregister reports are checkpointed first
        registration = self.state.registration()
        if isinstance(registration, ReregisterCall) and await self._reregister(stub, registration):
            return
        request = agent_pb2.RegisterRequest(agent_info=agent_info(self.state.spec))
        try:
            answer = await self._unless_stopped(stub.Register(request, timeout=self._timeout))
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise AgentFatalError(f"the master rejected Register: {error.details()}") from None
            raise
        self.state.on_registered(answer.agent_id, answer.master_id)
        if not self._persist():
            raise _Stopped
        self._set_heartbeat_interval(answer.heartbeat_interval.ToTimedelta())
        self.registrations_total += 1
        resources = str(self.state.spec.resources)
        log_event(
            _LOG,
            "agent.registered",
            agent_id=answer.agent_id,
            master_id=answer.master_id,
            resources=resources,
        )

    async def _reregister(
        self, stub: agent_pb2_grpc.AgentServiceAsyncStub, registration: ReregisterCall
    ) -> bool:
        """Reregister with every tracked task; False if the agent was removed (Register next)."""
        request = reregister_request(
            registration.agent_id, registration.spec, registration.tasks, registration.framework_ids
        )
        try:
            response = await self._unless_stopped(stub.Reregister(request, timeout=self._timeout))
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
                message = f"the master rejected Reregister: {error.details()}"
                raise AgentFatalError(message) from None
            if error.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
            self._forget()
            return False
        self.state.on_reregistered(response.master_id)
        self._persist()
        self._set_heartbeat_interval(response.heartbeat_interval.ToTimedelta())
        self.reregistrations_total += 1
        log_event(
            _LOG,
            "agent.reregistered",
            agent_id=registration.agent_id,
            master_id=response.master_id,
            tasks=len(request.tasks),
        )
        return True

    def _set_heartbeat_interval(self, interval: Any) -> None:
        seconds = interval.total_seconds()
        self.heartbeat_interval = seconds if seconds > 0 else self.config.default_heartbeat_interval

    async def _serve(self, stub: agent_pb2_grpc.AgentServiceAsyncStub, call: Any) -> _Outcome:
        """Run the command reader, heartbeats and update sender until one ends the session."""
        self._session_end = asyncio.get_running_loop().create_future()
        loops = [
            asyncio.ensure_future(self._read_commands(call)),
            asyncio.ensure_future(self._heartbeats(stub)),
            asyncio.ensure_future(self._send_updates(stub)),
            asyncio.ensure_future(self._await_stop()),
            self._session_end,
        ]
        try:
            done, _ = await asyncio.wait(loops, return_when=asyncio.FIRST_COMPLETED)
            return min((future.result() for future in done), key=lambda outcome: outcome.rank)
        finally:
            for future in loops:
                future.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            self._session_end = None

    async def _await_stop(self) -> _Outcome:
        await self._stop.wait()
        return _Outcome.STOP

    def _end_session(self, outcome: _Outcome) -> None:
        if self._session_end is not None and not self._session_end.done():
            self._session_end.set_result(outcome)

    async def _read_commands(self, call: Any) -> _Outcome:
        try:
            async for response in call:
                self._dispatch(response)
        except grpc.aio.AioRpcError as error:
            log_event(
                _LOG,
                "master.stream.ended",
                logging.WARNING,
                code=error.code().name,
                details=error.details(),
            )
            return _classify(error)
        log_event(_LOG, "master.stream.ended", logging.WARNING, code="OK")
        return _Outcome.RECONNECT

    async def _heartbeats(self, stub: agent_pb2_grpc.AgentServiceAsyncStub) -> _Outcome:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            request = agent_pb2.HeartbeatRequest(
                agent_id=self.state.agent_id or "", used=resources_to_pb(self.state.used)
            )
            try:
                response = await stub.Heartbeat(request, timeout=self._timeout)
            except grpc.aio.AioRpcError as error:
                self.heartbeat_failures_total += 1
                log_event(
                    _LOG,
                    "heartbeat.failed",
                    logging.WARNING,
                    code=error.code().name,
                    details=error.details(),
                )
                return _classify(error)
            self.heartbeats_total += 1
            self._healthy = True
            if response.master_id and response.master_id != self.state.master_id:
                log_event(_LOG, "master.changed", old=self.state.master_id, new=response.master_id)
                return _Outcome.REREGISTER

    # -- status updates -------------------------------------------------------------------------

    async def _send_updates(self, stub: agent_pb2_grpc.AgentServiceAsyncStub) -> _Outcome:
        while True:
            self._wake.clear()
            if not self._persist():
                return _Outcome.STOP
            for outgoing in self.state.take_due(self._now()):
                self._spawn_send(stub, outgoing)
            next_due = self.state.next_due()
            timeout = None if next_due is None else max(0.0, next_due - self._now())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()

    def _spawn_send(self, stub: agent_pb2_grpc.AgentServiceAsyncStub, outgoing: Outgoing) -> None:
        task = asyncio.ensure_future(self._send(stub, outgoing))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send(self, stub: agent_pb2_grpc.AgentServiceAsyncStub, outgoing: Outgoing) -> None:
        agent_id = self.state.agent_id or ""
        update = outgoing.update
        request = update_request(agent_id, update, outgoing.latest_state)
        if outgoing.attempt > 1:
            log_event(
                _LOG,
                "status_update.retried",
                task_id=update.task_id,
                state=update.state.value,
                attempt=outgoing.attempt,
                uuid=update.uuid.hex(),
            )
        async with self._send_slots:
            try:
                await stub.UpdateStatus(request, timeout=self._timeout)
            except grpc.aio.AioRpcError as error:
                log_event(
                    _LOG,
                    "status_update.undelivered",
                    logging.WARNING,
                    task_id=update.task_id,
                    code=error.code().name,
                )
                outcome = _classify(error)
                if outcome is not _Outcome.RECONNECT:
                    self._end_session(outcome)

    async def _drain(self, stub: agent_pb2_grpc.AgentServiceAsyncStub) -> None:
        """On stop: kill the tasks and give their updates one bounded chance to reach the master."""
        killed = 0
        if self.config.kill_tasks_on_shutdown:
            killed = self.executor.kill_all(_TS.REASON_AGENT_SHUTDOWN)
            await self.executor.wait_idle(self.config.drain_timeout)
        if not self._persist():
            return
        outgoing = self.state.take_due(self._now(), force=True)
        log_event(_LOG, "agent.draining", killed=killed, updates=len(outgoing))
        sends = [asyncio.ensure_future(self._send(stub, item)) for item in outgoing]
        if sends:
            await asyncio.wait(sends, timeout=self.config.drain_timeout)
            for send in sends:
                send.cancel()

    # -- commands and task events --------------------------------------------------------------

    def _dispatch(self, response: agent_pb2.CommandsResponse) -> None:
        kind = response.WhichOneof("command")
        if kind == "launch_tasks":
            self._launch(response.launch_tasks)
        elif kind == "kill_task":
            self._kill(response.kill_task.framework_id, response.kill_task.task_id)
        elif kind == "acknowledge_status":
            ack = response.acknowledge_status
            applied = self.state.handle_ack(ack.framework_id, ack.task_id, ack.uuid, self._now())
            log_event(
                _LOG,
                "status_update.acknowledged" if applied else "acknowledgement.ignored",
                logging.DEBUG,
                task_id=ack.task_id,
                uuid=ack.uuid.hex(),
            )
        else:
            log_event(_LOG, "command.ignored", logging.WARNING)
        self._persist()
        self._wake.set()

    def _launch(self, command: agent_pb2.LaunchTasksCommand) -> None:
        result = self.state.handle_launch(
            command.framework_id, command.tasks, self._now(), time.time()
        )
        if not self._persist():  # checkpointed before they start (Mesos does the same)
            return
        for key, spec in result.accepted:
            self.executor.launch(key, spec)
            fields = spec.log_fields()
            log_event(_LOG, "task.launched", framework_id=key[0], task_id=key[1], **fields)
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

    def _kill(self, framework_id: str, task_id: str) -> None:
        key = (framework_id, task_id)
        decision = self.state.handle_kill(framework_id, task_id, self._now(), time.time())
        log_event(
            _LOG,
            "task.kill.requested",
            framework_id=framework_id,
            task_id=task_id,
            decision=decision.value,
        )
        if decision is KillDecision.KILL and not self.executor.kill(key):
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
        """The master removed the agent: stop its tasks silently, Register afresh next."""
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
