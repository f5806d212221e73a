"""The link's batches (``master.io_workers.protocol``): the runtime's values cross it pickled by
their fields, rebuilt equal on the other end, without touching the process's own pickling."""

from __future__ import annotations

import copyreg
import dataclasses
import pickle
from typing import Any

from fairshare.agent_spec import AgentSpec
from fairshare.command import Command, ResourceUsage
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskReason, TaskState

from master.core.messages import LaunchTasks, RunningTask, TaskLaunch
from master.core.records import Offer
from master.io_workers.protocol import (
    COMMANDS,
    EVENTS,
    LINK_VALUE_TYPES,
    UPDATES,
    decode,
    encode,
)
from master.model import OffersEvent, StatusUpdate, TaskDetails, UpdateEvent

SHAPE = ResourceVector(cpus=1, mem=1024)
UPDATE = StatusUpdate(
    "t1", "ag-1", TaskState.FAILED, TaskReason.COMMAND_FAILED, "exit 3", 12.5, b"u" * 16,
    "AGENT", True, 3, ResourceUsage(1.5, 2048),
)  # fmt: skip
COMMAND = Command(shell="echo hi", env={"A": "1"})
LAUNCH = TaskLaunch("t1", "one", SHAPE, "ag-1", TaskDetails(3.0, command=COMMAND), True)
OFFER = Offer("o1", "fw-1", "ag-1", "h", SHAPE, 2, (("rack", "r1"),), 4.0, (("eng", SHAPE),))


def _fields(value: Any) -> tuple[Any, ...]:
    return tuple(getattr(value, f.name) for f in dataclasses.fields(value))


def test_the_runtimes_values_cross_the_link_equal() -> None:
    batch = [
        (UPDATES, 1, [(UPDATE, TaskState.FAILED)]),
        (EVENTS, 2, [UpdateEvent(UPDATE), OffersEvent((OFFER,), 9.0)]),
        (COMMANDS, 3, [LaunchTasks("ag-1", "fw-1", (LAUNCH,))]),
        (UPDATES, 4, [AgentSpec("h", 5051, SHAPE, (("rack", "r1"),), "1.0", (("eng", SHAPE),))]),
        (UPDATES, 5, [RunningTask("fw-1", "t1", "one", SHAPE, TaskState.RUNNING, True)]),
    ]
    back = decode(encode(batch))
    assert back[0] == batch[0] and back[2] == batch[2] and back[3:] == batch[3:]
    update_event, offers_event = back[1][2]
    assert update_event == UpdateEvent(UPDATE)
    (offer,) = offers_event.offers  # the core's Offer compares by identity: compare its fields
    assert type(offer) is Offer and _fields(offer) == _fields(OFFER)
    assert offers_event.expires_at == 9.0


def test_the_hot_values_are_pickled_by_their_fields_and_smaller() -> None:
    assert {StatusUpdate, UpdateEvent, OffersEvent, TaskLaunch, TaskDetails, Offer} <= (
        LINK_VALUE_TYPES
    )
    assert AgentSpec in LINK_VALUE_TYPES and RunningTask in LINK_VALUE_TYPES
    # a type that checks or converts its arguments (its own __init__, a __post_init__) keeps the
    # default: its state is restored, its __init__ is not run again
    assert Command not in LINK_VALUE_TYPES and ResourceUsage not in LINK_VALUE_TYPES
    assert len(encode([UPDATE] * 10)) < len(pickle.dumps([UPDATE] * 10, pickle.HIGHEST_PROTOCOL))


def test_the_process_pickling_is_untouched() -> None:
    assert not LINK_VALUE_TYPES & set(copyreg.dispatch_table)
    assert pickle.loads(pickle.dumps(UPDATE)) == UPDATE
