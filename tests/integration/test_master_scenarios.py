"""One scenario suite, two masters: the SDK's fake master and a real master with an agent.

Every scenario runs through the public SDK (``framework_sdk.Framework``) against both backends
of ``scenario_backends.py`` (``backend`` is parametrized "fake" and "real"), so a framework
tested against ``framework_sdk.testing.FakeMaster`` meets the same behaviour on a real cluster:
subscription, offers, launches and their status updates, at-least-once delivery with explicit
acknowledgements, declines and their filters, suppress and revive, kills, reconciliation,
teardown, offers sized by a declared demand, and the precise errors of bad calls.

The fake master runs with the real one's settings where a framework can see them (a 5 s default
decline filter); its deliberate differences (no DRF order, scripted updates sent at once, ...)
are listed in ``framework_sdk._fake_cluster`` and lie outside what these scenarios look at. What
the suite found and the fake now does as the real master: a task's next update waits for the
acknowledgement of the previous one; an Accept using all of its offers filters nothing; a
disconnection clears the framework's decline filters; a reconciliation answers an unknown task
UNKNOWN, told as LOST to a framework not partition-aware, and refuses an empty task id; an
acknowledgement of a uuid a live task never had is NOT_FOUND; a kill reports KILLING first to a
framework with TASK_KILLING_STATE.

Every wait is bounded (``WAIT``, a scenario ``SCENARIO_TIMEOUT``); the real processes are shared
by the module (started once) and killed at its end whether the scenarios passed or not; each
real scenario starts once what the previous one left there is gone (``idle``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import grpc
import pytest
from scenario_backends import (
    AGENT_RESOURCES,
    Backend,
    fake_backend,
    idle,
    real_cluster,
    run_scenario,
    session,
)

from framework_sdk import (
    CallError,
    Capability,
    Demand,
    ErrorEvent,
    FrameworkInfo,
    InvalidArgumentError,
    NotFoundError,
    ResourceVector,
    StatusUpdate,
    Subscribed,
    TaskReason,
    TaskSpec,
    TaskState,
    UpdateSource,
)

FULL = ResourceVector.parse(AGENT_RESOURCES)
ONE = ResourceVector.parse("cpus:1;mem:1024")


def acked(updates: list[StatusUpdate]) -> list[StatusUpdate]:
    """The updates to acknowledge (with a uuid): not the SDK's reconciliation answers."""
    return [u for u in updates if u.uuid]


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """Real master and agent processes shared by the module's scenarios."""
    with real_cluster(tmp_path_factory.mktemp("scenarios")) as cluster:
        yield cluster


@pytest.fixture(params=["fake", "real"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The master under test: the SDK's fake one (new for each scenario), or the real processes
    once what the previous scenario left there is gone."""
    if request.param == "fake":
        with fake_backend() as fake:
            yield fake
    else:
        cluster: Backend = request.getfixturevalue("real")
        run_scenario(idle(cluster))
        yield cluster


def test_subscribe_then_the_whole_agent_is_offered(backend: Backend) -> None:
    async def scenario() -> None:
        async with session(backend, "subscriber") as s:
            first = await s.wait(lambda: s.events[:1], "the first event")
            assert isinstance(first[0], Subscribed)
            assert first[0].framework_id == s.fw.framework_id != ""
            assert not first[0].resubscribed and first[0].weight == 1.0
            assert first[0].heartbeat_interval > 0
            offer = await s.next_offer()
            assert offer.resources == FULL and offer.fair_tasks == 0
            assert offer.framework_id == s.fw.framework_id and offer.hostname

    run_scenario(scenario())


def test_a_launched_task_runs_finishes_and_frees_its_resources(backend: Backend) -> None:
    async def scenario() -> None:
        async with session(backend, "launcher") as s:
            offer = await s.next_offer()
            task = TaskSpec("t1", ONE, duration=0.3)
            await s.fw.launch(offer, [task], refuse_seconds=0)
            await s.wait(lambda: TaskState.FINISHED in s.states("t1"), "t1 FINISHED")
            states = s.states("t1")
            assert states == [TaskState.STARTING, TaskState.RUNNING, TaskState.FINISHED], states
            assert all(u.uuid and u.source is UpdateSource.AGENT for u in s.updates("t1"))
            assert all(u.agent_id == offer.agent_id for u in s.updates("t1"))
            # the leftover (declined with no filter) and then t1's resources come back
            await s.wait(lambda: s.offered(1) == FULL, "all offered")

    run_scenario(scenario())


def test_unacknowledged_updates_are_sent_again_on_resubscription(backend: Backend) -> None:
    async def scenario() -> None:
        info = FrameworkInfo(name="acker", failover_timeout=5.0)
        async with session(backend, info=info, implicit_acknowledgements=False) as s:
            offer = await s.next_offer()
            await s.fw.launch(offer, [TaskSpec("t1", ONE)])
            (first,) = await s.wait(lambda: acked(s.updates("t1")), "t1's first update")
            # the next update waits for this one's acknowledgement (the agent's FIFO)
            await s.quiet(lambda: acked(s.updates("t1"))[1:], "a second update before an ack")
            framework_id = s.fw.framework_id
        again = FrameworkInfo(name="acker", failover_timeout=5.0, framework_id=framework_id)
        async with session(backend, info=again, implicit_acknowledgements=False) as s:
            subscribed = await s.wait(lambda: s.events[:1], "subscribed")
            assert isinstance(subscribed[0], Subscribed) and subscribed[0].resubscribed
            (resent,) = await s.wait(lambda: acked(s.updates("t1")), "the first update resent")
            assert (resent.uuid, resent.state) == (first.uuid, first.state)
            while (last := acked(s.updates("t1"))[-1]).state is not TaskState.RUNNING:
                seen = len(acked(s.updates("t1")))
                await s.fw.acknowledge(last)
                await s.wait(lambda: acked(s.updates("t1"))[seen:], "the next update")  # noqa: B023
            await s.fw.acknowledge(last)
        async with session(backend, info=again, implicit_acknowledgements=False) as s:
            await s.fw.reconcile(["t1"])
            answer = await s.wait(lambda: s.updates("t1"), "the reconciliation answer")
            assert answer[0].state is TaskState.RUNNING and not answer[0].uuid  # nothing resent
            await s.fw.teardown()

    run_scenario(scenario())


def test_a_decline_filters_the_agent_for_refuse_seconds(backend: Backend) -> None:
    async def scenario() -> None:
        async with session(backend, "decliner") as s:
            offer = await s.next_offer()
            await s.fw.decline(offer, refuse_seconds=60)
            await s.quiet(lambda: s.offers()[1:], "an offer from a filtered agent")
            await s.fw.revive()  # clears the filter
            await s.next_offer(1, "an offer after revive")
            await s.fw.decline(s.offers()[1], refuse_seconds=0.5)
            await s.next_offer(2, "an offer once the 0.5 s filter expired")

    run_scenario(scenario())


def test_a_framework_that_reconnects_has_no_filters_left(backend: Backend) -> None:
    async def scenario() -> None:
        info = FrameworkInfo(name="returning", failover_timeout=5.0)
        async with session(backend, info=info) as s:
            await s.fw.decline(await s.next_offer(), refuse_seconds=60)
            framework_id = s.fw.framework_id
        again = FrameworkInfo(name="returning", failover_timeout=5.0, framework_id=framework_id)
        async with session(backend, info=again) as s:  # filters go with the disconnection
            assert (await s.next_offer(what="an offer at once")).resources == FULL
            await s.fw.teardown()

    run_scenario(scenario())


def test_suppress_stops_offers_until_revive(backend: Backend) -> None:
    async def scenario() -> None:
        async with session(backend, "suppressor") as s:
            offer = await s.next_offer()
            await s.fw.suppress()
            await s.fw.decline(offer, refuse_seconds=0)
            await s.quiet(lambda: s.offers()[1:], "an offer while suppressed")
            await s.fw.revive()
            assert (await s.next_offer(1, "an offer after revive")).resources == FULL

    run_scenario(scenario())


def test_kill_ends_a_running_task_killed_after_killing_if_asked(backend: Backend) -> None:
    async def scenario() -> None:
        async with session(backend, "killer") as s:
            offer = await s.next_offer()
            await s.fw.launch(offer, [TaskSpec("t1", ONE)])
            await s.wait(lambda: TaskState.RUNNING in s.states("t1"), "t1 RUNNING")
            await s.fw.kill("t1")
            await s.wait(lambda: TaskState.KILLED in s.states("t1"), "t1 KILLED")
            assert s.states("t1") == [TaskState.STARTING, TaskState.RUNNING, TaskState.KILLED]
        killing = frozenset({Capability.TASK_KILLING_STATE})
        async with session(backend, info=FrameworkInfo(name="k", capabilities=killing)) as s:
            offer = await s.next_offer()
            await s.fw.launch(offer, [TaskSpec("t1", ONE)])
            await s.wait(lambda: TaskState.RUNNING in s.states("t1"), "t1 RUNNING")
            await s.fw.kill("t1")
            await s.wait(lambda: TaskState.KILLED in s.states("t1"), "t1 KILLED")
            assert s.states("t1")[2:] == [TaskState.KILLING, TaskState.KILLED]  # as asked
            assert all(u.uuid and u.source is UpdateSource.AGENT for u in s.updates("t1"))

    run_scenario(scenario())


def test_reconcile_answers_from_the_master_without_uuid(backend: Backend) -> None:
    async def scenario() -> None:
        async with session(backend, "reconciler") as s:
            offer = await s.next_offer()
            await s.fw.launch(offer, [TaskSpec("t1", ONE), TaskSpec("t2", ONE)])
            await s.wait(lambda: s.states("t1")[1:] and s.states("t2")[1:], "both RUNNING")
            assert s.states("t1") == s.states("t2") == [TaskState.STARTING, TaskState.RUNNING]
            seen = len(s.updates())
            await s.fw.reconcile()  # implicit: every live task
            answers = await s.wait(lambda: s.updates()[seen:][1:] and s.updates()[seen:], "two")
            assert {a.task_id for a in answers} == {"t1", "t2"}
            for answer in answers:
                assert answer.state is TaskState.RUNNING and not answer.uuid
                assert answer.reason is TaskReason.RECONCILIATION
                assert answer.source is UpdateSource.MASTER and answer.agent_id == offer.agent_id
            seen = len(s.updates())
            await s.fw.reconcile(["t1"])  # explicit
            (answer,) = await s.wait(lambda: s.updates()[seen:], "one answer")
            assert (answer.task_id, answer.state) == ("t1", TaskState.RUNNING)
            seen = len(s.updates())
            await s.fw.reconcile(["nobody"])  # a task the master does not know: LOST to a
            (answer,) = await s.wait(lambda: s.updates()[seen:], "the unknown task's answer")
            assert (answer.state, answer.uuid) == (TaskState.LOST, b"")  # framework not aware
        aware = FrameworkInfo(name="aware", capabilities=frozenset({Capability.PARTITION_AWARE}))
        async with session(backend, info=aware) as s:
            await s.fw.reconcile(["nobody"])
            (answer,) = await s.wait(lambda: s.updates("nobody"), "the answer to the aware")
            assert answer.state is TaskState.UNKNOWN and answer.reason is TaskReason.RECONCILIATION

    run_scenario(scenario())


def test_teardown_removes_the_framework_and_frees_its_agent(backend: Backend) -> None:
    async def scenario() -> None:
        async with session(backend, "doomed") as s:
            offer = await s.next_offer()
            await s.fw.launch(offer, [TaskSpec("t1", FULL)])
            await s.wait(lambda: TaskState.RUNNING in s.states("t1"), "t1 RUNNING")
            framework_id = s.fw.framework_id
            await s.fw.teardown()
            await s.wait(lambda: s.ended, "the event stream to end")
        async with session(backend, "next") as s:
            offer = await s.next_offer(what="the agent, freed by the teardown")
            assert offer.resources == FULL
        gone = FrameworkInfo(name="doomed", framework_id=framework_id)
        with pytest.raises(NotFoundError):
            async with session(backend, info=gone):
                pass

    run_scenario(scenario())


def test_a_demand_sizes_offers_to_fair_tasks(backend: Backend) -> None:
    async def scenario() -> None:
        demand = Demand(task_resources=ONE, max_tasks=3)
        async with session(backend, "demanding", demand=demand) as s:
            offer = await s.next_offer()
            assert offer.fair_tasks == 3 and offer.resources == ONE * 3, offer
            await s.fw.launch(offer, [TaskSpec(f"t{n}", ONE) for n in range(3)])
            await s.fw.update_demand(ONE, 4)
            # at once: an accept using all of its offers filters nothing (no 5 s filter)
            (more, *_) = await s.wait(lambda: s.offers()[1:], "the 4th task's offer", timeout=2.0)
            assert more.fair_tasks == 1 and more.resources == ONE, more

    run_scenario(scenario())


def test_bad_calls_get_precise_errors_and_change_nothing(backend: Backend) -> None:
    async def scenario() -> None:
        with pytest.raises(InvalidArgumentError):
            async with session(backend, info=FrameworkInfo(name="x", role="bad role")):
                pass
        with pytest.raises(NotFoundError):
            async with session(backend, info=FrameworkInfo(name="x", framework_id="fw-nobody")):
                pass
        async with session(backend, "caller") as s:
            offer = await s.next_offer()
            with pytest.raises(InvalidArgumentError):  # more than offered
                await s.fw.launch(offer, [TaskSpec("big", FULL + ONE)])
            with pytest.raises(InvalidArgumentError):  # the same id twice
                await s.fw.launch(offer, [TaskSpec("twin", ONE), TaskSpec("twin", ONE)])
            with pytest.raises(NotFoundError):
                await s.fw.kill("no-such-task")
            await s.fw.launch(offer, [TaskSpec("t1", ONE)])  # the offer is still whole
            await s.wait(lambda: TaskState.RUNNING in s.states("t1"), "t1 RUNNING")
            made_up = StatusUpdate(
                "t1", offer.agent_id, TaskState.RUNNING, uuid=bytes(16), source=UpdateSource.AGENT
            )
            with pytest.raises(NotFoundError):  # a uuid t1 never had
                await s.fw.acknowledge(made_up)
            await s.fw.acknowledge(dataclasses.replace(made_up, task_id="ended"))  # stale: fine
            with pytest.raises(InvalidArgumentError):
                await s.fw.kill("t1", agent_id="ag-elsewhere")
            with pytest.raises(InvalidArgumentError):
                await s.fw.reconcile([""])
            await s.fw.launch("of-gone", [TaskSpec("t2", ONE)])  # an offer no longer there
            (dropped,) = await s.wait(lambda: s.updates("t2"), "t2 dropped by the SDK")
            assert (dropped.state, dropped.reason) == (TaskState.LOST, TaskReason.INVALID_OFFERS)
            assert not [e for e in s.events if isinstance(e, ErrorEvent)]

    run_scenario(scenario())


def test_errors_are_call_errors_with_the_grpc_code(backend: Backend) -> None:
    async def scenario() -> None:
        async with session(backend, "coded") as s:
            await s.next_offer()
            with pytest.raises(CallError) as caught:
                await s.fw.kill("no-such-task")
            assert caught.value.code is grpc.StatusCode.NOT_FOUND

    run_scenario(scenario())
