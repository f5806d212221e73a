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

The package's parts: ``setting`` (``Setting``, ``SettingsError``), ``parsers`` (value parsers,
durations), ``shared`` (the tables every command or client shares), ``security`` (their values
turned into the transport's security), ``resolver`` (flags and resolution). Import from
``fairshare.settings``: it holds every public name.
"""

from fairshare.settings.parsers import (
    LOG_FORMATS,
    LOG_LEVELS,
    WIRE_NAME,
    boolean,
    choice,
    duration,
    existing_file,
    file_path,
    log_level,
    master_address,
    non_empty_text,
    optional_positive_duration,
    parse_duration,
    port,
    positive_duration,
    positive_int,
    positive_number,
    resource_vector,
    share,
)
from fairshare.settings.resolver import add_setting_flags, resolve_settings
from fairshare.settings.security import client_security, etcd_security, server_authentication
from fairshare.settings.setting import ENV_PREFIX, Setting, SettingsError, env_name
from fairshare.settings.shared import (
    CLIENT_SECURITY_SETTINGS,
    CLIENT_SETTINGS,
    DEFAULT_MASTER,
    ETCD_SECURITY_SETTINGS,
    SHARED_SETTINGS,
)

__all__ = [
    "CLIENT_SECURITY_SETTINGS",
    "CLIENT_SETTINGS",
    "DEFAULT_MASTER",
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
