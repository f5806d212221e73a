"""The offline allocation calculator behind ``fairshare allocate`` (docs/cases.md).

Reads a case (one pool ``resources`` or heterogeneous ``agents``, and ``frameworks`` with a task
shape, optional ``weight``, ``max_tasks`` and ``role``; optional ``roles`` weights and
``hierarchy``, ``master.commands.case_roles``), and prints the allocation as JSON:

- ``--mode tasks``: whole tasks placed by the very core the master runs
  (``master.core.target.tasks_target``: one allocation run of progressive filling with declared
  demands from a clean start, over the role tree), so the answer is exactly what a live master
  would offer;
- ``--mode fluid``: divisible tasks, the papers' closed forms (``master.core.fluid``), and over a
  role tree Static H-DRF (``master.core.fluid_tree``).

A case with roles gets a ``roles`` section and ``hierarchy`` in its output; a case without has
exactly the output it had before roles existed. Roles may carry quotas (``guarantee`` and
``limit``): tasks mode runs the core with them (its two stages, Mesos 1.9's semantics), fluid
mode fills the tree within them (``master.core.fluid_tree``, policy ``drf`` on one pool), and
the role rows say each role's guarantee, limit, consumption and whether it is below its
guarantee; a case without quotas has exactly the output it had before quotas existed.

Invariants: a malformed case raises ``CaseError`` whose message names the offending field
(``frameworks[1].task.cpus``); nothing is printed to stdout then. The same case always gives the
same output (placement ``random`` is seeded by the case's ``seed``, default 0).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from fairshare.resources import ResourceVector

from master.commands.case_roles import (
    CaseError,
    case_resources,
    effective_hierarchy,
    framework_role,
    parse_quotas,
    parse_roles,
    role_rows,
)
from master.core import CoreConfig
from master.core.checks import MAX_WEIGHT, MIN_WEIGHT
from master.core.fairness import FAIRNESS_POLICIES
from master.core.fluid import FluidAgent, FluidError, FluidFramework, FluidResult, solve_fluid
from master.core.fluid_tree import flat_weights, solve_fluid_tree
from master.core.placement import PLACEMENT_POLICIES
from master.core.quota import Quota
from master.core.target import TargetFramework, tasks_target

__all__ = ["MODES", "Case", "CaseError", "allocate", "parse_case"]

MODES = ("tasks", "fluid")
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
    if (
        isinstance(weight, bool)
        or not isinstance(weight, (int, float))
        or not (math.isfinite(weight) and weight > 0)
    ):
        raise CaseError(f"{where}.weight: expected a positive number, got {weight!r}")
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
    chosen_policy = _choice(raw, "policy", policy, sorted([*FAIRNESS_POLICIES, "ceei"]), "drf")
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


def _number(value: Fraction | float | int) -> float | int:
    if isinstance(value, Fraction) and value.denominator == 1:
        return int(value)
    return float(value)


def _task_bound(case: Case) -> int:
    """How many tasks the case could place at most (each framework alone in the pool)."""
    total = sum((resources for _, resources in case.agents), ResourceVector())
    bound = 0
    for fw in case.frameworks:
        fits = fw.task.times_fits_in(total)
        bound += fits if fw.max_tasks is None else min(fits, fw.max_tasks)
    return bound


def _allocate_tasks(case: Case) -> dict[str, Any]:
    bound = _task_bound(case)
    if bound > MAX_TASKS:
        raise CaseError(
            f"frameworks: up to {bound:,} whole tasks could be placed, more than the"
            f" {MAX_TASKS:,} tasks mode handles; set max_tasks or use --mode fluid"
        )
    for index, fw in enumerate(case.frameworks):
        if not MIN_WEIGHT <= fw.weight <= MAX_WEIGHT:  # the core's one weight rule
            raise CaseError(
                f"frameworks[{index}].weight: tasks mode (the master's core) takes weights in"
                f" [{MIN_WEIGHT:g}, {MAX_WEIGHT:g}], got {fw.weight!r}; fluid mode takes any"
                " positive weight"
            )
    config = CoreConfig(
        policy=case.policy,
        placement=case.placement,
        seed=case.seed,
        slots_per_agent=case.slots_per_agent,
        sample_size=max(16, len(case.agents)),
        hierarchy=case.hierarchy,
    )
    total = sum((resources for _, resources in case.agents), ResourceVector())
    frameworks = [
        TargetFramework(
            f"{index:06d}",
            fw.task,
            min(fw.max_tasks if fw.max_tasks is not None else fw.task.times_fits_in(total), 2**31),
            fw.weight,
            fw.name,
            fw.role,
        )
        for index, fw in enumerate(case.frameworks)
    ]
    per_framework = tasks_target(
        case.agents, frameworks, config, role_weights=case.role_weights, quotas=case.quotas
    )
    used = ResourceVector()
    rows = []
    for index, fw in enumerate(case.frameworks):
        counts = per_framework[f"{index:06d}"]
        tasks = sum(counts.values())
        allocated = fw.task * tasks
        used = used + allocated
        rows.append(
            {
                "name": fw.name,
                "tasks": tasks,
                "dominant_share": allocated.dominant_share(total),
                "allocated": allocated.to_dict(),
                "per_agent": {
                    agent_id: counts[agent_id] for agent_id, _ in case.agents if agent_id in counts
                },
            }
        )
    utilization = {name: used.millis(name) / millis for name, millis in total.millis_items()}
    return {"frameworks": rows, "utilization": utilization}


def _fluid_output(result: FluidResult) -> dict[str, Any]:
    rows = []
    for share in result.frameworks:
        row: dict[str, Any] = {
            "name": share.name,
            "tasks": _number(share.tasks),
            "dominant_share": _number(share.dominant_share),
            "allocated": {k: _number(v) for k, v in share.allocated.items()},
            "per_agent": {k: _number(v) for k, v in share.per_agent.items()},
        }
        if isinstance(share.tasks, Fraction):
            row["tasks_exact"] = str(share.tasks)
            row["dominant_share_exact"] = str(share.dominant_share)
        rows.append(row)
    output: dict[str, Any] = {
        "frameworks": rows,
        "utilization": {k: _number(v) for k, v in result.utilization.items()},
    }
    if result.prices is not None:
        output["prices"] = result.prices
    return output


def _solve_fluid(case: Case) -> FluidResult:
    """Fluid mode: the papers' closed forms; over a role tree (drf) Static H-DRF or naive's."""
    try:
        agents = [FluidAgent(agent_id, resources) for agent_id, resources in case.agents]
        frameworks = [
            FluidFramework(fw.name, fw.task, Fraction(repr(fw.weight)), fw.max_tasks)
            for fw in case.frameworks
        ]
        if not case.has_tree:
            return solve_fluid(agents, frameworks, case.policy)
        roles = [fw.role for fw in case.frameworks]
        weights = {role: Fraction(repr(w)) for role, w in case.role_weights.items()}
        if case.policy != "drf" and case.quotas:
            raise CaseError(
                f"roles: quotas in fluid mode fill the role tree by DRF (policy drf), not"
                f" {case.policy!r}; use tasks mode (the core serves quotas under any policy)"
            )
        if case.policy != "drf":  # flat: parse_case refused a tree hierarchy with this policy
            return solve_fluid(agents, flat_weights(frameworks, roles, weights), case.policy)
        return solve_fluid_tree(agents, frameworks, roles, weights, case.hierarchy, case.quotas)
    except FluidError as error:
        raise CaseError(str(error)) from None


def allocate(case: Case) -> dict[str, Any]:
    """The allocation of ``case`` as a JSON-ready dict (docs/cases.md, Output)."""
    counts: list[int | float | Fraction]
    if case.mode == "tasks":
        if case.policy == "ceei":
            raise CaseError(
                "policy: ceei (the Nash bargaining solution, DRF paper §5.2) is a fluid-mode"
                " policy; in tasks mode use pf, which serves the most deprived job toward it"
            )
        output = _allocate_tasks(case)
        counts = [row["tasks"] for row in output["frameworks"]]
    else:
        result = _solve_fluid(case)
        output = _fluid_output(result)
        counts = [share.tasks for share in result.frameworks]
    output["policy"] = case.policy
    output["mode"] = case.mode
    if case.mode == "tasks":
        output["placement"] = case.placement
    if case.has_tree:
        output["hierarchy"] = case.hierarchy
        output["roles"] = role_rows(
            [fw.role for fw in case.frameworks],
            counts,
            [fw.task for fw in case.frameworks],
            case.role_weights,
            sum((resources for _, resources in case.agents), ResourceVector()),
            case.quotas,
        )
    return output


def load_case_text(text: str, source: str) -> object:
    """Decode a case's JSON text (``CaseError`` naming the line on a syntax error)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise CaseError(f"not valid JSON: {error.msg} at line {error.lineno}") from None
