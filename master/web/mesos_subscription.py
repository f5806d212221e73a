"""One framework's subscription on the Mesos v1 scheduler API (``master.web.mesos_scheduler``):
its event stream, the offers sent on it, and the calls whose Mesos semantics need them.

Mesos's ACCEPT, kept on top of the runtime's ``FrameworkCalls.accept``: the tasks are validated
one by one (a task fairshare cannot run, or that does not fit what is left of the offers, gets
TASK_ERROR and the others launch); offers no longer outstanding, or on several agents, make
every task TASK_LOST (TASK_DROPPED for PARTITION_AWARE frameworks) with REASON_INVALID_OFFERS,
and the valid offers are declined with no filter.

Invariants: ``offers`` holds the offers sent on this stream and still outstanding (accepted,
declined or rescinded ones are removed); an update the API decides (``tell``) is queued after
the stream's events; a call refused whole (PERMISSION_DENIED, FAILED_PRECONDITION, UNAVAILABLE)
raises the runtime's ``CoreError`` with nothing changed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from fairshare.task_states import TaskReason, TaskState

from master.core import CoreError, NotFound, TaskLaunch
from master.core.records import Offer
from master.model import FrameworkEvent, StatusUpdate, UpdateEvent
from master.runtime.frameworks import FrameworkCalls
from master.runtime.sessions import Channel
from master.web.mesos_call_types import Accept
from master.web.mesos_tasks import TaskProblem, task_launch

__all__ = ["Subscription", "fitting"]


@dataclass(eq=False)
class Subscription:
    """One framework's open subscription on the API: its stream and the offers sent on it."""

    framework_id: str
    stream_id: str
    role: str
    multi_role: bool
    partition_aware: bool
    frameworks: FrameworkCalls
    channel: Channel[FrameworkEvent]
    offers: dict[str, Offer] = field(default_factory=dict)  # outstanding, sent on this stream

    def tell(self, status: StatusUpdate) -> None:
        """An update the API decided (TASK_ERROR, TASK_LOST), after the stream's events."""
        self.channel.put(UpdateEvent(status))

    def accept(self, body: Accept, who: str | None) -> None:
        """Launch what can be launched; tell the framework what was not (Mesos's ACCEPT)."""
        frameworks, fid = self.frameworks, self.framework_id
        launches: list[TaskLaunch] = []
        problems: list[TaskProblem] = []
        for task in body.tasks:
            result = task_launch(task, self.role)
            if isinstance(result, TaskProblem):
                problems.append(result)
            else:
                launches.append(result)
        offers = [self.offers.get(offer_id) for offer_id in body.offer_ids]
        known = [offer for offer in offers if offer is not None]
        if len(known) != len(offers) or len({offer.agent_id for offer in known}) != 1:
            why = (
                "an offer is unknown, rescinded or used"
                if len(known) != len(offers)
                else ("the offers are on several agents")
            )
            self.invalid_offers([o.offer_id for o in known], body, why, who)
            return
        launches = fitting(launches, known, problems)
        try:
            frameworks.accept(fid, body.offer_ids, launches, body.refuse_seconds, who)
        except NotFound as error:  # an offer went away (its rescind is not streamed yet)
            self.invalid_offers([o.offer_id for o in known], body, error.message, who)
            return
        except CoreError as error:
            if error.code in ("PERMISSION_DENIED", "FAILED_PRECONDITION", "UNAVAILABLE"):
                raise  # the call is refused whole: nothing changed
            frameworks.decline(fid, body.offer_ids, body.refuse_seconds, who)  # used, as in Mesos
            problems += [TaskProblem(t.task_id, t.agent_id or "", error.message) for t in launches]
        for offer_id in body.offer_ids:
            self.offers.pop(offer_id, None)
        now = time.time()
        for problem in problems:
            self.tell(StatusUpdate(problem.task_id, problem.agent_id, TaskState.ERROR,
                                     TaskReason.TASK_INVALID, problem.message, now))  # fmt: skip

    def invalid_offers(self, known: list[str], body: Accept, why: str, who: str | None) -> None:
        """Mesos's answer to an ACCEPT of invalid offers: the valid ones are returned (no filter),
        every task is TASK_LOST (TASK_DROPPED if partition-aware), REASON_INVALID_OFFERS."""
        self.frameworks.decline(self.framework_id, known, 0.0, who)
        for offer_id in body.offer_ids:
            self.offers.pop(offer_id, None)
        state = TaskState.DROPPED if self.partition_aware else TaskState.LOST
        now = time.time()
        for task in body.tasks:
            message = f"Task launched with invalid offers: {why}"
            self.tell(StatusUpdate(task.task_id, task.agent_id, state, TaskReason.INVALID_OFFERS,
                                     message, now))  # fmt: skip


def fitting(
    launches: list[TaskLaunch], offers: list[Offer], problems: list[TaskProblem]
) -> list[TaskLaunch]:
    """The launches that fit, one by one, in what is left of the offers (Mesos validates each
    task against the remaining resources); the others become problems."""
    agent_id = offers[0].agent_id
    left = offers[0].resources
    for offer in offers[1:]:
        left = left + offer.resources
    kept, seen = [], set()
    for launch in launches:
        message = ""
        if launch.task_id in seen:
            message = f"task {launch.task_id!r} is launched twice in this call"
        elif launch.agent_id not in (None, agent_id):
            message = f"agent_id {launch.agent_id!r} is not the offers' agent {agent_id!r}"
        elif not launch.resources.fits_in(left):
            message = f"the task needs {launch.resources} but {left} is left of the offers"
        if message:
            problems.append(TaskProblem(launch.task_id, launch.agent_id or "", message))
            continue
        seen.add(launch.task_id)
        left = left - launch.resources
        kept.append(launch)
    return kept
