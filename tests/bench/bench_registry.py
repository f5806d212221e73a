"""Cost of the master's durable registry writes (``master.registry``). Prints figures only.

Run: ``python tests/bench/bench_registry.py [--writes N]``. Each write is one committed SQLite
transaction (WAL) made before the master answers the call that caused it (Register, a new
Subscribe, Teardown, SetWeight, ...), so its latency adds to those calls; task launches and
status updates never write the registry. Prints p50/p99/max per synchronous mode (``full``:
fsync per commit, the default; ``normal``: survives process crashes, not power loss) and the
time to recover a registry of that many agents and frameworks at a master start.

Then the same writes to the HA masters' registry in etcd (``EtcdRegistry``: one transaction
fenced by the leader key per write, made from the runtime's thread through the etcd thread) on
a one-member etcd on loopback (Debian's etcd-server; it fsyncs its WAL per commit), and the
time to read them all back as a new leader does (``--no-etcd`` skips it).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from fairshare.resources import ResourceVector

from master.model import AgentSpec, FrameworkInfo
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
                registry.put_framework(
                    FrameworkInfo(framework_id=f"fw-{n}", name=f"framework-{n}"), time.time()
                )
            latencies.append(time.perf_counter() - started)
        registry.close()
        started = time.perf_counter()
        reopened = SqliteRegistry.open(Path(directory), sync)
        recovery = time.perf_counter() - started
        assert len(reopened.agents) + len(reopened.frameworks) == writes
        reopened.close()
    report(
        f"sqlite synchronous={sync:6s}",
        latencies,
        f"reopening {writes} rows: {recovery * 1e3:.0f} ms",
    )


def report(name: str, latencies: list[float], reopen: str) -> None:
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99)]
    print(
        f"{name} {len(latencies)} writes: p50 {statistics.median(latencies) * 1e3:.3f} ms"
        f"  p99 {p99 * 1e3:.3f} ms  max {latencies[-1] * 1e3:.1f} ms; {reopen}"
    )


def measure_etcd(writes: int) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/etcd_server.py
    from etcd_server import start_cluster
    from fairshare.etcd import leader_key
    from fairshare.master_target import EtcdTarget

    from master.ha.etcd_thread import EtcdThread
    from master.registry.etcd_store import EtcdRegistry

    with tempfile.TemporaryDirectory(prefix="fairshare-registry-etcd-") as directory:
        members = start_cluster(Path(directory) / "etcd", ["127.0.0.1"])
        target = EtcdTarget.parse(f"etcd://{members[0].endpoint}/bench")
        etcd = EtcdThread(target, timeout=5.0)
        try:
            key = leader_key(target)

            async def lead() -> int:
                await etcd.client.call(lambda client: client.put(key, b"bench"))
                found = await etcd.client.call(lambda client: client.get(key))
                return int(found.create_revision)

            epoch = etcd.run(lead(), 10)
            work = Path(directory) / "work"
            work.mkdir()
            registry = EtcdRegistry(target, etcd.client, etcd.run, epoch, 5.0)
            registry.load(work)
            latencies = []
            for n in range(writes):
                started = time.perf_counter()
                if n % 2:
                    registry.admit_agent(AgentEntry(f"ag-{n}", SPEC, time.time()))
                else:
                    registry.put_framework(
                        FrameworkInfo(framework_id=f"fw-{n}", name=f"framework-{n}"), time.time()
                    )
                latencies.append(time.perf_counter() - started)
            started = time.perf_counter()
            again = EtcdRegistry(target, etcd.client, etcd.run, epoch, 5.0)
            again.load(work)
            recovery = time.perf_counter() - started
            assert len(again.agents) + len(again.frameworks) == writes
        finally:
            etcd.stop()
            for member in members:
                member.kill()
    report(
        "etcd (1 member)      ", latencies, f"reading {writes} rows back: {recovery * 1e3:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--writes", type=int, default=5000)
    parser.add_argument("--no-etcd", action="store_true")
    args = parser.parse_args()
    for sync in ("FULL", "NORMAL"):
        measure(sync, args.writes)
    if not args.no_etcd:
        measure_etcd(args.writes)


if __name__ == "__main__":
    main()
