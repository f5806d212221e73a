"""Which framework ``fairshare logs`` means: ``--framework`` by id or name, and the candidates
when a task id is shared.

``resolve_framework(frameworks, wanted)`` turns the value of ``--framework`` into one framework
id: a framework whose id is ``wanted`` first, else the one framework named ``wanted``; several
frameworks of that name is an ``AmbiguousFramework`` naming them (exit 2, as for
``fairshare tasks --framework``); none is ``wanted`` itself, for the master to judge (it knows
frameworks the state no longer lists, and says NOT_FOUND for one it does not know).
``candidates(state, task_id)`` lists the frameworks the master tracks a task of that id in;
``ambiguity_message`` says which they are, by id and name, and the flag that chooses.

The master's ``GetState`` is the only source: a caller who may not read it (a tenant without
``view_state``) gets ``--framework`` passed through as an id, and the master's and the agents'
own answers decide.

Invariants: pure functions over a ``GetStateResponse`` (no I/O); ids are matched exactly, then
names exactly; every message names the flag ``--framework``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fairshare.v1 import operator_pb2

__all__ = [
    "AmbiguousFramework",
    "FrameworkName",
    "ambiguity_message",
    "candidates",
    "framework_to_ask",
    "frameworks_named_in",
    "known_frameworks",
    "resolve_framework",
]


@dataclass(frozen=True, slots=True)
class FrameworkName:
    """A framework's id and name as the master lists them."""

    framework_id: str
    name: str

    def __str__(self) -> str:
        return f"{self.framework_id} (name {self.name!r})" if self.name else self.framework_id


class AmbiguousFramework(ValueError):
    """``--framework`` names several frameworks, or a task id is several frameworks': the
    message says which and how to choose."""


def known_frameworks(state: operator_pb2.GetStateResponse) -> list[FrameworkName]:
    """The frameworks of the master's state, by id and name."""
    return [
        FrameworkName(f.framework_info.framework_id, f.framework_info.name)
        for f in state.frameworks
    ]


def resolve_framework(frameworks: Sequence[FrameworkName], wanted: str) -> str:
    """The id of the framework ``wanted`` names (an id, else a unique name, else ``wanted``)."""
    if any(f.framework_id == wanted for f in frameworks):
        return wanted
    named = [f for f in frameworks if f.name == wanted]
    if not named:
        return wanted
    if len(named) == 1:
        return named[0].framework_id
    listed = ", ".join(f.framework_id for f in named)
    raise AmbiguousFramework(
        f"--framework: {len(named)} frameworks are named {wanted!r} ({listed}):"
        " give the id of one with --framework ID"
    )


def candidates(state: operator_pb2.GetStateResponse, task_id: str) -> list[FrameworkName]:
    """The frameworks the master tracks a task ``task_id`` in, sorted by id."""
    names = {f.framework_id: f.name for f in known_frameworks(state)}
    owners = sorted({t.framework_id for t in state.tasks if t.info.task_id == task_id})
    return [FrameworkName(fid, names.get(fid, "")) for fid in owners]


def frameworks_named_in(frameworks: Iterable[FrameworkName], text: str) -> list[FrameworkName]:
    """The frameworks whose id appears in ``text`` (an agent's refusal lists the ids)."""
    return sorted(
        (f for f in frameworks if f.framework_id and f.framework_id in text),
        key=lambda f: f.framework_id,
    )


def ambiguity_message(task_id: str, owners: Sequence[FrameworkName]) -> str:
    """What ``fairshare logs`` says when ``task_id`` is a task of several frameworks."""
    listed = "; ".join(str(f) for f in owners)
    return (
        f"task id {task_id!r} is a task of {len(owners)} frameworks: {listed}."
        " Say which with --framework ID or --framework NAME"
    )


def framework_to_ask(state: operator_pb2.GetStateResponse | None, task_id: str, wanted: str) -> str:
    """The framework id ``fairshare logs`` asks for: ``--framework`` resolved (an id or a
    name), or "" when it is not given and the master tracks the task in at most one framework
    (``AmbiguousFramework`` when in several). Without the state, ``wanted`` as given."""
    if state is None:
        return wanted
    if wanted:
        return resolve_framework(known_frameworks(state), wanted)
    owners = candidates(state, task_id)
    if len(owners) > 1:
        raise AmbiguousFramework(ambiguity_message(task_id, owners))
    return ""
