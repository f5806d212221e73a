"""The records the allocation core keeps: agents, frameworks, offers and tasks.

These are plain mutable records owned by ``MasterState``; only the core changes them, and only
inside a ``handle_*`` call. The invariants ``MasterState.validate`` checks over them:

- per agent: ``free + offered + used == total``, where ``offered`` sums its outstanding offers and
  ``used`` the resources of its non-terminal tasks; no quantity is negative;
- per framework: ``allocated == offered + used`` over its offers and non-terminal tasks, and
  ``offered_tasks`` is the sum of ``fair_tasks`` of its outstanding offers;
- every outstanding offer and task refers to a live framework and agent; offers only to
  active agents (an operator-deactivated agent has none).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState

__all__ = [
    "AgentList",
    "AgentRecord",
    "FrameworkRecord",
    "FreeColumns",
    "Offer",
    "TaskRecord",
    "TaskState",
]

EMPTY = ResourceVector()


class FreeColumns:
    """Agents' free resources as one contiguous array per resource (structure of arrays).

    Placement scans read ``columns[name][i]`` instead of three scattered objects per agent,
    which is what keeps a sampled best-fit decision cheap on 10,000 agents. Writes are lazy:
    changing an agent's ``free`` only marks its row dirty, and ``fresh_columns`` copies dirty
    rows in before a scan, so workloads that never scan (coarse offers) never pay for it.

    Invariants: after ``fresh_columns()``, for every agent of the owning ``AgentList`` and every
    resource name ever seen, ``columns[name][agent.index] == agent.free.millis(name)``;
    ``with_free`` holds exactly the indices of the agents whose ``free`` is not empty.

    Growth log (for placement caches): ``grown`` lists, in order, the rows whose free resources
    grew in some resource (or that were added); entry ``k`` of the log has absolute position
    ``grown_base + k``. Any row whose free grew after absolute position ``p`` appears in
    ``grown[p - grown_base:]`` as long as ``p >= grown_base`` and ``epoch`` is unchanged; the
    log is cut (``grown_base`` moves on) when it gets long, and ``epoch`` changes when rows are
    renumbered (an agent leaves the list).
    """

    __slots__ = ("agents", "columns", "dirty", "epoch", "grown", "grown_base", "with_free")

    def __init__(self, agents: list[AgentRecord]) -> None:
        self.agents = agents
        self.columns: dict[str, array[int]] = {}
        self.dirty: set[int] = set()
        self.with_free: set[int] = set()  # indices of agents with anything free
        self.grown: list[int] = []
        self.grown_base = 0
        self.epoch = 0

    def log_growth(self, index: int) -> None:
        """Row ``index`` got more free resources."""
        grown = self.grown
        grown.append(index)
        if len(grown) > 4096 and len(grown) > 4 * len(self.agents):
            self.grown_base += len(grown)
            grown.clear()

    def grown_end(self) -> int:
        """The absolute position after the last entry of the growth log."""
        return self.grown_base + len(self.grown)

    def grow(self) -> int:
        """Add a (dirty) row for a new last agent; returns its index."""
        index = len(self.agents) - 1
        for column in self.columns.values():
            column.append(0)
        self.dirty.add(index)
        if self.agents[index].free:
            self.with_free.add(index)
        self.log_growth(index)
        return index

    def fresh_columns(self) -> dict[str, array[int]]:
        """The columns, with every dirty row copied in."""
        if self.dirty:
            columns = self.columns
            agents = self.agents
            for index in self.dirty:
                millis = agents[index].free.millis_view()
                if not millis.keys() <= columns.keys():
                    for name in millis:
                        if name not in columns:
                            columns[name] = array("q", bytes(8 * len(agents)))
                for name, column in columns.items():
                    column[index] = millis.get(name, 0)
            self.dirty.clear()
        return self.columns


class AgentRecord:
    """One agent: its capacity, what is free (neither offered nor used, nor reserved) and its
    tasks; its reservations per role (``master.core.reservations``).

    Setting ``free`` also marks the agent's row of its list's ``FreeColumns`` dirty. An agent
    the operator deactivated (``active`` false) is in no ``AgentList`` (``index == -1``): nothing
    of it is offered, but its tasks run on and its resources stay in the pool.
    """

    __slots__ = (
        "_columns",
        "_free",
        "active",
        "attributes",
        "hostname",
        "id",
        "index",
        "offer_ids",
        "registered_at",
        "reserved",
        "reserved_free",
        "static_reserved",
        "task_keys",
        "total",
    )

    def __init__(
        self,
        id: str,
        hostname: str,
        total: ResourceVector,
        free: ResourceVector,
        attributes: tuple[tuple[str, str], ...] = (),
        registered_at: float = 0.0,
    ) -> None:
        self.id = id
        self.hostname = hostname
        self.total = total
        self._free = free
        self._columns: FreeColumns | None = None
        self.index = -1
        self.attributes = attributes
        self.offer_ids: set[str] = set()
        self.task_keys: set[tuple[str, str]] = set()  # (framework_id, task_id)
        self.registered_at = registered_at
        self.active = True
        # reservations (master.core.reservations): role -> reserved (static + dynamic), its
        # static part, and what of it is neither offered nor used; ``free`` is unreserved
        self.reserved: dict[str, ResourceVector] = {}
        self.static_reserved: dict[str, ResourceVector] = {}
        self.reserved_free: dict[str, ResourceVector] = {}

    @property
    def free(self) -> ResourceVector:
        """Resources neither offered nor used by tasks."""
        return self._free

    @free.setter
    def free(self, value: ResourceVector) -> None:
        old = self._free
        self._free = value
        columns = self._columns
        if columns is not None:
            columns.dirty.add(self.index)
            if value:
                columns.with_free.add(self.index)
            else:
                columns.with_free.discard(self.index)
            if not value.fits_in(old):
                columns.log_growth(self.index)


class AgentList(list[AgentRecord]):
    """The active agents (the ones the allocator offers) in activation order, with their
    ``FreeColumns`` and their distinct capacities ("kinds").

    Invariants: ``self[i].index == i`` and ``self.free_columns`` mirrors every agent's ``free``;
    ``kinds`` maps each distinct ``total`` of the listed agents to how many have it, and
    ``kinds_version`` changes whenever a kind appears or disappears (not when a count moves).
    Agents are appended at the end; ``discard`` takes one out and renumbers the later ones.
    """

    def __init__(self, agents: Iterable[AgentRecord] = ()) -> None:
        super().__init__()
        self.free_columns = FreeColumns(self)
        self.kinds: dict[ResourceVector, int] = {}
        self.kinds_version = 0
        for agent in agents:
            self.append(agent)

    def append(self, agent: AgentRecord) -> None:
        """Add an agent at the end and give it its row."""
        super().append(agent)
        agent.index = self.free_columns.grow()
        agent._columns = self.free_columns
        count = self.kinds.get(agent.total, 0)
        self.kinds[agent.total] = count + 1
        if not count:
            self.kinds_version += 1

    def discard(self, agent: AgentRecord) -> None:
        """Take ``agent`` out (it loses its row, ``index == -1``); the others keep their order.

        O(agents) but in C for the list and the columns, plus one index update per later agent:
        about a millisecond on 10,000 agents, so removing agents never stalls the master.
        """
        index = agent.index
        assert 0 <= index < len(self) and self[index] is agent, f"agent {agent.id} is not listed"
        del self[index]
        columns = self.free_columns
        for column in columns.columns.values():
            del column[index]
        for later in range(index, len(self)):
            self[later].index = later
        columns.with_free = {i - (i > index) for i in columns.with_free if i != index}
        columns.dirty = {i - (i > index) for i in columns.dirty if i != index}
        columns.epoch += 1  # rows were renumbered: the growth log starts afresh
        columns.grown_base += len(columns.grown)
        columns.grown.clear()
        agent.index = -1
        agent._columns = None
        count = self.kinds[agent.total] - 1
        if count:
            self.kinds[agent.total] = count
        else:
            del self.kinds[agent.total]
            self.kinds_version += 1


@dataclass(slots=True, eq=False)
class FrameworkRecord:
    """One framework: identity, weight, what it holds and what it asked for.

    ``demand`` is the declared task shape (``None``: Mesos-style coarse offers) and ``wanted``
    how many tasks of it the framework wants running in all (offered tasks count toward it).
    """

    id: str
    name: str
    role: str
    weight: float  # in effect: operator_weight, else its role's operator weight, else requested
    allocated: ResourceVector = EMPTY
    requested_weight: float = 1.0  # what the framework subscribed with
    operator_weight: float | None = None  # set by the operator for this framework
    gpu_aware: bool = True  # may be offered agents that have "gpus" (GPU_RESOURCES)
    demand: ResourceVector | None = None
    wanted: int = 0
    active: bool = True
    suppressed: bool = False
    times_chosen: int = 0
    offered_tasks: int = 0
    live_tasks: int = 0
    offer_ids: set[str] = field(default_factory=set)
    task_ids: set[str] = field(default_factory=set)
    filters: dict[str, float] = field(default_factory=dict)  # agent_id -> refused until
    registered_at: float = 0.0


@dataclass(slots=True, eq=False)
class Offer:
    """An outstanding offer: resources of one agent set aside for one framework.

    Never mutated after creation: the core stores it and the ``SendOffers`` message carries the
    very same object. (Not ``frozen=True`` only because frozen dataclasses cost four times as
    much to build, and offers are built on the allocator's hot path.)
    ``fair_tasks`` is the number of declared-shape tasks the offer was sized for (0 for a
    coarse, whole-agent offer).
    """

    offer_id: str
    framework_id: str
    agent_id: str
    hostname: str
    resources: ResourceVector
    fair_tasks: int
    attributes: tuple[tuple[str, str], ...]
    created_at: float
    # the part of ``resources`` taken from each reservation (role, resources); the rest is
    # unreserved (master.core.reservations)
    reserved: tuple[tuple[str, ResourceVector], ...] = ()


@dataclass(slots=True, eq=False)
class TaskRecord:
    """A task launched from an offer. Non-terminal tasks hold ``resources`` on their agent."""

    id: str
    framework_id: str
    agent_id: str
    name: str
    resources: ResourceVector
    state: TaskState
    updated_at: float
    preemptible: bool = False  # its framework lets the rebalancer kill it (TaskInfo.preemptible)
    # the part of ``resources`` that came from each reservation (master.core.reservations)
    reserved: tuple[tuple[str, ResourceVector], ...] = ()
