"""``FrameworkInfo`` and ``Demand``: who a framework is and what it wants, as it subscribes (the
wire's ``FrameworkInfo`` and ``Demand``).

One definition for the SDK (what a framework sends; re-exported by ``framework_sdk``), the
master (what it keeps for each framework, in its registry too) and the Mesos HTTP API's
adapter; the conversions to and from the wire live at each side's boundary
(``framework_sdk.wire``, ``master.service.convert``, ``master.web.mesos_calls``).

Invariants: immutable; ``name`` non-empty; ``weight`` None (the operator's weights apply) or
finite and > 0 (the master's own range and its ACL cap are its policy, checked where it
admits the framework); ``failover_timeout`` finite seconds >= 0; ``capabilities`` are the
names of ``Capability`` (a ``StrEnum``: its members are those strings); a ``Demand`` has a
non-empty shape and ``max_tasks`` None (unlimited) or >= 0. Constructing one that breaks them
raises ``ValueError``. Pure (no wire API).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Final

from fairshare.resources import ResourceVector

__all__ = ["DEFAULT_FAILOVER_TIMEOUT", "Capability", "Demand", "FrameworkInfo", "check_seconds"]

DEFAULT_FAILOVER_TIMEOUT: Final = 0.0
"""Mesos's default: a framework whose connection ends is removed at once, its tasks killed. A
framework that must survive its scheduler's restarts sets ``FrameworkInfo.failover_timeout``
(``fairshare run --detach`` sets a week: ``DETACHED_FAILOVER_TIMEOUT`` in its CLI)."""


class Capability(enum.StrEnum):
    """Optional features a framework understands (the wire's ``FrameworkInfo.Capability``
    without the ``CAPABILITY_`` prefix)."""

    PARTITION_AWARE = "PARTITION_AWARE"
    TASK_KILLING_STATE = "TASK_KILLING_STATE"
    GPU_RESOURCES = "GPU_RESOURCES"


def check_seconds(name: str, value: float | None, *, allow_zero: bool = True) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``value`` is None or finite seconds >= 0
    (> 0 without ``allow_zero``)."""
    if value is None:
        return
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class FrameworkInfo:
    """Who a framework is, sent when it subscribes.

    ``framework_id`` empty: register afresh; set: resubscribe (scheduler failover) and keep the
    tasks the master still has. ``failover_timeout`` (seconds) is how long the master keeps the
    framework and its tasks after the connection ends; 0 (the default, as in Mesos) removes them
    at once.
    """

    name: str
    role: str = "*"
    weight: float | None = None
    failover_timeout: float = DEFAULT_FAILOVER_TIMEOUT
    framework_id: str = ""
    capabilities: frozenset[str] = frozenset()
    principal: str = ""
    user: str = ""
    hostname: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("FrameworkInfo.name must not be empty")
        if self.weight is not None and (not math.isfinite(self.weight) or self.weight <= 0):
            raise ValueError(f"FrameworkInfo.weight must be finite and > 0, got {self.weight!r}")
        check_seconds("FrameworkInfo.failover_timeout", self.failover_timeout)
        unknown = sorted(set(self.capabilities) - set(Capability))
        if unknown:
            raise ValueError(f"FrameworkInfo.capabilities: unknown {unknown}")


@dataclass(frozen=True, slots=True)
class Demand:
    """A declared task shape and how many non-terminal tasks are wanted (None: unlimited)."""

    task_resources: ResourceVector
    max_tasks: int | None = None

    def __post_init__(self) -> None:
        if not self.task_resources:
            raise ValueError("Demand.task_resources must not be empty")
        if self.max_tasks is not None and self.max_tasks < 0:
            raise ValueError(f"Demand.max_tasks must be >= 0, got {self.max_tasks}")
