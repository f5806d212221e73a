"""The allocation settings of ``fairshare master``: fairness and placement policies, the role
tree, what may be offered, and how often allocation runs.

Invariants: the choices are the core's own strategy tables (``FAIRNESS_POLICIES``,
``PLACEMENT_POLICIES``, ``HIERARCHIES``); the defaults the core also has (policy, placement,
sample size, hierarchy, offer timeout, validation) are read from ``CoreConfig()``, so the master and
a core built without a daemon agree. ``min_allocatable_resources`` alone differs on purpose: the
master takes Mesos's default, a bare ``CoreConfig`` (simulations, tests) offers any free resources.
``CORE_RENAMES`` names the two core fields spelt differently from their setting; every other core
field takes the setting of its own name (``fairshare.setting_tables.built_from``).
"""

from __future__ import annotations

from typing import Final

from fairshare.resources import ResourceVector
from fairshare.settings import Setting, choice, positive_duration, positive_int

from master.core.config import CoreConfig
from master.core.fairness import FAIRNESS_POLICIES
from master.core.hierarchy import HIERARCHIES
from master.core.placement import PLACEMENT_POLICIES

__all__ = [
    "ALLOCATION_SETTINGS",
    "CORE_RENAMES",
    "PLACEMENTS",
    "POLICIES",
    "hierarchy",
    "min_allocatable",
    "resource_names",
]

POLICIES: Final = tuple(FAIRNESS_POLICIES)  # the core's strategy tables name the choices
PLACEMENTS: Final = tuple(PLACEMENT_POLICIES)
_CORE: Final = CoreConfig()
CORE_RENAMES: Final = {
    "sample_size": "placement_sample",
    "min_allocatable": "min_allocatable_resources",
}
"""``CoreConfig`` field -> its setting, where the names differ (``built_from``)."""


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


ALLOCATION_SETTINGS: Final = (
    Setting("policy", choice(*POLICIES), _CORE.policy, "fairness policy", choices=POLICIES),
    Setting(
        "hierarchy",
        hierarchy,
        _CORE.hierarchy,
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
    Setting(
        "placement", choice(*PLACEMENTS), _CORE.placement, "placement policy", choices=PLACEMENTS
    ),
    Setting(
        "placement_sample",
        positive_int,
        _CORE.sample_size,
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
)
"""How the master allocates, in the order ``--help`` shows them."""
