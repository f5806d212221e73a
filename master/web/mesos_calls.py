"""Mesos v1 scheduler calls (``scheduler.proto``'s ``Call`` in JSON) as fairshare's values.

``parse_call`` reads a whole call before anything is done with it: a call Mesos's JSON form does
not allow, or that fairshare does not take, raises ``BadCall`` naming the field, and the API
answers 400 with nothing changed. What it returns is a ``Call`` whose ``body`` is one of the
values of ``master.web.mesos_call_types`` (re-exported here), ready for the runtime's
``FrameworkCalls`` (tasks still as ``MesosTask``: each is launched or refused alone,
``master.web.mesos_tasks``).

Supported: SUBSCRIBE, TEARDOWN, ACCEPT (LAUNCH operations), DECLINE, REVIVE, SUPPRESS, KILL,
ACKNOWLEDGE, RECONCILE. The other call types, the other offer operations and the fields with no
fairshare counterpart (``offer_filters``, ``offer_constraints``, a kill's ``kill_policy``,
operation ids) are refused naming the field (``UNSUPPORTED_CALLS`` says why for each).

Mesos's rules kept: every call but SUBSCRIBE names its ``framework_id``; a SUBSCRIBE's
``framework_id`` equals its ``framework_info.id``; ``role`` and ``roles`` as Mesos 1.x checks
them (``roles`` only with MULTI_ROLE); filters without ``refuse_seconds`` refuse for 5 s (the
proto's default). fairshare's: a framework has one role (``roles`` with one entry); a filter of
more than a year lasts a year; a failover timeout is at most ``MAX_SECONDS``.

Invariants: pure; the payload field of the call's type is the only one set (another one is
refused, never ignored).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from fairshare.framework_info import Capability
from fairshare.roles import RoleError, check_role

from master.model import FrameworkInfo
from master.web.mesos_call_types import (
    Accept,
    Acknowledge,
    Body,
    Call,
    Decline,
    Kill,
    Reconcile,
    Revive,
    Subscribe,
    Suppress,
    Teardown,
)
from master.web.mesos_json import (
    BadCall,
    JsonObject,
    array,
    at,
    boolean,
    child,
    enum,
    fields,
    id_value,
    number,
    raw_bytes,
    string,
    strings,
)
from master.web.mesos_tasks import MesosTask, parse_task

__all__ = [
    "CAPABILITIES",
    "DEFAULT_REFUSE_SECONDS",
    "Accept",
    "Acknowledge",
    "Call",
    "Decline",
    "Kill",
    "Reconcile",
    "Revive",
    "Subscribe",
    "Suppress",
    "Teardown",
    "parse_call",
]

DEFAULT_REFUSE_SECONDS: Final = 5.0
"""``Filters.refuse_seconds``'s default in ``mesos.proto``."""
MAX_REFUSE_SECONDS: Final = 31_536_000.0
MAX_SECONDS: Final = 315_576_000_000.0
"""The longest failover timeout (``fairshare.wire.MAX_SECONDS``: 10,000 years)."""
UUID_BYTES: Final = 16

CALL_FIELDS: Final = (
    "type", "framework_id", "subscribe", "accept", "decline", "accept_inverse_offers",
    "decline_inverse_offers", "revive", "kill", "shutdown", "acknowledge",
    "acknowledge_operation_status", "reconcile", "reconcile_operations", "message", "request",
    "suppress", "update_framework",
)  # fmt: skip
SUPPORTED: Final = (
    "SUBSCRIBE", "TEARDOWN", "ACCEPT", "DECLINE", "REVIVE", "SUPPRESS", "KILL", "ACKNOWLEDGE",
    "RECONCILE",
)  # fmt: skip
NO_INVERSE = "fairshare sends no inverse offers (maintenance is the operator's: fairshare agents)"
NO_OPERATIONS = "offer operations other than LAUNCH are not supported, so none has a status"
UNSUPPORTED_CALLS: Final = {
    "UNKNOWN": "is not a call",
    "ACCEPT_INVERSE_OFFERS": NO_INVERSE,
    "DECLINE_INVERSE_OFFERS": NO_INVERSE,
    "SHUTDOWN": "fairshare runs no custom executors to shut down",
    "MESSAGE": "framework messages go to custom executors, which fairshare does not run",
    "REQUEST": "resource requests are not supported (Mesos's allocator ignores them too)",
    "ACKNOWLEDGE_OPERATION_STATUS": NO_OPERATIONS,
    "RECONCILE_OPERATIONS": NO_OPERATIONS,
    "UPDATE_FRAMEWORK": "is not supported: SUBSCRIBE again with the framework's id instead",
}
FRAMEWORK_FIELDS: Final = (
    "user", "name", "id", "failover_timeout", "checkpoint", "role", "roles", "hostname",
    "principal", "webui_url", "capabilities", "labels", "offer_filters",
)  # fmt: skip
CAPABILITIES: Final = (
    "REVOCABLE_RESOURCES", "TASK_KILLING_STATE", "GPU_RESOURCES", "SHARED_RESOURCES",
    "PARTITION_AWARE", "MULTI_ROLE", "RESERVATION_REFINEMENT", "REGION_AWARE",
)  # fmt: skip
FAIRSHARE_CAPABILITIES: Final = frozenset(Capability)
"""The capabilities that change what fairshare does; the others are accepted and change nothing
(fairshare never offers revocable, shared, reserved or region-placed resources)."""
OPERATION_TYPES: Final = (
    "UNKNOWN", "LAUNCH", "LAUNCH_GROUP", "RESERVE", "UNRESERVE", "CREATE", "DESTROY",
    "GROW_VOLUME", "SHRINK_VOLUME", "CREATE_DISK", "DESTROY_DISK",
)  # fmt: skip
OPERATION_FIELDS: Final = ("type", "id", *(t.lower() for t in OPERATION_TYPES[1:]))


def parse_call(document: Any) -> Call:
    """The call ``document`` (a parsed JSON body) holds; ``BadCall`` naming the field if it is
    not one fairshare takes."""
    call = fields(document, "", "Call", CALL_FIELDS)
    kind = enum(call, "type", "", ("UNKNOWN", *SUPPORTED, *UNSUPPORTED_CALLS), required=True)
    assert kind is not None
    if kind in UNSUPPORTED_CALLS:
        raise BadCall("type", f"{kind}: {UNSUPPORTED_CALLS[kind]}")
    payload = kind.lower()
    for key in CALL_FIELDS[2:]:
        if key != payload and call.get(key) is not None:
            raise BadCall(key, f"is set but the call's type is {kind}")
    framework_id = id_value(call, "framework_id", "", required=kind != "SUBSCRIBE")
    body = _BODIES[kind](call.get(payload), payload)
    if isinstance(body, Subscribe) and framework_id != body.spec.framework_id:
        raise BadCall("framework_id", "differs from subscribe.framework_info.id")
    return Call(kind, framework_id, body)


def _required(value: Any, path: str, message: str, known: tuple[str, ...]) -> JsonObject:
    if value is None:
        raise BadCall(path, f"is required in a call of type {path.upper()}")
    return fields(value, path, message, known)


def _optional(value: Any, path: str, message: str, known: tuple[str, ...]) -> JsonObject:
    return {} if value is None else fields(value, path, message, known)


# -- SUBSCRIBE -----------------------------------------------------------------------------------


def _subscribe(value: Any, path: str) -> Subscribe:
    subscribe = _required(value, path, "Call.Subscribe",
                          ("framework_info", "suppressed_roles", "offer_constraints"))  # fmt: skip
    if subscribe.get("offer_constraints") is not None:
        raise BadCall(at(path, "offer_constraints"), "offer constraints are not supported")
    where = at(path, "framework_info")
    info = child(subscribe, "framework_info", path, "FrameworkInfo", FRAMEWORK_FIELDS)
    if info is None:
        raise BadCall(where, "is required")
    capabilities = set()
    for index, item in enumerate(array(info, "capabilities", where)):
        at_item = f"{where}.capabilities[{index}]"
        capability = fields(item, at_item, "FrameworkInfo.Capability", ("type",))
        name = enum(capability, "type", at_item, CAPABILITIES, required=True)
        capabilities.add(str(name))
    role = _role(info, where, "MULTI_ROLE" in capabilities)
    suppressed_roles = strings(subscribe, "suppressed_roles", path)
    for index, suppressed in enumerate(suppressed_roles):
        if suppressed != role:
            raise BadCall(
                f"{path}.suppressed_roles[{index}]", f"{suppressed!r} is not the framework's role"
            )
    failover = number(info, "failover_timeout", where) or 0.0
    if not 0 <= failover <= MAX_SECONDS:
        raise BadCall(at(where, "failover_timeout"), f"must be in [0, {MAX_SECONDS:.0f}] seconds")
    boolean(info, "checkpoint", where)  # fairshare's agents always checkpoint
    string(info, "webui_url", where, most=2048)
    _labels(info, where)
    if info.get("offer_filters"):
        raise BadCall(
            at(where, "offer_filters"), "per-role minimum allocatable resources are not supported"
        )
    spec = FrameworkInfo(
        framework_id=id_value(info, "id", where),
        name=string(info, "name", where, required=True),
        role=role,
        weight=None,  # Mesos frameworks have no weight of their own: the operator's weights apply
        failover_timeout=failover,
        principal=string(info, "principal", where),
        user=string(info, "user", where),
        hostname=string(info, "hostname", where),
        capabilities=frozenset(capabilities & FAIRSHARE_CAPABILITIES),
    )
    return Subscribe(spec, bool(suppressed_roles), frozenset(capabilities))


def _role(info: JsonObject, where: str, multi_role: bool) -> str:
    """The framework's one role: ``roles`` (MULTI_ROLE) or ``role`` (else)."""
    roles = strings(info, "roles", where)
    if multi_role:
        if info.get("role") is not None:
            raise BadCall(at(where, "role"), "must not be set with MULTI_ROLE (use roles)")
        if len(roles) != 1:
            raise BadCall(
                at(where, "roles"), f"has {len(roles)} roles: a fairshare framework has exactly one"
            )
        role, field = roles[0], at(where, "roles") + "[0]"
    else:
        if roles:
            raise BadCall(at(where, "roles"), "requires the MULTI_ROLE capability")
        role, field = string(info, "role", where), at(where, "role")
    try:
        return check_role(role, field)
    except RoleError as error:
        raise BadCall(field, str(error).removeprefix(field).lstrip(": ")) from None


def _labels(document: JsonObject, path: str) -> None:
    holder = child(document, "labels", path, "Labels", ("labels",))
    if holder is not None:
        for index, item in enumerate(array(holder, "labels", at(path, "labels"))):
            where = f"{path}.labels.labels[{index}]"
            label = fields(item, where, "Label", ("key", "value"))
            string(label, "key", where, required=True)
            string(label, "value", where)


# -- offers --------------------------------------------------------------------------------------


def _offer_ids(document: JsonObject, path: str) -> tuple[str, ...]:
    ids = [
        _id_item(item, f"{at(path, 'offer_ids')}[{index}]")
        for index, item in enumerate(array(document, "offer_ids", path))
    ]
    if len(set(ids)) != len(ids):
        raise BadCall(at(path, "offer_ids"), "names the same offer twice")
    return tuple(ids)


def _id_item(item: Any, where: str) -> str:
    value = fields(item, where, 'an id ({"value": ...})', ("value",))
    return string(value, "value", where, required=True)


def _refuse_seconds(document: JsonObject, path: str) -> float:
    filters = child(document, "filters", path, "Filters", ("refuse_seconds",))
    if filters is None:
        return DEFAULT_REFUSE_SECONDS
    seconds = number(filters, "refuse_seconds", at(path, "filters"))
    if seconds is None:
        return DEFAULT_REFUSE_SECONDS
    if seconds < 0:
        raise BadCall(at(path, "filters.refuse_seconds"), f"{seconds!r} is negative")
    return min(seconds, MAX_REFUSE_SECONDS)


def _accept(value: Any, path: str) -> Accept:
    accept = _required(value, path, "Call.Accept", ("offer_ids", "operations", "filters"))
    offer_ids = _offer_ids(accept, path)
    if not offer_ids:
        raise BadCall(at(path, "offer_ids"), "is empty")
    tasks: list[MesosTask] = []
    for index, item in enumerate(array(accept, "operations", path)):
        where = f"{path}.operations[{index}]"
        operation = fields(item, where, "Offer.Operation", OPERATION_FIELDS)
        kind = enum(operation, "type", where, OPERATION_TYPES, required=True)
        if kind != "LAUNCH":
            raise BadCall(
                at(where, "type"),
                f"{kind}: only LAUNCH is supported (no task groups, reservations or volumes)",
            )
        if operation.get("id") is not None:
            raise BadCall(at(where, "id"), "operation feedback is not supported")
        for key in OPERATION_FIELDS[2:]:
            if key != "launch" and operation.get(key) is not None:
                raise BadCall(at(where, key), "is set but the operation's type is LAUNCH")
        launch = child(operation, "launch", where, "Offer.Operation.Launch", ("task_infos",))
        if launch is None:
            raise BadCall(at(where, "launch"), "is required for a LAUNCH operation")
        infos = array(launch, "task_infos", at(where, "launch"))
        for number_, info in enumerate(infos):
            tasks.append(parse_task(info, f"{where}.launch.task_infos[{number_}]"))
    return Accept(offer_ids, tuple(tasks), _refuse_seconds(accept, path))


def _decline(value: Any, path: str) -> Decline:
    decline = _required(value, path, "Call.Decline", ("offer_ids", "filters"))
    return Decline(_offer_ids(decline, path), _refuse_seconds(decline, path))


def _revive(value: Any, path: str) -> Revive:
    return Revive(tuple(strings(_optional(value, path, "Call.Revive", ("roles",)), "roles", path)))


def _suppress(value: Any, path: str) -> Suppress:
    document = _optional(value, path, "Call.Suppress", ("roles",))
    return Suppress(tuple(strings(document, "roles", path)))


# -- tasks ---------------------------------------------------------------------------------------


def _kill(value: Any, path: str) -> Kill:
    kill = _required(value, path, "Call.Kill", ("task_id", "agent_id", "kill_policy"))
    if kill.get("kill_policy") is not None:
        raise BadCall(
            at(path, "kill_policy"),
            "is not supported: give the task's kill_policy when launching it",
        )
    return Kill(id_value(kill, "task_id", path, required=True), id_value(kill, "agent_id", path))


def _acknowledge(value: Any, path: str) -> Acknowledge:
    ack = _required(value, path, "Call.Acknowledge", ("agent_id", "task_id", "uuid"))
    agent_id = id_value(ack, "agent_id", path, required=True)
    task_id = id_value(ack, "task_id", path, required=True)
    uuid = raw_bytes(ack, "uuid", path)
    if uuid is None:
        raise BadCall(at(path, "uuid"), "is required")
    if len(uuid) != UUID_BYTES:
        raise BadCall(at(path, "uuid"), f"is {len(uuid)} bytes, not a UUID's {UUID_BYTES}")
    return Acknowledge(agent_id, task_id, uuid)


def _reconcile(value: Any, path: str) -> Reconcile:
    reconcile = _optional(value, path, "Call.Reconcile", ("tasks",))
    tasks = []
    for index, item in enumerate(array(reconcile, "tasks", path)):
        where = f"{path}.tasks[{index}]"
        task = fields(item, where, "Call.Reconcile.Task", ("task_id", "agent_id"))
        tasks.append((id_value(task, "task_id", where, True), id_value(task, "agent_id", where)))
    return Reconcile(tuple(tasks))


def _teardown(value: Any, path: str) -> Teardown:
    return Teardown()


_BODIES: Final[dict[str, Callable[[Any, str], Body]]] = {
    "SUBSCRIBE": _subscribe,
    "TEARDOWN": _teardown,
    "ACCEPT": _accept,
    "DECLINE": _decline,
    "REVIVE": _revive,
    "SUPPRESS": _suppress,
    "KILL": _kill,
    "ACKNOWLEDGE": _acknowledge,
    "RECONCILE": _reconcile,
}
