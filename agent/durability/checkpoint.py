"""``CheckpointStore``: the agent's durable checkpoint, ``<work-dir>/agent.sqlite`` (SQLite, WAL).

What it keeps (schema version 2; a version 1 file is upgraded in place when opened):

- ``meta(key, value)``: ``schema_version`` (this module writes and reads ``SCHEMA_VERSION``)
  and ``leader_epoch``, the highest leadership epoch of a master the agent admitted (HA
  masters; absent: 0);
- ``agent`` (one row): ``agent_id`` and ``master_id`` (NULL before the first registration), and the
  ``resources`` and ``attributes`` the agent was started with, in their flag syntax;
- ``tasks``: one row per tracked task (``framework_id``, ``task_id``): the ``TaskInfo`` as
  serialized protobuf (the task's ``TaskSpec``, through ``agent.wire``), its resources, its
  state (``common.proto`` ``TaskState`` value), ``running_since`` (wall-clock epoch seconds it
  became RUNNING, NULL before: a placeholder's deadline is ``running_since + duration``) and its
  newest update (``latest_*``, NULL while STAGING);
- ``updates``: every unacknowledged update, ``position`` 0, 1, ... in the task's FIFO order,
  with its ``uuid``, so an update re-sent after a restart carries the same uuid and the master
  de-duplicates it, and (version 2) a command task's resource ``usage`` as JSON
  (``{"cpu_seconds": ..., "memory_peak_bytes": ...}``, NULL for none; ``latest_usage`` in
  ``tasks``).

How a task and an update are written in their rows: ``agent.durability.checkpoint_rows``.

A command task's process is not in this file: its supervisor's pid and start time are in the
task's run directory (``agent.tasks.executors.supervisor``), written before the task starts.

Invariants:
- One transaction per ``write``: the file holds the state after some whole number of writes,
  never part of one. A write rewrites only the rows of the keys it is given (the state's dirty
  keys): for each, its task row and its update rows are deleted and the current ones inserted.
- Durability: ``journal_mode=WAL`` with ``synchronous=NORMAL``. A committed transaction is in
  the WAL file, i.e. in the operating system's page cache, before ``write`` returns, so it
  survives the agent process dying in any way (kill -9 included); only an operating-system crash
  or power cut can lose the last transactions (never corrupt the file). That is the failure the
  agent recovers from (an operating-system crash ends every task anyway: placeholders with the
  agent, command tasks with the host), and ``FULL`` would add an fsync to every status update.
- The file and its journal files are mode 0600 (every task's command and environment is in
  them, and task users may search the work dir).
- The file is never silently reset. A file that is not a readable checkpoint (not SQLite, fails
  ``quick_check``, unknown tables, undecodable rows), a newer ``schema_version``, or resources or
  attributes other than the ones the agent is started with raise ``CheckpointError``, whose
  message names the file and says how to start fresh (the daemon exits 1 with it). A file that
  does not exist (or an empty database) is a fresh agent.
- Resources and attributes must be equal across restarts (Mesos's default agent
  ``--reconfiguration_policy=equal`` refuses any change the same way): the checkpointed tasks were
  admitted against the old resources, and the master keeps the agent's registered resources and
  attributes for accounting and placement while it reregisters with the same agent id. Hostname
  and port may change (the port is picked at each start).
- One agent per work dir: ``open`` takes the kernel's work-dir lock (``fairshare.work_dir_lock``:
  an exclusive ``flock`` on ``<file>.lock``, naming its holder); the kernel releases it when the
  process dies, so a restart after kill -9 is never blocked by it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Final

from fairshare.resources import ResourceError, ResourceVector
from fairshare.sqlite_transaction import transaction
from fairshare.work_dir_lock import WorkDirLock, WorkDirLocked
from google.protobuf.message import DecodeError

from agent.core.records import AgentSpec
from agent.core.snapshot import AgentSnapshot, CheckpointChanges, TaskChange
from agent.durability.checkpoint_rows import (
    task_from_row,
    task_row,
    update_columns,
    update_from_columns,
)
from agent.settings import parse_attributes

__all__ = ["CHECKPOINT_FILE", "SCHEMA_VERSION", "CheckpointError", "CheckpointStore"]

CHECKPOINT_FILE: Final = "agent.sqlite"
SCHEMA_VERSION: Final = 2

_SCHEMA: Final = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE agent (
        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
        agent_id TEXT, master_id TEXT,
        resources TEXT NOT NULL, attributes TEXT NOT NULL)""",
    """CREATE TABLE tasks (
        framework_id TEXT NOT NULL, task_id TEXT NOT NULL,
        info BLOB NOT NULL, resources TEXT NOT NULL, state INTEGER NOT NULL,
        running_since REAL,
        latest_state INTEGER, latest_uuid BLOB, latest_timestamp REAL,
        latest_reason INTEGER, latest_message TEXT, latest_exit_code INTEGER,
        latest_usage TEXT,
        PRIMARY KEY (framework_id, task_id))""",
    """CREATE TABLE updates (
        framework_id TEXT NOT NULL, task_id TEXT NOT NULL, position INTEGER NOT NULL,
        state INTEGER NOT NULL, uuid BLOB NOT NULL, timestamp REAL NOT NULL,
        reason INTEGER NOT NULL, message TEXT NOT NULL, exit_code INTEGER, usage TEXT,
        PRIMARY KEY (framework_id, task_id, position))""",
)
_UPGRADES: Final = {  # from version N to N + 1
    1: (
        "ALTER TABLE tasks ADD COLUMN latest_usage TEXT",
        "ALTER TABLE updates ADD COLUMN usage TEXT",
    ),
}
_TABLES: Final = frozenset({"meta", "agent", "tasks", "updates"})


class CheckpointError(Exception):
    """The checkpoint cannot be used; the message names the file and what to do."""


def _fresh_hint(path: Path) -> str:
    return (
        f"to start this agent fresh, move {path} away or use another --work-dir "
        "(the master then reports its old tasks LOST)"
    )


def _attributes_text(attributes: Iterable[tuple[str, str]]) -> str:
    return ";".join(f"{name}:{value}" for name, value in attributes)


class CheckpointStore:
    """The checkpoint file of one agent, open for the life of the agent process."""

    def __init__(self, path: Path, connection: sqlite3.Connection, lock: WorkDirLock) -> None:
        self.path = path
        self._db = connection
        self._work_dir_lock: WorkDirLock | None = lock
        self.writes_total = 0

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, spec: AgentSpec) -> CheckpointStore:
        """Open (or create) the checkpoint at ``path`` for an agent started with ``spec``.

        Raises ``CheckpointError`` for another agent holding it, an unreadable or newer file, or
        resources or attributes that differ from the checkpointed ones.
        """
        lock = cls._lock(path)
        try:
            connection = cls._connect(path)
            store = cls(path, connection, lock)
        except BaseException:
            lock.release()
            raise
        try:
            store._prepare(spec)
        except BaseException:
            store.close()
            raise
        return store

    @staticmethod
    def _lock(path: Path) -> WorkDirLock:
        try:
            holder = f"pid {os.getpid()}, fairshare agent"
            return WorkDirLock.acquire(path.parent, "agent", holder, file_stem=path.name)
        except WorkDirLocked as error:
            raise CheckpointError(str(error)) from None
        except OSError as error:
            raise CheckpointError(f"{path}.lock: cannot open: {error.strerror}") from None

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        try:
            _private(path)
            connection = sqlite3.connect(path, isolation_level=None)
        except (sqlite3.Error, OSError) as error:
            raise CheckpointError(f"{path}: cannot open the agent checkpoint: {error}") from None
        return connection

    def _prepare(self, spec: AgentSpec) -> None:
        try:
            rows = self._db.execute("PRAGMA quick_check").fetchall()
            if rows != [("ok",)]:
                raise self._corrupt(f"integrity check failed: {rows[:3]}")
            tables = {
                row[0]
                for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if not tables:
                self._create(spec)
            elif tables != _TABLES:
                raise self._corrupt(f"unexpected tables {sorted(tables)}")
            self._check_version()
            self._check_agent(spec)
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.DatabaseError as error:
            raise self._corrupt(str(error)) from None

    def _corrupt(self, problem: str) -> CheckpointError:
        return CheckpointError(
            f"{self.path} is not a readable agent checkpoint ({problem}); the agent will not "
            f"overwrite it: {_fresh_hint(self.path)}"
        )

    def _create(self, spec: AgentSpec) -> None:
        self._db.execute("PRAGMA journal_mode = WAL")
        with self._transaction():
            for statement in _SCHEMA:
                self._db.execute(statement)
            self._db.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
            self._db.execute(
                "INSERT INTO agent (singleton, resources, attributes) VALUES (1, ?, ?)",
                (str(spec.resources), _attributes_text(spec.attributes)),
            )

    def _check_version(self) -> None:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None or not str(row[0]).isdigit() or int(row[0]) < 1:
            raise self._corrupt(f"bad schema_version {None if row is None else row[0]!r}")
        version = int(row[0])
        if version > SCHEMA_VERSION:
            raise CheckpointError(
                f"{self.path} was written by a newer fairshare agent (checkpoint schema "
                f"{version}; this agent reads up to {SCHEMA_VERSION}): run the newer agent, or "
                f"{_fresh_hint(self.path)}"
            )
        if version < SCHEMA_VERSION:
            self._upgrade(version)

    def _upgrade(self, version: int) -> None:
        """Bring a file of an older schema to ``SCHEMA_VERSION`` (one transaction)."""
        with self._transaction():
            for step in range(version, SCHEMA_VERSION):
                for statement in _UPGRADES[step]:
                    self._db.execute(statement)
            self._db.execute(
                "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
            )

    def _check_agent(self, spec: AgentSpec) -> None:
        row = self._db.execute("SELECT resources, attributes FROM agent").fetchone()
        if row is None:
            raise self._corrupt("no agent row")
        try:
            resources = ResourceVector.parse(row[0]) if row[0] else ResourceVector()
            attributes = parse_attributes(row[1])
        except (ResourceError, ValueError) as error:
            raise self._corrupt(f"bad agent row: {error}") from None
        if resources != spec.resources or attributes != tuple(spec.attributes):
            raise CheckpointError(
                f"{self.path} belongs to an agent with resources '{resources}' and attributes "
                f"'{_attributes_text(attributes)}', but this agent was started with resources "
                f"'{spec.resources}' and attributes '{_attributes_text(spec.attributes)}'. An "
                "agent keeps its resources and attributes across restarts (its checkpointed "
                "tasks and the master's accounting rely on them): restart it with "
                f"--resources '{resources}' --attributes '{_attributes_text(attributes)}', or "
                f"{_fresh_hint(self.path)}"
            )

    def _transaction(self) -> AbstractContextManager[None]:
        return transaction(self._db)

    # -- reading -------------------------------------------------------------------------------

    def load(self) -> AgentSnapshot:
        """Everything checkpointed (a fresh agent: no id, no tasks, no updates)."""
        try:
            agent_id, master_id = self._db.execute(
                "SELECT agent_id, master_id FROM agent"
            ).fetchone()
            epoch_row = self._db.execute(
                "SELECT value FROM meta WHERE key = 'leader_epoch'"
            ).fetchone()
            epoch = 0 if epoch_row is None else int(epoch_row[0])
            tasks = tuple(
                task_from_row(row)
                for row in self._db.execute(
                    "SELECT framework_id, task_id, info, resources, state, running_since,"
                    " latest_state, latest_uuid, latest_timestamp, latest_reason,"
                    " latest_message, latest_exit_code, latest_usage"
                    " FROM tasks ORDER BY framework_id, task_id"
                )
            )
            updates = tuple(
                update_from_columns(row[0], row[1], row[2:])
                for row in self._db.execute(
                    "SELECT framework_id, task_id, state, uuid, timestamp, reason, message,"
                    " exit_code, usage FROM updates ORDER BY framework_id, task_id, position"
                )
            )
        except (
            sqlite3.DatabaseError,
            DecodeError,
            ResourceError,
            ValueError,
            TypeError,
            KeyError,
        ) as error:
            raise self._corrupt(f"unreadable rows: {error}") from None
        return AgentSnapshot(agent_id, master_id, tasks, updates, epoch)

    # -- writing -------------------------------------------------------------------------------

    def write(self, changes: CheckpointChanges) -> None:
        """Apply ``changes`` in one transaction (nothing when empty).

        Raises ``CheckpointError`` if the write fails (disk full, file removed, I/O error).
        """
        if not changes:
            return
        try:
            with self._transaction():
                if changes.identity is not None:
                    self._db.execute(
                        "UPDATE agent SET agent_id = ?, master_id = ?", changes.identity
                    )
                if changes.epoch is not None:
                    self._db.execute(
                        "INSERT OR REPLACE INTO meta (key, value) VALUES ('leader_epoch', ?)",
                        (str(changes.epoch),),
                    )
                for change in changes.tasks:
                    self._write_key(change)
        except sqlite3.Error as error:
            raise CheckpointError(f"{self.path}: cannot write the checkpoint: {error}") from None
        self.writes_total += 1

    def _write_key(self, change: TaskChange) -> None:
        key = change.key
        self._db.execute("DELETE FROM tasks WHERE framework_id = ? AND task_id = ?", key)
        self._db.execute("DELETE FROM updates WHERE framework_id = ? AND task_id = ?", key)
        if change.task is not None:
            self._db.execute(
                "INSERT INTO tasks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                task_row(key, change.task),
            )
        self._db.executemany(
            "INSERT INTO updates VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*key, position, *update_columns(u)) for position, u in enumerate(change.updates)],
        )

    def close(self) -> None:
        """Close the database and release the work-dir lock (idempotent)."""
        if self._work_dir_lock is None:
            return
        self._db.close()
        self._work_dir_lock.release()
        self._work_dir_lock = None


def _private(path: Path) -> None:
    """The checkpoint and its journal files readable by the agent's user only (they hold every
    task's command and environment, and the work dir is searchable by the task users): created
    0600 (SQLite gives its journal files the database's mode), older ones made so."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm", f"{path.name}-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(path.with_name(name), 0o600)
