"""Example framework, asyncio style: keep K instances of a service running until stopped.

    python examples/long_running_service.py --master 127.0.0.1:5050 --instances 3

Each instance is a placeholder task without a duration (it runs until killed). An instance
that fails, is lost or killed is relaunched under a new task id (``web-0.2`` is the second
attempt of instance ``web-0``). Offers are suppressed while all instances are placed and
revived when one needs relaunching. SIGINT/SIGTERM (or ``--run-for``) tears the service down
(its tasks are killed) and exits 0; 1 if the master refused or ended the framework.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Sequence

from framework_sdk import (
    Capability,
    Demand,
    ErrorEvent,
    FairshareError,
    Framework,
    FrameworkInfo,
    Offer,
    OffersReceived,
    ResourceError,
    ResourceVector,
    StatusUpdate,
    TaskSpec,
    TaskState,
)

LOG = logging.getLogger("long_running_service")


class Service:
    """Keeps ``instances`` tasks of ``shape`` alive on ``fw``."""

    def __init__(self, fw: Framework, name: str, shape: ResourceVector, instances: int) -> None:
        self.fw = fw
        self.shape = shape
        self.attempts = {f"{name}-{i}": 0 for i in range(instances)}
        self.placed: dict[str, str] = {}  # instance -> live task id
        self.relaunches = 0
        self.suppressed = False

    def unplaced(self) -> list[str]:
        return [instance for instance in self.attempts if instance not in self.placed]

    async def on_offers(self, offers: Sequence[Offer]) -> None:
        for offer in offers:
            available, tasks = offer.resources, []
            for instance in self.unplaced():
                if not self.shape.fits_in(available):
                    break
                self.attempts[instance] += 1
                task_id = f"{instance}.{self.attempts[instance]}"
                tasks.append(TaskSpec(task_id, self.shape, name=instance))
                self.placed[instance] = task_id
                available = available - self.shape
            if tasks:
                more = bool(self.unplaced())  # still wanting more: do not filter the agent
                await self.fw.launch(offer, tasks, refuse_seconds=0.0 if more else None)
                LOG.info("launched %s on %s", ", ".join(t.task_id for t in tasks), offer.agent_id)
            else:
                await self.fw.decline(offer, refuse_seconds=30.0)
        if not self.unplaced() and not self.suppressed:
            await self.fw.suppress()
            self.suppressed = True

    async def on_update(self, update: StatusUpdate) -> None:
        instance = update.task_id.rpartition(".")[0]
        if self.placed.get(instance) != update.task_id:
            if update.state in (TaskState.STARTING, TaskState.RUNNING):
                with contextlib.suppress(FairshareError):  # a replaced attempt came back
                    await self.fw.kill(update.task_id, update.agent_id)
            return
        LOG.info("%s is %s", update.task_id, update.state.value)
        if update.state.is_terminal or update.state is TaskState.UNREACHABLE:
            del self.placed[instance]
            self.relaunches += 1
            LOG.warning("instance %s is down (%s); relaunching", instance, update.state.value)
            if self.suppressed:
                await self.fw.revive()
                self.suppressed = False

    def running(self) -> int:
        return len(self.placed)


async def serve(args: argparse.Namespace, shape: ResourceVector, stop: asyncio.Event) -> int:
    info = FrameworkInfo(name=args.name, capabilities=frozenset({Capability.PARTITION_AWARE}))
    demand = Demand(task_resources=shape, max_tasks=args.instances)
    async with Framework.connect(args.master, info, demand=demand) as fw:
        service = Service(fw, args.name, shape, args.instances)

        async def consume() -> int:
            async for event in fw.events():
                if isinstance(event, OffersReceived):
                    await service.on_offers(event.offers)
                elif isinstance(event, StatusUpdate):
                    await service.on_update(event)
                elif isinstance(event, ErrorEvent):
                    LOG.error("the master ended the framework: %s", event.message)
                    return 1
            return 0

        consumer = asyncio.ensure_future(consume())
        stopper = asyncio.ensure_future(stop.wait())
        await asyncio.wait({consumer, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if consumer.done():
            return consumer.result()
        consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer
        LOG.info("stopping: tearing down (%d relaunches during the run)", service.relaunches)
        await fw.teardown()
    return 0


async def amain(args: argparse.Namespace, shape: ResourceVector) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    if args.run_for is not None:
        loop.call_later(args.run_for, stop.set)
    try:
        return await serve(args, shape, stop)
    except FairshareError as error:
        LOG.error("%s", error)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", required=True, metavar="HOST:PORT")
    parser.add_argument("--name", default="web")
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--task", default="cpus:0.5;mem:256", help="shape of one instance")
    parser.add_argument("--run-for", type=float, default=None, help="stop after (seconds)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        shape = ResourceVector.parse(args.task)
    except ResourceError as error:
        parser.error(f"--task: {error}")
    if args.instances < 1:
        parser.error("--instances must be at least 1")
    return asyncio.run(amain(args, shape))


if __name__ == "__main__":
    sys.exit(main())
