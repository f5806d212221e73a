"""The operator's dynamic reservations in the core (a mixin of ``MasterState``, kept apart to
keep ``state.py`` small; the model is ``master.core.reservations``).

``handle_reserve`` sets aside unreserved resources of one agent for a role path;
``handle_unreserve`` gives back a dynamic reservation's resources that no task uses. Same
invariants as every handler: every check before any change (a refused call changed nothing),
``validate`` after each call when the core validates. Outstanding offers on the agent are
rescinded only when the change needs their resources (Mesos's master does the same before it
applies a RESERVE or UNRESERVE operation).
"""

from __future__ import annotations

from collections.abc import Iterable

from fairshare.resources import ResourceVector
from fairshare.roles import is_within

from master.core.checks import checked
from master.core.config import CoreConfig
from master.core.errors import FailedPrecondition, InvalidArgument
from master.core.messages import Message, RescindOffer
from master.core.quota import Quota
from master.core.records import AgentRecord, FrameworkRecord, Offer
from master.core.reservations import checked_reservation_role, idle_by_role, reserved_of

__all__ = ["ReservationHandlers"]

EMPTY = ResourceVector()


class ReservationHandlers:
    """``handle_reserve``, ``handle_unreserve`` and the idle reservations per role;
    ``MasterState`` provides what is declared here."""

    config: CoreConfig
    agents: dict[str, AgentRecord]
    frameworks: dict[str, FrameworkRecord]
    offers: dict[str, Offer]
    quotas: dict[str, Quota]
    reserved_agents: set[str]

    def validate(self) -> None:
        raise NotImplementedError

    def _agent(self, agent_id: str) -> AgentRecord:
        raise NotImplementedError

    def _drop_offer(self, offer: Offer) -> None:
        raise NotImplementedError

    def _reposition(self, framework_ids: Iterable[str]) -> None:
        raise NotImplementedError

    def reserved_idle(self) -> dict[str, ResourceVector]:
        """Per role, its reserved resources neither offered nor used (on every agent)."""
        if not self.reserved_agents:
            return {}
        return idle_by_role(self.agents[agent_id] for agent_id in self.reserved_agents)

    def reservations_of(self, role: str) -> ResourceVector:
        """Everything reserved for ``role`` itself, on every agent."""
        return sum((self.agents[a].reserved.get(role, EMPTY) for a in self.reserved_agents), EMPTY)

    def subtree_reserved(self, role: str) -> ResourceVector:
        """Everything reserved for ``role`` and the roles below it, on every agent."""
        reserved = EMPTY
        for agent_id in self.reserved_agents:
            for reserved_role, amount in self.agents[agent_id].reserved.items():
                if is_within(reserved_role, role):
                    reserved = reserved + amount
        return reserved

    def _rescind(self, offers: list[Offer], reason: str) -> list[Message]:
        for offer in offers:
            self._drop_offer(offer)
        self._reposition(offer.framework_id for offer in offers)
        return [RescindOffer(o.framework_id, o.offer_id, reason) for o in offers]

    def _offers_on(self, agent: AgentRecord) -> list[Offer]:
        return [self.offers[offer_id] for offer_id in sorted(agent.offer_ids)]

    @checked
    def handle_reserve(
        self, agent_id: str, role: str, resources: ResourceVector, now: float
    ) -> list[Message]:
        """Reserve ``resources`` of the agent for ``role`` and its sub-roles. They must be
        unreserved and not used by tasks (outstanding offers holding them are rescinded), and
        the reservation must fit the limits of ``role`` and its ancestors (it counts toward
        their consumption whole)."""
        role = self.check_reserve(agent_id, role, resources)
        agent = self.agents[agent_id]
        messages: list[Message] = []
        if not resources.fits_in(agent.free):
            messages = self._rescind(self._offers_on(agent), "resources reserved by the operator")
        agent.free = agent.free - resources
        agent.reserved[role] = agent.reserved.get(role, EMPTY) + resources
        agent.reserved_free[role] = agent.reserved_free.get(role, EMPTY) + resources
        self.reserved_agents.add(agent_id)
        return messages

    def check_reserve(self, agent_id: str, role: str, resources: ResourceVector) -> str:
        """Every check of ``handle_reserve``, changing nothing; the checked role path."""
        role = checked_reservation_role(role)
        if not resources:
            raise InvalidArgument("resources are empty")
        agent = self._agent(agent_id)
        offers = self._offers_on(agent)
        unreserved_offered = sum((o.resources - reserved_of(o.reserved) for o in offers), EMPTY)
        available = agent.free + unreserved_offered
        if not resources.fits_in(available):
            raise FailedPrecondition(
                f"agent {agent_id!r} has {available} unreserved and not used by tasks;"
                f" cannot reserve {resources}"
            )
        for limited, quota in sorted(self.quotas.items()):
            if quota.limit is None or not is_within(role, limited):
                continue
            held = self.subtree_holds(limited) + resources
            over = [
                f"{name}:{held.get(name):g} > {quota.limit.get(name):g}"
                for name, cap in quota.limit.millis_items()
                if held.millis(name) > cap
            ]
            if over:
                raise FailedPrecondition(
                    f"reserving {resources} for {role!r} would pass the limit of"
                    f" {limited!r} ({', '.join(over)}): reservations count toward it"
                )
        return role

    @checked
    def handle_unreserve(
        self, agent_id: str, role: str, resources: ResourceVector, now: float
    ) -> list[Message]:
        """Give back ``resources`` of ``role``'s dynamic reservation on the agent. They must
        not be used by tasks (outstanding offers holding them are rescinded); an agent's static
        reservation is its own (``fairshare agent --reserve``) and cannot be undone here."""
        role = self.check_unreserve(agent_id, role, resources)
        agent = self.agents[agent_id]
        messages: list[Message] = []
        if not resources.fits_in(agent.reserved_free[role]):
            holding = [o for o in self._offers_on(agent) if any(r == role for r, _ in o.reserved)]
            messages = self._rescind(holding, "reservation undone by the operator")
        agent.reserved_free[role] = agent.reserved_free[role] - resources
        agent.reserved[role] = agent.reserved[role] - resources
        agent.free = agent.free + resources
        if not agent.reserved[role]:
            del agent.reserved[role]
            del agent.reserved_free[role]
        if not agent.reserved:
            self.reserved_agents.discard(agent_id)
        return messages

    def check_unreserve(self, agent_id: str, role: str, resources: ResourceVector) -> str:
        """Every check of ``handle_unreserve``, changing nothing; the checked role path."""
        role = checked_reservation_role(role)
        if not resources:
            raise InvalidArgument("resources are empty")
        agent = self._agent(agent_id)
        reserved = agent.reserved.get(role)
        if reserved is None:
            raise FailedPrecondition(f"agent {agent_id!r} has no reservation for {role!r}")
        dynamic = reserved - agent.static_reserved.get(role, EMPTY)
        if not resources.fits_in(dynamic):
            raise FailedPrecondition(
                f"agent {agent_id!r} has {dynamic or 'nothing'} reserved dynamically for"
                f" {role!r} (its static reservation is the agent's own); cannot unreserve"
                f" {resources}"
            )
        holding = [o for o in self._offers_on(agent) if any(r == role for r, _ in o.reserved)]
        offered = sum((part for o in holding for r, part in o.reserved if r == role), EMPTY)
        free = agent.reserved_free.get(role, EMPTY)
        if not resources.fits_in(free + offered):
            raise FailedPrecondition(
                f"tasks use {reserved - free - offered} of {role!r}'s reservation on agent"
                f" {agent_id!r}; only {free + offered} can be unreserved now"
            )
        return role

    def subtree_holds(self, role: str) -> ResourceVector:
        """What ``role`` and its sub-roles hold: their frameworks' offered and used resources,
        and their reservations' idle parts (a reservation counts whole)."""
        held = EMPTY
        for fw in self.frameworks.values():
            if fw.allocated and is_within(fw.role, role):
                held = held + fw.allocated
        for reserved_role, idle in self.reserved_idle().items():
            if is_within(reserved_role, role):
                held = held + idle
        return held
