"""etcd for fairshare (docs/architecture.md §5):
a client over the endpoints of an ``etcd://`` target
(``fairshare.master_target.EtcdTarget``), and the leader record HA masters keep there.

- ``EtcdClient``: aetcd's asyncio client (the one etcd v3 client fairshare depends on), one per
  endpoint, used one at a time, over TLS and with etcd's user authentication when its
  ``EtcdSecurity`` says so (``fairshare.etcd_security``). A call that fails for a transport
  reason (a member that is down, one cut off from its quorum that does not answer within
  ``timeout``, "no leader", a TLS handshake refused) is retried on the next endpoint, each
  endpoint at most once per call; ``EtcdUnavailable`` when none answered. Connecting (the TLS
  handshake and etcd's login) is given at least ``CONNECT_TIMEOUT`` apart from the call's
  timeout; an expired authentication token is renewed once per call. The endpoint that
  answered last is used first next time;
- ``check_access``: one read of the leader key, the start-up check of every process given an
  etcd address: ``EtcdRefused`` with one line naming the cause (TLS, a missing client
  certificate, the user or password, no permission) when etcd refuses;
- ``LeaderRecord``: the value of ``<prefix>/leader``, written by the master that won the
  election, under its lease (it disappears when the lease ends). The leader's *epoch* is the
  create revision of that key: etcd revisions only grow, so every new term has a higher epoch.

Invariants: a retried call may have been applied by the member that did not answer in time
(etcd cannot say); callers only retry operations that are safe to apply twice (fenced puts of
whole rows, a create-if-absent whose outcome they read back). Nothing here blocks the event
loop; ``EtcdClient`` belongs to the loop it was first used on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import aetcd
import grpc
from aetcd import exceptions as etcd_errors
from aetcd import rpc as etcd_rpc

from fairshare.etcd_security import PLAIN_ETCD, EtcdSecurity
from fairshare.master_target import EtcdTarget

__all__ = [
    "EtcdClient",
    "EtcdRefused",
    "EtcdTarget",
    "EtcdUnavailable",
    "LeaderRecord",
    "check_access",
    "leader_key",
    "read_leader",
    "refused_at_start",
]

T = TypeVar("T")

_CHANNEL_OPTIONS: Final = {
    "grpc.max_receive_message_length": 256 * 1024 * 1024,  # a registry of 10,000s of agents
    "grpc.max_send_message_length": 16 * 1024 * 1024,
}
CONNECT_TIMEOUT: Final = 5.0
_TRANSPORT_ERRORS: Final = (
    etcd_errors.ConnectionFailedError,  # UNAVAILABLE: down, no leader, leader changed
    etcd_errors.ConnectionTimeoutError,  # DEADLINE_EXCEEDED
    TimeoutError,
)


class EtcdUnavailable(Exception):
    """No etcd endpoint answered; the message says what each one did."""


class EtcdRefused(Exception):
    """etcd answered but refused this process (authentication, permission); the message names
    the cause in one line."""


def leader_key(target: EtcdTarget) -> bytes:
    """The key the leading master holds under its lease."""
    return target.key("leader")


@dataclass(frozen=True, slots=True)
class LeaderRecord:
    """Who leads: its gRPC address (what clients dial), its HTTP address, its id, since when
    (wall clock), and its epoch (the key's create revision, not part of the stored value)."""

    address: str
    http: str
    master_id: str
    elected_at: float
    epoch: int = 0

    def to_json(self) -> bytes:
        """The stored value (the epoch is the key's own revision)."""
        fields = {
            "address": self.address,
            "http": self.http,
            "master_id": self.master_id,
            "elected_at": self.elected_at,
        }
        return json.dumps(fields, sort_keys=True).encode()

    @classmethod
    def from_json(cls, value: bytes, epoch: int) -> LeaderRecord:
        """Read a stored value; ``ValueError`` for one that is not a leader record."""
        try:
            raw: dict[str, Any] = json.loads(value)
            return cls(
                str(raw["address"]),
                str(raw.get("http", "")),
                str(raw["master_id"]),
                float(raw["elected_at"]),
                epoch,
            )
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"not a leader record: {value[:100]!r} ({error})") from None


class EtcdClient:
    """aetcd clients over the endpoints of one ``EtcdTarget``, one used at a time."""

    def __init__(
        self, target: EtcdTarget, timeout: float = 2.0, security: EtcdSecurity = PLAIN_ETCD
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.security = security
        self._clients: dict[int, aetcd.Client] = {}
        self._current = 0
        self._channel_credentials: grpc.ChannelCredentials | None = None

    @property
    def endpoint(self) -> str:
        """``HOST:PORT`` of the endpoint tried first."""
        host, port = self.target.endpoints[self._current]
        return f"{host}:{port}"

    def _client(self, index: int) -> aetcd.Client:
        client = self._clients.get(index)
        if client is None:
            host, port = self.target.endpoints[index]
            timeout: Any = self.timeout  # aetcd annotates it as int; grpc takes any float
            security = self.security
            if security.tls:
                client = _TlsClient(
                    self._credentials(),
                    host,
                    port,
                    username=security.user,
                    password=security.password,
                    timeout=timeout,
                    options=dict(_CHANNEL_OPTIONS),
                )
            else:
                client = aetcd.Client(host, port, timeout=timeout, options=dict(_CHANNEL_OPTIONS))
            self._clients[index] = client
        return client

    def _credentials(self) -> grpc.ChannelCredentials:
        """TLS credentials of ``security`` (the files read once; ``EtcdRefused`` naming the
        file that cannot be read)."""
        if self._channel_credentials is None:
            security = self.security
            assert security.ca is not None
            self._channel_credentials = grpc.ssl_channel_credentials(
                _read(security.ca, "--etcd-tls-ca"),
                _read(security.key, "--etcd-tls-key") if security.key else None,
                _read(security.cert, "--etcd-tls-cert") if security.cert else None,
            )
        return self._channel_credentials

    async def _connect(self, index: int, timeout: float | None) -> None:
        """Connect endpoint ``index``'s client (with a user: the TLS handshake and etcd's
        login, a bcrypt check that takes etcd tens of milliseconds, more under load), given at
        least ``CONNECT_TIMEOUT`` seconds apart from the call's own timeout."""
        try:
            async with asyncio.timeout(max(timeout or self.timeout, CONNECT_TIMEOUT)):
                await self._client(index).connect()
        except Exception:
            await self._renew(index)  # a half-made connection is not reused
            raise

    async def _renew(self, index: int) -> None:
        """Drop endpoint ``index``'s client (its auth token expired): the next call
        authenticates afresh."""
        client = self._clients.pop(index, None)
        if client is not None:
            with contextlib.suppress(etcd_errors.ClientError, TimeoutError):
                await client.close()

    async def call(
        self, operation: Callable[[aetcd.Client], Awaitable[T]], timeout: float | None = None
    ) -> T:
        """``operation(client)`` on the current endpoint, then on the next ones while they fail
        for a transport reason, each given ``timeout`` seconds (default: the client's);
        ``EtcdUnavailable`` when all did."""
        failures: list[str] = []
        renewed = False
        for _ in self.target.endpoints:
            index = self._current
            try:
                await self._connect(index, timeout)
                async with asyncio.timeout(timeout or self.timeout):
                    try:
                        return await operation(self._client(index))
                    except etcd_errors.UnauthenticatedError:
                        if renewed or self.security.user is None:
                            raise
                        renewed = True  # etcd's simple tokens expire: log in again, once
                        await self._renew(index)
                await self._connect(index, timeout)
                async with asyncio.timeout(timeout or self.timeout):
                    return await operation(self._client(index))
            except _TRANSPORT_ERRORS as error:
                failures.append(f"{self.endpoint}: {type(error).__name__} {error}".strip())
                self._current = (index + 1) % len(self.target.endpoints)
        raise EtcdUnavailable("no etcd endpoint answered (" + "; ".join(failures) + ")")

    async def close(self) -> None:
        """Close every channel."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            with contextlib.suppress(etcd_errors.ClientError, TimeoutError):
                await client.close()


async def read_leader(client: EtcdClient) -> LeaderRecord | None:
    """The current leader record (None while no master leads); ``EtcdUnavailable``, or
    ``EtcdRefused`` (one line naming the cause) when etcd refuses this process: its
    authentication, its permission, or the TLS handshake."""
    try:
        found = await client.call(lambda etcd: etcd.get(leader_key(client.target)))
    except etcd_errors.ClientError as error:
        raise EtcdRefused(refusal(client, error)) from None
    except EtcdUnavailable as error:
        if _tls_refusal(client, str(error).lower()):
            raise EtcdRefused(refusal(client, error)) from None
        raise
    if found is None:
        return None
    try:
        return LeaderRecord.from_json(found.value, int(found.create_revision))
    except ValueError:
        return None


async def check_access(client: EtcdClient) -> None:
    """Read the leader key once: ``EtcdRefused`` (one line naming the cause) when etcd cannot be
    used with this process's security settings, ``EtcdUnavailable`` when no endpoint answered
    for another reason."""
    await read_leader(client)


def _tls_refusal(client: EtcdClient, text: str) -> bool:
    """The transport failure is a TLS mismatch, not a member that is down."""
    if not client.security.tls:
        return "socket closed" in text  # a TLS server hung up on plaintext
    return any(sign in text for sign in ("ssl", "handshake", "tsi_", "certificate"))


def refusal(client: EtcdClient, error: Exception) -> str:
    """One line: why etcd refused ``client`` (the cause named for the operator)."""
    text = str(error)
    where = f"etcd {client.target} refused this process ({client.security.describe()})"
    lowered = text.lower()
    if not client.security.tls and _tls_refusal(client, lowered):
        cause = "etcd speaks TLS: give --etcd-tls-ca (and a client certificate)"
    elif "certificate_verify_failed" in lowered or "certificate verify failed" in lowered:
        cause = "etcd's certificate is not signed by --etcd-tls-ca (wrong CA)"
    elif _tls_refusal(client, lowered):
        cause = "the TLS handshake failed: etcd demands a client certificate (--etcd-tls-cert)"
    elif "authentication failed" in lowered or "invalid user id or password" in lowered:
        cause = "the user or password is wrong (--etcd-user, --etcd-password-file)"
    elif "user name is empty" in lowered or "user name not found" in lowered:
        cause = "etcd requires authentication: give --etcd-user or --etcd-tls-cert"
    elif "permission denied" in lowered:
        cause = "no permission: the etcd user (or the client certificate's name) may not read it"
    else:
        cause = text.splitlines()[0][:300] if text else type(error).__name__
    return f"{where}: {cause}"


def _read(path: Any, flag: str) -> bytes:
    try:
        data: bytes = path.read_bytes()
    except OSError as error:
        raise EtcdRefused(f"{flag} {path}: cannot read it: {error.strerror}") from None
    return data


class _TlsClient(aetcd.Client):  # type: ignore[misc]  # aetcd is untyped
    """aetcd's client over a TLS channel (aetcd itself only makes plaintext channels): the
    same connection steps as ``aetcd.Client.connect``, with ``credentials``."""

    def __init__(self, credentials: grpc.ChannelCredentials, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._credentials = credentials

    async def connect(self) -> None:
        """Open the TLS channel and, with a user, authenticate (aetcd's errors on failure)."""
        if self._connected.is_set():
            return
        if self._is_connecting:  # type: ignore[has-type]  # set by aetcd
            await asyncio.wait_for(self._connected.wait(), self._connect_wait_timeout)
            return
        try:
            self._is_connecting = True
            target = f"{self._host}:{self._port}"
            self.channel = etcd_rpc.secure_channel(
                target, self._credentials, options=list(self._options.items())
            )
            if self._username is not None and self._password is not None:
                self.auth_stub = etcd_rpc.AuthStub(self.channel)
                request = etcd_rpc.AuthenticateRequest(name=self._username, password=self._password)
                answer = await self.auth_stub.Authenticate(request, timeout=self._timeout)
                self.metadata = (("token", answer.token),)
            self.kvstub = etcd_rpc.KVStub(self.channel)
            self.clusterstub = etcd_rpc.ClusterStub(self.channel)
            self.leasestub = etcd_rpc.LeaseStub(self.channel)
            self.maintenancestub = etcd_rpc.MaintenanceStub(self.channel)
            self._watcher = aetcd.watcher.Watcher(
                etcd_rpc.WatchStub(self.channel), timeout=self._timeout, metadata=self.metadata
            )
            self._connected.set()
        except etcd_rpc.AioRpcError as error:
            etcd_errors._handle_exception(error)
        finally:
            self._is_connecting = False


def refused_at_start(
    target: EtcdTarget, security: EtcdSecurity, timeout: float = 5.0
) -> str | None:
    """The start-up check of a process given an etcd address (blocking: before its loop
    runs): the one-line refusal when etcd refuses it, else None (etcd answered, or no member
    answered at all: the process starts and keeps trying, as it would after an outage)."""

    async def once() -> str | None:
        client = EtcdClient(target, timeout, security)
        try:
            await check_access(client)
        except EtcdRefused as error:
            return str(error)
        except EtcdUnavailable:
            return None
        finally:
            await client.close()
        return None

    return asyncio.run(once())
