"""``AgentState`` as a pure state machine: registration, launches, kills, the per-task FIFO of
unacknowledged status updates (at least once, in order, never applied twice), retries and the
reregistration payload. No sockets, no event loop: times, uuids and jitter are injected.
"""

from __future__ import annotations

import random
from datetime import timedelta
from itertools import count, pairwise

import pytest
from fairshare.backoff import Backoff
from fairshare.command import Command
from fairshare.resources import ResourceError, ResourceVector
from fairshare.task_states import TaskReason, TaskState
from fairshare.v1 import common_pb2
from fairshare.wire import resources_from_pb, resources_to_pb, task_state_from_pb
from google.protobuf import duration_pb2

from agent.core import AgentState, KillDecision, RegisterCall, ReregisterCall
from agent.core.records import AgentSpec, CommandTask, PlaceholderSpec, StatusUpdate, TaskKey
from agent.wire import (
    reregister_message,
    task_proto,
    task_spec,
    updates_message,
)

R = ResourceVector.parse
TS = common_pb2.TaskStatus
STAGING, STARTING, RUNNING = (
    TaskState.STAGING,
    TaskState.STARTING,
    TaskState.RUNNING,
)
KILLING, FINISHED, FAILED = (
    TaskState.KILLING,
    TaskState.FINISHED,
    TaskState.FAILED,
)
KILLED, ERROR, DROPPED = (
    TaskState.KILLED,
    TaskState.ERROR,
    TaskState.DROPPED,
)
FW = "fw-1"
WALL = 1_700_000_000.0


def make_state(resources: str = "cpus:4;mem:1024", *, connect: bool = True) -> AgentState:
    counter = count(1)
    state = AgentState(
        AgentSpec("host-a", 7000, R(resources), (("rack", "r1"),)),
        retry=Backoff(1.0, 8.0).jittered(random.Random(7)),
        new_uuid=lambda: next(counter).to_bytes(16, "big"),
    )
    state.on_registered("ag-1", "m-1")
    if connect:
        state.on_connected(0.0)
    return state


def info(task_id: str, resources: str = "cpus:1;mem:128", **command: float) -> common_pb2.TaskInfo:
    message = common_pb2.TaskInfo(task_id=task_id, resources=resources_to_pb(R(resources)))
    if "duration" in command:
        message.command.duration.FromTimedelta(timedelta(seconds=command["duration"]))
    return message


def launch(state: AgentState, *task_ids: str, now: float = 0.0) -> list[TaskKey]:
    result = state.handle_launch(FW, [task_spec(info(t)) for t in task_ids], now, WALL)
    return [key for key, _ in result.accepted]


def run_to(state: AgentState, key: TaskKey, *states: int, now: float = 0.0) -> list[StatusUpdate]:
    out = []
    for new_state in states:
        update = state.handle_task_status(key, new_state, now, WALL)  # type: ignore[arg-type]
        assert update is not None
        out.append(update)
    return out


def heads(state: AgentState, now: float, *, force: bool = False) -> list[tuple[str, int, bytes]]:
    return [
        (o.update.task_id, o.update.state, o.update.uuid) for o in state.take_due(now, force=force)
    ]


# -- registration ---------------------------------------------------------------------------------


def test_first_registration_is_register_then_reregister_with_tasks() -> None:
    counter = count(1)
    state = AgentState(
        AgentSpec("h", 1, R("cpus:2")),
        retry=Backoff(1.0, 8.0).jittered(random.Random(0)),
        new_uuid=lambda: next(counter).to_bytes(16, "big"),
    )
    assert isinstance(state.registration(), RegisterCall)
    state.on_registered("ag-9", "m-1")
    call = state.registration()
    assert isinstance(call, ReregisterCall)
    assert (call.agent_id, call.tasks, call.framework_ids) == ("ag-9", (), ())


def test_reregistration_payload_carries_live_and_unacknowledged_terminal_tasks() -> None:
    state = make_state()
    running, done, _staging = launch(state, "t-run", "t-done", "t-stage")
    run_to(state, running, STARTING, RUNNING)
    run_to(state, done, STARTING, RUNNING, FINISHED)
    state.handle_kill("fw-other", "ghost", 0.0, WALL)  # DROPPED update, no task record
    call = state.registration()
    assert isinstance(call, ReregisterCall)
    by_id = {view.info.task_id: view for view in call.tasks}
    assert by_id["t-run"].state == RUNNING
    assert by_id["t-done"].state == FINISHED
    assert by_id["t-stage"].state == STAGING
    assert set(by_id) == {"t-run", "t-done", "t-stage"}
    assert call.framework_ids == ("fw-1", "fw-other")
    message = reregister_message(call.agent_id, call.spec, call.tasks, call.framework_ids)
    assert message.WhichOneof("message") == "reregister"
    request = message.reregister
    assert request.agent_id == "ag-1"
    assert request.agent_info.hostname == "host-a"
    assert [(a.name, a.value) for a in request.agent_info.attributes] == [("rack", "r1")]
    tasks = {task.info.task_id: task for task in request.tasks}
    assert task_state_from_pb(tasks["t-done"].status.state) is FINISHED
    assert tasks["t-done"].status.uuid == by_id["t-done"].latest.uuid  # type: ignore[union-attr]
    assert tasks["t-run"].info.agent_id == "ag-1"
    assert task_state_from_pb(tasks["t-stage"].status.state) is STAGING
    assert tasks["t-stage"].status.uuid == b""
    assert all(task.framework_id == FW for task in request.tasks)


def test_acknowledged_terminal_task_leaves_the_reregistration_payload() -> None:
    state = make_state()
    (key,) = launch(state, "t")
    for update in run_to(state, key, STARTING, RUNNING, FINISHED):
        assert state.handle_ack(FW, "t", update.uuid, 0.0)
    assert state.task(key) is None
    call = state.registration()
    assert isinstance(call, ReregisterCall)
    assert call.tasks == () and call.framework_ids == ()


def test_removed_agent_forgets_everything_and_registers_afresh() -> None:
    state = make_state()
    live, done = launch(state, "live", "done")
    run_to(state, live, STARTING, RUNNING)
    run_to(state, done, STARTING, FAILED)
    assert state.on_removed() == [live]
    assert isinstance(state.registration(), RegisterCall)
    assert state.tasks() == [] and state.pending_updates() == 0
    assert state.used == ResourceVector()
    assert state.handle_task_status(live, KILLED, 0.0, WALL) is None  # late executor report


# -- launches -------------------------------------------------------------------------------------


def test_launch_admits_tasks_that_fit_as_staging_and_counts_them_used() -> None:
    state = make_state("cpus:2;mem:256")
    result = state.handle_launch(FW, [task_spec(info("a")), task_spec(info("b"))], 0.0, WALL)
    assert [key for key, _ in result.accepted] == [(FW, "a"), (FW, "b")]
    assert state.used == R("cpus:2;mem:256")
    assert state.free == ResourceVector()
    assert state.task((FW, "a")).state == STAGING  # type: ignore[union-attr]
    assert state.pending_updates() == 0  # the executor reports STARTING, not the launch


def test_launch_that_does_not_fit_is_answered_with_error() -> None:
    state = make_state("cpus:1;mem:256")
    result = state.handle_launch(FW, [task_spec(info("a")), task_spec(info("b"))], 0.0, WALL)
    assert [key for key, _ in result.accepted] == [(FW, "a")]
    assert [key for key, _ in result.rejected] == [(FW, "b")]
    assert "do not fit" in result.rejected[0][1]
    (error,) = state.pending((FW, "b"))
    assert (error.state, error.reason) == (ERROR, TaskReason.TASK_INVALID)
    assert state.used == R("cpus:1;mem:128")  # the rejected task holds nothing


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda t: t.ClearField("resources"), "no resources"),
        (lambda t: t.resources.items.add(name="cpus", millis=1), "twice"),
        (lambda t: t.resources.items.add(name="gpus", millis=-5), "negative"),
        (lambda t: setattr(t, "agent_id", "ag-other"), "ag-other"),
        (lambda t: t.command.duration.CopyFrom(duration_pb2.Duration(seconds=-1)), "negative"),
    ],
    ids=["empty", "duplicate", "negative", "other-agent", "negative-duration"],
)
def test_invalid_task_is_answered_with_error(mutate, fragment: str) -> None:  # type: ignore[no-untyped-def]
    state = make_state()
    task = info("bad")
    mutate(task)
    result = state.handle_launch(FW, [task_spec(task)], 0.0, WALL)
    assert result.accepted == ()
    assert fragment in result.rejected[0][1]
    assert state.task((FW, "bad")).state == ERROR  # type: ignore[union-attr]
    assert state.used == ResourceVector()


def test_launch_of_a_live_task_is_ignored_and_a_finished_id_may_be_reused() -> None:
    state = make_state()
    (key,) = launch(state, "t")
    again = state.handle_launch(FW, [task_spec(info("t"))], 0.0, WALL)
    assert again.accepted == () and "already live" in again.ignored[0]
    run_to(state, key, STARTING, RUNNING, FINISHED)
    reuse = state.handle_launch(FW, [task_spec(info("t"))], 0.0, WALL)
    assert [k for k, _ in reuse.accepted] == [key]
    assert [u.state for u in state.pending(key)] == [STARTING, RUNNING, FINISHED]  # kept in order


def test_launch_without_ids_is_ignored() -> None:
    state = make_state()
    assert state.handle_launch("", [task_spec(info("t"))], 0.0, WALL).ignored
    result = state.handle_launch(FW, [task_spec(info(""))], 0.0, WALL)
    assert result.accepted == () and result.rejected == () and result.ignored
    assert state.tasks() == []


def test_command_spec_is_passed_to_the_executor() -> None:
    state = make_state()
    result = state.handle_launch(FW, [task_spec(info("t", duration=2.5))], 0.0, WALL)
    ((_, spec),) = result.accepted
    assert isinstance(spec, PlaceholderSpec)
    assert spec.duration == pytest.approx(2.5)
    ((_, spec_forever),) = state.handle_launch(FW, [task_spec(info("u"))], 0.0, WALL).accepted
    assert isinstance(spec_forever, PlaceholderSpec) and spec_forever.duration is None


def test_a_command_task_is_passed_with_its_resources() -> None:
    state = make_state()
    message = info("c", "cpus:0.5;mem:64")
    message.process.shell = "echo hi"
    ((_, spec),) = state.handle_launch(FW, [task_spec(message)], 0.0, WALL).accepted
    assert spec == CommandTask(Command(shell="echo hi"), R("cpus:0.5;mem:64"))
    assert state.used == R("cpus:0.5;mem:64")


def test_a_command_of_a_bad_shape_is_answered_with_error_command_invalid() -> None:
    state = make_state()
    message = info("c")
    message.process.argv.extend(["ls"])
    message.process.working_dir = "../../etc"
    result = state.handle_launch(FW, [task_spec(message)], 0.0, WALL)
    assert result.accepted == () and "working_dir" in result.rejected[0][1]
    (error,) = state.pending((FW, "c"))
    assert (error.state, error.reason) == (ERROR, TaskReason.COMMAND_INVALID)
    assert state.used == R("")


# -- the status update FIFO -----------------------------------------------------------------------


def test_only_the_head_of_a_task_is_due_and_acks_advance_it_in_order() -> None:
    state = make_state()
    (key,) = launch(state, "t")
    starting, running, finished = run_to(state, key, STARTING, RUNNING, FINISHED)
    assert heads(state, 0.0) == [("t", STARTING, starting.uuid)]
    assert heads(state, 0.1) == []  # in flight, not due again before its backoff
    assert state.handle_ack(FW, "t", starting.uuid, 0.2)
    assert heads(state, 0.2) == [("t", RUNNING, running.uuid)]
    assert state.handle_ack(FW, "t", running.uuid, 0.3)
    assert heads(state, 0.3) == [("t", FINISHED, finished.uuid)]
    assert state.handle_ack(FW, "t", finished.uuid, 0.4)
    assert state.pending_updates() == 0 and state.next_due() is None


def test_uuids_are_distinct_per_update() -> None:
    state = make_state()
    (key,) = launch(state, "t")
    updates = run_to(state, key, STARTING, RUNNING, FINISHED)
    assert len({u.uuid for u in updates}) == 3


def test_latest_state_tells_the_master_the_newest_state_while_older_updates_wait() -> None:
    state = make_state()
    (key,) = launch(state, "t")
    run_to(state, key, STARTING, RUNNING, FINISHED)
    (outgoing,) = state.take_due(0.0)
    assert (outgoing.update.state, outgoing.latest_state) == (STARTING, FINISHED)
    assert outgoing.attempt == 1


def test_unacknowledged_head_is_resent_with_the_same_uuid_after_a_growing_backoff() -> None:
    state = make_state()
    (key,) = launch(state, "t")
    (starting,) = run_to(state, key, STARTING)
    sent_at = []
    now = 0.0
    while len(sent_at) < 5:
        due = state.take_due(now)
        if due:
            assert [(o.update.uuid, o.attempt) for o in due] == [(starting.uuid, len(sent_at) + 1)]
            sent_at.append(now)
        now = round(now + 0.01, 2)
    gaps = [b - a for a, b in pairwise(sent_at)]
    for attempt, gap in enumerate(gaps, start=1):  # equal jitter: [base/2, base], capped at 8
        base = min(8.0, 2.0 ** (attempt - 1))
        assert base / 2 - 0.011 <= gap <= base + 0.011
    assert state.update_retries_total == 4 and state.updates_sent_total == 5
    assert state.pending(key) == [starting]  # never dropped without an acknowledgement


def test_updates_of_different_tasks_are_independent() -> None:
    state = make_state()
    a, b = launch(state, "a", "b")
    (a_start,) = run_to(state, a, STARTING)
    (b_start,) = run_to(state, b, STARTING)
    assert sorted(heads(state, 0.0)) == [
        ("a", STARTING, a_start.uuid),
        ("b", STARTING, b_start.uuid),
    ]
    state.handle_ack(FW, "b", b_start.uuid, 0.1)
    (b_run,) = run_to(state, b, RUNNING, now=0.1)
    assert heads(state, 0.1) == [("b", RUNNING, b_run.uuid)]  # a waits for its own backoff


def test_out_of_order_duplicate_and_unknown_acks_are_ignored() -> None:
    state = make_state()
    (key,) = launch(state, "t")
    starting, running = run_to(state, key, STARTING, RUNNING)
    assert not state.handle_ack(FW, "t", running.uuid, 0.0)  # not the head: ignored
    assert not state.handle_ack(FW, "t", b"\xff" * 16, 0.0)  # unknown uuid
    assert not state.handle_ack(FW, "other", starting.uuid, 0.0)  # wrong task
    assert not state.handle_ack("fw-x", "t", starting.uuid, 0.0)  # wrong framework
    assert state.pending(key) == [starting, running]
    assert state.handle_ack(FW, "t", starting.uuid, 0.0)
    assert not state.handle_ack(FW, "t", starting.uuid, 0.0)  # duplicate: not applied twice
    assert state.pending(key) == [running]
    assert (state.acks_applied_total, state.acks_ignored_total) == (1, 5)


def test_nothing_is_due_while_disconnected_and_everything_at_once_after_reconnecting() -> None:
    state = make_state()
    a, b = launch(state, "a", "b")
    run_to(state, a, STARTING)
    run_to(state, b, STARTING)
    assert len(state.take_due(0.0)) == 2
    state.on_disconnected()
    assert state.take_due(100.0) == [] and state.next_due() is None
    state.on_connected(100.0)
    due = state.take_due(100.0)
    assert [o.attempt for o in due] == [1, 1]  # fresh backoff after reconnecting
    assert state.next_due() is not None and state.next_due() > 100.0  # type: ignore[operator]


def test_force_hands_out_every_head_now() -> None:
    state = make_state()
    (key,) = launch(state, "t")
    run_to(state, key, STARTING)
    state.take_due(0.0)
    assert len(state.take_due(0.0, force=True)) == 1


def test_task_state_only_moves_forward() -> None:
    state = make_state()
    (key,) = launch(state, "t")
    run_to(state, key, STARTING, RUNNING)
    assert state.handle_task_status(key, STARTING, 0.0, WALL) is None
    assert state.handle_task_status(key, RUNNING, 0.0, WALL) is None
    run_to(state, key, FINISHED)
    assert state.handle_task_status(key, KILLED, 0.0, WALL) is None
    assert state.handle_task_status((FW, "nope"), RUNNING, 0.0, WALL) is None
    assert [u.state for u in state.pending(key)] == [STARTING, RUNNING, FINISHED]


def test_terminal_state_frees_resources_and_counts() -> None:
    state = make_state("cpus:1;mem:128")
    (key,) = launch(state, "t")
    run_to(state, key, STARTING, RUNNING)
    assert state.free == ResourceVector()
    (failed,) = [
        state.handle_task_status(
            key, FAILED, 0.0, WALL, reason=TaskReason.COMMAND_FAILED, exit_code=3
        )
    ]
    assert failed is not None and failed.exit_code == 3
    assert state.used == ResourceVector()
    assert state.terminal_total == {"FAILED": 1}
    assert state.task_counts() == {"FAILED": 1}


# -- kills ----------------------------------------------------------------------------------------


def test_kill_of_a_live_task_queues_killing_once() -> None:
    state = make_state()
    (key,) = launch(state, "t")
    run_to(state, key, STARTING, RUNNING)
    assert state.handle_kill(FW, "t", 0.0, WALL) is KillDecision.KILL
    assert state.handle_kill(FW, "t", 0.0, WALL) is KillDecision.KILL
    run_to(state, key, KILLED)
    assert [u.state for u in state.pending(key)] == [STARTING, RUNNING, KILLING, KILLED]
    assert state.handle_kill(FW, "t", 0.0, WALL) is KillDecision.ALREADY_TERMINAL


def test_kill_of_an_unknown_task_reports_dropped() -> None:
    state = make_state()
    assert state.handle_kill(FW, "ghost", 0.0, WALL) is KillDecision.UNKNOWN
    (outgoing,) = state.take_due(0.0)
    assert (outgoing.update.state, outgoing.latest_state) == (DROPPED, DROPPED)
    assert state.handle_ack(FW, "ghost", outgoing.update.uuid, 0.0)
    assert state.pending_updates() == 0 and state.framework_ids() == []


# -- checkpoint seam, wire forms, backoff ---------------------------------------------------------


def test_snapshot_holds_tasks_and_unacknowledged_updates() -> None:
    state = make_state()
    (key,) = launch(state, "t")
    updates = run_to(state, key, STARTING, RUNNING)
    snapshot = state.snapshot()
    assert (snapshot.agent_id, snapshot.master_id) == ("ag-1", "m-1")
    assert [view.key for view in snapshot.tasks] == [key]
    assert list(snapshot.updates) == updates


def test_updates_message_wire_form() -> None:
    state = make_state()
    (key,) = launch(state, "t")
    run_to(state, key, STARTING, RUNNING)
    failed = state.handle_task_status(key, FAILED, 0.0, WALL + 0.5, exit_code=2)
    assert failed is not None
    (starting,) = state.pending(key)[:1]
    message = updates_message("ag-1", [(failed, FAILED), (starting, FAILED)])
    request, first = message.updates.updates
    assert request.framework_id == FW and request.status.agent_id == "ag-1"
    assert task_state_from_pb(request.latest_state) is FAILED
    status = request.status
    assert status.source == TS.SOURCE_AGENT and len(status.uuid) == 16
    assert status.HasField("exit_code") and status.exit_code == 2
    assert status.timestamp.ToNanoseconds() == int((WALL + 0.5) * 1e9)
    assert not first.status.HasField("exit_code")
    assert first.status.uuid == starting.uuid
    view = state.task(key)
    assert view is not None
    assert task_state_from_pb(task_proto(view, "ag-1").status.state) is FAILED


def test_resources_from_pb_rejects_duplicates_and_round_trips() -> None:
    vector = R("cpus:1.5;mem:4096")
    assert resources_from_pb(resources_to_pb(vector)) == vector
    assert [i.name for i in resources_to_pb(vector).items] == ["cpus", "mem"]
    bad = resources_to_pb(vector)
    bad.items.add(name="mem", millis=1)
    with pytest.raises(ResourceError):
        resources_from_pb(bad)


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    backoff, rng = Backoff(0.5, 4.0), random.Random(1)
    for attempt in range(1, 12):
        base = min(4.0, 0.5 * 2 ** (attempt - 1))
        assert backoff.base(attempt) == base
        for _ in range(20):
            assert base / 2 <= backoff.delay(attempt, rng) <= base
            assert base / 2 <= backoff.jittered(rng)(attempt) <= base
    with pytest.raises(ValueError):
        Backoff(0, 1)
    with pytest.raises(ValueError):
        Backoff(1, 2, multiplier=0.5)
