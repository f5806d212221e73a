"""Simulated Mesos frameworks in one process, speaking the master's Mesos v1 scheduler HTTP API
(``master.web.mesos_scheduler``: JSON calls, a RecordIO event stream per framework) with aiohttp.

Started by ``bench_live.py``:
``python tests/bench/load_mesos.py --master HOST:PORT --http HOST:PORT --frameworks N --mode M``
(``--master``, the gRPC address, is not used: the frameworks talk to ``--http``, the master's
HTTP port). Each framework subscribes (``failover_timeout`` 0: removed when this process ends)
and reads its stream; as ``load_frameworks.py`` does over gRPC:

- ``decline``: declines every OFFERS event's offers as soon as it arrives, one DECLINE call per
  event, ``refuse_seconds`` 0;
- ``lifecycle``: keeps at most ``--live-tasks`` command tasks of shape ``--task`` running, as a
  Mesos framework does: launches as many tasks as fit on the first offers of an OFFERS event
  (at most ``--tasks-per-offer`` each, ``refuse_seconds`` 0 for what is left of them), declines
  the other offers in one call for a minute, SUPPRESSes once it has all its tasks and REVIVEs
  when one ends; acknowledges every update that carries a uuid (one ACKNOWLEDGE
  call each: the Mesos API has no bulk acknowledgement) and kills each task ``--task-seconds``
  after its RUNNING (the simulated agents end only placeholder tasks by themselves).

Counters (cumulative, read with ``stats``): ``offers``, ``offer_events``, ``declined``,
``accepted``, ``tasks_launched``, ``running_acked`` (the ACKNOWLEDGE of a RUNNING update was
answered 202), ``acks``, ``kills``, ``call_errors``, ``errors`` (ERROR events), ``stream_ended``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from fairshare.resources import ResourceVector
from load_common import emit, run_process, serve_control

TERMINAL = {"TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_ERROR", "TASK_LOST",
            "TASK_DROPPED", "TASK_GONE", "TASK_UNKNOWN"}  # fmt: skip
CALL_TIMEOUT = aiohttp.ClientTimeout(total=30.0)


@dataclass(slots=True)
class MesosFramework:
    """One simulated framework: its id, its stream, its live tasks."""

    index: int
    session: aiohttp.ClientSession
    framework_id: str = ""
    stream_id: str = ""
    next_task: int = 0
    live: set[str] = field(default_factory=set)
    suppressed: bool = False
    order: asyncio.Lock = field(default_factory=asyncio.Lock)  # SUPPRESS and REVIVE in order


class Frameworks:
    """The frameworks of this process and the mode's rules."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.url = f"http://{args.http}/api/v1/scheduler"
        connector = dict(limit=0, force_close=True)
        self.frameworks = [
            MesosFramework(i, aiohttp.ClientSession(connector=aiohttp.TCPConnector(**connector)))
            for i in range(args.frameworks)
        ]
        self.counters: Counter[str] = Counter()
        self.background: set[asyncio.Task[Any]] = set()
        self.loop = asyncio.get_running_loop()
        self.shape = ResourceVector.parse(args.task)
        self.resources = [
            {"name": name, "type": "SCALAR", "scalar": {"value": millis / 1000}}
            for name, millis in sorted(self.shape.millis_items())
        ]

    def spawn(self, coroutine: Any) -> None:
        task = self.loop.create_task(coroutine)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def subscribe_all(self) -> None:
        ready = [self.loop.create_future() for _ in self.frameworks]
        for framework, future in zip(self.frameworks, ready, strict=True):
            self.spawn(self.run(framework, future))
        await asyncio.wait_for(asyncio.gather(*ready), 30.0)

    async def run(self, framework: MesosFramework, subscribed: asyncio.Future[None]) -> None:
        name = f"bench-mesos-{self.args.mode}-{self.args.name}-{framework.index}"
        info = {"user": "bench", "name": name, "failover_timeout": 0}
        call = {"type": "SUBSCRIBE", "subscribe": {"framework_info": info}}
        try:
            async with framework.session.post(self.url, json=call) as response:
                if response.status != 200:
                    raise RuntimeError(f"SUBSCRIBE: {response.status} {await response.text()}")
                framework.stream_id = response.headers["Mesos-Stream-Id"]
                buffer = b""
                while chunk := await response.content.readany():
                    buffer += chunk
                    while True:
                        length, newline, rest = buffer.partition(b"\n")
                        if not newline or len(rest) < int(length):
                            break
                        buffer = rest[int(length) :]
                        self.on_event(framework, json.loads(rest[: int(length)]), subscribed)
        except (aiohttp.ClientError, RuntimeError) as error:
            self.counters["stream_errors"] += 1
            if not subscribed.done():
                subscribed.set_exception(error)
        self.counters["stream_ended"] += 1

    def on_event(
        self, framework: MesosFramework, event: dict[str, Any], subscribed: asyncio.Future[None]
    ) -> None:
        kind = event["type"]
        if kind == "SUBSCRIBED":
            framework.framework_id = event["subscribed"]["framework_id"]["value"]
            if not subscribed.done():
                subscribed.set_result(None)
        elif kind == "OFFERS":
            offers = event["offers"]["offers"]
            self.counters["offers"] += len(offers)
            self.counters["offer_events"] += 1
            if self.args.mode == "decline":
                self.spawn(self.decline(framework, [offer["id"] for offer in offers], 0.0))
            else:
                self.use(framework, offers)
        elif kind == "UPDATE":
            self.on_update(framework, event["update"]["status"])
        elif kind == "ERROR":
            self.counters["errors"] += 1

    async def call(self, framework: MesosFramework, kind: str, **body: Any) -> bool:
        document = {"type": kind, "framework_id": {"value": framework.framework_id}, **body}
        headers = {"Mesos-Stream-Id": framework.stream_id}
        try:
            async with framework.session.post(
                self.url, json=document, headers=headers, timeout=CALL_TIMEOUT
            ) as response:
                if response.status == 202:
                    return True
                self.counters[f"call_errors:{kind}:{response.status}"] += 1
        except (TimeoutError, aiohttp.ClientError) as error:
            self.counters[f"call_errors:{kind}:{type(error).__name__}"] += 1
        self.counters["call_errors"] += 1
        return False

    async def in_order(self, framework: MesosFramework, kind: str) -> None:
        """SUPPRESS or REVIVE, after the ones asked for before (each call has its own
        connection, so calls in flight together may arrive in any order)."""
        async with framework.order:
            await self.call(framework, kind)

    async def decline(self, framework: MesosFramework, offer_ids: list[Any], refuse: float) -> None:
        decline = {"offer_ids": offer_ids, "filters": {"refuse_seconds": refuse}}
        if await self.call(framework, "DECLINE", decline=decline):
            self.counters["declined"] += len(offer_ids)

    def use(self, framework: MesosFramework, offers: list[dict[str, Any]]) -> None:
        """Launch what the framework wants on the first offers, decline the others for a
        minute in one call, and SUPPRESS once it wants nothing more (a Mesos framework's way:
        it REVIVEs when a task ends)."""
        unused = []
        for offer in offers:
            offered = ResourceVector(
                {r["name"]: r["scalar"]["value"] for r in offer["resources"] if "scalar" in r}
            )
            room = self.args.live_tasks - len(framework.live)
            count = min(room, self.args.tasks_per_offer, self.shape.times_fits_in(offered))
            if count > 0:
                self.spawn(self.accept(framework, offer, self.launch(framework, offer, count)))
            else:
                unused.append(offer["id"])
        if unused:
            self.spawn(self.decline(framework, unused, 60.0))
        if len(framework.live) >= self.args.live_tasks and not framework.suppressed:
            framework.suppressed = True
            self.spawn(self.in_order(framework, "SUPPRESS"))

    def launch(self, framework: MesosFramework, offer: dict[str, Any], count: int) -> list[Any]:
        tasks = []
        for _ in range(count):
            framework.next_task += 1
            task_id = f"m{framework.index}-{framework.next_task}"
            framework.live.add(task_id)
            tasks.append(
                {
                    "name": task_id,
                    "task_id": {"value": task_id},
                    "agent_id": offer["agent_id"],
                    "resources": self.resources,
                    "command": {"value": "true"},
                }
            )
        return tasks

    async def accept(
        self, framework: MesosFramework, offer: dict[str, Any], tasks: list[Any]
    ) -> None:
        accept = {
            "offer_ids": [offer["id"]],
            "operations": [{"type": "LAUNCH", "launch": {"task_infos": tasks}}],
            "filters": {"refuse_seconds": 0},
        }
        if await self.call(framework, "ACCEPT", accept=accept):
            self.counters["accepted"] += 1
            self.counters["tasks_launched"] += len(tasks)

    def on_update(self, framework: MesosFramework, status: dict[str, Any]) -> None:
        state, task_id = status["state"], status["task_id"]["value"]
        self.counters[f"update:{state}"] += 1
        if state in TERMINAL:
            framework.live.discard(task_id)
            if framework.suppressed:
                framework.suppressed = False
                self.spawn(self.in_order(framework, "REVIVE"))
        if "uuid" in status:
            self.spawn(self.acknowledge(framework, status))

    async def acknowledge(self, framework: MesosFramework, status: dict[str, Any]) -> None:
        ack = {key: status[key] for key in ("agent_id", "task_id", "uuid")}
        if not await self.call(framework, "ACKNOWLEDGE", acknowledge=ack):
            return
        self.counters["acks"] += 1
        if status["state"] == "TASK_RUNNING":
            self.counters["running_acked"] += 1
            task_id = status["task_id"]
            self.loop.call_later(self.args.task_seconds, self.spawn, self.kill(framework, task_id))

    async def kill(self, framework: MesosFramework, task_id: dict[str, str]) -> None:
        if await self.call(framework, "KILL", kill={"task_id": task_id}):
            self.counters["kills"] += 1

    async def stats(self, _: dict[str, Any]) -> dict[str, Any]:
        return {"now": time.monotonic(), "counters": dict(self.counters)}

    async def close(self) -> None:
        for task in list(self.background):
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        for framework in self.frameworks:
            await framework.session.close()


async def main(args: argparse.Namespace, stop: asyncio.Event) -> None:
    frameworks = Frameworks(args)
    control = asyncio.create_task(serve_control({"stats": frameworks.stats}, stop))
    try:
        await frameworks.subscribe_all()
        emit({"event": "ready", "frameworks": len(frameworks.frameworks)})
        await stop.wait()
    finally:
        control.cancel()
        await frameworks.close()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--master", required=True, metavar="HOST:PORT", help="(gRPC; unused)")
    parser.add_argument("--http", required=True, metavar="HOST:PORT", help="the HTTP port")
    parser.add_argument("--frameworks", type=int, default=10)
    parser.add_argument("--mode", choices=["decline", "lifecycle"], default="decline")
    parser.add_argument("--task", default="cpus:1;mem:1024", help="lifecycle: task shape")
    parser.add_argument("--tasks-per-offer", type=int, default=8)
    parser.add_argument("--live-tasks", type=int, default=20, help="lifecycle: tasks in flight")
    parser.add_argument("--task-seconds", type=float, default=0.05, help="lifecycle: run time")
    parser.add_argument("--name", default="p0", help="distinguishes processes in names")
    parser.add_argument("--max-seconds", type=float, default=900.0, help="hard lifetime")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args(sys.argv[1:])
    sys.exit(run_process(lambda stop: main(arguments, stop), arguments.max_seconds))
