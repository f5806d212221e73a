"""Placement policies: on which agent the next task of a framework goes.

Placement apart from fairness (docs/architecture.md §2):
the allocator picks *who* is served (fairness
policy); a ``PlacementPolicy`` picks *where*. Policies are picked by name from
``PLACEMENT_POLICIES``.

- ``best-fit``: Best-Fit DRFH (Wang, Li & Liang §V-B, heuristic eq. 9): the agent minimising
  ``H(i,l) = || D_i / D_i1 - c_l / c_l1 ||_1`` where ``D_i`` is the task's demand and ``c_l`` the
  agent's free resources, both as shares of the pool total, and index 1 is the task's first
  demanded resource in canonical order (``cpus`` usually). Resources the task does not use count
  too, so a GPU agent is a poor fit for a CPU task. Ties go to the earlier agent.
- ``first-fit``: the first agent in registration order that fits (First-Fit DRFH, §V-B).
- ``random``: a uniformly random fitting agent, from a seeded generator passed in.

Large clusters: when there are more agents than ``sample_size``, best-fit and random score a
bounded sample, as Kubernetes does (``percentageOfNodesToScore``): agents are scanned round-robin
from where the previous decision stopped until ``sample_size`` fitting agents are found, so one
decision costs O(sample) while agents keep fitting; only a cluster with almost nothing free
degrades to a full scan, and the allocator then parks the framework for the rest of the run.

Saturated clusters: after a complete scan over the core's ``AgentList`` (every agent looked at),
best-fit remembers the agents that held the shape and the position of the agents' growth log
(``FreeColumns.grown``); first-fit does so when none held it. Until the log is cut, only those
agents and the agents logged since can hold the shape, so the next decisions look at those alone
and return exactly what the full scan would (same agent, same ties, same cursor): a decision
stays O(candidates) when a busy cluster frees a few agents between runs.

Invariants: ``choose`` returns an agent whose free resources hold ``shape`` and that is not in
``refused``, or ``None`` when no such agent exists (never ``None`` while one exists: that is the
Pareto-efficiency guarantee the property tests check). Policies hold no clock and no global
randomness; their only state is a scan cursor and a seeded generator.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from itertools import chain
from typing import Protocol

from fairshare.resources import ResourceVector, canonical_order

from master.core.records import AgentRecord, FreeColumns

__all__ = [
    "PLACEMENT_POLICIES",
    "BestFitPlacement",
    "FirstFitPlacement",
    "PlacementPolicy",
    "PlacementQuery",
    "RandomPlacement",
    "SplitMix64",
    "make_placement_policy",
]

DEFAULT_SAMPLE_SIZE = 8
_NO_REFUSALS: frozenset[str] = frozenset()


class PlacementPolicy(Protocol):
    """Strategy choosing the agent for one task.

    ``scores_fit``: it picks by DRFH's fit heuristic H(i,l) (eq. 9), the score the fit-aware
    choice (``master.core.fit``) compares frameworks by.
    """

    name: str
    scores_fit: bool

    def begin_run(self) -> None:
        """An allocation run starts (free resources may have grown since the last one)."""

    def prepare(self, shape: ResourceVector, total: ResourceVector) -> PlacementQuery:
        """Precompute what ``choose`` needs for tasks of ``shape`` (reused within a run)."""
        ...

    def choose(
        self,
        query: PlacementQuery,
        agents: Sequence[AgentRecord],
        refused: Container[str] = _NO_REFUSALS,
    ) -> AgentRecord | None:
        """An agent whose free resources hold the query's shape and not in ``refused``."""
        ...


class SplitMix64:
    """A tiny deterministic generator (SplitMix64) so the core needs no ``random`` module."""

    __slots__ = ("_state",)
    _MASK = (1 << 64) - 1

    def __init__(self, seed: int) -> None:
        self._state = seed & self._MASK

    def next_u64(self) -> int:
        """The next 64-bit value."""
        self._state = (self._state + 0x9E3779B97F4A7C15) & self._MASK
        z = self._state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & self._MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & self._MASK
        return z ^ (z >> 31)

    def below(self, bound: int) -> int:
        """A value in ``range(bound)`` (bound > 0)."""
        return self.next_u64() % bound


_ShapeKey = tuple[tuple[str, int], ...]


class _QueryMemo:
    """``PlacementQuery`` objects by shape, for one pool total (dropped when it changes)."""

    __slots__ = ("queries", "total")

    def __init__(self) -> None:
        self.total: ResourceVector | None = None
        self.queries: dict[ResourceVector, PlacementQuery] = {}

    def get(self, shape: ResourceVector, total: ResourceVector) -> PlacementQuery:
        if total is not self.total and total != self.total:
            self.total = total
            self.queries = {}
        query = self.queries.get(shape)
        if query is None:
            query = self.queries[shape] = PlacementQuery(shape, total)
        return query


class _Known:
    """Per shape, what the last complete scan learnt: every agent that could hold it then.

    An entry ``(columns, epoch, position, fitting)`` says: when the growth log of ``columns``
    ended at ``position``, the agents holding the shape were exactly ``fitting``. Agents only
    gain room through growth, so later the only agents that may hold it are ``fitting`` and
    those logged since. ``since`` returns them, or ``None`` when nothing is known (no entry,
    another list, another epoch, a cut log, or so many candidates that a plain scan is as
    cheap).
    """

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: dict[_ShapeKey, tuple[FreeColumns, int, int, tuple[int, ...]]] = {}

    def since(self, key: _ShapeKey, columns: FreeColumns, count: int) -> set[int] | None:
        """The indices of the only agents that may hold the shape, or ``None``."""
        entry = self.entries.get(key)
        if entry is None:
            return None
        owner, epoch, position, fitting = entry
        if owner is not columns or epoch != columns.epoch or position < columns.grown_base:
            del self.entries[key]
            return None
        logged = columns.grown
        start = position - columns.grown_base
        if len(logged) - start + len(fitting) > count // 2:
            del self.entries[key]
            return None
        candidates = set(logged[start:])
        candidates.update(fitting)
        return candidates

    def record(self, key: _ShapeKey, columns: FreeColumns, fitting: Sequence[int]) -> None:
        """``fitting`` are all the agents of ``columns`` that hold the shape now."""
        self.entries[key] = (columns, columns.epoch, columns.grown_end(), tuple(fitting))


def _fits(free: Mapping[str, int], needs: list[tuple[str, int]]) -> bool:
    for name, need in needs:
        if free.get(name, 0) < need:
            return False
    return True


class PlacementQuery:
    """One task shape, prepared for placement: what it needs and the terms of eq. 9.

    ``names`` orders the resources a scan reads: the needed ones first (the reference resource,
    the task's first in canonical order, at position 0), then the pool's other resources.
    ``H(i,l) = sum_j w_j |q_j - f_j / f_0|`` over ``terms = (j, w_j, q_j)`` with
    ``q_j = D_ij / D_i0`` (raw quantities), ``w_j = total_0 / total_j`` (the share normalisation
    of eq. 9) and ``f`` the agent's free quantities; the reference's own term is always 0.
    """

    __slots__ = ("names", "needs", "terms")

    def __init__(self, shape: ResourceVector, total: ResourceVector) -> None:
        self.needs = list(shape.millis_items())
        needed = [name for name, _ in self.needs]
        others = sorted(total.names() - shape.names(), key=canonical_order)
        self.names = needed + others
        self.terms: list[tuple[int, float, float]] = []
        if self.needs:
            ref, ref_need = self.needs[0]
            ref_total = total.millis(ref) or 1
            self.terms = [
                (j, ref_total / (total.millis(name) or 1), shape.millis(name) / ref_need)
                for j, name in enumerate(self.names)
                if j > 0
            ]

    def fits(self, free: Mapping[str, int]) -> bool:
        """True when ``free`` holds the shape."""
        return _fits(free, self.needs)

    def score(self, free: Mapping[str, int]) -> float:
        """H(i,l) of eq. 9 for an agent with ``free`` milli quantities that fits the task."""
        if not self.needs:
            return 0.0
        ref_free = free.get(self.needs[0][0], 0) or 1
        return sum(
            weight * abs(ratio - free.get(self.names[j], 0) / ref_free)
            for j, weight, ratio in self.terms
        )


class _Column(Protocol):
    """Agents' free quantities of one resource, by agent index."""

    def __getitem__(self, index: int, /) -> int: ...


class _Zeros:
    """A column for a resource no agent has: every row is 0."""

    __slots__ = ()

    def __getitem__(self, index: int) -> int:
        return 0


_ZEROS = _Zeros()


def _columns_of(agents: Sequence[AgentRecord], names: Sequence[str]) -> list[_Column]:
    """Columns built on the fly for a plain sequence of agents (no ``FreeColumns``)."""
    return [[agent.free.millis(name) for agent in agents] for name in names]


class BestFitPlacement:
    """Best-Fit DRFH (eq. 9), over a bounded round-robin sample on large clusters."""

    name = "best-fit"
    scores_fit = True

    def __init__(self, sample_size: int = DEFAULT_SAMPLE_SIZE) -> None:
        if sample_size < 1:
            raise ValueError(f"sample_size must be at least 1, got {sample_size}")
        self.sample_size = sample_size
        self._cursor = 0
        self._memo = _QueryMemo()
        self._known = _Known()

    def begin_run(self) -> None:
        """Nothing to reset: the cursor keeps rotating across runs."""

    def prepare(self, shape: ResourceVector, total: ResourceVector) -> PlacementQuery:
        """The eq. 9 terms of ``shape`` against ``total`` (memoized per total)."""
        return self._memo.get(shape, total)

    def choose(
        self,
        query: PlacementQuery,
        agents: Sequence[AgentRecord],
        refused: Container[str] = _NO_REFUSALS,
    ) -> AgentRecord | None:
        """The fitting agent with the least H(i,l) among (a sample of) the fitting agents.

        The fit test and eq. 9 are inlined: this loop is the allocator's hot path. When the
        agents come with ``FreeColumns`` (the core's ``AgentList``), the scan reads those
        contiguous arrays; any other sequence is scanned through the agents' ``free``.
        """
        count = len(agents)
        if not count:
            return None
        exhaustive = count <= self.sample_size
        start = 0 if exhaustive else self._cursor % count
        wanted = count if exhaustive else self.sample_size
        if not query.needs:
            return next((agent for agent in agents if agent.id not in refused), None)
        free_columns: FreeColumns | None = getattr(agents, "free_columns", None)
        columns: list[_Column]
        order: Iterable[int]
        if free_columns is None:
            columns = _columns_of(agents, query.names)
            order = chain(range(start, count), range(start))
        else:
            fresh = free_columns.fresh_columns()
            columns = [fresh.get(name, _ZEROS) for name in query.names]
            key = tuple(query.needs)
            candidates = self._known.since(key, free_columns, count)
            if candidates is None:
                order = chain(range(start, count), range(start))
            elif not candidates:
                return None  # nothing can hold it and nothing grew: cursor and entry stand
            else:
                order = sorted(candidates, key=lambda i: (i - start) % count)
        best_index, index, fitting = self._scan(
            query, columns, agents, refused, order, start, wanted
        )
        if fitting is not None and free_columns is not None:
            self._known.record(key, free_columns, fitting)
        if not exhaustive:
            self._cursor = index
        return None if best_index < 0 else agents[best_index]

    @staticmethod
    def _scan(
        query: PlacementQuery,
        columns: list[_Column],
        agents: Sequence[AgentRecord],
        refused: Container[str],
        order: Iterable[int],
        start: int,
        wanted: int,
    ) -> tuple[int, int, list[int] | None]:
        """Scan ``order`` (agents in round-robin order from ``start``) until ``wanted`` agents
        fit; returns (best index or -1, the next cursor, every fitting agent seen or ``None``).

        ``columns[j][i]`` is agent i's free quantity of ``query.names[j]``: first the needed
        resources (reference first), then the other pool resources of eq. 9. The fitting
        agents (refused or not) are returned only when the scan went through all of ``order``,
        so that they are all the agents of ``order`` that hold the shape.
        """
        ref_column = columns[0]
        ref_need = query.needs[0][1]
        checks = [(columns[j], need) for j, (_, need) in enumerate(query.needs) if j > 0]
        terms = [(columns[j], weight, ratio) for j, weight, ratio in query.terms]
        best = -1
        best_score = 0.0
        found = 0
        fitting: list[int] = []
        for i in order:
            ref_free = ref_column[i]
            if ref_free < ref_need:
                continue
            for column, need in checks:
                if column[i] < need:
                    break
            else:
                fitting.append(i)
                if refused and agents[i].id in refused:
                    continue
                score = 0.0
                for column, weight, ratio in terms:
                    score += weight * abs(ratio - column[i] / ref_free)
                if best < 0 or score < best_score:
                    best, best_score = i, score
                found += 1
                if found == wanted:
                    return best, (i + 1) % len(agents), None
        return best, start, fitting


class FirstFitPlacement:
    """First-Fit DRFH: the first agent in registration order that fits.

    Within a run free resources only shrink, so an agent that cannot hold a shape now will not
    hold it later in the run: a cursor per shape skips them, which makes a run O(agents) per
    distinct shape instead of O(agents) per decision.
    """

    name = "first-fit"
    scores_fit = False

    def __init__(self, sample_size: int = DEFAULT_SAMPLE_SIZE) -> None:
        self._cursors: dict[tuple[tuple[str, int], ...], int] = {}
        self._memo = _QueryMemo()
        self._known = _Known()

    def begin_run(self) -> None:
        """Free resources may have grown: scan from the first agent again."""
        self._cursors.clear()

    def prepare(self, shape: ResourceVector, total: ResourceVector) -> PlacementQuery:
        """What the shape needs (the eq. 9 terms are unused here; memoized per total)."""
        return self._memo.get(shape, total)

    def choose(
        self,
        query: PlacementQuery,
        agents: Sequence[AgentRecord],
        refused: Container[str] = _NO_REFUSALS,
    ) -> AgentRecord | None:
        """The first fitting agent not in ``refused``."""
        key = tuple(query.needs)
        free_columns: FreeColumns | None = getattr(agents, "free_columns", None)
        if free_columns is None:
            return self._scan(query, key, agents, refused)
        candidates = self._known.since(key, free_columns, len(agents))
        if candidates is None:
            chosen = self._scan(query, key, agents, refused)
            if chosen is None and not refused:
                self._known.record(key, free_columns, ())
            return chosen
        any_fit = False
        for index in sorted(candidates):
            agent = agents[index]
            if query.fits(agent.free.millis_view()):
                any_fit = True
                if agent.id not in refused:
                    return agent
        if not any_fit:
            self._known.record(key, free_columns, ())
        return None

    def _scan(
        self,
        query: PlacementQuery,
        key: _ShapeKey,
        agents: Sequence[AgentRecord],
        refused: Container[str],
    ) -> AgentRecord | None:
        """The first fitting agent not in ``refused``, from the run's cursor for the shape."""
        index = self._cursors.get(key, 0)
        free_columns: FreeColumns | None = getattr(agents, "free_columns", None)
        if free_columns is not None and query.needs:
            return self._scan_columns(query, key, agents, refused, free_columns, index)
        advancing = True
        for index in range(index, len(agents)):  # noqa: B020 - the cursor continues the scan
            agent = agents[index]
            if not query.fits(agent.free.millis_view()):
                if advancing:
                    self._cursors[key] = index + 1
                continue
            if agent.id in refused:
                advancing = False  # it fits: keep it in reach for frameworks not refusing it
                continue
            return agent
        return None

    def _scan_columns(
        self,
        query: PlacementQuery,
        key: _ShapeKey,
        agents: Sequence[AgentRecord],
        refused: Container[str],
        free_columns: FreeColumns,
        index: int,
    ) -> AgentRecord | None:
        """``_scan`` over the ``FreeColumns`` arrays (the same answer, the same cursor)."""
        fresh = free_columns.fresh_columns()
        needs = [(fresh.get(name, _ZEROS), need) for name, need in query.needs]
        first_column, first_need = needs[0]
        others = needs[1:]
        count = len(agents)
        while index < count:
            if first_column[index] >= first_need:
                for column, need in others:
                    if column[index] < need:
                        break
                else:
                    if agents[index].id in refused:
                        break  # it fits: keep it in reach for frameworks not refusing it
                    self._cursors[key] = index
                    return agents[index]
            index += 1
        self._cursors[key] = index
        if index == count:
            return None
        # A refused agent fits at ``index``: the cursor stays there; look on without moving it.
        for later in range(index + 1, count):
            if first_column[later] >= first_need:
                for column, need in others:
                    if column[later] < need:
                        break
                else:
                    if agents[later].id not in refused:
                        return agents[later]
        return None


class RandomPlacement:
    """A random fitting agent (uniform among a sample on large clusters), seeded."""

    name = "random"
    scores_fit = False

    def __init__(self, sample_size: int = DEFAULT_SAMPLE_SIZE, seed: int = 0) -> None:
        self.sample_size = sample_size
        self._rng = SplitMix64(seed)

    def begin_run(self) -> None:
        """Nothing to reset."""

    def prepare(self, shape: ResourceVector, total: ResourceVector) -> PlacementQuery:
        """What the shape needs (the eq. 9 terms are unused here)."""
        return PlacementQuery(shape, total)

    def choose(
        self,
        query: PlacementQuery,
        agents: Sequence[AgentRecord],
        refused: Container[str] = _NO_REFUSALS,
    ) -> AgentRecord | None:
        """Scan from a random start, gather up to ``sample_size`` fitting agents, pick one."""
        count = len(agents)
        if not count:
            return None
        limit = count if count <= self.sample_size else self.sample_size
        index = self._rng.below(count)
        fitting: list[AgentRecord] = []
        for _ in range(count):
            agent = agents[index]
            index = index + 1 if index + 1 < count else 0
            if query.fits(agent.free.millis_view()) and agent.id not in refused:
                fitting.append(agent)
                if len(fitting) == limit:
                    break
        if not fitting:
            return None
        return fitting[self._rng.below(len(fitting))]


PLACEMENT_POLICIES: dict[str, Callable[[int, int], PlacementPolicy]] = {
    "best-fit": lambda sample, seed: BestFitPlacement(sample),
    "first-fit": lambda sample, seed: FirstFitPlacement(sample),
    "random": lambda sample, seed: RandomPlacement(sample, seed),
}


def make_placement_policy(
    name: str, sample_size: int = DEFAULT_SAMPLE_SIZE, seed: int = 0
) -> PlacementPolicy:
    """The placement policy called ``name`` (``best-fit``, ``first-fit`` or ``random``)."""
    try:
        factory = PLACEMENT_POLICIES[name]
    except KeyError:
        known = ", ".join(sorted(PLACEMENT_POLICIES))
        raise ValueError(f"unknown placement policy {name!r}; choose one of {known}") from None
    return factory(sample_size, seed)
