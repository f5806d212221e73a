"""The fake master of ``framework_sdk.testing``: ``FakeMaster``, its lifecycle, what a test
inspects and scripts, and the serving of each call (the gRPC adapter is
``framework_sdk._fake_servicer``; the state and rules ``framework_sdk._fake_cluster``).

Invariants: see ``framework_sdk.testing``: every request is recorded in ``calls`` in arrival
order (refused ones too); refused calls change nothing; scripting methods run on the loop the
fake master serves on; ``wait_for`` polls with a deadline.
"""

from __future__ import annotations

import asyncio
import uuid as uuid_module
from collections.abc import AsyncGenerator, Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Final

import grpc
from fairshare.health import HealthServicer
from fairshare.resources import ResourceVector
from fairshare.v1 import scheduler_pb2, scheduler_pb2_grpc
from fairshare.wire import duration_to_pb, reason_to_pb, task_state_to_pb
from google.protobuf import message as protobuf_message
from google.protobuf import timestamp_pb2

from framework_sdk._fake_cluster import FakeAgent, FakeClusterState, Refusal
from framework_sdk._fake_servicer import FakeServicer, ServicerContext
from framework_sdk._fake_types import LaunchedTask, OfferSpec
from framework_sdk.types import TaskReason, TaskState

__all__ = ["DEFAULT_REFUSE_SECONDS", "POLL_STEP", "FakeMaster"]

POLL_STEP: Final = 0.005
"""Seconds between two checks of a ``wait_for`` condition."""
DEFAULT_REFUSE_SECONDS: Final = 0.1
"""The fake's filter for declined resources when a call sets none. The real master's is 5 s;
a test would wait that long for each offer it declines (a 3-task test took 15 s), so the fake
uses a tenth of a second. Tests of filter timing pass ``default_refuse_seconds=5.0``."""


@dataclass(slots=True)
class _Stream:
    framework_id: str
    queue: asyncio.Queue[scheduler_pb2.SubscribeResponse | grpc.StatusCode | None]


class FakeMaster:
    """A fake master serving the Scheduler API on 127.0.0.1 (port chosen by the OS)."""

    def __init__(
        self,
        *,
        agents: Iterable[FakeAgent] = (),
        heartbeat_interval: float = 1.0,
        default_refuse_seconds: float = DEFAULT_REFUSE_SECONDS,
        allocation_interval: float = 0.05,
        task_time_scale: float = 1.0,
        master_id: str | None = None,
    ) -> None:
        agent_list = list(agents)
        self.master_id = master_id or uuid_module.uuid4().hex
        self.heartbeat_interval = heartbeat_interval
        self.heartbeats_paused = False
        self.allocation_interval = allocation_interval
        self.calls: list[tuple[str, protobuf_message.Message]] = []
        self.launched_tasks: list[LaunchedTask] = []
        """Every task launched (accepted), in order, as ``LaunchedTask`` values."""
        self.state = FakeClusterState(
            self._send,
            self._schedule,
            self._clock,
            agents=agent_list,
            default_refuse_seconds=default_refuse_seconds,
            simulate_tasks=bool(agent_list),
            task_time_scale=task_time_scale,
        )
        self._streams: dict[str, _Stream] = {}
        self._failures: dict[str, list[tuple[grpc.StatusCode, str]]] = {}
        self._server: grpc.aio.Server | None = None
        self._tickers: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.address = ""

    # -- lifecycle --------------------------------------------------------------------------

    @classmethod
    async def start_new(cls, **options: object) -> FakeMaster:
        """Create and start a fake master (keyword options as for the constructor)."""
        master = cls(**options)  # type: ignore[arg-type]
        await master.start()
        return master

    async def start(self) -> None:
        """Bind 127.0.0.1:0 and serve; ``address`` is then ``127.0.0.1:PORT``."""
        self._loop = asyncio.get_running_loop()
        self._server = grpc.aio.server()
        scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(FakeServicer(self), self._server)
        self._server.add_generic_rpc_handlers((HealthServicer(()).handler(),))  # SDK's pings
        port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()
        self.address = f"127.0.0.1:{port}"
        self._tickers.append(self._loop.create_task(self._heartbeats()))
        if self.state.agents:
            self._tickers.append(self._loop.create_task(self._allocations()))

    async def stop(self) -> None:
        """End every stream and stop serving."""
        for ticker in self._tickers:
            ticker.cancel()
        for stream in list(self._streams.values()):
            stream.queue.put_nowait(None)
        if self._server is not None:
            await self._server.stop(grace=0.2)
            self._server = None

    async def __aenter__(self) -> FakeMaster:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    def _clock(self) -> float:
        return asyncio.get_running_loop().time()

    def _schedule(self, delay: float, callback: Callable[[], None]) -> None:
        assert self._loop is not None
        self._loop.call_later(delay, callback)

    def _send(self, framework_id: str, event: scheduler_pb2.SubscribeResponse) -> None:
        stream = self._streams.get(framework_id)
        if stream is not None:
            stream.queue.put_nowait(event)

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            if self.heartbeats_paused:
                continue
            stamp = timestamp_pb2.Timestamp()
            stamp.GetCurrentTime()
            beat = scheduler_pb2.SubscribeResponse(
                heartbeat=scheduler_pb2.HeartbeatEvent(time=stamp)
            )
            for stream in list(self._streams.values()):
                stream.queue.put_nowait(beat)

    async def _allocations(self) -> None:
        while True:
            await asyncio.sleep(self.allocation_interval)
            self.state.allocate()

    # -- inspection -------------------------------------------------------------------------

    @property
    def framework_ids(self) -> list[str]:
        """Ids of the frameworks registered so far, in registration order."""
        return list(self.state.frameworks)

    @property
    def framework_id(self) -> str:
        """The id of the only (or latest) registered framework."""
        if not self.state.frameworks:
            raise LookupError("no framework has subscribed to the fake master")
        return list(self.state.frameworks)[-1]

    def connected(self, framework_id: str | None = None) -> bool:
        """True while the framework's stream is open."""
        return (framework_id or self.framework_id) in self._streams

    def requests(self, method: str) -> list[protobuf_message.Message]:
        """The recorded requests of one RPC (e.g. ``"Accept"``), in arrival order."""
        return [request for name, request in self.calls if name == method]

    @property
    def accepts(self) -> list[scheduler_pb2.AcceptRequest]:
        """Every Accept received (refused ones too); ``launched_tasks`` has the launches."""
        return [r for r in self.requests("Accept") if isinstance(r, scheduler_pb2.AcceptRequest)]

    @property
    def declines(self) -> list[scheduler_pb2.DeclineRequest]:
        """Every Decline received."""
        return [r for r in self.requests("Decline") if isinstance(r, scheduler_pb2.DeclineRequest)]

    @property
    def acknowledgements(self) -> list[scheduler_pb2.AcknowledgeRequest.Acknowledgement]:
        """Every acknowledgement received, in order: the items of every Acknowledge call (the
        SDK coalesces acknowledgements into bulk calls; ``requests("Acknowledge")`` has the
        calls)."""
        return [
            ack
            for r in self.requests("Acknowledge")
            if isinstance(r, scheduler_pb2.AcknowledgeRequest)
            for ack in r.acknowledgements
        ]

    def outstanding_offers(self) -> list[str]:
        """Ids of the offers still outstanding."""
        return list(self.state.offers)

    async def wait_for(
        self, condition: Callable[[], object], timeout: float = 5.0, what: str = ""
    ) -> None:
        """Poll ``condition`` until it is true; ``TimeoutError`` after ``timeout`` seconds."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not condition():
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(
                    f"fake master: timed out after {timeout:g} s waiting for {what or condition}"
                )
            await asyncio.sleep(POLL_STEP)

    # -- scripting --------------------------------------------------------------------------

    def send_offers(self, *specs: OfferSpec, framework_id: str | None = None) -> list[str]:
        """Send one OFFERS event with ``specs``; the new offer ids."""
        fid = framework_id or self.framework_id
        offers = [
            self.state.add_offer(
                fid,
                spec.agent_id,
                _vector(spec.resources),
                hostname=spec.hostname,
                attributes=spec.attributes,
                fair_tasks=spec.fair_tasks,
            )
            for spec in specs
        ]
        self._send(
            fid, scheduler_pb2.SubscribeResponse(offers=scheduler_pb2.OffersEvent(offers=offers))
        )
        return [offer.offer_id for offer in offers]

    def send_update(
        self,
        task_id: str,
        state: TaskState,
        *,
        agent_id: str = "",
        reason: TaskReason = TaskReason.UNSPECIFIED,
        message: str = "",
        with_uuid: bool = True,
        exit_code: int | None = None,
        framework_id: str | None = None,
    ) -> bytes:
        """Send a status update (with a uuid: resent until acknowledged); its uuid."""
        status = self.state.update(
            framework_id or self.framework_id,
            task_id,
            task_state_to_pb(state),
            agent_id=agent_id,
            reason=reason_to_pb(reason),
            message=message,
            with_uuid=with_uuid,
            exit_code=exit_code,
        )
        return status.uuid

    def rescind(self, offer_id: str, reason: str = "rescinded by the fake master") -> None:
        """Withdraw an outstanding offer."""
        self.state.rescind(offer_id, reason)

    def send_agent_lost(
        self, agent_id: str, message: str = "", framework_id: str | None = None
    ) -> None:
        """Send a FAILURE event."""
        event = scheduler_pb2.FailureEvent(agent_id=agent_id, message=message)
        self._send(
            framework_id or self.framework_id, scheduler_pb2.SubscribeResponse(failure=event)
        )

    def send_error(
        self,
        message: str,
        code: grpc.StatusCode = grpc.StatusCode.ABORTED,
        framework_id: str | None = None,
    ) -> None:
        """Send a fatal ERROR event, then end the stream."""
        fid = framework_id or self.framework_id
        event = scheduler_pb2.ErrorEvent(message=message, code=code.value[0])
        self._send(fid, scheduler_pb2.SubscribeResponse(error=event))
        self.drop_stream(fid, code=None)

    def drop_stream(
        self,
        framework_id: str | None = None,
        *,
        code: grpc.StatusCode | None = grpc.StatusCode.UNAVAILABLE,
    ) -> None:
        """End the framework's stream: with gRPC status ``code``, or cleanly when None."""
        stream = self._streams.get(framework_id or self.framework_id)
        if stream is not None:
            stream.queue.put_nowait(code)

    def fail_next(
        self, method: str, code: grpc.StatusCode, message: str = "injected failure"
    ) -> None:
        """Make the next call of ``method`` (``"Subscribe"``, ``"Kill"``...) fail with ``code``."""
        self._failures.setdefault(method, []).append((code, message))

    def _injected(self, method: str) -> tuple[grpc.StatusCode, str] | None:
        queued = self._failures.get(method)
        return queued.pop(0) if queued else None

    # -- serving ----------------------------------------------------------------------------

    async def _subscribe(
        self,
        request: scheduler_pb2.SubscribeRequest,
        context: ServicerContext,
    ) -> AsyncGenerator[scheduler_pb2.SubscribeResponse, None]:
        self.calls.append(("Subscribe", request))
        failure = self._injected("Subscribe")
        if failure is not None:
            await context.abort(*failure)
        try:
            framework, resubscribed = self.state.subscribe(request)
        except Refusal as refusal:
            await context.abort(refusal.code, refusal.message)
        fid = framework.framework_id
        old = self._streams.get(fid)
        if old is not None:
            error = scheduler_pb2.ErrorEvent(
                message="replaced by a newer subscription", code=grpc.StatusCode.ABORTED.value[0]
            )
            old.queue.put_nowait(scheduler_pb2.SubscribeResponse(error=error))
            old.queue.put_nowait(None)
        stream = _Stream(fid, asyncio.Queue())
        self._streams[fid] = stream
        try:
            yield scheduler_pb2.SubscribeResponse(
                subscribed=scheduler_pb2.SubscribedEvent(
                    framework_id=fid,
                    heartbeat_interval=duration_to_pb(self.heartbeat_interval),
                    master_id=self.master_id,
                    resubscribed=resubscribed,
                    weight=framework.info.weight if framework.info.HasField("weight") else 1.0,
                )
            )
            self.state.after_subscribed(fid)
            while True:
                item = await stream.queue.get()
                if item is None:
                    return
                if isinstance(item, grpc.StatusCode):
                    await context.abort(item, "stream dropped by the fake master")
                yield item
        finally:
            if self._streams.get(fid) is stream:
                del self._streams[fid]
                self.state.disconnect(fid)

    async def _unary(
        self,
        method: str,
        request: protobuf_message.Message,
        context: ServicerContext,
        apply: Callable[[], object],
    ) -> None:
        self.calls.append((method, request))
        failure = self._injected(method)
        if failure is not None:
            await context.abort(*failure)
        try:
            apply()
        except Refusal as refusal:
            await context.abort(refusal.code, refusal.message)

    def _accept(self, request: scheduler_pb2.AcceptRequest) -> None:
        self.launched_tasks.extend(LaunchedTask.from_pb(t) for t in self.state.accept(request))

    def _teardown(self, request: scheduler_pb2.TeardownRequest) -> None:
        self.state.teardown(request)
        stream = self._streams.pop(request.framework_id, None)
        if stream is not None:
            stream.queue.put_nowait(None)


def _vector(resources: ResourceVector | str) -> ResourceVector:
    return ResourceVector.parse(resources) if isinstance(resources, str) else resources
