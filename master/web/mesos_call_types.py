"""What a Mesos v1 scheduler call is once read (``master.web.mesos_calls.parse_call``): a
``Call`` with one body per supported call type, in fairshare's values.

Invariants: immutable; only checked values (``parse_call`` builds them, nothing else does);
tasks are still ``MesosTask`` values, each launched or refused alone (``master.web.mesos_tasks``).
"""

from __future__ import annotations

from dataclasses import dataclass

from master.model import FrameworkInfo
from master.web.mesos_tasks import MesosTask

__all__ = [
    "Accept",
    "Acknowledge",
    "Body",
    "Call",
    "Decline",
    "Kill",
    "Reconcile",
    "Revive",
    "Subscribe",
    "Suppress",
    "Teardown",
]


@dataclass(frozen=True, slots=True)
class Subscribe:
    """Register or re-register (``spec.framework_id`` set), suppressed or not."""

    spec: FrameworkInfo
    suppressed: bool
    capabilities: frozenset[str]  # every Mesos capability asked for (MULTI_ROLE included)


@dataclass(frozen=True, slots=True)
class Accept:
    """Launch ``tasks`` on ``offer_ids``; what is left is declined for ``refuse_seconds``."""

    offer_ids: tuple[str, ...]
    tasks: tuple[MesosTask, ...]
    refuse_seconds: float


@dataclass(frozen=True, slots=True)
class Decline:
    offer_ids: tuple[str, ...]
    refuse_seconds: float


@dataclass(frozen=True, slots=True)
class Revive:
    roles: tuple[str, ...]  # empty: all (the framework's one role)


@dataclass(frozen=True, slots=True)
class Suppress:
    roles: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Kill:
    task_id: str
    agent_id: str


@dataclass(frozen=True, slots=True)
class Acknowledge:
    agent_id: str
    task_id: str
    uuid: bytes


@dataclass(frozen=True, slots=True)
class Reconcile:
    tasks: tuple[tuple[str, str], ...]  # (task id, agent id or ""); empty: implicit


@dataclass(frozen=True, slots=True)
class Teardown:
    pass


Body = Subscribe | Accept | Decline | Revive | Suppress | Kill | Acknowledge | Reconcile | Teardown


@dataclass(frozen=True, slots=True)
class Call:
    """A call: its type (``SUBSCRIBE``, ...), the framework it is about, and its body."""

    type: str
    framework_id: str
    body: Body
