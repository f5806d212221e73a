"""Settings tables as the one source of defaults, and the daemons' shared server TLS settings.

A daemon declares each setting once, as a ``fairshare.settings.Setting`` in a table: its name,
parser, default, help, choices and metavar. Config dataclasses do not repeat a default: they read
it from the table (``table_defaults``), and a config type of a lower layer (the runtime's limits,
the allocation core's config) is built from the resolved config by shared field names
(``built_from``), so a new setting whose name matches a field of such a type reaches it without a
per-setting copy.

Invariants:
- ``table_defaults`` parses every default with its setting's own parser, so a default is checked
  like any other value and a config built from the defaults equals one resolved from no source;
- ``built_from`` copies only fields the source dataclass declares (never properties) or keys of a
  mapping of resolved settings, under the target's field name, or a name given in ``renames`` /
  behind ``prefix``; ``overrides`` win.

``SERVER_TLS_SETTINGS`` (``--tls-cert``, ``--tls-key``: the certificate a daemon's ports serve)
are declared here once for the master and the agent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any, Final, TypeVar, cast

from fairshare.settings import Setting, file_path

__all__ = ["SERVER_TLS_SETTINGS", "built_from", "table_defaults"]

T = TypeVar("T")


def table_defaults(settings: Iterable[Setting]) -> dict[str, Any]:
    """Each setting's default, parsed by its own parser (``None`` stays ``None``)."""
    return {
        setting.name: None if setting.default is None else setting.parse(setting.default)
        for setting in settings
    }


def built_from(
    target: type[T],
    source: object,
    *,
    prefix: str = "",
    renames: Mapping[str, str] | None = None,
    **overrides: Any,
) -> T:
    """A ``target`` dataclass whose fields take the values of ``source``'s fields (or keys, for
    resolved settings in a mapping) of the same name (``prefix`` + the name, or
    ``renames[name]``); fields ``source`` lacks keep their defaults, ``overrides`` win over both."""
    renames = renames or {}
    if isinstance(source, Mapping):
        available: Mapping[str, Any] = source
    else:
        available = {field.name: getattr(source, field.name) for field in fields(cast(Any, source))}
    values: dict[str, Any] = {}
    for field in fields(cast(Any, target)):
        name = renames.get(field.name, prefix + field.name)
        if name in available:
            values[field.name] = available[name]
    values.update(overrides)
    return target(**values)


SERVER_TLS_SETTINGS: Final = (
    Setting(
        "tls_cert",
        file_path,
        None,
        "this daemon's certificate (PEM): its ports serve TLS (an agent also presents it to the"
        " master, which takes its common name as the agent's principal)",
        metavar="FILE",
    ),
    Setting("tls_key", file_path, None, "the key of --tls-cert (PEM)", metavar="FILE"),
)
"""A daemon's own TLS identity: the same flags, files and meaning for the master and the agent.
Which clients they verify differs (the master's ``--tls-ca``, the agent's ``--tls-client-ca``,
the agent's ``--tls-ca`` being the master's CA), so each declares that one itself."""
