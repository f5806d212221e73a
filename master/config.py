"""``MasterConfig``: the master daemon's settings, resolved from four sources (DESIGN.md §8).

Precedence, highest first: command-line flags, environment variables ``FAIRSHARE_MASTER_<NAME>``
(``FAIRSHARE_LOG_FORMAT`` and ``FAIRSHARE_LOG_LEVEL`` also apply to every daemon), the TOML file
named by ``--config`` (keys of a ``[master]`` table, or top-level keys; ``-`` or ``_`` in names),
then the defaults below. Durations accept plain seconds or a unit suffix (``500ms``, ``15s``).

Invariants: a flag left unset is ``None`` in the parsed arguments and never overrides a lower
source; every value is checked whatever its source, and a bad one raises ``ConfigError`` naming
the source and the setting; unknown TOML keys are errors (typos never pass silently).
"""

from __future__ import annotations

import argparse
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from master.cli import parse_duration

__all__ = ["ConfigError", "MasterConfig", "load_config"]

ENV_PREFIX = "FAIRSHARE_MASTER_"
SHARED_ENV = {"log_format": "FAIRSHARE_LOG_FORMAT", "log_level": "FAIRSHARE_LOG_LEVEL"}


class ConfigError(ValueError):
    """A setting that cannot be used; the message names its source."""


@dataclass(frozen=True, slots=True)
class MasterConfig:
    """Every setting of ``fairshare master``."""

    host: str = "127.0.0.1"
    port: int = 5050
    metrics_port: int = 9100
    work_dir: str = "./fairshare-master"
    policy: str = "drf"
    placement: str = "best-fit"
    allocation_interval: float = 1.0
    agent_timeout: float = 15.0
    reregistration_timeout: float = 20.0
    registry_sync: str = "full"
    offer_timeout: float | None = None
    heartbeat_interval: float = 5.0
    shutdown_grace: float = 5.0
    log_format: str = "text"
    log_level: str = "INFO"
    validate: bool = False
    fault_drop_acks: float = 0.0  # tests only (no flag): share of acknowledgements to drop


def _share(value: Any) -> float:
    share = float(value)
    if not 0.0 <= share < 1.0:
        raise ValueError(f"{value!r} is not a share in [0, 1)")
    return share


def _port(value: Any) -> int:
    port = int(value)
    if not 0 <= port <= 65535:
        raise ValueError(f"{port} is not a port number (0-65535)")
    return port


def _seconds(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        try:
            seconds = parse_duration(str(value))
        except argparse.ArgumentTypeError as error:
            raise ValueError(str(error)) from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{value!r} is not a non-negative duration")
    return seconds


def _positive_seconds(value: Any) -> float:
    seconds = _seconds(value)
    if seconds <= 0:
        raise ValueError(f"{value!r} must be more than zero")
    return seconds


def _optional_seconds(value: Any) -> float | None:
    if value is None or (isinstance(value, str) and value.lower() in ("", "none", "off")):
        return None
    return _positive_seconds(value)


def _choice(*allowed: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        text = str(value)
        if text not in allowed:
            raise ValueError(f"{text!r} is not one of {', '.join(allowed)}")
        return text

    return check


def _level(value: Any) -> str:
    return _choice("DEBUG", "INFO", "WARNING", "ERROR")(str(value).upper())


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{value!r} is not a boolean")


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{value!r} is not a non-empty string")
    return value


PARSERS: dict[str, Callable[[Any], Any]] = {
    "host": _text,
    "port": _port,
    "metrics_port": _port,
    "work_dir": _text,
    "policy": _choice("drf", "asset", "pf", "slots"),
    "placement": _choice("best-fit", "first-fit", "random"),
    "allocation_interval": _positive_seconds,
    "agent_timeout": _positive_seconds,
    "reregistration_timeout": _seconds,
    "registry_sync": _choice("full", "normal"),
    "fault_drop_acks": _share,
    "offer_timeout": _optional_seconds,
    "heartbeat_interval": _positive_seconds,
    "shutdown_grace": _seconds,
    "log_format": _choice("text", "json"),
    "log_level": _level,
    "validate": _bool,
}


def _parse(name: str, value: Any, source: str) -> Any:
    try:
        return PARSERS[name](value)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{source}: {name.replace('_', '-')}: {error}") from None


def _toml_values(path: str) -> dict[str, Any]:
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None
    table = data.get("master", data)
    if not isinstance(table, dict):
        raise ConfigError(f"config file {path}: [master] must be a table")
    values = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in PARSERS:
            if table is data and isinstance(value, dict):
                continue  # another daemon's table, e.g. [agent]
            raise ConfigError(f"config file {path}: unknown setting {key!r}")
        values[name] = _parse(name, value, f"config file {path}")
    return values


def load_config(args: argparse.Namespace, environ: Mapping[str, str]) -> MasterConfig:
    """Resolve the settings: flags > environment > TOML file > defaults."""
    values: dict[str, Any] = {}
    config_file = getattr(args, "config", None) or environ.get(f"{ENV_PREFIX}CONFIG")
    if config_file:
        values.update(_toml_values(config_file))
    for item in fields(MasterConfig):
        name = item.name
        for variable in (f"{ENV_PREFIX}{name.upper()}", SHARED_ENV.get(name)):
            if variable and variable in environ:
                values[name] = _parse(name, environ[variable], f"environment {variable}")
                break
        flag = getattr(args, name, None)
        if flag is not None:
            values[name] = _parse(name, flag, f"--{name.replace('_', '-')}")
    return MasterConfig(**values)
