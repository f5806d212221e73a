"""A throwaway certificate authority for a local cluster (``fairshare up --tls``, the tests).

``LocalCa.create(directory)`` makes a CA (``ca.pem``, ``ca.key``) and ``issue(name, usage)`` a
certificate signed by it for ``name`` (``NAME.pem``, ``NAME.key``): the common name is
``name`` (the principal the master sees when the certificate is presented as a client
certificate). What it may be used for depends on ``usage``:

- ``CLIENT`` (a principal: an operator, a framework, Prometheus): client authentication only,
  no subject alternative name: it cannot pose as a master or an agent, since clients check that
  a server presents a certificate for server authentication naming the address they dial;
- ``DAEMON`` (a master, an agent): server authentication for its ports, and client
  authentication (an agent calls the master, a master its peers), with its real names as
  subject alternative names: ``localhost``, ``127.0.0.1``, ``::1``, this machine's host name
  and the ``hosts`` given (the address the daemon is reached at).

The work is done by the ``openssl`` command-line tool (OpenSSL 1.1.1 or newer), not by a
Python library: the daemons' dependencies stay grpcio, protobuf and the stdlib (the Python
``cryptography`` package is not among them), and every Linux distribution ships ``openssl``.

Invariants: a client certificate never carries serverAuth nor a name a client dials; keys are
ECDSA P-256, written with mode 0600; certificates are valid for
``DAYS`` days; nothing is ever sent anywhere; a failure of ``openssl`` (missing, refusing)
raises ``LocalCaError`` with its message. This CA is for one machine's test or demo cluster:
a real cluster's certificates come from its own PKI.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

__all__ = [
    "CLIENT",
    "DAEMON",
    "DAYS",
    "IssuedCertificate",
    "LocalCa",
    "LocalCaError",
    "Usage",
    "leaf_extensions",
]

DAYS: Final = 30
Usage = Literal["client", "daemon"]
CLIENT: Final[Usage] = "client"
DAEMON: Final[Usage] = "daemon"
_CURVE: Final = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
_LEAF_EXTENSIONS: Final = (
    "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
)
_DNS_NAME: Final = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
_TIMEOUT: Final = 30.0


def _subject_names(hosts: Sequence[str]) -> str:
    """``subjectAltName`` of a daemon: loopback, this machine's name and ``hosts``."""
    entries = ["DNS:localhost", "IP:127.0.0.1", "IP:::1"]
    for host in (socket.gethostname(), *hosts):
        bare = host.strip("[]")
        try:
            entry = f"IP:{ipaddress.ip_address(bare)}"
        except ValueError:
            if not _DNS_NAME.match(bare):
                raise LocalCaError(f"host {host!r}: not an IP address or a DNS name") from None
            entry = f"DNS:{bare.lower()}"
        if entry not in entries and entry != "IP:0.0.0.0" and entry != "IP:::":
            entries.append(entry)
    return ",".join(entries)


def leaf_extensions(usage: Usage, hosts: Sequence[str] = ()) -> str:
    """The X.509 v3 extensions of a certificate for ``usage`` (module docstring)."""
    if usage == CLIENT:
        return _LEAF_EXTENSIONS + "extendedKeyUsage=clientAuth\n"
    return (
        _LEAF_EXTENSIONS
        + "extendedKeyUsage=serverAuth,clientAuth\n"
        + f"subjectAltName={_subject_names(hosts)}\n"
    )


class LocalCaError(RuntimeError):
    """``openssl`` is missing or refused (the message says which step and why)."""


@dataclass(frozen=True, slots=True)
class IssuedCertificate:
    """A certificate and its key, signed by the local CA."""

    name: str
    cert: Path
    key: Path


def _openssl(*args: str) -> None:
    binary = shutil.which("openssl")
    if binary is None:
        raise LocalCaError("the openssl command is not installed (apt-get install openssl)")
    try:
        done = subprocess.run(
            [binary, *args], capture_output=True, text=True, timeout=_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise LocalCaError(f"openssl {args[0]}: {error}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise LocalCaError(f"openssl {args[0]} failed: {last}")


def _private(path: Path) -> None:
    os.chmod(path, 0o600)


@dataclass(frozen=True, slots=True)
class LocalCa:
    """A CA whose files are in ``directory``."""

    directory: Path

    @property
    def cert(self) -> Path:
        """The CA bundle every client and daemon of the cluster trusts."""
        return self.directory / "ca.pem"

    @property
    def key(self) -> Path:
        """The CA's signing key (keep it, or delete it once everything is issued)."""
        return self.directory / "ca.key"

    @classmethod
    def create(cls, directory: Path, subject: str = "fairshare local CA") -> LocalCa:
        """A new CA in ``directory`` (created with mode 0700)."""
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        ca = cls(directory)
        _openssl(
            "req", "-x509", *_CURVE, "-keyout", str(ca.key), "-out", str(ca.cert),
            "-days", str(DAYS), "-subj", f"/CN={subject}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        )  # fmt: skip
        _private(ca.key)
        return ca

    def certificate(
        self, name: str, usage: Usage = CLIENT, hosts: Sequence[str] = ()
    ) -> IssuedCertificate:
        """``name``'s certificate, issued on first use (kept in ``directory`` after that)."""
        cert, key = self.directory / f"{name}.pem", self.directory / f"{name}.key"
        if cert.exists():
            return IssuedCertificate(name, cert, key)
        return self.issue(name, usage, hosts)

    def issue(
        self, name: str, usage: Usage = CLIENT, hosts: Sequence[str] = ()
    ) -> IssuedCertificate:
        """A certificate for ``name`` (its common name: the principal), signed by this CA, for
        ``usage``: a client's (clientAuth only) or a daemon's (also serverAuth, naming
        loopback, this machine and ``hosts``)."""
        if not name or "/" in name or name.startswith("."):
            raise LocalCaError(f"certificate name {name!r}: must be a plain name")
        if usage not in (CLIENT, DAEMON):
            raise LocalCaError(f"certificate usage {usage!r}: must be client or daemon")
        cert, key = self.directory / f"{name}.pem", self.directory / f"{name}.key"
        request, extensions = self.directory / f"{name}.csr", self.directory / f"{name}.ext"
        extensions.write_text(leaf_extensions(usage, hosts), encoding="ascii")
        try:
            _openssl(
                "req", "-new", *_CURVE, "-keyout", str(key), "-out", str(request),
                "-subj", f"/CN={name}",
            )  # fmt: skip
            _private(key)
            _openssl(
                "x509", "-req", "-in", str(request), "-CA", str(self.cert),
                "-CAkey", str(self.key), "-set_serial", str(int.from_bytes(os.urandom(8), "big")),
                "-days", str(DAYS), "-out", str(cert), "-extfile", str(extensions),
            )  # fmt: skip
        finally:
            request.unlink(missing_ok=True)
            extensions.unlink(missing_ok=True)
        return IssuedCertificate(name, cert, key)

    def browser_bundle(self, issued: IssuedCertificate) -> Path:
        """``issued``'s certificate and key (with this CA) as a PKCS#12 file without a password,
        ``NAME.p12`` beside them: what a browser imports to open a port that asks for a client
        certificate (the dashboard of a mutual-TLS master)."""
        bundle = self.directory / f"{issued.name}.p12"
        _openssl(
            "pkcs12", "-export", "-in", str(issued.cert), "-inkey", str(issued.key),
            "-certfile", str(self.cert), "-name", issued.name, "-out", str(bundle),
            "-passout", "pass:",
        )  # fmt: skip
        _private(bundle)
        return bundle
