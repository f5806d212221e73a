"""etcd for fairshare (docs/architecture.md §5):
a client over the endpoints of an ``etcd://`` target
(``fairshare.master_target.EtcdTarget``), and the leader record HA masters keep there.

- ``EtcdClient``: aetcd's asyncio client (the one etcd v3 client fairshare depends on), one per
  endpoint, used one at a time. A call that fails for a transport reason (a member that is down,
  one cut off from its quorum that does not answer within ``timeout``, "no leader") is retried
  on the next endpoint, each endpoint at most once per call; ``EtcdUnavailable`` when none
  answered. The endpoint that answered last is used first next time;
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
from aetcd import exceptions as etcd_errors

from fairshare.master_target import EtcdTarget

__all__ = [
    "EtcdClient",
    "EtcdTarget",
    "EtcdUnavailable",
    "LeaderRecord",
    "leader_key",
    "read_leader",
]

T = TypeVar("T")

_CHANNEL_OPTIONS: Final = {
    "grpc.max_receive_message_length": 256 * 1024 * 1024,  # a registry of 10,000s of agents
    "grpc.max_send_message_length": 16 * 1024 * 1024,
}
_TRANSPORT_ERRORS: Final = (
    etcd_errors.ConnectionFailedError,  # UNAVAILABLE: down, no leader, leader changed
    etcd_errors.ConnectionTimeoutError,  # DEADLINE_EXCEEDED
    TimeoutError,
)


class EtcdUnavailable(Exception):
    """No etcd endpoint answered; the message says what each one did."""


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

    def __init__(self, target: EtcdTarget, timeout: float = 2.0) -> None:
        self.target = target
        self.timeout = timeout
        self._clients: dict[int, aetcd.Client] = {}
        self._current = 0

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
            client = aetcd.Client(host, port, timeout=timeout, options=dict(_CHANNEL_OPTIONS))
            self._clients[index] = client
        return client

    async def call(
        self, operation: Callable[[aetcd.Client], Awaitable[T]], timeout: float | None = None
    ) -> T:
        """``operation(client)`` on the current endpoint, then on the next ones while they fail
        for a transport reason, each given ``timeout`` seconds (default: the client's);
        ``EtcdUnavailable`` when all did."""
        failures: list[str] = []
        for _ in self.target.endpoints:
            index = self._current
            try:
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
    """The current leader record (None while no master leads); ``EtcdUnavailable``."""
    found = await client.call(lambda etcd: etcd.get(leader_key(client.target)))
    if found is None:
        return None
    try:
        return LeaderRecord.from_json(found.value, int(found.create_revision))
    except ValueError:
        return None
