"""Cost of the master's durable registry writes (``master.registry``). Prints figures only.

Run: ``python tests/bench/bench_registry.py [--writes N]``. Each write is one committed SQLite
transaction (WAL) made before the master answers the call that caused it (Register, a new
Subscribe, Teardown, SetWeight, ...), so its latency adds to those calls; task launches and
status updates never write the registry. Prints p50/p99/max per synchronous mode (``full``:
fsync per commit, the default; ``normal``: survives process crashes, not power loss) and the
time to recover a registry of that many agents and frameworks at a master start.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from fairshare.resources import ResourceVector

from master.model import AgentSpec, FrameworkSpec
from master.registry import AgentEntry, SqliteRegistry

SPEC = AgentSpec("host", 5051, ResourceVector.parse("cpus:16;mem:65536"), (("rack", "r1"),))


def measure(sync: str, writes: int) -> None:
    with tempfile.TemporaryDirectory(prefix="fairshare-registry-") as directory:
        registry = SqliteRegistry.open(Path(directory), sync)
        latencies = []
        for n in range(writes):
            started = time.perf_counter()
            if n % 2:
                registry.admit_agent(AgentEntry(f"ag-{n}", SPEC, time.time()))
            else:
                registry.put_framework(FrameworkSpec(f"fw-{n}", f"framework-{n}"), time.time())
            latencies.append(time.perf_counter() - started)
        registry.close()
        started = time.perf_counter()
        reopened = SqliteRegistry.open(Path(directory), sync)
        recovery = time.perf_counter() - started
        assert len(reopened.agents) + len(reopened.frameworks) == writes
        reopened.close()
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99)]
    print(
        f"synchronous={sync:6s} {writes} writes: p50 {statistics.median(latencies) * 1e3:.3f} ms"
        f"  p99 {p99 * 1e3:.3f} ms  max {latencies[-1] * 1e3:.1f} ms;"
        f" reopening {writes} rows: {recovery * 1e3:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--writes", type=int, default=5000)
    args = parser.parse_args()
    for sync in ("FULL", "NORMAL"):
        measure(sync, args.writes)


if __name__ == "__main__":
    main()
