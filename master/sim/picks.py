"""The sequence of progressive-filling picks the core makes, one task at a time (DRF Table 1).

``MasterState.handle_allocate`` does a whole run at once and batches its offers; to show the
order in which it serves frameworks, ``trace_picks`` lets the core pick one task per run: it asks
the core for the frameworks in fairness order (``ordered_frameworks``: lowest key, then fewest
times chosen, then framework id) and declares one more wanted task for the first one that can
still place a task, accepts the offer, and repeats until nobody can take another task.

Invariant: only core calls change state; the frameworks' demands must be declared beforehand
(shape and a wanted count that bounds their tasks).
"""

from __future__ import annotations

from dataclasses import dataclass

from master.core import MasterState, SendOffers, TaskLaunch

__all__ = ["Pick", "trace_picks"]


@dataclass(frozen=True, slots=True)
class Pick:
    """One task given to ``framework_id``, and every framework's dominant share after it."""

    framework_id: str
    agent_id: str
    shares: dict[str, float]


def _try_one(state: MasterState, framework_id: str, limit: int, now: float) -> Pick | None:
    fw = state.frameworks[framework_id]
    shape, wanted = fw.demand, fw.wanted
    if shape is None or fw.live_tasks >= min(wanted, limit):
        return None
    others = {fid: (f.demand, f.wanted) for fid, f in state.frameworks.items() if fid != fw.id}
    for fid, (other_shape, _) in others.items():
        state.handle_update_demand(fid, other_shape, state.frameworks[fid].live_tasks, now)
    state.handle_update_demand(framework_id, shape, fw.live_tasks + 1, now)
    messages = state.handle_allocate(now)
    for fid, (other_shape, other_wanted) in others.items():
        state.handle_update_demand(fid, other_shape, other_wanted, now)
    state.handle_update_demand(framework_id, shape, wanted, now)
    for message in messages:
        if isinstance(message, SendOffers):
            offer = message.offers[0]
            task = TaskLaunch(f"{framework_id}-{fw.live_tasks + 1}", "task", offer.resources)
            state.handle_accept(framework_id, [offer.offer_id], [task], now, refuse_seconds=0.0)
            shares = {fid: state.dominant_share(fid) for fid in state.frameworks}
            return Pick(framework_id, offer.agent_id, shares)
    return None


def trace_picks(state: MasterState, now: float = 0.0, limit: int = 10_000) -> list[Pick]:
    """Let the core pick one task at a time until no framework can take one more."""
    picks: list[Pick] = []
    while len(picks) < limit:
        for framework_id in state.ordered_frameworks():
            pick = _try_one(state, framework_id, limit, now)
            if pick is not None:
                picks.append(pick)
                break
        else:
            return picks
    return picks
