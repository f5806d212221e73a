"""HA masters for the tests (issue 12, docs/architecture.md §5):
real ``fairshare master`` processes on
127.0.0.1 that elect a leader in a real etcd (``tests/etcd_server.py``).

- ``HAMasters(directory, etcd_url, count)``: ``count`` masters with ``--registry etcd_url``
  (``secured_flags``: the ``--etcd-*`` flags of the session's secured etcd and a
  ``--registry-key``, as the HA tests run them),
  each started and serving health (a follower serves health too) before the constructor
  returns; ``masters`` (a master killed and replaced keeps its slot), ``addresses`` (the
  ``--master a,b,c`` list clients take);
- ``role(master)``: ``"leader"``, ``"follower"`` or ``""`` (no answer within ``PROBE_TIMEOUT``:
  dead or paused), from the master's ``/health``;
- ``leader(exclude)``: the one master that says it leads (waited for, bounded);
- ``log_time(daemon, event)``, ``acted_until(daemon)``: when an event was last logged, and until
  when a deposed master may have acted as leader (its ``leader.deposed`` lines): the fencing
  checks compare them with another master's ``leader.elected`` (one machine, one clock).

Every master registers in ``daemons.STARTED`` (the integration tests' teardown kills it).
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from daemons import DEFAULT_MASTER_FLAGS, Daemon, start_master, wait_for
from etcd_server import SecuredEtcd

PROBE_TIMEOUT = 0.5
ELECTION_TTL = "2s"
HA_FLAGS = (
    *DEFAULT_MASTER_FLAGS,
    "--election-ttl",
    ELECTION_TTL,
    "--agent-timeout",
    "5s",
    "--reregistration-timeout",
    "30s",
)


def secured_flags(etcd: SecuredEtcd, directory: Path) -> tuple[str, ...]:
    """``HA_FLAGS`` and how the masters reach a secured etcd (TLS, a client certificate, the
    ``fairshare-master`` user), their registry's rows signed with a key of ``directory``."""
    key = directory / "registry.key"
    key.write_text(os.urandom(32).hex() + "\n", encoding="ascii")
    key.chmod(0o600)
    return (*HA_FLAGS, *etcd.flags("fairshare-master"), "--registry-key", str(key))


def role(master: Daemon) -> str:
    """What the master's ``/health`` says it is; "" when it does not answer."""
    if master.proc.poll() is not None:
        return ""
    try:
        url = f"http://{master.metrics_address}/health"
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT) as answer:
            document = json.loads(answer.read())
    except (OSError, ValueError):
        return ""
    return str(document.get("role", ""))


class HAMasters:
    """``count`` masters on one etcd registry."""

    def __init__(
        self, directory: Path, etcd_url: str, count: int = 3, flags: tuple[str, ...] = HA_FLAGS
    ) -> None:
        self.directory = directory
        self.etcd_url = etcd_url
        self.flags = flags
        self.masters: list[Daemon] = []
        for index in range(count):
            self.masters.append(self._start(index))

    def _start(self, index: int, *extra: str) -> Daemon:
        work_dir = self.directory / f"master{index}"
        return start_master(work_dir, "--registry", self.etcd_url, *self.flags, *extra)

    @property
    def addresses(self) -> str:
        """``a:1,b:2,c:3``: what ``--master`` takes."""
        return ",".join(master.address for master in self.masters)

    def leader(self, exclude: Daemon | None = None, timeout: float = 30.0) -> Daemon:
        """The master that leads (not ``exclude``), waited for."""

        def find() -> Daemon | None:
            leading = [m for m in self.masters if m is not exclude and role(m) == "leader"]
            return leading[0] if len(leading) == 1 else None

        found: Daemon = wait_for(find, timeout, "one master leading")
        return found

    def restart(self, master: Daemon) -> Daemon:
        """Start a master again on the work dir and port of ``master`` (killed first)."""
        master.kill()
        index = self.masters.index(master)
        port = master.address.rsplit(":", 1)[1]
        kept = master.log_path.with_name(f"{master.log_path.name}.{int(time.time() * 1000)}")
        master.log_path.rename(kept)
        for stale in ("master.addr", "metrics.addr"):
            (master.work_dir / stale).unlink(missing_ok=True)
        self.masters[index] = self._start(index, "--port", port)
        return self.masters[index]


def log_time(daemon: Daemon, event: str) -> datetime:
    """When ``event`` was last logged (the daemons log UTC times with milliseconds)."""
    found = re.findall(rf"^(\S+Z) \S+ {re.escape(event)}\b", daemon.log(), re.MULTILINE)
    assert found, f"{event} not in the log:\n{daemon.log()[-3000:]}"
    return datetime.fromisoformat(found[-1].replace("Z", "+00:00"))


def acted_until(daemon: Daemon) -> list[datetime]:
    """Until when the master may have acted as leader, per ``leader.deposed`` line."""
    found = re.findall(r" leader\.deposed .*acted_until=([0-9.]+)", daemon.log())
    return [datetime.fromtimestamp(float(stamp), UTC) for stamp in found]
