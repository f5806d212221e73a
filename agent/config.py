"""Settings of ``fairshare agent``: flags > ``FAIRSHARE_*`` environment > TOML file > defaults.

Each setting has a flag (``--work-dir``), an environment variable (``FAIRSHARE_WORK_DIR``) and a
TOML key (``work_dir`` or ``work-dir``). The TOML file is ``--config`` or ``FAIRSHARE_CONFIG``;
its keys are read from its ``[agent]`` table when it has one, else from its top level (tables of
other daemons, e.g. ``[master]``, are ignored).

Invariants: ``resolve`` either returns fully validated ``AgentSettings`` or raises
``ConfigError`` whose message names where the bad value came from (``--resources``,
``FAIRSHARE_RESOURCES`` or ``resources in FILE``) and what is wrong with it. Resource and
attribute names follow the wire alphabet (lower case ``[a-z0-9_.-]``, starting with a letter).
"""

from __future__ import annotations

import argparse
import re
import socket
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from fairshare.resources import ResourceError, ResourceVector

__all__ = ["AgentSettings", "ConfigError", "parse_attributes", "parse_resources", "resolve"]

_WIRE_NAME: Final = re.compile(r"^[a-z][a-z0-9_.\-]*$")
_DURATION: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


class ConfigError(ValueError):
    """A setting is missing or invalid; the message names its source."""


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """Validated settings of one agent daemon."""

    master: str
    resources: ResourceVector | None  # None: probe this host
    attributes: tuple[tuple[str, str], ...]
    host: str
    port: int
    metrics_port: int
    work_dir: Path
    hostname: str
    log_format: str
    status_update_retry: float


def parse_resources(text: str) -> ResourceVector:
    """``cpus:8;mem:16384`` -> vector; non-empty, wire-alphabet names; ``ValueError`` if bad."""
    try:
        vector = ResourceVector.parse(text)
    except ResourceError as error:
        raise ValueError(str(error)) from None
    if not vector:
        raise ValueError("no resources given (e.g. 'cpus:8;mem:16384')")
    for name in vector:
        if not _WIRE_NAME.match(name):
            raise ValueError(f"resource name {name!r} must be lower case [a-z0-9_.-]")
    return vector


def parse_attributes(text: str) -> tuple[tuple[str, str], ...]:
    """``rack:r1;zone:a`` -> ``(("rack", "r1"), ("zone", "a"))``; ``ValueError`` if bad."""
    entries = [part.strip() for part in text.split(";")]
    if entries and not entries[-1]:
        entries.pop()  # tolerate one trailing ';' (and the empty text)
    out: dict[str, str] = {}
    for position, entry in enumerate(entries, start=1):
        if entry.count(":") != 1:
            raise ValueError(f"entry {position} {entry!r} is not NAME:VALUE")
        name, value = (piece.strip() for piece in entry.split(":"))
        if not _WIRE_NAME.match(name):
            raise ValueError(
                f"attribute name {name!r} must be lower case [a-z0-9_.-], starting with a letter"
            )
        if not value:
            raise ValueError(f"attribute {name!r} has an empty value")
        if name in out:
            raise ValueError(f"attribute {name!r} is given twice")
        out[name] = value
    return tuple(out.items())


def _master(raw: Any) -> str:
    text = _string(raw)
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT")
    return text


def _string(raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError(f"{raw!r} is not a non-empty string")
    return raw.strip()


def _port(raw: Any) -> int:
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw < 65536:
        raise ValueError(f"{raw!r} is not a port number (0-65535)")
    return raw


def _duration(raw: Any) -> float:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        seconds = float(raw)
    else:
        match = _DURATION.match(raw) if isinstance(raw, str) else None
        if match is None:
            raise ValueError(f"{raw!r} is not a duration (seconds, or '500ms', '2s', '1m')")
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if not seconds > 0:
        raise ValueError(f"{raw!r} must be positive")
    return seconds


def _log_format(raw: Any) -> str:
    if raw not in ("text", "json"):
        raise ValueError(f"{raw!r} is not one of text, json")
    return str(raw)


def _resources(raw: Any) -> ResourceVector:
    if not isinstance(raw, str):
        raise ValueError(f"{raw!r} is not a string like 'cpus:8;mem:16384'")
    return parse_resources(raw)


def _attributes(raw: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, str):
        raise ValueError(f"{raw!r} is not a string like 'rack:r1;zone:a'")
    return parse_attributes(raw)


# setting -> (parser of a raw value, default; None = no default)
_SETTINGS: Final[dict[str, tuple[Callable[[Any], Any], Any]]] = {
    "master": (_master, None),
    "resources": (_resources, None),
    "attributes": (_attributes, ""),
    "host": (_string, "127.0.0.1"),
    "port": (_port, 0),
    "metrics_port": (_port, 9101),
    "work_dir": (_string, "./fairshare-agent"),
    "hostname": (_string, None),
    "log_format": (_log_format, "text"),
    "status_update_retry": (_duration, "1s"),
}


def _load_toml(path: str) -> tuple[dict[str, Any], str]:
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except OSError as error:
        raise ConfigError(f"--config {path}: cannot read it: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"--config {path}: not valid TOML: {error}") from None
    table = document.get("agent", document)
    if not isinstance(table, dict):
        raise ConfigError(f"--config {path}: [agent] must be a table")
    values: dict[str, Any] = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if isinstance(value, dict) and table is document:
            continue  # another daemon's table
        if name not in _SETTINGS:
            known = ", ".join(sorted(_SETTINGS))
            raise ConfigError(f"--config {path}: unknown key {key!r} (known: {known})")
        values[name] = value
    return values, path


def _raw_value(
    name: str, args: argparse.Namespace, env: Mapping[str, str], toml: dict[str, Any], path: str
) -> tuple[Any, str] | None:
    """(raw value, its source) from the first source that sets ``name``."""
    flag_value = getattr(args, name, None)
    if flag_value is not None:
        return flag_value, "--" + name.replace("_", "-")
    env_name = "FAIRSHARE_" + name.upper()
    if env_name in env:
        return env[env_name], env_name
    if name in toml:
        return toml[name], f"{name} in {path}"
    return None


def resolve(args: argparse.Namespace, env: Mapping[str, str]) -> AgentSettings:
    """The agent's settings from flags, ``FAIRSHARE_*`` variables, the TOML file and defaults."""
    config_path = getattr(args, "config", None) or env.get("FAIRSHARE_CONFIG")
    toml, path = _load_toml(config_path) if config_path else ({}, "")
    values: dict[str, Any] = {}
    for name, (parse, default) in _SETTINGS.items():
        found = _raw_value(name, args, env, toml, path)
        if found is None:
            values[name] = parse(default) if default is not None else None
            continue
        raw, source = found
        try:
            values[name] = parse(raw)
        except ValueError as error:
            raise ConfigError(f"{source} {_shown(raw)}: {error}") from None
    if values["master"] is None:
        raise ConfigError(
            "--master HOST:PORT is required (or FAIRSHARE_MASTER, or master in the config file)"
        )
    values["hostname"] = values["hostname"] or socket.gethostname()
    values["work_dir"] = Path(values["work_dir"])
    return AgentSettings(**values)


def _shown(raw: Any) -> str:
    return repr(raw) if isinstance(raw, str) else str(raw)
