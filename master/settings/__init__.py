"""The settings of ``fairshare master``, each declared once (docs/architecture.md §7).

One table, ``MASTER_SETTINGS``, assembled from one module per concern (``serving``,
``allocation``, ``security``, ``limits``, ``rebalance``), is the source of every setting's flag,
variable, TOML key, parser, default, choices and help; ``MASTER_DEFAULTS`` are its parsed
defaults. Why a table of ``Setting`` rather than dataclass fields carrying their setting as
metadata: the kernel's resolver, ``--help`` and the client commands already speak tables, a
table entry reads as one declaration, and the config dataclasses keep plain annotated fields
that mypy checks, each default read from here (``master.config.MasterConfig``, the runtime's
``RuntimeConfig``, ``RuntimeLimits`` and ``RebalanceSettings``).

Invariants: this package imports only the kernel and ``master.core`` (an import contract), so
the daemon's config and the runtime both read their defaults from it without importing upward;
the names are unique; ``fault_drop_acks`` (tests only) has no flag.
"""

from __future__ import annotations

from typing import Any, Final

from fairshare.setting_tables import table_defaults
from fairshare.settings import SHARED_SETTINGS, Setting, boolean, share

from master.settings.allocation import ALLOCATION_SETTINGS
from master.settings.limits import LIMIT_SETTINGS
from master.settings.rebalance import REBALANCE_SETTINGS
from master.settings.security import SECURITY_SETTINGS
from master.settings.serving import SERVING_SETTINGS, SESSION_SETTINGS

__all__ = ["MASTER_DEFAULTS", "MASTER_SETTINGS"]

MASTER_SETTINGS: Final = (
    *SERVING_SETTINGS,
    *ALLOCATION_SETTINGS,
    *SESSION_SETTINGS,
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

MASTER_DEFAULTS: Final[dict[str, Any]] = table_defaults(MASTER_SETTINGS)
"""Each setting's parsed default: the defaults of ``MasterConfig`` and the runtime's configs."""
