"""The settings of ``fairshare master --rebalance``: whether to move long-running tasks toward
DRFH's allocation, and how eagerly.

Invariants: ``REBALANCE_DEFAULTS`` are the parsed defaults of the table; the runtime's
``RebalanceSettings`` takes its defaults from them and is built by field name behind the
``rebalance_`` prefix (``rebalance_interval`` -> ``interval``).
"""

from __future__ import annotations

from typing import Any, Final

from fairshare.setting_tables import table_defaults
from fairshare.settings import Setting, boolean, duration, positive_duration, positive_int, share

__all__ = ["REBALANCE_DEFAULTS", "REBALANCE_SETTINGS"]

REBALANCE_SETTINGS: Final = (
    Setting(
        "rebalance",
        boolean,
        False,
        "kill preemptible tasks (TaskInfo.preemptible; fairshare run's placeholder tasks) when the"
        " live allocation stays far from DRFH's allocation for the declared demand, so long-running"
        " tasks move toward it (off by default)",
        switch=True,
    ),
    Setting(
        "rebalance_interval",
        positive_duration,
        "5s",
        "--rebalance: time between two comparisons of the live allocation with DRFH's",
        metavar="DURATION",
    ),
    Setting(
        "rebalance_threshold",
        share,
        0.1,
        "--rebalance: act when some framework misses more than this share of its DRFH tasks"
        " (beyond one task)",
        metavar="SHARE",
    ),
    Setting(
        "rebalance_hysteresis",
        duration,
        "15s",
        "--rebalance: how long that gap must persist before tasks are killed (hysteresis); once"
        " acting, it goes on until the gap is down to half the threshold",
        metavar="DURATION",
    ),
    Setting(
        "rebalance_max_kills",
        positive_int,
        4,
        "--rebalance: tasks killed per interval at most; a round is followed by intervals"
        " without kills for the grace period and the allocation",
        metavar="N",
    ),
    Setting(
        "rebalance_grace",
        duration,
        "3s",
        "--rebalance: kill grace period of a preempted task (SIGTERM to SIGKILL of a command"
        " task; it is reported KILLED with reason PREEMPTED)",
        metavar="DURATION",
    ),
)
"""The settings of ``--rebalance`` (part of ``MASTER_SETTINGS``)."""

REBALANCE_DEFAULTS: Final[dict[str, Any]] = table_defaults(REBALANCE_SETTINGS)
