"""Argument checks of the core's requests: each raises ``InvalidArgument`` or ``AlreadyExists``
with a message naming the bad value, before ``MasterState`` changes anything.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Container, Sequence
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from fairshare.resources import ResourceVector
from fairshare.roles import RoleError, check_role

from master.core.errors import AlreadyExists, InvalidArgument, NotFound, PermissionDenied
from master.core.hierarchy import HIERARCHIES
from master.core.messages import RunningTask, TaskLaunch

__all__ = [
    "MAX_WEIGHT",
    "MIN_WEIGHT",
    "check_launches",
    "check_refuse",
    "check_running",
    "check_weight",
    "checked",
    "checked_role",
    "hierarchy_in_force",
    "hierarchy_refusal",
]

EMPTY = ResourceVector()
MAX_WEIGHT = 1e6
"""The largest weight (a million times another framework's share is plenty)."""
MIN_WEIGHT = 1e-6
"""The smallest weight: shares divided by weights stay finite and comparable (5e-324 is not a
weight, it is a way to overflow every comparison)."""
P = ParamSpec("P")
R = TypeVar("R")


class _Settings(Protocol):
    @property
    def validate(self) -> bool: ...


class _Validating(Protocol):
    @property
    def config(self) -> _Settings: ...

    def validate(self) -> None: ...


S = TypeVar("S", bound=_Validating)


def checked(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Run ``validate`` after the call when the core was built with ``validate=True``."""

    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result = method(self, *args, **kwargs)
        if self.config.validate:
            self.validate()
        return result

    functools.update_wrapper(wrapper, method)
    return wrapper


def check_weight(weight: object, what: str, cap: float = MAX_WEIGHT) -> float:
    """A weight as a float: finite, in [``MIN_WEIGHT``, ``MAX_WEIGHT``] (the one weight rule:
    frameworks' subscribed weights and the operator's role and framework weights alike), and at
    most ``cap``, the policy's cap of what the caller may ask for (a subscribed weight above
    its principal's cap is PERMISSION_DENIED, not malformed)."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise InvalidArgument(f"{what}: weight {weight!r} is not a number")
    if not math.isfinite(weight) or not MIN_WEIGHT <= weight <= MAX_WEIGHT:
        raise InvalidArgument(
            f"{what}: weight must be finite and in [{MIN_WEIGHT:g}, {MAX_WEIGHT:g}], got {weight!r}"
        )
    if weight > cap:
        raise PermissionDenied(
            f"{what}: weight {weight:g} is above the {cap:g} this principal may ask for (an"
            " operator may set a larger one: fairshare weights)"
        )
    return float(weight)


_TREE_POLICY = "drf"  # H-DRF and Mesos's hierarchical sorter compare dominant shares


def hierarchy_in_force(named: str, policy: str) -> str:
    """The hierarchy a run under ``policy`` uses: ``named``, else (``""``) hdrf under drf and
    flat under the other policies (they have no tree here)."""
    if named:
        return named
    return "hdrf" if policy == _TREE_POLICY else "flat"


def hierarchy_refusal(named: str, policy: str) -> str | None:
    """Why hierarchy ``named`` cannot run under ``policy`` (``None`` if it can; ``""`` is the
    policy's default): the one rule for the master's settings, case files and scenarios. The
    reason names the value, not the field: callers prefix where it came from."""
    if named and named not in HIERARCHIES:
        return f"{named!r} is unknown; choose one of {', '.join(HIERARCHIES)}"
    if named in ("hdrf", "naive") and policy != _TREE_POLICY:
        return (
            f"{named!r} orders roles by dominant shares and needs policy 'drf', not {policy!r};"
            f" use hierarchy 'flat' with {policy!r}"
        )
    return None


def checked_role(role: str, what: str = "role") -> str:
    """``role`` as a checked path (``fairshare.roles``; ``"*"`` for empty), or
    ``InvalidArgument`` naming ``what``."""
    try:
        return check_role(role, what)
    except RoleError as error:
        raise InvalidArgument(str(error)) from None


def check_refuse(refuse_seconds: float | None, default: float) -> float:
    """``refuse_seconds`` as a float >= 0 (``default`` when not given)."""
    if refuse_seconds is None:
        return default
    if isinstance(refuse_seconds, bool) or not isinstance(refuse_seconds, (int, float)):
        raise InvalidArgument(f"refuse_seconds {refuse_seconds!r} is not a number")
    if math.isnan(refuse_seconds) or refuse_seconds < 0:
        raise InvalidArgument(f"refuse_seconds must be >= 0, got {refuse_seconds!r}")
    return float(refuse_seconds)


def check_launches(
    live_tasks: Container[tuple[str, str]],
    framework_id: str,
    agent_id: str,
    launches: Sequence[TaskLaunch],
    held: ResourceVector,
) -> ResourceVector:
    """The resources ``launches`` need, after checking them against the offers' ``held``."""
    needed = EMPTY
    seen: set[str] = set()
    for launch in launches:
        if not launch.task_id:
            raise InvalidArgument("a task has an empty task_id")
        if launch.task_id in seen:
            raise InvalidArgument(f"task {launch.task_id!r} is launched twice in one call")
        if (framework_id, launch.task_id) in live_tasks:
            raise AlreadyExists(f"task {launch.task_id!r} exists already")
        if launch.agent_id is not None and launch.agent_id != agent_id:
            raise InvalidArgument(
                f"task {launch.task_id!r} names agent {launch.agent_id!r}"
                f" but the offers are for agent {agent_id!r}"
            )
        if not launch.resources:
            raise InvalidArgument(f"task {launch.task_id!r} asks for no resources")
        seen.add(launch.task_id)
        needed = needed + launch.resources
    if not needed.fits_in(held):
        raise InvalidArgument(f"tasks need {needed} but the offers hold {held}")
    return needed


def check_running(
    live_tasks: Container[tuple[str, str]],
    frameworks: Container[str],
    agent_id: str,
    running: Sequence[RunningTask],
    total: ResourceVector,
) -> ResourceVector:
    """The resources of the tasks an agent brings when it joins, after checking them."""
    used = EMPTY
    seen: set[tuple[str, str]] = set()
    for task in running:
        key = (task.framework_id, task.task_id)
        if not task.task_id:
            raise InvalidArgument(f"agent {agent_id!r} reports a task with an empty task_id")
        if task.framework_id not in frameworks:
            raise NotFound(f"task {task.task_id!r}: framework {task.framework_id!r} is unknown")
        if key in seen or key in live_tasks:
            raise AlreadyExists(f"task {task.task_id!r} of {task.framework_id!r} is live already")
        if task.state.is_terminal:
            raise InvalidArgument(f"task {task.task_id!r} is {task.state.name}, not running")
        if not task.resources:
            raise InvalidArgument(f"task {task.task_id!r} holds no resources")
        seen.add(key)
        used = used + task.resources
    if not used.fits_in(total):
        raise InvalidArgument(f"agent {agent_id!r}: its tasks hold {used}, more than {total}")
    return used
