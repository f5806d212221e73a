"""The offline allocation calculator behind ``fairshare allocate`` (docs/cases.md): ``allocate``.

Reads a case (one pool ``resources`` or heterogeneous ``agents``, and ``frameworks`` with a task
shape, optional ``weight``, ``max_tasks`` and ``role``; optional ``roles`` weights and
``hierarchy``, ``analysis.calculator.case_roles``), and prints the allocation as JSON:

- ``--mode tasks``: whole tasks placed by the very core the master runs
  (``master.core.target.tasks_target``: one allocation run of progressive filling with declared
  demands from a clean start, over the role tree), so the answer is exactly what a live master
  would offer;
- ``--mode fluid``: divisible tasks, the papers' closed forms (``analysis.fluid.solver``), and
  over a role tree Static H-DRF (``analysis.fluid.tree``).

A case with roles gets a ``roles`` section and ``hierarchy`` in its output; a case without has
exactly the output it had before roles existed. Roles may carry quotas (``guarantee`` and
``limit``): tasks mode runs the core with them (its two stages, Mesos 1.9's semantics), fluid
mode fills the tree within them (``analysis.fluid.tree``, policy ``drf`` on one pool), and
the role rows say each role's guarantee, limit, consumption and whether it is below its
guarantee; a case without quotas has exactly the output it had before quotas existed.

Invariants: a malformed case raises ``CaseError`` whose message names the offending field
(``frameworks[1].task.cpus``); nothing is printed to stdout then. The same case always gives the
same output (placement ``random`` is seeded by the case's ``seed``, default 0).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from fairshare.resources import ResourceVector

from analysis.calculator.case import MAX_TASKS, Case, CaseError
from analysis.calculator.case_roles import core_weight, role_rows
from analysis.fluid.solver import FluidAgent, FluidError, FluidFramework, FluidResult, solve_fluid
from analysis.fluid.tree import flat_weights, solve_fluid_tree
from master.core import CoreConfig
from master.core.target import TargetFramework, tasks_target

__all__ = ["allocate"]


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
        try:
            core_weight(fw.weight, f"frameworks[{index}].weight")
        except CaseError as error:
            raise CaseError(
                f"{error} (tasks mode runs the master's core; fluid mode takes any positive weight)"
            ) from None
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
