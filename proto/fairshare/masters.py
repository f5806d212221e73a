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
tries each listed master in turn, and raises the last error when none leads. While an election
is on (a follower says it knows no leader, ``ELECTION_METADATA``; the leader a follower names
does not answer; etcd names none) it says ``no leader yet: election in progress`` once and tries
again within ``election_wait`` (``ELECTION_WAIT``, 15 s) instead of failing at once; its calls
carry the unreachable leader, so a follower holds them until the new leader is elected.

Invariants: the kernel makes every client channel here (``open_channel``, ``open_blocking_channel``:
options, and credentials when the cluster is secured, have one seam); a hint is used once, so two
followers naming each other cannot make a client loop without backing off; nothing here blocks an
event loop (``MasterFinder.next`` reads etcd asynchronously; ``call_leader`` is for commands
that run without one).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final, TypeVar

import grpc
from grpc import aio

from fairshare.etcd import EtcdClient, EtcdRefused, EtcdUnavailable, LeaderRecord, read_leader
from fairshare.etcd_security import PLAIN_ETCD, EtcdSecurity
from fairshare.master_target import MasterTarget
from fairshare.transport import INSECURE, ClientSecurity, client_channel, client_channel_sync

__all__ = [
    "ELECTION_METADATA",
    "ELECTION_WAIT",
    "LEADER_METADATA",
    "NO_LEADER_YET",
    "UNREACHABLE_LEADER_METADATA",
    "MasterFinder",
    "MasterTarget",
    "MasterUnknown",
    "NoLeaderYet",
    "call_leader",
    "leader_hint",
    "open_blocking_channel",
    "open_channel",
]

T = TypeVar("T")

LEADER_METADATA: Final = "fairshare-leader"
UNREACHABLE_LEADER_METADATA: Final = "fairshare-leader-unreachable"
"""Trailing metadata of a follower's UNAVAILABLE answer: the leader's ``HOST:PORT``."""
ELECTION_METADATA: Final = "fairshare-election"
"""Trailing metadata of a follower's UNAVAILABLE answer when it knows no leader: an election
is on."""
REDIRECTS_PER_CALL: Final = 3
ELECTION_WAIT: Final = 15.0
"""How long a command keeps trying while an election is on: three of the masters' default
election leases (5 s), the longest a dead leader's key can outlive it plus the vote."""
ELECTION_BACKOFF: Final = 0.2
ELECTION_BACKOFF_MAX: Final = 1.0
NO_LEADER_YET: Final = "no leader yet: election in progress"


class MasterUnknown(grpc.RpcError, grpc.Call):
    """No master address to try now (etcd names no leader, or cannot be read): raised as an
    UNAVAILABLE call error, so callers handle it as a master that does not answer."""

    def __init__(self, message: str, election: bool = False) -> None:
        super().__init__(message)
        self._message = message
        self.election = election  # etcd names no leader: one is being elected

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


class NoLeaderYet(MasterUnknown):
    """Masters answer, but none leads yet and the election did not end within the wait."""

    def __init__(self, waited: float, last: grpc.RpcError) -> None:
        last_details = last.details() if isinstance(last, grpc.Call) else str(last)
        super().__init__(
            f"{NO_LEADER_YET} (still none after {waited:.0f}s; last answer: {last_details})",
            election=True,
        )


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
        etcd_security: EtcdSecurity = PLAIN_ETCD,
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
        self.etcd_security = etcd_security
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
        record = await self.leader_record()
        if record is None:
            raise MasterUnknown(f"no master leads now ({self.target} names none)", election=True)
        return record.address

    async def leader_record(self) -> LeaderRecord | None:
        """The leader record in etcd now (a linearizable read; None while none leads);
        ``MasterUnknown`` when etcd cannot be read. Only for an ``etcd://`` target."""
        assert self.target.etcd is not None
        if self._etcd is None:
            self._etcd = EtcdClient(self.target.etcd, self._etcd_timeout, self.etcd_security)
        try:
            return await read_leader(self._etcd)
        except (EtcdUnavailable, EtcdRefused) as error:
            raise MasterUnknown(f"cannot read the leader from {self.target}: {error}") from None

    def next_blocking(self) -> str:
        """``next`` for code without an event loop (the commands)."""
        if self.target.etcd is None or self._hint is not None or self._preferred is not None:
            return _run(self.next())
        finder = MasterFinder(  # a loop of its own
            self.target, self._rng, self._etcd_timeout, self.etcd_security
        )

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
    election_wait: float = ELECTION_WAIT,
    on_election: Callable[[str], None] | None = None,
) -> T:
    """Run ``call(channel)`` on the leading master: a follower's redirect is followed, a master
    that does not answer is skipped for the next one. While an election is on (a follower
    knows no leader, or the leader it names does not answer) the masters are tried again with
    a short backoff for up to ``election_wait`` seconds, ``on_election`` told once (with
    ``NO_LEADER_YET``); past that, ``NoLeaderYet`` is raised. Without any sign of an election
    the last ``grpc.RpcError`` (or ``MasterUnknown``) is raised as soon as every master was
    tried once."""
    finder = MasterFinder(target, etcd_security=security.etcd)
    started = time.monotonic()
    per_round = max(1, len(finder.target.addresses)) + REDIRECTS_PER_CALL
    error: grpc.RpcError | None = None
    election = False
    backoff = ELECTION_BACKOFF

    def electing() -> None:
        nonlocal election
        if not election and on_election is not None:
            on_election(f"{NO_LEADER_YET}; retrying for up to {election_wait:g}s")
        election = True

    while True:
        for _ in range(per_round):
            try:
                address = finder.next_blocking()
            except MasterUnknown as unknown:  # etcd names no leader (yet)
                error = unknown
                if unknown.election:
                    electing()
                break
            try:
                with open_blocking_channel(address, options, security) as channel:
                    reporting = grpc.intercept_channel(channel, _Report(finder.report()))
                    return call(reporting)
            except grpc.RpcError as raised:
                error = raised
                code = raised.code() if isinstance(raised, grpc.Call) else None
                if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                metadata = raised.trailing_metadata() if isinstance(raised, grpc.Call) else ()
                hint = leader_hint(metadata)
                redirected = finder.redirected(address, hint)
                if _electing(metadata) or finder.unreachable_leader is not None:
                    electing()  # none leads, or the one named is dead: its lease still names it
                if not redirected and finder.target.etcd is not None:
                    break  # etcd named this one: asking again names it again
        assert error is not None
        waited = time.monotonic() - started
        if not election:
            raise error
        if waited >= election_wait:
            raise NoLeaderYet(waited, error)
        time.sleep(min(backoff, max(0.0, election_wait - waited)))
        backoff = min(backoff * 2, ELECTION_BACKOFF_MAX)


class _Report(
    grpc.UnaryUnaryClientInterceptor,  # type: ignore[type-arg]
    grpc.UnaryStreamClientInterceptor,  # type: ignore[type-arg]
):
    """Adds ``MasterFinder.report()`` to every call's metadata: the follower that hears of a
    dead leader holds the call until the election ends instead of naming the dead one again."""

    def __init__(self, report: tuple[tuple[str, str], ...]) -> None:
        self._report = report

    def _details(self, details: Any) -> Any:
        if not self._report:
            return details
        metadata = (*(details.metadata or ()), *self._report)
        return details._replace(metadata=metadata)  # grpc's ClientCallDetails is a namedtuple

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        """Add the report to a unary call."""
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        """Add the report to a server-streaming call."""
        return continuation(self._details(details), request)


def _electing(metadata: Any) -> bool:
    """A follower said it knows no leader now (``ELECTION_METADATA``)."""
    return any(key == ELECTION_METADATA for key, _ in metadata or ())
