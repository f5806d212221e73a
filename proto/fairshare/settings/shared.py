"""The settings several commands share, declared once.

``SHARED_SETTINGS`` (``--master``, ``--log-level``, ``--log-format``) every command has;
every client command (``status``, ``run``, the operator commands) also has the
``CLIENT_SECURITY_SETTINGS`` (``--tls-ca``, ``--tls-cert``/``--tls-key``, ``--token-file``,
``--tls-server-name``; ``FAIRSHARE_TLS_CA`` and so on, or top-level keys of the file), and, for
finding the leader in etcd, the ``ETCD_SECURITY_SETTINGS`` (``--etcd-tls-ca``,
``--etcd-tls-cert``/``--etcd-tls-key``, ``--etcd-user`` with ``--etcd-password-file`` or
``FAIRSHARE_ETCD_PASSWORD``), which the masters and agents have too. ``fairshare.settings.security``
turns their resolved values into a ``ClientSecurity`` or ``EtcdSecurity``.

Invariants: every setting here is ``shared`` (read from ``FAIRSHARE_<NAME>`` and the TOML top
level too); the resolver accepts exactly these names, and a command's own shared settings, at
the file's top level.
"""

from __future__ import annotations

from typing import Final

from fairshare.settings.parsers import (
    LOG_FORMATS,
    choice,
    existing_file,
    log_level,
    master_address,
    non_empty_text,
)
from fairshare.settings.setting import Setting

__all__ = [
    "CLIENT_SECURITY_SETTINGS",
    "CLIENT_SETTINGS",
    "DEFAULT_MASTER",
    "ETCD_SECURITY_SETTINGS",
    "SHARED_SETTINGS",
]

DEFAULT_MASTER: Final = "127.0.0.1:5050"


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
