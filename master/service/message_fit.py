"""Every message the master sends fits the message limit (``fairshare.transport.
MAX_MESSAGE_BYTES``, 16 MiB): a GetState is trimmed by a stated rule, an offers event is split.

Whatever the bounds on peers' input allow (``master.core.input_bounds``: 64 KiB of labels per
task, of attributes per agent), a cluster with enough tasks and agents can describe more than one
message holds; without this, ``fairshare status``, ``tasks``, ``agents`` and ``logs`` fail for
everyone, and a new subscription's first offers event ends its stream.

- ``fit_state``: a ``GetStateResponse`` above ``BUDGET`` loses, in this order and only as much as
  it must, "task details" (every task's labels, its command's environment and all but the first
  256 characters of its argv or shell, its status message), "agent attributes" (in agents and
  offers), then the tail of each list, kept in id order: tasks, offers, agents, roles,
  frameworks. ``trimmed`` says what went (operator.proto); figures (totals, shares, task
  counts) are never left out, and the call never fails for its size;
- ``split_by_size``: messages in consecutive groups, each group's encoding within ``BUDGET``
  (a single message larger than that is a group of its own; the bounds keep one offer to a few
  hundred KiB).

Invariants: pure functions of messages (no I/O); ``BUDGET`` leaves 64 KiB of the limit for the
envelope of a stream message and gRPC's framing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, TypeVar

from fairshare.transport import MAX_MESSAGE_BYTES
from fairshare.v1 import operator_pb2
from google.protobuf.message import Message

__all__ = ["BUDGET", "fit_state", "split_by_size"]

BUDGET: Final = MAX_MESSAGE_BYTES - 65_536
"""Bytes of one message's payload at most."""
KEPT_COMMAND: Final = 256
"""Characters of a trimmed task's first argument or shell line kept."""
FIELD_OVERHEAD: Final = 6
"""Bytes a repeated message field adds to each element's encoding at most (tag and length)."""
NOTE_BYTES: Final = 64
"""Bytes kept for the ``trimmed`` note of a cut list ("tasks: 120 of 4000 left out")."""
TRIMMED_LISTS: Final = ("tasks", "offers", "agents", "roles", "frameworks")
M = TypeVar("M", bound=Message)


def _drop_task_details(state: operator_pb2.GetStateResponse) -> None:
    for task in state.tasks:
        task.info.labels.clear()
        task.status.message = ""
        if task.info.HasField("process"):
            process = task.info.process
            process.env.clear()
            if process.argv:
                first = process.argv[0][:KEPT_COMMAND]
                del process.argv[:]
                process.argv.append(first)
            process.shell = process.shell[:KEPT_COMMAND]


def _drop_attributes(state: operator_pb2.GetStateResponse) -> None:
    for agent in state.agents:
        del agent.agent_info.attributes[:]
    for offer in state.offers:
        del offer.attributes[:]


def _cut_tail(items: Sequence[Message], excess: int) -> int:
    """How many of ``items`` to keep so that at least ``excess`` bytes are left out."""
    keep, removed = len(items), 0
    while keep > 0 and removed < excess:
        keep -= 1
        removed += items[keep].ByteSize() + FIELD_OVERHEAD
    return keep


def fit_state(state: operator_pb2.GetStateResponse, budget: int = BUDGET) -> None:
    """Trim ``state`` in place to at most ``budget`` bytes by the module's rule."""
    if state.ByteSize() <= budget:
        return
    _drop_task_details(state)
    state.trimmed.append("task details")
    if state.ByteSize() <= budget:
        return
    _drop_attributes(state)
    state.trimmed.append("agent attributes")
    for name in TRIMMED_LISTS:
        if state.ByteSize() <= budget:
            return
        excess = state.ByteSize() - budget + NOTE_BYTES
        items = getattr(state, name)
        total = len(items)
        keep = _cut_tail(items, excess)
        if keep < total:
            del items[keep:]
            state.trimmed.append(f"{name}: {total - keep} of {total} left out")


def split_by_size(messages: Sequence[M], budget: int = BUDGET) -> list[list[M]]:
    """``messages`` in order, in groups whose encodings add up to at most ``budget`` bytes
    (never an empty group; none at all for no messages)."""
    groups: list[list[M]] = []
    group: list[M] = []
    size = 0
    for message in messages:
        cost = message.ByteSize() + FIELD_OVERHEAD
        if group and size + cost > budget:
            groups.append(group)
            group, size = [], 0
        group.append(message)
        size += cost
    if group:
        groups.append(group)
    return groups
