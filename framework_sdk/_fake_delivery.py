"""Status updates of the fake master (``framework_sdk._fake_cluster``): at least once,
in each task's order, as a real agent and master deliver them.

Invariants:
- An update with a uuid stays in its framework's ``unacked`` until acknowledged, and is sent
  again on every resubscription (``resend_unacked``).
- ``fifo`` updates (the simulated agents') of one task are sent one at a time: the next waits
  in ``held`` until the previous one is acknowledged; other updates are sent at once.
- An acknowledged uuid is remembered in ``acked`` (a duplicate acknowledgement is fine).
- Output leaves only through the ``send`` callable given (an event for a framework's stream).
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Callable, Iterable

from fairshare.task_states import NOT_FORWARDED_WITHOUT_AWARENESS
from fairshare.v1 import common_pb2, scheduler_pb2
from fairshare.wire import task_state_from_pb

from framework_sdk._fake_rules import FrameworkRecord, now_stamp, update_event

__all__ = [
    "Send",
    "acknowledged",
    "deliver",
    "new_status",
    "reconciliation",
    "resend_unacked",
]

Send = Callable[[str, scheduler_pb2.SubscribeResponse], None]
_TS = common_pb2.TaskState
_PARTITION_AWARE = common_pb2.FrameworkInfo.Capability.CAPABILITY_PARTITION_AWARE


def new_status(
    task_id: str,
    agent_id: str,
    state: common_pb2.TaskState.ValueType,
    reason: int = 0,
    message: str = "",
    with_uuid: bool = True,
    exit_code: int | None = None,
) -> common_pb2.TaskStatus:
    """A task's new status: from its agent with a uuid, or from the master without one."""
    status = common_pb2.TaskStatus(
        task_id=task_id,
        agent_id=agent_id,
        state=state,
        reason=reason,  # type: ignore[arg-type]
        message=message,
        uuid=uuid_module.uuid4().bytes if with_uuid else b"",
        source=common_pb2.TaskStatus.SOURCE_AGENT
        if with_uuid
        else common_pb2.TaskStatus.SOURCE_MASTER,
        timestamp=now_stamp(),
    )
    if exit_code is not None:
        status.exit_code = exit_code
    return status


def reconciliation(
    framework: FrameworkRecord,
    task_id: str,
    agent_id: str,
    known: common_pb2.TaskStatus | None,
) -> common_pb2.TaskStatus:
    """The answer to a reconciliation of ``task_id`` (``known``: its latest status, None if
    the task is not live): its state, or UNKNOWN, told as LOST to a framework without
    ``PARTITION_AWARE`` (as the real master); from the master, without uuid."""
    state = known.state if known is not None else _TS.TASK_STATE_UNKNOWN
    aware = _PARTITION_AWARE in framework.info.capabilities
    if not aware and task_state_from_pb(state) in NOT_FORWARDED_WITHOUT_AWARENESS:
        state = _TS.TASK_STATE_LOST
    return common_pb2.TaskStatus(
        task_id=task_id,
        agent_id=known.agent_id if known is not None else agent_id,
        state=state,
        reason=common_pb2.TaskStatus.REASON_RECONCILIATION,
        message="reconciliation",
        source=common_pb2.TaskStatus.SOURCE_MASTER,
        timestamp=now_stamp(),
    )


def deliver(
    framework: FrameworkRecord | None,
    framework_id: str,
    status: common_pb2.TaskStatus,
    send: Send,
    *,
    fifo: bool = False,
) -> None:
    """Send ``status`` to its framework (kept until acknowledged if it has a uuid), or hold it
    behind the task's unacknowledged update when ``fifo``."""
    if framework is not None and status.uuid and fifo and _waiting(framework, status.task_id):
        framework.held.setdefault(status.task_id, []).append(status)
        return
    if framework is not None and status.uuid:
        framework.unacked[status.uuid] = status
    send(framework_id, update_event(status))


def acknowledged(
    framework: FrameworkRecord,
    acks: Iterable[scheduler_pb2.AcknowledgeRequest.Acknowledgement],
    send: Send,
) -> None:
    """Apply checked acknowledgements: forget each update, then send the task's next one."""
    for ack in acks:
        if framework.unacked.pop(ack.uuid, None) is not None:
            framework.acked.add(ack.uuid)
            _release_next(framework, ack.task_id, send)


def resend_unacked(framework: FrameworkRecord, send: Send) -> None:
    """Send every unacknowledged update again (the framework's new stream is open)."""
    for status in framework.unacked.values():
        send(framework.framework_id, update_event(status))


def _waiting(framework: FrameworkRecord, task_id: str) -> bool:
    """Whether an update of ``task_id`` is sent and not yet acknowledged, or held."""
    return bool(framework.held.get(task_id)) or any(
        status.task_id == task_id for status in framework.unacked.values()
    )


def _release_next(framework: FrameworkRecord, task_id: str, send: Send) -> None:
    """Send the next held update of ``task_id`` once none of it is unacknowledged."""
    queue = framework.held.get(task_id)
    if not queue or any(s.task_id == task_id for s in framework.unacked.values()):
        return
    status = queue.pop(0)
    if not queue:
        del framework.held[task_id]
    framework.unacked[status.uuid] = status
    send(framework.framework_id, update_event(status))
