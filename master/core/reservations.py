"""Reservations: resources of an agent set aside for a role path and its sub-roles.

A reservation is a part of one agent's capacity that only the frameworks of its role and of the
roles below it may be offered (Mesos's static and dynamic reservations, docs/reservation.md of
Mesos; ``eng``'s reservation serves ``eng`` and ``eng/ml``, never ``sci``). Static ones come
from the agent (``fairshare agent --reserve``) and live as long as it is registered; dynamic
ones are made and undone by the operator (``handle_reserve``/``handle_unreserve``, kept in the
registry by the runtime and given back when the agent registers again).

Bookkeeping per agent (``AgentRecord``): ``reserved[role]`` is the role's reservation (static
plus dynamic), ``static_reserved[role]`` its static part, ``reserved_free[role]`` what of it is
neither offered nor used. ``agent.free`` is the *unreserved* free part, the only part the
ordinary allocation run sees. Offers and tasks carry the part of their resources that came from
each reservation (``Offer.reserved``, ``TaskRecord.reserved``, pairs of role and resources);
ending an offer or a task gives each part back to where it came from.

How reservations count (decided here, documented in docs/architecture.md): toward a role's
quota consumption and in its H-DRF share **whole, used or not** (an idle reservation counts as
held by its role). Mesos counts reserved resources in DRF shares only once they are allocated,
which lets a role keep its share low while holding idle reservations and so take more than its
fair part of the unreserved pool (MESOS-8299). Here a reservation is a claim: a role with four
idle reserved cpus competes for the rest as if it held them.

Invariants (checked by ``master.core.invariants``), per agent and role: ``reserved_free[role]
+ offered from it + used from it == reserved[role]``; ``static_reserved[role] <=
reserved[role]``; the reservations together fit in the agent's total; an offer's or task's
reserved parts fit in its resources and belong to roles that contain its framework's role.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from fairshare.resources import ResourceVector
from fairshare.roles import DEFAULT_ROLE, is_within

from master.core.checks import checked_role
from master.core.errors import InvalidArgument
from master.core.records import AgentRecord

__all__ = [
    "Parts",
    "add_part",
    "check_reservations",
    "checked_reservation_role",
    "idle_by_role",
    "reserved_of",
    "serving_roles",
    "split_tasks",
]

EMPTY = ResourceVector()
Parts = tuple[tuple[str, ResourceVector], ...]
"""What of an offer's or a task's resources came from each reservation: (role, resources)."""


def checked_reservation_role(role: str, what: str = "role") -> str:
    """``role`` checked as a role path a reservation may name (not ``*``, the unreserved role)."""
    role = checked_role(role, what)
    if role == DEFAULT_ROLE:
        raise InvalidArgument(f"{what}: {DEFAULT_ROLE!r} is the unreserved role; name a role path")
    return role


def check_reservations(
    agent_id: str, total: ResourceVector, reservations: Mapping[str, ResourceVector]
) -> None:
    """Refuse reservations that do not fit the agent (``InvalidArgument`` naming them)."""
    summed = sum(reservations.values(), EMPTY)
    if not summed.fits_in(total):
        raise InvalidArgument(
            f"agent {agent_id!r}: reservations {summed} do not fit its resources {total}"
        )


def serving_roles(reserved_roles: Iterable[str], role: str) -> list[str]:
    """The roles among ``reserved_roles`` whose reservations may serve a framework of ``role``
    (the role itself and its ancestors), deepest first."""
    return sorted(
        (reserved for reserved in reserved_roles if is_within(role, reserved)),
        key=lambda reserved: (-reserved.count("/"), reserved),
    )


def add_part(parts: dict[str, ResourceVector], role: str, resources: ResourceVector) -> None:
    """Add ``resources`` to ``parts[role]`` (nothing for empty resources)."""
    if resources:
        parts[role] = parts.get(role, EMPTY) + resources


def split_tasks(
    available: Mapping[str, ResourceVector], tasks: Sequence[ResourceVector]
) -> list[Parts]:
    """Which reservation each task's resources come from: from ``available`` (role ->
    reserved resources the accepted offers hold, deepest role first in iteration order),
    resource by resource, the rest unreserved. The tasks together must fit what the offers
    hold (``check_launches`` made sure)."""
    left = dict(available)
    split: list[Parts] = []
    for needed in tasks:
        parts: list[tuple[str, ResourceVector]] = []
        for role, pool in left.items():
            if not needed or not pool:
                continue
            taken = needed - needed.saturating_sub(pool)  # min(needed, pool) per resource
            if taken:
                parts.append((role, taken))
                left[role] = pool - taken
                needed = needed - taken
        split.append(tuple(parts))
    return split


def reserved_of(parts: Iterable[tuple[str, ResourceVector]]) -> ResourceVector:
    """The resources of ``parts`` together."""
    return sum((resources for _, resources in parts), EMPTY)


def idle_by_role(agents: Iterable[AgentRecord]) -> dict[str, ResourceVector]:
    """Per role, its reserved resources neither offered nor used, on every agent (active or
    not): they count as held by the role (see the module's docstring)."""
    idle: dict[str, ResourceVector] = {}
    for agent in agents:
        for role, free in agent.reserved_free.items():
            if free:
                idle[role] = idle.get(role, EMPTY) + free
    return idle
