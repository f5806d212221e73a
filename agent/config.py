"""Settings of ``fairshare agent``: one table, resolved by the kernel (``fairshare.settings``).

``AGENT_SETTINGS`` gives the agent's flags (``--work-dir``) and each setting's variable
(``FAIRSHARE_AGENT_WORK_DIR``; for the shared ``master``, ``log_level`` and ``log_format`` also
``FAIRSHARE_MASTER``, ``FAIRSHARE_LOG_LEVEL``, ``FAIRSHARE_LOG_FORMAT``) and TOML key (in the
``[agent]`` table of ``--config``, ``FAIRSHARE_AGENT_CONFIG`` or ``FAIRSHARE_CONFIG``; shared keys
may sit at the file's top level). Flags win over variables, variables over the file, the file
over the defaults; ``--master`` defaults to 127.0.0.1:5050.

Invariants: ``resolve`` either returns fully validated ``AgentSettings`` or raises
``SettingsError`` whose message names where the bad value came from (``--resources``,
``FAIRSHARE_AGENT_RESOURCES`` or ``resources in FILE``) and what is wrong with it. Resource and
attribute names follow the wire alphabet (lower case ``[a-z0-9_.-]``, starting with a letter).

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

Without ``--resources`` the agent offers this host's (``host_resources``): ``cpus`` counts the
CPUs this process may run on (its affinity mask when the OS has one), ``mem`` is MemTotal of
/proc/meminfo (else physical pages times page size), ``disk`` the total size of the file system
holding the work dir, all in whole units (MiB); the probe never raises for an unusual host, and
a resource it cannot measure is left out rather than guessed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from fairshare.command import is_user_name
from fairshare.etcd_security import EtcdSecurity
from fairshare.resources import ResourceVector
from fairshare.roles import DEFAULT_ROLE, RoleError, check_role
from fairshare.rpc_guard import Authenticator
from fairshare.setting_tables import SERVER_TLS_SETTINGS, table_defaults
from fairshare.settings import (
    ETCD_SECURITY_SETTINGS,
    SHARED_SETTINGS,
    WIRE_NAME,
    Setting,
    SettingsError,
    boolean,
    choice,
    duration,
    etcd_security,
    file_path,
    non_empty_text,
    port,
    positive_duration,
    positive_int,
    resolve_settings,
    resource_vector,
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

from agent.tasks.isolation.modes import MODES
from agent.tasks.users import DEFAULT_TASK_USER

__all__ = [
    "AGENT_SETTINGS",
    "AgentSecurity",
    "AgentSettings",
    "check_reservations_fit",
    "host_resources",
    "load_security",
    "parse_attributes",
    "parse_reservations",
    "resolve",
]


@dataclass(frozen=True, slots=True)
class AgentSecurity:
    """How the agent reaches the master, how its ports serve, who may call them."""

    master: ClientSecurity = INSECURE
    server: ServerSecurity = PLAINTEXT
    authenticator: Authenticator = field(default_factory=Authenticator)


def parse_attributes(text: str) -> tuple[tuple[str, str], ...]:
    """``rack:r1;zone:a`` -> ``(("rack", "r1"), ("zone", "a"))``; ``ValueError`` if bad."""
    entries = [part.strip() for part in text.split(";")]
    if entries and not entries[-1]:
        entries.pop()  # tolerate one trailing ';' (and the empty text)
    out: dict[str, str] = {}
    for position, entry in enumerate(entries, start=1):
        if entry.count(":") != 1:
            raise ValueError(f"entry {position} {entry!r} is not NAME:VALUE")
        name, value = (piece.strip() for piece in entry.split(":"))
        if not WIRE_NAME.match(name):
            raise ValueError(
                f"attribute name {name!r} must be lower case [a-z0-9_.-], starting with a letter"
            )
        if not value:
            raise ValueError(f"attribute {name!r} has an empty value")
        if name in out:
            raise ValueError(f"attribute {name!r} is given twice")
        out[name] = value
    return tuple(out.items())


def _user_name(raw: Any) -> str:
    name = non_empty_text(raw)
    if not is_user_name(name):
        raise ValueError(f"{name!r} is not a user name ([A-Za-z_][A-Za-z0-9_.-]{{0,31}})")
    return name


def parse_reservations(text: str) -> tuple[tuple[str, ResourceVector], ...]:
    """``eng=cpus:4;mem:8192,sci=cpus:2`` -> ``(("eng", ...), ("sci", ...))`` sorted by role;
    ``ValueError`` naming the entry and the rule it breaks."""
    out: dict[str, ResourceVector] = {}
    for position, entry in enumerate((e.strip() for e in text.split(",")), start=1):
        if not entry:
            continue
        role, equals, amount = (piece.strip() for piece in entry.partition("="))
        if not equals:
            raise ValueError(f"entry {position} {entry!r} is not ROLE=RESOURCES")
        try:
            role = check_role(role, f"entry {position}: role")
        except RoleError as error:
            raise ValueError(str(error)) from None
        if role == DEFAULT_ROLE:
            raise ValueError(f"entry {position}: '*' is the unreserved role; name a role path")
        if role in out:
            raise ValueError(f"role {role!r} is reserved twice")
        out[role] = resource_vector(amount)
    return tuple(sorted(out.items()))


def _reservations(raw: Any) -> tuple[tuple[str, ResourceVector], ...]:
    if not isinstance(raw, str):
        raise ValueError(f"{raw!r} is not a string like 'eng=cpus:4;mem:8192,sci=cpus:2'")
    return parse_reservations(raw)


def check_reservations_fit(
    reserve: tuple[tuple[str, ResourceVector], ...], resources: ResourceVector
) -> None:
    """``SettingsError`` naming --reserve when the reservations do not fit the resources."""
    reserved = sum((r for _, r in reserve), ResourceVector())
    if not reserved.fits_in(resources):
        raise SettingsError(
            f"--reserve: {reserved} reserved in all is more than the agent's resources {resources}"
        )


def _attributes(raw: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, str):
        raise ValueError(f"{raw!r} is not a string like 'rack:r1;zone:a'")
    return parse_attributes(raw)


AGENT_SETTINGS: Final = (
    *SHARED_SETTINGS,
    Setting(
        "resources",
        resource_vector,
        None,
        "resources offered, e.g. 'cpus:8;mem:16384' (default: this host's CPUs, memory, disk);"
        " an agent with gpus is offered only to GPU-capable frameworks",
    ),
    Setting("attributes", _attributes, "", "attributes, e.g. 'rack:r1;zone:a'"),
    Setting(
        "reserve",
        _reservations,
        "",
        "static reservations: resources offered only to a role path and the roles below it,"
        " e.g. 'eng=cpus:4;mem:8192,sci=cpus:2' (within --resources)",
        metavar="ROLE=RESOURCES[,...]",
    ),
    Setting("host", non_empty_text, "127.0.0.1", "address to bind"),
    Setting("port", port, 0, "gRPC (health) port, 0 picks a free one"),
    Setting("metrics_port", port, 9101, "HTTP port of /metrics and /health, 0 picks a free one"),
    Setting(
        "work_dir",
        non_empty_text,
        "./fairshare-agent",
        "state directory: the checkpoint (agent.sqlite), command tasks' sandboxes and runs",
        metavar="DIR",
    ),
    Setting("hostname", non_empty_text, None, "name reported to the master (default: this host's)"),
    Setting(
        "status_update_retry",
        positive_duration,
        "1s",
        "first retry of an unacknowledged status update, doubling up to 60s",
        metavar="DURATION",
    ),
    Setting(
        "isolation",
        choice(*MODES),
        None,
        "how command tasks are confined: cgroups (memory and CPU limits), rlimits (address"
        " space only) or none (default: the strongest available)",
        choices=MODES,
    ),
    Setting(
        "kill_grace_period",
        duration,
        "3s",
        "time between SIGTERM and SIGKILL when a command task is killed (unless it sets one)",
        metavar="DURATION",
    ),
    Setting(
        "sandbox_gc_delay",
        positive_duration,
        "168h",
        "remove a finished command task's sandbox this long after it ended",
        metavar="DURATION",
    ),
    Setting(
        "sandbox_disk_budget",
        positive_int,
        10240,
        "MiB the sandboxes of finished tasks may take; the oldest go first when over",
        metavar="MIB",
    ),
    Setting(
        "task_user",
        _user_name,
        DEFAULT_TASK_USER,
        "OS user a command task runs as when it names none (an agent running as root switches"
        " every task to an unprivileged user; one not running as root runs them as itself)",
        metavar="USER",
    ),
    Setting(
        "allow_root_tasks",
        boolean,
        False,
        "let command tasks run as a user of uid 0 (the master's run_tasks ACL must also name"
        " user root); off: such a task is refused with TASK_ERROR",
        switch=True,
    ),
    Setting(
        "tls_ca",
        file_path,
        None,
        "CA bundle (PEM) that signed the master's certificate (TLS to the master)",
        metavar="FILE",
    ),
    Setting(
        "tls_client_ca",
        file_path,
        None,
        "CA bundle (PEM) of the client certificates this agent's ports verify and require"
        " (mutual TLS; needs --tls-cert); unset: its ports ask for none",
        metavar="FILE",
    ),
    *SERVER_TLS_SETTINGS,
    Setting(
        "token_file",
        file_path,
        None,
        "file holding this agent's token PRINCIPAL:SECRET for the master (instead of a"
        " certificate)",
        metavar="FILE",
    ),
    Setting(
        "tls_server_name",
        non_empty_text,
        None,
        "name to check in the master's certificate (default: the host of --master)",
        metavar="NAME",
    ),
    Setting(
        "credentials",
        file_path,
        None,
        "credentials file: this agent's HTTP port accepts the tokens (and basic auth) it lists",
        metavar="FILE",
    ),
    Setting(
        "allow_insecure",
        boolean,
        False,
        "serve a --host other than loopback without TLS and authentication",
        switch=True,
    ),
    *ETCD_SECURITY_SETTINGS,
)
"""The settings of ``fairshare agent``, in the order ``--help`` shows them."""

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


# -- this host's resources (the default --resources) -----------------------------------------------

_MIB = 1024 * 1024


def _cpus() -> int | None:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or None
    return os.cpu_count()


def _mem_mib(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024  # kB -> MiB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // _MIB
    except (AttributeError, ValueError, OSError):
        return None


def _disk_mib(work_dir: Path) -> int | None:
    try:
        return shutil.disk_usage(work_dir).total // _MIB
    except OSError:
        return None


def host_resources(work_dir: Path) -> ResourceVector:
    """``cpus``, ``mem`` and ``disk`` of this host (disk of the file system of ``work_dir``)."""
    found = {"cpus": _cpus(), "mem": _mem_mib(), "disk": _disk_mib(work_dir)}
    return ResourceVector({name: value for name, value in found.items() if value})
