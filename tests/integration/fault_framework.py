"""A framework process for the fault tests: keeps ``--tasks`` tasks live and logs everything.

``python tests/integration/fault_framework.py --master ADDR --name A --task cpus:1;mem:128
--tasks 4 --log A.jsonl`` subscribes (with ``--failover-timeout``, partition-aware), declares its
demand, and launches tasks from offers until ``--tasks`` are live. Task ids are ``<name>-<n>``,
never reused: a task that ends (LOST, FAILED, ...) is replaced by a new id. One JSON object per
line goes to ``--log`` (flushed at once, so a test can read it while the process runs):
``subscribed``, ``launch`` (task id, agent id), ``update`` (task id, state, reason, uuid, source)
and ``disconnected``. With ``--resume`` it resubscribes with the framework id and continues the
numbering of an existing log (a framework restarted after a crash), passing the updates the log
holds as ``handled`` so the copies the master re-sends are acknowledged, not journaled twice.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from fairshare.resources import ResourceVector

from framework_sdk import Framework
from framework_sdk.events import Disconnected, ErrorEvent, OffersReceived, StatusUpdate, Subscribed
from framework_sdk.types import Capability, Demand, FrameworkInfo, TaskSpec


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--master", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--task", required=True, help="task shape, e.g. cpus:1;mem:128")
    parser.add_argument("--tasks", type=int, required=True, help="live tasks to keep")
    parser.add_argument("--duration", type=float, default=None, help="task duration (s)")
    parser.add_argument("--failover-timeout", type=float, default=120.0)
    parser.add_argument("--log", required=True, type=Path)
    parser.add_argument("--resume", action="store_true", help="resubscribe from the log")
    return parser.parse_args(argv)


class Journal:
    """The JSON-lines log, and what it says about the tasks."""

    def __init__(self, path: Path, resume: bool) -> None:
        self.framework_id = ""
        self.next_task = 0
        self.live: set[str] = set()
        self.handled: list[tuple[str, bytes]] = []  # updates journaled: (task id, uuid)
        if resume and path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                self._replay(json.loads(line))
        self._file: TextIO = path.open("a", encoding="utf-8")

    def _replay(self, record: dict[str, Any]) -> None:
        kind = record["kind"]
        if kind == "subscribed":
            self.framework_id = record["framework_id"]
        elif kind == "launch":
            self.next_task += 1
            self.live.add(record["task_id"])
        elif kind == "update":
            if record["uuid"]:
                self.handled.append((record["task_id"], bytes.fromhex(record["uuid"])))
            if record["terminal"]:
                self.live.discard(record["task_id"])
        elif kind == "launch_failed":
            self.live.difference_update(record["tasks"])

    def write(self, kind: str, **fields: Any) -> None:
        record = {"kind": kind, "time": time.time(), **fields}
        self._replay(record)
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()


async def run(args: argparse.Namespace) -> int:
    journal = Journal(args.log, args.resume)
    shape = ResourceVector.parse(args.task)
    info = FrameworkInfo(
        name=args.name,
        failover_timeout=args.failover_timeout,
        framework_id=journal.framework_id,
        capabilities=frozenset({Capability.PARTITION_AWARE}),
    )
    demand = Demand(shape, args.tasks)
    # Updates journaled before a crash are not handed out again when the master re-sends them
    # (their acknowledgement may have been lost with the process): the journal is the record.
    handled = journal.handled
    async with Framework.connect(args.master, info, demand=demand, handled=handled) as framework:
        async for event in framework.events():
            if isinstance(event, Subscribed):
                journal.write(
                    "subscribed", framework_id=event.framework_id, resubscribed=event.resubscribed
                )
            elif isinstance(event, Disconnected):
                journal.write("disconnected", reason=event.reason)
            elif isinstance(event, ErrorEvent):
                journal.write("error", message=event.message)
                return 1
            elif isinstance(event, StatusUpdate):
                journal.write(
                    "update",
                    task_id=event.task_id,
                    agent_id=event.agent_id,
                    state=event.state.name,
                    reason=event.reason.name,
                    source=event.source.name,
                    uuid=event.uuid.hex(),
                    terminal=event.state.is_terminal,
                )
            elif isinstance(event, OffersReceived):
                for offer in event.offers:
                    await launch_on(framework, journal, offer, shape, args)
    return 0


async def launch_on(
    framework: Framework, journal: Journal, offer: Any, shape: ResourceVector, args: Any
) -> None:
    """Launch as many tasks as the offer holds and are missing; decline the rest."""
    tasks: list[TaskSpec] = []
    room = offer.resources
    while len(journal.live) + len(tasks) < args.tasks and shape.fits_in(room):
        task_id = f"{args.name}-{journal.next_task + len(tasks)}"
        tasks.append(TaskSpec(task_id, shape, duration=args.duration))
        room = room - shape
    for task in tasks:
        journal.write("launch", task_id=task.task_id, agent_id=offer.agent_id)
    try:
        await framework.launch(offer, tasks, refuse_seconds=0.5)
    except Exception as error:  # the master restarted or the offer is gone: updates will tell
        journal.write("launch_failed", error=repr(error), tasks=[t.task_id for t in tasks])


def main() -> int:
    return asyncio.run(run(_args(sys.argv[1:])))


if __name__ == "__main__":
    sys.exit(main())
