"""``CheckpointStore`` and the state's checkpoint seam: a round trip through a real SQLite file,
incremental writes (only the changed keys' rows), ``AgentState.restore``, and every refusal
(corrupt file, newer schema, other resources or attributes, a second agent on the work dir):
each names the file and leaves it untouched. Times and uuids are injected.
"""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
from datetime import timedelta
from itertools import count
from pathlib import Path

import pytest
from fairshare.backoff import Backoff
from fairshare.command import ResourceUsage
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskReason, TaskState
from fairshare.v1 import common_pb2
from fairshare.wire import resources_to_pb

from agent.core import AgentState
from agent.core.records import AgentSpec
from agent.durability.checkpoint import (
    CHECKPOINT_FILE,
    SCHEMA_VERSION,
    CheckpointError,
    CheckpointStore,
)
from agent.wire import task_spec

R = ResourceVector.parse
TS = common_pb2.TaskStatus
STARTING, RUNNING, KILLING = (
    TaskState.STARTING,
    TaskState.RUNNING,
    TaskState.KILLING,
)
FINISHED, FAILED, DROPPED = (
    TaskState.FINISHED,
    TaskState.FAILED,
    TaskState.DROPPED,
)
FW, OTHER_FW = "fw-1", "fw-2"
WALL = 1_700_000_000.25
SPEC = AgentSpec("host-a", 7000, R("cpus:4;mem:1024"), (("rack", "r1"), ("zone", "a")))
ROOT = Path(__file__).resolve().parents[3]
USAGE = ResourceUsage(cpu_seconds=1.25, memory_peak_bytes=3 << 20)
SCHEMA_1 = (  # what an agent of checkpoint schema 1 created
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE agent (singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
        agent_id TEXT, master_id TEXT, resources TEXT NOT NULL, attributes TEXT NOT NULL)""",
    """CREATE TABLE tasks (framework_id TEXT NOT NULL, task_id TEXT NOT NULL,
        info BLOB NOT NULL, resources TEXT NOT NULL, state INTEGER NOT NULL, running_since REAL,
        latest_state INTEGER, latest_uuid BLOB, latest_timestamp REAL, latest_reason INTEGER,
        latest_message TEXT, latest_exit_code INTEGER, PRIMARY KEY (framework_id, task_id))""",
    """CREATE TABLE updates (framework_id TEXT NOT NULL, task_id TEXT NOT NULL,
        position INTEGER NOT NULL, state INTEGER NOT NULL, uuid BLOB NOT NULL,
        timestamp REAL NOT NULL, reason INTEGER NOT NULL, message TEXT NOT NULL,
        exit_code INTEGER, PRIMARY KEY (framework_id, task_id, position))""",
)


def make_state(spec: AgentSpec = SPEC) -> AgentState:
    counter = count(1)
    return AgentState(
        spec,
        retry=Backoff(1.0, 8.0).jittered(random.Random(7)),
        new_uuid=lambda: next(counter).to_bytes(16, "big"),
    )


def restore(store: CheckpointStore) -> AgentState:
    return AgentState.restore(
        SPEC,
        store.load(),
        retry=Backoff(1.0, 8.0).jittered(random.Random(7)),
        new_uuid=lambda: b"\xff" * 16,
    )


def info(task_id: str, resources: str = "cpus:1;mem:128", **command: float) -> common_pb2.TaskInfo:
    message = common_pb2.TaskInfo(task_id=task_id, resources=resources_to_pb(R(resources)))
    message.labels["team"] = "search"
    if "duration" in command:
        message.command.duration.FromTimedelta(timedelta(seconds=command["duration"]))
    if "exit_code" in command:
        message.command.exit_code = int(command["exit_code"])
    return message


def busy_state() -> AgentState:
    """Every kind of row: STAGING, RUNNING (unacked), KILLING, a terminal task with pending
    updates, a DROPPED update without a task, two frameworks, identity set."""
    state = make_state()
    state.on_registered("ag-1", "m-1")
    state.on_connected(0.0)
    launched = [info("staging"), info("run", duration=30), info("kill")]
    state.handle_launch(FW, [task_spec(task) for task in launched], 0.0, WALL)
    state.handle_launch(OTHER_FW, [task_spec(info("done", exit_code=3, duration=1))], 0.0, WALL)
    for key in ((FW, "run"), (FW, "kill"), (OTHER_FW, "done")):
        state.handle_task_status(key, STARTING, 1.0, WALL + 1)
        state.handle_task_status(key, RUNNING, 2.0, WALL + 2.5)
    state.handle_kill(FW, "kill", 3.0, WALL + 3)
    state.handle_task_status(
        (OTHER_FW, "done"), FAILED, 4.0, WALL + 3.5, reason=TaskReason.COMMAND_FAILED,
        message="exited 3", exit_code=3, usage=USAGE,
    )  # fmt: skip
    state.handle_kill(FW, "ghost", 5.0, WALL + 4)  # DROPPED: an update without a task
    (starting,) = [u for u in state.pending((FW, "run")) if u.state == STARTING]
    state.handle_ack(FW, "run", starting.uuid, 6.0)  # RUNNING is the head now
    return state


def open_store(tmp_path: Path, spec: AgentSpec = SPEC) -> CheckpointStore:
    return CheckpointStore.open(tmp_path / CHECKPOINT_FILE, spec)


def test_round_trip_keeps_every_task_update_uuid_and_running_time(tmp_path: Path) -> None:
    state = busy_state()
    store = open_store(tmp_path)
    store.write(state.take_changes())
    store.close()
    reopened = open_store(tmp_path)
    loaded = reopened.load()
    reopened.close()
    expected = state.snapshot()
    assert (loaded.agent_id, loaded.master_id) == ("ag-1", "m-1")
    assert sorted(loaded.tasks, key=lambda t: t.key) == sorted(expected.tasks, key=lambda t: t.key)
    assert sorted(loaded.updates, key=lambda u: u.key) == sorted(
        expected.updates, key=lambda u: u.key
    )  # stable sort: FIFO order within a task is compared as well
    run = next(t for t in loaded.tasks if t.key == (FW, "run"))
    assert run.running_since == WALL + 2.5 and run.info.labels["team"] == "search"
    assert [u.state for u in loaded.updates if u.key == (FW, "run")] == [RUNNING]
    done = [u for u in loaded.updates if u.key == (OTHER_FW, "done")]
    assert [u.state for u in done] == [STARTING, RUNNING, FAILED]
    assert (done[-1].exit_code, done[-1].reason, done[-1].message) == (
        3, TaskReason.COMMAND_FAILED, "exited 3"
    )  # fmt: skip
    assert done[-1].usage == USAGE and done[0].usage is None
    assert next(t for t in loaded.tasks if t.key == (OTHER_FW, "done")).latest == done[-1]
    assert [u.state for u in loaded.updates if u.key == (FW, "ghost")] == [DROPPED]


def test_restore_rebuilds_an_equal_state_that_reregisters_and_resends(tmp_path: Path) -> None:
    state = busy_state()
    store = open_store(tmp_path)
    store.write(state.take_changes())
    restored = restore(store)
    store.close()
    assert sorted(restored.tasks(), key=lambda t: t.key) == sorted(
        state.tasks(), key=lambda t: t.key
    )
    assert {u.uuid for u in restored.snapshot().updates} == {
        u.uuid for u in state.snapshot().updates
    }
    assert restored.used == state.used == R("cpus:3;mem:384")  # STAGING, run, kill
    assert restored.framework_ids() == [FW, OTHER_FW]
    assert not restored.connected and not restored.has_changes()
    assert restored.registration().agent_id == "ag-1"  # type: ignore[union-attr]
    restored.on_connected(100.0)
    heads = {o.update.key: o.update for o in restored.take_due(100.0)}
    for key, head in heads.items():
        assert head == state.pending(key)[0]  # same update, same uuid, sent at once


def test_writes_rewrite_only_the_changed_keys(tmp_path: Path) -> None:
    state = busy_state()
    store = open_store(tmp_path)
    store.write(state.take_changes())
    assert not state.take_changes()  # nothing changed since
    # Mark a row the next write has no business touching, behind the store's back.
    with sqlite3.connect(tmp_path / CHECKPOINT_FILE) as side:
        side.execute("UPDATE tasks SET running_since = 1.0 WHERE task_id = 'kill'")
    (head,) = state.pending((FW, "run"))
    state.handle_ack(FW, "run", head.uuid, 7.0)
    state.handle_task_status((FW, "run"), FINISHED, 8.0, WALL + 9, exit_code=0)
    changes = state.take_changes()
    assert changes.identity is None
    assert [c.key for c in changes.tasks] == [(FW, "run")]
    store.write(changes)
    loaded = {t.key: t for t in store.load().tasks}
    store.close()
    assert loaded[(FW, "kill")].running_since == 1.0  # untouched
    assert loaded[(FW, "run")].state == FINISHED


def test_acknowledged_terminal_tasks_and_removal_are_deleted(tmp_path: Path) -> None:
    state = busy_state()
    store = open_store(tmp_path)
    store.write(state.take_changes())
    for update in state.pending((OTHER_FW, "done")):
        state.handle_ack(OTHER_FW, "done", update.uuid, 9.0)
    store.write(state.take_changes())
    assert (OTHER_FW, "done") not in {t.key for t in store.load().tasks}
    assert (OTHER_FW, "done") not in {u.key for u in store.load().updates}
    state.on_removed()  # FAILED_PRECONDITION: the agent drops its checkpoint
    store.write(state.take_changes())
    snapshot = store.load()
    store.close()
    assert (snapshot.agent_id, snapshot.tasks, snapshot.updates) == (None, (), ())


def test_a_failed_write_leaves_the_previous_transaction_whole(tmp_path: Path) -> None:
    state = busy_state()
    store = open_store(tmp_path)
    store.write(state.take_changes())
    before = store.load()
    state.handle_task_status((FW, "run"), FINISHED, 8.0, WALL + 9, exit_code=0)
    with sqlite3.connect(tmp_path / CHECKPOINT_FILE) as side:  # make the update insert fail
        side.execute(
            "CREATE TRIGGER no_more BEFORE INSERT ON updates BEGIN SELECT RAISE(ABORT, 'full'); END"
        )
    with pytest.raises(CheckpointError, match=str(tmp_path / CHECKPOINT_FILE)):
        store.write(state.take_changes())
    assert store.load() == before  # the task row deleted inside the failed write is back
    store.close()


def test_corrupt_file_is_refused_naming_it_and_never_reset(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE
    garbage = b"this is not a database\n" * 300
    path.write_bytes(garbage)
    with pytest.raises(CheckpointError) as caught:
        open_store(tmp_path)
    message = str(caught.value)
    assert str(path) in message and "not a readable agent checkpoint" in message
    assert "move" in message and "--work-dir" in message
    assert path.read_bytes() == garbage


def test_undecodable_rows_are_refused(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.write(busy_state().take_changes())
    store.close()
    with sqlite3.connect(tmp_path / CHECKPOINT_FILE) as side:
        side.execute("UPDATE tasks SET state = 999 WHERE task_id = 'run'")
    store = open_store(tmp_path)
    with pytest.raises(CheckpointError, match="unreadable rows"):
        store.load()
    store.close()


def test_foreign_tables_are_refused(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / CHECKPOINT_FILE) as side:
        side.execute("CREATE TABLE registry (x)")
    with pytest.raises(CheckpointError, match="unexpected tables"):
        open_store(tmp_path)


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    open_store(tmp_path).close()
    with sqlite3.connect(tmp_path / CHECKPOINT_FILE) as side:
        side.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION + 1,)
        )
    with pytest.raises(CheckpointError) as caught:
        open_store(tmp_path)
    message = str(caught.value)
    assert "newer fairshare agent" in message and str(tmp_path / CHECKPOINT_FILE) in message
    assert f"schema {SCHEMA_VERSION + 1}" in message


def test_a_schema_1_file_is_upgraded_in_place_and_keeps_its_tasks(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / CHECKPOINT_FILE) as old:
        for statement in SCHEMA_1:
            old.execute(statement)
        old.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        old.execute(
            "INSERT INTO agent VALUES (1, 'ag-1', 'm-1', ?, 'rack:r1;zone:a')",
            (str(SPEC.resources),),
        )
        task = info("old").SerializeToString()
        old.execute(
            "INSERT INTO tasks VALUES ('fw-1', 'old', ?, 'cpus:1;mem:128', 3, ?, 3, ?, ?, 0,"
            " '', NULL)",
            (task, WALL, b"u" * 16, WALL),
        )
        old.execute(
            "INSERT INTO updates VALUES ('fw-1', 'old', 0, 3, ?, ?, 0, '', NULL)", (b"u" * 16, WALL)
        )
    store = open_store(tmp_path)
    snapshot = store.load()
    store.close()
    assert [(t.key, t.state, t.running_since) for t in snapshot.tasks] == [
        ((FW, "old"), RUNNING, WALL)
    ]
    assert [(u.state, u.uuid, u.usage) for u in snapshot.updates] == [(RUNNING, b"u" * 16, None)]
    with sqlite3.connect(tmp_path / CHECKPOINT_FILE) as side:
        version = side.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == (str(SCHEMA_VERSION),) and SCHEMA_VERSION == 2


@pytest.mark.parametrize(
    ("resources", "attributes"),
    [("cpus:8;mem:1024", (("rack", "r1"), ("zone", "a"))), ("cpus:4;mem:1024", (("rack", "r2"),))],
    ids=["resources", "attributes"],
)
def test_other_resources_or_attributes_are_refused_with_how_to_start_fresh(
    tmp_path: Path, resources: str, attributes: tuple[tuple[str, str], ...]
) -> None:
    store = open_store(tmp_path)
    store.write(busy_state().take_changes())
    store.close()
    changed = AgentSpec("host-a", 7001, R(resources), attributes)
    with pytest.raises(CheckpointError) as caught:
        open_store(tmp_path, changed)
    message = str(caught.value)
    assert str(tmp_path / CHECKPOINT_FILE) in message
    assert "--resources 'cpus:4;mem:1024' --attributes 'rack:r1;zone:a'" in message
    assert f"started with resources '{R(resources)}'" in message
    assert "another --work-dir" in message
    assert restore(open_store(tmp_path)).agent_id == "ag-1"  # the same spec still opens it


def test_a_second_agent_on_the_same_work_dir_is_refused(tmp_path: Path) -> None:
    first = open_store(tmp_path)
    with pytest.raises(CheckpointError, match="in use by another agent"):
        open_store(tmp_path)
    first.close()
    open_store(tmp_path).close()  # released on close (and by the kernel when a process dies)


def test_the_daemon_exits_1_naming_a_corrupt_checkpoint(tmp_path: Path) -> None:
    work_dir = tmp_path / "agent"
    work_dir.mkdir()
    (work_dir / CHECKPOINT_FILE).write_bytes(b"garbage" * 1000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRSHARE_")}
    done = subprocess.run(
        [
            sys.executable, "-m", "fairshare.cli", "agent", "--master", "127.0.0.1:9",
            "--resources", "cpus:1;mem:64", "--metrics-port", "0", "--work-dir", str(work_dir),
        ],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert str(work_dir / CHECKPOINT_FILE) in done.stderr
    assert "Traceback" not in done.stderr
    assert not (work_dir / "agent.addr").exists()


def test_the_checkpoint_is_readable_by_the_agents_user_only(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.write(busy_state().take_changes())
    store.close()
    (tmp_path / CHECKPOINT_FILE).chmod(0o644)  # as an older agent left it
    store = open_store(tmp_path)
    store.write(busy_state().take_changes())
    files = sorted(tmp_path.glob(f"{CHECKPOINT_FILE}*"))
    assert {f.name for f in files} >= {CHECKPOINT_FILE, f"{CHECKPOINT_FILE}-wal"}
    assert {f.name: f.stat().st_mode & 0o077 for f in files if not f.name.endswith(".lock")} == {
        f.name: 0 for f in files if not f.name.endswith(".lock")
    }
    store.close()
