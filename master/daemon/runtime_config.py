"""The master's runtime config, built from its resolved settings by field name.

Invariants: ``runtime_config`` copies every setting named like a field of ``RuntimeConfig``,
``CoreConfig`` (with ``CORE_RENAMES``), ``RuntimeLimits`` or, behind the ``rebalance_`` prefix,
``RebalanceSettings`` (``fairshare.setting_tables.built_from``): a new setting named like one of
their fields reaches them with no change here; what is not a setting (the ACL, whether callers
are authenticated, the event sink) is wired in explicitly.
"""

from __future__ import annotations

from fairshare.setting_tables import built_from

from master.config import MasterConfig
from master.core import CoreConfig
from master.runtime import RuntimeConfig
from master.runtime.authority import RuntimeLimits
from master.runtime.events import NO_EVENTS, EventSink
from master.runtime.rebalance_settings import RebalanceSettings
from master.security import MasterSecurity
from master.settings.allocation import CORE_RENAMES

__all__ = ["rebalance_settings", "runtime_config"]


def runtime_config(
    config: MasterConfig, security: MasterSecurity, events: EventSink = NO_EVENTS
) -> RuntimeConfig:
    """The runtime's and the core's configs, built by field name from the resolved settings (a
    new setting named like a field of theirs reaches them with no change here)."""
    return built_from(
        RuntimeConfig,
        config,
        core=built_from(CoreConfig, config, renames=CORE_RENAMES),
        acl=security.acl,
        authenticated=security.authenticator.required,
        limits=built_from(RuntimeLimits, config),
        rebalance=rebalance_settings(config),
        events=events,
    )


def rebalance_settings(config: MasterConfig) -> RebalanceSettings | None:
    """The rebalancer's knobs (the ``rebalance_*`` settings); None without ``--rebalance``."""
    if not config.rebalance:
        return None
    return built_from(RebalanceSettings, config, prefix="rebalance_")
