"""Where the master is, for every client (agents, the SDK, the commands): the ``--master`` syntax,
finding the leader among several masters, and the one place client channels are made.

``--master`` (docs/architecture.md §7) is one ``HOST:PORT``, a list ``a:5050,b:5050,c:5050``, or
``etcd://h1:2379,h2:2379[/prefix]`` (the leader's address is read from the key the leading
master holds there, ``fairshare.etcd``). A master that does not lead answers every call but the
health check UNAVAILABLE, with the leader's ``HOST:PORT`` in the trailing metadata
``fairshare-leader`` when it knows it (``LEADER_METADATA``). A client whose named leader did not
answer says so on its next call to a follower (``UNREACHABLE_LEADER_METADATA``): followers name
a dead leader until its etcd lease ends, so that follower holds the call until another leader
is elected, then serves or redirects it.

``MasterFinder`` says which address to try next: the leader a follower just named, else the
master that answered last, else (etcd) the address in the leader record, else the next master
of the list, round robin from a random start. Clients report what happened (``answered``,
``failed``, ``redirected``) and wait with their own backoff between failures; a redirect is
followed at once.

``call_leader`` runs one blocking call (the commands) on the leader: it follows redirects and
tries each listed master in turn, and raises the last error when none leads.

Invariants: the kernel makes every client channel here (``open_channel``, ``open_blocking_channel``:
options, and credentials when the cluster is secured, have one seam); a hint is used once, so two
followers naming each other cannot make a client loop without backing off; nothing here blocks an
event loop (``MasterFinder.next`` reads etcd asynchronously; ``call_leader`` is for commands
that run without one).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final, TypeVar

import grpc
from grpc import aio

from fairshare.etcd import EtcdClient, EtcdUnavailable, read_leader
from fairshare.master_target import MasterTarget
from fairshare.transport import INSECURE, ClientSecurity, client_channel, client_channel_sync

__all__ = [
    "LEADER_METADATA",
    "UNREACHABLE_LEADER_METADATA",
    "MasterFinder",
    "MasterTarget",
    "MasterUnknown",
    "call_leader",
    "leader_hint",
    "open_blocking_channel",
    "open_channel",
]

T = TypeVar("T")

LEADER_METADATA: Final = "fairshare-leader"
UNREACHABLE_LEADER_METADATA: Final = "fairshare-leader-unreachable"
"""Trailing metadata of a follower's UNAVAILABLE answer: the leader's ``HOST:PORT``."""
REDIRECTS_PER_CALL: Final = 3


class MasterUnknown(grpc.RpcError, grpc.Call):
    """No master address to try now (etcd names no leader, or cannot be read): raised as an
    UNAVAILABLE call error, so callers handle it as a master that does not answer."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self._message = message

    def code(self) -> grpc.StatusCode:
        """Always UNAVAILABLE."""
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        """Why no master is known."""
        return self._message

    def initial_metadata(self) -> tuple[()]:
        """None: no call was made."""
        return ()

    def trailing_metadata(self) -> tuple[()]:
        """None: no call was made."""
        return ()

    def is_active(self) -> bool:
        """Never active."""
        return False

    def time_remaining(self) -> float:
        """No time left."""
        return 0.0

    def cancel(self) -> bool:
        """Nothing to cancel."""
        return False

    def add_callback(self, callback: Any) -> bool:
        """Nothing will happen."""
        return False


def leader_hint(metadata: Any) -> str | None:
    """The leader a follower named in its trailing metadata (pairs of key and value, as grpc
    hands them), if any."""
    for key, value in metadata or ():
        if key == LEADER_METADATA:
            text = value.decode() if isinstance(value, bytes) else str(value)
            return text or None
    return None


def open_channel(
    address: str,
    options: Sequence[tuple[str, Any]] = (),
    security: ClientSecurity = INSECURE,
) -> aio.Channel:
    """An asyncio channel to the master at ``address`` (``fairshare.transport``: TLS, the
    client's identity and the one message size)."""
    return client_channel(address, security, options)


def open_blocking_channel(
    address: str,
    options: Sequence[tuple[str, Any]] = (),
    security: ClientSecurity = INSECURE,
) -> grpc.Channel:
    """A blocking channel to the master at ``address`` (the commands)."""
    return client_channel_sync(address, security, options)


class MasterFinder:
    """The address a client tries next, given what happened so far."""

    def __init__(
        self,
        target: MasterTarget | str,
        rng: random.Random | None = None,
        etcd_timeout: float = 2.0,
    ) -> None:
        self.target = target if isinstance(target, MasterTarget) else MasterTarget.parse(target)
        self._rng = rng or random.Random()
        count = len(self.target.addresses)
        self._index = self._rng.randrange(count) if count > 1 else 0
        self._hint: str | None = None
        self._preferred: str | None = None
        self._trying_hint: str | None = None  # the named leader being tried now
        self.unreachable_leader: str | None = None  # a named leader that did not answer
        self._etcd_timeout = etcd_timeout
        self._etcd: EtcdClient | None = None

    @property
    def preferred(self) -> str | None:
        """The master that answered last (None until one did, or after it failed)."""
        return self._preferred

    async def next(self) -> str:
        """The address to try now; ``MasterUnknown`` when etcd names no leader."""
        self._trying_hint = None
        if self._hint is not None:
            hint, self._hint = self._hint, None
            self._trying_hint = hint
            return hint
        if self._preferred is not None:
            return self._preferred
        if self.target.etcd is None:
            return self.target.addresses[self._index % len(self.target.addresses)]
        if self._etcd is None:
            self._etcd = EtcdClient(self.target.etcd, self._etcd_timeout)
        try:
            record = await read_leader(self._etcd)
        except EtcdUnavailable as error:
            raise MasterUnknown(f"cannot read the leader from {self.target}: {error}") from None
        if record is None:
            raise MasterUnknown(f"no master leads now ({self.target} names none)")
        return record.address

    def next_blocking(self) -> str:
        """``next`` for code without an event loop (the commands)."""
        if self.target.etcd is None or self._hint is not None or self._preferred is not None:
            return _run(self.next())
        finder = MasterFinder(self.target, self._rng, self._etcd_timeout)  # a loop of its own

        async def once() -> str:
            try:
                return await finder.next()
            finally:
                await finder.close()

        return _run(once())

    def answered(self, address: str) -> None:
        """``address`` answered as the leader."""
        self._preferred = address
        self.unreachable_leader = None

    def report(self) -> tuple[tuple[str, str], ...]:
        """Metadata for the next call: the named leader that did not answer, if any."""
        if self.unreachable_leader is None:
            return ()
        return ((UNREACHABLE_LEADER_METADATA, self.unreachable_leader),)

    def failed(self, address: str) -> None:
        """``address`` did not answer, or not as a leader: try another one next."""
        if address == self._trying_hint:
            self.unreachable_leader = address
        if self._preferred == address:
            self._preferred = None
        addresses = self.target.addresses
        if address in addresses and addresses[self._index % len(addresses)] == address:
            self._index = (self._index + 1) % len(addresses)

    def redirected(self, address: str, leader: str | None) -> bool:
        """The master at ``address`` does not lead and named ``leader`` (or nobody): True if
        the named leader is worth trying at once."""
        self.failed(address)
        if leader is None or leader == address:
            return False
        self._hint = leader
        return True

    async def close(self) -> None:
        """Close the etcd client, if one was opened."""
        if self._etcd is not None:
            etcd, self._etcd = self._etcd, None
            await etcd.close()


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def call_leader(
    target: MasterTarget | str,
    call: Callable[[grpc.Channel], T],
    options: Sequence[tuple[str, Any]] = (),
    security: ClientSecurity = INSECURE,
) -> T:
    """Run ``call(channel)`` on the leading master: a follower's redirect is followed, a master
    that does not answer is skipped for the next one; the last ``grpc.RpcError`` (or
    ``MasterUnknown``) is raised when none answered as the leader."""
    finder = MasterFinder(target)
    tries = max(1, len(finder.target.addresses)) + REDIRECTS_PER_CALL
    error: grpc.RpcError | None = None
    for _ in range(tries):
        address = finder.next_blocking()
        try:
            with open_blocking_channel(address, options, security) as channel:
                return call(channel)
        except grpc.RpcError as raised:
            error = raised
            code = raised.code() if isinstance(raised, grpc.Call) else None
            if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise
            hint = (
                leader_hint(raised.trailing_metadata()) if isinstance(raised, grpc.Call) else None
            )
            if not finder.redirected(address, hint) and finder.target.etcd is not None:
                break  # etcd named this one: asking again names it again
    assert error is not None
    raise error
