"""Bad requests to a real master: each gets its precise gRPC code and changes nothing.

One master (``--validate``: the core checks its invariants after every change) is set up once
for the module: an agent ``cpus:4;mem:8192`` and a small second agent, framework F1 running task
``live`` and holding one offer on each agent, framework F2 holding nothing. Every case sends one
bad request, checks its status code, then checks that the cluster state (minus clocks) is exactly
the baseline and the master still serves. The last tests use the untouched offer for real, then
show that an already-used offer is NOT_FOUND, and that the master logged no internal error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from daemons import DEFAULT_MASTER_FLAGS, Daemon, health_status, start_master
from fairshare.v1 import agent_pb2, common_pb2, operator_pb2
from wire_fakes import C, FakeAgent, FrameworkConn, S, demand, get_state, operator, res, task

Code = grpc.StatusCode


@dataclass
class Cluster:
    master: Daemon
    channel: grpc.Channel
    agent: FakeAgent
    small: FakeAgent
    f1: FrameworkConn
    f2: FrameworkConn
    offer: common_pb2.Offer  # F1's offer on `agent` (cpus:3;mem:7168)
    small_offer: common_pb2.Offer  # F1's offer on `small`
    baseline: Any = None


def fingerprint(state: operator_pb2.GetStateResponse) -> Any:
    """Everything in GetState but clocks."""

    def r(resources: common_pb2.Resources) -> tuple[tuple[str, int], ...]:
        return tuple((i.name, i.millis) for i in resources.items)

    return (
        [(a.agent_id, a.state, r(a.free), r(a.offered), r(a.used)) for a in state.agents],
        [
            (
                f.framework_info.framework_id,
                f.state,
                f.weight,
                r(f.allocated),
                r(f.offered),
                r(f.used),
                [(c.state, c.count) for c in f.task_counts],
            )
            for f in state.frameworks
        ],
        [(t.framework_id, t.info.task_id, t.status.state) for t in state.tasks],
        [(o.offer_id, o.framework_id, o.agent_id, r(o.resources)) for o in state.offers],
        r(state.total),
        r(state.used),
        r(state.offered),
        r(state.free),
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    work_dir: Path = tmp_path_factory.mktemp("bad") / "master"
    master = start_master(work_dir, *DEFAULT_MASTER_FLAGS, "--agent-timeout", "120s")
    try:
        with grpc.insecure_channel(master.address) as channel:
            f1 = FrameworkConn(channel, "F1")
            agent = FakeAgent(channel, "cpus:4;mem:8192")
            [whole] = f1.offers()
            f1.accept(
                [whole.offer_id],
                [task("live", "cpus:1;mem:1024")],
                filters=C.Filters(refuse_seconds=0),
            )
            [offer] = f1.offers()  # the leftover, declined with refuse 0, comes back
            assert agent.take("launch_tasks").tasks[0].task_id == "live"
            f1.ack(f1.take("update", status__task_id="live").status)
            agent.take("acknowledge_status")
            small = FakeAgent(channel, "cpus:1;mem:512", hostname="small")
            [small_offer] = f1.offers()
            f2 = FrameworkConn(channel, "F2")
            c = Cluster(master, channel, agent, small, f1, f2, offer, small_offer)
            c.baseline = fingerprint(get_state(channel))
            yield c
    finally:
        master.kill()


def accept(fw: FrameworkConn, offers: list[str], *tasks: common_pb2.TaskInfo, **kw: Any) -> Any:
    return fw.accept(offers, list(tasks), **kw)


def bad_resources(*items: tuple[str, int]) -> common_pb2.Resources:
    return C.Resources(items=[C.Resource(name=n, millis=m) for n, m in items])


def raw_task(task_id: str, resources: common_pb2.Resources, **kw: Any) -> common_pb2.TaskInfo:
    return C.TaskInfo(task_id=task_id, resources=resources, **kw)


def subscribe(c: Cluster, **info: Any) -> Any:
    kw = {"name": "x", **info}
    dem = kw.pop("demand", None)
    request = S.SubscribeRequest(framework_info=C.FrameworkInfo(**kw))
    if dem is not None:
        request.demand.SetInParent()
        request.demand.CopyFrom(dem)
    return next(iter(c.f1.stub.Subscribe(request, timeout=5)))


def on_stream(agent: FakeAgent, message: agent_pb2.ConnectRequest) -> Any:
    """Send ``message`` on the agent's open stream; the master ends the stream with an error,
    raised here once the agent has reconnected (reregistering its tasks, as a real agent
    does)."""
    agent.send(message)
    agent.ended(5)
    error = agent.commands.ended
    agent.reconnect()
    if error is not None:
        raise error
    return None


def replaced(agent: FakeAgent) -> Any:
    """Open a newer stream of the agent; raises how the old one ended."""
    old = agent.commands
    agent.reconnect()
    error = old.wait_done(5)
    if error is not None:
        raise error
    return None


def agent_status(c: Cluster, state: int, uuid: bytes = b"u" * 16, **kw: Any) -> Any:
    caller = kw.pop("caller", c.agent)
    named = kw.pop("status_agent_id", caller.agent_id)
    before = kw.pop("before", [])
    status = C.TaskStatus(task_id="live", agent_id=named, state=state, uuid=uuid)
    update = agent_pb2.StatusUpdate(framework_id=c.f1.id, status=status, **kw)
    batch = [*before, update]
    return on_stream(caller, updates(batch))


def updates(batch: list[agent_pb2.StatusUpdate]) -> agent_pb2.ConnectRequest:
    return agent_pb2.ConnectRequest(updates=agent_pb2.StatusUpdates(updates=batch))


def finished_live(c: Cluster) -> agent_pb2.StatusUpdate:
    """A well-formed update that would end task ``live`` if it were applied."""
    status = C.TaskStatus(
        task_id="live",
        state=C.TASK_STATE_FINISHED,
        uuid=b"f" * 16,
        source=C.TaskStatus.SOURCE_AGENT,
    )
    return agent_pb2.StatusUpdate(framework_id=c.f1.id, status=status)


def connect(c: Cluster, first: agent_pb2.ConnectRequest) -> Any:
    """A new stream whose first message is ``first``: the master's answer (or refusal)."""
    return next(iter(c.agent.stub.Connect(iter([first]), timeout=5)))


def register(c: Cluster, resources: common_pb2.Resources, port: int = 0) -> Any:
    info = C.AgentInfo(hostname="bad", resources=resources, port=port)
    return connect(c, agent_pb2.ConnectRequest(register=agent_pb2.RegisterAgent(agent_info=info)))


def reregister(c: Cluster, agent_id: str) -> Any:
    message = agent_pb2.ReregisterAgent(
        agent_id=agent_id, agent_info=C.AgentInfo(resources=res("cpus:1"))
    )
    return connect(c, agent_pb2.ConnectRequest(reregister=message))


def acknowledge(c: Cluster, *acks: tuple[str, str, bytes]) -> Any:
    items = [
        S.AcknowledgeRequest.Acknowledgement(agent_id=a, task_id=t, uuid=u) for a, t, u in acks
    ]
    return c.f1.call_unary("Acknowledge", acknowledgements=items)


def set_weight(c: Cluster, **kw: Any) -> Any:
    request = operator_pb2.SetWeightRequest(**kw)
    return operator(c.channel).SetWeight(request, timeout=5)


def unsubscribed(method: str, framework_id: str) -> Callable[[Cluster], Any]:
    def call(c: Cluster) -> Any:
        request = getattr(S, f"{method}Request")(framework_id=framework_id)
        return getattr(c.f1.stub, method)(request, timeout=5)

    return call


OK_TASK = "cpus:1;mem:128"


def command_task(process: common_pb2.ProcessInfo) -> common_pb2.TaskInfo:
    """A command ``TaskInfo`` of ``OK_TASK``'s shape."""
    return C.TaskInfo(task_id="cmd", resources=res(OK_TASK), process=process)


CASES: list[tuple[str, Callable[[Cluster], Any], grpc.StatusCode]] = [
    # -- Accept: offers
    (
        "accept unknown offer",
        lambda c: accept(c.f1, ["nope-1"], task("t", OK_TASK)),
        Code.NOT_FOUND,
    ),
    (
        "accept foreign offer",
        lambda c: accept(c.f2, [c.offer.offer_id], task("t", OK_TASK)),
        Code.PERMISSION_DENIED,
    ),
    ("accept no offers", lambda c: accept(c.f1, [], task("t", OK_TASK)), Code.INVALID_ARGUMENT),
    (
        "accept same offer twice",
        lambda c: accept(c.f1, [c.offer.offer_id] * 2, task("t", OK_TASK)),
        Code.INVALID_ARGUMENT,
    ),
    (
        "accept offers on two agents",
        lambda c: accept(c.f1, [c.offer.offer_id, c.small_offer.offer_id], task("t", OK_TASK)),
        Code.INVALID_ARGUMENT,
    ),
    # -- Accept: tasks
    (
        "launch more than the offer holds",
        lambda c: accept(c.f1, [c.offer.offer_id], task("t", "cpus:4;mem:128")),
        Code.INVALID_ARGUMENT,
    ),
    (
        "launch more than the offer holds in sum",
        lambda c: accept(
            c.f1, [c.offer.offer_id], task("t1", "cpus:2;mem:1"), task("t2", "cpus:2;mem:1")
        ),
        Code.INVALID_ARGUMENT,
    ),
    (
        "launch on another agent",
        lambda c: accept(c.f1, [c.offer.offer_id], task("t", OK_TASK, agent_id=c.small.agent_id)),
        Code.INVALID_ARGUMENT,
    ),
    (
        "negative resources",
        lambda c: accept(c.f1, [c.offer.offer_id], raw_task("t", bad_resources(("cpus", -1000)))),
        Code.INVALID_ARGUMENT,
    ),
    (
        "duplicate resource name",
        lambda c: accept(
            c.f1, [c.offer.offer_id], raw_task("t", bad_resources(("cpus", 1), ("cpus", 1)))
        ),
        Code.INVALID_ARGUMENT,
    ),
    (
        "malformed resource name",
        lambda c: accept(c.f1, [c.offer.offer_id], raw_task("t", bad_resources(("CPU S", 1000)))),
        Code.INVALID_ARGUMENT,
    ),
    (
        "empty resource name",
        lambda c: accept(c.f1, [c.offer.offer_id], raw_task("t", bad_resources(("", 1000)))),
        Code.INVALID_ARGUMENT,
    ),
    (
        "task without resources",
        lambda c: accept(c.f1, [c.offer.offer_id], raw_task("t", bad_resources())),
        Code.INVALID_ARGUMENT,
    ),
    (
        "duplicate task ids in one call",
        lambda c: accept(c.f1, [c.offer.offer_id], task("d", OK_TASK), task("d", OK_TASK)),
        Code.INVALID_ARGUMENT,
    ),
    (
        "task id of a live task",
        lambda c: accept(c.f1, [c.offer.offer_id], task("live", OK_TASK)),
        Code.INVALID_ARGUMENT,
    ),
    (
        "empty task id",
        lambda c: accept(c.f1, [c.offer.offer_id], task("", OK_TASK)),
        Code.INVALID_ARGUMENT,
    ),
    (
        "negative duration",
        lambda c: accept(c.f1, [c.offer.offer_id], task("t", OK_TASK, duration={"seconds": -1})),
        Code.INVALID_ARGUMENT,
    ),
    # -- Accept: command tasks of a bad shape (the agent never sees them)
    *[
        (
            f"command task: {what}",
            lambda c, process=process: accept(c.f1, [c.offer.offer_id], command_task(process)),
            Code.INVALID_ARGUMENT,
        )
        for what, process in [
            ("empty command", C.ProcessInfo()),
            ("argv and shell", C.ProcessInfo(argv=["true"], shell="true")),
            ("too long argv", C.ProcessInfo(argv=["true"] * 5000)),
            ("NUL in argv", C.ProcessInfo(argv=["echo", "a\0b"])),
            ("working dir escaping with ..", C.ProcessInfo(shell="pwd", working_dir="a/../..")),
            ("absolute working dir", C.ProcessInfo(shell="pwd", working_dir="/etc")),
            ("bad environment name", C.ProcessInfo(shell="env", env={"A=B": "1"})),
            ("malformed user", C.ProcessInfo(shell="id", user="root;rm")),
        ]
    ],
    (
        "negative refuse_seconds",
        lambda c: accept(c.f1, [c.offer.offer_id], filters=C.Filters(refuse_seconds=-1)),
        Code.INVALID_ARGUMENT,
    ),
    (
        "NaN refuse_seconds",
        lambda c: accept(c.f1, [c.offer.offer_id], filters=C.Filters(refuse_seconds=math.nan)),
        Code.INVALID_ARGUMENT,
    ),
    (
        "refuse_seconds beyond a year",
        lambda c: accept(c.f1, [c.offer.offer_id], filters=C.Filters(refuse_seconds=4e7)),
        Code.INVALID_ARGUMENT,
    ),
    # -- Decline
    ("decline foreign offer", lambda c: c.f2.decline([c.offer.offer_id]), Code.PERMISSION_DENIED),
    (
        "decline with infinite refuse",
        lambda c: c.f1.decline([c.offer.offer_id], refuse=math.inf),
        Code.INVALID_ARGUMENT,
    ),
    # -- Acknowledge, Kill, Revive, Reconcile, UpdateDemand
    (
        "acknowledge unknown update",
        lambda c: acknowledge(c, (c.agent.agent_id, "live", b"\x01" * 16)),
        Code.NOT_FOUND,
    ),
    (
        "acknowledge without uuid",
        lambda c: acknowledge(c, (c.agent.agent_id, "live", b"")),
        Code.INVALID_ARGUMENT,
    ),
    (
        "acknowledge naming the wrong agent",
        lambda c: acknowledge(c, (c.small.agent_id, "live", b"\x01" * 16)),
        Code.INVALID_ARGUMENT,
    ),
    ("acknowledge nothing", lambda c: acknowledge(c), Code.INVALID_ARGUMENT),
    (
        "acknowledge a batch with one bad item",
        lambda c: acknowledge(c, ("", "ghost", b"\x02" * 16), (c.agent.agent_id, "", b"\x03")),
        Code.INVALID_ARGUMENT,
    ),
    ("kill unknown task", lambda c: c.f1.call_unary("Kill", task_id="ghost"), Code.NOT_FOUND),
    (
        "kill naming the wrong agent",
        lambda c: c.f1.call_unary("Kill", task_id="live", agent_id=c.small.agent_id),
        Code.INVALID_ARGUMENT,
    ),
    (
        "kill another framework's task",
        lambda c: c.f2.call_unary("Kill", task_id="live"),
        Code.NOT_FOUND,
    ),
    (
        "revive another role",
        lambda c: c.f1.call_unary("Revive", role="other"),
        Code.INVALID_ARGUMENT,
    ),
    (
        "suppress another role",
        lambda c: c.f1.call_unary("Suppress", role="other"),
        Code.INVALID_ARGUMENT,
    ),
    (
        "reconcile an empty task id",
        lambda c: c.f1.call_unary("Reconcile", tasks=[{"task_id": ""}]),
        Code.INVALID_ARGUMENT,
    ),
    (
        "demand with empty shape",
        lambda c: c.f1.call_unary("UpdateDemand", demand=C.Demand(max_tasks=1)),
        Code.INVALID_ARGUMENT,
    ),
    (
        "demand with negative max_tasks",
        lambda c: c.f1.call_unary("UpdateDemand", demand=demand("cpus:1", -1)),
        Code.INVALID_ARGUMENT,
    ),
    (
        "demand with negative resources",
        lambda c: c.f1.call_unary(
            "UpdateDemand", demand=C.Demand(task_resources=bad_resources(("mem", -5)))
        ),
        Code.INVALID_ARGUMENT,
    ),
    # -- calls before subscribe (unknown framework) and without a framework id
    *[
        (f"{m} before subscribe", unsubscribed(m, "fw-never-subscribed"), Code.NOT_FOUND)
        for m in (
            "Accept",
            "Decline",
            "Revive",
            "Suppress",
            "Kill",
            "Acknowledge",
            "Reconcile",
            "Teardown",
            "UpdateDemand",
        )
    ],
    *[
        (f"{m} without framework_id", unsubscribed(m, ""), Code.INVALID_ARGUMENT)
        for m in ("Accept", "Decline", "Revive", "Suppress", "Kill", "Reconcile", "Teardown")
    ],
    # -- Subscribe
    ("subscribe without name", lambda c: subscribe(c, name=""), Code.INVALID_ARGUMENT),
    (
        "subscribe with unknown id",
        lambda c: subscribe(c, framework_id="fw-unknown"),
        Code.NOT_FOUND,
    ),
    (
        "resubscribe with another name",
        lambda c: subscribe(c, framework_id=c.f1.id, name="F1b"),
        Code.INVALID_ARGUMENT,
    ),
    (
        "resubscribe with another role",
        lambda c: subscribe(c, framework_id=c.f1.id, name="F1", role="r"),
        Code.INVALID_ARGUMENT,
    ),
    ("subscribe with weight 0", lambda c: subscribe(c, weight=0.0), Code.INVALID_ARGUMENT),
    ("subscribe with NaN weight", lambda c: subscribe(c, weight=math.nan), Code.INVALID_ARGUMENT),
    ("subscribe with malformed role", lambda c: subscribe(c, role="a b"), Code.INVALID_ARGUMENT),
    (
        "subscribe with negative failover",
        lambda c: subscribe(c, failover_timeout={"seconds": -1}),
        Code.INVALID_ARGUMENT,
    ),
    (
        "subscribe with empty demand",
        lambda c: subscribe(c, demand=C.Demand()),
        Code.INVALID_ARGUMENT,
    ),
    # -- Agent API
    ("register without resources", lambda c: register(c, bad_resources()), Code.INVALID_ARGUMENT),
    (
        "register negative resources",
        lambda c: register(c, bad_resources(("cpus", -1))),
        Code.INVALID_ARGUMENT,
    ),
    ("register bad port", lambda c: register(c, res("cpus:1"), port=70000), Code.INVALID_ARGUMENT),
    (
        "first message a heartbeat",
        lambda c: connect(c, agent_pb2.ConnectRequest(heartbeat=agent_pb2.AgentHeartbeat())),
        Code.INVALID_ARGUMENT,
    ),
    (
        "empty first message",
        lambda c: connect(c, agent_pb2.ConnectRequest()),
        Code.INVALID_ARGUMENT,
    ),
    ("reregister unknown agent", lambda c: reregister(c, "ag-x"), Code.FAILED_PRECONDITION),
    ("reregister without agent id", lambda c: reregister(c, ""), Code.INVALID_ARGUMENT),
    (
        "register again on an open stream",
        lambda c: on_stream(
            c.agent,
            agent_pb2.ConnectRequest(register=agent_pb2.RegisterAgent(agent_info=c.agent.info)),
        ),
        Code.INVALID_ARGUMENT,
    ),
    ("a stream replaced by a newer one", lambda c: replaced(c.agent), Code.ABORTED),
    (
        "status with a short uuid",
        lambda c: agent_status(c, C.TASK_STATE_RUNNING, uuid=b"abc"),
        Code.INVALID_ARGUMENT,
    ),
    (
        "status with a master-only state",
        lambda c: agent_status(c, C.TASK_STATE_UNREACHABLE),
        Code.INVALID_ARGUMENT,
    ),
    (
        "status without state",
        lambda c: agent_status(c, C.TASK_STATE_UNSPECIFIED),
        Code.INVALID_ARGUMENT,
    ),
    (
        "status with bad latest_state",
        lambda c: agent_status(c, C.TASK_STATE_RUNNING, latest_state=C.TASK_STATE_GONE),
        Code.INVALID_ARGUMENT,
    ),
    (
        "status without framework id",
        lambda c: on_stream(
            c.agent,
            updates([agent_pb2.StatusUpdate(status=finished_live(c).status)]),
        ),
        Code.INVALID_ARGUMENT,
    ),
    (
        "status for a task on another agent",
        lambda c: agent_status(c, C.TASK_STATE_FINISHED, caller=c.small),
        Code.INVALID_ARGUMENT,
    ),
    (
        "status naming another agent",
        lambda c: agent_status(c, C.TASK_STATE_RUNNING, status_agent_id=c.small.agent_id),
        Code.INVALID_ARGUMENT,
    ),
    (
        "a batch with one bad update applies none",
        lambda c: agent_status(c, C.TASK_STATE_RUNNING, uuid=b"abc", before=[finished_live(c)]),
        Code.INVALID_ARGUMENT,
    ),
    (
        "a batch with one update not the agent's applies none",
        lambda c: on_stream(
            c.agent,
            updates(
                [
                    finished_live(c),
                    agent_pb2.StatusUpdate(
                        framework_id=c.f1.id,
                        status=C.TaskStatus(
                            task_id="live",
                            agent_id=c.small.agent_id,
                            state=C.TASK_STATE_RUNNING,
                            uuid=b"v" * 16,
                        ),
                    ),
                ]
            ),
        ),
        Code.INVALID_ARGUMENT,
    ),
    # -- Operator API
    ("set weight without target", lambda c: set_weight(c, weight=2.0), Code.INVALID_ARGUMENT),
    ("set weight 0", lambda c: set_weight(c, role="r", weight=0.0), Code.INVALID_ARGUMENT),
    ("set weight too large", lambda c: set_weight(c, role="r", weight=2e6), Code.INVALID_ARGUMENT),
    ("set weight bad role", lambda c: set_weight(c, role="a b", weight=2.0), Code.INVALID_ARGUMENT),
    (
        "set weight unknown framework",
        lambda c: set_weight(c, framework_id="fw-x", weight=2.0),
        Code.NOT_FOUND,
    ),
    (
        "clear weight with a weight",
        lambda c: set_weight(c, role="r", weight=2.0, clear=True),
        Code.INVALID_ARGUMENT,
    ),
]


@pytest.mark.parametrize(("name", "call", "code"), CASES, ids=[case[0] for case in CASES])
def test_bad_request_gets_its_code_and_changes_nothing(
    cluster: Cluster, name: str, call: Callable[[Cluster], Any], code: grpc.StatusCode
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        call(cluster)
    assert caught.value.code() == code, f"{name}: {caught.value.details()}"
    assert caught.value.details(), "every error has a message"
    assert fingerprint(get_state(cluster.channel)) == cluster.baseline
    assert health_status(cluster.master.address) == 1


def test_no_stray_events_reached_the_frameworks(cluster: Cluster) -> None:
    assert not cluster.f1.pending("offers") and not cluster.f1.pending("rescind")
    assert not cluster.f1.pending("error") and not cluster.f2.pending("offers")
    assert not cluster.f1.events.done and not cluster.f2.events.done


def test_the_untouched_offer_still_works_then_is_used_up(cluster: Cluster) -> None:
    c = cluster
    accept(c.f1, [c.offer.offer_id], task("fine", OK_TASK))
    assert c.agent.take("launch_tasks").tasks[0].task_id == "fine"
    with pytest.raises(grpc.RpcError) as again:
        accept(c.f1, [c.offer.offer_id], task("again", OK_TASK))
    assert again.value.code() == Code.NOT_FOUND  # already used
    log = c.master.log()
    assert "Traceback" not in log and "rpc.failed" not in log
