"""What reading the cluster costs the master's loop at scale: a whole ``ClusterSnapshot``
(GetState, the dashboard's JSON API) and the ``PoolSummary`` that every Prometheus scrape and
the dashboard's share history (every 10 s) take instead. Prints figures only.

Run: ``python tests/bench/bench_views.py [--agents 10000 50000]``. One process, no sockets: a
real ``MasterRuntime`` with the given number of registered agents (``cpus:8;mem:16384``) and 20
demand-aware frameworks holding offers; each figure is the median of ``--repeats`` calls, each
call made on the runtime's loop as the daemon makes it (the loop does nothing else meanwhile).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

from fairshare.resources import ResourceVector

from master.core import CoreConfig
from master.model import AgentSpec, Demand, FrameworkInfo
from master.runtime import MasterRuntime, RuntimeConfig
from master.runtime.authority import RuntimeLimits

AGENT = ResourceVector.parse("cpus:8;mem:16384")
TASK = ResourceVector.parse("cpus:1;mem:1024")
UNLIMITED = RuntimeLimits(
    registration_rate=1e9, registration_burst=1e9, max_agents_per_principal=10**7
)


def median_ms(call: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


async def measure(agents: int, frameworks: int, repeats: int) -> dict[str, float]:
    config = RuntimeConfig(
        core=CoreConfig(),
        allocation_interval=3600.0,
        heartbeat_interval=3600.0,
        allocation_batch=0.0,
        limits=UNLIMITED,
    )
    runtime = MasterRuntime(config)
    await runtime.start()
    try:
        for index in range(frameworks):
            info = FrameworkInfo(name=f"f{index}")
            runtime.frameworks.subscribe(info, Demand(task_resources=TASK, max_tasks=5), False)
        for _ in range(agents):
            runtime.agents.register(AgentSpec("host", 0, AGENT))
        for _ in range(3):
            await asyncio.sleep(0)  # the allocation run the registrations asked for
        operator = runtime.operator
        return {
            "offers": len(runtime.state.core.offers),
            "snapshot": median_ms(operator.snapshot, repeats),
            "pool_summary": median_ms(operator.pool_summary, repeats),
        }
    finally:
        await runtime.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--frameworks", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("reading the cluster on the master's loop (median ms per call)")
    print(f"{'agents':>8}  {'offers held':>11}  {'snapshot':>10}  {'pool summary':>12}")
    for agents in args.agents:
        figures = asyncio.run(measure(agents, args.frameworks, args.repeats))
        print(
            f"{agents:>8,}  {figures['offers']:>11,.0f}  {figures['snapshot']:>10.1f}"
            f"  {figures['pool_summary']:>12.1f}"
        )


if __name__ == "__main__":
    main()
