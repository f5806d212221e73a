"""The operator's dynamic reservations in the runtime: authorized, checked, durable, applied.

``reserve`` and ``unreserve`` (OperatorService.Reserve/Unreserve, ``fairshare reserve`` and
``unreserve``) follow the runtime's order for every durable change: the ACL (action
``reserve_resources`` on the reservation's role, checked first), then every check of the core
(``MasterState.check_reserve``/``check_unreserve``, which change nothing), then the registry
write of the agent's whole set of dynamic reservations, and only then the core's change and the
messages it makes (offers rescinded to free the resources). A refused call changed nothing; a
write that fails leaves the core as it was.

The registry keeps an agent's dynamic reservations across master restarts and failovers, and
the runtime gives them back to the core when the agent registers again
(``master.runtime.agents``).
"""

from __future__ import annotations

import logging

from fairshare.resources import ResourceVector

from master.core.messages import Message, RescindOffer
from master.core.reservations import checked_reservation_role
from master.runtime.dispatch import Dispatcher
from master.runtime.events import EventKind
from master.runtime.state import RuntimeState, require_id

__all__ = ["reserve", "unreserve"]

log = logging.getLogger("fairshare.master")
EMPTY = ResourceVector()


def reserve(
    state: RuntimeState,
    dispatcher: Dispatcher,
    agent_id: str,
    role: str,
    resources: ResourceVector,
    principal: str | None = None,
) -> int:
    """Reserve ``resources`` of a connected agent for ``role``; the offers rescinded."""
    require_id(agent_id, "agent_id")
    core = state.core
    state.authority.allow("reserve_resources", principal, checked_reservation_role(role))
    role = core.check_reserve(agent_id, role, resources)
    dynamic = dict(state.registry.reservations.get(agent_id, {}))
    dynamic[role] = dynamic.get(role, EMPTY) + resources
    with state.durably():
        state.registry.set_reservations(agent_id, dynamic)
    messages = core.handle_reserve(agent_id, role, resources, state.now())
    return _applied(
        state, dispatcher, messages, EventKind.RESERVATION_MADE, agent_id, role, resources
    )


def unreserve(
    state: RuntimeState,
    dispatcher: Dispatcher,
    agent_id: str,
    role: str,
    resources: ResourceVector,
    principal: str | None = None,
) -> int:
    """Give back ``resources`` of ``role``'s dynamic reservation on an agent; the offers
    rescinded."""
    require_id(agent_id, "agent_id")
    core = state.core
    state.authority.allow("reserve_resources", principal, checked_reservation_role(role))
    role = core.check_unreserve(agent_id, role, resources)
    dynamic = dict(state.registry.reservations.get(agent_id, {}))
    left = dynamic.get(role, EMPTY).saturating_sub(resources)
    if left:
        dynamic[role] = left
    else:
        dynamic.pop(role, None)
    with state.durably():
        state.registry.set_reservations(agent_id, dynamic)
    messages = core.handle_unreserve(agent_id, role, resources, state.now())
    return _applied(
        state, dispatcher, messages, EventKind.RESERVATION_UNDONE, agent_id, role, resources
    )


def _applied(
    state: RuntimeState,
    dispatcher: Dispatcher,
    messages: list[Message],
    event: EventKind,
    agent_id: str,
    role: str,
    resources: ResourceVector,
) -> int:
    dispatcher.dispatch(messages)
    dispatcher.request_allocation()
    rescinded = sum(1 for m in messages if isinstance(m, RescindOffer))
    state.announce(
        event, agent_id=agent_id, role=role, resources=str(resources), rescinded=rescinded
    )
    return rescinded
