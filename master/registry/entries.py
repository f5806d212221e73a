"""What the master's registry holds (docs/architecture.md §4),
whatever store keeps it: agent and framework
entries, the agent states the registry records, their JSON form (and that of a role's quota),
and the work dir's marker of the cluster whose registry it kept (``cluster.id``: a registry is
never silently reset).

Invariants: entries are immutable values; ``*_to_json`` and ``*_from_json`` are inverse (a spec
or quota read back equals the one written); an agent's registry state is one of
``AGENT_STATES``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from fairshare.resources import ResourceVector

from master.core.drain import DRAIN_STATES
from master.core.quota import Quota
from master.model import AgentSpec, FrameworkInfo

__all__ = [
    "ADMITTED",
    "AGENT_STATES",
    "GONE",
    "UNREACHABLE",
    "AgentDrain",
    "AgentEntry",
    "FrameworkEntry",
    "RegistryError",
    "RegistryWriteError",
    "agent_spec_from_json",
    "agent_spec_to_json",
    "drain_from_json",
    "drain_to_json",
    "framework_spec_from_json",
    "framework_spec_to_json",
    "quota_from_json",
    "quota_to_json",
    "read_marker",
    "reservations_from_json",
    "reservations_to_json",
    "write_marker",
]

ADMITTED: Final = "ADMITTED"
UNREACHABLE: Final = "UNREACHABLE"
GONE: Final = "GONE"
AGENT_STATES: Final = frozenset({ADMITTED, UNREACHABLE, GONE})


class RegistryError(Exception):
    """The registry cannot be used; the master must not start (the message says why)."""


class RegistryWriteError(Exception):
    """A write did not commit; nothing was changed."""


@dataclass(frozen=True, slots=True)
class AgentDrain:
    """An operator's drain of an agent (``master.core.drain``): DRAINING or DRAINED, when it
    started and its deadline (wall clock; None: the tasks may run to their end)."""

    state: str
    started_at: float
    deadline: float | None = None


@dataclass(frozen=True, slots=True)
class AgentEntry:
    """An agent the master admitted; ``state`` is ADMITTED, UNREACHABLE or GONE; ``principal``
    the principal that registered it (only that principal may reregister it: the node
    restriction; ``""`` when authentication was off); ``changed_at`` when its state last
    changed (wall clock; the registry forgets unreachable and gone agents by that age)."""

    agent_id: str
    spec: AgentSpec
    registered_at: float  # wall clock
    state: str = ADMITTED
    active: bool = True  # False while the operator has it deactivated (or drains it)
    principal: str = ""
    changed_at: float = 0.0
    drain: AgentDrain | None = None  # the operator's drain, if any (then active is False)


@dataclass(frozen=True, slots=True)
class FrameworkEntry:
    """A framework the master registered; ``removed`` once torn down or failed over for good
    (``removed_at``, wall clock: the registry forgets removed frameworks by that age). Its
    owner is ``spec.principal``."""

    spec: FrameworkInfo
    registered_at: float  # wall clock
    removed: bool = False
    removed_at: float = 0.0


def agent_spec_to_json(spec: AgentSpec) -> str:
    return json.dumps(
        {
            "hostname": spec.hostname,
            "port": spec.port,
            "resources": dict(spec.resources.millis_items()),
            "attributes": [list(pair) for pair in spec.attributes],
            "version": spec.version,
            "reservations": [[role, dict(r.millis_items())] for role, r in spec.reservations],
        },
        sort_keys=True,
    )


def agent_spec_from_json(text: str) -> AgentSpec:
    raw = json.loads(text)
    return AgentSpec(
        hostname=raw["hostname"],
        port=int(raw["port"]),
        resources=ResourceVector.from_millis({k: int(v) for k, v in raw["resources"].items()}),
        attributes=tuple((str(k), str(v)) for k, v in raw["attributes"]),
        version=raw["version"],
        reservations=tuple((str(role), _millis(r)) for role, r in raw.get("reservations", ())),
    )


def drain_to_json(drain: AgentDrain) -> str:
    """A drain as JSON: ``{"state", "started_at", "deadline"}`` (``deadline`` null: none)."""
    return json.dumps(
        {"state": drain.state, "started_at": drain.started_at, "deadline": drain.deadline},
        sort_keys=True,
    )


def drain_from_json(text: str) -> AgentDrain:
    """The drain ``drain_to_json`` wrote (``ValueError`` for anything else)."""
    raw = json.loads(text)
    if not isinstance(raw, dict) or raw.get("state") not in DRAIN_STATES:
        raise ValueError(f"a drain is an object with a state in {DRAIN_STATES}, not {text!r}")
    deadline = raw.get("deadline")
    return AgentDrain(
        str(raw["state"]), float(raw["started_at"]), None if deadline is None else float(deadline)
    )


def framework_spec_to_json(spec: FrameworkInfo) -> str:
    fields = dataclasses.asdict(spec)
    fields["capabilities"] = sorted(spec.capabilities)
    return json.dumps(fields, sort_keys=True)


def framework_spec_from_json(text: str) -> FrameworkInfo:
    raw = json.loads(text)
    raw["capabilities"] = frozenset(raw["capabilities"])
    return FrameworkInfo(**raw)


def quota_to_json(quota: Quota) -> str:
    """A role's quota as JSON: milli quantities, ``"limit": null`` for no limit."""
    limit = None if quota.limit is None else dict(quota.limit.millis_items())
    return json.dumps(
        {"guarantee": dict(quota.guarantee.millis_items()), "limit": limit}, sort_keys=True
    )


def quota_from_json(text: str) -> Quota:
    """The quota ``quota_to_json`` wrote (``ValueError`` for anything else)."""
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError("a quota is a JSON object")
    guarantee, limit = _millis(raw["guarantee"]), raw["limit"]
    return Quota(guarantee, None if limit is None else _millis(limit))


def reservations_to_json(reserved: tuple[tuple[str, ResourceVector], ...]) -> str:
    """An agent's dynamic reservations as JSON: role path -> milli quantities."""
    return json.dumps({role: dict(r.millis_items()) for role, r in reserved}, sort_keys=True)


def reservations_from_json(text: str) -> tuple[tuple[str, ResourceVector], ...]:
    """The reservations ``reservations_to_json`` wrote (``ValueError`` for anything else)."""
    raw = json.loads(text)
    if not isinstance(raw, dict) or not all(isinstance(role, str) and role for role in raw):
        raise ValueError("reservations are a JSON object of role paths")
    return tuple(sorted((role, _millis(resources)) for role, resources in raw.items()))


def _millis(raw: object) -> ResourceVector:
    if not isinstance(raw, dict) or not all(type(v) is int for v in raw.values()):
        raise ValueError(f"resources must be an object of milli quantities, not {raw!r}")
    return ResourceVector.from_millis(raw)


def read_marker(marker: Path) -> str | None:
    """The cluster id a work dir's marker (``cluster.id``) names, None if it has none."""
    try:
        text = marker.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise RegistryError(f"cannot read {marker}: {error.strerror}") from None
    return text or None


def write_marker(marker: Path, cluster_id: str) -> None:
    """Record in the work dir that it kept (or knew) the registry of cluster ``cluster_id``."""
    tmp = marker.with_name(marker.name + ".tmp")
    try:
        tmp.write_text(cluster_id + "\n", encoding="utf-8")
        os.replace(tmp, marker)
    except OSError as error:
        raise RegistryError(f"cannot write {marker}: {error.strerror}") from None
