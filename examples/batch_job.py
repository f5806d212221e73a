"""Example framework, callback style: run N placeholder tasks to completion, then exit.

    python examples/batch_job.py --master 127.0.0.1:5050 --tasks 10 --task 'cpus:0.5;mem:256'

It declares its task shape and how many tasks it still needs (``update_demand``), launches
tasks on offers (leftovers are declined by the master), retries tasks that fail, suppresses
offers once everything is launched, and tears itself down when all tasks FINISHED.
Exit code: 0 when every task finished, 1 if too many failed, the master refused the framework
or ``--timeout`` passed, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections import deque
from collections.abc import Sequence

from framework_sdk import (
    Demand,
    FrameworkInfo,
    MasterInfo,
    Offer,
    ResourceError,
    ResourceVector,
    Scheduler,
    SchedulerDriver,
    StatusUpdate,
    TaskReason,
    TaskSpec,
    TaskState,
)

LOG = logging.getLogger("batch_job")


class BatchJob(Scheduler):
    """Runs ``total`` tasks of one shape; ``succeeded`` once all of them FINISHED."""

    def __init__(self, total: int, shape: ResourceVector, duration: float, max_failures: int):
        self.shape = shape
        self.duration = duration
        self.total = total
        self.max_failures = max_failures
        self.pending: deque[str] = deque(f"task-{i}" for i in range(total))
        self.finished: set[str] = set()
        self.failures = 0
        self.succeeded = False
        self.failed_reason = ""

    def registered(self, driver: SchedulerDriver, framework_id: str, master: MasterInfo) -> None:
        LOG.info("registered as %s with master %s", framework_id, master.address)

    def reregistered(self, driver: SchedulerDriver, master: MasterInfo) -> None:
        LOG.info("reregistered with master %s", master.address)

    def disconnected(self, driver: SchedulerDriver) -> None:
        LOG.warning("disconnected from the master; the driver reconnects")

    def resource_offers(self, driver: SchedulerDriver, offers: Sequence[Offer]) -> None:
        for offer in offers:
            available = offer.resources
            tasks = []
            while self.pending and self.shape.fits_in(available):
                task_id = self.pending.popleft()
                tasks.append(TaskSpec(task_id, self.shape, duration=self.duration))
                available = available - self.shape
            if tasks:
                # Leftovers are declined; filter the agent only if nothing is left to launch.
                driver.launch_tasks(offer, tasks, refuse_seconds=0.0 if self.pending else None)
                LOG.info("launched %s on %s", ", ".join(t.task_id for t in tasks), offer.agent_id)
            else:
                driver.decline_offer(offer, refuse_seconds=30.0)
        if not self.pending:
            driver.suppress_offers()

    def status_update(self, driver: SchedulerDriver, update: StatusUpdate) -> None:
        LOG.info("task %s is %s", update.task_id, update.state.value)
        if not update.state.is_terminal or update.task_id in self.finished:
            return
        if update.state is TaskState.FINISHED:
            self.finished.add(update.task_id)
            remaining = self.total - len(self.finished)
            if remaining == 0:
                self.succeeded = True
                LOG.info("all %d tasks finished", self.total)
                driver.stop()
                return
            driver.update_demand(self.shape, remaining)
            return
        if update.reason is not TaskReason.INVALID_OFFERS:
            self.failures += 1
        if self.failures > self.max_failures:
            self.failed_reason = f"{self.failures} task failures (last: {update.task_id})"
            driver.stop()
            return
        self.pending.append(update.task_id)  # a terminal task's id may be reused
        driver.revive_offers()

    def error(self, driver: SchedulerDriver, message: str) -> None:
        self.failed_reason = f"the master ended the framework: {message}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", required=True, metavar="HOST:PORT")
    parser.add_argument("--name", default="batch-job")
    parser.add_argument("--tasks", type=int, default=5, help="how many tasks to run")
    parser.add_argument("--task", default="cpus:0.5;mem:128", help="shape of one task")
    parser.add_argument("--duration", type=float, default=1.0, help="seconds each task runs")
    parser.add_argument("--max-failures", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=None, help="give up after (seconds)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        shape = ResourceVector.parse(args.task)
    except ResourceError as error:
        parser.error(f"--task: {error}")
    if args.tasks < 1:
        parser.error("--tasks must be at least 1")
    job = BatchJob(args.tasks, shape, args.duration, args.max_failures)
    driver = SchedulerDriver(
        job,
        FrameworkInfo(name=args.name),
        args.master,
        demand=Demand(task_resources=shape, max_tasks=args.tasks),
    )
    driver.start()
    try:
        driver.join(args.timeout)
    except KeyboardInterrupt:
        job.failed_reason = "interrupted"
    if not job.succeeded and not job.failed_reason:
        job.failed_reason = f"timed out after {args.timeout} s"
    driver.stop()
    driver.join(10.0)
    if not job.succeeded:
        print(f"batch_job: failed: {job.failed_reason}", file=sys.stderr)
        return 1
    print(f"batch_job: {job.total} tasks finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
