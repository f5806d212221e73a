"""Limits that keep ``fairshare master`` serving whatever its clients do: connections and streams,
registrations per principal, the size of one agent, and the registry's bounds on what left.

Invariants: ``LIMIT_DEFAULTS`` are the parsed defaults of ``LIMIT_SETTINGS``; the runtime's
``RuntimeLimits`` takes its defaults from them and the daemon builds it by field name, so a limit
is declared here once.
"""

from __future__ import annotations

from typing import Any, Final

from fairshare.resources import ResourceVector
from fairshare.setting_tables import table_defaults
from fairshare.settings import (
    Setting,
    positive_duration,
    positive_int,
    positive_number,
    resource_vector,
)

__all__ = ["DEFAULT_MAX_AGENT_RESOURCES", "LIMIT_DEFAULTS", "LIMIT_SETTINGS"]

DEFAULT_MAX_AGENT_RESOURCES: Final = ResourceVector.parse(
    "cpus:100000;mem:1073741824;disk:1099511627776;gpus:10000"
)
"""The most one agent may report: 100,000 cpus, 1 PiB of memory and 1 EiB of disk (in MiB),
10,000 gpus; far above any machine (the largest have ~2,000 cpus and 32 TiB)."""


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
        resource_vector,
        str(DEFAULT_MAX_AGENT_RESOURCES),
        "the most of each named resource one agent may report (INVALID_ARGUMENT beyond);"
        " resources not named are not capped",
        metavar="RESOURCES",
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
