"""``Registry``: the operations the master runtime calls on its durable registry, over any store.

The runtime reads the in-memory mirror (``agents``, ``frameworks``, ``role_weights``,
``framework_weights``, ``quotas``) and changes it only through the operations below. Each
operation turns into a list of whole rows (``Change``: an ``AgentEntry``, a ``FrameworkEntry``,
a ``WeightChange`` or a ``QuotaChange``) that the store commits as one transaction
(``_commit``: SQLite in ``sqlite_store``, etcd in ``etcd_store``); only after the commit
succeeded is the mirror changed.

Invariants:
- every write is one committed transaction, made *before* the runtime changes its memory or
  acknowledges the call; a write that did not commit raises ``RegistryWriteError`` and changes
  neither the mirror nor (as far as the store can tell) the store;
- the mirror equals the store's content after every successful call (a store loads it with
  ``_apply`` when it opens);
- an operation that would change nothing writes nothing;
- ``agents_of`` / ``frameworks_of`` count, per principal, the agents not GONE and the frameworks
  not removed in the mirror (the per-principal limits read them); ``resources_of`` sums, per
  principal, the resources (millis per name) its agents not GONE report, and
  ``resource_names`` counts, per resource name, the agents not GONE reporting it (no name with
  a count of 0 is kept);
- ``collect_garbage`` forgets unreachable and gone agents, and removed frameworks, older than a
  maximum age or beyond a maximum count (oldest first), as Mesos's registry_max_agent_age and
  registry_max_agent_count do (``Forgotten`` rows: the store deletes them); a forgotten agent
  must register afresh.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from fairshare.resources import ResourceVector

from master.core.drain import DRAINING
from master.core.quota import Quota
from master.model import FrameworkInfo
from master.registry.entries import (
    AGENT_STATES,
    AgentDrain,
    AgentEntry,
    FrameworkEntry,
)

__all__ = [
    "LEFT",
    "Change",
    "Forgotten",
    "QuotaChange",
    "Registry",
    "ReservationChange",
    "WeightChange",
]

LEFT = ("UNREACHABLE", "GONE")
"""Registry states of agents that left: what garbage collection may forget."""

WEIGHT_KINDS = ("role", "framework")


@dataclass(frozen=True, slots=True)
class WeightChange:
    """An operator weight of a ``"role"`` or a ``"framework"`` set, or removed (``None``)."""

    kind: str
    target: str
    weight: float | None


@dataclass(frozen=True, slots=True)
class QuotaChange:
    """A role's quota set, or removed (``None``)."""

    role: str
    quota: Quota | None


@dataclass(frozen=True, slots=True)
class ReservationChange:
    """An agent's dynamic reservations (role path, resources), written whole; empty: none."""

    agent_id: str
    reserved: tuple[tuple[str, ResourceVector], ...]


@dataclass(frozen=True, slots=True)
class Forgotten:
    """An ``"agent"`` or a ``"framework"`` row deleted (garbage collection)."""

    kind: str
    key: str


Change = AgentEntry | FrameworkEntry | WeightChange | QuotaChange | ReservationChange | Forgotten
"""One row written whole (an agent, a framework, a weight, a quota, an agent's dynamic
reservations), or deleted."""


class Registry:
    """The durable registry's in-memory mirror and the operations on it; a store subclasses it
    and implements ``_commit`` (and ``close``)."""

    def __init__(
        self,
        cluster_id: str,
        on_write: Callable[[float], None] | None = None,
    ) -> None:
        self.cluster_id = cluster_id
        self.on_write = on_write
        self.agents: dict[str, AgentEntry] = {}
        self.frameworks: dict[str, FrameworkEntry] = {}
        self.role_weights: dict[str, float] = {}
        self.framework_weights: dict[str, float] = {}
        self.quotas: dict[str, Quota] = {}
        # agent id -> role path -> its dynamic reservation there (the operator's)
        self.reservations: dict[str, dict[str, ResourceVector]] = {}
        self.writes = 0
        self.clock: Callable[[], float] = time.time
        self.agents_of: Counter[str] = Counter()  # principal -> agents not GONE
        self.resources_of: dict[str, Counter[str]] = {}  # principal -> name -> millis
        self.resource_names: Counter[str] = Counter()  # name -> agents not GONE reporting it
        self.frameworks_of: Counter[str] = Counter()  # principal -> frameworks not removed
        self.draining: set[str] = set()  # agents whose drain is DRAINING (the drain timer's)

    # -- the store --------------------------------------------------------------------------------

    def _commit(self, changes: Sequence[Change]) -> None:
        """Write ``changes`` as one transaction; ``RegistryWriteError`` if it did not commit."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the store."""

    def _apply(self, changes: Iterable[Change]) -> None:
        """Change the mirror as ``changes`` changed the store."""
        for change in changes:
            if isinstance(change, AgentEntry):
                self._count_agent(self.agents.get(change.agent_id), -1)
                self.agents[change.agent_id] = change
                self._count_agent(change, 1)
                if change.drain is not None and change.drain.state == DRAINING:
                    self.draining.add(change.agent_id)
                else:
                    self.draining.discard(change.agent_id)
            elif isinstance(change, FrameworkEntry):
                self._count_framework(self.frameworks.get(change.spec.framework_id), -1)
                self.frameworks[change.spec.framework_id] = change
                self._count_framework(change, 1)
            elif isinstance(change, Forgotten):
                if change.kind == "agent":
                    self._count_agent(self.agents.pop(change.key, None), -1)
                    self.draining.discard(change.key)
                else:
                    self._count_framework(self.frameworks.pop(change.key, None), -1)
            elif isinstance(change, QuotaChange):
                if change.quota is None:
                    self.quotas.pop(change.role, None)
                else:
                    self.quotas[change.role] = change.quota
            elif isinstance(change, ReservationChange):
                if change.reserved:
                    self.reservations[change.agent_id] = dict(change.reserved)
                else:
                    self.reservations.pop(change.agent_id, None)
            else:
                weights = self._weights(change.kind)
                if change.weight is None:
                    weights.pop(change.target, None)
                else:
                    weights[change.target] = change.weight

    def _count_agent(self, entry: AgentEntry | None, sign: int) -> None:
        if entry is None or entry.state == "GONE":
            return
        self.agents_of[entry.principal] += sign
        totals = self.resources_of.setdefault(entry.principal, Counter())
        for name, millis in entry.spec.resources.millis_items():
            totals[name] += sign * millis
            if totals[name] <= 0:
                del totals[name]
            self.resource_names[name] += sign
            if self.resource_names[name] <= 0:
                del self.resource_names[name]
        if not totals:
            del self.resources_of[entry.principal]

    def _count_framework(self, entry: FrameworkEntry | None, sign: int) -> None:
        if entry is not None and not entry.removed:
            self.frameworks_of[entry.spec.principal] += sign

    def _write(self, changes: Sequence[Change]) -> None:
        if not changes:
            return
        started = time.perf_counter()
        self._commit(changes)
        self.writes += 1
        self._apply(changes)
        if self.on_write is not None:
            self.on_write(time.perf_counter() - started)

    def _weights(self, kind: str) -> dict[str, float]:
        if kind == "role":
            return self.role_weights
        if kind == "framework":
            return self.framework_weights
        raise ValueError(f"unknown weight kind {kind!r}")

    # -- the operations the runtime calls ----------------------------------------------------------

    def admit_agent(self, entry: AgentEntry) -> None:
        """Record an agent admitted (or readmitted with a new spec)."""
        self._write([entry])

    def set_agent_state(self, agent_id: str, state: str) -> None:
        """Mark an admitted agent ADMITTED, UNREACHABLE or GONE."""
        self.set_agents_state([agent_id], state)

    def set_agents_state(self, agent_ids: list[str], state: str) -> None:
        """``set_agent_state`` for several agents, in one transaction."""
        if state not in AGENT_STATES:
            raise ValueError(f"unknown agent state {state!r}")
        changed = {a: self.agents[a] for a in agent_ids if self.agents[a].state != state}
        now = self.clock()
        self._write([dataclasses.replace(e, state=state, changed_at=now) for e in changed.values()])

    def set_agents_active(self, agent_ids: list[str], active: bool) -> None:
        """Record operator (de)activation of several agents in one transaction; activation
        ends a drain."""
        changed = {
            a: self.agents[a]
            for a in agent_ids
            if a in self.agents
            and (self.agents[a].active != active or (active and self.agents[a].drain))
        }
        self._write(
            [
                dataclasses.replace(entry, active=active, drain=None if active else entry.drain)
                for entry in changed.values()
            ]
        )

    def set_agent_drain(self, agent_id: str, drain: AgentDrain) -> None:
        """Record an operator's drain of an admitted agent (inactive while it lasts)."""
        entry = self.agents[agent_id]
        if entry.drain != drain or entry.active:
            self._write([dataclasses.replace(entry, active=False, drain=drain)])

    def put_framework(self, spec: FrameworkInfo, registered_at: float) -> None:
        """Record a framework registered, or its spec changed on resubscription."""
        self._write([FrameworkEntry(spec, registered_at)])

    def remove_framework(self, framework_id: str) -> None:
        """Record a framework removed for good (its id is refused from now on)."""
        entry = self.frameworks.get(framework_id)
        if entry is None or entry.removed:
            return
        changes: list[Change] = [dataclasses.replace(entry, removed=True, removed_at=self.clock())]
        if framework_id in self.framework_weights:
            changes.append(WeightChange("framework", framework_id, None))
        self._write(changes)

    def set_weight(self, kind: str, target: str, weight: float | None) -> None:
        """Record (``None``: remove) an operator weight of a ``"role"`` or a ``"framework"``."""
        self._weights(kind)  # raises for an unknown kind
        self._write([WeightChange(kind, target, weight)])

    def set_quota(self, role: str, quota: Quota | None) -> None:
        """Record (``None`` or an empty quota: remove) the quota of a role path."""
        stored = None if quota is None or quota.empty else quota
        if stored is None and role not in self.quotas:
            return
        self._write([QuotaChange(role, stored)])

    def set_reservations(self, agent_id: str, reserved: dict[str, ResourceVector]) -> None:
        """Record an agent's dynamic reservations, whole (empty: it has none)."""
        if not reserved and agent_id not in self.reservations:
            return
        rows = tuple(sorted((role, r) for role, r in reserved.items() if r))
        self._write([ReservationChange(agent_id, rows)])

    def collect_garbage(
        self,
        now: float,
        agent_age: float,
        agent_count: int,
        framework_age: float,
        framework_count: int,
    ) -> tuple[list[str], list[str]]:
        """Forget agents that left (unreachable, gone) and removed frameworks older than the
        ages or beyond the counts (oldest first), in one transaction; the ids forgotten."""
        left = sorted((e.changed_at, e.agent_id) for e in self.agents.values() if e.state in LEFT)
        agents = _expired(left, now - agent_age, agent_count)
        removed = sorted((e.removed_at, i) for i, e in self.frameworks.items() if e.removed)
        frameworks = _expired(removed, now - framework_age, framework_count)
        self._write(
            [Forgotten("agent", a) for a in agents]
            + [ReservationChange(a, ()) for a in agents if a in self.reservations]
            + [Forgotten("framework", f) for f in frameworks]
        )
        return agents, frameworks


def _expired(entries: list[tuple[float, str]], oldest: float, most: int) -> list[str]:
    """Ids of ``entries`` (sorted oldest first) older than ``oldest`` or beyond ``most``."""
    beyond = max(0, len(entries) - most)
    return [key for index, (at, key) in enumerate(entries) if index < beyond or at < oldest]
