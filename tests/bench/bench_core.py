"""Benchmarks of the pure allocation core (no sockets). Prints figures; asserts nothing about time.

Run: ``python tests/bench/bench_core.py`` (``--quick`` for a smaller, faster pass).

1. Mesos ``DeclineOffers`` (HierarchicalAllocator_BENCHMARK_Test): 10,000 agents
   ``cpus:16;mem:65536``, 1,000 frameworks declaring nothing (coarse whole-agent offers); every
   cycle allocates, then every offer is declined with ``refuse_seconds=0``; p50/p99 of the
   allocation run and of the whole cycle (run + declines). Mesos's C++ allocator takes 1.06 s
   per allocation run on this setup.
2. Demand-aware progressive filling: 10,000 agents x 1,000 frameworks with declared task shapes;
   decisions (tasks placed) per second of one allocation run, for best-fit at several sample
   sizes and for first-fit/random; in a cluster that holds the demand and in one that saturates.
3. Master core memory per agent (tracemalloc): with agents registered, and with every agent
   holding an outstanding offer.
4. Heterogeneous agents (DRFH's Google server mix, scaled to cpus:16;mem:65536): demand-aware
   filling from an empty cluster, and the run after the second half of the agents joins a
   cluster whose first half the frameworks filled (where the fit-aware choice is contested).
5. The rebalancer's check (``--rebalance``) on that filled cluster, every task preemptible: the
   copy of the view the master's loop makes, then ordering it and the check (a worker thread's).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable

from fairshare.resources import ResourceVector

from analysis.sim.servers import draw_servers
from master.core import CoreConfig, MasterState, SendOffers, TaskLaunch
from master.core.rebalance import RebalanceConfig, Rebalancer, raw_view_of

AGENT = ResourceVector.parse("cpus:16;mem:65536")


def _cluster(agents: int, frameworks: int, config: CoreConfig) -> MasterState:
    state = MasterState(config)
    for index in range(agents):
        state.handle_add_agent(f"agent-{index:05d}", AGENT, 0.0, hostname=f"host-{index:05d}")
    for index in range(frameworks):
        state.handle_add_framework(f"framework-{index:04d}", 0.0, name=f"fw{index}")
    return state


def _quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return p50, p99


def bench_decline_offers(agents: int, frameworks: int, cycles: int) -> None:
    """Mesos DeclineOffers: allocate everything, decline everything (refuse 0), repeat."""
    state = _cluster(agents, frameworks, CoreConfig())
    runs: list[float] = []
    whole: list[float] = []
    now = 0.0
    offers_per_cycle = 0
    for _ in range(cycles):
        now += 1.0
        start = time.perf_counter()
        messages = state.handle_allocate(now)
        allocated = time.perf_counter()
        offers_per_cycle = 0
        for message in messages:
            assert isinstance(message, SendOffers)
            ids = [offer.offer_id for offer in message.offers]
            offers_per_cycle += len(ids)
            state.handle_decline(message.framework_id, ids, now, refuse_seconds=0.0)
        done = time.perf_counter()
        runs.append(allocated - start)
        whole.append(done - start)
    run50, run99 = _quantiles(runs)
    cyc50, cyc99 = _quantiles(whole)
    print(
        f"DeclineOffers: {agents} agents x {frameworks} frameworks, {cycles} cycles,"
        f" {offers_per_cycle} offers per cycle"
    )
    print(f"  allocation run  p50 {run50 * 1000:8.1f} ms   p99 {run99 * 1000:8.1f} ms")
    print(
        f"  whole cycle     p50 {cyc50 * 1000:8.1f} ms   p99 {cyc99 * 1000:8.1f} ms"
        "   (run + declining every offer)"
    )
    print("  goal p50 <= 100 ms; Mesos C++ allocator: 1.06 s per run")


def _shapes(frameworks: int, seed: int) -> list[ResourceVector]:
    rng = random.Random(seed)
    shapes = []
    for _ in range(frameworks):
        cpus = rng.choice([0.25, 0.5, 1, 2, 4])
        mem = rng.choice([256, 512, 1024, 2048, 4096, 8192])
        shapes.append(ResourceVector({"cpus": cpus, "mem": mem}))
    return shapes


def _filling_run(
    agents: int, frameworks: int, wanted: int, placement: str, sample: int
) -> tuple[MasterState, int, float]:
    state = _cluster(agents, frameworks, CoreConfig(placement=placement, sample_size=sample))
    for index, shape in enumerate(_shapes(frameworks, seed=7)):
        state.handle_update_demand(f"framework-{index:04d}", shape, wanted, 0.0)
    gc.collect()
    start = time.perf_counter()
    messages = state.handle_allocate(1.0)
    elapsed = time.perf_counter() - start
    placed = sum(o.fair_tasks for m in messages if isinstance(m, SendOffers) for o in m.offers)
    return state, placed, elapsed


def bench_filling(
    agents: int,
    frameworks: int,
    wanted: int,
    placement: str,
    sample: int,
    label: str,
    repeats: int = 3,
) -> None:
    """Demand-aware runs from an empty cluster: tasks placed per second (median of repeats)."""
    times = []
    for _ in range(repeats):
        state, placed, elapsed = _filling_run(agents, frameworks, wanted, placement, sample)
        times.append(elapsed)
    elapsed = statistics.median(times)
    used = state.total - sum((a.free for a in state.agent_list), ResourceVector())
    cpu_util = used.millis("cpus") / state.total.millis("cpus")
    mem_util = used.millis("mem") / state.total.millis("mem")
    print(
        f"  {label:34s} {placed:8d} tasks in {elapsed * 1000:8.1f} ms ="
        f" {placed / elapsed:10,.0f} decisions/s   (cpu {cpu_util:5.1%}, mem {mem_util:5.1%})"
    )


def _bytes_for(build: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return after - before


def bench_memory(agents: int) -> None:
    """Bytes of core state per registered agent (ids and hostnames included)."""
    idle = _bytes_for(lambda: _cluster(agents, 0, CoreConfig()))

    def with_offers() -> MasterState:
        state = _cluster(agents, 10, CoreConfig())
        state.handle_allocate(1.0)
        return state

    offered = _bytes_for(with_offers)
    print(
        f"Memory: {agents} agents: {idle / agents:,.0f} B/agent registered,"
        f" {offered / agents:,.0f} B/agent with one outstanding offer each (goal <= 2 KB)"
    )


def _google_agents(agents: int) -> list[ResourceVector]:
    return [
        ResourceVector.from_millis(
            {"cpus": round(v.millis("cpus") * 16), "mem": round(v.millis("mem") * 65536)}
        )
        for v in draw_servers("google", agents, random.Random(7))
    ]


def _accept_all(state: MasterState, messages: list[object]) -> int:
    placed = 0
    for message in messages:
        assert isinstance(message, SendOffers)
        shape = state.frameworks[message.framework_id].demand
        assert shape is not None
        for offer in message.offers:
            launches = [
                TaskLaunch(f"{offer.offer_id}-{n}", "task", shape) for n in range(offer.fair_tasks)
            ]
            state.handle_accept(message.framework_id, [offer.offer_id], launches, 0.0)
            placed += offer.fair_tasks
    return placed


def _heterogeneous_run(agents: int, frameworks: int, joining: bool) -> tuple[int, float]:
    """One timed run on Google-mix agents: from empty, or after half of them joined late."""
    capacities = _google_agents(agents)
    first = capacities[: agents // 2] if joining else capacities
    state = MasterState(CoreConfig())
    for index, resources in enumerate(first):
        state.handle_add_agent(f"agent-{index:05d}", resources, 0.0)
    for index, shape in enumerate(_shapes(frameworks, seed=7)):
        framework_id = f"framework-{index:04d}"
        state.handle_add_framework(framework_id, 0.0)
        state.handle_update_demand(framework_id, shape, agents * 16 // frameworks // 2, 0.0)
    if joining:
        _accept_all(state, state.handle_allocate(0.5))
        for index, resources in enumerate(capacities[agents // 2 :], start=agents // 2):
            state.handle_add_agent(f"agent-{index:05d}", resources, 0.0)
    gc.collect()
    start = time.perf_counter()
    messages = state.handle_allocate(1.0)
    elapsed = time.perf_counter() - start
    placed = sum(o.fair_tasks for m in messages if isinstance(m, SendOffers) for o in m.offers)
    return placed, elapsed


def bench_heterogeneous(agents: int, frameworks: int, repeats: int = 3) -> None:
    """Best-fit (sample 8) on the Google mix: decisions per second, median of ``repeats``."""
    print(f"Heterogeneous agents (Google mix): {agents} agents x {frameworks} frameworks, one run")
    for joining, label in ((False, "from empty"), (True, "second half of the agents joins")):
        runs = [_heterogeneous_run(agents, frameworks, joining) for _ in range(repeats)]
        placed = runs[0][0]
        elapsed = statistics.median(t for _, t in runs)
        print(
            f"  {label:34s} {placed:8d} tasks in {elapsed * 1000:8.1f} ms ="
            f" {placed / elapsed:10,.0f} decisions/s"
        )


def bench_rebalance(agents: int, frameworks: int) -> None:
    """One rebalancer check on the Google-mix cluster filled in two halves (all preemptible)."""
    capacities = _google_agents(agents)
    state = MasterState(CoreConfig())
    for index, resources in enumerate(capacities[: agents // 2]):
        state.handle_add_agent(f"agent-{index:05d}", resources, 0.0)
    for index, shape in enumerate(_shapes(frameworks, seed=7)):
        framework_id = f"framework-{index:04d}"
        state.handle_add_framework(framework_id, 0.0)
        state.handle_update_demand(framework_id, shape, agents * 16 // frameworks // 2, 0.0)
    _accept_all(state, state.handle_allocate(0.5))
    for index, resources in enumerate(capacities[agents // 2 :], start=agents // 2):
        state.handle_add_agent(f"agent-{index:05d}", resources, 0.0)
    _accept_all(state, state.handle_allocate(1.0))
    gc.collect()
    start = time.perf_counter()
    raw = raw_view_of(state, lambda _framework, _task: True)
    copied = time.perf_counter()
    view = raw.ordered()
    ordered = time.perf_counter()
    decision = Rebalancer(RebalanceConfig(patience=1), CoreConfig()).check(view)
    checked = time.perf_counter()
    print(
        f"Rebalancer check: {agents} agents x {frameworks} frameworks, {len(view.tasks)} tasks:"
        f" view copied on the loop {(copied - start) * 1000:.0f} ms; in the worker: ordered"
        f" {(ordered - copied) * 1000:.0f} ms, checked {checked - ordered:.2f} s"
        f" (gap {float(decision.gap):.3f}, {len(decision.kills)} kills)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smaller, faster pass")
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--frameworks", type=int, default=1_000)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument(
        "--only",
        choices=["decline", "filling", "memory", "heterogeneous", "rebalance"],
        help="run one scenario",
    )
    args = parser.parse_args()
    agents, frameworks, cycles = args.agents, args.frameworks, args.cycles
    if args.quick:
        agents, frameworks, cycles = agents // 10, frameworks // 10, 5
    if args.only in (None, "decline"):
        bench_decline_offers(agents, frameworks, cycles)
    if args.only in (None, "filling"):
        bench_all_filling(agents, frameworks)
    if args.only in (None, "memory"):
        bench_memory(agents)
    if args.only in (None, "heterogeneous"):
        bench_heterogeneous(agents, frameworks)
    if args.only in (None, "rebalance"):
        bench_rebalance(agents, frameworks)


def bench_all_filling(agents: int, frameworks: int) -> None:
    """Demand-aware filling at several sample sizes and placements."""
    print(f"Demand-aware filling: {agents} agents x {frameworks} frameworks, one run")
    fits = max(1, agents * 16 // frameworks // 4)  # about half the cluster's CPUs on average
    saturate = fits * 8
    for sample in (4, 8, 16):
        bench_filling(
            agents, frameworks, fits, "best-fit", sample, f"best-fit sample {sample}, demand fits"
        )
    bench_filling(agents, frameworks, fits, "first-fit", 8, "first-fit, demand fits")
    bench_filling(agents, frameworks, fits, "random", 8, "random sample 8, demand fits")
    bench_filling(agents, frameworks, saturate, "best-fit", 8, "best-fit sample 8, saturated")


if __name__ == "__main__":
    main()
