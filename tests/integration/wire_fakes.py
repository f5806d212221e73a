"""Protocol-correct fakes over raw ``fairshare.v1`` stubs, for driving a real master process.

- ``FrameworkConn``: a framework's Subscribe stream read by a thread; events are kept in order
  and taken by kind (``take("offers")``), so waiting for one kind never loses the others.
- ``FakeAgent``: one ``Connect`` stream (agent.proto): register first, then heartbeats and
  status updates on demand, and the agent side of the status-update protocol: every launched
  task reports RUNNING, every killed task KILLED, each with a fresh uuid; commands received
  (acknowledgements included) are recorded in order. ``reconnect`` opens a new stream with a
  reregister reporting the tasks it runs, as a real agent does after its stream ended.

Every wait is bounded (``DEFAULT_TIMEOUT``); nothing here sleeps longer than a poll step.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from fairshare.resources import ResourceVector
from fairshare.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    common_pb2,
    operator_pb2,
    operator_pb2_grpc,
    scheduler_pb2,
    scheduler_pb2_grpc,
)

DEFAULT_TIMEOUT = 10.0
S = scheduler_pb2
C = common_pb2


def res(text: str) -> common_pb2.Resources:
    """Mesos text (``cpus:1;mem:4096``) as a wire ``Resources``."""
    vector = ResourceVector.parse(text)
    return C.Resources(
        items=[C.Resource(name=n, millis=m) for n, m in sorted(vector.millis_view().items())]
    )


def vec(message: common_pb2.Resources) -> ResourceVector:
    """A wire ``Resources`` as a vector."""
    return ResourceVector.from_millis({item.name: item.millis for item in message.items})


def task(task_id: str, resources: str, agent_id: str = "", **command: Any) -> common_pb2.TaskInfo:
    """A placeholder ``TaskInfo``."""
    return C.TaskInfo(
        task_id=task_id,
        agent_id=agent_id,
        resources=res(resources),
        command=C.CommandInfo(**command),
    )


def demand(shape: str, max_tasks: int | None = None) -> common_pb2.Demand:
    """A ``Demand`` of ``shape`` (unlimited when ``max_tasks`` is None)."""
    message = C.Demand(task_resources=res(shape))
    if max_tasks is not None:
        message.max_tasks = max_tasks
    return message


class EventLog:
    """Items appended by a reader thread; consumers take them in order, by predicate."""

    def __init__(self) -> None:
        self._items: list[Any] = []
        self._taken: set[int] = set()
        self._cond = threading.Condition()
        self.ended: grpc.RpcError | None = None
        self.done = False

    def append(self, item: Any) -> None:
        with self._cond:
            self._items.append(item)
            self._cond.notify_all()

    def finish(self, error: grpc.RpcError | None) -> None:
        with self._cond:
            self.ended, self.done = error, True
            self._cond.notify_all()

    def take(self, match: Callable[[Any], bool], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for index, item in enumerate(self._items):
                    if index not in self._taken and match(item):
                        self._taken.add(index)
                        return item
                left = deadline - time.monotonic()
                if left <= 0 or self.done:
                    seen = [str(i).replace("\n", " ")[:200] for i in self._items]
                    raise AssertionError(f"no {what} within {timeout:g}s; stream items: {seen}")
                self._cond.wait(left)

    def untaken(self, match: Callable[[Any], bool]) -> list[Any]:
        with self._cond:
            return [
                item
                for index, item in enumerate(self._items)
                if index not in self._taken and match(item)
            ]

    def wait_done(self, timeout: float) -> grpc.RpcError | None:
        with self._cond:
            if not self._cond.wait_for(lambda: self.done, timeout):
                raise AssertionError(f"stream did not end within {timeout:g}s")
            return self.ended


def _read(call: Iterator[Any], log: EventLog) -> None:
    try:
        for item in call:
            log.append(item)
    except grpc.RpcError as error:
        log.finish(error)
        return
    log.finish(None)


class FrameworkConn:
    """A subscribed framework: its event stream and its unary calls."""

    def __init__(
        self,
        channel: grpc.Channel,
        name: str,
        demand_: common_pb2.Demand | None = None,
        framework_id: str = "",
        suppressed: bool = False,
        **info: Any,
    ) -> None:
        self.stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        request = S.SubscribeRequest(
            framework_info=C.FrameworkInfo(framework_id=framework_id, name=name, **info),
            suppressed=suppressed,
        )
        if demand_ is not None:
            request.demand.CopyFrom(demand_)
        self.call = self.stub.Subscribe(request)
        self.events = EventLog()
        threading.Thread(target=_read, args=(self.call, self.events), daemon=True).start()
        try:
            first = self.events.take(lambda e: True, DEFAULT_TIMEOUT, "first event")
        except AssertionError:
            if self.events.ended is not None:
                raise self.events.ended from None  # Subscribe was refused: its status code
            raise
        if not first.HasField("subscribed"):
            raise AssertionError(f"first event is not subscribed: {first}")
        self.subscribed = first.subscribed
        self.id = first.subscribed.framework_id

    def take(self, kind: str, timeout: float = DEFAULT_TIMEOUT, **where: Any) -> Any:
        """The next event of ``kind`` (``offers``, ``update``, ...) whose fields match."""

        def match(event: Any) -> bool:
            if event.WhichOneof("event") != kind:
                return False
            body = getattr(event, kind)
            return all(_field(body, k) == v for k, v in where.items())

        return getattr(self.events.take(match, timeout, f"{kind} {where}"), kind)

    def offers(self, timeout: float = DEFAULT_TIMEOUT) -> list[common_pb2.Offer]:
        """The offers of the next OffersEvent."""
        return list(self.take("offers", timeout).offers)

    def pending(self, kind: str) -> list[Any]:
        """Events of ``kind`` received and not taken yet."""
        return [
            getattr(e, kind) for e in self.events.untaken(lambda e: e.WhichOneof("event") == kind)
        ]

    def assert_no(self, kind: str, within: float) -> None:
        """No event of ``kind`` arrives within ``within`` seconds (and none is waiting)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            got = self.pending(kind)
            assert not got, f"unexpected {kind}: {got}"
            time.sleep(0.02)

    def accept(self, offer_ids: list[str], tasks: list[common_pb2.TaskInfo], **kw: Any) -> Any:
        """Accept ``offer_ids`` launching ``tasks``."""
        ops = [S.Operation(launch=S.Operation.Launch(task_infos=tasks))] if tasks else []
        request = S.AcceptRequest(framework_id=self.id, offer_ids=offer_ids, operations=ops, **kw)
        return self.stub.Accept(request, timeout=DEFAULT_TIMEOUT)

    def decline(self, offer_ids: list[str], refuse: float | None = None) -> Any:
        """Decline ``offer_ids`` (with ``refuse`` seconds if given)."""
        filters = C.Filters() if refuse is None else C.Filters(refuse_seconds=refuse)
        request = S.DeclineRequest(framework_id=self.id, offer_ids=offer_ids, filters=filters)
        return self.stub.Decline(request, timeout=DEFAULT_TIMEOUT)

    def ack(self, status: common_pb2.TaskStatus) -> Any:
        """Acknowledge an update."""
        ack = S.AcknowledgeRequest.Acknowledgement(
            agent_id=status.agent_id, task_id=status.task_id, uuid=status.uuid
        )
        request = S.AcknowledgeRequest(framework_id=self.id, acknowledgements=[ack])
        return self.stub.Acknowledge(request, timeout=DEFAULT_TIMEOUT)

    def call_unary(self, method: str, **fields: Any) -> Any:
        """Call ``method`` with ``framework_id`` filled in."""
        request = getattr(S, f"{method}Request")(framework_id=self.id, **fields)
        return getattr(self.stub, method)(request, timeout=DEFAULT_TIMEOUT)

    def close(self) -> None:
        """Cancel the stream (the framework disconnects)."""
        self.call.cancel()
        self.events.wait_done(DEFAULT_TIMEOUT)


def _field(body: Any, dotted: str) -> Any:
    for part in dotted.split("__"):
        body = getattr(body, part)
    return body


class FakeAgent:
    """An agent that speaks the protocol over one stream and runs tasks instantly."""

    def __init__(
        self,
        channel: grpc.Channel,
        resources: str,
        hostname: str = "fake",
        auto: bool = True,
        port: int = 0,
    ) -> None:
        self.stub = agent_pb2_grpc.AgentServiceStub(channel)
        self.info = C.AgentInfo(
            hostname=hostname, port=port, resources=res(resources), version="test"
        )
        self.auto = auto
        self.sent: list[agent_pb2.StatusUpdate] = []
        self.errors: list[Exception] = []
        self.tasks: dict[tuple[str, str], tuple[common_pb2.TaskInfo, int]] = {}
        self.settings: list[agent_pb2.AgentSettings] = []
        registered = self._connect(agent_pb2.ConnectRequest(register=_register(self.info)))
        self.agent_id = registered.agent_id
        self.master_id = registered.master_id

    def _connect(self, first: agent_pb2.ConnectRequest) -> agent_pb2.AgentRegistered:
        """Open a stream with ``first``; the master's ``registered`` (its refusal raised)."""
        self.outgoing: queue.Queue[agent_pb2.ConnectRequest | None] = queue.Queue()
        self.outgoing.put(first)
        self.commands = EventLog()
        self.call = self.stub.Connect(iter(self.outgoing.get, None))
        answer = next(self.call)  # raises the stream's error if the master refused
        assert answer.WhichOneof("message") == "registered", answer
        self.registered: agent_pb2.AgentRegistered = answer.registered
        threading.Thread(target=self._read, args=(self.call, self.commands), daemon=True).start()
        return self.registered

    def reconnect(self) -> agent_pb2.AgentRegistered:
        """A new stream with a reregister reporting every live task (the old stream ends)."""
        tasks = [
            C.Task(
                framework_id=framework_id,
                info=info,
                status=C.TaskStatus(
                    task_id=info.task_id,
                    agent_id=self.agent_id,
                    state=state,  # type: ignore[arg-type]
                    source=C.TaskStatus.SOURCE_AGENT,
                ),
            )
            for (framework_id, _), (info, state) in sorted(self.tasks.items())
            if state not in (C.TASK_STATE_KILLED, C.TASK_STATE_FINISHED)
        ]
        message = agent_pb2.ReregisterAgent(agent_id=self.agent_id, agent_info=self.info)
        message.tasks.extend(tasks)
        return self._connect(agent_pb2.ConnectRequest(reregister=message))

    def _read(self, call: Iterator[agent_pb2.ConnectResponse], log: EventLog) -> None:
        try:
            for message in call:
                kind = message.WhichOneof("message")
                if kind == "settings":
                    self.settings.append(message.settings)
                    continue
                for command in message.commands.commands:
                    log.append(command)
                    self._track(command)
                    if self.auto:
                        try:
                            self._react(command)
                        except (grpc.RpcError, ValueError) as error:  # master or channel gone
                            self.errors.append(error)
        except grpc.RpcError as error:
            log.finish(error)
            return
        log.finish(None)

    def _track(self, command: agent_pb2.AgentCommand) -> None:
        if command.WhichOneof("command") == "launch_tasks":
            launch = command.launch_tasks
            for info in launch.tasks:
                self.tasks[(launch.framework_id, info.task_id)] = (info, C.TASK_STATE_STAGING)

    def _react(self, command: agent_pb2.AgentCommand) -> None:
        kind = command.WhichOneof("command")
        if kind == "launch_tasks":
            for info in command.launch_tasks.tasks:
                self.update(command.launch_tasks.framework_id, info.task_id, C.TASK_STATE_RUNNING)
        elif kind == "kill_task":
            kill = command.kill_task
            self.update(kill.framework_id, kill.task_id, C.TASK_STATE_KILLED)

    def send(self, message: agent_pb2.ConnectRequest) -> None:
        """Write ``message`` on the open stream."""
        self.outgoing.put(message)

    def update(
        self,
        framework_id: str,
        task_id: str,
        state: int,
        uuid_: bytes | None = None,
        latest: int | None = None,
    ) -> agent_pb2.StatusUpdate:
        """Send one status update (fresh uuid unless given); returns the update sent."""
        status = C.TaskStatus(
            task_id=task_id,
            agent_id=self.agent_id,
            state=state,  # type: ignore[arg-type]
            uuid=uuid_ or uuid.uuid4().bytes,
            source=C.TaskStatus.SOURCE_AGENT,
        )
        status.timestamp.GetCurrentTime()
        update = agent_pb2.StatusUpdate(
            framework_id=framework_id,
            status=status,
            latest_state=state if latest is None else latest,  # type: ignore[arg-type]
        )
        known = self.tasks.get((framework_id, task_id))
        if known is not None:
            self.tasks[(framework_id, task_id)] = (known[0], update.latest_state)
        self.send(agent_pb2.ConnectRequest(updates=agent_pb2.StatusUpdates(updates=[update])))
        self.sent.append(update)
        return update

    def take(self, kind: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """The next command of ``kind``: launch_tasks, kill_task or acknowledge_status."""
        item = self.commands.take(
            lambda c: c.WhichOneof("command") == kind, timeout, f"{kind} command"
        )
        return getattr(item, kind)

    def heartbeat(self) -> None:
        """One heartbeat on the open stream."""
        self.send(agent_pb2.ConnectRequest(heartbeat=agent_pb2.AgentHeartbeat()))

    def ended(self, timeout: float = DEFAULT_TIMEOUT) -> grpc.StatusCode:
        """Wait for the open stream to end; its status code."""
        error = self.commands.wait_done(timeout)
        return grpc.StatusCode.OK if error is None else error.code()

    def close(self) -> None:
        """End the stream (the agent goes away)."""
        self.call.cancel()


def _register(info: common_pb2.AgentInfo) -> agent_pb2.RegisterAgent:
    return agent_pb2.RegisterAgent(agent_info=info)


def operator(channel: grpc.Channel) -> operator_pb2_grpc.OperatorServiceStub:
    """An Operator API stub."""
    return operator_pb2_grpc.OperatorServiceStub(channel)


def get_state(channel: grpc.Channel) -> operator_pb2.GetStateResponse:
    """One GetState call."""
    return operator(channel).GetState(operator_pb2.GetStateRequest(), timeout=DEFAULT_TIMEOUT)


def task_counts(framework: operator_pb2.GetStateResponse.Framework) -> dict[str, int]:
    """``{"RUNNING": 3, ...}`` of a GetState framework."""
    return {
        C.TaskState.Name(c.state).removeprefix("TASK_STATE_"): c.count
        for c in framework.task_counts
    }


def rpc_code(call: Callable[[], Any]) -> grpc.StatusCode:
    """Run ``call`` and return the status code it failed with (OK if it succeeded)."""
    try:
        call()
    except grpc.RpcError as error:
        code: grpc.StatusCode = error.code()
        return code
    return grpc.StatusCode.OK
