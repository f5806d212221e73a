"""Where and how ``fairshare master`` serves: its ports and work dir, its registry and election,
the liveness of agents and framework streams, and shutdown.

Invariants: every value is checked by its parser (``fairshare.settings``); ``offer_timeout``'s
default is the core's (``CoreConfig``).
"""

from __future__ import annotations

import os
from typing import Final

from fairshare.master_target import EtcdTarget, parse_address
from fairshare.settings import (
    ETCD_SECURITY_SETTINGS,
    Setting,
    choice,
    duration,
    existing_file,
    non_empty_text,
    optional_positive_duration,
    port,
    positive_duration,
)

from master.core.config import CoreConfig

__all__ = [
    "AUTO_IO_WORKERS_FROM",
    "MAX_IO_WORKERS",
    "REGISTRY_SYNC",
    "SERVING_SETTINGS",
    "SESSION_SETTINGS",
    "auto_io_workers",
    "election_ttl",
    "io_workers",
    "optional_address",
    "registry",
    "usable_cores",
]

REGISTRY_SYNC: Final = ("full", "normal")
MAX_IO_WORKERS: Final = 64
AUTO_IO_WORKERS_FROM: Final = 4
"""``--io-workers auto`` starts workers on a machine of at least this many cores."""
_CORE: Final = CoreConfig()


def registry(raw: object) -> str:
    """``sqlite``, or an ``etcd://`` target (normalized)."""
    text = non_empty_text(raw)
    if text.lower() == "sqlite":
        return "sqlite"
    if EtcdTarget.is_url(text):
        return str(EtcdTarget.parse(text))
    raise ValueError(f"{text!r} is neither sqlite nor etcd://HOST:PORT,...[/prefix]")


def election_ttl(raw: object) -> float:
    """Whole seconds, at least 2 (etcd grants leases in seconds)."""
    seconds = positive_duration(raw)
    if seconds < 2 or not float(seconds).is_integer():
        raise ValueError(f"{raw!r} must be whole seconds, at least 2")
    return seconds


def io_workers(raw: object) -> int:
    """A whole number from 0 (one process) to ``MAX_IO_WORKERS``, or ``auto``
    (``auto_io_workers``)."""
    if isinstance(raw, str) and raw.strip().lower() == "auto":
        return auto_io_workers(usable_cores())
    value = int(raw) if isinstance(raw, str) and raw.strip().isdigit() else raw
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_IO_WORKERS:
        raise ValueError(f"{raw!r} is neither auto nor a whole number from 0 to {MAX_IO_WORKERS}")
    return value


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity, which a container's cpuset narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def auto_io_workers(cores: int) -> int:
    """``--io-workers auto``: one worker per core but the core's own, from
    ``AUTO_IO_WORKERS_FROM`` cores on; below, none. Measured on 2 cores (README, Performance):
    the core spends 1.4 ms per launched task with workers against 4.6 ms alone, but the workers
    spend 4.4 ms more, so the workers pay only with cores to run them beside the core's."""
    if cores < AUTO_IO_WORKERS_FROM:
        return 0
    return min(cores - 1, MAX_IO_WORKERS)


def optional_address(raw: object) -> str | None:
    """An optional ``HOST:PORT``."""
    return None if raw is None else parse_address(non_empty_text(raw))


SERVING_SETTINGS: Final = (
    Setting("host", non_empty_text, "127.0.0.1", "address to bind"),
    Setting("port", port, 5050, "gRPC port, 0 picks a free one"),
    Setting(
        "metrics_port",
        port,
        9100,
        "HTTP port of the dashboard (/), the JSON API (/api/v1/), /metrics and /health;"
        " 0 picks a free one",
    ),
    Setting(
        "work_dir",
        non_empty_text,
        "./fairshare-master",
        "state directory: the durable registry (registry.sqlite), the lock, master.addr",
        metavar="DIR",
    ),
    Setting(
        "io_workers",
        io_workers,
        "auto",
        "I/O worker processes that serve the gRPC port for the master's core (the agents' and"
        " frameworks' calls batched to it, others forwarded); 0: the master is one process;"
        f" auto: one fewer than the cores when there are at least {AUTO_IO_WORKERS_FROM}, else 0",
        metavar="N|auto",
    ),
)
"""The ports, the work dir, and the I/O workers serving the gRPC port."""

SESSION_SETTINGS: Final = (
    Setting(
        "agent_timeout",
        positive_duration,
        "15s",
        "an agent unheard this long becomes unreachable",
        metavar="DURATION",
    ),
    Setting(
        "reregistration_timeout",
        duration,
        "20s",
        "after a restart, how long known agents have to reregister before they are marked"
        " unreachable; nothing is offered meanwhile",
        metavar="DURATION",
    ),
    Setting(
        "registry",
        registry,
        "sqlite",
        "where the registry is: sqlite (a file in the work dir, one master), or"
        " etcd://HOST:2379,...[/prefix] for HA masters that elect a leader in etcd",
        metavar="sqlite|etcd://...",
    ),
    *ETCD_SECURITY_SETTINGS,
    Setting(
        "registry_key",
        existing_file,
        None,
        "HA masters: a secret file (the same on every master, not in etcd) whose key signs"
        " every registry row; rows etcd holds without a valid signature are not loaded",
        metavar="FILE",
    ),
    Setting(
        "election_ttl",
        election_ttl,
        "5s",
        "HA masters: the leader's etcd lease; when the leader dies or is cut off, another takes"
        " over within about this long (whole seconds, at least 2)",
        metavar="DURATION",
    ),
    Setting(
        "advertise",
        optional_address,
        None,
        "the HOST:PORT clients reach this master at (default: --host and the bound port; set it"
        " when binding 0.0.0.0)",
        metavar="HOST:PORT",
    ),
    Setting(
        "registry_sync",
        choice(*REGISTRY_SYNC),
        "full",
        "SQLite synchronous mode of the registry: full survives power loss, normal only process"
        " crashes",
        choices=REGISTRY_SYNC,
    ),
    Setting(
        "offer_timeout",
        optional_positive_duration,
        _CORE.offer_timeout,
        "rescind offers unused this long (default: never)",
        metavar="DURATION",
    ),
    Setting(
        "heartbeat_interval",
        positive_duration,
        "5s",
        "time between heartbeats on framework streams",
        metavar="DURATION",
    ),
    Setting(
        "shutdown_grace",
        duration,
        "5s",
        "on SIGTERM, time left to calls in flight",
        metavar="DURATION",
    ),
)
"""The registry (and how to reach a secured etcd, the kernel's ``ETCD_SECURITY_SETTINGS``), the
election, and the timing of agents, offers, streams and shutdown."""
