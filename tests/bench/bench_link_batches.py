"""What one batch of the I/O workers' link costs to pickle and load: the link's ``encode`` (the
runtime's dataclasses by their field values) against pickle's default for the same batch.
Prints figures only.

Run: ``python tests/bench/bench_link_batches.py [--operations 800] [--repeats 21]``. One process,
no sockets. The batch is what the lifecycle benchmark's link carries per task: an agent's
status update, a framework's update event, a launch command and an offers event. Each figure is
the median over ``--repeats`` round trips (dumps then loads), alternating the two ways.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from fairshare.resources import ResourceVector
from fairshare.task_states import TaskReason, TaskState

from master.core.messages import LaunchTasks, TaskLaunch
from master.core.records import Offer
from master.io_workers.protocol import COMMANDS, EVENTS, UPDATES, decode, encode
from master.model import OffersEvent, StatusUpdate, TaskDetails, UpdateEvent

TASK = ResourceVector.parse("cpus:1;mem:1024")


def batch(operations: int) -> list[tuple[Any, ...]]:
    """``operations`` link operations, four per task."""
    ops: list[tuple[Any, ...]] = []
    for n in range(operations // 4):
        task_id = f"task-{n}"
        update = StatusUpdate(
            task_id, "ag-1", TaskState.RUNNING, TaskReason.UNSPECIFIED, "", 1.0 + n,
            uuid.uuid4().bytes, "AGENT",
        )  # fmt: skip
        launch = TaskLaunch(task_id, task_id, TASK, "ag-1", TaskDetails(duration=3.0))
        offer = Offer(f"offer-{n}", "fw-1", "ag-1", "host", TASK, 1, (("rack", "r1"),), 1.0)
        ops.append((UPDATES, n, [(update, TaskState.RUNNING)]))
        ops.append((EVENTS, n, [UpdateEvent(update)]))
        ops.append((COMMANDS, n, [LaunchTasks("ag-1", "fw-1", (launch,))]))
        ops.append((EVENTS, n, [OffersEvent((offer,), 5.0)]))
    return ops


def default_encode(value: Any) -> bytes:
    return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)


def round_trip(dump: Callable[[Any], bytes], ops: list[tuple[Any, ...]]) -> tuple[float, int]:
    started = time.perf_counter()
    data = dump(ops)
    decode(data)
    return time.perf_counter() - started, len(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operations", type=int, default=800)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    ops = batch(args.operations)
    times: dict[str, list[float]] = {"pickle's default": [], "the link's encode": []}
    sizes: dict[str, int] = {}
    for _ in range(args.repeats):
        for name, dump in (("pickle's default", default_encode), ("the link's encode", encode)):
            seconds, sizes[name] = round_trip(dump, ops)
            times[name].append(seconds)
    print(f"one batch of {len(ops)} operations, dumped and loaded, median of {args.repeats}:")
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, median in medians.items():
        per_op = median / len(ops) * 1e6
        print(f"  {name:18}  {per_op:6.1f} µs per operation, {sizes[name] / len(ops):5.0f} B")
    ratio = medians["pickle's default"] / medians["the link's encode"]
    print(f"  the link's encode is {ratio:.1f} times as fast")


if __name__ == "__main__":
    main()
