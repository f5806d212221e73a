"""Reading Mesos's JSON form of its protobuf messages field by field, every error naming the field.

The Mesos v1 scheduler API (``master.web.mesos_scheduler``) takes calls as JSON, the protobuf
JSON mapping of Mesos's ``scheduler.proto`` and ``mesos.proto``: messages are objects, ids are
``{"value": "..."}``, enums are their names, ``bytes`` are base64, 64-bit integers are numbers
or decimal strings. The helpers here read one field each and raise ``BadCall`` naming it with its
whole path (``accept.operations[0].launch.task_infos[1].task_id.value``), which the API answers
400 with, having changed nothing.

Invariants: pure (no I/O); a JSON ``null`` is the field's absence; a key that is not a field of
the message is refused (``fields``), so a misspelt or unsupported field is never ignored; strings
are at most ``MAX_TEXT`` characters unless said otherwise; numbers are finite (``loads`` refuses
``NaN`` and ``Infinity``) and never booleans.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Collection
from typing import Any, Final, NoReturn

__all__ = [
    "MAX_TEXT",
    "BadCall",
    "JsonObject",
    "array",
    "at",
    "boolean",
    "child",
    "enum",
    "fields",
    "id_value",
    "integer",
    "loads",
    "number",
    "raw_bytes",
    "string",
    "strings",
]

MAX_TEXT: Final = 256
"""Characters of an id, a name, a role, a principal or a hostname at most (as the gRPC API)."""

JsonObject = dict[str, Any]


class BadCall(ValueError):
    """A call Mesos's JSON form does not allow, or fairshare does not take: 400 naming ``field``."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem


def _no_constant(name: str) -> NoReturn:
    raise BadCall("", f"the body is not JSON: {name} is not a JSON number")


def loads(body: bytes) -> Any:
    """The JSON document of a request body (``BadCall`` if it is not UTF-8 JSON)."""
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError as error:
        raise BadCall("", f"the body is not UTF-8: {error.reason} at byte {error.start}") from None
    except json.JSONDecodeError as error:
        raise BadCall("", f"the body is not JSON: {error.msg} at character {error.pos}") from None
    except RecursionError:
        raise BadCall("", "the body is not JSON this master reads: nested too deeply") from None


def at(path: str, key: str) -> str:
    """``path.key`` (``key`` alone at the top)."""
    return f"{path}.{key}" if path else key


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def fields(value: Any, path: str, message: str, known: Collection[str]) -> JsonObject:
    """``value`` as a message ``message`` (a JSON object) whose keys are all in ``known``."""
    if not isinstance(value, dict):
        raise BadCall(path, f"expected {message} (a JSON object), got {_kind(value)}")
    for key in value:
        if key not in known:
            raise BadCall(at(path, key), f"is not a field of {message}")
    return value


def child(
    document: JsonObject, key: str, path: str, message: str, known: Collection[str]
) -> JsonObject | None:
    """The sub-message ``key`` (None when absent)."""
    value = document.get(key)
    return None if value is None else fields(value, at(path, key), message, known)


def string(
    document: JsonObject, key: str, path: str, required: bool = False, most: int = MAX_TEXT
) -> str:
    """The string ``key`` (``""`` when absent; a required one must be non-empty)."""
    value = document.get(key)
    where = at(path, key)
    if value is None:
        if required:
            raise BadCall(where, "is required")
        return ""
    if not isinstance(value, str):
        raise BadCall(where, f"expected a string, got {_kind(value)}")
    if required and not value:
        raise BadCall(where, "is empty")
    if len(value) > most:
        raise BadCall(where, f"has {len(value)} characters; at most {most}")
    if "\x00" in value:
        raise BadCall(where, "contains a NUL character")
    return value


def id_value(document: JsonObject, key: str, path: str, required: bool = False) -> str:
    """An id message ``{"value": "..."}`` (``""`` when absent and not required)."""
    value = document.get(key)
    if value is None:
        if required:
            raise BadCall(at(path, key), "is required")
        return ""
    message = fields(value, at(path, key), 'an id ({"value": ...})', ("value",))
    return string(message, "value", at(path, key), required=True)


def number(document: JsonObject, key: str, path: str, required: bool = False) -> float | None:
    """The double ``key`` (None when absent)."""
    value = document.get(key)
    where = at(path, key)
    if value is None:
        if required:
            raise BadCall(where, "is required")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadCall(where, f"expected a number, got {_kind(value)}")
    result = float(value)
    if result != result or result in (float("inf"), float("-inf")):  # a huge integer literal
        raise BadCall(where, f"{value!r} is not a finite number")
    return result


def integer(document: JsonObject, key: str, path: str) -> int | None:
    """The 64-bit integer ``key``: a number without fraction or a decimal string (None when
    absent)."""
    value = document.get(key)
    where = at(path, key)
    if value is None:
        return None
    result: Any = value
    if isinstance(value, str):
        try:
            result = int(value, 10)
        except ValueError:
            raise BadCall(where, f"{value[:40]!r} is not an integer") from None
    elif isinstance(value, float) and value.is_integer():
        result = int(value)
    if isinstance(result, bool) or not isinstance(result, int):
        raise BadCall(where, f"expected an integer, got {_kind(value)}")
    if not -(2**63) <= result < 2**63:
        raise BadCall(where, "is out of the range of a 64-bit integer")
    return result


def boolean(document: JsonObject, key: str, path: str) -> bool | None:
    """The boolean ``key`` (None when absent)."""
    value = document.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise BadCall(at(path, key), f"expected true or false, got {_kind(value)}")
    return value


def array(document: JsonObject, key: str, path: str, most: int = 100_000) -> list[Any]:
    """The repeated field ``key`` (``[]`` when absent)."""
    value = document.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadCall(at(path, key), f"expected an array, got {_kind(value)}")
    if len(value) > most:
        raise BadCall(at(path, key), f"has {len(value)} entries; at most {most}")
    return value


def strings(document: JsonObject, key: str, path: str) -> list[str]:
    """The repeated string ``key``."""
    values = array(document, key, path, most=1000)
    return [_item_string(v, f"{at(path, key)}[{i}]") for i, v in enumerate(values)]


def _item_string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise BadCall(where, f"expected a string, got {_kind(value)}")
    if len(value) > MAX_TEXT:
        raise BadCall(where, f"has {len(value)} characters; at most {MAX_TEXT}")
    return value


def enum(
    document: JsonObject, key: str, path: str, names: Collection[str], required: bool = False
) -> str | None:
    """The enum ``key`` by name (None when absent); a name not in ``names`` is refused."""
    value = document.get(key)
    where = at(path, key)
    if value is None:
        if required:
            raise BadCall(where, "is required")
        return None
    if not isinstance(value, str):
        raise BadCall(where, f"expected an enum name (a string), got {_kind(value)}")
    if value not in names:
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise BadCall(where, f"{shown!r} is not one of {', '.join(sorted(names))}")
    return value


def raw_bytes(document: JsonObject, key: str, path: str) -> bytes | None:
    """The ``bytes`` field ``key``, base64 in JSON (None when absent)."""
    value = document.get(key)
    where = at(path, key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadCall(where, f"expected base64 (a string), got {_kind(value)}")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise BadCall(where, "is not base64") from None
