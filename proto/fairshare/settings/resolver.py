"""Flags and resolution: a command's settings resolved from four sources, highest first.

1. the command-line flag (``--work-dir``);
2. the environment: ``FAIRSHARE_<COMMAND>_<NAME>`` (``env_name``), or for shared settings
   ``FAIRSHARE_<NAME>`` too;
3. the TOML file named by ``--config``, ``FAIRSHARE_<COMMAND>_CONFIG`` or ``FAIRSHARE_CONFIG``:
   the command's table, then, for shared settings, the top level;
4. the default.

Invariants (the whole scheme: ``fairshare.settings``): a flag left unset is ``None`` and never
overrides a lower source; every value is parsed whatever its source, a bad one raising
``SettingsError`` naming its source and the reason; an unknown key of the command's table, or
a top-level key that is not a shared setting, is an error.
"""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fairshare.settings.setting import ENV_PREFIX, Setting, SettingsError, env_name
from fairshare.settings.shared import (
    CLIENT_SECURITY_SETTINGS,
    ETCD_SECURITY_SETTINGS,
    SHARED_SETTINGS,
)

__all__ = ["add_setting_flags", "resolve_settings"]


def _help(setting: Setting) -> str:
    if setting.switch or setting.default in (None, ""):
        return setting.help
    return f"{setting.help} (default {setting.default})"


def add_setting_flags(parser: argparse.ArgumentParser, settings: Sequence[Setting]) -> None:
    """Add a flag per setting (unset flags stay ``None``) and ``--config``."""
    for setting in settings:
        if not setting.flag:
            continue
        if setting.switch:
            parser.add_argument(
                setting.flag_name,
                dest=setting.name,
                action="store_const",
                const=True,
                help=setting.help,
            )
            continue
        parser.add_argument(
            setting.flag_name,
            dest=setting.name,
            metavar=setting.metavar or (None if setting.choices else setting.name.upper()),
            choices=setting.choices,
            help=_help(setting),
        )
    parser.add_argument(
        "--config",
        metavar="FILE.toml",
        help=f"TOML settings file (or {ENV_PREFIX}<COMMAND>_CONFIG, {ENV_PREFIX}CONFIG); flags and"
        " variables win over it",
    )


def _load_toml(
    path: str, source: str, command: str, known: Mapping[str, Setting]
) -> dict[str, Any]:
    """The values the file gives this command: shared top-level keys, then its table."""
    try:
        document = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise SettingsError(f"{source}: cannot read it: {error.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise SettingsError(f"{source}: not valid TOML: {error}") from None
    shared = {
        setting.name
        for setting in (*SHARED_SETTINGS, *CLIENT_SECURITY_SETTINGS, *ETCD_SECURITY_SETTINGS)
    }
    shared |= {name for name, setting in known.items() if setting.shared}
    table = document.get(command, {})
    if not isinstance(table, dict):
        if command not in shared:  # top-level ``master = "HOST:PORT"`` is not [master]
            raise SettingsError(f"{source}: [{command}] must be a table")
        table = {}
    values: dict[str, Any] = {}
    for key, value in document.items():
        name = key.replace("-", "_")
        if isinstance(value, dict):
            continue  # a command's table: this command's is read below
        if name not in shared:
            raise SettingsError(
                f"{source}: unknown top-level key {key!r} (the top level holds only the shared"
                f" settings {', '.join(sorted(shared))}; put {key!r} in a command's table,"
                f" e.g. [{command}])"
            )
        if name in known and known[name].shared:  # a daemon's own tls_cert is in its table
            values[name] = value
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in known:
            names = ", ".join(sorted(known))
            raise SettingsError(f"{source}: [{command}] has unknown key {key!r} (known: {names})")
        values[name] = value
    return values


def _config_file(
    command: str, args: argparse.Namespace, environ: Mapping[str, str]
) -> tuple[str, str] | None:
    """The settings file and where it was named: ``--config``, then the variables."""
    flag = getattr(args, "config", None)
    if flag:
        return flag, f"--config {flag}"
    for variable in (f"{ENV_PREFIX}{command.upper()}_CONFIG", f"{ENV_PREFIX}CONFIG"):
        if environ.get(variable):
            return environ[variable], f"{variable}={environ[variable]}"
    return None


def _shown(raw: Any) -> str:
    return repr(raw) if isinstance(raw, str) else str(raw)


def resolve_settings(
    command: str,
    settings: Sequence[Setting],
    args: argparse.Namespace,
    environ: Mapping[str, str],
) -> dict[str, Any]:
    """Every setting's value: flag > environment > TOML file > default (module docstring)."""
    known = {setting.name: setting for setting in settings}
    found = _config_file(command, args, environ)
    config_file = found[0] if found else None
    toml = _load_toml(found[0], found[1], command, known) if found else {}
    values: dict[str, Any] = {}
    for setting in settings:
        raw, source = _raw_value(command, setting, args, environ, toml, config_file)
        if raw is None:
            values[setting.name] = None
            continue
        try:
            values[setting.name] = setting.parse(raw)
        except (TypeError, ValueError) as error:
            raise SettingsError(f"{source} {_shown(raw)}: {error}") from None
    return values


def _raw_value(
    command: str,
    setting: Setting,
    args: argparse.Namespace,
    environ: Mapping[str, str],
    toml: Mapping[str, Any],
    config_file: str | None,
) -> tuple[Any, str]:
    """The raw value of ``setting`` from the first source that sets it, and that source."""
    flag = getattr(args, setting.name, None) if setting.flag else None
    if flag is not None:
        return flag, setting.flag_name
    variables = [env_name(command, setting)]
    if setting.shared:
        variables.append(f"{ENV_PREFIX}{setting.name.upper()}")
    for variable in variables:
        if variable in environ:
            return environ[variable], variable
    if setting.name in toml:
        return toml[setting.name], f"{setting.name} in {config_file}"
    return setting.default, f"default of {setting.flag_name}"
