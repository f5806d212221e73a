"""The invariants of ``MasterState``, checked after every ``handle_*`` call in validate mode.

Checked (docs/architecture.md §10):
- per agent ``free + reserved free + offered + used == total`` (exact, fixed point), nothing
  negative (a ``ResourceVector`` cannot hold a negative quantity, so this reduces to the
  equation); per agent and reservation ``reserved free + offered from it + used from it ==
  reserved``, the static part within it, the reservations within the total, and every reserved
  part of an offer or a task within its resources and of a role containing its framework's
  (``master.core.reservations``); ``reserved_agents`` are the agents with a reservation;
- the pool total is the sum of the agents' totals, deactivated agents included;
- the allocator's agent list holds exactly the active agents, each at its index with its free
  columns current; a deactivated agent has no row and no outstanding offer;
- per framework ``allocated == offered + used``, ``offered_tasks`` and ``live_tasks`` match;
- every outstanding offer and live task refers to a live framework and a live agent, and the
  back-references (``agent.offer_ids``, ``framework.task_ids``, …) agree both ways;
- the sorter holds exactly the active, unsuppressed frameworks, sorted by their current keys.

This is O(size of the state): for tests and debugging, never for the hot path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fairshare.resources import ResourceVector
from fairshare.roles import is_within

if TYPE_CHECKING:
    from master.core.state import MasterState

__all__ = ["check"]

EMPTY = ResourceVector()


def _check_agent_list(state: MasterState) -> None:
    listed = [a.id for a in state.agent_list]
    active = [a.id for a in state.agents.values() if a.active]
    assert sorted(listed) == sorted(active), "the agent list is not the active agents"
    columns = state.agent_list.free_columns
    assert columns.agents is state.agent_list, "free columns belong to another agent list"
    fresh = columns.fresh_columns()
    with_free = {i for i, agent in enumerate(state.agent_list) if agent.free}
    kinds: dict[ResourceVector, int] = {}
    for agent in state.agent_list:
        kinds[agent.total] = kinds.get(agent.total, 0) + 1
    assert state.agent_list.kinds == kinds, "the agent list's kinds are not its agents' totals"
    assert columns.with_free == with_free, "the index of agents with free resources is off"
    for index, agent in enumerate(state.agent_list):
        assert state.agents.get(agent.id) is agent, f"listed agent {agent.id} is not registered"
        assert agent.index == index, f"agent {agent.id} has index {agent.index}, not {index}"
        for name, column in fresh.items():
            assert len(column) == len(state.agent_list), f"free column {name} has a wrong size"
            assert column[index] == agent.free.millis(name), (
                f"agent {agent.id}: free column {name} holds {column[index]},"
                f" free is {agent.free.millis(name)}"
            )


def _count_parts(
    state: MasterState,
    into: dict[str, ResourceVector],
    framework_id: str,
    parts: tuple[tuple[str, ResourceVector], ...],
    resources: ResourceVector,
) -> None:
    fw = state.frameworks.get(framework_id)
    role = fw.role if fw is not None else None
    summed = EMPTY
    for reserved_role, amount in parts:
        assert amount, f"an empty reserved part of {reserved_role!r}"
        assert role is None or is_within(role, reserved_role), (
            f"framework {framework_id} of {role!r} holds {reserved_role!r}'s reservation"
        )
        into[reserved_role] = into.get(reserved_role, EMPTY) + amount
        summed = summed + amount
    assert summed.fits_in(resources), f"reserved parts {summed} exceed {resources}"


def _check_agents(state: MasterState) -> None:
    _check_agent_list(state)
    total = EMPTY
    for agent in state.agents.values():
        if not agent.active:
            assert agent.index == -1, f"deactivated agent {agent.id} keeps a row"
            assert not agent.offer_ids, f"deactivated agent {agent.id} has offers"
        offered = EMPTY
        parts: dict[str, ResourceVector] = dict(agent.reserved_free)
        for offer_id in agent.offer_ids:
            offer = state.offers.get(offer_id)
            assert offer is not None, f"agent {agent.id} names missing offer {offer_id}"
            assert offer.agent_id == agent.id, f"offer {offer_id} is not on agent {agent.id}"
            offered = offered + offer.resources
            _count_parts(state, parts, offer.framework_id, offer.reserved, offer.resources)
        used = EMPTY
        for key in agent.task_keys:
            task = state.tasks.get(key)
            assert task is not None, f"agent {agent.id} names missing task {key}"
            assert task.agent_id == agent.id, f"task {key} is not on agent {agent.id}"
            used = used + task.resources
            _count_parts(state, parts, task.framework_id, task.reserved, task.resources)
        reserved_free = sum(agent.reserved_free.values(), EMPTY)
        assert agent.free + reserved_free + offered + used == agent.total, (
            f"agent {agent.id}: free {agent.free} + reserved free {reserved_free} + offered"
            f" {offered} + used {used} != total {agent.total}"
        )
        assert parts == agent.reserved, (
            f"agent {agent.id}: reservations {agent.reserved} != free, offered and used parts"
            f" {parts}"
        )
        assert set(agent.reserved_free) == set(agent.reserved), f"agent {agent.id}: roles differ"
        for role, static in agent.static_reserved.items():
            assert static.fits_in(agent.reserved.get(role, EMPTY)), f"{agent.id}: static {role}"
        assert (agent.id in state.reserved_agents) == bool(agent.reserved), (
            f"agent {agent.id}: reserved_agents is off"
        )
        total = total + agent.total
    assert total == state.total, f"pool total {state.total} != sum of agents {total}"
    largest: dict[str, int] = {}
    for agent in state.agents.values():
        for name, millis in agent.total.millis_items():
            largest[name] = max(largest.get(name, 0), millis)
    assert state.largest_agent.to_millis() == largest, "the largest agent is off"


def _check_frameworks(state: MasterState) -> None:
    for fw in state.frameworks.values():
        offered = EMPTY
        offered_tasks = 0
        for offer_id in fw.offer_ids:
            offer = state.offers.get(offer_id)
            assert offer is not None, f"framework {fw.id} names missing offer {offer_id}"
            assert offer.framework_id == fw.id, f"offer {offer_id} is not of framework {fw.id}"
            offered = offered + offer.resources
            offered_tasks += offer.fair_tasks
        used = EMPTY
        for task_id in fw.task_ids:
            task = state.tasks.get((fw.id, task_id))
            assert task is not None, f"framework {fw.id} names missing task {task_id}"
            assert not task.state.is_terminal, f"task {task_id} is terminal but still held"
            used = used + task.resources
        assert fw.allocated == offered + used, (
            f"framework {fw.id}: allocated {fw.allocated} != offered {offered} + used {used}"
        )
        assert fw.offered_tasks == offered_tasks, f"framework {fw.id}: offered_tasks is off"
        assert fw.live_tasks == len(fw.task_ids), f"framework {fw.id}: live_tasks is off"
        assert fw.weight > 0, f"framework {fw.id}: weight {fw.weight} is not positive"


def _check_references(state: MasterState) -> None:
    for offer in state.offers.values():
        assert offer.framework_id in state.frameworks, f"offer {offer.offer_id}: framework is gone"
        assert offer.agent_id in state.agents, f"offer {offer.offer_id}: agent is gone"
        assert offer.offer_id in state.frameworks[offer.framework_id].offer_ids
        assert offer.offer_id in state.agents[offer.agent_id].offer_ids
        assert offer.resources, f"offer {offer.offer_id} is empty"
        gpu_agent = offer.agent_id in state.gpu_agents
        assert not gpu_agent or state.frameworks[offer.framework_id].gpu_aware, (
            f"offer {offer.offer_id}: agent {offer.agent_id} has GPUs, framework is not GPU-aware"
        )
    for (framework_id, task_id), task in state.tasks.items():
        assert framework_id in state.frameworks, f"task {task_id}: framework is gone"
        assert task.agent_id in state.agents, f"task {task_id}: agent is gone"
        assert task_id in state.frameworks[framework_id].task_ids
        assert (framework_id, task_id) in state.agents[task.agent_id].task_keys


def _check_sorter(state: MasterState) -> None:
    expected = {fw.id for fw in state.frameworks.values() if fw.active and not fw.suppressed}
    listed = set(state.ordered_frameworks())
    assert listed == expected, f"sorter holds {sorted(listed)}, expected {sorted(expected)}"
    state.sorter.check()


def check(state: MasterState) -> None:
    """Assert every invariant of ``state``."""
    gpus = {a.id for a in state.agents.values() if a.total.millis("gpus")}
    assert state.gpu_agents == gpus, f"gpu_agents {sorted(state.gpu_agents)} != {sorted(gpus)}"
    _check_agents(state)
    _check_frameworks(state)
    _check_references(state)
    _check_sorter(state)
