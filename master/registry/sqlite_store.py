"""``SqliteRegistry``: the master's durable registry in SQLite under its work dir
(docs/architecture.md §4),
the embedded default for one master (``etcd_store`` keeps it in etcd for HA masters).

What is durable is what Mesos keeps in its registry: the agents admitted (with their spec and
whether they are admitted, unreachable or gone, and whether the operator deactivated or drains
them), the
frameworks with their ids, names, roles, weights, failover timeouts and capabilities (and which
were removed, so their ids are refused for good), operator-set weights of roles and
frameworks, the quotas of roles, and the operator's dynamic reservations per agent. Offers,
filters, demands and tasks are soft state: tasks are
rebuilt from the agents when they reregister. The file's schema, its upgrades and the checks
run when it is opened are in ``master.registry.sqlite_schema``.

Invariants (beside those of ``operations.Registry``, whose operations it stores):
- every write is one committed SQLite transaction (a write that fails raises
  ``RegistryWriteError`` and rolls back); the file is in WAL mode with ``synchronous=FULL`` by
  default, so a committed change survives kill -9 and power loss (``NORMAL`` survives process
  crashes only);
- the registry is never silently reset: opening a work dir whose marker (``cluster.id``) says a
  registry was created there fails with ``RegistryError`` when ``registry.sqlite`` is missing,
  unreadable, corrupt, of another cluster, or written by a newer schema;
- the in-memory mirror equals the file's content after every successful call;
- before each commit the file is checked to be the one opened (same device and inode, and the
  marker still there): a registry deleted or replaced under a running master fails the write
  (``RegistryWriteError`` saying so) instead of acknowledging changes that would be lost;
- opening checks that the work dir can be written (a read-only disk stops the master before
  it serves); a registry of an older schema is upgraded in place, in one transaction (1 to 2:
  the agents' principals and the times agents left and frameworks were removed; 2 to 3: the
  ``quotas`` table, empty; 3 to 4: the ``reservations`` table, empty; 4 to 5: the agents'
  ``drain`` column, null), and otherwise loads unchanged.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from fairshare.sqlite_transaction import transaction

from master.registry.entries import (
    AGENT_STATES,
    AgentEntry,
    FrameworkEntry,
    RegistryError,
    RegistryWriteError,
    agent_spec_from_json,
    agent_spec_to_json,
    drain_from_json,
    drain_to_json,
    framework_spec_from_json,
    framework_spec_to_json,
    quota_from_json,
    quota_to_json,
    read_marker,
    reservations_from_json,
    reservations_to_json,
    write_marker,
)
from master.registry.operations import (
    Change,
    Forgotten,
    QuotaChange,
    Registry,
    ReservationChange,
    WeightChange,
)
from master.registry.sqlite_schema import (
    MARKER_FILE,
    REGISTRY_FILE,
    SCHEMA,
    SCHEMA_VERSION,
    check_registry,
    connect,
    probe_dir,
    probe_writable,
    upgrade,
    write_meta,
)

__all__ = ["MARKER_FILE", "REGISTRY_FILE", "SCHEMA_VERSION", "SqliteRegistry"]


class SqliteRegistry(Registry):
    """The durable registry in one SQLite file, and its in-memory mirror."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        cluster_id: str,
        path: Path | None,
        on_write: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__(cluster_id, on_write)
        self._db = connection
        self.path = path
        self._identity = self._file_identity()
        self._load()

    # -- opening ----------------------------------------------------------------------------------

    @classmethod
    def in_memory(cls) -> SqliteRegistry:
        """A registry that keeps nothing across processes (unit tests, ``fairshare`` tools)."""
        connection = sqlite3.connect(":memory:", isolation_level=None)
        connection.executescript(SCHEMA)
        cluster_id = uuid.uuid4().hex
        write_meta(connection, cluster_id)
        return cls(connection, cluster_id, None)

    @classmethod
    def open(cls, work_dir: Path, synchronous: str = "FULL") -> SqliteRegistry:
        """Open (or, in a work dir that never had one, create) the registry; ``RegistryError``."""
        path = work_dir / REGISTRY_FILE
        marker = work_dir / MARKER_FILE
        try:
            work_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise RegistryError(f"cannot create work dir {work_dir}: {error.strerror}") from None
        probe_dir(work_dir)
        expected = read_marker(marker)
        if not path.exists():
            if expected is not None:
                raise RegistryError(
                    f"registry {path} is missing, but {marker} says cluster {expected} kept its"
                    " registry here; restore the file, or start the master with an empty"
                    " --work-dir to create a new cluster (agents and frameworks must then"
                    " register afresh)"
                )
            return cls._create(path, marker, synchronous)
        connection = connect(path, synchronous)
        try:
            cluster_id = check_registry(connection, path)
            probe_writable(connection, path)
            upgrade(connection, path)
            if expected is not None and expected != cluster_id:
                raise RegistryError(
                    f"registry {path} belongs to cluster {cluster_id}, but {marker} names"
                    f" cluster {expected}: the work dir holds another cluster's registry"
                )
            if expected is None:
                write_marker(marker, cluster_id)
            return cls(connection, cluster_id, path)
        except RegistryError:
            connection.close()
            raise
        except sqlite3.DatabaseError as error:
            connection.close()
            raise RegistryError(f"registry {path} is corrupt or unreadable: {error}") from None

    @classmethod
    def _create(cls, path: Path, marker: Path, synchronous: str) -> SqliteRegistry:
        """Build the file under a temporary name and rename it: a crash leaves no half registry."""
        tmp = path.with_name(path.name + ".new")
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            leftover.unlink(missing_ok=True)
        cluster_id = uuid.uuid4().hex
        try:
            building = sqlite3.connect(tmp, isolation_level=None)
            try:
                building.executescript(f"BEGIN;{SCHEMA}COMMIT;")
                write_meta(building, cluster_id)
            finally:
                building.close()
            os.replace(tmp, path)
        except (sqlite3.Error, OSError) as error:
            raise RegistryError(f"cannot create registry {path}: {error}") from None
        write_marker(marker, cluster_id)
        return cls(connect(path, synchronous), cluster_id, path)

    def _load(self) -> None:
        try:
            rows: list[Change] = []
            for (
                agent_id,
                spec,
                registered_at,
                state,
                active,
                principal,
                changed,
                drain,
            ) in self._db.execute(
                "SELECT agent_id, spec, registered_at, state, active, principal, changed_at,"
                " drain FROM agents"
            ):
                if state not in AGENT_STATES:
                    raise ValueError(f"agent {agent_id} has unknown state {state!r}")
                rows.append(
                    AgentEntry(
                        agent_id,
                        agent_spec_from_json(spec),
                        registered_at,
                        state,
                        bool(active),
                        str(principal),
                        float(changed),
                        None if drain is None else drain_from_json(drain),
                    )
                )
            for framework_id, spec, registered_at, removed, removed_at in self._db.execute(
                "SELECT framework_id, spec, registered_at, removed, removed_at FROM frameworks"
            ):
                parsed = framework_spec_from_json(spec)
                if parsed.framework_id != framework_id:
                    raise ValueError(f"framework row {framework_id} holds {parsed.framework_id}")
                rows.append(FrameworkEntry(parsed, registered_at, bool(removed), float(removed_at)))
            for kind, target, weight in self._db.execute(
                "SELECT kind, target, weight FROM weights"
            ):
                self._weights(kind)  # raises for an unknown kind
                rows.append(WeightChange(kind, target, float(weight)))
            for role, quota in self._db.execute("SELECT role, quota FROM quotas"):
                rows.append(QuotaChange(role, quota_from_json(quota)))
            for agent_id, reserved in self._db.execute(
                "SELECT agent_id, reserved FROM reservations"
            ):
                rows.append(ReservationChange(agent_id, reservations_from_json(reserved)))
            self._apply(rows)
        except (ValueError, KeyError, TypeError) as error:
            where = self.path or "(memory)"
            raise RegistryError(f"registry {where} holds an invalid row: {error}") from None

    def close(self) -> None:
        """Close the file (the WAL is checkpointed by SQLite)."""
        self._db.close()

    # -- writes -----------------------------------------------------------------------------------

    def _file_identity(self) -> tuple[int, int, int, int] | None:
        """(device, inode) of the registry file and of its marker, as opened."""
        if self.path is None:
            return None
        try:
            file, marker = self.path.stat(), (self.path.parent / MARKER_FILE).stat()
        except OSError:
            return None
        return (file.st_dev, file.st_ino, marker.st_dev, marker.st_ino)

    def _check_file(self) -> None:
        """Raise ``RegistryWriteError`` if the file or its marker vanished or was replaced."""
        if self.path is None or self._identity is None:
            return
        now = self._file_identity()
        if now == self._identity:
            return
        what = "vanished" if now is None else "was replaced"
        raise RegistryWriteError(
            f"registry file {self.path} (or its marker {MARKER_FILE}) {what} since the master"
            " opened it: a write now would be lost; restore the file and restart the master"
        )

    def _commit(self, changes: Sequence[Change]) -> None:
        self._check_file()
        try:
            with transaction(self._db):
                for change in changes:
                    self._write_row(change)
        except sqlite3.Error as error:
            raise RegistryWriteError(f"registry write failed: {error}") from None

    def _write_row(self, change: Change) -> None:
        db = self._db
        if isinstance(change, AgentEntry):
            db.execute(
                "INSERT OR REPLACE INTO agents (agent_id, spec, registered_at, state, active,"
                " principal, changed_at, drain) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    change.agent_id,
                    agent_spec_to_json(change.spec),
                    change.registered_at,
                    change.state,
                    int(change.active),
                    change.principal,
                    change.changed_at,
                    None if change.drain is None else drain_to_json(change.drain),
                ),
            )
        elif isinstance(change, FrameworkEntry):
            db.execute(
                "INSERT OR REPLACE INTO frameworks (framework_id, spec, registered_at, removed,"
                " removed_at) VALUES (?, ?, ?, ?, ?)",
                (
                    change.spec.framework_id,
                    framework_spec_to_json(change.spec),
                    change.registered_at,
                    int(change.removed),
                    change.removed_at,
                ),
            )
        elif isinstance(change, Forgotten):
            if change.kind == "agent":
                db.execute("DELETE FROM agents WHERE agent_id = ?", (change.key,))
            else:
                db.execute("DELETE FROM frameworks WHERE framework_id = ?", (change.key,))
        elif isinstance(change, ReservationChange):
            if change.reserved:
                db.execute(
                    "INSERT OR REPLACE INTO reservations (agent_id, reserved) VALUES (?, ?)",
                    (change.agent_id, reservations_to_json(change.reserved)),
                )
            else:
                db.execute("DELETE FROM reservations WHERE agent_id = ?", (change.agent_id,))
        elif isinstance(change, QuotaChange):
            if change.quota is None:
                db.execute("DELETE FROM quotas WHERE role = ?", (change.role,))
            else:
                db.execute(
                    "INSERT OR REPLACE INTO quotas (role, quota) VALUES (?, ?)",
                    (change.role, quota_to_json(change.quota)),
                )
        elif change.weight is None:
            db.execute(
                "DELETE FROM weights WHERE kind = ? AND target = ?", (change.kind, change.target)
            )
        else:
            db.execute(
                "INSERT OR REPLACE INTO weights (kind, target, weight) VALUES (?, ?, ?)",
                (change.kind, change.target, change.weight),
            )
