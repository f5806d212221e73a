"""``MasterConfig``: the settings of ``fairshare master`` (DESIGN.md §4, §8).

``MASTER_SETTINGS`` is the one table of them: it gives the daemon's flags (``add_setting_flags``)
and is resolved by the kernel's one resolver (``fairshare.settings``): flags, then
``FAIRSHARE_MASTER_<NAME>`` variables (``FAIRSHARE_LOG_LEVEL``/``FAIRSHARE_LOG_FORMAT`` too),
then the ``[master]`` table of the TOML file (``--config``, ``FAIRSHARE_MASTER_CONFIG`` or
``FAIRSHARE_CONFIG``; shared ``log_*`` keys may sit at its top level), then the defaults.

Invariants: the table and ``MasterConfig`` have the same names and defaults (a test checks), so
``load_config`` with no flag, variable or file gives ``MasterConfig()``; ``load_config`` returns a
fully checked config or raises ``SettingsError`` naming the flag, variable or key and the reason.
``fault_drop_acks`` (tests only: a share of acknowledgements to drop) has no flag.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from fairshare.master_target import EtcdTarget, parse_address
from fairshare.settings import (
    SHARED_SETTINGS,
    Setting,
    SettingsError,
    boolean,
    choice,
    duration,
    non_empty_text,
    optional_positive_duration,
    port,
    positive_duration,
    positive_int,
    resolve_settings,
    share,
)

from master.core.fairness import FAIRNESS_POLICIES, make_fairness_policy
from master.core.placement import DEFAULT_SAMPLE_SIZE, PLACEMENT_POLICIES
from master.runtime.rebalance_settings import REBALANCE_SETTINGS

__all__ = ["MASTER_SETTINGS", "MasterConfig", "load_config"]

POLICIES: Final = tuple(FAIRNESS_POLICIES)  # the core's strategy tables name the choices
PLACEMENTS: Final = tuple(PLACEMENT_POLICIES)
REGISTRY_SYNC: Final = ("full", "normal")


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


def optional_address(raw: object) -> str | None:
    """An optional ``HOST:PORT``."""
    return None if raw is None else parse_address(non_empty_text(raw))


@dataclass(frozen=True, slots=True)
class MasterConfig:
    """Every setting of ``fairshare master``."""

    host: str = "127.0.0.1"
    port: int = 5050
    metrics_port: int = 9100
    work_dir: str = "./fairshare-master"
    policy: str = "drf"
    placement: str = "best-fit"
    placement_sample: int = DEFAULT_SAMPLE_SIZE
    allocation_interval: float = 1.0
    agent_timeout: float = 15.0
    reregistration_timeout: float = 20.0
    registry: str = "sqlite"
    registry_sync: str = "full"
    election_ttl: float = 5.0
    advertise: str | None = None
    offer_timeout: float | None = None
    heartbeat_interval: float = 5.0
    shutdown_grace: float = 5.0
    log_format: str = "text"
    log_level: str = "INFO"
    validate: bool = False
    fault_drop_acks: float = 0.0  # tests only (no flag): share of acknowledgements to drop
    rebalance: bool = False  # REBALANCE_SETTINGS (master.runtime.rebalance_settings)
    rebalance_interval: float = 5.0
    rebalance_threshold: float = 0.1
    rebalance_hysteresis: float = 15.0
    rebalance_max_kills: int = 4
    rebalance_grace: float = 3.0


MASTER_SETTINGS: Final = (
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
    Setting("policy", choice(*POLICIES), "drf", "fairness policy", choices=POLICIES),
    Setting("placement", choice(*PLACEMENTS), "best-fit", "placement policy", choices=PLACEMENTS),
    Setting(
        "placement_sample",
        positive_int,
        DEFAULT_SAMPLE_SIZE,
        "agents best-fit and random placement score per decision (a bounded sample, as"
        " Kubernetes does), so one decision stays cheap on big clusters",
        metavar="N",
    ),
    Setting(
        "allocation_interval",
        positive_duration,
        "1s",
        "time between periodic allocation runs",
        metavar="DURATION",
    ),
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
        None,
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
    *(setting for setting in SHARED_SETTINGS if setting.name != "master"),
    Setting(
        "validate",
        boolean,
        False,
        "check the allocation core's invariants after every change (tests, debugging)",
        switch=True,
    ),
    Setting(
        "fault_drop_acks",
        share,
        0.0,
        "tests only: the share of acknowledgements to drop",
        flag=False,
    ),
    *REBALANCE_SETTINGS,
)
"""The settings of ``fairshare master``, in the order ``--help`` shows them."""


def load_config(args: argparse.Namespace, environ: Mapping[str, str]) -> MasterConfig:
    """Resolve the settings: flags > environment > TOML file > defaults."""
    config = MasterConfig(**resolve_settings("master", MASTER_SETTINGS, args, environ))
    if config.rebalance and not make_fairness_policy(config.policy).dominant_shares:
        raise SettingsError(
            f"--rebalance: moves toward DRFH's allocation, which needs --policy drf"
            f" (or another that equalizes dominant shares), not {config.policy!r}"
        )
    return config
