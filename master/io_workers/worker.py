"""An I/O worker process: ``python -m master.io_workers`` (docs/architecture.md §13).

Started by the master's ``IoWorkers`` with its ``WorkerParams`` (pickled, on standard input).
It serves the master's public port beside the other workers (``SO_REUSEPORT``: the kernel
spreads new connections over them), with the master's TLS, ``RpcGuard`` (authentication) and
server limits: the Agent API by the master's own ``AgentServicer`` over ``RemoteAgents`` and the
Scheduler API by its own ``SchedulerServicer`` over ``RemoteFrameworks`` (their calls batched on
the one ``WorkerLink`` to the core), every other call (Operator, health) forwarded to the core
(``Forwarder``).

Invariants: the public port is served only while the link is up: the worker, started as soon
as the core holds the port and serves its link socket, opens its link (one connection: the
socket exists before any worker starts, and a worker that cannot connect exits, to be started
again), starts its server when the core's first batch says the core is ready to
answer, tells the core so (``HELLO``), and exits when the link ends (the core died or dropped
it); it dies with the core process (``PR_SET_PDEATHSIG``, and a check that its parent is still
the one that started it); SIGINT is ignored (a terminal's ^C reaches the core, which stops its
workers), SIGTERM stops the server with the master's ``shutdown_grace``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import pickle
import signal
import sys
from dataclasses import dataclass
from typing import Any, Final

import grpc
from fairshare.fd_watch import connection_cap
from fairshare.logs import configure_logging, log_event
from fairshare.masters import UNREACHABLE_LEADER_METADATA
from fairshare.rpc_guard import RpcGuard
from fairshare.transport import ServerLimits, add_port, raise_fd_limit, server_options

from master.config import MasterConfig
from master.io_workers.forwarding import HEALTH_SHAPES, Forwarder
from master.io_workers.protocol import (
    LINK_OPTIONS,
    RPC_COUNTS,
    encode,
    read_frame,
    write_frame,
)
from master.io_workers.remote_agents import RemoteAgents
from master.io_workers.remote_frameworks import UNREACHABLE_LEADER, RemoteFrameworks
from master.io_workers.worker_link import WorkerLink
from master.security import load_security
from master.service.agent import AgentServicer, add_agent_service
from master.service.leader_gate import method_shapes
from master.service.rpc_metrics import RpcMetricsInterceptor
from master.service.scheduler import SchedulerServicer, add_scheduler_service

__all__ = ["WorkerParams", "main", "serve"]

log = logging.getLogger("fairshare.master.io")

AGENT_SERVICE = "fairshare.v1.AgentService"
SCHEDULER_SERVICE = "fairshare.v1.SchedulerService"
PR_SET_PDEATHSIG = 1
RPC_REPORT_INTERVAL: Final = 1.0
"""Seconds between two reports of the worker's call counts to the core."""
RECONNECT = (("grpc.initial_reconnect_backoff_ms", 20), ("grpc.max_reconnect_backoff_ms", 200))
"""The core's socket appears soon after the worker starts: try it often."""


@dataclass(frozen=True, slots=True)
class WorkerParams:
    """What a worker is told at start."""

    config: MasterConfig
    index: int
    port: int  # the public port, bound (not listened on) by the core
    core_socket: str  # ``unix:PATH`` of the core's gRPC socket (forwarded calls)
    link_socket: str  # the path of the core's link socket
    parent: int  # the core's pid
    max_connections: int | None  # this worker's share of --max-connections


def _die_with_parent(parent: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the core died before the signal was armed
        os._exit(1)


class _WorkerGuard(RpcGuard):
    """The master's guard, which also notes the leader the caller said it could not reach
    (``UNREACHABLE_LEADER``: the core holds that call for the election, as its gate would)."""

    async def _identify(self, context: Any, method: str, authenticate: bool) -> None:
        await super()._identify(context, method, authenticate)
        for key, value in context.invocation_metadata() or ():
            if key == UNREACHABLE_LEADER_METADATA:
                UNREACHABLE_LEADER.set(value if isinstance(value, str) else value.decode())


def _server(
    params: WorkerParams, guard: RpcGuard, metrics: RpcMetricsInterceptor
) -> grpc.aio.Server:
    config = params.config
    limit = raise_fd_limit()
    limits = ServerLimits(
        max_connections=params.max_connections or connection_cap(limit),
        streams_per_connection=config.max_streams_per_connection,
        idle_timeout=config.idle_timeout,
    )
    options = [o for o in server_options(limits) if o[0] != "grpc.so_reuseport"]
    options.append(("grpc.so_reuseport", 1))  # beside the other workers, on the core's port
    return grpc.aio.server(options=options, interceptors=[metrics, guard])


async def serve(params: WorkerParams) -> int:
    """Serve the public port until the link ends or SIGTERM; the exit code."""
    config = params.config
    security = load_security(config)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    core = grpc.aio.insecure_channel(params.core_socket, options=[*LINK_OPTIONS, *RECONNECT])
    to_core = WorkerLink()
    served_here = frozenset({AGENT_SERVICE, SCHEDULER_SERVICE})
    metrics = RpcMetricsInterceptor(served_here)  # the core counts the calls forwarded
    server = _server(params, _WorkerGuard(security.authenticator), metrics)
    add_agent_service(AgentServicer(RemoteAgents(to_core)), server)
    add_scheduler_service(SchedulerServicer(RemoteFrameworks(to_core)), server)
    shapes = {**HEALTH_SHAPES, **method_shapes()}
    server.add_generic_rpc_handlers((Forwarder(core, served_here, shapes),))
    add_port(server, f"{config.host}:{params.port}", security.server)
    try:
        link_in, link_out = await asyncio.open_unix_connection(params.link_socket)
    except OSError as error:  # the core is gone: nothing to serve
        log_event(log, "io_worker.link_lost", worker=params.index, code=type(error).__name__)
        await core.close(None)
        return 1
    write_frame(link_out, encode(params.index))

    async def write_link() -> None:
        with contextlib.suppress(ConnectionError):
            async for batch in to_core.batches():
                write_frame(link_out, batch)
                await link_out.drain()

    async def read_link() -> None:
        try:
            while (data := await read_frame(link_in)) is not None:
                if not to_core.ended and not serving.done():  # the core's first, empty batch
                    await server.start()
                    to_core.hello()
                    serving.set_result(None)
                    log_event(log, "io_worker.serving", worker=params.index, port=params.port)
                to_core.deliver(data)
            log_event(log, "io_worker.link_lost", worker=params.index, code="EOF")
        finally:
            to_core.link_ended()
            stop.set()

    async def report_counts() -> None:
        while True:
            await asyncio.sleep(RPC_REPORT_INTERVAL)
            _report(metrics, to_core)

    serving: asyncio.Future[None] = loop.create_future()
    reader = asyncio.ensure_future(read_link())
    writer = asyncio.ensure_future(write_link())
    reporter = asyncio.ensure_future(report_counts())
    await stop.wait()
    graceful = not to_core.ended
    await server.stop(config.shutdown_grace if graceful else 0.5)
    reporter.cancel()
    _report(metrics, to_core)
    if graceful:  # the last counts and closes leave before the link does
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_drained(to_core), 1.0)
    reader.cancel()
    writer.cancel()
    link_out.close()
    await core.close(None)
    return 0 if graceful else 1


def _report(metrics: RpcMetricsInterceptor, to_core: WorkerLink) -> None:
    """Send the core the calls served since the last report."""
    if metrics.counts and not to_core.ended:
        counts, metrics.counts = metrics.counts, {}
        to_core.push((RPC_COUNTS, 0, counts))


async def _drained(to_core: WorkerLink) -> None:
    while to_core.depth and not to_core.ended:
        await asyncio.sleep(0.01)


def main() -> int:
    """The worker's entry point: its parameters come on standard input."""
    params: WorkerParams = pickle.load(sys.stdin.buffer)
    _die_with_parent(params.parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    configure_logging(params.config.log_format, params.config.log_level)
    return asyncio.run(serve(params))


if __name__ == "__main__":
    sys.exit(main())
