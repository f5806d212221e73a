"""``Setting``: one declared setting of a command, and the error a bad value raises.

A command's settings are a table of ``Setting`` (name, parser, default, help);
``fairshare.settings.resolver`` adds their flags and resolves their values, the parsers of
``fairshare.settings.parsers`` check them.

Invariants: a ``Setting`` is an immutable declaration; its flag is ``--`` + its name with
dashes, its own environment variable ``FAIRSHARE_<COMMAND>_<NAME>`` (``env_name``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["ENV_PREFIX", "Parser", "Setting", "SettingsError", "env_name"]

ENV_PREFIX: Final = "FAIRSHARE_"


class SettingsError(ValueError):
    """A setting that cannot be used; the message names its source and the reason."""


Parser = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting of a command.

    ``parse`` turns a raw value (a string from a flag or the environment, any TOML value) into
    the setting's value or raises ``ValueError``; ``default`` is a raw value parsed the same way
    (``None``: no default, the value is ``None`` unless a source sets it). ``shared`` settings
    are read from ``FAIRSHARE_<NAME>`` and the TOML top level too. ``switch`` settings are flags
    without a value (``--validate``). ``flag=False`` settings come only from the environment or
    the file (fault injection for tests).
    """

    name: str
    parse: Parser
    default: Any = None
    help: str = ""
    shared: bool = False
    switch: bool = False
    flag: bool = True
    metavar: str | None = None
    choices: tuple[str, ...] | None = None

    @property
    def flag_name(self) -> str:
        """``--work-dir`` for ``work_dir``."""
        return "--" + self.name.replace("_", "-")


def env_name(command: str, setting: Setting) -> str:
    """The command's own environment variable of ``setting``: ``FAIRSHARE_MASTER_PORT``."""
    return f"{ENV_PREFIX}{command.upper()}_{setting.name.upper()}"
