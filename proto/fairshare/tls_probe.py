"""Why a connection to a fairshare port failed, in one line, when gRPC only says "Socket closed".

gRPC reports every TLS mistake the same way (``UNAVAILABLE: failed to connect to all addresses;
... Socket closed``, or a handshake error in OpenSSL's words), and a command pointed at an HTTP
port (a daemon's dashboard and metrics) the same way again. ``diagnose(address, security)``
finds out by talking to the port itself, with Python's ``socket`` and ``ssl`` (no gRPC), what
the mistake is:

- plaintext against a TLS port: ``... serves TLS and this client does not: give --tls-ca``;
- TLS against a plaintext port: ``... does not serve TLS: leave out --tls-ca``;
- a server certificate the given CA did not sign (a foreign CA), or that does not name the host;
- a client certificate missing where the server requires one, or one the server does not
  trust (issued by another CA);
- an HTTP port (the dashboard, ``/metrics``) where a gRPC port was meant.

It returns None when it finds none of these (nothing listens: the caller's own message says so;
or the port looks like a working gRPC port). Blocking, bounded by ``timeout`` per connection, a
few connections at most: for commands, after a call failed, never on an event loop.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from typing import Final

from fairshare.master_target import MasterTarget
from fairshare.transport import ClientSecurity

__all__ = ["HANDSHAKE_HINTS", "diagnose", "diagnose_target", "worth_diagnosing"]

TIMEOUT: Final = 2.0
HTTP_PROBE: Final = b"GET /health HTTP/1.1\r\nHost: fairshare\r\nConnection: close\r\n\r\n"
H2_PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"
"""HTTP/2's connection preface and an empty SETTINGS frame: a gRPC server answers with its own."""
HANDSHAKE_HINTS: Final = (
    "Socket closed",
    "handshake",
    "Handshake",
    "SSL",
    "Failed parsing HTTP/2",
    "Connection reset",
    "failed to connect",
)
"""Words of a gRPC error that a diagnosis may explain (not "Connection refused": nothing
listens, the error says so itself)."""


def worth_diagnosing(details: str) -> bool:
    """The error may be one of the mistakes ``diagnose`` names."""
    if "Connection refused" in details:
        return False
    return any(hint in details for hint in HANDSHAKE_HINTS)


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _connect(host: str, port: int, timeout: float) -> socket.socket | None:
    try:
        return socket.create_connection((host, port), timeout)
    except OSError:
        return None


def _is_http(stream: socket.socket) -> bool:
    """Send an HTTP/1.1 request: True if an HTTP/1 answer comes back."""
    try:
        stream.sendall(HTTP_PROBE)
        return stream.recv(16).startswith(b"HTTP/1.")
    except (OSError, ssl.SSLError):
        return False


def _http_port(address: str) -> str:
    return (
        f"{address} is an HTTP port (a daemon's dashboard and /metrics: --metrics-port), not the"
        " master's gRPC port (--port, 5050 by default)"
    )


def _plaintext_client(address: str, host: str, port: int, timeout: float) -> str | None:
    raw = _connect(host, port, timeout)
    if raw is None:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2", "http/1.1"])
    try:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            if tls.selected_alpn_protocol() != "h2":  # gRPC speaks h2; aiohttp offers none
                return _http_port(address)
    except (OSError, ssl.SSLError):  # no TLS there: is it plaintext HTTP?
        raw.close()
        plain = _connect(host, port, timeout)
        if plain is not None:
            with plain:
                if _is_http(plain):
                    return _http_port(address)
        return None
    return (
        f"{address} serves TLS and this client does not: give --tls-ca FILE (the CA that signed"
        " its certificate) and who you are, --tls-cert/--tls-key or --token-file (or"
        " FAIRSHARE_TLS_CA, ...)"
    )


def _verify_failure(address: str, host: str, security: ClientSecurity, error: str) -> str:
    if "mismatch" in error or "doesn't match" in error:
        return (
            f"the certificate of {address} does not name {security.server_name or host}: give"
            " --tls-server-name with a name it has"
        )
    return (
        f"the certificate of {address} is not signed by --tls-ca {security.ca} ({error}): the CA"
        " of another cluster?"
    )


def _tls_client(
    address: str, host: str, port: int, security: ClientSecurity, timeout: float
) -> str | None:
    raw = _connect(host, port, timeout)
    if raw is None:
        return None
    try:
        context = ssl.create_default_context(cafile=str(security.ca))
        if security.cert is not None and security.key is not None:
            context.load_cert_chain(str(security.cert), str(security.key))
    except (OSError, ssl.SSLError) as error:
        raw.close()
        return f"the TLS files given cannot be used: {error}"
    context.set_alpn_protocols(["h2", "http/1.1"])
    name = security.server_name or host
    try:
        tls = context.wrap_socket(raw, server_hostname=name)
    except ssl.SSLCertVerificationError as error:
        raw.close()
        return _verify_failure(address, host, security, str(error.verify_message or error))
    except (OSError, ssl.SSLError) as error:
        raw.close()
        plain = _connect(host, port, timeout)
        if plain is not None:
            with plain:
                if _is_http(plain):
                    return _http_port(address)
        if "WRONG_VERSION_NUMBER" in str(error).upper() or "EOF" in str(error).upper():
            return f"{address} does not serve TLS: leave out --tls-ca (and --tls-cert/--tls-key)"
        return None
    with tls:
        if tls.selected_alpn_protocol() != "h2":  # gRPC speaks h2; the HTTP port does not
            return _http_port(address)
        try:  # TLS 1.3: a refused client certificate ends the connection after the handshake
            tls.sendall(H2_PREFACE)
            answered = tls.recv(64)
        except ssl.SSLError as error:
            said = str(error).upper()
            answered = b"" if "ALERT" in said or "EOF" in said else b"?"
        except OSError:
            answered = b""
    if answered:  # the server's SETTINGS: a working gRPC port
        return None
    if security.cert is None:
        return (
            f"{address} requires a client certificate: give --tls-cert/--tls-key (one its CA"
            " issued), and --token-file if it wants a token too"
        )
    return (
        f"{address} does not trust the client certificate --tls-cert {security.cert}: it was not"
        " issued by the cluster's CA"
    )


def diagnose(address: str, security: ClientSecurity, timeout: float = TIMEOUT) -> str | None:
    """One line naming the TLS or port mistake behind a failed call to ``address``, or None."""
    try:
        host, port = _split(address)
    except ValueError:
        return None
    with contextlib.suppress(Exception):  # a diagnosis is a courtesy: never fail for it
        if not security.tls:
            return _plaintext_client(address, host, port, timeout)
        return _tls_client(address, host, port, security, timeout)
    return None


def diagnose_target(target: str, security: ClientSecurity, details: str) -> str | None:
    """``diagnose`` each address of ``--master`` (an etcd target: none) while the error's
    ``details`` may be such a mistake; the first finding."""
    if not worth_diagnosing(details):
        return None
    try:
        parsed = MasterTarget.parse(target)
    except ValueError:
        return None
    for address in parsed.addresses[:3]:
        found = diagnose(address, security)
        if found is not None:
            return found
    return None
