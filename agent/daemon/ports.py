"""The agent's own ports: its gRPC port (health and the task log service), its HTTP port
(``/metrics`` and ``/health``), the address files, and the line saying how they are exposed.

Invariants:
- a port that cannot be bound is logged (and a taken ``--port`` said on stderr, naming the flag)
  and the caller gets None: the agent exits 1;
- an address file is written atomically (tmp + rename): a reader sees the whole line or no file;
- the HTTP port serves the gRPC port's TLS and principals (``HttpSecurity``), ``/health`` open,
  ``--hostname`` a name it answers;
- ``security.exposure`` is a WARNING when a port listens beyond loopback without TLS and
  authentication.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import ssl
import sys
from pathlib import Path
from typing import Any

import grpc
from fairshare.health import SERVING, HealthServicer
from fairshare.logs import log_event
from fairshare.metrics_server import HttpSecurity
from fairshare.ports import port_problem
from fairshare.transport import SecurityError, ServerSecurity, add_port, is_loopback

from agent.config import AgentSecurity, AgentSettings
from agent.core.records import AgentMetrics
from agent.metrics import AgentCollector, MetricsServer, build_registry, on_loop, serve_http
from agent.runtime import AgentRuntime

__all__ = ["address_of", "bind", "log_exposure", "start_metrics", "write_address"]

_LOG = logging.getLogger("fairshare.agent")


def write_address(path: Path, address: str) -> None:
    """Write ``address`` atomically: readers see the whole line or no file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(address + "\n", encoding="ascii")
    os.replace(tmp, path)


def address_of(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind(server: grpc.aio.Server, settings: AgentSettings, tls: ServerSecurity) -> int | None:
    """Bind ``--host:--port`` (0 picks a free port) with the agent's TLS; the bound port, or None
    after logging why."""
    host, port = settings.host, settings.port
    address = address_of(host, port)
    problem = port_problem(host, port)  # before gRPC tries: a clear line, not a core log line
    if problem is not None:
        log_event(_LOG, "listen.failed", logging.ERROR, address=address, error=problem)
        print(
            f"fairshare agent: --port {port}: {problem} (pick a free port, or 0)", file=sys.stderr
        )
        return None
    try:
        bound = add_port(server, address, tls)
    except (RuntimeError, SecurityError) as error:
        log_event(_LOG, "listen.failed", logging.ERROR, address=address, error=str(error))
        return None
    return bound


def log_exposure(
    settings: AgentSettings, security: AgentSecurity, port: int, http_port: int
) -> None:
    """One line: where the agent's ports listen, how they are protected, how it reaches the
    master (WARNING when exposed beyond loopback without TLS and authentication)."""
    server, authenticator = security.server, security.authenticator
    exposed = not is_loopback(settings.host) and not (server.tls and authenticator.required)
    log_event(
        _LOG,
        "security.exposure",
        logging.WARNING if exposed else logging.INFO,
        grpc=address_of(settings.host, port),
        http=address_of(settings.host, http_port),
        tls=server.mode,
        authentication=authenticator.mode,
        master_tls="on" if security.master.tls else "off",
        identity=security.master.principal_hint,
    )


async def start_metrics(
    settings: AgentSettings,
    security: AgentSecurity,
    runtime: AgentRuntime,
    health: HealthServicer,
    version: str,
) -> MetricsServer | None:
    """Serve /metrics and /health on ``--metrics-port`` (the metrics saying the agent's
    ``version``); None (after logging why) if it cannot bind."""

    def snapshot() -> AgentMetrics:
        command = runtime.executor.command
        usage = None if command is None else command.usage()
        return dataclasses.replace(runtime.metrics(), command=usage)

    collector = AgentCollector(on_loop(asyncio.get_running_loop(), snapshot), version)

    def healthy() -> dict[str, Any]:
        status = "SERVING" if health.status("") == SERVING else "NOT_SERVING"
        return {"status": status, "daemon": "agent", "agent_id": runtime.state.agent_id or ""}

    try:
        return await serve_http(
            build_registry(collector, process=True),
            settings.host,
            settings.metrics_port,
            healthy,
            security=HttpSecurity(
                security.server,
                security.authenticator,
                host_names=frozenset({settings.hostname}),
            ),
        )
    except (OSError, ssl.SSLError) as error:
        log_event(
            _LOG,
            "metrics.listen.failed",
            logging.ERROR,
            address=address_of(settings.host, settings.metrics_port),
            error=str(error),
        )
        return None
