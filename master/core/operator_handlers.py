"""The operator's requests to the core: agent maintenance and weights (a mixin of
``MasterState``, kept apart to keep ``state.py`` small; same invariants: every check comes before
any change, and ``validate`` runs after each call when the core validates).
"""

from __future__ import annotations

from collections.abc import Iterable

from fairshare.resources import ResourceVector
from fairshare.roles import is_within

from master.core.checks import check_weight, checked, checked_role
from master.core.config import CoreConfig
from master.core.errors import FailedPrecondition, InvalidArgument
from master.core.messages import Message, RescindOffer
from master.core.quota import Quota, check_quotas
from master.core.records import AgentList, AgentRecord, FrameworkRecord, Offer

__all__ = ["OperatorHandlers"]


class OperatorHandlers:
    """``handle_deactivate_agent``, ``handle_reactivate_agent``, ``handle_set_weight`` and
    ``handle_set_framework_weight``; ``MasterState`` provides what is declared here."""

    config: CoreConfig
    agent_list: AgentList
    frameworks: dict[str, FrameworkRecord]
    role_weights: dict[str, float]
    hierarchy: str
    quotas: dict[str, Quota]
    offers: dict[str, Offer]

    def validate(self) -> None:
        raise NotImplementedError

    def _agent(self, agent_id: str) -> AgentRecord:
        raise NotImplementedError

    def _framework(self, framework_id: str) -> FrameworkRecord:
        raise NotImplementedError

    def _rescind_offers_on(
        self, agent: AgentRecord, reason: str, touched: list[str]
    ) -> list[Message]:
        raise NotImplementedError

    def _reposition(self, framework_ids: Iterable[str]) -> None:
        raise NotImplementedError

    def _drop_offer(self, offer: Offer) -> None:
        raise NotImplementedError

    def _shapes_changed(self) -> None:
        raise NotImplementedError

    def _role_weight_on(self, role: str, requested: float) -> float:
        """The weight a framework of ``role`` gets unless the operator set its own: under the
        ``flat`` hierarchy its role's operator weight (copied onto each framework, as before
        roles were a tree), else what it subscribed with (the role's weight is its node's)."""
        if self.hierarchy == "flat":
            return self.role_weights.get(role, requested)
        return requested

    def _maintained(self, agent_id: str) -> AgentRecord:
        if not agent_id:
            raise InvalidArgument("agent_id is empty")
        return self._agent(agent_id)

    @checked
    def handle_deactivate_agent(self, agent_id: str, now: float) -> list[Message]:
        """Maintenance: rescind the agent's offers and offer nothing of it until reactivated.

        Its tasks keep running (their ends free resources on it as usual) and its resources stay
        in the pool total, so shares do not move. Deactivating an inactive agent changes nothing.
        """
        agent = self._maintained(agent_id)
        if not agent.active:
            return []
        touched: list[str] = []
        messages = self._rescind_offers_on(agent, "agent deactivated", touched)
        agent.active = False
        self.agent_list.discard(agent)
        self._reposition(touched)
        return messages

    @checked
    def handle_reactivate_agent(self, agent_id: str, now: float) -> list[Message]:
        """Offer the agent's free resources again (from the next allocation run)."""
        agent = self._maintained(agent_id)
        if not agent.active:
            agent.active = True
            self.agent_list.append(agent)
        return []

    @checked
    def handle_set_weight(self, role: str, weight: float | None, now: float) -> list[Message]:
        """Set (``None``: clear) the operator weight of the role path ``role``, now and later.

        Under ``hdrf`` and ``naive`` it weighs the role's node among its siblings; under
        ``flat`` it applies to the role's frameworks that have no operator weight of their own.
        """
        if not role:
            raise InvalidArgument("role is empty")
        role = checked_role(role)
        if weight is None:
            self.role_weights.pop(role, None)
        else:
            self.role_weights[role] = check_weight(weight, f"role {role!r}")
        self._reweigh([fw for fw in self.frameworks.values() if fw.role == role])
        return []

    @checked
    def handle_set_framework_weight(
        self, framework_id: str, weight: float | None, now: float
    ) -> list[Message]:
        """Set (``None``: clear) the operator weight of one framework; it overrides its role's."""
        fw = self._framework(framework_id)
        checked = None if weight is None else check_weight(weight, f"framework {framework_id!r}")
        fw.operator_weight = checked
        self._reweigh([fw])
        return []

    def _reweigh(self, frameworks: list[FrameworkRecord]) -> None:
        """Weights in effect: the framework's operator weight, its role's, or its own."""
        for fw in frameworks:
            role_weight = self._role_weight_on(fw.role, fw.requested_weight)
            fw.weight = role_weight if fw.operator_weight is None else fw.operator_weight
        self._reposition(fw.id for fw in frameworks)
        self._shapes_changed()  # PF prices depend on weights

    def subtree_holds(self, role: str) -> ResourceVector:
        raise NotImplementedError  # master.core.reservation_handlers (reservations count)

    @checked
    def handle_set_quota(
        self,
        role: str,
        guarantee: ResourceVector,
        limit: ResourceVector | None,
        now: float,
        force: bool = False,
    ) -> list[Message]:
        """Set the quota of the role path ``role`` (``master.core.quota``); an empty guarantee
        and no limit clear it. A limit below what the subtree holds needs ``force``: then the
        subtree's outstanding offers are rescinded (its tasks keep running; nothing is killed)
        and it is offered nothing more until it is under its limit."""
        role, proposed, over = self.check_set_quota(role, guarantee, limit, force)
        messages = self._rescind_subtree_offers(role) if over else []
        self.quotas = proposed
        return messages

    def check_set_quota(
        self,
        role: str,
        guarantee: ResourceVector,
        limit: ResourceVector | None,
        force: bool = False,
    ) -> tuple[str, dict[str, Quota], bool]:
        """Every check of ``handle_set_quota``, changing nothing: the checked role path, the
        quota table it would make, and whether the limit is below what the subtree holds
        (allowed with ``force`` only: ``FailedPrecondition`` otherwise)."""
        role = checked_role(role)
        proposed = dict(self.quotas)
        quota = Quota(guarantee, limit)
        if quota.empty:
            proposed.pop(role, None)
        else:
            proposed[role] = quota
        check_quotas(proposed)
        if limit is None:
            return role, proposed, False
        held = self.subtree_holds(role)
        over = [
            f"{name}:{held.get(name):g} > {limit.get(name):g}"
            for name, cap in limit.millis_items()
            if held.millis(name) > cap
        ]
        if over and not force:
            raise FailedPrecondition(
                f"quota of {role!r}: the role already holds more than the new limit"
                f" ({', '.join(over)}); set it with force to rescind its offers (nothing is"
                " killed)"
            )
        return role, proposed, bool(over)

    def _rescind_subtree_offers(self, role: str) -> list[Message]:
        touched: list[str] = []
        messages: list[Message] = []
        for offer_id in sorted(self.offers):
            offer = self.offers[offer_id]
            if is_within(self.frameworks[offer.framework_id].role, role):
                self._drop_offer(offer)
                touched.append(offer.framework_id)
                messages.append(
                    RescindOffer(offer.framework_id, offer_id, "role quota lowered below its use")
                )
        self._reposition(touched)
        return messages
