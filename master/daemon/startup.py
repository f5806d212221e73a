"""What the master checks and writes around serving: its work dir's lock, the SQLite registry,
its ports, and the address file clients read.

Invariants:
- each check says why it fails in one line on stderr (the registry and the ports also as a log
  event) and returns None (or True: a port is taken) for the caller to exit 1; none raises for
  a work dir that cannot be used, a registry that must not be used, or a taken port;
- another master holding the work dir's lock is named, and nothing of its work dir is touched;
- ``write_addr`` writes ``HOST:PORT\\n`` atomically (tmp + rename): a reader sees the whole line
  or no file;
- the registry is opened, never reset: a missing, corrupt or newer-schema registry is refused.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from fairshare.logs import log_event
from fairshare.ports import port_problem
from fairshare.work_dir_lock import WorkDirLock, WorkDirLocked

from master.config import MasterConfig
from master.registry import Registry, RegistryError, SqliteRegistry

__all__ = [
    "ADDR_FILE",
    "PORT_HINTS",
    "connect_host",
    "lock_work_dir",
    "open_registry",
    "ports_taken",
    "write_addr",
]

log = logging.getLogger("fairshare.master")

ADDR_FILE = "master.addr"


def connect_host(host: str) -> str:
    """The host a client on this machine dials for a port bound to ``host`` (loopback for the
    wildcard addresses, an IPv6 address in brackets)."""
    if host in ("", "0.0.0.0", "::", "[::]"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def write_addr(work_dir: Path, address: str) -> Path:
    """Write ``address`` to ``work_dir/master.addr`` atomically."""
    path = work_dir / ADDR_FILE
    tmp = path.with_suffix(".addr.tmp")
    tmp.write_text(f"{address}\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def open_registry(config: MasterConfig) -> Registry | None:
    """The durable registry under the work dir; None (after saying why) if it must not be used."""
    work_dir = Path(config.work_dir)
    try:
        work_dir.mkdir(parents=True, exist_ok=True)
        return SqliteRegistry.open(work_dir, config.registry_sync.upper())
    except OSError as error:
        message = f"cannot use work dir {work_dir}: {error}"
    except RegistryError as error:
        message = str(error)
    log_event(log, "registry.failed", logging.ERROR, error=message)
    print(f"fairshare master: {message}", file=sys.stderr)
    return None


PORT_HINTS = {
    "--port": "another master? pick a free port, or 0 for any",
    "--metrics-port": "9100 is also node_exporter's default; pick a free port, or 0 for any",
}


def ports_taken(config: MasterConfig) -> bool:
    """Say (log and stderr, naming the flag) if a port cannot be listened on."""
    for flag, port in (("--port", config.port), ("--metrics-port", config.metrics_port)):
        problem = port_problem(config.host, port)
        if problem is not None:
            log_event(log, "listen.failed", logging.ERROR, flag=flag, port=port, error=problem)
            print(
                f"fairshare master: {flag} {port}: {problem} ({PORT_HINTS[flag]})", file=sys.stderr
            )
            return True
    return False


def lock_work_dir(config: MasterConfig) -> WorkDirLock | None:
    """The work dir's lock; None (after one line on stderr saying who holds it) if another
    master has it."""
    try:
        Path(config.work_dir).mkdir(parents=True, exist_ok=True)
        return WorkDirLock.acquire(
            Path(config.work_dir), "master", f"pid {os.getpid()}, fairshare master (starting)"
        )
    except WorkDirLocked as error:
        message = str(error)
    except OSError as error:
        message = (
            f"work dir {config.work_dir} cannot be written ({error.strerror}): the master keeps"
            " its lock and registry there; give a writable --work-dir"
        )
    print(f"fairshare master: {message}", file=sys.stderr)
    return None
