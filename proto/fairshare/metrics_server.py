"""Prometheus plumbing shared by the master and the agent daemons (the agent may not import the
master, so it lives in the wire-level ``fairshare`` package, like ``fairshare.health``).

- ``build_registry``: a daemon's own ``CollectorRegistry`` (never the global one);
- ``on_loop``: a sampler the HTTP thread calls; it runs the daemon's ``take`` on the event loop
  (``run_coroutine_threadsafe``, bounded wait), so collectors never read loop-owned state from
  another thread;
- ``serve_metrics``: prometheus_client's HTTP server on its own thread, ``host:port`` (0 picks);
- ``write_metrics_addr``: ``<work-dir>/metrics.addr`` written atomically (tmp + rename).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from prometheus_client import start_http_server
from prometheus_client.registry import Collector, CollectorRegistry

__all__ = [
    "METRICS_ADDR_FILE",
    "MetricsServer",
    "build_registry",
    "on_loop",
    "serve_metrics",
    "write_metrics_addr",
]

METRICS_ADDR_FILE = "metrics.addr"
T = TypeVar("T")


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


@dataclass(slots=True)
class MetricsServer:
    """A running /metrics HTTP server (its own thread)."""

    address: str
    close: Callable[[], None]


def serve_metrics(registry: CollectorRegistry, host: str, port: int) -> MetricsServer:
    """Serve ``registry`` on ``host:port`` (0 picks a free port); raises OSError if it cannot."""
    server, thread = start_http_server(port, host, registry=registry)
    shown = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    shown = f"[{shown}]" if ":" in shown else shown

    def close() -> None:
        server.shutdown()
        server.server_close()
        thread.join(5.0)

    return MetricsServer(f"{shown}:{server.server_port}", close)


def write_metrics_addr(work_dir: Path, address: str) -> Path:
    """Write ``address`` to ``work_dir/metrics.addr`` atomically (tmp + rename)."""
    path = work_dir / METRICS_ADDR_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{address}\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
