"""The registry's SQLite file: its schema, the upgrades from older schemas, and the checks run
when a work dir is opened (``master.registry.sqlite_store`` keeps the registry in it).

Invariants: ``SCHEMA`` is the schema of version ``SCHEMA_VERSION``; ``upgrade`` brings a file of
any older version to it in one transaction (1 to 2: the agents' principals and the times agents
left and frameworks were removed; 2 to 3: the ``quotas`` table, empty; 3 to 4: the
``reservations`` table, empty; 4 to 5: the agents' ``drain`` column, null) or raises
``RegistryError`` and changes nothing; ``check_registry`` accepts only an intact file with a meta
table, a cluster id and a schema version in [1, ``SCHEMA_VERSION``] whose tables are all there
(a newer schema is refused: a registry is never downgraded); the probes fail with a
``RegistryError`` that says the work dir is not writable, before the master serves anything.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Final

from fairshare.sqlite_transaction import transaction

from master.registry.entries import RegistryError

__all__ = [
    "MARKER_FILE",
    "REGISTRY_FILE",
    "SCHEMA",
    "SCHEMA_VERSION",
    "check_registry",
    "connect",
    "probe_dir",
    "probe_writable",
    "upgrade",
    "write_meta",
]

REGISTRY_FILE: Final = "registry.sqlite"
MARKER_FILE: Final = "cluster.id"
SCHEMA_VERSION: Final = 5

SCHEMA: Final = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE agents (
    agent_id TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    registered_at REAL NOT NULL,
    state TEXT NOT NULL,
    active INTEGER NOT NULL,
    principal TEXT NOT NULL DEFAULT '',
    changed_at REAL NOT NULL DEFAULT 0,
    drain TEXT
);
CREATE TABLE frameworks (
    framework_id TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    registered_at REAL NOT NULL,
    removed INTEGER NOT NULL,
    removed_at REAL NOT NULL DEFAULT 0
);
CREATE TABLE weights (
    kind TEXT NOT NULL,
    target TEXT NOT NULL,
    weight REAL NOT NULL,
    PRIMARY KEY (kind, target)
);
CREATE TABLE quotas (role TEXT PRIMARY KEY, quota TEXT NOT NULL);
CREATE TABLE reservations (agent_id TEXT PRIMARY KEY, reserved TEXT NOT NULL);
"""
UPGRADE_1_TO_2: Final = (
    "ALTER TABLE agents ADD COLUMN principal TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE agents ADD COLUMN changed_at REAL NOT NULL DEFAULT 0",
    "ALTER TABLE frameworks ADD COLUMN removed_at REAL NOT NULL DEFAULT 0",
)
UPGRADE_2_TO_3: Final = ("CREATE TABLE quotas (role TEXT PRIMARY KEY, quota TEXT NOT NULL)",)
UPGRADE_3_TO_4: Final = (
    "CREATE TABLE reservations (agent_id TEXT PRIMARY KEY, reserved TEXT NOT NULL)",
)
UPGRADE_4_TO_5: Final = ("ALTER TABLE agents ADD COLUMN drain TEXT",)


def connect(path: Path, synchronous: str) -> sqlite3.Connection:
    """Open the registry file in WAL mode with ``synchronous`` (FULL or NORMAL); ``RegistryError``
    if SQLite cannot read it."""
    if synchronous not in ("FULL", "NORMAL"):
        raise ValueError(f"synchronous must be FULL or NORMAL, not {synchronous!r}")
    try:
        connection = sqlite3.connect(path, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL").fetchone()
        connection.execute(f"PRAGMA synchronous={synchronous}")
    except sqlite3.DatabaseError as error:
        raise RegistryError(f"registry {path} is corrupt or unreadable: {error}") from None
    return connection


def write_meta(connection: sqlite3.Connection, cluster_id: str) -> None:
    """Write a new registry's meta rows (schema version, cluster id, creation time)."""
    with transaction(connection):
        connection.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)",
            [
                ("schema_version", str(SCHEMA_VERSION)),
                ("cluster_id", cluster_id),
                ("created_at", repr(time.time())),
            ],
        )


def check_registry(connection: sqlite3.Connection, path: Path) -> str:
    """The registry's cluster id, after checking it is intact and of a known schema."""
    verdict = connection.execute("PRAGMA quick_check").fetchone()
    if verdict is None or verdict[0] != "ok":
        raise RegistryError(f"registry {path} is corrupt: integrity check says {verdict}")
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    if "meta" not in tables:
        raise RegistryError(f"registry {path} is not a fairshare registry (no meta table)")
    meta = dict(connection.execute("SELECT key, value FROM meta").fetchall())
    try:
        version = int(meta["schema_version"])
        cluster_id = str(meta["cluster_id"])
    except (KeyError, ValueError):
        raise RegistryError(f"registry {path} has no valid schema_version/cluster_id") from None
    if version > SCHEMA_VERSION:
        raise RegistryError(
            f"registry {path} has schema version {version}, newer than this master's"
            f" {SCHEMA_VERSION}: run the fairshare version that wrote it (never downgrade"
            " a registry)"
        )
    if version < 1:
        raise RegistryError(f"registry {path} has an invalid schema version {version}")
    missing = {
        "agents",
        "frameworks",
        "weights",
        *(["quotas"] if version >= 3 else []),
        *(["reservations"] if version >= 4 else []),
    }
    missing -= tables
    if missing:
        raise RegistryError(f"registry {path} is corrupt: tables {sorted(missing)} missing")
    return cluster_id


def probe_dir(work_dir: Path) -> None:
    """Create and remove a file in ``work_dir``: a read-only disk stops the master here, with
    a message that says so (SQLite would only say it cannot open the file)."""
    probe = work_dir / ".write-probe"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise RegistryError(
            f"work dir {work_dir} cannot be written ({error.strerror}): the master keeps its"
            " registry there; give a writable --work-dir"
        ) from None


def probe_writable(connection: sqlite3.Connection, path: Path) -> None:
    """Take the write lock and let it go: a read-only disk or file fails here, before the
    master serves anything."""
    probe = path.with_name(path.name + ".probe")
    try:
        probe.write_bytes(b"")
        probe.unlink()
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("ROLLBACK")
    except (OSError, sqlite3.Error) as error:
        raise RegistryError(
            f"registry {path} cannot be written ({error}): the work dir must be writable"
        ) from None


def upgrade(connection: sqlite3.Connection, path: Path) -> None:
    """Bring a registry of an older schema to ``SCHEMA_VERSION``, in one transaction."""
    (version,) = connection.execute(
        "SELECT value FROM meta WHERE key = 'schema_version'"
    ).fetchone()
    if int(version) >= SCHEMA_VERSION:
        return
    now = time.time()
    try:
        with transaction(connection):
            if int(version) < 2:
                for statement in UPGRADE_1_TO_2:
                    connection.execute(statement)
                connection.execute(
                    "UPDATE agents SET changed_at = ? WHERE state != 'ADMITTED'", (now,)
                )
                connection.execute("UPDATE frameworks SET removed_at = ? WHERE removed = 1", (now,))
            if int(version) < 3:
                for statement in UPGRADE_2_TO_3:
                    connection.execute(statement)
            if int(version) < 4:
                for statement in UPGRADE_3_TO_4:
                    connection.execute(statement)
            for statement in UPGRADE_4_TO_5:
                connection.execute(statement)
            connection.execute(
                "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
            )
    except sqlite3.Error as error:
        raise RegistryError(f"cannot upgrade registry {path}: {error}") from None
