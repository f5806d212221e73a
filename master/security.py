"""The master's security, built once from its settings (docs/architecture.md §6):
TLS of its ports, who
its callers are, what they may do, and one log line saying what it exposes.

- ``load_security(config)``: the ``ServerSecurity`` of both ports (client certificates verified
  and required when ``--tls-ca`` is given: gRPC has no optional client certificate), the
  ``Authenticator`` (certificates and/or the credentials file) and the ``Acl`` (``--acls``, or
  ``OPEN``; its principals checked against the authentication, ``master.acl_checks``), the
  key signing an etcd registry's rows (``--registry-key``, at least ``MIN_REGISTRY_KEY``
  bytes); a file that cannot be used raises ``SettingsError`` naming its flag, before anything
  is served;
- ``exposure(...)``: the fields and level of the one ``security.exposure`` line the master logs
  when it serves: where each port listens (the address bound, truly: ``0.0.0.0`` is all
  interfaces), TLS, authentication and ACL; WARNING when a port other than loopback is served
  without TLS and authentication (``--allow-insecure``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from fairshare.rpc_guard import Authenticator
from fairshare.settings import SettingsError, server_authentication
from fairshare.transport import SecurityError, ServerSecurity, is_loopback

from master.acl import OPEN, Acl, AclError
from master.acl_checks import check_principals
from master.config import MasterConfig

__all__ = ["MIN_REGISTRY_KEY", "MasterSecurity", "exposure", "load_security"]

MIN_REGISTRY_KEY = 32


@dataclass(frozen=True, slots=True)
class MasterSecurity:
    """TLS of the ports, the authenticator, the ACL."""

    server: ServerSecurity
    authenticator: Authenticator
    acl: Acl
    registry_key: bytes | None = None  # signs the etcd registry's rows (--registry-key)
    acl_warnings: tuple[str, ...] = ()
    """What the daemon logs (``acl.warning``) about principals the ACL names that no caller
    can be yet (``master.acl_checks``)."""


def load_security(config: MasterConfig) -> MasterSecurity:
    """The master's security from its settings (``SettingsError`` naming a flag if a file
    cannot be used)."""
    try:
        server = ServerSecurity(
            config.tls_cert,
            config.tls_key,
            config.tls_ca,
            require_client_cert=config.tls_ca is not None,
        )
    except SecurityError as error:
        raise SettingsError(f"--tls-cert/--tls-key/--tls-ca: {error}") from None
    authenticator = server_authentication(server, config.credentials)  # reads the files now
    acl = OPEN
    warnings: tuple[str, ...] = ()
    if config.acls is not None:
        try:
            acl = Acl.load(config.acls)
        except AclError as error:
            raise SettingsError(f"--acls: {error}") from None
        credentials = authenticator.credentials
        known = credentials.principals if credentials is not None else None
        findings = check_principals(acl, known, authenticator.certificates)
        if findings.errors:
            raise SettingsError(f"--acls: {findings.errors[0]}")
        warnings = tuple(findings.warnings)
    return MasterSecurity(server, authenticator, acl, _registry_key(config), warnings)


def _registry_key(config: MasterConfig) -> bytes | None:
    """The key of ``--registry-key`` (``SettingsError`` when unreadable or short)."""
    if config.registry_key is None:
        return None
    try:
        key = config.registry_key.read_bytes().strip()
    except OSError as error:
        raise SettingsError(f"--registry-key: cannot read {config.registry_key}: {error}") from None
    if len(key) < MIN_REGISTRY_KEY:
        raise SettingsError(
            f"--registry-key: {config.registry_key} holds {len(key)} bytes; a key has at least"
            f" {MIN_REGISTRY_KEY} (openssl rand -hex 32 > FILE)"
        )
    if not config.registry.startswith("etcd://"):
        raise SettingsError(
            "--registry-key: signs the rows of an etcd registry (--registry etcd://...)"
        )
    return key


def _where(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"{shown}:{port}"


def exposure(
    config: MasterConfig, security: MasterSecurity, grpc_port: int, http_port: int
) -> tuple[int, dict[str, Any]]:
    """The level and fields of the ``security.exposure`` line (module docstring)."""
    loopback = is_loopback(config.host)
    secured = security.server.tls and security.authenticator.required
    reach = (
        "loopback only"
        if loopback
        else "all interfaces"
        if config.host
        in (
            "0.0.0.0",
            "::",
            "[::]",
        )
        else f"interface {config.host}"
    )
    fields: dict[str, Any] = {
        "grpc": _where(config.host, grpc_port),
        "http": _where(config.host, http_port),
        "reachable": reach,
        "tls": security.server.mode,
        "authentication": security.authenticator.mode,
        "acl": str(config.acls) if config.acls is not None else "none (everything allowed)",
    }
    if config.registry.startswith("etcd://"):
        fields["etcd"] = config.etcd.describe()
        fields["registry_rows"] = "signed" if security.registry_key else "unsigned"
    if not secured and not loopback:
        fields["warning"] = "anyone who reaches these ports controls the cluster (--allow-insecure)"
        return logging.WARNING, fields
    return logging.INFO, fields
