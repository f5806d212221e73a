"""Settings of ``fairshare agent``: its table (``agent.settings``), resolved by the kernel
(``fairshare.settings``) into ``AgentSettings``, and the security they describe.

Invariants: ``resolve`` either returns fully validated ``AgentSettings`` or raises
``SettingsError`` whose message names where the bad value came from (``--resources``,
``FAIRSHARE_AGENT_RESOURCES`` or ``resources in FILE``) and what is wrong with it; the
reservations fit the resources when they are given, and the security flags fit together (their
files are read by ``load_security``, before the agent serves or registers anything).

Security (docs/security.md): two separate settings say whom the agent trusts and whom it
verifies: ``--tls-ca`` is the CA that signed the master's certificate (the agent talks TLS to
it), ``--tls-client-ca`` the CA whose client certificates its own ports verify and require
(mutual TLS on them; unset, its ports serve TLS without asking for one, so a token-only client
reaches its log service, which checks the master's grants anyway); ``--tls-cert``/``--tls-key``
are the agent's identity to the master (the certificate's common name is its principal) and its
ports' certificate; ``--token-file`` is the other way to say who it is. ``--credentials`` lets
its HTTP port accept tokens and basic auth. Its ports (health, metrics) bind loopback unless
they serve TLS with authentication (``--tls-client-ca`` or ``--credentials``), or
``--allow-insecure``. ``--task-user`` (default ``nobody``) is who a command task naming no user
runs as, and ``--allow-root-tasks`` (off) whether any task may run as uid 0
(``agent.tasks.users``); the daemon checks both before it serves (exit 2 naming the flag).

Without ``--resources`` the agent offers this host's (``agent.host_resources``).
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from fairshare.etcd_security import EtcdSecurity
from fairshare.resources import ResourceVector
from fairshare.rpc_guard import Authenticator
from fairshare.setting_tables import table_defaults
from fairshare.settings import (
    ETCD_SECURITY_SETTINGS,
    SettingsError,
    etcd_security,
    resolve_settings,
    server_authentication,
)
from fairshare.transport import (
    INSECURE,
    PLAINTEXT,
    ClientSecurity,
    SecurityError,
    ServerSecurity,
    is_loopback,
    read_token,
)

from agent.settings import AGENT_SETTINGS

__all__ = [
    "AgentSecurity",
    "AgentSettings",
    "check_reservations_fit",
    "load_security",
    "resolve",
]


@dataclass(frozen=True, slots=True)
class AgentSecurity:
    """How the agent reaches the master, how its ports serve, who may call them."""

    master: ClientSecurity = INSECURE
    server: ServerSecurity = PLAINTEXT
    authenticator: Authenticator = field(default_factory=Authenticator)


def check_reservations_fit(
    reserve: tuple[tuple[str, ResourceVector], ...], resources: ResourceVector
) -> None:
    """``SettingsError`` naming --reserve when the reservations do not fit the resources."""
    reserved = sum((r for _, r in reserve), ResourceVector())
    if not reserved.fits_in(resources):
        raise SettingsError(
            f"--reserve: {reserved} reserved in all is more than the agent's resources {resources}"
        )


_DEFAULT: Final = table_defaults(AGENT_SETTINGS)
_ETCD_DEFAULT: Final = etcd_security(_DEFAULT)  # the etcd_* settings' defaults, folded


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """Validated settings of one agent daemon: a field per entry of ``AGENT_SETTINGS``; the
    optional ones take their defaults from the table."""

    master: str
    resources: ResourceVector | None  # None: probe this host
    attributes: tuple[tuple[str, str], ...]
    host: str
    port: int
    metrics_port: int
    work_dir: Path
    hostname: str
    log_format: str
    log_level: str
    status_update_retry: float
    isolation: str | None  # None: the strongest available
    kill_grace_period: float
    sandbox_gc_delay: float
    sandbox_disk_budget: int  # MiB
    tls_ca: Path | None = _DEFAULT["tls_ca"]
    tls_client_ca: Path | None = _DEFAULT["tls_client_ca"]
    tls_cert: Path | None = _DEFAULT["tls_cert"]
    tls_key: Path | None = _DEFAULT["tls_key"]
    token_file: Path | None = _DEFAULT["token_file"]
    tls_server_name: str | None = _DEFAULT["tls_server_name"]
    credentials: Path | None = _DEFAULT["credentials"]
    allow_insecure: bool = _DEFAULT["allow_insecure"]
    task_user: str = _DEFAULT["task_user"]
    allow_root_tasks: bool = _DEFAULT["allow_root_tasks"]
    reserve: tuple[tuple[str, ResourceVector], ...] = _DEFAULT["reserve"]  # static reservations
    # The one field that is not a setting: the ``etcd_*`` settings folded into one value,
    # reading the leader from --master etcd://...
    etcd: EtcdSecurity = _ETCD_DEFAULT


def resolve(args: argparse.Namespace, env: Mapping[str, str]) -> AgentSettings:
    """The agent's settings from flags, ``FAIRSHARE_*`` variables, the TOML file and defaults."""
    values = resolve_settings("agent", AGENT_SETTINGS, args, env)
    values["hostname"] = values["hostname"] or socket.gethostname()
    values["work_dir"] = Path(values["work_dir"])
    etcd = etcd_security(values)
    for setting in ETCD_SECURITY_SETTINGS:
        del values[setting.name]
    settings = AgentSettings(**values, etcd=etcd)
    if settings.resources is not None:
        check_reservations_fit(settings.reserve, settings.resources)
    _server_security(settings)  # the flags fit together (the files are read by load_security)
    return settings


def load_security(settings: AgentSettings) -> AgentSecurity:
    """Read the security files of ``settings`` (``SettingsError`` naming the flag when one
    cannot be used): before the agent serves or registers anything."""
    server = _server_security(settings)
    authenticator = server_authentication(server, settings.credentials)
    return AgentSecurity(_master_security(settings), server, authenticator)


def _master_security(settings: AgentSettings) -> ClientSecurity:
    """How the agent reaches the master (``SettingsError`` naming the flag)."""
    token = None
    if settings.token_file is not None:
        try:
            token = read_token(settings.token_file)
        except SecurityError as error:
            raise SettingsError(f"--token-file: {error}") from None
    try:
        security = ClientSecurity(
            settings.tls_ca,
            settings.tls_cert,
            settings.tls_key,
            token,
            settings.tls_server_name,
            settings.etcd,
        )
        if security.tls:
            security.credentials()  # read the files now: a bad one stops the agent here
    except SecurityError as error:
        raise SettingsError(f"--tls-ca/--tls-cert/--tls-key: {error}") from None
    return security


def _server_security(settings: AgentSettings) -> ServerSecurity:
    """The agent's own ports: TLS with its certificate; client certificates required when a CA
    is given (``SettingsError`` naming the flag)."""
    if settings.tls_cert is None:
        if settings.credentials is not None:
            raise SettingsError("--credentials: tokens would travel in plaintext; add --tls-cert")
        if settings.tls_client_ca is not None:
            raise SettingsError("--tls-client-ca verifies clients of a TLS port: add --tls-cert")
        security = PLAINTEXT
    else:
        security = ServerSecurity(
            settings.tls_cert,
            settings.tls_key,
            settings.tls_client_ca,
            require_client_cert=settings.tls_client_ca is not None,
        )
    verified = settings.tls_client_ca is not None or settings.credentials is not None
    exposed = not (security.tls and verified) and not is_loopback(settings.host)
    if exposed and not settings.allow_insecure:
        raise SettingsError(
            f"--host {settings.host}: without TLS (--tls-cert/--tls-key) and authentication"
            " (--tls-client-ca or --credentials) anyone who reaches the agent's ports may"
            " read them; bind 127.0.0.1, secure it, or add --allow-insecure"
        )
    return security
