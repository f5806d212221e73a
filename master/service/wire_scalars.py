"""The wire's scalar values checked on the way in: names, resources, durations, timestamps,
enum numbers, refuse filters and role paths (the building blocks of ``master.service.convert``
and ``master.service.task_convert``).

Invariants: every ``*``-from-wire function here either returns a value within the wire contract
or raises ``InvalidArgument`` naming the field (nothing else escapes: the adapters map it to
INVALID_ARGUMENT and no state changes); resource names are narrower than ``ResourceVector``'s
(lower case, starting with a letter); a text field is at most ``MAX_NAME`` characters unless a
caller gives another bound.
"""

from __future__ import annotations

import math
import re

from fairshare.resources import ResourceError, ResourceVector
from fairshare.roles import RoleError
from fairshare.roles import check_role as check_role_path
from fairshare.v1 import common_pb2
from fairshare.wire import (
    WireRangeError,
    duration_to_pb,
    resources_from_pb,
    seconds_from_duration,
    seconds_from_timestamp,
    timestamp_to_pb,
)
from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from master.core.errors import InvalidArgument

__all__ = [
    "MAX_NAME",
    "MAX_REFUSE_SECONDS",
    "NAME_RE",
    "check_role",
    "duration",
    "duration_seconds",
    "enum_name",
    "refuse_seconds",
    "resources",
    "text",
    "timestamp",
    "timestamp_seconds",
]

NAME_RE = re.compile(r"^[a-z][a-z0-9_.\-]*$")
MAX_REFUSE_SECONDS = 31_536_000.0
MAX_NAME = 256
"""Characters of an id, a name, a role, a principal or a hostname at most (a 100k-character
name is not a name: it is a way to make every GetState large)."""


def text(value: str, what: str, most: int = MAX_NAME) -> str:
    """``value`` if it has at most ``most`` characters (INVALID_ARGUMENT naming it if not)."""
    if len(value) > most:
        raise InvalidArgument(f"{what} has {len(value)} characters; at most {most}")
    return value


def resources(message: common_pb2.Resources, what: str) -> ResourceVector:
    """A ``Resources`` message as a vector; bad names, negatives and duplicates are refused.

    The master accepts a narrower set of names than ``ResourceVector`` (lower case, starting with
    a letter); everything else is ``framework_sdk.wire.resources_from_pb``'s checks.
    """
    for item in message.items:
        if not NAME_RE.match(item.name):
            raise InvalidArgument(
                f"{what}: resource name {item.name!r} is malformed (lower case [a-z0-9_.-],"
                " starting with a letter)"
            )
    try:
        return resources_from_pb(message)
    except ResourceError as error:
        raise InvalidArgument(f"{what}: {error}") from None


def duration_seconds(message: Duration, what: str) -> float:
    """A Duration in seconds, in [0, ``fairshare.wire.MAX_SECONDS``]."""
    try:
        return seconds_from_duration(message, what)
    except WireRangeError as error:
        raise InvalidArgument(str(error)) from None


def timestamp_seconds(message: Timestamp, what: str) -> float:
    """A Timestamp in seconds since the epoch, between 1970 and 9999."""
    try:
        return seconds_from_timestamp(message, what)
    except WireRangeError as error:
        raise InvalidArgument(str(error)) from None


def duration(seconds: float) -> Duration:
    """Seconds as a Duration."""
    return duration_to_pb(seconds)


def timestamp(seconds: float) -> Timestamp:
    """Wall-clock seconds as a Timestamp."""
    return timestamp_to_pb(seconds)


def enum_name(enum: EnumDescriptor, value: int, what: str) -> str:
    """The name of ``value`` in ``enum`` (INVALID_ARGUMENT naming ``what`` for an unknown
    number)."""
    described = enum.values_by_number.get(value)
    if described is None:
        raise InvalidArgument(f"{what}: unknown enum number {value}")
    return described.name


def refuse_seconds(filters: common_pb2.Filters, present: bool) -> float | None:
    """``Filters.refuse_seconds`` (``None``: the master default); finite, in [0, 1 year]."""
    if not present or not filters.HasField("refuse_seconds"):
        return None
    value = filters.refuse_seconds
    if not math.isfinite(value) or not 0 <= value <= MAX_REFUSE_SECONDS:
        raise InvalidArgument(f"filters.refuse_seconds must be in [0, {MAX_REFUSE_SECONDS:.0f}]")
    return value


def check_role(role: str, what: str = "role") -> str:
    """A role path (``eng``, ``eng/dev``; ``fairshare.roles``'s syntax), ``"*"`` for empty;
    ``InvalidArgument`` naming ``what`` and the rule it breaks."""
    try:
        return check_role_path(role, what)
    except RoleError as error:
        raise InvalidArgument(str(error)) from None
