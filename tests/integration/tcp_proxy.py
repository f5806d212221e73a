"""``TcpProxy``: a TCP forwarder on 127.0.0.1:0 that a test can stall and cut, in its own thread.

Put between an agent and the master, it lets a test break the agent's stream at a chosen moment:
``hold(upstream=..., downstream=...)`` keeps the bytes of a direction (agent -> master is
upstream) in the proxy instead of forwarding them, so what was sent meanwhile is in flight and
nothing more; ``cut()`` closes every connection and drops what was held: those bytes are lost
as a network failure loses them. New connections are accepted (and forwarded) at once after a
cut, so the agent reconnects through the proxy.

Invariants: every socket operation runs on the proxy's own event loop thread; the public methods
are thread-safe (they hop onto that loop and wait for the result, bounded); ``close`` stops the
loop and closes everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

__all__ = ["TcpProxy"]

T = TypeVar("T")
CALL_TIMEOUT = 10.0


@dataclass(eq=False)
class _Pipe:
    """One direction of one connection."""

    writer: asyncio.StreamWriter
    held: list[bytes] = field(default_factory=list)


class TcpProxy:
    """Forwards 127.0.0.1:<port> to ``target`` (HOST:PORT)."""

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self._target = (host, int(port))
        self._hold = {"up": False, "down": False}
        self._pipes: list[tuple[str, _Pipe]] = []
        self._writers: list[asyncio.StreamWriter] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server = self._call(self._start)
        self.address = f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def _call(self, make: Callable[[], Awaitable[T]]) -> T:
        """Run ``make()`` on the proxy's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(make(), self._loop).result(CALL_TIMEOUT)

    async def _start(self) -> asyncio.Server:
        return await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.close()
            return
        self._writers += [writer, up_writer]
        up, down = _Pipe(up_writer), _Pipe(writer)
        self._pipes += [("up", up), ("down", down)]
        await asyncio.gather(
            self._pump(reader, up, "up"),
            self._pump(up_reader, down, "down"),
            return_exceptions=True,
        )
        for end in (writer, up_writer):
            end.close()

    async def _pump(self, reader: asyncio.StreamReader, pipe: _Pipe, direction: str) -> None:
        while data := await reader.read(65536):
            if self._hold[direction]:
                pipe.held.append(data)
                continue
            pipe.writer.write(data)
            await pipe.writer.drain()

    def hold(self, *, upstream: bool, downstream: bool) -> None:
        """Keep (True) or forward (False, releasing what was kept) each direction's bytes."""

        async def apply() -> None:
            self._hold.update(up=upstream, down=downstream)
            for direction, pipe in self._pipes:
                if not self._hold[direction] and pipe.held:
                    for data in pipe.held:
                        pipe.writer.write(data)
                    pipe.held.clear()

        self._call(apply)

    def held_bytes(self) -> dict[str, int]:
        """Bytes kept so far, per direction (``up``, ``down``)."""

        async def count() -> dict[str, int]:
            totals = {"up": 0, "down": 0}
            for direction, pipe in self._pipes:
                totals[direction] += sum(len(data) for data in pipe.held)
            return totals

        return self._call(count)

    def cut(self) -> int:
        """Close every connection (held bytes are lost) and forward again; how many were cut."""

        async def apply() -> int:
            self._hold.update(up=False, down=False)
            writers, self._writers, self._pipes = self._writers, [], []
            for writer in writers:
                transport = writer.transport
                transport.abort()  # a reset, as a failed network delivers it
            return len(writers) // 2

        return self._call(apply)

    def close(self) -> None:
        """Stop forwarding and close everything."""

        async def shutdown() -> None:
            self._server.close()
            for writer in self._writers:
                writer.transport.abort()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

        with contextlib.suppress(Exception):
            self._call(shutdown)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CALL_TIMEOUT)
        self._loop.close()
