"""How every fairshare process reaches another over gRPC: channels, server credentials, options.

This is the one place gRPC channels and server ports are built (docs/architecture.md §6),
so the master,
the agent, the SDK and every command agree on security and limits; code that finds the master
(a list of masters, a leader) hands its addresses to ``client_channel``.

- ``ClientSecurity``: what a client presents and trusts: a CA bundle to verify the server
  (TLS), optionally its own certificate and key (mutual TLS: its principal is the certificate's
  common name) and/or a bearer token (``PRINCIPAL:SECRET``, checked by the master against its
  credentials file). ``INSECURE`` is plaintext without identity.
- ``client_channel(address, security)`` (asyncio) and ``client_channel_sync``: a channel with
  ``CHANNEL_OPTIONS`` (message sizes, keepalive) and the credentials.
- ``ServerSecurity`` and ``add_port(server, address, security)``: a TLS port (client
  certificates verified against ``ca`` when given; required when ``require_client_cert``), or a
  plaintext one; ``server_options(limits)``: the daemons' server options from ``ServerLimits``.

Invariants:
- every channel and every server uses ``MAX_MESSAGE_BYTES`` for both directions, so whatever a
  daemon may send, every client may receive (and nothing bigger is accepted from a client);
- a token is only ever sent over TLS: ``ClientSecurity`` with a token and no CA raises
  ``SecurityError`` (a bearer token in plaintext is anyone's);
- files (CA, certificate, key, token) are read when a channel or port is built, so a rotated
  certificate is picked up by the next connection; a file that cannot be read or does not hold
  PEM raises ``SecurityError`` naming it;
- servers enforce keepalive (pings more often than every ``MIN_PING_INTERVAL_MS`` without data
  count as strikes, ``MAX_PING_STRIKES`` strikes close the connection), close connections that
  stay idle (``ServerLimits.idle_timeout``) or do not finish their handshake
  (``ServerLimits.handshake_timeout``), cap streams per connection and connections in all.
"""

from __future__ import annotations

import contextlib
import resource
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import grpc

from fairshare.etcd_security import PLAIN_ETCD, EtcdSecurity

__all__ = [
    "CHANNEL_OPTIONS",
    "INSECURE",
    "MAX_MESSAGE_BYTES",
    "MAX_PING_STRIKES",
    "MIN_PING_INTERVAL_MS",
    "PLAINTEXT",
    "ClientSecurity",
    "SecurityError",
    "ServerLimits",
    "ServerSecurity",
    "add_port",
    "bearer_interceptors",
    "client_channel",
    "client_channel_sync",
    "fd_limit",
    "is_loopback",
    "raise_fd_limit",
    "read_token",
    "server_options",
]

MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""The largest message any fairshare process sends or accepts (both directions)."""
MIN_PING_INTERVAL_MS: Final = 5_000
"""Clients may ping a server without data at most this often; more often is a strike."""
MAX_PING_STRIKES: Final = 2
"""Strikes after which a server closes the connection (a ping flood ends there)."""
CLIENT_KEEPALIVE_MS: Final = 30_000
CHANNEL_OPTIONS: Final[tuple[tuple[str, Any], ...]] = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", CLIENT_KEEPALIVE_MS),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
)
"""Options of every client channel; callers may add their own (user agent, subchannel pool)."""


class SecurityError(ValueError):
    """A security setting that cannot be used (unreadable file, token without TLS)."""


def _read(path: Path, what: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SecurityError(f"{what} {path}: cannot read it: {error.strerror}") from None
    if what != "token file" and b"-----BEGIN " not in data:
        raise SecurityError(f"{what} {path}: not a PEM file")
    return data


def read_token(path: Path) -> str:
    """The token in ``path``: one line ``PRINCIPAL:SECRET`` (``SecurityError`` if not)."""
    text = _read(path, "token file").decode("utf-8", errors="replace").strip()
    principal, sep, secret = text.partition(":")
    if not sep or not principal or not secret or "\n" in text:
        raise SecurityError(f"token file {path}: expected one line PRINCIPAL:SECRET")
    return text


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """What a client trusts (``ca``) and presents (``cert``/``key``, ``token``) to a server.

    ``server_name`` overrides the name checked against the server's certificate (when clients
    reach the master by an address its certificate does not name)."""

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    token: str | None = None
    server_name: str | None = None
    etcd: EtcdSecurity = PLAIN_ETCD
    """How the leader is read from etcd when ``--master`` is ``etcd://...``."""

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise SecurityError("a client certificate needs its key, and a key its certificate")
        if self.ca is None and (self.cert is not None or self.token is not None):
            what = "a client certificate" if self.cert is not None else "a token"
            raise SecurityError(
                f"{what} needs TLS: give the CA bundle that signed the master's certificate"
                " (--tls-ca); a token or certificate is never sent in plaintext"
            )

    @property
    def tls(self) -> bool:
        """True when the connection is TLS."""
        return self.ca is not None

    @property
    def principal_hint(self) -> str:
        """Who this client claims to be, for log lines (never the secret)."""
        if self.token:
            return self.token.partition(":")[0]
        return "(certificate)" if self.cert is not None else "(anonymous)"

    def credentials(self, call_credentials: bool = True) -> grpc.ChannelCredentials:
        """The channel credentials (TLS, plus the token as call credentials unless
        ``call_credentials`` is False: the asyncio channels add it with ``BearerToken``)."""
        assert self.ca is not None
        key = _read(self.key, "TLS key") if self.key is not None else None
        cert = _read(self.cert, "TLS certificate") if self.cert is not None else None
        channel = grpc.ssl_channel_credentials(_read(self.ca, "TLS CA bundle"), key, cert)
        if self.token is None or not call_credentials:
            return channel
        return grpc.composite_channel_credentials(
            channel, grpc.access_token_call_credentials(self.token)
        )

    def options(self, extra: Sequence[tuple[str, Any]] = ()) -> list[tuple[str, Any]]:
        """``CHANNEL_OPTIONS`` with ``extra`` added or overriding (each option once), and the
        server name override."""
        options = list({**dict(CHANNEL_OPTIONS), **dict(extra)}.items())
        if self.server_name:
            options.append(("grpc.ssl_target_name_override", self.server_name))
        return options


INSECURE: Final = ClientSecurity()
"""Plaintext, no identity (a master without TLS on loopback)."""


class _Bearer:
    """Adds ``authorization: Bearer TOKEN`` to every call of an asyncio channel.

    What gRPC's ``access_token_call_credentials`` does, without its cost: those run a Python
    metadata plugin on another thread for every call, which halved the unary calls per second
    of a busy client here (1,400/s against 2,500/s with this interceptor, as without a token).
    Only ever on a TLS channel (``ClientSecurity`` refuses a token without a CA). gRPC files an
    interceptor under the first kind it is an instance of, so each kind is its own class."""

    def __init__(self, token: str) -> None:
        self._metadata = (("authorization", f"Bearer {token}"),)

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*(details.metadata or ()), *self._metadata)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )


class _BearerUnaryUnary(_Bearer, grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._details(details), request)


class _BearerUnaryStream(_Bearer, grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[type-arg]
    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._details(details), request)


class _BearerStreamUnary(_Bearer, grpc.aio.StreamUnaryClientInterceptor):  # type: ignore[type-arg]
    async def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return await continuation(self._details(details), requests)


class _BearerStreamStream(_Bearer, grpc.aio.StreamStreamClientInterceptor):  # type: ignore[type-arg]
    async def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return await continuation(self._details(details), requests)


def bearer_interceptors(token: str) -> list[Any]:
    """Interceptors adding ``token`` to every kind of call of an asyncio channel."""
    kinds = (_BearerUnaryUnary, _BearerUnaryStream, _BearerStreamUnary, _BearerStreamStream)
    return [kind(token) for kind in kinds]


def client_channel(
    address: str, security: ClientSecurity = INSECURE, options: Sequence[tuple[str, Any]] = ()
) -> grpc.aio.Channel:
    """An asyncio channel to ``address`` (``HOST:PORT``) with ``security`` (its token, if any,
    added to each call by ``bearer_interceptors``)."""
    if not security.tls:
        return grpc.aio.insecure_channel(address, options=security.options(options))
    credentials = security.credentials(call_credentials=False)
    interceptors = bearer_interceptors(security.token) if security.token is not None else None
    return grpc.aio.secure_channel(
        address, credentials, options=security.options(options), interceptors=interceptors
    )


def client_channel_sync(
    address: str, security: ClientSecurity = INSECURE, options: Sequence[tuple[str, Any]] = ()
) -> grpc.Channel:
    """A blocking channel to ``address`` (the commands) with ``security``."""
    if not security.tls:
        return grpc.insecure_channel(address, options=security.options(options))
    return grpc.secure_channel(address, security.credentials(), options=security.options(options))


@dataclass(frozen=True, slots=True)
class ServerSecurity:
    """A daemon's TLS: its certificate and key, and the CA that signs client certificates
    (``ca``: client certificates are verified; ``require_client_cert``: they are required)."""

    cert: Path | None = None
    key: Path | None = None
    ca: Path | None = None
    require_client_cert: bool = False

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise SecurityError("--tls-cert and --tls-key go together")
        if self.cert is None and self.ca is not None:
            raise SecurityError("--tls-ca verifies client certificates: it needs --tls-cert")

    @property
    def tls(self) -> bool:
        """True when the port is TLS."""
        return self.cert is not None

    @property
    def mode(self) -> str:
        """``off``, ``tls`` or ``mutual`` (client certificates required)."""
        if not self.tls:
            return "off"
        return "mutual" if self.require_client_cert else "tls"

    def credentials(self) -> grpc.ServerCredentials:
        """The server credentials (``SecurityError`` if a file cannot be used)."""
        assert self.cert is not None and self.key is not None
        pair = (_read(self.key, "TLS key"), _read(self.cert, "TLS certificate"))
        ca = _read(self.ca, "TLS CA bundle") if self.ca is not None else None
        return grpc.ssl_server_credentials(
            [pair], root_certificates=ca, require_client_auth=self.require_client_cert
        )


PLAINTEXT: Final = ServerSecurity()
"""A port without TLS."""


def add_port(server: grpc.aio.Server, address: str, security: ServerSecurity) -> int:
    """Listen on ``address`` with ``security``; the bound port (``RuntimeError`` from gRPC if it
    cannot bind, ``SecurityError`` if a file cannot be used)."""
    if not security.tls:
        return server.add_insecure_port(address)
    return server.add_secure_port(address, security.credentials())


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Connection limits of a daemon's gRPC server."""

    max_connections: int = 10_000
    streams_per_connection: int = 1000
    idle_timeout: float = 300.0
    handshake_timeout: float = 10.0


def server_options(limits: ServerLimits) -> list[tuple[str, Any]]:
    """The options of a daemon's gRPC server: message sizes, keepalive enforcement, limits."""
    return [
        ("grpc.keepalive_time_ms", 20_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", MIN_PING_INTERVAL_MS),
        ("grpc.http2.max_ping_strikes", MAX_PING_STRIKES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_concurrent_streams", limits.streams_per_connection),
        ("grpc.max_connection_idle_ms", int(limits.idle_timeout * 1000)),
        ("grpc.server_handshake_timeout_ms", int(limits.handshake_timeout * 1000)),
        ("grpc.max_allowed_incoming_connections", limits.max_connections),
        ("grpc.so_reuseport", 0),  # a second daemon on a busy port must fail, not share it
    ]


def fd_limit() -> int:
    """The process's soft limit of open file descriptors."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def raise_fd_limit() -> int:
    """Raise the soft limit of open file descriptors to the hard limit; the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return fd_limit()


def is_loopback(host: str) -> bool:
    """True when ``host`` is a loopback address or name (``127.0.0.1``, ``::1``, ``localhost``)."""
    bare = host.strip("[]").lower()
    return bare == "localhost" or bare == "::1" or bare.startswith("127.")
