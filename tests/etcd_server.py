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

import grpc

START_TIMEOUT = 20.0
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
    ) -> None:
        self.name = name
        self.host = host
        self.client_port = client_port
        self.peer_port = peer_port
        self.data_dir = data_dir
        self.initial_cluster = initial_cluster
        self.wrap = list(wrap)
        self.log_path = data_dir.parent / f"{name}.etcd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """``HOST:PORT`` of its client URL."""
        return f"{self.host}:{self.client_port}"

    def start(self, state: str = "new") -> None:
        """Start (or restart, on its data dir) the member."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        client = f"http://{self.host}:{self.client_port}"
        peer = f"http://{self.host}:{self.peer_port}"
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
) -> list[EtcdMember]:
    """One member per host (ports from ``ports``, else free loopback ports), as one cluster,
    each answering before this returns."""
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


def _answers(member: EtcdMember, probe: Sequence[str]) -> bool:
    if probe or member.wrap:
        argv = [*(probe or member.wrap), "etcdctl", "--endpoints", member.endpoint]
        done = subprocess.run(
            [*argv, "--command-timeout=1s", "get", "health-probe"],
            env={**os.environ, "ETCDCTL_API": "3"},
            capture_output=True,
            timeout=10,
            check=False,
        )
        return done.returncode == 0
    from aetcd.rpc import KVStub, RangeRequest  # the stubs only; a blocking channel

    with grpc.insecure_channel(member.endpoint) as channel:
        try:
            KVStub(channel).Range(RangeRequest(key=b"health-probe"), timeout=1)
        except grpc.RpcError:
            return False
    return True
