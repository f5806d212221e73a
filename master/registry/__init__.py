"""Durable master state (agents admitted, frameworks, weights, quotas): what it holds
(``entries``), the operations the runtime calls on it (``operations.Registry``), and the stores
that keep it: SQLite under the work dir (``sqlite_store``, the default for one master) and etcd
for HA masters (``etcd_store``)."""

from master.registry.entries import (
    ADMITTED,
    GONE,
    UNREACHABLE,
    AgentEntry,
    FrameworkEntry,
    RegistryError,
    RegistryWriteError,
)
from master.registry.operations import Change, QuotaChange, Registry, WeightChange
from master.registry.sqlite_store import MARKER_FILE, REGISTRY_FILE, SCHEMA_VERSION, SqliteRegistry

__all__ = [
    "ADMITTED",
    "GONE",
    "MARKER_FILE",
    "REGISTRY_FILE",
    "SCHEMA_VERSION",
    "UNREACHABLE",
    "AgentEntry",
    "Change",
    "FrameworkEntry",
    "QuotaChange",
    "Registry",
    "RegistryError",
    "RegistryWriteError",
    "SqliteRegistry",
    "WeightChange",
]
