"""The events of the Mesos v1 scheduler API (``scheduler.proto``'s ``Event`` in JSON), built from
the runtime's framework events, and their RecordIO framing.

A subscribed framework's stream is RecordIO: each event is ``<length>\\n<JSON>``, the length in
bytes of the UTF-8 JSON (``record``). Events, in Mesos's JSON shapes: SUBSCRIBED (framework id,
heartbeat interval, master info with the Mesos API version this master speaks, ``MESOS_VERSION``),
OFFERS (an offer's resources as SCALAR ``Resource``s of role ``*``, with ``allocation_info`` for
MULTI_ROLE frameworks; the agent's hostname; its attributes SCALAR when the value is a number,
TEXT otherwise, as a Mesos agent parses ``--attributes``), RESCIND, UPDATE (a ``TaskStatus``:
``TASK_<STATE>``, the reason's Mesos name (``REASONS``), a base64 uuid only on updates that must
be acknowledged), FAILURE (an agent lost), ERROR and HEARTBEAT.

Invariants: pure; a ``StreamEnd`` is no event (``event_json`` returns None); every value the
runtime gives has a Mesos name (the tables cover every fairshare state and reason).
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any, Final

from fairshare.resources import ResourceVector, canonical_order
from fairshare.task_states import TaskReason

from master.core.records import Offer
from master.model import (
    ErrorEvent,
    FailureEvent,
    FrameworkEvent,
    HeartbeatEvent,
    OffersEvent,
    RescindEvent,
    StatusUpdate,
    StreamEnd,
    UpdateEvent,
)

__all__ = [
    "MESOS_VERSION",
    "REASONS",
    "event_json",
    "offer_json",
    "record",
    "status_json",
    "subscribed_json",
]

MESOS_VERSION: Final = "1.11.0"
"""The Mesos release whose v1 scheduler API this master speaks (pymesos reads it from /version
and, from 1.0 on, asks for GPU_RESOURCES itself)."""

REASONS: Final = {
    TaskReason.AGENT_REMOVED: "REASON_AGENT_REMOVED",
    TaskReason.AGENT_UNREACHABLE: "REASON_AGENT_REMOVED",  # Mesos's reason for TASK_UNREACHABLE too
    TaskReason.AGENT_RESTARTED: "REASON_AGENT_RESTARTED",
    TaskReason.AGENT_DISCONNECTED: "REASON_AGENT_DISCONNECTED",
    TaskReason.AGENT_SHUTDOWN: "REASON_EXECUTOR_TERMINATED",
    TaskReason.EXECUTOR_TERMINATED: "REASON_EXECUTOR_TERMINATED",
    TaskReason.COMMAND_FAILED: "REASON_COMMAND_EXECUTOR_FAILED",
    TaskReason.TASK_INVALID: "REASON_TASK_INVALID",
    TaskReason.TASK_KILLED_DURING_LAUNCH: "REASON_TASK_KILLED_DURING_LAUNCH",
    TaskReason.FRAMEWORK_REMOVED: "REASON_FRAMEWORK_REMOVED",
    TaskReason.RECONCILIATION: "REASON_RECONCILIATION",
    TaskReason.INVALID_OFFERS: "REASON_INVALID_OFFERS",
    TaskReason.MEMORY_LIMIT: "REASON_CONTAINER_LIMITATION_MEMORY",
    TaskReason.LAUNCH_FAILED: "REASON_CONTAINER_LAUNCH_FAILED",
    TaskReason.COMMAND_INVALID: "REASON_TASK_INVALID",
    TaskReason.PREEMPTED: "REASON_CONTAINER_PREEMPTED",
}
"""fairshare's reasons (the kernel's ``TaskReason``) by the Mesos v1 reason each is sent as."""

AGENT_DECIDED: Final = frozenset(
    {
        TaskReason.AGENT_RESTARTED,
        TaskReason.AGENT_SHUTDOWN,
        TaskReason.MEMORY_LIMIT,
        TaskReason.LAUNCH_FAILED,
        TaskReason.COMMAND_INVALID,
    }
)
"""Reasons an agent decides itself (SOURCE_AGENT); an agent's other updates are its command
executor's (SOURCE_EXECUTOR), as on a Mesos agent."""


def record(event: dict[str, Any]) -> bytes:
    """``event`` as one RecordIO record."""
    body = json.dumps(event, separators=(",", ":"), allow_nan=False).encode("utf-8")
    return b"%d\n%s" % (len(body), body)


def _id(value: str) -> dict[str, str]:
    return {"value": value}


def subscribed_json(
    framework_id: str, heartbeat_interval: float, master_id: str, host: str, port: int
) -> dict[str, Any]:
    """SUBSCRIBED: the framework's id, the heartbeat interval, the master's info."""
    master = {
        "id": master_id,
        "ip": _ipv4_number(host),
        "port": port,
        "hostname": host,
        "version": MESOS_VERSION,
        "address": {"hostname": host, "port": port},
    }
    subscribed = {
        "framework_id": _id(framework_id),
        "heartbeat_interval_seconds": heartbeat_interval,
        "master_info": master,
    }
    return {"type": "SUBSCRIBED", "subscribed": subscribed}


def _ipv4_number(host: str) -> int:
    """``MasterInfo.ip``: the IPv4 address in network order read as an integer (0 if none)."""
    parts = host.split(".")
    if len(parts) != 4 or not all(p.isdigit() and int(p) < 256 for p in parts):
        return 0
    return int.from_bytes(bytes(int(p) for p in reversed(parts)), "big")


def resources_json(resources: ResourceVector, role: str | None) -> list[dict[str, Any]]:
    """Unreserved SCALAR resources (``allocation_info`` of ``role`` unless None)."""
    items = []
    for name in sorted(resources, key=canonical_order):
        item: dict[str, Any] = {
            "name": name,
            "type": "SCALAR",
            "scalar": {"value": resources.millis(name) / 1000},
            "role": "*",
        }
        if role is not None:
            item["allocation_info"] = {"role": role}
        items.append(item)
    return items


def _attribute(name: str, value: str) -> dict[str, Any]:
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if math.isfinite(number):
        return {"name": name, "type": "SCALAR", "scalar": {"value": number}}
    return {"name": name, "type": "TEXT", "text": {"value": value}}


def offer_json(offer: Offer, role: str, multi_role: bool) -> dict[str, Any]:
    """One ``Offer`` (``allocation_info`` only for MULTI_ROLE frameworks, as Mesos)."""
    allocated = role if multi_role else None
    document: dict[str, Any] = {
        "id": _id(offer.offer_id),
        "framework_id": _id(offer.framework_id),
        "agent_id": _id(offer.agent_id),
        "hostname": offer.hostname,
        "resources": resources_json(offer.resources, allocated),
        "attributes": [_attribute(name, value) for name, value in offer.attributes],
    }
    if multi_role:
        document["allocation_info"] = {"role": role}
    return document


def status_json(status: StatusUpdate) -> dict[str, Any]:
    """A ``TaskStatus``."""
    if status.source == "MASTER":
        source = "SOURCE_MASTER"
    else:
        source = "SOURCE_AGENT" if status.reason in AGENT_DECIDED else "SOURCE_EXECUTOR"
    document: dict[str, Any] = {
        "task_id": _id(status.task_id),
        "state": f"TASK_{status.state.value}",
        "source": source,
        "timestamp": status.timestamp,
    }
    if status.agent_id:
        document["agent_id"] = _id(status.agent_id)
    if status.message:
        document["message"] = status.message
    if status.reason is not TaskReason.UNSPECIFIED:
        document["reason"] = REASONS[status.reason]
    if status.uuid:
        document["uuid"] = base64.b64encode(status.uuid).decode("ascii")
    if status.healthy is not None:
        document["healthy"] = status.healthy
    return document


def event_json(event: FrameworkEvent, role: str, multi_role: bool) -> dict[str, Any] | None:
    """One event of a framework in ``role``; None for a ``StreamEnd``."""
    if isinstance(event, OffersEvent):
        offers = [offer_json(offer, role, multi_role) for offer in event.offers]
        return {"type": "OFFERS", "offers": {"offers": offers}}
    if isinstance(event, UpdateEvent):
        return {"type": "UPDATE", "update": {"status": status_json(event.status)}}
    if isinstance(event, RescindEvent):
        return {"type": "RESCIND", "rescind": {"offer_id": _id(event.offer_id)}}
    if isinstance(event, HeartbeatEvent):
        return {"type": "HEARTBEAT"}
    if isinstance(event, FailureEvent):
        return {"type": "FAILURE", "failure": {"agent_id": _id(event.agent_id)}}
    if isinstance(event, ErrorEvent):
        return {"type": "ERROR", "error": {"message": event.message}}
    if isinstance(event, StreamEnd):
        return None
    raise TypeError(f"not a framework event: {event!r}")
