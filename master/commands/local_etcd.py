"""One local etcd member for ``fairshare up --masters N`` (docs/architecture.md §5): the etcd the HA
masters elect their leader in and keep the registry in, for trying HA on one machine.

``LocalEtcd.start(directory)`` runs Debian's ``etcd`` (package ``etcd-server``) with its data
under ``directory``, its client and peer URLs on 127.0.0.1 at ports the OS said were free, and
waits (bounded) until it answers; ``url(prefix)`` is the ``--registry etcd://...`` the masters
take; ``stop`` ends it (SIGTERM, then SIGKILL after a bounded wait).

Invariants: it listens on loopback only; a missing ``etcd`` binary is a ``LocalEtcdError``
saying which package to install; nothing is left running when ``start`` fails.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["LocalEtcd", "LocalEtcdError"]

START_TIMEOUT: Final = 30.0
STOP_TIMEOUT: Final = 10.0
POLL: Final = 0.05


class LocalEtcdError(RuntimeError):
    """etcd is not installed, or did not start."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class LocalEtcd:
    """A running etcd member on loopback."""

    process: subprocess.Popen[bytes]
    client_port: int
    log: Path

    @classmethod
    def start(cls, directory: Path) -> LocalEtcd:
        """Start etcd with its data in ``directory`` and wait until it accepts connections."""
        binary = shutil.which("etcd")
        if binary is None:
            raise LocalEtcdError(
                "--masters above 1 needs etcd: install Debian's etcd-server package"
                " (apt-get install etcd-server)"
            )
        directory.mkdir(parents=True, exist_ok=True)
        client, peer = _free_port(), _free_port()
        log = directory / "etcd.log"
        argv = [
            binary,
            "--name", "fairshare-up",
            "--data-dir", str(directory / "data"),
            "--listen-client-urls", f"http://127.0.0.1:{client}",
            "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"fairshare-up=http://127.0.0.1:{peer}",
            "--log-level", "warn",
            "--logger", "zap",
        ]  # fmt: skip
        with log.open("ab") as sink:
            process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
        etcd = cls(process, client, log)
        deadline = time.monotonic() + START_TIMEOUT
        while not _answers(client):
            if process.poll() is not None or time.monotonic() > deadline:
                etcd.stop()
                raise LocalEtcdError(f"etcd did not start; see {log}")
            time.sleep(POLL)
        return etcd

    def url(self, prefix: str = "fairshare") -> str:
        """``etcd://127.0.0.1:PORT/prefix``: what ``fairshare master --registry`` takes."""
        return f"etcd://127.0.0.1:{self.client_port}/{prefix}"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it outlives the wait."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
