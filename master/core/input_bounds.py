"""Bounds on the free-form parts of what peers write: a task's labels (at Accept, and in an
agent's reregistration), an agent's attributes, resource names and static reservations (at
registration and reregistration). Every check raises ``InvalidArgument`` naming the field and
its bound, so nothing the master keeps, and nothing it sends on (an offer, a GetState), grows
without a bound because one peer wrote much (docs/security.md, "Limits").

Invariants: pure checks of values already decoded (no state); sizes are counted in UTF-8
bytes where the wire counts bytes, in characters where a name rule counts characters; every
bound is generous for Mesos-style use (labels and attributes of a few dozen short entries).
"""

from __future__ import annotations

from collections.abc import Iterable, Sized
from typing import Final

from master.core.errors import InvalidArgument

__all__ = [
    "MAX_AGENT_RESERVATIONS",
    "MAX_AGENT_RESOURCE_NAMES",
    "MAX_ATTRIBUTES",
    "MAX_ATTRIBUTES_BYTES",
    "MAX_ATTRIBUTE_VALUE",
    "MAX_LABELS",
    "MAX_LABELS_BYTES",
    "MAX_LABEL_KEY",
    "MAX_LABEL_VALUE",
    "MAX_RESOURCE_NAME",
    "check_agent_resources",
    "check_attributes",
    "check_labels",
    "check_reservations",
]

MAX_LABELS: Final = 128
"""Labels of one task."""
MAX_LABEL_KEY: Final = 256
"""Characters of a label's key."""
MAX_LABEL_VALUE: Final = 4096
"""Characters of a label's value."""
MAX_LABELS_BYTES: Final = 65_536
"""UTF-8 bytes of one task's labels, keys and values together (64 KiB)."""
MAX_ATTRIBUTES: Final = 128
"""Attributes of one agent."""
MAX_ATTRIBUTE_VALUE: Final = 1024
"""Characters of an attribute's value (names are at most 256, as every name)."""
MAX_ATTRIBUTES_BYTES: Final = 65_536
"""UTF-8 bytes of one agent's attributes, names and values together (64 KiB)."""
MAX_AGENT_RESOURCE_NAMES: Final = 32
"""Distinct resource names one agent reports."""
MAX_RESOURCE_NAME: Final = 64
"""Characters of a resource name."""
MAX_AGENT_RESERVATIONS: Final = 64
"""Static reservations (roles) one agent declares."""


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def check_labels(labels: Iterable[tuple[str, str]], what: str) -> None:
    """``what``'s labels (``task 'x': labels``) within the label bounds."""
    total = 0
    for count, (key, value) in enumerate(labels, 1):
        if count > MAX_LABELS:
            raise InvalidArgument(f"{what}: more than {MAX_LABELS} labels")
        if len(key) > MAX_LABEL_KEY:
            raise InvalidArgument(
                f"{what}: label key of {len(key)} characters; at most {MAX_LABEL_KEY}"
            )
        if len(value) > MAX_LABEL_VALUE:
            raise InvalidArgument(
                f"{what}: label {key[:64]!r} has a value of {len(value)} characters; at most"
                f" {MAX_LABEL_VALUE}"
            )
        total += _utf8(key) + _utf8(value)
        if total > MAX_LABELS_BYTES:
            raise InvalidArgument(f"{what}: more than {MAX_LABELS_BYTES} bytes of labels")


def check_attributes(attributes: Iterable[tuple[str, str]], what: str) -> None:
    """An agent's attributes (``agent_info.attributes``) within the attribute bounds."""
    total = 0
    for count, (name, value) in enumerate(attributes, 1):
        if count > MAX_ATTRIBUTES:
            raise InvalidArgument(f"{what}: more than {MAX_ATTRIBUTES} attributes")
        if len(value) > MAX_ATTRIBUTE_VALUE:
            raise InvalidArgument(
                f"{what}: attribute {name[:64]!r} has a value of {len(value)} characters; at"
                f" most {MAX_ATTRIBUTE_VALUE}"
            )
        total += _utf8(name) + _utf8(value)
        if total > MAX_ATTRIBUTES_BYTES:
            raise InvalidArgument(f"{what}: more than {MAX_ATTRIBUTES_BYTES} bytes of attributes")


def check_agent_resources(names: Iterable[str], what: str) -> None:
    """An agent's resource names (or a demand's): at most ``MAX_AGENT_RESOURCE_NAMES``, each at most
    ``MAX_RESOURCE_NAME`` characters."""
    for seen, name in enumerate(names, 1):
        if len(name) > MAX_RESOURCE_NAME:
            raise InvalidArgument(
                f"{what}: resource name {name[:64]!r}... has {len(name)} characters; at most"
                f" {MAX_RESOURCE_NAME}"
            )
        if seen > MAX_AGENT_RESOURCE_NAMES:
            raise InvalidArgument(f"{what}: more than {MAX_AGENT_RESOURCE_NAMES} resource names")


def check_reservations(reservations: Sized, what: str) -> None:
    """At most ``MAX_AGENT_RESERVATIONS`` static reservations on one agent."""
    if len(reservations) > MAX_AGENT_RESERVATIONS:
        raise InvalidArgument(
            f"{what}: {len(reservations)} reservations; at most {MAX_AGENT_RESERVATIONS}"
        )
