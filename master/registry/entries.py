"""What the master's registry holds (DESIGN.md §6), whatever store keeps it: agent and framework
entries, the agent states the registry records, and their JSON form.

Invariants: entries are immutable values; ``*_to_json`` and ``*_from_json`` are inverse (a spec
read back equals the spec written); an agent's registry state is one of ``AGENT_STATES``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Final

from fairshare.resources import ResourceVector

from master.model import AgentSpec, FrameworkSpec

__all__ = [
    "ADMITTED",
    "AGENT_STATES",
    "GONE",
    "UNREACHABLE",
    "AgentEntry",
    "FrameworkEntry",
    "RegistryError",
    "RegistryWriteError",
    "agent_spec_from_json",
    "agent_spec_to_json",
    "framework_spec_from_json",
    "framework_spec_to_json",
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
class AgentEntry:
    """An agent the master admitted; ``state`` is ADMITTED, UNREACHABLE or GONE; ``principal``
    the principal that registered it (only that principal may reregister it: the node
    restriction; ``""`` when authentication was off); ``changed_at`` when its state last
    changed (wall clock; the registry forgets unreachable and gone agents by that age)."""

    agent_id: str
    spec: AgentSpec
    registered_at: float  # wall clock
    state: str = ADMITTED
    active: bool = True  # False while the operator has it deactivated
    principal: str = ""
    changed_at: float = 0.0


@dataclass(frozen=True, slots=True)
class FrameworkEntry:
    """A framework the master registered; ``removed`` once torn down or failed over for good
    (``removed_at``, wall clock: the registry forgets removed frameworks by that age). Its
    owner is ``spec.principal``."""

    spec: FrameworkSpec
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
    )


def framework_spec_to_json(spec: FrameworkSpec) -> str:
    fields = dataclasses.asdict(spec)
    fields["capabilities"] = sorted(spec.capabilities)
    return json.dumps(fields, sort_keys=True)


def framework_spec_from_json(text: str) -> FrameworkSpec:
    raw = json.loads(text)
    raw["capabilities"] = frozenset(raw["capabilities"])
    return FrameworkSpec(**raw)
