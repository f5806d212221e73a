"""``fairshare master``: the master daemon process (docs/architecture.md §3, §5, §7).

Starts a grpc.aio server on one event loop with the Scheduler, Agent, Operator and health
services, writes ``<work-dir>/master.addr`` once serving, and runs until SIGTERM or SIGINT. The
Scheduler, Agent and Operator calls go through the ``LeaderGate`` to the runtime of the current
leadership term (``master.ha.leadership``): with the embedded SQLite registry (the default) this
master leads alone from its start; with ``--registry etcd://...`` it campaigns in etcd, runs a
fresh runtime while it leads, and otherwise serves health and refuses every other call
UNAVAILABLE naming the leader. The metrics port (``--metrics-port``, one HTTP port on the same
loop) serves Prometheus metrics (``master.metrics``) at ``/metrics``, ``/health``, and the
dashboard and JSON API (``master.web``, 503 naming the leader on a follower) at ``/`` and
``/api/v1/``, and Mesos's v1 scheduler API (``master.web.mesos_scheduler``: frameworks written
for Mesos, 307 to the leader on a follower) at ``/api/v1/scheduler``; its address is written to
``<work-dir>/metrics.addr`` (before ``master.addr``).

Invariants:
- ``master.addr`` holds ``HOST:PORT\\n`` of the bound port, written atomically (tmp + rename) only
  after the server accepts calls, and removed on a clean exit;
- shutdown drains in order: health NOT_SERVING, the gate refuses calls, the runtime stops
  offering and ends every stream (UNAVAILABLE, so agents and SDKs reconnect elsewhere; nothing
  is removed), the server stops with ``shutdown_grace`` for calls in flight, an HA leader gives
  up its etcd lease (another master takes over at once); then the process exits 0;
- keepalive is set for long streams (pings every 20 s, dead peers dropped after 10 s more);
  clients may ping as often as every 5 s, more often is a strike and two strikes close the
  connection (``fairshare.transport.server_options``);
- security (``master.security``, docs/security.md): both ports serve TLS with ``--tls-cert``; every
  call passes ``RpcGuard`` (undecodable requests are INVALID_ARGUMENT, callers are
  authenticated, refusals logged a few times a second at most) before the leader gate and the
  servicers, which hand the caller's principal to the runtime (``Authority``: ACL, owners,
  limits). Without TLS and authentication the master serves loopback only unless
  ``--allow-insecure``; one line, ``security.exposure``, says where each port listens (the
  address bound, truly) and how it is protected;
- limits: gRPC connections at most the file descriptor limit minus a reserve (the soft limit is
  raised to the hard one first; ``fds.high`` warns as it fills), streams per connection, idle
  connections closed, handshakes bounded; the leading runtime's registry forgets agents and
  frameworks that left long ago (``MasterRuntime.housekeeping``).

One master per work dir: ``<work-dir>/master.lock`` (``fairshare.work_dir_lock``) is taken
before anything else; a second master on the same work dir exits 1 with one line naming the
holder and touches nothing of it (not its registry, not its address files).

The durable registry (``master.registry``: SQLite under the work dir, or etcd) is opened before
the runtime serves; a missing, corrupt or newer-schema registry stops the master (exit 1, one
message saying why), it is never reset. The runtime then recovers from it
(``Recovery.recover``).

The package's parts: ``startup`` (the work dir's lock, the registry, the ports, the address
file), ``http_port`` (the metrics port's routes over the leadership), ``runtime_config`` (the
runtime's config built from the settings); this module assembles and runs them.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import uuid
from pathlib import Path

import grpc
from fairshare.etcd import LeaderRecord, refused_at_start
from fairshare.fd_watch import connection_cap, watch_fds
from fairshare.health import NOT_SERVING, HealthServicer
from fairshare.logs import configure_logging, log_event
from fairshare.master_target import EtcdTarget
from fairshare.rpc_guard import RpcGuard
from fairshare.settings import add_setting_flags
from fairshare.transport import (
    SecurityError,
    ServerLimits,
    add_port,
    raise_fd_limit,
    server_options,
)
from fairshare.work_dir_lock import WorkDirLock

from master.config import MASTER_SETTINGS, MasterConfig, load_config
from master.daemon.http_port import http_authority, mesos_api, start_http
from master.daemon.runtime_config import runtime_config
from master.daemon.startup import (
    ADDR_FILE,
    connect_host,
    lock_work_dir,
    open_registry,
    ports_taken,
    write_addr,
)
from master.ha.leadership import Leadership
from master.io_workers import FORWARDED_PRINCIPAL, LINK_OPTIONS, CoreLink, IoWorkers
from master.metrics import write_metrics_addr
from master.registry import Registry
from master.security import MasterSecurity, exposure, load_security
from master.service.rpc_metrics import RpcMetricsInterceptor
from master.service.state_documents import WIRE_DOCUMENTS
from master.service.task_log_reader import TaskLogReader
from master.web.completed import CompletedHistory, EventFanout
from master.web.events import RecentEvents
from master.web.history import ShareHistory
from master.web.mesos_scheduler import OPEN_PATHS, SCHEDULER_PATHS
from master.web.routes import WebApi

__all__ = ["ADDR_FILE", "add_arguments", "main", "serve"]

log = logging.getLogger("fairshare.master")

SERVICES = (
    "fairshare.v1.SchedulerService",
    "fairshare.v1.AgentService",
    "fairshare.v1.OperatorService",
)
EXIT_BAD_CONFIG = 2
EXIT_FAILED = 1


async def serve(
    config: MasterConfig, security: MasterSecurity | None = None, stop: asyncio.Event | None = None
) -> int:
    """Run the master until ``stop`` is set (or SIGTERM/SIGINT); returns the exit code."""
    security = security or load_security(config)
    lock = lock_work_dir(config)
    if lock is None:
        return EXIT_FAILED
    try:
        registry = None
        if config.registry == "sqlite":
            registry = open_registry(config)
            if registry is None:
                return EXIT_FAILED
        events = RecentEvents()  # the runtime tells it its noteworthy events
        return await _serve(config, security, registry, events, stop or asyncio.Event(), lock)
    finally:
        lock.release()


def _server(config: MasterConfig, guard: RpcGuard, rpc: RpcMetricsInterceptor) -> grpc.aio.Server:
    """The gRPC server with its limits; interceptors: metrics outside, the guard inside. With
    I/O workers it serves their Unix socket only: the public limits are theirs to enforce."""
    limit = raise_fd_limit()
    limits = ServerLimits(
        max_connections=config.max_connections or connection_cap(limit),
        streams_per_connection=config.max_streams_per_connection,
        idle_timeout=config.idle_timeout,
    )
    options = server_options(limits)
    if config.io_workers:
        options = list({**dict(options), **dict(LINK_OPTIONS)}.items())
    return grpc.aio.server(options=options, interceptors=[rpc, guard])


async def _serve(
    config: MasterConfig,
    security: MasterSecurity,
    registry: Registry | None,
    events: RecentEvents,
    stop: asyncio.Event,
    lock: WorkDirLock,
) -> int:
    work_dir = Path(config.work_dir)
    fatal: list[str] = []
    # SIGTERM/SIGINT drain from here on: a stop right after master.addr appears exits 0
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    def on_fatal(message: str) -> None:
        fatal.append(message)
        log_event(log, "registry.failed", logging.ERROR, error=message)
        print(f"fairshare master: {message}", file=sys.stderr)
        stop.set()

    completed = CompletedHistory()  # this process's memory only: see master.web.completed
    sink = EventFanout((events, completed))
    leadership = Leadership(runtime_config(config, security, sink), on_fatal)
    health = HealthServicer(SERVICES)
    rpc_metrics = RpcMetricsInterceptor()
    guard = RpcGuard(security.authenticator)
    workers: IoWorkers | None = None
    if config.io_workers:  # the workers authenticate; the core trusts what they forward
        link = CoreLink(leadership.gate, rpc_metrics.counts)
        workers = IoWorkers(config, config.io_workers, link)
        guard = RpcGuard(security.authenticator, forwarded_principal=FORWARDED_PRINCIPAL)
    server = _server(config, guard, rpc_metrics)
    leadership.gate.add_to_server(server)
    server.add_generic_rpc_handlers((health.handler(),))
    if ports_taken(config):
        return EXIT_FAILED
    try:
        if workers is None:
            port = add_port(server, f"{config.host}:{config.port}", security.server)
        else:
            workers.add_to_server(server)
            port = workers.reserve_port()
            await workers.listen()
            workers.spawn()
    except (RuntimeError, SecurityError, OSError) as error:
        log_event(
            log, "listen.failed", logging.ERROR, host=config.host, port=config.port, error=error
        )
        return EXIT_FAILED
    leadership.address = config.advertise or f"{connect_host(config.host)}:{port}"
    history = ShareHistory()
    web = WebApi(
        leadership.snapshot,
        events,
        history,
        http_authority(leadership),
        leadership.follower_view,
        ungated=(*SCHEDULER_PATHS, *OPEN_PATHS),
        completed=completed,
        operator=lambda: leadership.term.runtime.operator if leadership.term else None,
        read_logs=TaskLogReader.of_master(
            config.tls_ca, config.tls_cert, config.tls_key, connect_host(config.host)
        ).read,
        documents=WIRE_DOCUMENTS,
    )
    mesos = mesos_api(leadership)
    queues = workers.link.depths if workers is not None else dict
    metrics = await start_http(
        config, security, leadership, rpc_metrics, health, web, mesos, queues
    )
    if metrics is None:
        return EXIT_FAILED
    await server.start()
    # the workers start (and link) while the core reads its registry: they serve once both are done
    if registry is not None:
        await leadership.lead_alone(registry)
    else:
        me = LeaderRecord(leadership.address, metrics.address, uuid.uuid4().hex, 0.0)
        target = EtcdTarget.parse(config.registry)
        leadership.campaign(
            target, me, config.election_ttl, work_dir, config.etcd, security.registry_key
        )
    if workers is not None and not (await workers.linked() and await workers.serving()):
        log_event(log, "io_workers.failed", logging.ERROR, workers=config.io_workers)
        leadership.drain()
        await leadership.stop()
        await workers.stop(0)
        await server.stop(0)
        await metrics.close()
        return EXIT_FAILED
    limit = raise_fd_limit()
    background = [
        asyncio.create_task(history.run(leadership.summary_or_none)),
        asyncio.create_task(watch_fds(limit, config.max_connections or connection_cap(limit), log)),
    ]
    metrics_path = write_metrics_addr(work_dir, metrics.address)
    level, fields = exposure(config, security, port, metrics.port)
    log_event(log, "security.exposure", level, **fields)
    for warning in security.acl_warnings:
        log_event(log, "acl.warning", logging.WARNING, problem=warning)
    log_event(log, "metrics.listening", address=metrics.address, bind=fields["http"])
    addr_path = write_addr(work_dir, leadership.address)
    lock.describe(f"pid {os.getpid()}, fairshare master serving {leadership.address}")
    log_event(log, "listening", address=leadership.address, bind=fields["grpc"])
    await stop.wait()
    log_event(log, "shutdown.started", grace=config.shutdown_grace)
    health.set_all(NOT_SERVING)
    leadership.drain()
    health.close()
    await leadership.stop()  # an HA leader gives up its lease now: another takes over at once
    if workers is not None:
        await workers.stop(config.shutdown_grace)
    await server.stop(config.shutdown_grace)
    for task in background:
        task.cancel()
    await metrics.close()
    addr_path.unlink(missing_ok=True)
    metrics_path.unlink(missing_ok=True)
    log_event(log, "shutdown.done")
    return EXIT_FAILED if fatal else 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare master`` (one per setting of ``MASTER_SETTINGS``)."""
    parser.description = "Run the master: offer agents' resources to frameworks in fairness order."
    add_setting_flags(parser, MASTER_SETTINGS)


def main(args: argparse.Namespace) -> int:
    """``fairshare master``: resolve the settings, run the daemon, return the exit code."""
    config = load_config(args, os.environ)  # SettingsError: the command line says why, exit 2
    security = load_security(config)  # a file that cannot be used: exit 2 too, naming the flag
    configure_logging(config.log_format, config.log_level)
    if EtcdTarget.is_url(config.registry):
        refused = refused_at_start(EtcdTarget.parse(config.registry), config.etcd)
        if refused is not None:  # wrong CA, no client certificate, bad password: say which
            print(f"fairshare master: --registry: {refused}", file=sys.stderr)
            return EXIT_BAD_CONFIG
    try:
        Path(config.work_dir).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(
            f"fairshare master: cannot create work dir {config.work_dir}: {error}", file=sys.stderr
        )
        return EXIT_BAD_CONFIG
    return asyncio.run(serve(config, security))
