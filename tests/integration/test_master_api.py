"""The master process over its real gRPC API, driven with raw ``fairshare.v1`` stubs (no SDK).

A fake but protocol-correct agent (``wire_fakes.FakeAgent``) and raw frameworks
(``wire_fakes.FrameworkConn``) show the live offer cycle at the protocol level: DRF Table 1
(demand-aware offers sized 3 and 2 tasks), coarse whole-agent offers in DRF order, decline
filters and revive, suppress, kill, accept leftovers, offer timeout, status updates forwarded
and acknowledged back to the agent, reconciliation, failover and teardown, agent loss, health,
and SIGTERM draining. Every master runs with ``--validate`` (the core checks its invariants after
every change) and every wait is bounded. Bad requests are in ``test_master_bad_requests.py``.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from daemons import DEFAULT_MASTER_FLAGS, Daemon, health_status, wait_for
from fairshare.health import HealthCheckRequest, HealthCheckResponse
from fairshare.resources import ResourceVector
from fairshare.v1 import common_pb2, operator_pb2
from wire_fakes import (
    C,
    FakeAgent,
    FrameworkConn,
    demand,
    get_state,
    rpc_code,
    task,
    task_counts,
    vec,
)

R = ResourceVector.parse
OK = grpc.StatusCode.OK


@pytest.fixture
def channel(master: Daemon) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(master.address) as chan:
        yield chan


def framework_view(
    channel: grpc.Channel, framework_id: str
) -> operator_pb2.GetStateResponse.Framework:
    for framework in get_state(channel).frameworks:
        if framework.framework_info.framework_id == framework_id:
            return framework
    raise AssertionError(f"framework {framework_id} not in GetState")


def run_tasks(
    fw: FrameworkConn, agent: FakeAgent, offer: common_pb2.Offer, tasks: list[common_pb2.TaskInfo]
) -> None:
    """Accept ``offer`` with ``tasks``, see them RUNNING and acknowledge every update."""
    fw.accept([offer.offer_id], tasks)
    for info in tasks:
        update = fw.take("update", status__task_id=info.task_id)
        assert update.status.state == C.TASK_STATE_RUNNING
        fw.ack(update.status)


# -- health and state -----------------------------------------------------------------------------


def test_health_serving_and_empty_state(master: Daemon, channel: grpc.Channel) -> None:
    for service in (
        "",
        "fairshare.v1.SchedulerService",
        "fairshare.v1.AgentService",
        "fairshare.v1.OperatorService",
    ):
        assert health_status(master.address, service) == 1
    assert health_status(master.address, "no.such.Service") == 0  # NOT_FOUND
    state = get_state(channel)
    assert state.policy == "drf" and state.placement == "best-fit"
    assert len(state.master_id) == 32
    assert not state.agents and not state.frameworks and not state.offers
    assert "listening address=" + master.address in master.log()


# -- DRF Table 1 live --------------------------------------------------------------------------


def test_drf_table1_live_at_the_protocol_level(channel: grpc.Channel) -> None:
    """Ghodsi et al. Table 1: <1 CPU, 4 GB> and <3 CPU, 1 GB> on <9 CPU, 18 GB> -> 3 and 2 tasks."""
    a = FrameworkConn(channel, "A", demand("cpus:1;mem:4096", 20))
    b = FrameworkConn(channel, "B", demand("cpus:3;mem:1024", 20))
    agent = FakeAgent(channel, "cpus:9;mem:18432")

    [offer_a] = a.offers()
    [offer_b] = b.offers()
    assert (offer_a.fair_tasks, vec(offer_a.resources)) == (3, R("cpus:3;mem:12288"))
    assert (offer_b.fair_tasks, vec(offer_b.resources)) == (2, R("cpus:6;mem:2048"))
    assert offer_a.agent_id == offer_b.agent_id == agent.agent_id

    run_tasks(a, agent, offer_a, [task(f"a{i}", "cpus:1;mem:4096") for i in range(3)])
    run_tasks(b, agent, offer_b, [task(f"b{i}", "cpus:3;mem:1024") for i in range(2)])
    acked = {agent.take("acknowledge_status").uuid for _ in range(5)}
    assert acked == {r.status.uuid for r in agent.sent}  # every RUNNING update acknowledged

    def settled() -> operator_pb2.GetStateResponse | None:
        state = get_state(channel)
        counts = {f.framework_info.name: task_counts(f) for f in state.frameworks}
        return state if counts == {"A": {"RUNNING": 3}, "B": {"RUNNING": 2}} else None

    state = wait_for(settled, what="A 3 running, B 2 running")
    shares = {f.framework_info.name: f.dominant_share for f in state.frameworks}
    assert shares == pytest.approx({"A": 2 / 3, "B": 2 / 3}, abs=1e-9)
    resources = {f.framework_info.name: f.dominant_resource for f in state.frameworks}
    assert resources == {"A": "mem", "B": "cpus"}
    [view] = state.agents
    assert (
        view.reachable
        and vec(view.free) == R("mem:4096")
        and vec(view.used) == R("cpus:9;mem:14336")
    )
    assert vec(state.total) == R("cpus:9;mem:18432") and not state.offers
    assert len(state.tasks) == 5
    a.assert_no("offers", within=0.6)  # three allocation intervals: nothing more fits
    b.assert_no("offers", within=0.1)


# -- coarse offers, decline filters, revive, suppress -------------------------------------------


def test_coarse_offers_go_whole_agent_in_drf_order(channel: grpc.Channel) -> None:
    a = FrameworkConn(channel, "A")
    b = FrameworkConn(channel, "B")
    agents = [FakeAgent(channel, "cpus:4;mem:8192", hostname=f"h{i}") for i in range(2)]
    [offer_a] = a.offers()
    [offer_b] = b.offers()
    assert {offer_a.agent_id, offer_b.agent_id} == {x.agent_id for x in agents}
    for offer in (offer_a, offer_b):
        assert offer.fair_tasks == 0 and vec(offer.resources) == R("cpus:4;mem:8192")
    state = get_state(channel)
    assert [f.dominant_share for f in state.frameworks] == pytest.approx([0.5, 0.5])


def test_decline_refuse_seconds_is_honoured_and_revive_lifts_it(channel: grpc.Channel) -> None:
    fw = FrameworkConn(channel, "decliner")
    FakeAgent(channel, "cpus:2;mem:1024")
    [offer] = fw.offers()

    sent = time.monotonic()
    fw.decline([offer.offer_id], refuse=0.6)
    [again] = fw.offers()
    assert time.monotonic() - sent >= 0.6  # not re-offered before the filter expired
    assert again.offer_id != offer.offer_id and again.agent_id == offer.agent_id

    fw.decline([again.offer_id], refuse=60)
    fw.assert_no("offers", within=1.0)  # five allocation intervals
    fw.call_unary("Revive")
    [revived] = fw.offers(timeout=5)
    assert vec(revived.resources) == R("cpus:2;mem:1024")


def test_suppressed_framework_gets_no_offers_until_revive(channel: grpc.Channel) -> None:
    fw = FrameworkConn(channel, "quiet")
    FakeAgent(channel, "cpus:2;mem:1024")
    [offer] = fw.offers()
    fw.call_unary("Suppress")
    fw.decline([offer.offer_id], refuse=0)
    assert (
        framework_view(channel, fw.id).state
        == operator_pb2.GetStateResponse.Framework.STATE_SUPPRESSED
    )
    fw.assert_no("offers", within=1.0)
    fw.call_unary("Revive")
    fw.offers(timeout=5)
    assert (
        framework_view(channel, fw.id).state == operator_pb2.GetStateResponse.Framework.STATE_ACTIVE
    )


def test_subscribing_suppressed_gets_nothing_until_revive(channel: grpc.Channel) -> None:
    FakeAgent(channel, "cpus:1;mem:64")
    fw = FrameworkConn(channel, "starts-quiet", suppressed=True)
    fw.assert_no("offers", within=0.6)
    assert (
        framework_view(channel, fw.id).state
        == operator_pb2.GetStateResponse.Framework.STATE_SUPPRESSED
    )
    fw.call_unary("Revive")
    [offer] = fw.offers()
    assert vec(offer.resources) == R("cpus:1;mem:64")


# -- accept, kill, leftovers, offer timeout -----------------------------------------------------


def test_kill_frees_resources_for_the_next_offer(channel: grpc.Channel) -> None:
    fw = FrameworkConn(channel, "killer")
    agent = FakeAgent(channel, "cpus:2;mem:1024")
    [offer] = fw.offers()
    run_tasks(fw, agent, offer, [task("t1", "cpus:2;mem:1024")])
    fw.assert_no("offers", within=0.6)  # the whole agent is used
    fw.call_unary("Kill", task_id="t1")
    kill = agent.take("kill_task")
    assert (kill.framework_id, kill.task_id) == (fw.id, "t1")
    killed = fw.take("update", status__task_id="t1", status__state=C.TASK_STATE_KILLED)
    fw.ack(killed.status)
    [freed] = fw.offers()
    assert vec(freed.resources) == R("cpus:2;mem:1024")
    wait_for(lambda: not get_state(channel).tasks, what="the killed task to be forgotten")


def test_accept_leftovers_are_declined_and_reoffered_after_the_filter(
    channel: grpc.Channel,
) -> None:
    fw = FrameworkConn(channel, "partial")
    agent = FakeAgent(channel, "cpus:4;mem:4096")
    [offer] = fw.offers()
    fw.accept(
        [offer.offer_id], [task("half", "cpus:2;mem:2048")], filters=C.Filters(refuse_seconds=0)
    )
    [rest] = fw.offers()
    assert vec(rest.resources) == R("cpus:2;mem:2048")
    agent.take("launch_tasks")
    fw.accept([rest.offer_id], [task("quarter", "cpus:1;mem:1024")])  # default filter: 5 s
    fw.assert_no("offers", within=1.0)


def test_offer_timeout_rescinds_and_the_expired_offer_cannot_be_used(
    master_factory: Callable[..., Daemon],
) -> None:
    master = master_factory(*DEFAULT_MASTER_FLAGS, "--offer-timeout", "300ms")
    with grpc.insecure_channel(master.address) as channel:
        fw = FrameworkConn(channel, "slow")
        FakeAgent(channel, "cpus:1;mem:256")
        [offer] = fw.offers()
        assert offer.HasField("expires_at")
        rescind = fw.take("rescind", offer_id=offer.offer_id)
        assert "timed out" in rescind.reason
        assert rpc_code(lambda: fw.accept([offer.offer_id], [task("late", "cpus:1;mem:256")])) == (
            grpc.StatusCode.NOT_FOUND
        )
        [again] = fw.offers()  # the resources come back
        assert again.offer_id != offer.offer_id


# -- status updates, acknowledgements, reconciliation ------------------------------------------


def test_updates_are_reforwarded_until_acked_then_acked_by_the_master(
    channel: grpc.Channel,
) -> None:
    fw = FrameworkConn(channel, "acker")
    agent = FakeAgent(channel, "cpus:1;mem:128", auto=False)
    [offer] = fw.offers()
    fw.accept([offer.offer_id], [task("t", "cpus:1;mem:128")])
    launch = agent.take("launch_tasks")
    assert [t.task_id for t in launch.tasks] == ["t"] and launch.tasks[0].agent_id == agent.agent_id

    sent = agent.update(fw.id, "t", C.TASK_STATE_RUNNING)
    first = fw.take("update", status__task_id="t")
    agent.update(fw.id, "t", C.TASK_STATE_RUNNING, uuid_=sent.status.uuid)  # agent retry
    second = fw.take("update", status__task_id="t")
    assert first.status.uuid == second.status.uuid == sent.status.uuid
    assert first.status.source == C.TaskStatus.SOURCE_AGENT

    fw.ack(first.status)
    assert agent.take("acknowledge_status").uuid == sent.status.uuid
    fw.ack(first.status)  # a duplicate acknowledgement succeeds and does nothing
    agent.update(fw.id, "t", C.TASK_STATE_RUNNING, uuid_=sent.status.uuid)  # the ack was "lost"
    assert agent.take("acknowledge_status").uuid == sent.status.uuid  # answered by the master
    fw.assert_no("update", within=0.3)  # and not forwarded again
    assert task_counts(framework_view(channel, fw.id)) == {"RUNNING": 1}


def test_reconcile_explicit_and_implicit(channel: grpc.Channel) -> None:
    fw = FrameworkConn(channel, "recon", capabilities=[C.FrameworkInfo.CAPABILITY_PARTITION_AWARE])
    agent = FakeAgent(channel, "cpus:2;mem:256")
    [offer] = fw.offers()
    plain = FrameworkConn(channel, "plain")
    run_tasks(fw, agent, offer, [task("r1", "cpus:1;mem:128")])

    fw.call_unary("Reconcile")  # implicit: every non-terminal task
    update = fw.take("update", status__reason=C.TaskStatus.REASON_RECONCILIATION)
    assert (update.status.task_id, update.status.state) == ("r1", C.TASK_STATE_RUNNING)
    assert update.status.source == C.TaskStatus.SOURCE_MASTER and not update.status.uuid

    ref = [{"task_id": "ghost"}, {"task_id": "r1", "agent_id": agent.agent_id}]
    fw.call_unary("Reconcile", tasks=ref)
    ghost = fw.take("update", status__task_id="ghost")
    assert ghost.status.state == C.TASK_STATE_UNKNOWN
    assert fw.take("update", status__task_id="r1").status.state == C.TASK_STATE_RUNNING

    plain.call_unary("Reconcile", tasks=[{"task_id": "ghost"}])
    assert plain.take("update").status.state == C.TASK_STATE_LOST  # not partition aware


# -- failover, teardown ------------------------------------------------------------------------


def test_resubscription_replaces_the_stream_and_failover_keeps_tasks(channel: grpc.Channel) -> None:
    keep = {"failover_timeout": {"seconds": 60}}
    fw = FrameworkConn(channel, "durable", **keep)
    agent = FakeAgent(channel, "cpus:1;mem:128")
    [offer] = fw.offers()
    run_tasks(fw, agent, offer, [task("d1", "cpus:1;mem:128")])

    again = FrameworkConn(channel, "durable", framework_id=fw.id, **keep)
    assert again.subscribed.resubscribed and again.id == fw.id
    error = fw.take("error")
    assert "failed over" in error.message
    assert fw.events.wait_done(5) is None  # the old stream ended normally after the error

    again.close()
    view = wait_for(
        lambda: (
            (v := framework_view(channel, fw.id)).state
            == operator_pb2.GetStateResponse.Framework.STATE_DISCONNECTED
            and v
        ),
        what="framework disconnected",
    )
    assert view.HasField("failover_deadline") and task_counts(view) == {"RUNNING": 1}
    assert rpc_code(lambda: again.call_unary("Revive")) == grpc.StatusCode.FAILED_PRECONDITION

    back = FrameworkConn(channel, "durable", framework_id=fw.id, **keep)
    assert back.subscribed.resubscribed
    assert (
        framework_view(channel, fw.id).state == operator_pb2.GetStateResponse.Framework.STATE_ACTIVE
    )


def test_stream_end_without_failover_removes_the_framework(channel: grpc.Channel) -> None:
    fw = FrameworkConn(channel, "fleeting")
    agent = FakeAgent(channel, "cpus:1;mem:128")
    [offer] = fw.offers()
    run_tasks(fw, agent, offer, [task("f1", "cpus:1;mem:128")])
    fw.close()
    assert agent.take("kill_task").task_id == "f1"
    wait_for(lambda: not get_state(channel).frameworks, what="framework removed")
    assert rpc_code(lambda: fw.call_unary("Revive")) == grpc.StatusCode.NOT_FOUND


def test_teardown_kills_tasks_ends_the_stream_and_forgets_the_framework(
    channel: grpc.Channel,
) -> None:
    fw = FrameworkConn(channel, "doomed", failover_timeout={"seconds": 60})
    agent = FakeAgent(channel, "cpus:2;mem:256")
    [offer] = fw.offers()
    run_tasks(fw, agent, offer, [task("x1", "cpus:1;mem:128"), task("x2", "cpus:1;mem:128")])
    fw.call_unary("Teardown")
    assert "torn down" in fw.take("error").message
    assert {agent.take("kill_task").task_id for _ in range(2)} == {"x1", "x2"}
    state = get_state(channel)
    assert not state.frameworks and not state.tasks
    assert vec(state.agents[0].free) == R("cpus:2;mem:256")
    assert rpc_code(lambda: fw.call_unary("Revive")) == grpc.StatusCode.NOT_FOUND
    code = rpc_code(lambda: FrameworkConn(channel, "doomed", framework_id=fw.id))
    assert code == grpc.StatusCode.NOT_FOUND


# -- agents ------------------------------------------------------------------------------------


def test_agent_unheard_becomes_unreachable_and_rejoins_when_back(
    master_factory: Callable[..., Daemon],
) -> None:
    master = master_factory(*DEFAULT_MASTER_FLAGS, "--agent-timeout", "2s")
    with grpc.insecure_channel(master.address) as channel:
        aware = [C.FrameworkInfo.CAPABILITY_PARTITION_AWARE]
        fw = FrameworkConn(channel, "watcher", capabilities=aware, failover_timeout={"seconds": 60})
        agent = FakeAgent(channel, "cpus:1;mem:128")
        [offer] = fw.offers()
        run_tasks(fw, agent, offer, [task("u1", "cpus:1;mem:128")])
        # the agent stops heartbeating: after --agent-timeout it is unreachable
        update = fw.take("update", status__state=C.TASK_STATE_UNREACHABLE)
        assert update.status.reason == C.TaskStatus.REASON_AGENT_UNREACHABLE
        assert fw.take("failure").agent_id == agent.agent_id
        state = get_state(channel)
        [view] = state.agents
        assert view.state == operator_pb2.GetStateResponse.Agent.STATE_UNREACHABLE
        assert not view.reachable and not state.total.items
        assert agent.ended(5) == grpc.StatusCode.NOT_FOUND

        # It comes back (NOT_FOUND tells it to reregister) without the task: it rejoins the
        # pool and the task it no longer runs is reported LOST.
        agent.tasks.clear()
        assert agent.reconnect().agent_id == agent.agent_id
        lost = fw.take("update", status__task_id="u1", status__state=C.TASK_STATE_LOST)
        assert lost.status.reason == C.TaskStatus.REASON_AGENT_RESTARTED
        agent.heartbeat()
        fw.assert_no("failure", within=0.3)
        assert not agent.commands.done  # the new stream is a live registration
        [view] = get_state(channel).agents
        assert view.state == operator_pb2.GetStateResponse.Agent.STATE_ACTIVE
        assert fw.offers()[0].agent_id == agent.agent_id


def test_heartbeats_flow_on_framework_streams(master_factory: Callable[..., Daemon]) -> None:
    master = master_factory(*DEFAULT_MASTER_FLAGS, "--heartbeat-interval", "200ms")
    with grpc.insecure_channel(master.address) as channel:
        fw = FrameworkConn(channel, "listener")
        assert fw.subscribed.heartbeat_interval.ToMilliseconds() == 200
        first = fw.take("heartbeat", timeout=5)
        second = fw.take("heartbeat", timeout=5)
        assert second.time.ToNanoseconds() > first.time.ToNanoseconds()


# -- daemon: config, logs, drain ---------------------------------------------------------------


def test_config_precedence_and_json_logs(
    master_factory: Callable[..., Daemon], tmp_path: Path
) -> None:
    config = tmp_path / "master.toml"
    config.write_text('[master]\npolicy = "pf"\nplacement = "first-fit"\n', encoding="utf-8")
    master = master_factory(
        "--config",
        str(config),
        "--placement",
        "random",
        "--log-format",
        "json",
        env={"FAIRSHARE_MASTER_POLICY": "asset", "FAIRSHARE_MASTER_PLACEMENT": "first-fit"},
    )
    with grpc.insecure_channel(master.address) as channel:
        state = get_state(channel)
    assert (state.policy, state.placement) == ("asset", "random")  # env > TOML, flag > env
    lines = [json.loads(line) for line in master.log().splitlines() if line.strip()]
    assert any(line["event"] == "listening" and line["address"] == master.address for line in lines)


def test_bad_config_exits_2_naming_the_setting(tmp_path: Path) -> None:
    proc = Daemon(
        "master",
        ["--port", "0", "--work-dir", str(tmp_path / "w")],
        tmp_path / "w",
        "master.addr",
        env={"FAIRSHARE_MASTER_AGENT_TIMEOUT": "soon"},
    )
    assert proc.proc.wait(20) == 2
    assert proc.log().startswith("fairshare master: FAIRSHARE_MASTER_AGENT_TIMEOUT 'soon': ")
    assert "not a duration" in proc.log()
    proc.kill()


def test_a_busy_port_exits_1_instead_of_sharing_it(master: Daemon, tmp_path: Path) -> None:
    port = master.address.rsplit(":", 1)[1]
    second = Daemon(
        "master",
        ["--port", port, "--work-dir", str(tmp_path / "second")],
        tmp_path / "second",
        "master.addr",
    )
    assert second.proc.wait(20) == 1
    assert "listen.failed" in second.log() and not second.addr_path.exists()
    second.kill()
    assert health_status(master.address) == 1


def test_sigterm_drains_streams_and_exits_0(master: Daemon, channel: grpc.Channel) -> None:
    fw = FrameworkConn(channel, "drained", failover_timeout={"seconds": 60})
    agent = FakeAgent(channel, "cpus:1;mem:128")
    fw.offers()
    watch = channel.unary_stream(
        "/grpc.health.v1.Health/Watch",
        request_serializer=HealthCheckRequest.SerializeToString,
        response_deserializer=HealthCheckResponse.FromString,
    )(HealthCheckRequest(service=""), timeout=20)
    assert next(watch).status == 1  # SERVING
    master.signal(signal.SIGTERM)
    assert next(watch).status == 2  # NOT_SERVING while draining
    assert fw.events.wait_done(10).code() == grpc.StatusCode.UNAVAILABLE
    assert agent.ended(10) == grpc.StatusCode.UNAVAILABLE
    assert master.proc.wait(10) == 0
    assert not master.addr_path.exists()
    log = master.log()
    assert "shutdown.started" in log and "shutdown.done" in log
    assert "Traceback" not in log
    assert "framework.removed" not in log  # draining removes nothing


# -- with a real agent process -------------------------------------------------------------------


def test_drf_table1_with_a_real_agent_process(
    master: Daemon, channel: grpc.Channel, agent_factory: Callable[..., list[Daemon]]
) -> None:
    a = FrameworkConn(channel, "A", demand("cpus:1;mem:4096", 20))
    b = FrameworkConn(channel, "B", demand("cpus:3;mem:1024", 20))
    [agent] = agent_factory(master, 1, "cpus:9;mem:18432")
    for fw, shape, count in ((a, "cpus:1;mem:4096", 3), (b, "cpus:3;mem:1024", 2)):
        [offer] = fw.offers()
        assert offer.fair_tasks == count
        tasks = [task(f"{fw.subscribed.framework_id[-4:]}-{i}", shape) for i in range(count)]
        fw.accept([offer.offer_id], tasks)
    for fw, count in ((a, 3), (b, 2)):
        running: set[str] = set()
        while len(running) < count:
            update = fw.take("update")
            fw.ack(update.status)
            if update.status.state == C.TASK_STATE_RUNNING:
                running.add(update.status.task_id)

    def settled() -> bool:
        counts = {f.framework_info.name: task_counts(f) for f in get_state(channel).frameworks}
        return counts == {"A": {"RUNNING": 3}, "B": {"RUNNING": 2}}

    wait_for(settled, what="A 3 running, B 2 running")
    state = get_state(channel)
    assert [f.dominant_share for f in state.frameworks] == pytest.approx([2 / 3, 2 / 3])
    assert agent.stop() == 0
