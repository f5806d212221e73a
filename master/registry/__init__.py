"""Durable master state (agents admitted, frameworks, weights) in SQLite; see ``store``."""

from master.registry.store import (
    ADMITTED,
    GONE,
    MARKER_FILE,
    REGISTRY_FILE,
    SCHEMA_VERSION,
    UNREACHABLE,
    AgentEntry,
    FrameworkEntry,
    Registry,
    RegistryError,
    RegistryWriteError,
)

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
