"""Durable master state (agents admitted, frameworks, weights): what it holds (``entries``) and
the SQLite store that keeps it (``store``)."""

from master.registry.entries import (
    ADMITTED,
    GONE,
    UNREACHABLE,
    AgentEntry,
    FrameworkEntry,
    RegistryError,
    RegistryWriteError,
)
from master.registry.store import MARKER_FILE, REGISTRY_FILE, SCHEMA_VERSION, Registry

__all__ = [
    "ADMITTED",
    "GONE",
    "MARKER_FILE",
    "REGISTRY_FILE",
    "SCHEMA_VERSION",
    "UNREACHABLE",
    "AgentEntry",
    "FrameworkEntry",
    "Registry",
    "RegistryError",
    "RegistryWriteError",
]
