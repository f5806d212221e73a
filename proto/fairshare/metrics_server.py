"""Each daemon's one HTTP port, the metrics port (DESIGN.md §5), on aiohttp.

The master and the agent both serve it from here (the agent may not import the master, so it
lives in the kernel, like ``fairshare.health``); this module is the one place the HTTP server is
built, so options (TLS, authentication) are added here once for every daemon.

- ``build_registry``: a daemon's own ``CollectorRegistry`` (never the global one);
- ``on_loop``: a sampler callable from any thread; it runs the daemon's ``take`` on the event
  loop (``run_coroutine_threadsafe``, bounded wait), so collectors never read loop-owned state
  from another thread;
- ``serve_http``: an aiohttp server on ``host:port`` (0 picks) on the running loop with
  ``/metrics`` (prometheus_client's own exposition of the registry, formatted off the loop in a
  worker thread: content negotiation incl. OpenMetrics, gzip), ``/health`` (200 with
  ``{"status": "SERVING", ...}`` or 503 with ``NOT_SERVING``) and the routes ``add_routes``
  adds (the master's dashboard and JSON API); every other path is 404;
- ``write_metrics_addr``: ``<work-dir>/metrics.addr`` written atomically (tmp + rename).

Invariants: the server never blocks the loop (handlers are coroutines; formatting runs in a
thread); idle or slow clients cannot tie it up: each connection is its own coroutine, idle
keep-alive connections are closed after ``HttpLimits.keepalive_timeout``, request bodies are
capped, and at most ``HttpLimits.max_concurrent`` requests are handled at once (the rest get
503 at once instead of queueing); ``/metrics`` is served only at ``/metrics``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

__all__ = [
    "METRICS_ADDR_FILE",
    "HealthCheck",
    "HttpLimits",
    "MetricsServer",
    "build_registry",
    "on_loop",
    "serve_http",
    "write_metrics_addr",
]

METRICS_ADDR_FILE = "metrics.addr"
T = TypeVar("T")
HealthCheck = Callable[[], dict[str, Any]]
"""Returns the health document; its ``"status"`` is ``"SERVING"`` (200) or anything else (503)."""


def build_registry(collector: Collector) -> CollectorRegistry:
    """A fresh registry holding only ``collector``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def on_loop(
    loop: asyncio.AbstractEventLoop, take: Callable[[], T], timeout: float = 5.0
) -> Callable[[], T]:
    """A callable that runs ``take`` on ``loop`` (from any thread) and returns its result."""

    async def run() -> T:
        return take()

    def call() -> T:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            return take()
        future = asyncio.run_coroutine_threadsafe(run(), loop)
        try:
            return future.result(timeout)
        finally:
            future.cancel()

    return call


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """Bounds that keep the server answering whatever its clients do."""

    max_concurrent: int = 64
    keepalive_timeout: float = 15.0
    max_body_bytes: int = 64 * 1024
    shutdown_timeout: float = 2.0


@dataclass(slots=True)
class MetricsServer:
    """A running HTTP server on the metrics port; ``await close()`` stops it."""

    address: str
    close: Callable[[], Awaitable[None]]


def _limit(limits: HttpLimits) -> Any:
    gate = asyncio.Semaphore(limits.max_concurrent)

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if gate.locked():
            return web.json_response({"error": "too many requests in flight"}, status=503)
        async with gate:
            return await handler(request)

    return middleware


def _metrics_handler(registry: CollectorRegistry) -> Callable[[web.Request], Awaitable[Any]]:
    async def metrics(request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = await asyncio.to_thread(encoder, registry)
        response = web.Response(body=body, headers={"Content-Type": content_type})
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            response.enable_compression(web.ContentCoding.gzip)
        return response

    return metrics


def _health_handler(health: HealthCheck) -> Callable[[web.Request], Awaitable[Any]]:
    async def check(request: web.Request) -> web.Response:
        document = health()
        status = 200 if document.get("status") == "SERVING" else 503
        return web.json_response(document, status=status, headers={"Cache-Control": "no-store"})

    return check


def _shown(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    shown = f"[{shown}]" if ":" in shown else shown
    return f"{shown}:{port}"


async def serve_http(
    registry: CollectorRegistry,
    host: str,
    port: int,
    health: HealthCheck,
    add_routes: Callable[[web.Application], None] | None = None,
    limits: HttpLimits | None = None,
) -> MetricsServer:
    """Serve ``/metrics``, ``/health`` and ``add_routes``' routes on ``host:port`` (0 picks a
    free port) on the running loop; raises OSError if the port cannot be bound."""
    limits = limits or HttpLimits()
    app = web.Application(middlewares=[_limit(limits)], client_max_size=limits.max_body_bytes)
    app.router.add_get("/metrics", _metrics_handler(registry))
    app.router.add_get("/health", _health_handler(health))
    if add_routes is not None:
        add_routes(app)
    runner = web.AppRunner(
        app,
        access_log=None,
        keepalive_timeout=limits.keepalive_timeout,
        shutdown_timeout=limits.shutdown_timeout,
        handle_signals=False,
    )
    await runner.setup()
    site = web.TCPSite(runner, host or "0.0.0.0", port, reuse_port=False)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = int(runner.addresses[0][1])  # the port actually bound when port was 0
    return MetricsServer(_shown(host, bound), runner.cleanup)


def write_metrics_addr(work_dir: Path, address: str) -> Path:
    """Write ``address`` to ``work_dir/metrics.addr`` atomically (tmp + rename)."""
    path = work_dir / METRICS_ADDR_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{address}\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
