"""The settings table of ``fairshare agent`` (``AGENT_SETTINGS``) and the parsers of its own
values (attributes, static reservations, the task user).

``AGENT_SETTINGS`` gives the agent's flags (``--work-dir``) and each setting's variable
(``FAIRSHARE_AGENT_WORK_DIR``; for the shared ``master``, ``log_level`` and ``log_format`` also
``FAIRSHARE_MASTER``, ``FAIRSHARE_LOG_LEVEL``, ``FAIRSHARE_LOG_FORMAT``) and TOML key (in the
``[agent]`` table of ``--config``, ``FAIRSHARE_AGENT_CONFIG`` or ``FAIRSHARE_CONFIG``; shared keys
may sit at the file's top level). Flags win over variables, variables over the file, the file
over the defaults; ``--master`` defaults to 127.0.0.1:5050.

Invariants: every value is checked by its setting's parser whatever its source (a bad one is a
``SettingsError`` naming the flag, variable or key: ``fairshare.settings``); resource and
attribute names follow the wire alphabet (lower case ``[a-z0-9_.-]``, starting with a letter);
a reservation names a role path other than ``*``, once. ``agent.config`` builds
``AgentSettings`` from the resolved values and reads its defaults from this table.
"""

from __future__ import annotations

from typing import Any, Final

from fairshare.command import is_user_name
from fairshare.resources import ResourceVector
from fairshare.roles import DEFAULT_ROLE, RoleError, check_role
from fairshare.setting_tables import SERVER_TLS_SETTINGS
from fairshare.settings import (
    ETCD_SECURITY_SETTINGS,
    SHARED_SETTINGS,
    WIRE_NAME,
    Setting,
    boolean,
    choice,
    duration,
    file_path,
    non_empty_text,
    port,
    positive_duration,
    positive_int,
    resource_vector,
)

from agent.tasks.isolation.modes import MODES
from agent.tasks.users import DEFAULT_TASK_USER

__all__ = ["AGENT_SETTINGS", "parse_attributes", "parse_reservations"]


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
