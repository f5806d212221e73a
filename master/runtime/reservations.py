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
    return _change(state, dispatcher, agent_id, role, resources, principal, undo=False)


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
    return _change(state, dispatcher, agent_id, role, resources, principal, undo=True)


def _change(
    state: RuntimeState,
    dispatcher: Dispatcher,
    agent_id: str,
    role: str,
    resources: ResourceVector,
    principal: str | None,
    undo: bool,
) -> int:
    """ACL, the core's checks, the registry write of the agent's whole dynamic set, then the
    core's change and its messages (see the module docstring)."""
    require_id(agent_id, "agent_id")
    core = state.core
    state.authority.allow("reserve_resources", principal, checked_reservation_role(role))
    check = core.check_unreserve if undo else core.check_reserve
    role = check(agent_id, role, resources)
    dynamic = dict(state.registry.reservations.get(agent_id, {}))
    held = dynamic.pop(role, EMPTY)
    after = held.saturating_sub(resources) if undo else held + resources
    if after:
        dynamic[role] = after
    with state.durably():
        state.registry.set_reservations(agent_id, dynamic)
    handle = core.handle_unreserve if undo else core.handle_reserve
    messages = handle(agent_id, role, resources, state.now())
    event = EventKind.RESERVATION_UNDONE if undo else EventKind.RESERVATION_MADE
    return _applied(state, dispatcher, messages, event, agent_id, role, resources)


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
