"""Secured daemons for the security tests: a throwaway CA, masters and agents over TLS.

- ``Pki(directory)``: the cluster's CA (``fairshare.local_ca``) and ``flags(name)``, the
  ``--tls-ca/--tls-cert/--tls-key`` of a certificate issued to ``name`` (issued on first use:
  a daemon's for names starting ``master`` or ``agent``, a client's for the others);
- ``start_secure_master(work_dir, pki, *flags)``: a master serving mutual TLS with the
  ``master`` certificate, waited for through its address file and a health check over TLS;
- ``channel(address, pki, name)``: a blocking channel presenting ``name``'s certificate (None:
  TLS without a client certificate), ``token`` as bearer token;
- ``fairshare_cli(*argv)``: a command run to its end (stdout, stderr, exit code).

Everything started registers in ``daemons.STARTED`` (killed by the autouse fixture).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from daemons import ROOT, Daemon, daemon_env, wait_for
from fairshare.local_ca import CLIENT, DAEMON, LocalCa
from fairshare.transport import ClientSecurity, client_channel_sync
from fairshare.v1 import operator_pb2, operator_pb2_grpc


@dataclass
class Pki:
    """A CA and the certificates it issued, under ``directory``."""

    directory: Path
    ca: LocalCa = field(init=False)

    def __post_init__(self) -> None:
        self.ca = LocalCa.create(self.directory)

    def files(self, name: str) -> tuple[Path, Path]:
        """(certificate, key) of ``name``, issued on first use."""
        daemon = name.startswith(("master", "agent"))
        issued = self.ca.certificate(name, DAEMON if daemon else CLIENT)
        return issued.cert, issued.key

    def flags(self, name: str) -> tuple[str, ...]:
        """``--tls-ca``, ``--tls-cert`` and ``--tls-key`` of ``name``."""
        cert, key = self.files(name)
        return ("--tls-ca", str(self.ca.cert), "--tls-cert", str(cert), "--tls-key", str(key))

    def security(self, name: str | None, token: str | None = None) -> ClientSecurity:
        """A client trusting this CA, presenting ``name``'s certificate (None: none)."""
        if name is None:
            return ClientSecurity(ca=self.ca.cert, token=token)
        cert, key = self.files(name)
        return ClientSecurity(ca=self.ca.cert, cert=cert, key=key, token=token)


def channel(address: str, security: ClientSecurity) -> grpc.Channel:
    """A blocking channel to ``address`` with ``security``."""
    return client_channel_sync(address, security)


def get_state(address: str, security: ClientSecurity) -> operator_pb2.GetStateResponse:
    """GetState over ``security`` (raises ``grpc.RpcError``)."""
    with channel(address, security) as open_channel:
        stub = operator_pb2_grpc.OperatorServiceStub(open_channel)
        state: operator_pb2.GetStateResponse = stub.GetState(
            operator_pb2.GetStateRequest(), timeout=10
        )
        return state


def health(address: str, security: ClientSecurity) -> int:
    """``grpc.health.v1.Health/Check`` over ``security``: 1 is SERVING (0 if unreachable)."""
    from fairshare.health import HealthCheckRequest, HealthCheckResponse

    with channel(address, security) as open_channel:
        check = open_channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=HealthCheckRequest.SerializeToString,
            response_deserializer=HealthCheckResponse.FromString,
        )
        try:
            status: int = check(HealthCheckRequest(), timeout=5).status  # type: ignore[attr-defined]
        except grpc.RpcError:
            return 0
        return status


def start_secure_master(work_dir: Path, pki: Pki, *flags: str, mutual: bool = True) -> Daemon:
    """A master with the ``master`` certificate (plus ``flags``), serving: mutual TLS (client
    certificates of ``pki`` required) unless not ``mutual`` (TLS only)."""
    argv = ["--port", "0", "--metrics-port", "0", "--work-dir", str(work_dir)]
    argv += ["--allocation-interval", "200ms", "--validate", "--shutdown-grace", "2s"]
    tls = pki.flags("master") if mutual else pki.flags("master")[2:]  # no --tls-ca
    master = Daemon("master", [*argv, *tls, *flags], work_dir, "master.addr")
    try:
        master.wait_ready()
        operator = pki.security("operator")
        wait_for(lambda: health(master.address, operator) == 1, what="health SERVING over TLS")
    except BaseException:
        master.kill()
        raise
    return master


def fairshare_cli(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """``fairshare *argv`` run to its end."""
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *argv],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
