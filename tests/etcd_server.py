"""Real etcd members for the tests (Debian's ``etcd-server``, 3.4; ``.ci/run`` installs it).

- ``EtcdMember``: one ``etcd`` process, its data under a directory of the test, its client and
  peer URLs on the given host (loopback, or an address inside a test's network namespace, with
  ``wrap`` = ``["ip", "netns", "exec", NAME]``);
- ``start_cluster(directory, hosts)``: one member per host, as one cluster, waited for until
  every member answers (bounded);
- ``etcd_binary()``: the path of ``etcd``; a missing binary fails the test loudly (it is never
  skipped: CI installs it).

Every member is started with the test session's environment (so the session guard sees it),
and ``kill`` ends it (SIGKILL); a test's fixture kills every member it started.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import grpc
from fairshare.local_ca import LocalCa

START_TIMEOUT = 20.0
ROOT_PASSWORD = "root-secret"  # nosec: a throwaway etcd of one test session
CLIENT_PORT = 2379
PEER_PORT = 2380


def etcd_binary() -> str:
    """``etcd``'s path; fails (never skips) when it is not installed."""
    path = shutil.which("etcd") or ("/usr/bin/etcd" if Path("/usr/bin/etcd").exists() else None)
    if path is None:
        raise AssertionError(
            "etcd is not installed: the HA tests need Debian's etcd-server package"
            " (apt-get install etcd-server; .ci/run installs it)"
        )
    return path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class EtcdMember:
    """One etcd process of a cluster."""

    def __init__(
        self,
        name: str,
        host: str,
        client_port: int,
        peer_port: int,
        data_dir: Path,
        initial_cluster: str,
        wrap: Sequence[str] = (),
        tls: EtcdTls | None = None,
    ) -> None:
        self.name = name
        self.host = host
        self.client_port = client_port
        self.peer_port = peer_port
        self.data_dir = data_dir
        self.initial_cluster = initial_cluster
        self.wrap = list(wrap)
        self.tls = tls
        self.log_path = data_dir.parent / f"{name}.etcd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """``HOST:PORT`` of its client URL."""
        return f"{self.host}:{self.client_port}"

    def start(self, state: str = "new") -> None:
        """Start (or restart, on its data dir) the member."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        scheme = "https" if self.tls is not None else "http"
        client = f"{scheme}://{self.host}:{self.client_port}"
        peer = f"http://{self.host}:{self.peer_port}"
        secured: list[str] = []
        if self.tls is not None:
            secured = [
                "--cert-file", str(self.tls.cert), "--key-file", str(self.tls.key),
                "--trusted-ca-file", str(self.tls.ca), "--client-cert-auth",
                "--auth-token-ttl", str(self.tls.token_ttl),
            ]  # fmt: skip
        argv = [
            *self.wrap,
            etcd_binary(),
            "--name", self.name,
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", client,
            "--advertise-client-urls", client,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", self.initial_cluster,
            "--initial-cluster-state", state,
            "--initial-cluster-token", f"fairshare-test-{os.getpid()}",
            "--heartbeat-interval", "100",
            "--election-timeout", "1000",
            "--logger", "zap",
            "--log-level", "warn",
            *secured,
        ]  # fmt: skip
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )

    def alive(self) -> bool:
        """The process runs."""
        return self.proc is not None and self.proc.poll() is None

    def signal(self, signum: int) -> None:
        """Send ``signum`` if it runs."""
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL (a member lost), if it runs; SIGCONT first in case it was paused."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(10)

    def log(self) -> str:
        """What the member wrote."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def start_cluster(
    directory: Path,
    hosts: Sequence[str],
    wraps: Sequence[Sequence[str]] | None = None,
    ports: Sequence[tuple[int, int]] | None = None,
    tls: EtcdTls | None = None,
) -> list[EtcdMember]:
    """One member per host (ports from ``ports``, else free loopback ports), as one cluster,
    each answering before this returns (serving TLS with ``tls`` when given)."""
    if ports is None:
        ports = [(free_port(), free_port()) for _ in hosts]
    names = [f"etcd{i}" for i in range(len(hosts))]
    initial = ",".join(
        f"{name}=http://{host}:{peer}"
        for name, host, (_, peer) in zip(names, hosts, ports, strict=True)
    )
    members = [
        EtcdMember(
            name,
            host,
            client,
            peer,
            directory / name,
            initial,
            wraps[index] if wraps else (),
            tls,
        )
        for index, (name, host, (client, peer)) in enumerate(zip(names, hosts, ports, strict=True))
    ]
    try:
        for member in members:
            member.start()
        wait_answering(members)
    except BaseException:
        for member in members:
            member.kill()
        raise
    return members


def wait_answering(members: Sequence[EtcdMember], probe: Sequence[str] = ()) -> None:
    """Wait (bounded) until each member answers a read through etcd's own client API
    (``probe``: a command prefix to run the check with, e.g. inside a namespace)."""
    deadline = time.monotonic() + START_TIMEOUT
    pending = list(members)
    while pending:
        member = pending[0]
        if not member.alive():
            raise AssertionError(f"etcd member {member.name} exited:\n{member.log()[-3000:]}")
        if _answers(member, probe):
            pending.pop(0)
            continue
        if time.monotonic() > deadline:
            raise AssertionError(
                f"etcd member {member.name} did not answer within {START_TIMEOUT:g}s:\n"
                f"{member.log()[-3000:]}"
            )
        time.sleep(0.05)


def _etcdctl(member: EtcdMember) -> list[str]:
    """``etcdctl`` with the member's endpoint (and TLS flags)."""
    if member.tls is None:
        return ["etcdctl", "--endpoints", member.endpoint]
    tls = member.tls
    return [
        "etcdctl", "--endpoints", f"https://{member.endpoint}", "--cacert", str(tls.ca),
        "--cert", str(tls.client_cert), "--key", str(tls.client_key),
    ]  # fmt: skip


def _answers(member: EtcdMember, probe: Sequence[str]) -> bool:
    if probe or member.wrap:
        argv = [*(probe or member.wrap), *_etcdctl(member)]
        done = subprocess.run(
            [*argv, "--command-timeout=1s", "get", "health-probe"],
            env={**os.environ, "ETCDCTL_API": "3"},
            capture_output=True,
            timeout=10,
            check=False,
        )
        return done.returncode == 0
    from aetcd.rpc import KVStub, RangeRequest  # the stubs only; a blocking channel

    if member.tls is not None:
        tls = member.tls
        credentials = grpc.ssl_channel_credentials(
            tls.ca.read_bytes(), tls.client_key.read_bytes(), tls.client_cert.read_bytes()
        )
        opened = grpc.secure_channel(member.endpoint, credentials)
    else:
        opened = grpc.insecure_channel(member.endpoint)
    with opened as channel:
        try:
            KVStub(channel).Range(RangeRequest(key=b"health-probe"), timeout=1)
        except grpc.RpcError:
            return False
    return True


# -- a secured etcd: TLS with client certificates, and users ---------------------------------------


class EtcdTls:
    """The server certificate of a TLS etcd member and the CA that signed it."""

    def __init__(
        self,
        ca: Path,
        cert: Path,
        key: Path,
        client: tuple[Path, Path],
        token_ttl: int = 300,
    ) -> None:
        self.ca, self.cert, self.key = ca, cert, key
        self.token_ttl = token_ttl  # etcd's --auth-token-ttl (seconds)
        self.client_cert, self.client_key = client  # what the start-up probe presents


class SecuredEtcd:
    """etcd members (one on loopback by default; or one per host of ``hosts``, run inside
    ``wraps``) serving TLS only with a certificate naming every host, demanding client
    certificates signed by its CA (``--client-cert-auth``), with authentication on: ``root``,
    ``fairshare-master`` (read and write under every prefix) and ``fairshare-reader`` (read
    only). ``flags(user)`` are the ``--etcd-*`` flags of a process that logs in as ``user``;
    the passwords are in files."""

    USERS: ClassVar[dict[str, str]] = {"fairshare-master": "readwrite", "fairshare-reader": "read"}

    def __init__(
        self,
        directory: Path,
        hosts: Sequence[str] = ("127.0.0.1",),
        wraps: Sequence[Sequence[str]] | None = None,
        ports: Sequence[tuple[int, int]] | None = None,
        token_ttl: int = 300,
    ) -> None:
        self.directory = directory
        self.ca = LocalCa.create(directory / "ca")
        cert, key = server_certificate(self.ca, "etcd", hosts)
        self.client = self.ca.certificate("etcd-client")
        client = (self.client.cert, self.client.key)
        self.tls = EtcdTls(self.ca.cert, cert, key, client, token_ttl)
        self.members = start_cluster(directory, hosts, wraps, ports, self.tls)
        self.member = self.members[0]
        self.passwords: dict[str, Path] = {}
        try:
            self._add_users()
        except BaseException:
            self.kill()
            raise

    def url(self, prefix: str = "") -> str:
        """``etcd://HOST:PORT,.../prefix`` (a random prefix when none is given)."""
        endpoints = ",".join(member.endpoint for member in self.members)
        return f"etcd://{endpoints}/{prefix or 'test-' + os.urandom(6).hex()}"

    def password_file(self, user: str) -> Path:
        """The file holding ``user``'s password."""
        return self.passwords[user]

    def flags(self, user: str | None = "fairshare-master", cert: bool = True) -> tuple[str, ...]:
        """``--etcd-tls-ca`` (and the client certificate, and the user's password file)."""
        flags: tuple[str, ...] = ("--etcd-tls-ca", str(self.ca.cert))
        if cert:
            flags += ("--etcd-tls-cert", str(self.client.cert))
            flags += ("--etcd-tls-key", str(self.client.key))
        if user is not None:
            flags += ("--etcd-user", user, "--etcd-password-file", str(self.passwords[user]))
        return flags

    def etcdctl(self, *args: str, user: str | None = "root") -> str:
        """Run ``etcdctl`` against the member (as ``user``); its output."""
        argv = [*self.member.wrap, *_etcdctl(self.member), "--command-timeout=5s"]
        if user is not None:
            password = ROOT_PASSWORD if user == "root" else self.passwords[user].read_text().strip()
            argv += ["--user", f"{user}:{password}"]
        done = subprocess.run(
            [*argv, *args],
            env={**os.environ, "ETCDCTL_API": "3"},
            capture_output=True,
            timeout=30,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"etcdctl {' '.join(args)}: {done.stderr.decode()}")
        return done.stdout.decode()

    def _add_users(self) -> None:
        self.etcdctl("user", "add", f"root:{ROOT_PASSWORD}", user=None)
        for name, permission in self.USERS.items():
            password = os.urandom(12).hex()
            path = self.directory / f"{name}.password"
            path.write_text(password + "\n", encoding="utf-8")
            path.chmod(0o600)
            self.passwords[name] = path
            self.etcdctl("role", "add", name, user=None)
            self.etcdctl(
                "role", "grant-permission", name, "--prefix=true", permission, "/", user=None
            )
            self.etcdctl("user", "add", f"{name}:{password}", user=None)
            self.etcdctl("user", "grant-role", name, name, user=None)
        self.etcdctl("auth", "enable", user=None)

    def kill(self) -> None:
        """End every member."""
        for member in self.members:
            member.kill()


def server_certificate(ca: LocalCa, name: str, hosts: Sequence[str]) -> tuple[Path, Path]:
    """A server certificate of ``ca`` naming ``hosts`` (and loopback), for etcd members on
    addresses the local CA's certificates do not name (a test's network namespaces)."""
    cert, key = ca.directory / f"{name}-server.pem", ca.directory / f"{name}-server.key"
    names = dict.fromkeys(["127.0.0.1", *hosts])
    sans = ",".join(["DNS:localhost", *(f"IP:{host}" for host in names)])
    extensions = ca.directory / f"{name}-server.ext"
    extensions.write_text(
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        f"extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName={sans}\n",
        encoding="ascii",
    )
    request = ca.directory / f"{name}-server.csr"
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for argv in (
        ["req", "-new", *curve, "-keyout", str(key), "-out", str(request), "-subj", f"/CN={name}"],
        [
            "x509", "-req", "-in", str(request), "-CA", str(ca.cert), "-CAkey", str(ca.key),
            "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", "2",
            "-out", str(cert), "-extfile", str(extensions),
        ],
    ):  # fmt: skip
        subprocess.run(["openssl", *argv], capture_output=True, timeout=30, check=True)
    return cert, key
