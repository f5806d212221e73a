"""The role tree: which tenant is served next, by H-DRF, Mesos's naive hierarchy, or not at all.

Roles are paths (``fairshare.roles``); the tree has a node per role that holds a framework or
has a descendant that does, under one root. A role with frameworks of its own *and* sub-roles
gets a virtual child (Mesos's ``.`` leaf, path ``role/.``, weight 1) holding its own frameworks,
so every framework sits in exactly one *leaf group*. A role's weight applies to its node among
its siblings; a framework's own weight orders it among the frameworks of its leaf group.

Each allocation step walks from the root to the child with the lowest weighted share
(``share / weight``, ties to the smaller path), down to a leaf group, whose most deprived
framework (the sorter's key, its own weighted dominant share) is served (``TreeRun.select``).

How a node's share is computed is the *hierarchy*:

- ``hdrf``: Dynamic H-DRF, Bhattacharya, Culler, Friedman, Ghodsi, Shenker and Stoica,
  "Hierarchical Scheduling for Diverse Datacenter Workloads", ACM SoCC 2013, §4.4 (the two
  fixes of naive H-DRF's §4.3 failures). A leaf group's consumption is what its frameworks
  hold. An internal node's consumption is the sum of its children's after *rescaling to the
  minimum node*: each non-blocked child's vector is scaled so that its weighted dominant share
  equals the minimum ``M`` among the non-blocked children (``c_i * M * w_i / s_i``); blocked
  children (*ignoring blocked nodes*) are added unscaled and do not count toward ``M``. An
  internal node's dominant share ignores *saturated* resources (none of it free). Rescaling
  stops the starvation of a child whose dominant resource differs from its siblings' (§4.3's
  first example); ignoring blocked nodes stops a saturated child from pinning ``M`` (the
  second).
- ``naive``: Mesos's hierarchical DRF sorter (src/master/allocator/mesos/sorter/drf): a node's
  share is the dominant share of everything its subtree holds, divided by its weight. Kept for
  comparison and migration; it starves in both of the paper's examples.
- ``flat``: no tree: the core's per-framework sorter orders every framework, and a role's
  operator weight is copied onto its frameworks (fairshare before roles were a tree).

*Blocked* (§4.4): a leaf group is blocked when none of its frameworks can be served in this run
(none is a candidate, or each was tried and could not be served: it wants nothing more, nothing
fits, every agent refused); an internal node when all its children are. *Saturated*: the pool
has none of the resource free (offers count as allocated).

Shares are fractions of the pool total over the resources that count
(``CoreConfig.fair_sharing_excluded_resources`` are left out, as Mesos's
``--fair_sharing_excluded_resource_names``), kept as floats; a run updates only the path it
served, so one decision costs O(depth x (resources + log siblings)).

Invariants (``TreeRun.check`` in validate mode, after every step of a run): every candidate
framework is in the heap of its leaf group and nowhere else; a node is in its parent's heap iff
it is not blocked, keyed by its current weighted share; each node's consumption and share equal
what ``node_shares`` computes from scratch for the same blocked set and saturation (up to float
rounding, 1e-9).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from heapq import heapify, heappop, heapreplace
from operator import add, sub, truediv
from typing import TYPE_CHECKING

from fairshare.resources import ResourceVector
from fairshare.roles import DEFAULT_ROLE

from master.core.sorter import SorterEntry

if TYPE_CHECKING:
    from master.core.records import FrameworkRecord

__all__ = [
    "HIERARCHIES",
    "OWN_GROUP",
    "RoleShare",
    "TreeRun",
    "group_path",
    "node_shares",
]

HIERARCHIES = ("hdrf", "naive", "flat")
"""The hierarchies ``CoreConfig.hierarchy`` may name (see the module docstring)."""
OWN_GROUP = "."
"""The last segment of a role's virtual leaf group (its own frameworks beside its sub-roles)."""
ROOT = ""
_TOLERANCE = 1e-9


def group_path(role: str, has_children: bool) -> str:
    """The path of the leaf group holding ``role``'s own frameworks."""
    return f"{role}/{OWN_GROUP}" if has_children else role


class _Node:
    """A node of one run's tree: a role, a role's virtual own group, or the root."""

    __slots__ = (
        "base",
        "blocked",
        "children",
        "consumption",
        "contribution",
        "direction",
        "heap",
        "parent",
        "path",
        "share",
        "unscaled",
        "weight",
        "wshare",
    )

    def __init__(self, path: str, weight: float, parent: _Node | None) -> None:
        self.path = path
        self.weight = weight
        self.parent = parent
        self.children: list[_Node] = []
        self.heap: list[tuple[float, str, _Node]] = []  # internal: non-blocked children
        self.consumption: list[float] = []
        self.share = 0.0
        self.wshare = 0.0
        self.blocked = False
        # hdrf bookkeeping of an internal node: sum over its non-blocked children of their
        # contributions ``w_i * c_i / s_i`` (direction) and of its blocked children's c_i
        self.direction: list[float] = []
        self.unscaled: list[float] = []
        self.contribution: list[float] | None = None  # this node's term in its parent's sum
        # what the role holds besides its frameworks, unscaled: its idle reservations
        # (master.core.reservations), a leaf's part of its consumption, an internal node's
        # part of ``unscaled``
        self.base: list[float] | None = None

    def __repr__(self) -> str:
        return f"_Node({self.path!r}, share={self.share:.6g}, blocked={self.blocked})"


@dataclass(frozen=True, slots=True)
class RoleShare:
    """A role as the tree sees it: its weight, its share and dominant resource (computed as the
    hierarchy computes it, saturation and blocking as of now), and what it holds (unscaled)."""

    path: str
    weight: float
    share: float
    weighted_share: float
    dominant_resource: str
    held: Mapping[str, float]  # fraction of the pool per resource, everything the subtree holds


class _Resources:
    """The resources that count in shares: their names, totals and what is free of each."""

    __slots__ = ("any_saturated", "free", "names", "saturated", "totals", "zeros")

    def __init__(
        self, total: ResourceVector, excluded: frozenset[str], used: Mapping[str, int]
    ) -> None:
        self.names = sorted(n for n in total.names() if n not in excluded)
        self.totals = [total.millis(n) for n in self.names]
        self.zeros = [0] * len(self.names)  # map(millis.get, names, zeros): 0 when missing
        self.free = [t - used.get(n, 0) for n, t in zip(self.names, self.totals, strict=True)]
        self.saturated = [free <= 0 for free in self.free]
        self.any_saturated = any(self.saturated)

    def normalized(self, vector: ResourceVector) -> list[float]:
        millis = vector.millis_view()
        return [millis.get(n, 0) / t for n, t in zip(self.names, self.totals, strict=True)]


def _dominant(values: list[float], saturated: list[bool] | None) -> float:
    best = 0.0
    for index, value in enumerate(values):
        if value > best and (saturated is None or not saturated[index]):
            best = value
    return best


class _Tree:
    """A tree of ``_Node``s built from the frameworks' roles (shared by runs and views)."""

    def __init__(
        self,
        frameworks: Iterable[FrameworkRecord],
        role_weights: Mapping[str, float],
        resources: _Resources,
        hierarchy: str,
        idle: Mapping[str, ResourceVector] | None = None,
    ) -> None:
        self.resources = resources
        self.hdrf = hierarchy == "hdrf"
        width = len(resources.names)
        self.root = _Node(ROOT, 1.0, None)
        self.roles: dict[str, _Node] = {}
        self.groups: dict[str, _Node] = {}  # role -> its leaf group
        self.group_of: dict[str, _Node] = {}  # framework id -> its leaf group
        members: dict[str, list[FrameworkRecord]] = {}
        for fw in frameworks:
            members.setdefault(fw.role or DEFAULT_ROLE, []).append(fw)
        for role in sorted(members):
            self._role_node(role, role_weights)
        for role in sorted(members):
            node = self.roles[role]
            if node.children:
                group = _Node(group_path(role, True), 1.0, node)
                node.children.append(group)
            else:
                group = node
            self.groups[role] = group
            consumption = [0.0] * width
            for fw in members[role]:
                self.group_of[fw.id] = group
                for index, value in enumerate(resources.normalized(fw.allocated)):
                    consumption[index] += value
            group.consumption = consumption
        for role, held in (idle or {}).items():
            reserving = self.roles.get(role)
            if reserving is not None and held:
                reserving.base = resources.normalized(held)
                if not reserving.children:
                    _add(reserving.consumption, reserving.base)
        for node in self._bottom_up():
            if not node.children:
                node.share = _dominant(node.consumption, None)
                node.wshare = node.share / node.weight

    def _role_node(self, role: str, role_weights: Mapping[str, float]) -> _Node:
        node = self.roles.get(role)
        if node is not None:
            return node
        head, slash, _ = role.rpartition("/")
        parent = self._role_node(head, role_weights) if slash else self.root
        node = _Node(role, role_weights.get(role, 1.0), parent)
        parent.children.append(node)
        self.roles[role] = node
        return node

    def _bottom_up(self) -> list[_Node]:
        order: list[_Node] = []
        stack = [self.root]
        while stack:
            node = stack.pop()
            order.append(node)
            stack.extend(node.children)
        order.reverse()
        return order

    def settle(self) -> None:
        """Compute every internal node's consumption, share and heap from its children."""
        width = len(self.resources.names)
        for node in self._bottom_up():
            if not node.children:
                node.contribution = None
                continue
            node.direction = [0.0] * width
            node.unscaled = [0.0] * width if node.base is None else list(node.base)
            node.heap = []
            for child in node.children:
                child.contribution = None
                if child.blocked:
                    _add(node.unscaled, child.consumption)
                    continue
                node.heap.append((child.wshare, child.path, child))
                if self.hdrf:
                    child.contribution = _contribution(child)
                    if child.contribution is not None:
                        _add(node.direction, child.contribution)
                else:
                    _add(node.unscaled, child.consumption)
            heapify(node.heap)
            node.blocked = not node.heap
            self._reshare(node)

    def _reshare(self, node: _Node) -> None:
        """An internal node's consumption and share from its bookkeeping (its heap is current)."""
        if self.hdrf:
            minimum = node.heap[0][0] if node.heap else 0.0
            node.consumption = [
                minimum * d + u for d, u in zip(node.direction, node.unscaled, strict=True)
            ]
            node.share = _dominant(node.consumption, self.resources.saturated)
        else:
            node.consumption = list(node.unscaled)
            node.share = _dominant(node.consumption, None)
        node.wshare = node.share / node.weight


def _add(into: list[float], values: list[float]) -> None:
    for index, value in enumerate(values):
        into[index] += value


def _contribution(child: _Node) -> list[float] | None:
    """``w_i * c_i / s_i``: the child's vector scaled to weighted share 1 (None if it is 0)."""
    if child.share <= 0.0:
        return None
    factor = child.weight / child.share
    return [value * factor for value in child.consumption]


class TreeRun(_Tree):
    """The tree during one allocation run: selection walks it, serving updates one path.

    Built from every framework (inactive ones hold resources too) and the sorter's entries
    (the candidates), which it splits into the heaps of their leaf groups.
    """

    def __init__(
        self,
        frameworks: Mapping[str, FrameworkRecord],
        entries: list[SorterEntry],
        role_weights: Mapping[str, float],
        total: ResourceVector,
        used: Mapping[str, int],
        excluded: frozenset[str],
        hierarchy: str,
        idle: Mapping[str, ResourceVector] | None = None,
    ) -> None:
        super().__init__(
            frameworks.values(), role_weights, _Resources(total, excluded, used), hierarchy, idle
        )
        self.framework_heaps: dict[int, list[SorterEntry]] = {}
        heaps: dict[str, list[SorterEntry]] = {}
        for entry in entries:  # sorted, so each group's list is already a heap
            group = self.group_of[entry[2]]
            heaps.setdefault(group.path, []).append(entry)
        self.heaps = heaps
        for group in self.groups.values():
            group.blocked = group.path not in heaps
        self.settle()

    def select(self) -> tuple[_Node, list[SorterEntry]] | None:
        """The leaf group the walk from the root reaches, and its heap; None if all blocked."""
        node = self.root
        if node.blocked or not node.children:
            return None
        while node.children:
            node = node.heap[0][2]
        return node, self.heaps[node.path]

    def restart(self, entries: list[SorterEntry]) -> None:
        """A new stage of the same run: ``entries`` (every framework parked in the last stage)
        are candidates again; what the groups got so far stays counted."""
        heaps: dict[str, list[SorterEntry]] = {}
        for entry in sorted(entries):
            heaps.setdefault(self.group_of[entry[2]].path, []).append(entry)
        self.heaps = heaps
        for group in self.groups.values():
            group.blocked = group.path not in heaps
        self.settle()

    def order(self) -> list[str]:
        """Candidate framework ids in the order the walk would serve them if nothing changed
        (Mesos's sorter's pre-order of sorted children); the run's state is untouched."""
        ordered: list[str] = []

        def visit(node: _Node) -> None:
            if not node.children:
                ordered.extend(entry[2] for entry in sorted(self.heaps.get(node.path, ())))
                return
            for _, _, child in sorted(node.heap):
                visit(child)

        if not self.root.blocked:
            visit(self.root)
        return ordered

    def served(self, group: _Node, resources: ResourceVector) -> None:
        """``group`` (on the selected path) got ``resources``: update the path up to the root.

        The allocator's hot path under a tree: one pass over the resources that count, then
        ``_climb`` (one heap re-key and one share per level)."""
        res = self.resources
        millis = resources.millis_view()
        delta = list(map(truediv, map(millis.get, res.names, res.zeros), res.totals))
        consumption = group.consumption = list(map(add, group.consumption, delta))
        share = max(consumption, default=0.0)
        group.share = share
        group.wshare = share / group.weight
        free = res.free
        for index, name in enumerate(res.names):
            amount = millis.get(name, 0)
            if amount:
                left = free[index] = free[index] - amount
                if left <= 0 and not res.saturated[index]:
                    res.saturated[index] = True
                    res.any_saturated = True
                    if self.hdrf:
                        self.settle()  # every internal share ignores the saturated resource
                        return
        self._climb(group, delta)

    def block(self, group: _Node) -> None:
        """No framework of ``group`` can be served any more in this run."""
        node = group
        node.blocked = True
        while node.parent is not None:
            parent = node.parent
            _remove(parent.heap, node)
            if self.hdrf and node.contribution is not None:
                _subtract(parent.direction, node.contribution)
            node.contribution = None
            if self.hdrf:
                _add(parent.unscaled, node.consumption)
            if parent.heap:
                self._reshare(parent)
                self._climb(parent, None)
                return
            parent.blocked = True
            self._reshare(parent)
            node = parent

    def _climb(self, node: _Node, delta: list[float] | None) -> None:
        """``node`` (the top of its parent's heap) changed: re-key it and its ancestors
        (``delta``: what the leaf group below got, which ``naive`` adds to every ancestor).

        Written out for speed (this runs once per decision and level): under hdrf the
        parent's direction sum trades the node's old contribution ``w c / s`` for its new
        one, and its consumption is ``M * direction + unscaled`` (``_reshare``)."""
        hdrf = self.hdrf
        saturated = self.resources.saturated if self.resources.any_saturated else None
        parent = node.parent
        while parent is not None:
            heap = parent.heap
            entry = (node.wshare, node.path, node)
            if heap[0][2] is node:
                heapreplace(heap, entry)
            else:
                _rekey(heap, node)
            if hdrf:
                old = node.contribution
                share = node.share
                direction = parent.direction
                if old is not None:
                    direction = list(map(sub, direction, old))
                if share > 0.0:
                    new = list(map((node.weight / share).__mul__, node.consumption))
                    direction = list(map(add, direction, new))
                else:
                    new = None
                node.contribution = new
                parent.direction = direction
                consumption = list(map(add, map(heap[0][0].__mul__, direction), parent.unscaled))
                if saturated is None:
                    share = max(consumption, default=0.0)
                else:
                    share = _dominant(consumption, saturated)
            else:
                if delta is not None:
                    parent.unscaled = list(map(add, parent.unscaled, delta))
                consumption = parent.unscaled
                share = max(consumption, default=0.0)
            parent.consumption = consumption
            parent.share = share
            parent.wshare = share / parent.weight
            node = parent
            parent = node.parent

    def check(self) -> None:
        """Assert the run's invariants against a from-scratch computation (validate mode)."""
        for node in self._bottom_up():
            if not node.children:
                expected = _dominant(node.consumption, None)
                assert abs(node.share - expected) <= _TOLERANCE, f"{node.path}: stale share"
                continue
            live = sorted(c.path for c in node.children if not c.blocked)
            assert sorted(e[1] for e in node.heap) == live, f"{node.path}: heap is not its live"
            for wshare, _, child in node.heap:
                assert abs(wshare - child.wshare) <= _TOLERANCE, f"{child.path}: stale heap key"
            expected_consumption = _scratch_consumption(node, self.hdrf)
            for got, want in zip(node.consumption, expected_consumption, strict=True):
                assert abs(got - want) <= _TOLERANCE, f"{node.path}: consumption drifted"
            assert node.blocked == (not node.heap), f"{node.path}: blocked flag is off"


def _rekey(heap: list[tuple[float, str, _Node]], node: _Node) -> None:
    """Put ``node``'s current weighted share in ``heap``: it is the top when the run served the
    path just selected; a fit-aware claim may have moved it already (then it is looked for)."""
    entry = (node.wshare, node.path, node)
    if heap[0][2] is node:
        heapreplace(heap, entry)
        return
    for index, (_, _, child) in enumerate(heap):
        if child is node:
            heap[index] = entry
            heapify(heap)
            return
    raise AssertionError(f"{node.path} is not in its parent's heap")


def _remove(heap: list[tuple[float, str, _Node]], node: _Node) -> None:
    """Take ``node`` out of ``heap`` (it is blocked)."""
    if heap[0][2] is node:
        heappop(heap)
        return
    for index, (_, _, child) in enumerate(heap):
        if child is node:
            heap[index] = heap[-1]
            heap.pop()
            heapify(heap)
            return
    raise AssertionError(f"{node.path} is not in its parent's heap")


def _subtract(into: list[float], values: list[float]) -> None:
    for index, value in enumerate(values):
        into[index] -= value


def _scratch_consumption(node: _Node, hdrf: bool) -> list[float]:
    """An internal node's consumption from its children, without the incremental sums."""
    width = len(node.consumption)
    total = [0.0] * width if node.base is None else list(node.base)
    live = [c for c in node.children if not c.blocked]
    if not hdrf:
        for child in node.children:
            _add(total, child.consumption)
        return total
    minimum = min((c.wshare for c in live), default=0.0)
    for child in node.children:
        if child.blocked:
            _add(total, child.consumption)
        elif child.share > 0.0:
            factor = minimum * child.weight / child.share
            _add(total, [value * factor for value in child.consumption])
    return total


def node_shares(
    frameworks: Mapping[str, FrameworkRecord],
    candidates: Iterable[str],
    role_weights: Mapping[str, float],
    total: ResourceVector,
    used: Mapping[str, int],
    excluded: frozenset[str],
    hierarchy: str,
    idle: Mapping[str, ResourceVector] | None = None,
) -> dict[str, RoleShare]:
    """Every role's share as the hierarchy computes it now, outside a run (for views).

    A leaf group is blocked when none of its frameworks is in ``candidates`` (active,
    unsuppressed, and, for a declared demand, wanting more); ``flat`` is reported as ``naive``
    would compute it (what each role holds). Virtual own groups are not listed. When nothing
    is free at all, no resource counts as saturated (a run decides nothing until something
    frees, and then that resource is not saturated).
    """
    resources = _Resources(total, excluded, used)
    if all(resources.saturated):  # nothing is free: no run decides anything until a resource
        resources.saturated = [False] * len(resources.saturated)  # frees; show full shares
        resources.any_saturated = False
    tree = _Tree(
        frameworks.values(),
        role_weights,
        resources,
        "naive" if hierarchy == "flat" else hierarchy,
        idle,
    )
    live = {tree.group_of[fw_id].path for fw_id in candidates if fw_id in tree.group_of}
    for group in tree.groups.values():
        group.blocked = group.path not in live
    tree.settle()
    held: dict[str, list[float]] = {}
    for node in tree._bottom_up():
        if node.children:
            sums = [0.0] * len(resources.names) if node.base is None else list(node.base)
            for child in node.children:
                _add(sums, held[child.path])
            held[node.path] = sums
        else:
            held[node.path] = list(node.consumption)
    shares: dict[str, RoleShare] = {}
    for role, node in tree.roles.items():
        values = node.consumption
        best = max(range(len(values)), key=values.__getitem__, default=None)
        shares[role] = RoleShare(
            path=role,
            weight=node.weight,
            share=node.share,
            weighted_share=node.wshare,
            dominant_resource="" if best is None or not values[best] else resources.names[best],
            held=dict(zip(resources.names, held[role], strict=True)),
        )
    return shares
