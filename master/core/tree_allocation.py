"""One allocation run over the role tree (``--hierarchy hdrf`` or ``naive``).

The same progressive filling as ``master.core.allocation.run``, the same ``Run`` serving each
unit, but the framework served at each step is the most deprived of the leaf group the walk of
``master.core.hierarchy.TreeRun`` reaches: each placement updates the shares along that group's
path, and a group whose frameworks are all parked is blocked for the rest of the stage (H-DRF
§4.4, Bhattacharya et al., SoCC 2013). ``MasterState.handle_allocate`` takes this run when
frameworks are in more than one role (with one role the walk would always reach the one group,
whose order is the sorter's, so the flat run is the same run, cheaper).

Invariants: those of ``master.core.allocation``; in validate mode the tree's incremental sums
are checked against a from-scratch computation after every step (``TreeRun.check``).
"""

from __future__ import annotations

from collections.abc import Mapping
from heapq import heappop, heappush
from typing import TYPE_CHECKING

from fairshare.resources import ResourceVector

from master.core.allocation import Run, stages, used_of
from master.core.hierarchy import TreeRun
from master.core.messages import Message
from master.core.sorter import SorterEntry

if TYPE_CHECKING:
    from master.core.state import MasterState

__all__ = ["roles_in_use", "run", "tree_of"]


def roles_in_use(state: MasterState) -> int:
    """How many roles the frameworks are in (stops counting at 2)."""
    first = None
    for fw in state.frameworks.values():
        if first is None:
            first = fw.role
        elif fw.role != first:
            return 2
    return 0 if first is None else 1


def tree_of(
    state: MasterState,
    entries: list[SorterEntry] | None = None,
    used: dict[str, int] | None = None,
    idle: Mapping[str, ResourceVector] | None = None,
) -> TreeRun:
    """The role tree of ``state`` as a run starts it (``entries``: the candidates, by default
    a copy of the sorter's, which stays untouched; ``used`` and ``idle``: the pool's use and
    the reservations' idle parts, when the run computed them already)."""
    if idle is None:
        idle = state.reserved_idle()
    if entries is None:
        entries = sorted(e for e in map(state.sorter.entry, state.sorter.ordered()) if e)
    config = state.config
    return TreeRun(
        state.frameworks,
        entries,
        state.role_weights,
        state.total,
        used_of(state, idle) if used is None else used,
        config.fair_sharing_excluded_resources,
        state.hierarchy,
        idle,
    )


def run(state: MasterState, now: float) -> list[Message]:
    """Progressive filling over the role tree (``master.core.hierarchy``): each step walks the
    tree to a leaf group and serves its most deprived framework, exactly as the flat run serves
    the most deprived framework of all; a group none of whose frameworks can be served any more
    is blocked for the rest of the stage (H-DRF §4.4). Quota stages as in
    ``master.core.allocation.run``."""
    idle = state.reserved_idle()  # once per run, as ``used``: the tree's and the ledger's
    used = used_of(state, idle)
    tree = tree_of(state, state.sorter.take_entries(), used, idle)
    frameworks = state.frameworks
    state.placement.begin_run()
    this_run = Run(state, now)
    this_run.tree = tree
    serve = this_run.serve
    validate = state.config.validate
    for stage in stages(this_run, used, idle):
        parked: list[SorterEntry] = []
        while True:
            selected = tree.select()
            if selected is None:
                break
            group, heap = selected
            entry = heappop(heap)
            fw = frameworks[entry[2]]
            key = serve(fw, heap)
            if key is None:
                parked.append(entry)
                if not heap:
                    tree.block(group)
            else:
                fw.times_chosen += 1
                heappush(heap, (key, fw.times_chosen, fw.id))
            if validate:
                tree.check()
        if stage == "guarantees":
            this_run.guarantees_only = False
            tree.restart(parked)
    messages = this_run.finish()
    for heap in tree.heaps.values():
        parked.extend(heap)
    state.sorter.restore_entries(parked)
    return messages
