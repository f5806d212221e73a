"""``fairshare agent``: the agent daemon's entry point (``main(args) -> exit code``).

Startup: resolve settings (flags > ``FAIRSHARE_*`` > TOML > defaults; a bad value exits 2 with
a message naming its flag, variable or key), create the work dir, probe this host's resources
unless ``--resources`` is given, choose how command tasks are confined (``--isolation``, default
the strongest available, logged once as ``isolation.selected``; ``cgroups`` asked for where
there are none exits 1), open the checkpoint ``<work-dir>/agent.sqlite``
(``agent.durability.checkpoint``; the runtime restores and recovers what it holds), bind the
agent's own gRPC server (the standard health service and ``TaskLogService``, the output of its
command tasks, read with the master's credentials: ``agent.tasks.logs_service``) on
``--host:--port`` and write its address
atomically to ``<work-dir>/agent.addr`` (``HOST:PORT\\n``), serve Prometheus metrics
(``agent.metrics``) on ``--metrics-port`` with their address in ``<work-dir>/metrics.addr``,
then run ``AgentRuntime`` against ``--master``.

Security (``agent.config``): the agent reaches the master with its ``ClientSecurity`` (TLS,
its certificate or token); its own gRPC port serves TLS with ``--tls-cert`` (client certificates
of ``--tls-client-ca`` required when given; ``--tls-ca`` only says whom to trust as the master),
every call passing ``RpcGuard``
(undecodable requests refused; callers authenticated when the port authenticates); its HTTP
port uses the same TLS and principals (``/health`` open). One ``security.exposure`` line says
where its ports listen and how they are protected.

Invariants: SIGTERM and SIGINT drain (health NOT_SERVING, tasks killed and their updates given
a bounded chance to reach the master, server stopped, address file removed) and exit 0, also
when they come right after the address file appeared (the handlers are installed first); a
failure to bind or to create the work dir exits 1 with one log line; a master that rejects the
agent for good (INVALID_ARGUMENT) exits 1. A checkpoint that cannot be used (corrupt, newer
schema, other resources or attributes, held by another agent) exits 1 before anything is served
or registered, with a message naming the file and how to start fresh; a checkpoint write that
fails later exits 1 too, without draining. No traceback reaches the user for bad input.

The package's parts: ``ports`` (binding the gRPC port, the HTTP port, the address files, the
exposure line) and ``command_tasks`` (isolation, the task user, the executors, the sandbox
collector); this module assembles and runs them.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import signal
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import grpc
from fairshare.etcd import refused_at_start
from fairshare.health import NOT_SERVING, SERVING, HealthServicer
from fairshare.logs import configure_logging, log_event
from fairshare.master_target import MasterTarget
from fairshare.rpc_guard import OPEN_SERVICES, RpcGuard
from fairshare.settings import SettingsError, add_setting_flags
from fairshare.transport import ServerLimits, raise_fd_limit, server_options
from fairshare.v1 import task_logs_pb2_grpc

from agent.config import (
    AgentSecurity,
    AgentSettings,
    check_reservations_fit,
    load_security,
    resolve,
)
from agent.core.records import AgentSpec
from agent.daemon.command_tasks import (
    check_task_user,
    choose_isolation,
    collect_sandboxes,
    log_isolation,
    log_task_user,
    task_executors,
)
from agent.daemon.ports import address_of, bind, log_exposure, start_metrics, write_address
from agent.durability.checkpoint import CHECKPOINT_FILE, CheckpointError, CheckpointStore
from agent.host_resources import host_resources
from agent.metrics import write_metrics_addr
from agent.runtime import AgentFatalError, AgentRuntime, RuntimeConfig
from agent.settings import AGENT_SETTINGS
from agent.tasks.isolation.modes import Isolation
from agent.tasks.logs_service import SERVICE as LOG_SERVICE
from agent.tasks.logs_service import TaskLogServicer
from agent.tasks.sandbox import Sandboxes

__all__ = ["ADDRESS_FILE", "add_arguments", "main", "serve"]

ADDRESS_FILE = "agent.addr"
EXIT_FAILURE = 1
_LOG = logging.getLogger("fairshare.agent")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare agent`` (one per setting of ``AGENT_SETTINGS``)."""
    parser.description = (
        "Run an agent: register this host's resources with the master and run the tasks it"
        " launches."
    )
    add_setting_flags(parser, AGENT_SETTINGS)


def main(args: argparse.Namespace) -> int:
    """Run the agent daemon until SIGTERM; returns the process exit code."""
    settings = resolve(args, os.environ)  # SettingsError: the command line says why, exit 2
    security = load_security(settings)  # an unusable TLS or credentials file: exit 2 as well
    check_task_user(settings)  # an unknown --task-user, or root without the switch: exit 2
    configure_logging(settings.log_format, settings.log_level)
    etcd = MasterTarget.parse(settings.master).etcd
    refused = None if etcd is None else refused_at_start(etcd, settings.etcd)
    if refused is not None:  # wrong CA, no client certificate, bad password: exit 2, saying so
        raise SettingsError(f"--master: {refused}")
    try:
        return asyncio.run(serve(settings, security))
    except AgentFatalError as error:
        log_event(_LOG, "agent.failed", logging.ERROR, error=str(error))
        return EXIT_FAILURE


def _version() -> str:
    try:
        return metadata.version("fairshare")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def _make_work_dir(work_dir: Path) -> bool:
    try:
        work_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        log_event(
            _LOG,
            "work_dir.failed",
            logging.ERROR,
            work_dir=str(work_dir),
            error=error.strerror,
        )
        return False
    return True


async def serve(settings: AgentSettings, security: AgentSecurity | None = None) -> int:
    """Serve health, run the runtime until a signal, drain; returns the exit code."""
    security = security or load_security(settings)
    if not _make_work_dir(settings.work_dir):
        return EXIT_FAILURE
    resources = settings.resources or host_resources(settings.work_dir)
    try:
        check_reservations_fit(settings.reserve, resources)
    except SettingsError as error:
        log_event(_LOG, "settings.invalid", logging.ERROR, error=str(error))
        return EXIT_FAILURE
    spec = AgentSpec(
        settings.hostname, 0, resources, settings.attributes, _version(), settings.reserve
    )
    chosen = choose_isolation(settings)
    if chosen is None:
        return EXIT_FAILURE
    try:
        checkpoint = CheckpointStore.open(settings.work_dir / CHECKPOINT_FILE, spec)
    except CheckpointError as error:
        log_event(_LOG, "checkpoint.failed", logging.ERROR, error=str(error))
        return EXIT_FAILURE
    try:
        return await _serve_with(settings, security, spec, checkpoint, chosen)
    finally:
        checkpoint.close()


async def _serve_with(
    settings: AgentSettings,
    security: AgentSecurity,
    unbound: AgentSpec,
    checkpoint: CheckpointStore,
    chosen: tuple[Isolation, str],
) -> int:
    isolation, why = chosen
    resources = unbound.resources
    health = HealthServicer(())
    health.set_all(NOT_SERVING)  # SERVING once the runtime starts
    raise_fd_limit()
    options = server_options(ServerLimits(max_connections=1000))
    # The task log service authorizes by the master's credentials, never by a caller's token.
    guard = RpcGuard(security.authenticator, open_services=(*OPEN_SERVICES, LOG_SERVICE))
    server = grpc.aio.server(options=options, interceptors=[guard])
    server.add_generic_rpc_handlers((health.handler(),))
    port = bind(server, settings, security.server)
    if port is None:
        return EXIT_FAILURE
    spec = dataclasses.replace(unbound, port=port)
    config = RuntimeConfig(
        master=settings.master,
        security=security.master,
        status_retry_initial=settings.status_update_retry,
    )
    try:
        executors = task_executors(settings, isolation)
        runtime = AgentRuntime(config, spec, checkpoint=checkpoint, executors=executors)
    except CheckpointError as error:
        log_event(_LOG, "checkpoint.failed", logging.ERROR, error=str(error))
        return EXIT_FAILURE
    running = runtime.executor.running
    registrar = runtime.registrar
    logs = TaskLogServicer(
        Sandboxes(settings.work_dir), lambda key: key in running(), lambda: registrar.log_key
    )
    task_logs_pb2_grpc.add_TaskLogServiceServicer_to_server(logs, server)
    await server.start()
    metrics = await start_metrics(settings, security, runtime, health, _version())
    if metrics is None:
        await server.stop(grace=None)
        return EXIT_FAILURE
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):  # before the address says "ready"
        loop.add_signal_handler(signum, _stopper(runtime, signum))
    metrics_file = write_metrics_addr(settings.work_dir, metrics.address)
    address_file = settings.work_dir / ADDRESS_FILE  # last: readers may rely on metrics.addr
    address = address_of(settings.host, port)
    write_address(address_file, address)
    log_event(_LOG, "listening", address=address)
    log_event(_LOG, "metrics.listening", address=metrics.address)
    log_exposure(settings, security, port, metrics.port)
    health.set_all(SERVING)
    log_event(
        _LOG,
        "agent.started",
        master=settings.master,
        resources=str(resources),
        attributes=";".join(f"{n}:{v}" for n, v in settings.attributes),
    )
    log_isolation(settings, isolation, why)
    log_task_user(settings)
    collector = asyncio.ensure_future(collect_sandboxes(settings, runtime))
    try:
        await runtime.run()
    finally:
        collector.cancel()
        health.set_all(NOT_SERVING)
        await server.stop(grace=1.0)
        await metrics.close()
        address_file.unlink(missing_ok=True)
        metrics_file.unlink(missing_ok=True)
    log_event(_LOG, "agent.stopped")
    return 0


def _stopper(runtime: AgentRuntime, signum: int) -> Callable[[], None]:
    def stop() -> None:
        log_event(_LOG, "signal.received", signal=signal.Signals(signum).name)
        runtime.stop()

    return stop
