"""The role tree's cost: the core's benchmarks with 1,000 frameworks in 100 roles over 3 levels.

Run: ``python tests/bench/bench_tree.py`` (``--quick`` for a smaller pass). Prints figures;
asserts nothing about time.

Roles ``t{i}/m{j}/l{k}`` (5 x 4 x 5 = 100 leaf roles, 125 nodes), 10 frameworks each, role
weights 1-3 drawn once; the same frameworks under ``--hierarchy flat`` (one sorter of frameworks,
role weights copied onto them), ``hdrf`` and ``naive``, measured in turns in one process so the
machine's noise hits all alike:

1. Mesos ``DeclineOffers`` (as bench_core: 10,000 agents ``cpus:16;mem:65536``, frameworks
   declaring nothing, every offer declined with ``refuse_seconds=0``): p50 of the allocation
   run per hierarchy over interleaved cycles, and its ratio to flat.
2. Demand-aware filling from an empty cluster (bench_core's shapes, best-fit sample 8): decisions
   per second of one run, the median of alternating repeats, and the ratio to flat.
3. ``DeclineOffers`` under hdrf with a quota on each of the 100 leaf roles (a guarantee of 1/200
   of the pool's cpus, half the pool guaranteed in all, and a limit of 1/50) against the same
   cluster without quotas, interleaved (the goal: within 1.25x).
4. ``DeclineOffers`` under hdrf with a reservation on every tenth agent (half of it, for one of
   the 100 leaf roles in turn) against the same cluster without reservations, interleaved: what
   the reservation stage (``master.core.reserved_allocation``) costs a run (no goal set).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import AGENT, _quantiles, _shapes
from fairshare.resources import ResourceVector

from master.core import CoreConfig, MasterState, SendOffers

HIERARCHIES = ("flat", "hdrf", "naive")


def roles_of(frameworks: int, seed: int = 3) -> tuple[list[str], dict[str, float]]:
    """Each framework's role (100 leaf roles over 3 levels, or fewer for fewer frameworks) and
    every role path's weight."""
    rng = random.Random(seed)
    leaves = [f"t{i}/m{j}/l{k}" for i in range(5) for j in range(4) for k in range(5)]
    leaves = leaves[: max(1, min(len(leaves), frameworks // 10))]
    weights: dict[str, float] = {}
    for leaf in leaves:
        parts = leaf.split("/")
        for depth in range(1, len(parts) + 1):
            path = "/".join(parts[:depth])
            weights.setdefault(path, float(rng.choice((1, 1, 2, 3))))
    return [leaves[index % len(leaves)] for index in range(frameworks)], weights


def cluster(agents: int, frameworks: int, hierarchy: str) -> MasterState:
    state = MasterState(CoreConfig(hierarchy=hierarchy))
    roles, weights = roles_of(frameworks)
    for path, weight in weights.items():
        state.handle_set_weight(path, weight, 0.0)
    for index in range(agents):
        state.handle_add_agent(f"agent-{index:05d}", AGENT, 0.0, hostname=f"host-{index:05d}")
    for index in range(frameworks):
        state.handle_add_framework(f"framework-{index:04d}", 0.0, role=roles[index])
    return state


def bench_decline(agents: int, frameworks: int, cycles: int) -> None:
    states = {h: cluster(agents, frameworks, h) for h in HIERARCHIES}
    runs: dict[str, list[float]] = {h: [] for h in HIERARCHIES}
    now = 0.0
    for _ in range(cycles):
        now += 1.0
        for hierarchy, state in states.items():
            gc.collect()
            start = time.perf_counter()
            messages = state.handle_allocate(now)
            runs[hierarchy].append(time.perf_counter() - start)
            for message in messages:
                assert isinstance(message, SendOffers)
                ids = [offer.offer_id for offer in message.offers]
                state.handle_decline(message.framework_id, ids, now, refuse_seconds=0.0)
    print(
        f"DeclineOffers with a role tree: {agents} agents x {frameworks} frameworks in"
        f" {len(roles_of(frameworks)[1])} role nodes, {cycles} cycles (interleaved)"
    )
    flat50 = _quantiles(runs["flat"])[0]
    for hierarchy in HIERARCHIES:
        p50, p99 = _quantiles(runs[hierarchy])
        print(
            f"  {hierarchy:6s} allocation run p50 {p50 * 1000:8.1f} ms  p99 {p99 * 1000:8.1f} ms"
            f"   {p50 / flat50:5.2f}x flat"
        )
    print("  goal: hdrf within 1.25x of flat")


def _filling(agents: int, frameworks: int, hierarchy: str, wanted: int) -> tuple[int, float]:
    state = cluster(agents, frameworks, hierarchy)  # best-fit, sample 8: the defaults
    for index, shape in enumerate(_shapes(frameworks, seed=7)):
        state.handle_update_demand(f"framework-{index:04d}", shape, wanted, 0.0)
    gc.collect()
    start = time.perf_counter()
    messages = state.handle_allocate(1.0)
    elapsed = time.perf_counter() - start
    placed = sum(o.fair_tasks for m in messages if isinstance(m, SendOffers) for o in m.offers)
    return placed, elapsed


def bench_filling(agents: int, frameworks: int, repeats: int) -> None:
    wanted = max(1, agents * 16 // frameworks // 4)
    rates: dict[str, list[float]] = {h: [] for h in HIERARCHIES}
    placed: dict[str, int] = {}
    for _ in range(repeats):
        for hierarchy in HIERARCHIES:
            placed[hierarchy], elapsed = _filling(agents, frameworks, hierarchy, wanted)
            rates[hierarchy].append(placed[hierarchy] / elapsed)
    print(
        f"Demand-aware filling with a role tree: {agents} agents x {frameworks} frameworks,"
        f" best-fit sample 8, median of {repeats} alternating runs"
    )
    flat = statistics.median(rates["flat"])
    for hierarchy in HIERARCHIES:
        rate = statistics.median(rates[hierarchy])
        print(
            f"  {hierarchy:6s} {placed[hierarchy]:7d} tasks  {rate:10,.0f} decisions/s"
            f"   {rate / flat:5.0%} of flat"
        )
    print("  goal: hdrf at least 80% of flat")


def _interleaved_declines(states: dict[str, MasterState], cycles: int) -> None:
    """Time each state's allocation run in turn (every offer declined with refuse_seconds=0
    after it), then print p50/p99 per label and the ratio to the first label's p50."""
    runs: dict[str, list[float]] = {label: [] for label in states}
    now = 0.0
    for _ in range(cycles):
        now += 1.0
        for label, state in states.items():
            gc.collect()
            start = time.perf_counter()
            messages = state.handle_allocate(now)
            runs[label].append(time.perf_counter() - start)
            for message in messages:
                assert isinstance(message, SendOffers)
                ids = [offer.offer_id for offer in message.offers]
                state.handle_decline(message.framework_id, ids, now, refuse_seconds=0.0)
    base_label = next(iter(runs))
    base = _quantiles(runs[base_label])[0]
    width = max(map(len, runs))
    for label, samples in runs.items():
        p50, p99 = _quantiles(samples)
        print(
            f"  {label:{width}s} allocation run p50 {p50 * 1000:8.1f} ms  p99 {p99 * 1000:8.1f} ms"
            f"   {p50 / base:5.2f}x {base_label}"
        )


def bench_quota(agents: int, frameworks: int, cycles: int) -> None:
    from master.core.quota import Quota

    plain = cluster(agents, frameworks, "hdrf")
    quoted = cluster(agents, frameworks, "hdrf")
    leaves = sorted(set(roles_of(frameworks)[0]))
    cpus = quoted.total.millis("cpus") // 1000
    for leaf in leaves:
        quoted.quotas[leaf] = Quota(
            ResourceVector({"cpus": max(1, cpus // 200)}), ResourceVector({"cpus": cpus // 50})
        )
    print(
        f"DeclineOffers with quotas on {len(leaves)} roles (hdrf): {agents} agents x"
        f" {frameworks} frameworks, {cycles} cycles (interleaved)"
    )
    _interleaved_declines({"without": plain, "with quotas": quoted}, cycles)
    print("  goal: with quotas within 1.25x of without")


def bench_reserved(agents: int, frameworks: int, cycles: int) -> None:
    plain = cluster(agents, frameworks, "hdrf")
    reserved = cluster(agents, frameworks, "hdrf")
    leaves = sorted(set(roles_of(frameworks)[0]))
    half = ResourceVector({"cpus": AGENT["cpus"] / 2, "mem": AGENT["mem"] / 2})
    with_reservation = sorted(reserved.agents)[::10]
    for index, agent_id in enumerate(with_reservation):
        reserved.handle_reserve(agent_id, leaves[index % len(leaves)], half, 0.0)
    print(
        f"DeclineOffers with reservations on {len(with_reservation)} of {agents} agents (hdrf):"
        f" {frameworks} frameworks, {cycles} cycles (interleaved)"
    )
    _interleaved_declines({"without": plain, "with reservations": reserved}, cycles)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smaller, faster pass")
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--frameworks", type=int, default=1_000)
    parser.add_argument("--cycles", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--only", choices=["decline", "filling", "quota", "reserved"], help="run one scenario"
    )
    args = parser.parse_args()
    agents, frameworks, cycles = args.agents, args.frameworks, args.cycles
    if args.quick:
        agents, frameworks, cycles = agents // 10, frameworks, 5
    if args.only in (None, "decline"):
        bench_decline(agents, frameworks, cycles)
    if args.only in (None, "filling"):
        bench_filling(agents, frameworks, args.repeats)
    if args.only in (None, "quota"):
        bench_quota(agents, frameworks, cycles)
    if args.only in (None, "reserved"):
        bench_reserved(agents, frameworks, cycles)


if __name__ == "__main__":
    main()
