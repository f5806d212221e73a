"""Limits that keep ``fairshare master`` serving whatever its clients do: connections and streams,
registrations per principal, the size of one agent, and the registry's bounds on what left.

Invariants: ``LIMIT_DEFAULTS`` are the parsed defaults of ``LIMIT_SETTINGS``; the runtime's
``RuntimeLimits`` takes its defaults from them and the daemon builds it by field name, so a limit
is declared here once. The resource caps' defaults and type are the core's
(``master.core.resource_caps``), read by the table.
"""

from __future__ import annotations

from typing import Any, Final

from fairshare.setting_tables import table_defaults
from fairshare.settings import (
    WIRE_NAME,
    Setting,
    positive_duration,
    positive_int,
    positive_number,
)

from master.core.resource_caps import (
    DEFAULT_MAX_AGENT_RESOURCES,
    DEFAULT_MAX_PRINCIPAL_RESOURCES,
    DEFAULT_MAX_RESOURCE_NAMES,
    ResourceCap,
)

__all__ = ["LIMIT_DEFAULTS", "LIMIT_SETTINGS", "resource_cap"]


def resource_cap(raw: object) -> ResourceCap:
    """``cpus:8;mem:16384;*:1000`` -> a cap (``*``: every name not listed; ``ValueError`` if
    bad)."""
    if not isinstance(raw, str):
        raise ValueError(f"{raw!r} is not a string like 'cpus:8;mem:16384;*:1000'")
    cap = ResourceCap.parse(raw)
    for name in cap.named:
        if not WIRE_NAME.match(name):
            raise ValueError(f"resource name {name!r} must be lower case [a-z0-9_.-]")
    return cap


def _optional_count(raw: object) -> int | None:
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "auto")):
        return None
    return positive_int(raw)


LIMIT_SETTINGS: Final = (
    Setting(
        "max_connections",
        _optional_count,
        None,
        "gRPC connections at most (default: the file descriptor limit minus a reserve)",
        metavar="N",
    ),
    Setting(
        "max_streams_per_connection",
        positive_int,
        1000,
        "concurrent calls per gRPC connection (each agent session and framework subscription is"
        " one long-lived call; clients that share a connection need room)",
        metavar="N",
    ),
    Setting(
        "idle_timeout",
        positive_duration,
        "5m",
        "close a gRPC connection without calls for this long",
        metavar="DURATION",
    ),
    Setting(
        "max_frameworks_per_principal",
        positive_int,
        1000,
        "registered frameworks per principal (RESOURCE_EXHAUSTED beyond)",
        metavar="N",
    ),
    Setting(
        "max_agents_per_principal",
        positive_int,
        20_000,
        "registered agents per principal (RESOURCE_EXHAUSTED beyond)",
        metavar="N",
    ),
    Setting(
        "max_agent_resources",
        resource_cap,
        str(DEFAULT_MAX_AGENT_RESOURCES),
        "the most of each resource one agent may report (INVALID_ARGUMENT beyond); '*:Q' caps"
        " every resource not named (without it: the largest named quantity)",
        metavar="RESOURCES",
    ),
    Setting(
        "max_principal_resources",
        resource_cap,
        str(DEFAULT_MAX_PRINCIPAL_RESOURCES),
        "the most of each resource all agents of one principal may report together"
        " (INVALID_ARGUMENT beyond); '*:Q' as for --max-agent-resources",
        metavar="RESOURCES",
    ),
    Setting(
        "max_resource_names",
        positive_int,
        DEFAULT_MAX_RESOURCE_NAMES,
        "distinct resource names over all agents (an agent bringing more: RESOURCE_EXHAUSTED)",
        metavar="N",
    ),
    Setting(
        "registration_rate",
        positive_number,
        100,
        "new frameworks and agents per second per principal, after --registration-burst",
        metavar="PER_SECOND",
    ),
    Setting(
        "registration_burst",
        positive_int,
        1000,
        "new frameworks and agents a principal may register at once",
        metavar="N",
    ),
    Setting(
        "registry_max_agent_age",
        positive_duration,
        "2w",
        "forget unreachable and removed agents this long after they left (Mesos's"
        " registry_max_agent_age); they must register afresh",
        metavar="DURATION",
    ),
    Setting(
        "registry_max_agent_count",
        positive_int,
        10_000,
        "unreachable and removed agents the registry keeps at most (oldest forgotten first)",
        metavar="N",
    ),
    Setting(
        "registry_max_framework_age",
        positive_duration,
        "2w",
        "forget removed frameworks this long after their removal",
        metavar="DURATION",
    ),
    Setting(
        "registry_max_framework_count",
        positive_int,
        10_000,
        "removed frameworks the registry keeps at most (oldest forgotten first)",
        metavar="N",
    ),
)
"""Limits that keep the master serving whatever its clients do."""

LIMIT_DEFAULTS: Final[dict[str, Any]] = table_defaults(LIMIT_SETTINGS)
