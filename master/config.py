"""``MasterConfig``: the settings of ``fairshare master`` (docs/architecture.md §7).

``MASTER_SETTINGS`` is the one table of them: it gives the daemon's flags (``add_setting_flags``)
and is resolved by the kernel's one resolver (``fairshare.settings``): flags, then
``FAIRSHARE_MASTER_<NAME>`` variables (``FAIRSHARE_LOG_LEVEL``/``FAIRSHARE_LOG_FORMAT`` too),
then the ``[master]`` table of the TOML file (``--config``, ``FAIRSHARE_MASTER_CONFIG`` or
``FAIRSHARE_CONFIG``; shared ``log_*`` keys may sit at its top level), then the defaults.

Invariants: the table and ``MasterConfig`` have the same names and defaults (a test checks), so
``load_config`` with no flag, variable or file gives ``MasterConfig()``; ``load_config`` returns a
fully checked config or raises ``SettingsError`` naming the flag, variable or key and the reason.
``fault_drop_acks`` (tests only: a share of acknowledgements to drop) has no flag.

Security (docs/security.md): ``--tls-cert``/``--tls-key`` put TLS on both ports, ``--tls-ca`` makes
client certificates required and identities (gRPC cannot ask for an optional one; a bearer
token, when ``--credentials`` accepts them, names the principal instead of the certificate),
``--credentials`` accepts bearer tokens, ``--acls`` says who may do what; without TLS and
authentication the master refuses a ``--host`` other than loopback unless ``--allow-insecure``
(``check_exposure``). Limits: connections, streams per connection, idle connections, frameworks
and agents per principal, registration rate per principal, and the registry's age and count
bounds for unreachable agents and removed frameworks.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from fairshare.etcd_security import PLAIN_ETCD, EtcdSecurity
from fairshare.master_target import EtcdTarget, parse_address
from fairshare.resources import ResourceVector
from fairshare.settings import (
    ETCD_SECURITY_SETTINGS,
    SHARED_SETTINGS,
    WIRE_NAME,
    Setting,
    SettingsError,
    boolean,
    choice,
    duration,
    etcd_security,
    existing_file,
    file_path,
    non_empty_text,
    optional_positive_duration,
    port,
    positive_duration,
    positive_int,
    positive_number,
    resolve_settings,
    share,
)
from fairshare.transport import is_loopback

from master.core.config import CoreConfig
from master.core.fairness import FAIRNESS_POLICIES, make_fairness_policy
from master.core.hierarchy import HIERARCHIES
from master.core.placement import DEFAULT_SAMPLE_SIZE, PLACEMENT_POLICIES
from master.runtime.rebalance_settings import REBALANCE_SETTINGS
from master.runtime.resource_caps import (
    DEFAULT_MAX_AGENT_RESOURCES,
    DEFAULT_MAX_PRINCIPAL_RESOURCES,
    DEFAULT_MAX_RESOURCE_NAMES,
    ResourceCap,
)

__all__ = [
    "MASTER_SETTINGS",
    "MasterConfig",
    "check_hierarchy",
    "check_rebalance",
    "load_config",
    "resource_names",
]

POLICIES: Final = tuple(FAIRNESS_POLICIES)  # the core's strategy tables name the choices
PLACEMENTS: Final = tuple(PLACEMENT_POLICIES)
REGISTRY_SYNC: Final = ("full", "normal")


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


def registry(raw: object) -> str:
    """``sqlite``, or an ``etcd://`` target (normalized)."""
    text = non_empty_text(raw)
    if text.lower() == "sqlite":
        return "sqlite"
    if EtcdTarget.is_url(text):
        return str(EtcdTarget.parse(text))
    raise ValueError(f"{text!r} is neither sqlite nor etcd://HOST:PORT,...[/prefix]")


def hierarchy(raw: object) -> str:
    """``hdrf``, ``naive`` or ``flat``; empty (or ``auto``) for the policy's default."""
    text = "" if raw is None else str(raw).strip().lower()
    if text in ("", "auto"):
        return ""
    if text not in HIERARCHIES:
        raise ValueError(f"{raw!r} is not one of {', '.join(HIERARCHIES)}")
    return text


def resource_names(raw: object) -> frozenset[str]:
    """Comma-separated resource names (``gpus`` or ``gpus,fpgas``); empty for none."""
    if raw is None:
        return frozenset()
    items = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
    names = frozenset(str(item).strip() for item in items if str(item).strip())
    for name in names:
        ResourceVector.parse(f"{name}:1")  # the kernel's rule for a resource name
    return names


def min_allocatable(raw: object) -> tuple[ResourceVector, ...]:
    """Mesos's ``--min_allocatable_resources``: quantities separated by ``|``
    (``cpus:0.01|mem:32``), each non-empty; ``""`` or ``none`` for no minimum."""
    text = "" if raw is None else str(raw).strip()
    if text.lower() in ("", "none"):
        return ()
    quantities = []
    for position, part in enumerate(text.split("|"), start=1):
        vector = ResourceVector.parse(part.strip())
        if not vector:
            raise ValueError(f"quantity {position} {part.strip()!r} names no resource")
        quantities.append(vector)
    return tuple(quantities)


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
    hierarchy: str = ""  # "": hdrf under drf, flat under the other policies
    fair_sharing_excluded_resources: frozenset[str] = frozenset()
    min_allocatable_resources: tuple[ResourceVector, ...] = (
        ResourceVector.parse("cpus:0.01"),
        ResourceVector.parse("mem:32"),
    )
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
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None
    credentials: Path | None = None
    acls: Path | None = None
    allow_insecure: bool = False
    max_connections: int | None = None  # None: the file descriptor limit minus a reserve
    max_streams_per_connection: int = 1000
    idle_timeout: float = 300.0
    max_frameworks_per_principal: int = 1000
    max_agents_per_principal: int = 20_000
    registration_rate: float = 100.0
    registration_burst: int = 1000
    registry_max_agent_age: float = 14 * 86400.0
    registry_max_agent_count: int = 10_000
    registry_max_framework_age: float = 14 * 86400.0
    registry_max_framework_count: int = 10_000
    max_agent_resources: ResourceCap = DEFAULT_MAX_AGENT_RESOURCES
    max_principal_resources: ResourceCap = DEFAULT_MAX_PRINCIPAL_RESOURCES
    max_resource_names: int = DEFAULT_MAX_RESOURCE_NAMES
    fault_drop_acks: float = 0.0  # tests only (no flag): share of acknowledgements to drop
    rebalance: bool = False  # REBALANCE_SETTINGS (master.runtime.rebalance_settings)
    rebalance_interval: float = 5.0
    rebalance_threshold: float = 0.1
    rebalance_hysteresis: float = 15.0
    rebalance_max_kills: int = 4
    rebalance_grace: float = 3.0
    etcd: EtcdSecurity = PLAIN_ETCD  # --etcd-tls-*, --etcd-user: reaching --registry etcd://
    registry_key: Path | None = None  # HMAC key signing the etcd registry's rows

    @property
    def authenticated(self) -> bool:
        """True when every call must come from a known principal."""
        return self.tls_ca is not None or self.credentials is not None


def _optional_count(raw: object) -> int | None:
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "auto")):
        return None
    return positive_int(raw)


SECURITY_SETTINGS: Final = (
    Setting(
        "tls_cert",
        file_path,
        None,
        "the master's certificate (PEM): the gRPC and the HTTP port serve TLS",
        metavar="FILE",
    ),
    Setting("tls_key", file_path, None, "the key of --tls-cert (PEM)", metavar="FILE"),
    Setting(
        "tls_ca",
        file_path,
        None,
        "CA bundle (PEM) that signs client certificates: mutual TLS, a certificate's common name"
        " is its principal (every client must present one; with --credentials a token may name the"
        " principal instead)",
        metavar="FILE",
    ),
    Setting(
        "credentials",
        file_path,
        None,
        "credentials file (TOML or JSON: principals and salted hashes of their secrets, made by"
        " 'fairshare credential'): bearer tokens and HTTP basic auth are accepted; needs TLS",
        metavar="FILE",
    ),
    Setting(
        "acls",
        file_path,
        None,
        "ACL file (TOML or JSON, docs/security.md): who may register frameworks (roles, weight"
        " cap) and agents, tear down, kill, set weights, maintain agents, view state",
        metavar="FILE",
    ),
    Setting(
        "allow_insecure",
        boolean,
        False,
        "serve a --host other than loopback without TLS and authentication (anyone who reaches"
        " the ports then controls the cluster)",
        switch=True,
    ),
)
"""TLS, authentication and authorization of the master."""

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
    Setting(
        "hierarchy",
        hierarchy,
        "",
        "how roles (paths like eng/dev) share the pool: hdrf (H-DRF over the role tree, the"
        " default under --policy drf), naive (Mesos's hierarchical sorter, for comparison),"
        " flat (every framework on its own, a role's weight copied onto its frameworks; the"
        " default and the only choice under the other policies)",
        metavar="hdrf|naive|flat",
    ),
    Setting(
        "fair_sharing_excluded_resources",
        resource_names,
        "",
        "comma-separated resources that count in no share (Mesos's"
        " --fair_sharing_excluded_resource_names), e.g. gpus; needs --policy drf",
        metavar="NAMES",
    ),
    Setting(
        "min_allocatable_resources",
        min_allocatable,
        "cpus:0.01|mem:32",
        "a whole-agent offer is made only of free resources holding one of these quantities"
        " (Mesos's --min_allocatable_resources and its default); 'none' for any",
        metavar="RES|RES...",
    ),
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
    *SECURITY_SETTINGS,
    *LIMIT_SETTINGS,
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
    """Resolve the settings: flags > environment > TOML file > defaults; then check that the
    security settings fit together and that --rebalance has a policy it can move toward
    (``SettingsError`` naming the flag)."""
    values = resolve_settings("master", MASTER_SETTINGS, args, environ)
    etcd = etcd_security(values)
    for setting in ETCD_SECURITY_SETTINGS:
        del values[setting.name]
    config = MasterConfig(**values, etcd=etcd)
    check_security(config)
    check_rebalance(config.rebalance, config.policy)
    check_hierarchy(config.policy, config.hierarchy, config.fair_sharing_excluded_resources)
    return config


def check_hierarchy(policy: str, hierarchy: str, excluded: frozenset[str]) -> None:
    """The role tree and fair-sharing exclusions compare dominant shares: they need --policy
    drf (``SettingsError`` naming the flag, with the core's own reason)."""
    for flag, kwargs in (
        ("--hierarchy", {"hierarchy": hierarchy}),
        ("--fair-sharing-excluded-resources", {"fair_sharing_excluded_resources": excluded}),
    ):
        try:
            CoreConfig(policy=policy, **kwargs)
        except ValueError as error:
            raise SettingsError(f"{flag}: {error}") from None


def check_rebalance(rebalance: bool, policy: str) -> None:
    """``--rebalance`` needs a policy it can move toward (``SettingsError`` naming the flag)."""
    if rebalance and not make_fairness_policy(policy).dominant_shares:
        raise SettingsError(
            f"--rebalance: moves toward DRFH's allocation, which needs --policy drf"
            f" (or another that equalizes dominant shares), not {policy!r}"
        )


def check_security(config: MasterConfig) -> None:
    """TLS files come in pairs; tokens need TLS; an exposed port needs TLS and authentication
    (or ``--allow-insecure``)."""
    if (config.tls_cert is None) != (config.tls_key is None):
        raise SettingsError("--tls-cert and --tls-key: give both (the certificate and its key)")
    if config.tls_cert is None and config.tls_ca is not None:
        raise SettingsError(
            "--tls-ca: verifies client certificates over TLS; add --tls-cert/--tls-key"
        )
    if config.tls_cert is None and config.credentials is not None:
        raise SettingsError(
            "--credentials: bearer tokens would travel in plaintext; add --tls-cert/--tls-key"
        )
    secured = config.tls_cert is not None and config.authenticated
    if not secured and not is_loopback(config.host) and not config.allow_insecure:
        raise SettingsError(
            f"--host {config.host}: without TLS (--tls-cert/--tls-key) and authentication"
            " (--tls-ca or --credentials) anyone who reaches the port controls the cluster;"
            " bind 127.0.0.1, secure it, or add --allow-insecure"
        )
