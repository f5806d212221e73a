"""``MasterConfig``: the resolved settings of ``fairshare master`` (docs/architecture.md §7).

The settings themselves (flag, variable, TOML key, parser, default, choices, help) are declared
once, in ``master.settings`` (``MASTER_SETTINGS``, re-exported here), and resolved by the kernel's
one resolver (``fairshare.settings``): flags, then ``FAIRSHARE_MASTER_<NAME>`` variables
(``FAIRSHARE_LOG_LEVEL``/``FAIRSHARE_LOG_FORMAT`` too), then the ``[master]`` table of the TOML
file (``--config``, ``FAIRSHARE_MASTER_CONFIG`` or ``FAIRSHARE_CONFIG``; shared ``log_*`` keys
may sit at its top level), then the defaults.

Invariants: ``MasterConfig`` has exactly the table's names, each field's default read from the
table (``MASTER_DEFAULTS``; a test checks both), but for ``etcd``, the ``etcd_*`` settings folded
into one ``EtcdSecurity`` (``master_config``), so ``load_config`` with no flag, variable or file
gives ``MasterConfig()``; ``load_config`` returns a fully checked config or raises
``SettingsError`` naming the flag, variable or key and the reason. This module imports the kernel,
``master.settings`` and ``master.core`` only, never the runtime above them.

Security (docs/security.md): ``--tls-cert``/``--tls-key`` put TLS on both ports, ``--tls-ca`` makes
client certificates required and identities (gRPC cannot ask for an optional one; a bearer
token, when ``--credentials`` accepts them, names the principal instead of the certificate),
``--credentials`` accepts bearer tokens, ``--acls`` says who may do what; without TLS and
authentication the master refuses a ``--host`` other than loopback unless ``--allow-insecure``
(``check_exposure``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from fairshare.etcd_security import EtcdSecurity
from fairshare.resources import ResourceVector
from fairshare.settings import (
    ETCD_SECURITY_SETTINGS,
    SettingsError,
    etcd_security,
    resolve_settings,
)
from fairshare.transport import is_loopback

from master.core.config import CoreConfig
from master.core.fairness import make_fairness_policy
from master.core.resource_caps import ResourceCap
from master.settings import MASTER_DEFAULTS, MASTER_SETTINGS
from master.settings.allocation import hierarchy, resource_names

__all__ = [
    "MASTER_SETTINGS",
    "MasterConfig",
    "check_hierarchy",
    "check_rebalance",
    "hierarchy",
    "load_config",
    "master_config",
    "resource_names",
]

_DEFAULT: Final[Mapping[str, Any]] = MASTER_DEFAULTS
_ETCD_DEFAULT: Final = etcd_security(_DEFAULT)  # the etcd_* settings' defaults, folded


@dataclass(frozen=True, slots=True)
class MasterConfig:
    """Every setting of ``fairshare master``: one field per entry of ``MASTER_SETTINGS``, typed
    here, its default read from the table."""

    host: str = _DEFAULT["host"]
    port: int = _DEFAULT["port"]
    metrics_port: int = _DEFAULT["metrics_port"]
    work_dir: str = _DEFAULT["work_dir"]
    io_workers: int = _DEFAULT["io_workers"]
    policy: str = _DEFAULT["policy"]
    hierarchy: str = _DEFAULT["hierarchy"]
    fair_sharing_excluded_resources: frozenset[str] = _DEFAULT["fair_sharing_excluded_resources"]
    min_allocatable_resources: tuple[ResourceVector, ...] = _DEFAULT["min_allocatable_resources"]
    placement: str = _DEFAULT["placement"]
    placement_sample: int = _DEFAULT["placement_sample"]
    allocation_interval: float = _DEFAULT["allocation_interval"]
    agent_timeout: float = _DEFAULT["agent_timeout"]
    reregistration_timeout: float = _DEFAULT["reregistration_timeout"]
    registry: str = _DEFAULT["registry"]
    registry_sync: str = _DEFAULT["registry_sync"]
    election_ttl: float = _DEFAULT["election_ttl"]
    advertise: str | None = _DEFAULT["advertise"]
    offer_timeout: float | None = _DEFAULT["offer_timeout"]
    heartbeat_interval: float = _DEFAULT["heartbeat_interval"]
    shutdown_grace: float = _DEFAULT["shutdown_grace"]
    log_format: str = _DEFAULT["log_format"]
    log_level: str = _DEFAULT["log_level"]
    validate: bool = _DEFAULT["validate"]
    tls_cert: Path | None = _DEFAULT["tls_cert"]
    tls_key: Path | None = _DEFAULT["tls_key"]
    tls_ca: Path | None = _DEFAULT["tls_ca"]
    credentials: Path | None = _DEFAULT["credentials"]
    acls: Path | None = _DEFAULT["acls"]
    allow_insecure: bool = _DEFAULT["allow_insecure"]
    max_connections: int | None = _DEFAULT["max_connections"]
    max_streams_per_connection: int = _DEFAULT["max_streams_per_connection"]
    idle_timeout: float = _DEFAULT["idle_timeout"]
    max_frameworks_per_principal: int = _DEFAULT["max_frameworks_per_principal"]
    max_agents_per_principal: int = _DEFAULT["max_agents_per_principal"]
    registration_rate: float = _DEFAULT["registration_rate"]
    registration_burst: int = _DEFAULT["registration_burst"]
    registry_max_agent_age: float = _DEFAULT["registry_max_agent_age"]
    registry_max_agent_count: int = _DEFAULT["registry_max_agent_count"]
    registry_max_framework_age: float = _DEFAULT["registry_max_framework_age"]
    registry_max_framework_count: int = _DEFAULT["registry_max_framework_count"]
    max_agent_resources: ResourceCap = _DEFAULT["max_agent_resources"]
    max_principal_resources: ResourceCap = _DEFAULT["max_principal_resources"]
    max_resource_names: int = _DEFAULT["max_resource_names"]
    fault_drop_acks: float = _DEFAULT["fault_drop_acks"]
    rebalance: bool = _DEFAULT["rebalance"]
    rebalance_interval: float = _DEFAULT["rebalance_interval"]
    rebalance_threshold: float = _DEFAULT["rebalance_threshold"]
    rebalance_hysteresis: float = _DEFAULT["rebalance_hysteresis"]
    rebalance_max_kills: int = _DEFAULT["rebalance_max_kills"]
    rebalance_grace: float = _DEFAULT["rebalance_grace"]
    registry_key: Path | None = _DEFAULT["registry_key"]  # HMAC key signing etcd registry rows
    # The one field that is not a setting: the ``etcd_*`` settings (the kernel's
    # ETCD_SECURITY_SETTINGS, reaching --registry etcd://) folded into one value.
    etcd: EtcdSecurity = _ETCD_DEFAULT

    @property
    def authenticated(self) -> bool:
        """True when every call must come from a known principal."""
        return self.tls_ca is not None or self.credentials is not None


def load_config(args: argparse.Namespace, environ: Mapping[str, str]) -> MasterConfig:
    """Resolve the settings: flags > environment > TOML file > defaults; then check that the
    security settings fit together and that --rebalance has a policy it can move toward
    (``SettingsError`` naming the flag)."""
    config = master_config(resolve_settings("master", MASTER_SETTINGS, args, environ))
    check_security(config)
    check_rebalance(config.rebalance, config.policy)
    check_hierarchy(config.policy, config.hierarchy, config.fair_sharing_excluded_resources)
    return config


def master_config(values: Mapping[str, Any]) -> MasterConfig:
    """The ``MasterConfig`` of resolved ``MASTER_SETTINGS`` values: the ``etcd_*`` ones folded
    into ``etcd`` (``SettingsError`` naming the flag when they do not fit together)."""
    etcd_names = {setting.name for setting in ETCD_SECURITY_SETTINGS}
    fields = {name: value for name, value in values.items() if name not in etcd_names}
    return MasterConfig(**fields, etcd=etcd_security(values))


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
