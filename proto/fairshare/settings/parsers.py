"""The parsers of setting values: each turns a raw value (a string from a flag or the
environment, any TOML value) into the setting's value or raises ``ValueError`` saying why.

Durations everywhere accept plain seconds or a unit suffix: ``500ms``, ``15s``, ``2m``, ``1h``,
``7d``, ``2w``.

Invariants: a parser never reads a source itself and names no flag (the resolver adds where the
value came from); it checks the value whatever its source (a TOML number or the text of a flag
alike); only ``existing_file`` touches the file system (it opens the file to check it can be
read).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Final

from fairshare.master_target import MasterTarget
from fairshare.resources import ResourceError, ResourceVector
from fairshare.settings.setting import Parser

__all__ = [
    "LOG_FORMATS",
    "LOG_LEVELS",
    "WIRE_NAME",
    "boolean",
    "choice",
    "duration",
    "existing_file",
    "file_path",
    "log_level",
    "master_address",
    "non_empty_text",
    "optional_positive_duration",
    "parse_duration",
    "port",
    "positive_duration",
    "positive_int",
    "positive_number",
    "resource_vector",
    "share",
]

LOG_FORMATS: Final = ("text", "json")
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR")
_DURATION_RE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_SECONDS: Final = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
    None: 1.0,
}


def parse_duration(text: str) -> float:
    """Seconds in ``text``: plain seconds or a unit suffix (``500ms``, ``15s``, ``2m``, ``1h``,
    ``7d``, ``2w``)."""
    match = _DURATION_RE.match(text) if isinstance(text, str) else None
    if not match:
        raise ValueError(
            f"{text!r} is not a duration (plain seconds or with ms, s, m, h, d, w: '500ms', '15s',"
            " '2m')"
        )
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def duration(raw: Any) -> float:
    """A non-negative, finite duration in seconds (a number or duration text)."""
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a duration")
    seconds = float(raw) if isinstance(raw, (int, float)) else parse_duration(str(raw))
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{raw!r} is not a non-negative duration")
    return seconds


WIRE_NAME: Final = re.compile(r"^[a-z][a-z0-9_.\-]*$")
"""Resource and attribute names as the wire carries them: lower case, starting with a letter."""


def resource_vector(raw: Any) -> ResourceVector:
    """``cpus:8;mem:16384`` -> a non-empty vector of wire-alphabet names; ``ValueError`` if
    bad."""
    if not isinstance(raw, str):
        raise ValueError(f"{raw!r} is not a string like 'cpus:8;mem:16384'")
    try:
        vector = ResourceVector.parse(raw)
    except ResourceError as error:
        raise ValueError(str(error)) from None
    if not vector:
        raise ValueError("no resources given (e.g. 'cpus:8;mem:16384')")
    for name in vector:
        if not WIRE_NAME.match(name):
            raise ValueError(f"resource name {name!r} must be lower case [a-z0-9_.-]")
    return vector


def positive_duration(raw: Any) -> float:
    """A duration above zero."""
    seconds = duration(raw)
    if seconds <= 0:
        raise ValueError(f"{raw!r} must be more than zero")
    return seconds


def optional_positive_duration(raw: Any) -> float | None:
    """A duration above zero, or ``None`` for ``none``/``off``/empty."""
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "none", "off")):
        return None
    return positive_duration(raw)


def port(raw: Any) -> int:
    """A TCP port number, 0 picking a free one."""
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= 65535:
        raise ValueError(f"{raw!r} is not a port number (0-65535)")
    return raw


def share(raw: Any) -> float:
    """A fraction in [0, 1)."""
    value = _number(raw)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{raw!r} is not a share in [0, 1)")
    return value


def _number(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise ValueError(f"{raw!r} is not a number")
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a number") from None


def positive_number(raw: Any) -> float:
    """A finite number above zero."""
    value = _number(raw)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{raw!r} is not a finite number > 0")
    return value


def positive_int(raw: Any) -> int:
    """A whole number, at least 1."""
    value = int(raw) if isinstance(raw, str) and raw.strip().lstrip("-").isdigit() else raw
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{raw!r} is not a whole number")
    if value < 1:
        raise ValueError(f"{raw!r} must be at least 1")
    return value


def non_empty_text(raw: Any) -> str:
    """A non-empty string, stripped."""
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError(f"{raw!r} is not a non-empty string")
    return raw.strip()


def file_path(raw: Any) -> Path:
    """A path to a file, checked when the file is used (daemons read theirs before serving and
    name the flag if it cannot be used)."""
    return Path(non_empty_text(raw)).expanduser()


def existing_file(raw: Any) -> Path:
    """A path to a readable file."""
    path = Path(non_empty_text(raw)).expanduser()
    if not path.is_file():
        raise ValueError(f"{str(path)!r} is not a file")
    try:
        with path.open("rb"):
            pass
    except OSError as error:
        raise ValueError(f"{str(path)!r} cannot be read: {error.strerror}") from None
    return path


def boolean(raw: Any) -> bool:
    """``true/false``, ``yes/no``, ``on/off``, ``1/0``."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{raw!r} is not a boolean")


def choice(*allowed: str) -> Parser:
    """A parser accepting exactly one of ``allowed``."""

    def check(raw: Any) -> str:
        text = str(raw)
        if text not in allowed:
            raise ValueError(f"{text!r} is not one of {', '.join(allowed)}")
        return text

    return check


def log_level(raw: Any) -> str:
    """A log level name, any case."""
    text: str = choice(*LOG_LEVELS)(str(raw).upper())
    return text


def master_address(raw: Any) -> str:
    """Where the master is: ``HOST:PORT``, a list ``a:5050,b:5050`` of HA masters, or
    ``etcd://HOST:PORT,...[/prefix]`` (``fairshare.master_target``), normalized."""
    return str(MasterTarget.parse(non_empty_text(raw)))
