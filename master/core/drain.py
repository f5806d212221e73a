"""Agent drains (Mesos's DRAIN_AGENT, Nomad's node drain with a deadline): what to kill when,
and when an agent is drained. Pure decisions; the runtime (``master.runtime.drains``) keeps the
drains durable, runs the timer and carries the kills out.

A drain starts with the agent taken out of offer rotation (the core's
``handle_deactivate_agent``: its offers rescinded). Then, each time the runtime looks
(``drain_step``):

- no live task on the agent: it is DRAINED (nothing to kill);
- before the deadline, or with no deadline: nothing is killed; the runtime looks again at the
  deadline (``wake_at``) and whenever a task ends;
- at or after the deadline: every live task not already KILLING is killed (once: a KILLING
  task is not killed again), and the agent is DRAINED when the last one ends.

A deadline is absolute wall-clock seconds, so that it means the same after a master restart or
a failover (``started_at + grace``, ``deadline_at``); ``check_grace`` bounds the grace an
operator may give.

Invariants: pure (no clock: ``now`` is passed in; no I/O); ``drain_step`` never kills a task
before the deadline, never twice, and answers drained exactly when no live task is left.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from fairshare.task_states import TaskState

from master.core.errors import InvalidArgument

__all__ = [
    "DRAINED",
    "DRAINING",
    "DRAIN_STATES",
    "MAX_GRACE",
    "DrainStep",
    "check_grace",
    "deadline_at",
    "drain_step",
]

DRAINING: Final = "DRAINING"
DRAINED: Final = "DRAINED"
DRAIN_STATES: Final = (DRAINING, DRAINED)
MAX_GRACE: Final = 366 * 86400.0
"""The longest grace (seconds) a drain may give the tasks (a year and a day)."""

TaskKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class DrainStep:
    """What a drain does now: the tasks to kill, whether the agent is drained, and when to look
    again (None: only when a task ends)."""

    kill: tuple[TaskKey, ...] = ()
    drained: bool = False
    wake_at: float | None = None


def check_grace(seconds: float | None) -> float | None:
    """The grace a drain gives its tasks (None: no deadline); INVALID_ARGUMENT naming the field
    when it is negative, not finite or above ``MAX_GRACE``."""
    if seconds is None:
        return None
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidArgument(f"deadline: must be a duration of 0 s or more, not {seconds:g} s")
    if seconds > MAX_GRACE:
        raise InvalidArgument(
            f"deadline: {seconds:g} s is more than the longest drain ({MAX_GRACE:g} s)"
        )
    return seconds


def deadline_at(started_at: float, grace: float | None) -> float | None:
    """The absolute deadline of a drain started at ``started_at`` (None: no deadline)."""
    return None if grace is None else started_at + grace


def drain_step(
    deadline: float | None, tasks: Iterable[tuple[TaskKey, TaskState]], now: float
) -> DrainStep:
    """What the drain of an agent running ``tasks`` (key, state) does at ``now``."""
    live = [(key, state) for key, state in tasks if not state.is_terminal]
    if not live:
        return DrainStep(drained=True)
    if deadline is None:
        return DrainStep()
    if now < deadline:
        return DrainStep(wake_at=deadline)
    kill = tuple(sorted(key for key, state in live if state is not TaskState.KILLING))
    return DrainStep(kill=kill)
