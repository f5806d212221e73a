"""Settings of every command and daemon: one resolver, one environment scheme, one duration syntax.

A command declares its settings as a table of ``Setting`` (name, parser, default, help); this
module adds their flags to its argument parser and resolves each value from four sources,
highest first (docs/architecture.md §7):

1. the command-line flag (``--work-dir``);
2. the environment: ``FAIRSHARE_<COMMAND>_<NAME>`` (``FAIRSHARE_MASTER_PORT``,
   ``FAIRSHARE_AGENT_WORK_DIR``), or for settings every command shares ``FAIRSHARE_<NAME>``
   (``FAIRSHARE_MASTER`` the master's address, ``FAIRSHARE_LOG_LEVEL``, ``FAIRSHARE_LOG_FORMAT``);
3. the TOML file named by ``--config``, ``FAIRSHARE_<COMMAND>_CONFIG`` or ``FAIRSHARE_CONFIG``:
   the command's table (``[master]``, ``[agent]``, ``[run]``, ...), then, for shared settings,
   the top level;
4. the default.

Invariants:
- a flag left unset is ``None`` in the parsed arguments and never overrides a lower source;
- every value is parsed and checked whatever its source; a bad one raises ``SettingsError`` whose
  message names the source (``--port``, ``FAIRSHARE_MASTER_PORT``, ``port in FILE``) and the
  reason; commands print it and exit 2;
- a key in the command's TOML table that is not one of its settings is an error, and so is a
  top-level key that is not a shared setting (typos never pass silently); other commands' tables
  are ignored, and so are top-level shared settings the command does not have (``master`` for
  the master daemon).

Durations everywhere accept plain seconds or a unit suffix: ``500ms``, ``15s``, ``2m``, ``1h``,
``7d``, ``2w``.

Every client command (``status``, ``run``, the operator commands) also has the shared
``CLIENT_SECURITY_SETTINGS`` (``--tls-ca``, ``--tls-cert``/``--tls-key``, ``--token-file``,
``--tls-server-name``; ``FAIRSHARE_TLS_CA`` and so on, or top-level keys of the file), turned into
one ``fairshare.transport.ClientSecurity`` by ``client_security``; and, for finding the leader
in etcd, the ``ETCD_SECURITY_SETTINGS`` (``--etcd-tls-ca``, ``--etcd-tls-cert``/``--etcd-tls-key``,
``--etcd-user`` with ``--etcd-password-file`` or ``FAIRSHARE_ETCD_PASSWORD``), which the
masters and agents have too (``etcd_security``).
"""

from __future__ import annotations

import argparse
import math
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # the transport imports grpc: only commands that talk to a master need it
    from fairshare.etcd_security import EtcdSecurity
    from fairshare.rpc_guard import Authenticator
    from fairshare.transport import ClientSecurity, ServerSecurity

from fairshare.master_target import MasterTarget
from fairshare.resources import ResourceError, ResourceVector

__all__ = [
    "CLIENT_SECURITY_SETTINGS",
    "CLIENT_SETTINGS",
    "ENV_PREFIX",
    "ETCD_SECURITY_SETTINGS",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "SHARED_SETTINGS",
    "WIRE_NAME",
    "Setting",
    "SettingsError",
    "add_setting_flags",
    "boolean",
    "choice",
    "client_security",
    "duration",
    "env_name",
    "etcd_security",
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
    "resolve_settings",
    "resource_vector",
    "server_authentication",
    "share",
]

ENV_PREFIX: Final = "FAIRSHARE_"
LOG_FORMATS: Final = ("text", "json")
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR")
DEFAULT_MASTER: Final = "127.0.0.1:5050"
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


# -- parsers ---------------------------------------------------------------------------------------


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


SHARED_SETTINGS: Final = (
    Setting(
        "master",
        master_address,
        DEFAULT_MASTER,
        "the master's HOST:PORT; HA masters as a list a:5050,b:5050,c:5050 or"
        " etcd://HOST:2379,...[/prefix] (the leader is found, and followed when it changes)",
        shared=True,
        metavar="HOST:PORT[,...]",
    ),
    Setting(
        "log_level",
        log_level,
        "INFO",
        "least severe level logged: DEBUG, INFO, WARNING or ERROR, in any case",
        shared=True,
        metavar="LEVEL",
    ),
    Setting(
        "log_format",
        choice(*LOG_FORMATS),
        "text",
        "stderr log lines: text, or one JSON object each (keys ts, level, event, fields)",
        shared=True,
        choices=LOG_FORMATS,
    ),
)
"""Settings every command has: where the master is and how to log."""

CLIENT_SECURITY_SETTINGS: Final = (
    Setting(
        "tls_ca",
        existing_file,
        None,
        "CA bundle (PEM) that signed the master's certificate: talk to it over TLS",
        shared=True,
        metavar="FILE",
    ),
    Setting(
        "tls_cert",
        existing_file,
        None,
        "this client's certificate (PEM) for mutual TLS; its common name is the principal",
        shared=True,
        metavar="FILE",
    ),
    Setting("tls_key", existing_file, None, "the key of --tls-cert", shared=True, metavar="FILE"),
    Setting(
        "token_file",
        existing_file,
        None,
        "file holding this client's token, one line PRINCIPAL:SECRET (the master's credentials"
        " file holds its salted hash)",
        shared=True,
        metavar="FILE",
    ),
    Setting(
        "tls_server_name",
        non_empty_text,
        None,
        "name to check in the master's certificate (default: the host of --master)",
        shared=True,
        metavar="NAME",
    ),
)
"""How a client command authenticates to the master and verifies it (``client_security``)."""

ETCD_SECURITY_SETTINGS: Final = (
    Setting(
        "etcd_tls_ca",
        existing_file,
        None,
        "CA bundle (PEM) that signed etcd's certificates: talk to etcd over TLS",
        shared=True,
        metavar="FILE",
    ),
    Setting(
        "etcd_tls_cert",
        existing_file,
        None,
        "this process's client certificate (PEM) for etcd (etcd's --client-cert-auth)",
        shared=True,
        metavar="FILE",
    ),
    Setting(
        "etcd_tls_key",
        existing_file,
        None,
        "the key of --etcd-tls-cert",
        shared=True,
        metavar="FILE",
    ),
    Setting(
        "etcd_user",
        non_empty_text,
        None,
        "etcd user (etcd authentication); its password from --etcd-password-file or"
        " FAIRSHARE_ETCD_PASSWORD",
        shared=True,
        metavar="NAME",
    ),
    Setting(
        "etcd_password_file",
        existing_file,
        None,
        "file whose first line is the password of --etcd-user",
        shared=True,
        metavar="FILE",
    ),
    Setting(
        "etcd_password",
        non_empty_text,
        None,
        "the password of --etcd-user (FAIRSHARE_ETCD_PASSWORD only: never a flag)",
        shared=True,
        flag=False,
    ),
)
"""How a process reaches etcd: the masters' ``--registry etcd://...`` and every client's
``--master etcd://...`` (``etcd_security``)."""

CLIENT_SETTINGS: Final = (*SHARED_SETTINGS, *CLIENT_SECURITY_SETTINGS, *ETCD_SECURITY_SETTINGS)
"""The settings of a command that only talks to the master (the operator commands)."""


def client_security(values: Mapping[str, Any]) -> ClientSecurity:
    """The ``ClientSecurity`` of resolved ``CLIENT_SECURITY_SETTINGS`` values; raises
    ``SettingsError`` naming the flag when they do not fit together or a file is unusable."""
    from fairshare.transport import ClientSecurity, SecurityError, read_token

    etcd = etcd_security(values)
    token = None
    if values.get("token_file") is not None:
        try:
            token = read_token(values["token_file"])
        except SecurityError as error:
            raise SettingsError(f"--token-file: {error}") from None
    try:
        return ClientSecurity(
            ca=values.get("tls_ca"),
            cert=values.get("tls_cert"),
            key=values.get("tls_key"),
            token=token,
            server_name=values.get("tls_server_name"),
            etcd=etcd,
        )
    except SecurityError as error:
        flag = "--tls-ca" if values.get("tls_ca") is None else "--tls-cert/--tls-key"
        raise SettingsError(f"{flag}: {error}") from None


def etcd_security(values: Mapping[str, Any]) -> EtcdSecurity:
    """The ``EtcdSecurity`` of resolved ``ETCD_SECURITY_SETTINGS`` values (the password from
    the file, else ``etcd_password``); ``SettingsError`` naming the flag when they do not fit
    together or the password file cannot be used."""
    from fairshare.etcd_security import EtcdSecurity, read_password

    password = values.get("etcd_password")
    if values.get("etcd_password_file") is not None:
        try:
            password = read_password(values["etcd_password_file"])
        except ValueError as error:
            raise SettingsError(f"--etcd-password-file: {error}") from None
    try:
        return EtcdSecurity(
            ca=values.get("etcd_tls_ca"),
            cert=values.get("etcd_tls_cert"),
            key=values.get("etcd_tls_key"),
            user=values.get("etcd_user"),
            password=password,
        )
    except ValueError as error:
        raise SettingsError(f"--etcd-tls-ca/--etcd-tls-cert/--etcd-user: {error}") from None


def server_authentication(server: ServerSecurity, credentials: Path | None) -> Authenticator:
    """Who may call a daemon's ports: reads ``server``'s TLS files and the ``--credentials``
    file now (before the daemon serves), client certificates counting when ``server`` verifies
    them; raises ``SettingsError`` naming the flag of a file that cannot be used."""
    from fairshare.credentials import Credentials, CredentialsError
    from fairshare.rpc_guard import Authenticator
    from fairshare.transport import SecurityError

    try:
        if server.tls:
            server.credentials()
    except SecurityError as error:
        raise SettingsError(f"--tls-cert/--tls-key/--tls-ca: {error}") from None
    loaded = None
    if credentials is not None:
        try:
            loaded = Credentials.load(credentials)
        except CredentialsError as error:
            raise SettingsError(f"--credentials: {error}") from None
    return Authenticator(loaded, certificates=server.tls and server.ca is not None)


# -- flags and resolution --------------------------------------------------------------------------


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
