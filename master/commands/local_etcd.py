"""One local etcd member for ``fairshare up --masters N`` (docs/architecture.md §5): the etcd the HA
masters elect their leader in and keep the registry in, for trying HA on one machine.

``LocalEtcd.start(directory, ca)`` runs Debian's ``etcd`` (package ``etcd-server``) with its
data under ``directory``, its client and peer URLs on 127.0.0.1 at ports the OS said were free,
and waits (bounded) until it answers; ``url(prefix)`` is the ``--registry etcd://...`` the
masters take; ``master_flags()`` their ``--etcd-*`` and ``--registry-key`` flags; ``stop`` ends
it (SIGTERM, then SIGKILL after a bounded wait).

Secured as docs/security.md says (the masters' etcd is the cluster's authority): its client URL
serves TLS only with a certificate of ``ca`` (the local CA of ``up``) and demands client
certificates of that CA; authentication is on, with ``root`` and ``fairshare-master`` (read and
write under ``/fairshare`` only), their random passwords in files of mode 0600 under
``directory``; the masters sign the registry's rows with a random ``registry.key`` there.

Invariants: it listens on loopback only; a missing ``etcd`` binary is a ``LocalEtcdError``
saying which package to install; nothing is left running when ``start`` fails; no password is
ever on a command line.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import grpc
from aetcd import rpc as etcd_rpc
from fairshare.local_ca import DAEMON, IssuedCertificate, LocalCa

__all__ = ["LocalEtcd", "LocalEtcdError"]

START_TIMEOUT: Final = 30.0
PREFIX: Final = "/fairshare"
MASTER_USER: Final = "fairshare-master"
SETUP_TIMEOUT: Final = 10.0
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
    ca: LocalCa
    directory: Path

    @classmethod
    def start(cls, directory: Path, ca: LocalCa) -> LocalEtcd:
        """Start etcd with its data in ``directory``, serving TLS with certificates of ``ca``,
        wait until it accepts connections and turn authentication on."""
        binary = shutil.which("etcd")
        if binary is None:
            raise LocalEtcdError(
                "--masters above 1 needs etcd: install Debian's etcd-server package"
                " (apt-get install etcd-server)"
            )
        directory.mkdir(parents=True, exist_ok=True)
        client, peer = _free_port(), _free_port()
        log = directory / "etcd.log"
        server = ca.certificate("etcd", DAEMON)  # serverAuth, its names in the SAN
        argv = [
            binary,
            "--name", "fairshare-up",
            "--data-dir", str(directory / "data"),
            "--listen-client-urls", f"https://127.0.0.1:{client}",
            "--advertise-client-urls", f"https://127.0.0.1:{client}",
            "--cert-file", str(server.cert), "--key-file", str(server.key),
            "--trusted-ca-file", str(ca.cert), "--client-cert-auth",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"fairshare-up=http://127.0.0.1:{peer}",
            "--log-level", "warn",
            "--logger", "zap",
        ]  # fmt: skip
        with log.open("ab") as sink:
            process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
        etcd = cls(process, client, log, ca, directory)
        deadline = time.monotonic() + START_TIMEOUT
        while not _answers(client):
            if process.poll() is not None or time.monotonic() > deadline:
                etcd.stop()
                raise LocalEtcdError(f"etcd did not start; see {log}")
            time.sleep(POLL)
        try:
            etcd._secure()
        except (grpc.RpcError, OSError) as error:
            etcd.stop()
            raise LocalEtcdError(f"cannot turn etcd's authentication on: {error}") from None
        return etcd

    @property
    def client(self) -> IssuedCertificate:
        """The client certificate the masters present to etcd."""
        return self.ca.certificate(MASTER_USER)

    def _secret(self, name: str, size: int = 24) -> Path:
        """A file of mode 0600 under the directory holding a new random secret."""
        path = self.directory / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as sink:
            sink.write(secrets.token_hex(size) + "\n")
        return path

    def _secure(self) -> None:
        """Users ``root`` and ``fairshare-master`` (read-write under ``PREFIX`` only), then
        authentication on (etcd's Auth API, over the TLS client URL)."""
        root = self._secret("root.password").read_text().strip()
        master = self._secret(f"{MASTER_USER}.password").read_text().strip()
        self._secret("registry.key", 32)
        credentials = grpc.ssl_channel_credentials(
            self.ca.cert.read_bytes(), self.client.key.read_bytes(), self.client.cert.read_bytes()
        )
        end = PREFIX[:-1] + chr(ord(PREFIX[-1]) + 1)  # the range of every key under PREFIX
        permission = etcd_rpc.Permission(
            permType=etcd_rpc.Permission.READWRITE, key=PREFIX.encode(), range_end=end.encode()
        )
        with grpc.secure_channel(f"127.0.0.1:{self.client_port}", credentials) as channel:
            auth = etcd_rpc.AuthStub(channel)
            auth.UserAdd(
                etcd_rpc.AuthUserAddRequest(name="root", password=root), timeout=SETUP_TIMEOUT
            )
            auth.UserGrantRole(
                etcd_rpc.AuthUserGrantRoleRequest(user="root", role="root"), timeout=SETUP_TIMEOUT
            )
            auth.RoleAdd(etcd_rpc.AuthRoleAddRequest(name=MASTER_USER), timeout=SETUP_TIMEOUT)
            auth.RoleGrantPermission(
                etcd_rpc.AuthRoleGrantPermissionRequest(name=MASTER_USER, perm=permission),
                timeout=SETUP_TIMEOUT,
            )
            auth.UserAdd(
                etcd_rpc.AuthUserAddRequest(name=MASTER_USER, password=master),
                timeout=SETUP_TIMEOUT,
            )
            auth.UserGrantRole(
                etcd_rpc.AuthUserGrantRoleRequest(user=MASTER_USER, role=MASTER_USER),
                timeout=SETUP_TIMEOUT,
            )
            auth.AuthEnable(etcd_rpc.AuthEnableRequest(), timeout=SETUP_TIMEOUT)

    def master_flags(self) -> tuple[str, ...]:
        """The ``--etcd-*`` flags of a master (its password in a file, never on the command
        line) and ``--registry-key``."""
        return (
            "--etcd-tls-ca", str(self.ca.cert),
            "--etcd-tls-cert", str(self.client.cert), "--etcd-tls-key", str(self.client.key),
            "--etcd-user", MASTER_USER,
            "--etcd-password-file", str(self.directory / f"{MASTER_USER}.password"),
            "--registry-key", str(self.directory / "registry.key"),
        )  # fmt: skip

    def url(self, prefix: str = PREFIX.strip("/")) -> str:
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
