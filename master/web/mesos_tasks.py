"""Mesos tasks and resources as fairshare's (docs/from-mesos.md, "Tasks and resources").

Two steps, so a call is refused whole before anything changes and a task is refused alone:

1. ``parse_task`` reads a ``TaskInfo`` (JSON) into a ``MesosTask``: only its shape is checked
   (fields of the message, JSON types, required ids); a bad shape is ``BadCall`` (400, nothing
   changed).
2. ``task_launch`` turns a ``MesosTask`` into the core's ``TaskLaunch`` (a command task,
   ``TaskDetails.command``) or a ``TaskProblem``: what fairshare cannot run as asked, which the
   API reports as TASK_ERROR (REASON_TASK_INVALID) naming the field, as Mesos reports an invalid
   task, while the other tasks of the call launch.

The mapping: SCALAR resources by name (``cpus``, ``mem`` and ``disk`` in MB, ``gpus`` whole,
any other lower-case name) summed per name, in fairshare's fixed point of 0.001 (a float within
1e-6 of a multiple of 0.001 is that multiple: JSON doubles cannot write 0.1 exactly; a finer
value is refused, never rounded); ``CommandInfo`` with ``shell`` (default true) is ``/bin/sh -c
value`` (``arguments`` unused, as in Mesos), without it ``value`` is the program and
``arguments[1:]`` its arguments; ``environment`` variables of type VALUE; ``user``;
``kill_policy.grace_period``; ``labels`` (``fairshare.preemptible=true`` lets ``--rebalance``
preempt the task). Refused with TASK_ERROR: custom executors, containers, URIs to fetch, health
checks and checks, ``data``, ``discovery``, ``max_completion_time``, ``limits``, secrets,
non-scalar, reserved, revocable, shared or disk-sourced resources.

Invariants: pure (no I/O); ``task_launch`` never raises: every problem is a ``TaskProblem``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from fairshare.command import Command
from fairshare.resources import WHOLE_RESOURCES, ResourceError, ResourceVector

from master.core import TaskLaunch
from master.core.errors import InvalidArgument
from master.core.input_bounds import check_labels
from master.model import TaskDetails
from master.web.mesos_json import (
    BadCall,
    array,
    at,
    boolean,
    child,
    enum,
    fields,
    id_value,
    integer,
    number,
    string,
)

__all__ = [
    "PREEMPTIBLE_LABEL",
    "MesosResource",
    "MesosTask",
    "TaskProblem",
    "parse_resources",
    "parse_task",
    "task_launch",
]

PREEMPTIBLE_LABEL: Final = "fairshare.preemptible"
NAME_RE: Final = re.compile(r"^[a-z][a-z0-9_.\-]*$")
TOLERANCE: Final = 1e-6
"""Milli-units a JSON double may be off a multiple of 0.001 and still be that multiple."""
MAX_COMMAND: Final = 131_072

RESOURCE_FIELDS: Final = (
    "name", "type", "scalar", "ranges", "set", "role", "allocation_info", "reservation",
    "reservations", "disk", "revocable", "shared", "provider_id",
)  # fmt: skip
VALUE_TYPES: Final = ("SCALAR", "RANGES", "SET", "TEXT")
UNSUPPORTED_RESOURCE: Final = {
    "reservation": "reserved resources",
    "reservations": "reserved resources",
    "disk": "disk volumes and disk sources",
    "revocable": "revocable resources",
    "shared": "shared resources",
    "provider_id": "resource providers",
}
TASK_FIELDS: Final = (
    "name", "task_id", "agent_id", "resources", "executor", "command", "container",
    "health_check", "check", "kill_policy", "data", "labels", "discovery", "max_completion_time",
    "limits",
)  # fmt: skip
UNSUPPORTED_TASK: Final = {
    "executor": "custom executors are not supported: fairshare runs command tasks only",
    "container": "containers are not supported: commands run as processes on the agent",
    "health_check": "health checks are not supported",
    "check": "checks are not supported",
    "data": "data is for custom executors, which fairshare does not run",
    "discovery": "service discovery information is not supported",
    "max_completion_time": "max_completion_time is not supported",
    "limits": "resource limits beyond the resources are not supported",
}
COMMAND_FIELDS: Final = ("uris", "environment", "shell", "value", "arguments", "user")
VARIABLE_FIELDS: Final = ("name", "type", "value", "secret")


@dataclass(frozen=True, slots=True)
class MesosResource:
    """One ``Resource`` as read: ``unsupported`` names the first field fairshare has no such
    thing for (``""``: none)."""

    path: str
    name: str
    type: str
    value: float | None
    role: str = ""
    allocation_role: str | None = None
    unsupported: str = ""


@dataclass(frozen=True, slots=True)
class MesosCommand:
    """One ``CommandInfo`` as read."""

    path: str
    value: str
    shell: bool
    arguments: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    secret: str  # the path of the first SECRET variable, "" if none
    user: str
    uris: int


@dataclass(frozen=True, slots=True)
class MesosTask:
    """One ``TaskInfo`` as read (``parse_task``)."""

    path: str
    task_id: str
    agent_id: str
    name: str
    resources: tuple[MesosResource, ...]
    command: MesosCommand | None
    grace: float | None
    labels: tuple[tuple[str, str], ...]
    unsupported: tuple[str, ...]  # fields present that fairshare refuses (UNSUPPORTED_TASK)


@dataclass(frozen=True, slots=True)
class TaskProblem:
    """A task fairshare cannot run as asked: reported as TASK_ERROR with ``message``."""

    task_id: str
    agent_id: str
    message: str


class _Refused(Exception):
    """A problem of one task (``TaskProblem``'s message)."""


# -- step 1: the shape ---------------------------------------------------------------------------


def parse_resources(items: list[Any], path: str) -> tuple[MesosResource, ...]:
    """The ``Resource`` messages of ``items`` (``path`` names the list)."""
    parsed = []
    for index, item in enumerate(items):
        where = f"{path}[{index}]"
        resource = fields(item, where, "Resource", RESOURCE_FIELDS)
        kind = enum(resource, "type", where, VALUE_TYPES, required=True)
        scalar = child(resource, "scalar", where, "Value.Scalar", ("value",))
        value = number(scalar, "value", at(where, "scalar"), True) if scalar is not None else None
        allocation = child(resource, "allocation_info", where, "AllocationInfo", ("role",))
        unsupported = next(
            (key for key in UNSUPPORTED_RESOURCE if resource.get(key) not in (None, [])), ""
        )
        if kind != "SCALAR" and not unsupported:
            unsupported = "type"
        parsed.append(
            MesosResource(
                where,
                string(resource, "name", where, required=True),
                kind or "",
                value,
                string(resource, "role", where),
                None
                if allocation is None
                else string(allocation, "role", at(where, "allocation_info")),
                unsupported,
            )
        )
    return tuple(parsed)


def _command(document: dict[str, Any], path: str) -> MesosCommand:
    variables: list[tuple[str, str]] = []
    secret = ""
    environment = child(document, "environment", path, "Environment", ("variables",))
    if environment is not None:
        where = at(path, "environment")
        for index, item in enumerate(array(environment, "variables", where)):
            at_item = f"{where}.variables[{index}]"
            variable = fields(item, at_item, "Environment.Variable", VARIABLE_FIELDS)
            name = string(variable, "name", at_item, required=True)
            kind = enum(variable, "type", at_item, ("UNKNOWN", "VALUE", "SECRET"))
            if kind in ("SECRET", "UNKNOWN") or variable.get("secret") is not None:
                secret = secret or at_item
            variables.append((name, string(variable, "value", at_item, most=MAX_COMMAND)))
    arguments = array(document, "arguments", path, most=4096)
    for index, argument in enumerate(arguments):
        if not isinstance(argument, str):
            raise BadCall(f"{at(path, 'arguments')}[{index}]", "expected a string")
    shell = boolean(document, "shell", path)
    return MesosCommand(
        path,
        string(document, "value", path, most=MAX_COMMAND),
        True if shell is None else shell,
        tuple(arguments),
        tuple(variables),
        secret,
        string(document, "user", path),
        len(array(document, "uris", path)),
    )


def parse_task(value: Any, path: str) -> MesosTask:
    """One ``TaskInfo`` (``BadCall`` for a bad shape)."""
    task = fields(value, path, "TaskInfo", TASK_FIELDS)
    task_id = id_value(task, "task_id", path, required=True)
    agent_id = id_value(task, "agent_id", path, required=True)
    command = child(task, "command", path, "CommandInfo", COMMAND_FIELDS)
    grace = None
    policy = child(task, "kill_policy", path, "KillPolicy", ("grace_period",))
    if policy is not None:
        where = at(path, "kill_policy")
        period = child(policy, "grace_period", where, "DurationInfo", ("nanoseconds",))
        if period is not None:
            nanos = integer(period, "nanoseconds", at(where, "grace_period"))
            grace = None if nanos is None else nanos / 1e9
    labels = []
    holder = child(task, "labels", path, "Labels", ("labels",))
    if holder is not None:
        for index, item in enumerate(array(holder, "labels", at(path, "labels"))):
            where = f"{path}.labels.labels[{index}]"
            label = fields(item, where, "Label", ("key", "value"))
            labels.append(
                (string(label, "key", where, required=True), string(label, "value", where))
            )
    return MesosTask(
        path,
        task_id,
        agent_id,
        string(task, "name", path),
        parse_resources(array(task, "resources", path), at(path, "resources")),
        None if command is None else _command(command, at(path, "command")),
        grace,
        tuple(labels),
        tuple(key for key in UNSUPPORTED_TASK if task.get(key) is not None),
    )


# -- step 2: what fairshare runs -----------------------------------------------------------------


def resource_vector(resources: tuple[MesosResource, ...], role: str) -> ResourceVector:
    """The resources as a vector (``_Refused`` naming the field fairshare cannot take)."""
    millis: dict[str, int] = {}
    for resource in resources:
        where = resource.path
        if resource.unsupported == "type":
            raise _Refused(
                f"{where}.type: {resource.type} resources are not supported (fairshare keeps"
                " scalar quantities only)"
            )
        if resource.unsupported:
            what = UNSUPPORTED_RESOURCE[resource.unsupported]
            raise _Refused(f"{where}.{resource.unsupported}: {what} are not supported")
        if resource.role not in ("", "*"):
            raise _Refused(
                f"{where}.role: {resource.role!r}: reserved resources are not supported (offers"
                " hold unreserved resources, role '*')"
            )
        if resource.allocation_role is not None and resource.allocation_role != role:
            raise _Refused(
                f"{where}.allocation_info.role: {resource.allocation_role!r} is not the"
                f" framework's role {role!r}"
            )
        if not NAME_RE.match(resource.name):
            raise _Refused(
                f"{where}.name: {resource.name!r} is not a fairshare resource name (lower case"
                " [a-z0-9_.-], starting with a letter)"
            )
        if resource.value is None:
            raise _Refused(f"{where}.scalar: is required for a SCALAR resource")
        millis[resource.name] = millis.get(resource.name, 0) + _millis(resource)
    try:
        return ResourceVector.from_millis(millis)
    except ResourceError as error:
        raise _Refused(f"{resources[0].path.rpartition('[')[0]}: {error}") from None


def _millis(resource: MesosResource) -> int:
    value = resource.value
    assert value is not None
    where = f"{resource.path}.scalar.value"
    if value < 0:
        raise _Refused(f"{where}: {value!r} is negative")
    if value > 1e15:
        raise _Refused(f"{where}: {value!r} is too large")
    scaled = value * 1000
    millis = round(scaled)
    if abs(scaled - millis) > TOLERANCE:
        raise _Refused(f"{where}: {value!r} is finer than fairshare's fixed point of 0.001")
    if resource.name in WHOLE_RESOURCES and millis % 1000:
        raise _Refused(f"{where}: {resource.name} are counted whole, {value!r} is a fraction")
    return millis


def _process(task: MesosTask) -> Command:
    command = task.command
    if command is None:
        raise _Refused(f"{task.path}.command: is required (fairshare runs command tasks only)")
    if command.uris:
        raise _Refused(
            f"{command.path}.uris: fairshare does not fetch URIs (put the files on the agents or"
            " fetch them in the command)"
        )
    if command.secret:
        raise _Refused(f"{command.secret}: only variables of type VALUE are supported")
    if not command.value.strip():
        raise _Refused(f"{command.path}.value: is empty")
    try:
        if command.shell:
            return Command(shell=command.value, env=command.env, user=command.user,
                           kill_grace_period=task.grace)  # fmt: skip
        argv = [command.value, *command.arguments[1:]]
        return Command(argv=argv, env=command.env, user=command.user, kill_grace_period=task.grace)
    except ValueError as error:
        raise _Refused(f"{command.path}: {error}") from None


def task_launch(task: MesosTask, role: str) -> TaskLaunch | TaskProblem:
    """The core's launch of ``task`` for a framework in ``role``, or what is wrong with it."""
    try:
        if task.unsupported:
            field = task.unsupported[0]
            raise _Refused(f"{at(task.path, field)}: {UNSUPPORTED_TASK[field]}")
        resources = resource_vector(task.resources, role)
        if not resources:
            raise _Refused(f"{task.path}.resources: the task asks for no resources")
        process = _process(task)
        labels = dict(task.labels)
        if len(labels) != len(task.labels):
            raise _Refused(f"{task.path}.labels: a key is given twice")
        try:
            check_labels(labels.items(), f"{task.path}.labels")
        except InvalidArgument as error:
            raise _Refused(error.message) from None
        preemptible = labels.get(PREEMPTIBLE_LABEL, "false").lower()
        if preemptible not in ("true", "false"):
            raise _Refused(f"{task.path}.labels: {PREEMPTIBLE_LABEL} must be true or false")
    except _Refused as problem:
        return TaskProblem(task.task_id, task.agent_id, str(problem))
    details = TaskDetails(labels=tuple(sorted(labels.items())), command=process)
    name = task.name or task.task_id
    return TaskLaunch(task.task_id, name, resources, task.agent_id, details, preemptible == "true")
