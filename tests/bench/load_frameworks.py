"""Simulated frameworks in one process, speaking SchedulerService with raw stubs (scheduler.proto).

Started by ``bench_live.py``:
``python tests/bench/load_frameworks.py --master HOST:PORT --frameworks N --mode MODE``.

Each framework subscribes (no failover timeout, so it is removed when this process ends) on its
own channel and reads its event stream. What it does with offers depends on ``--mode``:

- ``decline`` (no demand: coarse whole-agent offers): declines every offer as soon as its
  OffersEvent arrives, one Decline call per event, ``refuse_seconds=0`` (the Mesos
  DeclineOffers benchmark, over the wire);
- ``paced`` (no demand): holds each OffersEvent for a while, then declines its offers in one
  call (``refuse_seconds=0``); the driver sets the hold time (``hold`` command) so that the
  frameworks together receive the offer rate it wants. While recording it stamps every offer's
  arrival and every decline's issue and return with ``time.monotonic()``, so the driver can
  measure the offer latency (see ``bench_live``);
- ``watch`` (no demand, failover timeout 600 s): holds every offer; whenever its stream ends
  it resubscribes with its framework id every 50 ms until the master answers, and stamps each
  subscription and its first offer (``bench_restart``);
- ``lifecycle``: subscribes with a declared Demand (task shape ``--task``, ``max_tasks`` =
  ``--live-tasks``), so the master offers only what it wants (demand-aware offers, sized by
  ``fair_tasks``); accepts every offer, launching ``fair_tasks`` tasks (as many as fit, at
  most ``--tasks-per-offer``, for coarse offers) that run ``--task-seconds`` and finish
  (``refuse_seconds=0`` for the unused rest), and acknowledges every status update that carries
  a uuid as the SDK does: acknowledgements of the same loop step share one bulk Acknowledge
  call, and while ``--ack-calls`` calls are in flight (default: the SDK's
  ``framework_sdk.acknowledgements.MAX_CALLS``) the next ones wait for one to return.
  ``--live-tasks`` bounds the tasks in flight, so the load is a closed loop: the master runs at
  its capacity instead of drowning in work it cannot finish.

Counters (cumulative, read with ``stats``): ``offers``, ``offer_events``, ``declined``,
``accepted``, ``tasks_launched``, ``running_acked`` (Acknowledge of a RUNNING update returned
OK), ``acks``, ``ack_calls``, ``call_errors``, ``rescinds``, ``errors`` (ErrorEvents),
``stream_ended``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import grpc
from fairshare.resources import ResourceVector
from fairshare.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc
from google.protobuf.duration_pb2 import Duration
from load_common import channel, emit, resources_pb, run_process, serve_control

from framework_sdk.acknowledgements import MAX_CALLS

S = scheduler_pb2
RUNNING = common_pb2.TASK_STATE_RUNNING
REFUSE_NONE = common_pb2.Filters(refuse_seconds=0.0)
CALL_TIMEOUT = 30.0


@dataclass(slots=True)
class SimFramework:
    """One simulated framework."""

    index: int
    stub: scheduler_pb2_grpc.SchedulerServiceAsyncStub
    framework_id: str = ""
    next_task: int = 0
    acks: list[common_pb2.TaskStatus] = field(default_factory=list)
    flush_due: bool = False
    acking: int = 0  # Acknowledge calls in flight


@dataclass(slots=True)
class Recording:
    """Stamps taken while the driver records offer latency (``time.monotonic()``)."""

    active: bool = False
    releases_open: bool = False
    arrivals: list[tuple[str, float]] = field(default_factory=list)
    releases: list[tuple[str, float, float]] = field(default_factory=list)


def agent_key(agent_id: str) -> str:
    """A short, still unique key for an agent id (``ag-`` + 32 hex digits)."""
    return agent_id[-16:]


class Frameworks:
    """The frameworks of this process and the mode's rules."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.channels = [channel(args.master, 1000 + i) for i in range(args.frameworks)]
        self.frameworks = [
            SimFramework(i, scheduler_pb2_grpc.SchedulerServiceStub(c))
            for i, c in enumerate(self.channels)
        ]
        self.counters: Counter[str] = Counter()
        self.background: set[asyncio.Task[Any]] = set()
        self.loop = asyncio.get_running_loop()
        self.recording = Recording()
        self.sessions: list[list[float | None]] = []  # [subscribed at, first offer at]
        self.hold: float = args.hold  # paced: seconds an OffersEvent is held before its Decline
        self.shape = ResourceVector.parse(args.task)
        self.shape_pb = resources_pb(args.task)
        self.command = common_pb2.CommandInfo()
        if args.task_seconds >= 0:
            self.command.duration.CopyFrom(duration(args.task_seconds))

    def spawn(self, coroutine: Any) -> None:
        task = self.loop.create_task(coroutine)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def subscribe_all(self) -> None:
        ready = [self.loop.create_future() for _ in self.frameworks]
        for framework, future in zip(self.frameworks, ready, strict=True):
            self.spawn(self.run(framework, future))
        await asyncio.wait_for(asyncio.gather(*ready), CALL_TIMEOUT)

    async def run(self, framework: SimFramework, subscribed: asyncio.Future[None]) -> None:
        """Subscribe and read the stream; in ``watch`` mode resubscribe (with the framework id)
        every 50 ms until the master is back, whenever the stream ends."""
        while True:
            await self.session(framework, subscribed)
            if self.args.mode != "watch":
                return
            await asyncio.sleep(0.05)

    async def session(self, framework: SimFramework, subscribed: asyncio.Future[None]) -> None:
        info = common_pb2.FrameworkInfo(
            name=f"bench-{self.args.mode}-{self.args.name}-{framework.index}",
            user="bench",
            framework_id=framework.framework_id,
        )
        if self.args.mode == "watch":
            info.failover_timeout.CopyFrom(duration(600.0))
        request = S.SubscribeRequest(framework_info=info)
        if self.args.mode == "lifecycle" and self.args.live_tasks > 0:
            request.demand.task_resources.CopyFrom(self.shape_pb)
            request.demand.max_tasks = self.args.live_tasks
        call = framework.stub.Subscribe(request)
        try:
            async for event in call:
                kind = event.WhichOneof("event")
                if kind == "offers":
                    self.on_offers(framework, event.offers.offers)
                elif kind == "update":
                    self.on_update(framework, event.update.status)
                elif kind == "subscribed":
                    framework.framework_id = event.subscribed.framework_id
                    self.sessions.append([time.monotonic(), None])
                    if not subscribed.done():
                        subscribed.set_result(None)
                elif kind == "rescind":
                    self.counters["rescinds"] += 1
                elif kind == "error":
                    self.counters["errors"] += 1
        except grpc.aio.AioRpcError as error:
            self.counters[f"stream_ended:{error.code().name}"] += 1
            if not subscribed.done() and self.args.mode != "watch":
                subscribed.set_exception(error)
        except asyncio.CancelledError:
            call.cancel()
            raise
        self.counters["stream_ended"] += 1

    # -- offers -----------------------------------------------------------------------------------

    def on_offers(self, framework: SimFramework, offers: Any) -> None:
        now = time.monotonic()
        self.counters["offers"] += len(offers)
        self.counters["offer_events"] += 1
        if self.sessions and self.sessions[-1][1] is None:
            self.sessions[-1][1] = now  # the first offer of this subscription
        mode = self.args.mode
        if mode == "watch":
            return  # held: nothing is done with them
        if mode == "decline":
            ids = [offer.offer_id for offer in offers]
            self.spawn(self.decline(framework, ids))
        elif mode == "paced":
            keys = [agent_key(offer.agent_id) for offer in offers]
            if self.recording.active:
                self.recording.arrivals.extend((key, now) for key in keys)
            ids = [offer.offer_id for offer in offers]
            self.loop.call_later(self.hold, self.spawn, self.paced_decline(framework, ids, keys))
        else:
            for offer in offers:
                self.spawn(self.accept(framework, offer))

    async def decline(self, framework: SimFramework, offer_ids: list[str]) -> bool:
        request = S.DeclineRequest(
            framework_id=framework.framework_id, offer_ids=offer_ids, filters=REFUSE_NONE
        )
        try:
            await framework.stub.Decline(request, timeout=CALL_TIMEOUT)
        except grpc.aio.AioRpcError:
            self.counters["call_errors"] += 1
            return False
        self.counters["declined"] += len(offer_ids)
        return True

    async def set_hold(self, command: dict[str, Any]) -> dict[str, Any]:
        """``paced``: hold each OffersEvent this long before declining it (set by the driver)."""
        self.hold = max(0.0, float(command["seconds"]))
        return {"hold": self.hold}

    async def paced_decline(self, framework: SimFramework, ids: list[str], keys: list[str]) -> None:
        record = self.recording.releases_open
        issued = time.monotonic()
        if await self.decline(framework, ids) and record:
            returned = time.monotonic()
            self.recording.releases.extend((key, issued, returned) for key in keys)

    async def accept(self, framework: SimFramework, offer: common_pb2.Offer) -> None:
        offered = ResourceVector.from_millis({r.name: r.millis for r in offer.resources.items})
        wanted = offer.fair_tasks or self.args.tasks_per_offer
        count = min(wanted, self.shape.times_fits_in(offered))
        if count <= 0:
            await self.decline(framework, [offer.offer_id])
            return
        tasks = []
        for _ in range(count):
            framework.next_task += 1
            tasks.append(
                common_pb2.TaskInfo(
                    task_id=f"t{framework.index}-{framework.next_task}",
                    agent_id=offer.agent_id,
                    resources=self.shape_pb,
                    command=self.command,
                )
            )
        request = S.AcceptRequest(
            framework_id=framework.framework_id,
            offer_ids=[offer.offer_id],
            operations=[S.Operation(launch=S.Operation.Launch(task_infos=tasks))],
            filters=REFUSE_NONE,
        )
        try:
            await framework.stub.Accept(request, timeout=CALL_TIMEOUT)
        except grpc.aio.AioRpcError:
            self.counters["call_errors"] += 1
            return
        self.counters["accepted"] += 1
        self.counters["tasks_launched"] += count

    # -- status updates ---------------------------------------------------------------------------

    def on_update(self, framework: SimFramework, status: common_pb2.TaskStatus) -> None:
        self.counters[f"update:{common_pb2.TaskState.Name(status.state)}"] += 1
        if status.uuid:
            framework.acks.append(status)
            if not framework.flush_due:
                framework.flush_due = True
                self.loop.call_soon(self.flush, framework)

    def flush(self, framework: SimFramework) -> None:
        framework.flush_due = False
        if framework.acking >= self.args.ack_calls:
            return  # sent when a call in flight returns
        batch, framework.acks = framework.acks, []
        if batch:
            framework.acking += 1
            self.spawn(self.acknowledge(framework, batch))

    async def acknowledge(
        self, framework: SimFramework, batch: list[common_pb2.TaskStatus]
    ) -> None:
        request = S.AcknowledgeRequest(
            framework_id=framework.framework_id,
            acknowledgements=[
                S.AcknowledgeRequest.Acknowledgement(
                    agent_id=status.agent_id, task_id=status.task_id, uuid=status.uuid
                )
                for status in batch
            ],
        )
        try:
            await framework.stub.Acknowledge(request, timeout=CALL_TIMEOUT)
        except grpc.aio.AioRpcError:
            self.counters["call_errors"] += 1
            return
        finally:
            framework.acking -= 1
            if framework.acks and not framework.flush_due:
                self.flush(framework)
        self.counters["ack_calls"] += 1
        self.counters["acks"] += len(batch)
        self.counters["running_acked"] += sum(1 for status in batch if status.state == RUNNING)

    # -- control ----------------------------------------------------------------------------------

    async def stats(self, _: dict[str, Any]) -> dict[str, Any]:
        return {
            "now": time.monotonic(),
            "counters": dict(self.counters),
            "hold": self.hold,
            "sessions": self.sessions,
        }

    async def record(self, command: dict[str, Any]) -> dict[str, Any]:
        """``start``: stamp arrivals and releases; ``end``: stop stamping releases (arrivals go
        on, so the last releases find their next offer); ``collect``: stop and hand over."""
        what = command["what"]
        if what == "start":
            self.recording = Recording(active=True, releases_open=True)
        elif what == "end":
            self.recording.releases_open = False
        elif what == "collect":
            recording, self.recording = self.recording, Recording()
            return {"arrivals": recording.arrivals, "releases": recording.releases}
        return {"now": time.monotonic()}

    async def close(self) -> None:
        for task in list(self.background):
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        for chan in self.channels:
            await chan.close(None)


def duration(seconds: float) -> Duration:
    message = Duration()
    message.FromNanoseconds(round(seconds * 1e9))
    return message


async def main(args: argparse.Namespace, stop: asyncio.Event) -> None:
    frameworks = Frameworks(args)
    handlers = {"stats": frameworks.stats, "record": frameworks.record, "hold": frameworks.set_hold}
    control = asyncio.create_task(serve_control(handlers, stop))
    try:
        await frameworks.subscribe_all()
        emit({"event": "ready", "frameworks": len(frameworks.frameworks)})
        await stop.wait()
    finally:
        control.cancel()
        await frameworks.close()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--master", required=True, metavar="HOST:PORT")
    parser.add_argument("--frameworks", type=int, default=10)
    parser.add_argument(
        "--mode", choices=["decline", "paced", "lifecycle", "watch"], default="decline"
    )
    parser.add_argument("--hold", type=float, default=0.05, help="paced: initial hold (s)")
    parser.add_argument("--task", default="cpus:1;mem:1024", help="lifecycle: task shape")
    parser.add_argument(
        "--tasks-per-offer", type=int, default=8, help="lifecycle: cap for coarse offers"
    )
    parser.add_argument(
        "--live-tasks",
        type=int,
        default=20,
        help="lifecycle: declared Demand max_tasks per framework (0: no demand, coarse offers)",
    )
    parser.add_argument(
        "--task-seconds", type=float, default=0.05, help="lifecycle: task run time (<0: forever)"
    )
    parser.add_argument(
        "--ack-calls",
        type=int,
        default=MAX_CALLS,
        help="lifecycle: Acknowledge calls in flight at most per framework (default: the SDK's)",
    )
    parser.add_argument("--name", default="p0", help="distinguishes processes in names")
    parser.add_argument("--max-seconds", type=float, default=900.0, help="hard lifetime")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args(sys.argv[1:])
    sys.exit(run_process(lambda stop: main(arguments, stop), arguments.max_seconds))
