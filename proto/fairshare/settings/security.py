"""The resolved security settings turned into what the transport uses: a client's
``ClientSecurity`` and ``EtcdSecurity``, a daemon's ``Authenticator``.

Invariants: every file is read here, before the command talks or the daemon serves; a value
that cannot be used, or values that do not fit together, raise ``SettingsError`` naming the flag
(``--token-file``, ``--tls-cert/--tls-key``, ``--etcd-password-file``, ``--credentials``). The
transport and credentials modules (which import grpc) are imported only when called: a command
that never talks to a master does not load them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairshare.settings.setting import SettingsError

if TYPE_CHECKING:  # the transport imports grpc: only commands that talk to a master need it
    from fairshare.etcd_security import EtcdSecurity
    from fairshare.rpc_guard import Authenticator
    from fairshare.transport import ClientSecurity, ServerSecurity

__all__ = ["client_security", "etcd_security", "server_authentication"]


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
