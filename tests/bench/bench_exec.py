"""Command-task launches per second through the whole lifecycle, beside placeholder launches
per second, in the same run (issue 14).

A real master and one real agent (separate processes on 127.0.0.1, the agent with its default
isolation, cgroups where it can, or ``--isolation``) and a framework in this process (the SDK).
Each phase runs ``--tasks`` tasks of one kind, keeping ``--in-flight`` of them live: a task
counts once its terminal update (FINISHED) reached the framework and was acknowledged
(implicitly, by the SDK). Placeholder tasks have duration 0; command tasks run ``true``.
Printed: tasks per second over the phase, the latency from the Accept to FINISHED (p50, p99),
the agent's CPU seconds per task, and the memory one idle supervisor costs (its proportional
set size, from ``/proc/PID/smaps_rollup``).

Run: ``.venv/bin/python tests/bench/bench_exec.py`` (about a minute); ``--quick`` for a smoke
pass. Figures are printed, never asserted (docs/architecture.md §11).
Every process is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from command_reaper import reap  # noqa: E402
from daemons import Daemon, start_agent, start_master, wait_for  # noqa: E402

from agent.tasks.executors.supervisor import SUPERVISOR_FILE, read_json  # noqa: E402
from framework_sdk import (  # noqa: E402
    Command,
    Demand,
    Framework,
    FrameworkInfo,
    OffersReceived,
    ResourceVector,
    StatusUpdate,
    TaskSpec,
    TaskState,
)

SHAPE = ResourceVector.parse("cpus:0.1;mem:32")
AGENT_RESOURCES = "cpus:16;mem:16384"
CLOCK_TICKS = 100


@dataclass
class Phase:
    kind: str
    tasks: int
    seconds: float
    latencies: list[float]
    agent_cpu: float
    failed: int

    @property
    def rate(self) -> float:
        return self.tasks / self.seconds

    def row(self) -> str:
        ordered = sorted(self.latencies)
        p50 = statistics.median(ordered) * 1000
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
        per_task = self.agent_cpu / self.tasks * 1000
        return (
            f"{self.kind:<12} {self.tasks:>6} {self.rate:>12.1f} {p50:>10.1f} {p99:>10.1f}"
            f" {per_task:>14.1f}"
        )


def agent_cpu_seconds(agent: Daemon) -> float:
    fields = Path(f"/proc/{agent.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def task(kind: str, task_id: str) -> TaskSpec:
    if kind == "command":
        return TaskSpec(task_id, SHAPE, command=Command(argv=["true"]))
    return TaskSpec(task_id, SHAPE, duration=0.0)


async def phase(master: Daemon, agent: Daemon, kind: str, count: int, in_flight: int) -> Phase:
    info = FrameworkInfo(name=f"bench-{kind}", failover_timeout=0.0)
    demand = Demand(SHAPE, max_tasks=in_flight)
    launched_at: dict[str, float] = {}
    latencies: list[float] = []
    failed = 0
    cpu0 = agent_cpu_seconds(agent)
    async with Framework.connect(master.address, info, demand=demand) as fw:
        started = time.monotonic()
        async for event in fw.events():
            if isinstance(event, OffersReceived):
                for offer in event.offers:
                    live = len(launched_at) - len(latencies) - failed
                    number = min(
                        count - len(launched_at),
                        in_flight - live,
                        SHAPE.times_fits_in(offer.resources),
                    )
                    if number <= 0:
                        await fw.decline(offer, refuse_seconds=0.0)
                        continue
                    tasks = [task(kind, f"{kind}-{len(launched_at) + i}") for i in range(number)]
                    now = time.monotonic()
                    for spec in tasks:
                        launched_at[spec.task_id] = now
                    await fw.launch(offer, tasks, refuse_seconds=0.0)
            elif isinstance(event, StatusUpdate) and event.state.is_terminal:
                if event.state is TaskState.FINISHED:
                    latencies.append(time.monotonic() - launched_at[event.task_id])
                else:
                    failed += 1
                    print(f"  {event.task_id}: {event.state.value} {event.message}", flush=True)
                if len(latencies) + failed == count:
                    break
        seconds = time.monotonic() - started
        await fw.teardown()
    return Phase(kind, count, seconds, latencies, agent_cpu_seconds(agent) - cpu0, failed)


async def supervisor_memory(master: Daemon, agent: Daemon) -> str:
    """The proportional set size of one idle supervisor (of a ``sleep`` command task)."""
    info = FrameworkInfo(name="bench-memory", failover_timeout=0.0)
    async with Framework.connect(master.address, info) as fw:
        async for event in fw.events():
            if isinstance(event, OffersReceived):
                spec = TaskSpec("sleeper", SHAPE, command=Command(argv=["sleep", "60"]))
                await fw.launch(event.offers[0], [spec])
            elif isinstance(event, StatusUpdate) and event.state is TaskState.RUNNING:
                break
        records = list((agent.work_dir / "runs").glob(f"*/sleeper/{SUPERVISOR_FILE}"))
        record = read_json(records[0]) if records else None
        text = "unknown"
        if record is not None:
            rollup = Path(f"/proc/{record['pid']}/smaps_rollup").read_text().splitlines()
            fields = {line.split()[0]: line.split()[1] for line in rollup if line.endswith("kB")}
            pss, rss = int(fields["Pss:"]) / 1024, int(fields["Rss:"]) / 1024
            text = f"{pss:.1f} MiB PSS, {rss:.1f} MiB RSS"
        await fw.teardown()
    return text


async def main(args: argparse.Namespace) -> int:
    count = 20 if args.quick else args.tasks
    with tempfile.TemporaryDirectory(prefix="fairshare-bench-exec-") as tmp:
        root = Path(tmp)
        master = start_master(root / "master", "--allocation-interval", "50ms")
        flags = ("--isolation", args.isolation) if args.isolation else ()
        agent = start_agent(master.address, root / "agent", *flags, resources=AGENT_RESOURCES)
        try:
            isolation = "unknown"
            for line in agent.log().splitlines():
                if "isolation.selected" in line:
                    isolation = line.split("mode=")[1].split()[0]
            print(
                f"fairshare command-task benchmark: 1 agent {AGENT_RESOURCES}, isolation"
                f" {isolation}, {args.in_flight} tasks in flight, task {SHAPE}",
                flush=True,
            )
            phases = []
            for kind in ("placeholder", "command"):
                phases.append(await phase(master, agent, kind, count, args.in_flight))
            memory = await supervisor_memory(master, agent)
            print(f"{'kind':<12} {'tasks':>6} {'launches/s':>12} {'p50 ms':>10} {'p99 ms':>10}"
                  f" {'agent cpu ms/task':>18}")  # fmt: skip
            for result in phases:
                print(result.row())
            print(f"one idle supervisor: {memory}")
            failed = sum(p.failed for p in phases)
        finally:
            agent.stop()
            master.stop()
            wait_for(lambda: not reap(root), 10, "the tasks' processes to end")
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=300, help="tasks per phase")
    parser.add_argument("--in-flight", type=int, default=16, help="live tasks at most")
    parser.add_argument("--quick", action="store_true", help="20 tasks per phase (smoke)")
    parser.add_argument(
        "--isolation", choices=("none", "rlimits", "cgroups"), help="the agent's (default: its own)"
    )
    sys.exit(asyncio.run(main(parser.parse_args())))
