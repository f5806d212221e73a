"""A case file of ``fairshare allocate`` (docs/cases.md), read and checked: ``Case``.

A case is one pool ``resources`` or heterogeneous ``agents``, and ``frameworks`` with a task
shape, optional ``weight``, ``max_tasks`` and ``role``; optional ``roles`` weights and quotas and
``hierarchy`` (``analysis.calculator.case_roles``); ``policy``, ``placement``, ``mode``, ``seed``
and ``slots_per_agent``. The policy and placement names are the core's strategy tables'
(``FAIRNESS_POLICIES``, ``PLACEMENT_POLICIES``) plus ``ceei``, fluid mode's one policy of its
own (``analysis.fluid.solver.FLUID_ONLY_POLICIES``). ``analysis.calculator.allocation``
allocates a ``Case``.

Invariants: a malformed case raises ``CaseError`` whose message names the offending field
(``frameworks[1].task.cpus``); a ``Case`` holds only checked values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fairshare.resources import ResourceVector

from analysis.calculator.case_roles import (
    CaseError,
    case_resources,
    effective_hierarchy,
    framework_role,
    parse_quotas,
    parse_roles,
)
from analysis.fluid.solver import FLUID_ONLY_POLICIES, FluidError, fluid_weight
from master.core.fairness import FAIRNESS_POLICIES
from master.core.placement import PLACEMENT_POLICIES
from master.core.quota import Quota

__all__ = [
    "MAX_TASKS",
    "MODES",
    "POLICIES",
    "POOL_AGENT_ID",
    "Case",
    "CaseError",
    "load_case_text",
    "parse_case",
]

MODES = ("tasks", "fluid")
POLICIES = tuple(sorted([*FAIRNESS_POLICIES, *FLUID_ONLY_POLICIES]))
"""The policies a case may name: the core's, and fluid mode's own (``ceei``, fluid mode only)."""
MAX_TASKS = 2_000_000  # tasks mode places tasks one by one: about ten seconds of work
POOL_AGENT_ID = "pool"
_TOP_KEYS = {
    "resources",
    "agents",
    "frameworks",
    "policy",
    "placement",
    "mode",
    "seed",
    "slots_per_agent",
    "roles",
    "hierarchy",
}
_FRAMEWORK_KEYS = {"name", "task", "weight", "max_tasks", "role"}
_AGENT_KEYS = {"id", "resources"}


@dataclass(frozen=True)
class CaseFramework:
    """One framework of a case."""

    name: str
    task: ResourceVector
    weight: float
    max_tasks: int | None
    role: str = "*"


@dataclass(frozen=True)
class Case:
    """A validated case: agents (one named ``pool`` for a single pool) and frameworks."""

    agents: list[tuple[str, ResourceVector]]
    frameworks: list[CaseFramework]
    policy: str
    placement: str
    mode: str
    seed: int
    slots_per_agent: int
    role_weights: dict[str, float] = field(default_factory=dict)
    hierarchy: str = "flat"  # the one in force (``effective_hierarchy``)
    has_tree: bool = False  # roles or a framework role given: the output lists the roles
    quotas: dict[str, Quota] = field(default_factory=dict)  # role path -> guarantee, limit


_resources = case_resources


def _choice(
    raw: Mapping[str, Any], key: str, override: str | None, allowed: list[str], default: str
) -> str:
    value = override if override is not None else raw.get(key, default)
    if value not in allowed:
        raise CaseError(f"{key}: {value!r} is not one of {', '.join(allowed)}")
    return str(value)


def _whole(raw: Mapping[str, Any], key: str, default: int, minimum: int, where: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CaseError(f"{where}{key}: expected a whole number >= {minimum}, got {value!r}")
    return value


def _framework(raw: object, index: int, seen: set[str]) -> CaseFramework:
    where = f"frameworks[{index}]"
    if not isinstance(raw, Mapping):
        raise CaseError(f"{where}: expected an object with name and task")
    unknown = sorted(set(raw) - _FRAMEWORK_KEYS)
    if unknown:
        raise CaseError(
            f"{where}.{unknown[0]}: unknown field (known: name, task, weight, max_tasks, role)"
        )
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise CaseError(f"{where}.name: expected a non-empty string")
    if name in seen:
        raise CaseError(f"{where}.name: {name!r} is used twice")
    seen.add(name)
    if "task" not in raw:
        raise CaseError(f"{where}.task: missing")
    task = _resources(raw["task"], f"{where}.task")
    weight = raw.get("weight", 1)
    try:  # any positive weight here; tasks mode holds it to the core's rule (allocation)
        fluid_weight(weight, f"{where}.weight")
    except FluidError as error:
        raise CaseError(str(error)) from None
    max_tasks = raw.get("max_tasks")
    if max_tasks is not None and (
        isinstance(max_tasks, bool) or not isinstance(max_tasks, int) or max_tasks < 0
    ):
        raise CaseError(f"{where}.max_tasks: expected a whole number >= 0, got {max_tasks!r}")
    return CaseFramework(name, task, float(weight), max_tasks, framework_role(raw, where))


def _agents(raw: Mapping[str, Any]) -> list[tuple[str, ResourceVector]]:
    if ("resources" in raw) == ("agents" in raw):
        raise CaseError("resources/agents: give exactly one of 'resources' (one pool) or 'agents'")
    if "resources" in raw:
        return [(POOL_AGENT_ID, _resources(raw["resources"], "resources"))]
    listed = raw["agents"]
    if not isinstance(listed, list) or not listed:
        raise CaseError("agents: expected a non-empty list of {id, resources}")
    agents: list[tuple[str, ResourceVector]] = []
    for index, agent in enumerate(listed):
        where = f"agents[{index}]"
        if not isinstance(agent, Mapping):
            raise CaseError(f"{where}: expected an object with id and resources")
        unknown = sorted(set(agent) - _AGENT_KEYS)
        if unknown:
            raise CaseError(f"{where}.{unknown[0]}: unknown field (known: id, resources)")
        agent_id = agent.get("id", f"agent-{index + 1}")
        if not isinstance(agent_id, str) or not agent_id.strip():
            raise CaseError(f"{where}.id: expected a non-empty string")
        if any(agent_id == known for known, _ in agents):
            raise CaseError(f"{where}.id: {agent_id!r} is used twice")
        if "resources" not in agent:
            raise CaseError(f"{where}.resources: missing")
        agents.append((agent_id, _resources(agent["resources"], f"{where}.resources")))
    return agents


def parse_case(
    raw: object,
    policy: str | None = None,
    placement: str | None = None,
    mode: str | None = None,
    hierarchy: str | None = None,
) -> Case:
    """Validate a decoded case; flags (``policy``, ``placement``, ``mode``, ``hierarchy``) win
    over the file."""
    if not isinstance(raw, Mapping):
        raise CaseError("case: expected a JSON object")
    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        raise CaseError(f"{unknown[0]}: unknown field (known: {', '.join(sorted(_TOP_KEYS))})")
    agents = _agents(raw)
    listed = raw.get("frameworks")
    if not isinstance(listed, list) or not listed:
        raise CaseError("frameworks: expected a non-empty list")
    seen: set[str] = set()
    frameworks = [_framework(fw, index, seen) for index, fw in enumerate(listed)]
    chosen_policy = _choice(raw, "policy", policy, list(POLICIES), "drf")
    named = hierarchy if hierarchy is not None else raw.get("hierarchy")
    return Case(
        agents=agents,
        frameworks=frameworks,
        policy=chosen_policy,
        placement=_choice(raw, "placement", placement, sorted(PLACEMENT_POLICIES), "best-fit"),
        mode=_choice(raw, "mode", mode, list(MODES), "tasks"),
        seed=_whole(raw, "seed", 0, 0, ""),
        slots_per_agent=_whole(raw, "slots_per_agent", 14, 1, ""),
        role_weights=parse_roles(raw),
        hierarchy=effective_hierarchy(named, chosen_policy),
        has_tree="roles" in raw or any(isinstance(fw, Mapping) and "role" in fw for fw in listed),
        quotas=parse_quotas(raw),
    )


def load_case_text(text: str, source: str) -> object:
    """Decode a case's JSON text (``CaseError`` naming the line on a syntax error)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise CaseError(f"not valid JSON: {error.msg} at line {error.lineno}") from None
