"""``IoWorkers``: the core's side of ``--io-workers N``: the public port held, the core's Unix
socket, and the worker processes, restarted when they die (docs/architecture.md §13).

The core binds the public port without listening on it (``SO_REUSEPORT``), so it holds the port
(and learns it, for ``--port 0``) while the workers, which listen on it with ``SO_REUSEPORT``
too, take every connection (the kernel hashes each new connection to one listening socket; a
socket that only is bound takes none). In a directory of mode 0700 the core serves two Unix
sockets (each 0600): the link socket, where each worker's link (``CoreLink``) connects, and its
own gRPC server, for the calls the workers forward (Operator, health), which its ``RpcGuard``
trusts (``forwarded_principal``).

Invariants: the workers serve the public port only once the core is ready to answer (``linked``
waits for their links, the core then recovers or campaigns, ``serving`` lets them serve and waits
until each does, or returns False after ``timeout``), so no agent is refused for a core that is
still starting; a worker that exits while the master runs is started again (after 0.2 s, doubling
to 5 s while it keeps dying within 10 s of its start), and the core ends its sessions when its
link ends (``CoreLink``); ``stop`` sends SIGTERM, then SIGKILL after the grace, and waits for
every worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
from pathlib import Path
from typing import Any, Final

import grpc
from fairshare.logs import log_event

from master.config import MasterConfig
from master.io_workers.core_link import CoreLink
from master.io_workers.protocol import LINK_SOCKET, encode, socket_dir
from master.io_workers.worker import WorkerParams

__all__ = ["IoWorkers"]

log = logging.getLogger("fairshare.master.io")

FIRST_BACKOFF: Final = 0.2
MAX_BACKOFF: Final = 5.0
STABLE_AFTER: Final = 10.0


class IoWorkers:
    """``count`` worker processes serving the public port for the core."""

    def __init__(self, config: MasterConfig, count: int, link: CoreLink) -> None:
        self.config = config
        self.count = count
        self.link = link
        self.dir = socket_dir(Path(config.work_dir))
        self.socket = self.dir / "core.sock"
        self.link_socket = self.dir / LINK_SOCKET
        self._link_server: asyncio.AbstractServer | None = None
        self.port = 0
        self._placeholder: socket.socket | None = None
        self._procs: dict[int, asyncio.subprocess.Process] = {}
        self._keepers: list[asyncio.Task[None]] = []
        self._stopping = False
        self.restarts = 0

    def add_to_server(self, server: grpc.aio.Server) -> None:
        """The core's gRPC server on its Unix socket too (for the forwarded calls)."""
        server.add_insecure_port(f"unix:{self.socket}")
        if self.socket.exists():
            os.chmod(self.socket, 0o600)

    async def listen(self) -> None:
        """Serve the link socket (the workers connect as soon as it exists)."""
        self.link_socket.unlink(missing_ok=True)
        self._link_server = await asyncio.start_unix_server(
            self.link.serve_connection, path=str(self.link_socket)
        )
        os.chmod(self.link_socket, 0o600)

    def reserve_port(self) -> int:
        """Bind the public port (without listening) so the workers can share it; its number."""
        config = self.config
        host = config.host.strip("[]")
        family, kind, proto, _, address = socket.getaddrinfo(
            host, config.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        placeholder = socket.socket(family, kind, proto)
        placeholder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        placeholder.bind(address)
        self._placeholder = placeholder
        self.port = int(placeholder.getsockname()[1])
        return self.port

    def _params(self, index: int) -> WorkerParams:
        share = None
        if self.config.max_connections is not None:
            share = max(1, self.config.max_connections // self.count)
        return WorkerParams(
            self.config,
            index,
            self.port,
            f"unix:{self.socket}",
            str(self.link_socket),
            os.getpid(),
            share,
        )

    def spawn(self) -> None:
        """Start the workers (as soon as the port is held: their start overlaps the core's own)."""
        self._keepers = [asyncio.create_task(self._keep(i)) for i in range(self.count)]

    async def linked(self, timeout: float = 30.0) -> bool:
        """True once every worker has linked (it does not serve the public port yet)."""
        return await self.link.linked(self.count, timeout)

    async def serving(self, timeout: float = 30.0) -> bool:
        """Let the workers serve the public port; True once every one does."""
        self.link.open()
        return await self.link.serving(self.count, timeout)

    async def _keep(self, index: int) -> None:
        loop = asyncio.get_running_loop()
        backoff = FIRST_BACKOFF
        while not self._stopping:
            started = loop.time()
            try:
                code = await self._run_once(index)
            except OSError as error:  # the interpreter could not be started: try again later
                log_event(log, "io_worker.start_failed", logging.ERROR, worker=index, error=error)
                code = None
            if self._stopping:
                return
            self.restarts += 1
            log_event(log, "io_worker.exited", logging.WARNING, worker=index, code=code)
            backoff = FIRST_BACKOFF if loop.time() - started > STABLE_AFTER else backoff
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _run_once(self, index: int) -> int:
        """Start worker ``index`` and wait for it to exit; its exit code."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "master.io_workers", stdin=asyncio.subprocess.PIPE
        )
        self._procs[index] = proc
        assert proc.stdin is not None
        proc.stdin.write(encode(self._params(index)))
        with contextlib.suppress(ConnectionError):
            await proc.stdin.drain()
        proc.stdin.close()
        log_event(log, "io_worker.started", worker=index, pid=proc.pid)
        return await proc.wait()

    def pids(self) -> list[int]:
        """The workers' process ids (those running now)."""
        return [p.pid for p in self._procs.values() if p.returncode is None]

    async def stop(self, grace: float) -> None:
        """SIGTERM every worker, SIGKILL after ``grace`` (+1 s), and wait for each."""
        self._stopping = True
        procs = [p for p in self._procs.values() if p.returncode is None]
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        waits: list[Any] = [proc.wait() for proc in procs]
        if waits:
            _, pending = await asyncio.wait(
                [asyncio.ensure_future(w) for w in waits], timeout=grace + 1.0
            )
            for proc in procs:
                if proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
            if pending:
                await asyncio.wait(pending)
        for keeper in self._keepers:
            keeper.cancel()
        if self._placeholder is not None:
            self._placeholder.close()
        if self._link_server is not None:
            self._link_server.close()
        self.socket.unlink(missing_ok=True)
        self.link_socket.unlink(missing_ok=True)
        if self.dir.name.startswith("fairshare-io-"):
            shutil.rmtree(self.dir, ignore_errors=True)
