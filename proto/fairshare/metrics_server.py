"""Each daemon's one HTTP port, the metrics port (docs/architecture.md §8), on aiohttp.

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

Security (``HttpSecurity``, one configuration for both daemons, like Prometheus's web config):
TLS with the daemon's own certificate (client certificates verified against its CA when given),
and, when the daemon authenticates, every path but ``/health`` (and the others of
``HttpSecurity.open_paths``) needs a principal: a client
certificate's common name, ``Authorization: Bearer PRINCIPAL:SECRET`` or HTTP basic auth (the
principal as user, the secret as password), checked by the daemon's ``Authenticator``; then
``authorize(principal, path)`` (the master: the ACL's ``view_state``). No principal is 401 with
``WWW-Authenticate: Basic``, a refused one 403, an address with too many refused tokens 429
(``fairshare.auth_throttle``). ``/health`` stays open (load balancers and
probes have no credentials); it then says only whether the daemon serves, no ids. The request's
principal is ``request[PRINCIPAL]`` for the routes (the master's API shows a redacted view to
principals the ACL gives one). A plaintext port answers only ``Host`` headers that name the
daemon (``fairshare.http_host``: DNS rebinding), other names 421.

Invariants: the server never blocks the loop (handlers are coroutines; formatting runs in a
thread); idle or slow clients cannot tie it up: each connection is its own coroutine, idle
keep-alive connections are closed after ``HttpLimits.keepalive_timeout``, request bodies are
capped, and at most ``HttpLimits.max_concurrent`` requests are handled at once (the rest get
503 at once instead of queueing; a long-lived stream gives its slot back, ``SLOT``);
``/metrics`` is served only at ``/metrics``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import os
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from prometheus_client import ProcessCollector
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

from fairshare.http_host import host_check, known_names
from fairshare.logs import log_event
from fairshare.rpc_guard import Authenticator, AuthError, AuthThrottled
from fairshare.transport import PLAINTEXT, ServerSecurity

__all__ = [
    "METRICS_ADDR_FILE",
    "PRINCIPAL",
    "SLOT",
    "HealthCheck",
    "HttpLimits",
    "HttpSecurity",
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


def build_registry(collector: Collector, process: bool = False) -> CollectorRegistry:
    """A fresh registry holding ``collector`` and, with ``process``, prometheus_client's
    ``ProcessCollector``: the daemon's ``process_*`` series (CPU seconds, resident and virtual
    memory, open and maximum file descriptors, start time; Linux's /proc, nothing elsewhere)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    if process:
        ProcessCollector(registry=registry)
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
    port: int = 0


PRINCIPAL: Final = web.RequestKey("fairshare.principal", str)
"""Key of the authenticated principal in each request (absent or None: anonymous)."""
SLOT: Final = web.RequestKey[Callable[[], None]]("fairshare.slot")
"""Key of the request's release of its slot among ``HttpLimits.max_concurrent``: a handler whose
answer becomes a long-lived stream (the master's Mesos scheduler API) calls it once the stream
is open, so streams do not starve the port; the handler bounds its streams itself."""
Authorize = Callable[[str | None, str], bool]


@dataclass(frozen=True, slots=True)
class HttpSecurity:
    """TLS and authentication of the HTTP port (module docstring)."""

    server: ServerSecurity = PLAINTEXT
    authenticator: Authenticator | None = None
    authorize: Authorize | None = None
    open_paths: frozenset[str] = frozenset({"/health"})
    """Paths served without a principal (``/health``; the master adds Mesos's ``/version`` and
    ``/master/redirect``, which pymesos and Mesos tools read without credentials)."""
    host_names: frozenset[str] = frozenset()
    """Names a plaintext port is reached by besides its address, localhost and the machine's
    name (``fairshare.http_host``: other ``Host`` headers are 421)."""

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of the port (None: plaintext)."""
        server = self.server
        if not server.tls:
            return None
        assert server.cert is not None and server.key is not None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(server.cert, server.key)
        if server.ca is not None:
            context.load_verify_locations(server.ca)
            context.verify_mode = (
                ssl.CERT_REQUIRED if server.require_client_cert else (ssl.CERT_OPTIONAL)
            )
        return context

    @property
    def required(self) -> bool:
        """True when requests need a principal."""
        return self.authenticator is not None and self.authenticator.required


def _token(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if scheme.lower() == "basic" and value.strip():
        try:
            return base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return None


def _certificate_name(request: web.Request) -> str | None:
    transport = request.transport
    peer = transport.get_extra_info("peercert") if transport is not None else None
    for entry in (peer or {}).get("subject", ()):
        for key, value in entry:
            if key == "commonName" and value:
                return str(value)
    return None


def _guard(security: HttpSecurity) -> Any:
    authenticator = security.authenticator

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path in security.open_paths or authenticator is None or not security.required:
            return await handler(request)
        token = _token(request.headers.get("Authorization", ""))
        try:
            principal = await authenticator.principal(
                token, _certificate_name(request), request.remote
            )
        except AuthThrottled as error:
            return web.json_response(
                {"error": f"too many requests: {error}"},
                status=429,
                headers={"Retry-After": str(max(1, round(error.retry_in)))},
            )
        except AuthError as error:
            return web.json_response(
                {"error": f"unauthenticated: {error}"},
                status=401,
                headers={"WWW-Authenticate": 'Basic realm="fairshare", charset="UTF-8"'},
            )
        if security.authorize is not None and not security.authorize(principal, request.path):
            return web.json_response({"error": "permission denied"}, status=403)
        if principal is not None:
            request[PRINCIPAL] = principal
        return await handler(request)

    return middleware


def _limit(limits: HttpLimits) -> Any:
    gate = asyncio.Semaphore(limits.max_concurrent)

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if gate.locked():
            return web.json_response({"error": "too many requests in flight"}, status=503)
        await gate.acquire()
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                gate.release()

        request[SLOT] = release
        try:
            return await handler(request)
        finally:
            release()

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


def _health_handler(health: HealthCheck, private: bool) -> Callable[[web.Request], Awaitable[Any]]:
    async def check(request: web.Request) -> web.Response:
        document = health()
        status = 200 if document.get("status") == "SERVING" else 503
        if private:  # open to anyone: whether it serves, nothing more
            document = {k: v for k, v in document.items() if k in ("status", "daemon")}
        return web.json_response(document, status=status, headers={"Cache-Control": "no-store"})

    return check


def _shown(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    shown = f"[{shown}]" if ":" in shown else shown
    return f"{shown}:{port}"


class _BadRequests(logging.Filter):
    """aiohttp logs a request it cannot parse (a gRPC client on this HTTP port sends HTTP/2's
    preface; a scanner sends garbage) as an ERROR with a traceback; it is the client's mistake:
    one ``http.bad_request`` line instead, in the daemon's format."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, HttpProcessingError):
            return True
        reason = str(getattr(error, "message", "") or error).strip().splitlines()[0]
        hint = " (HTTP/2: a gRPC client on the HTTP port?)" if "PRI" in str(error) else ""
        log_event(_LOG, "http.bad_request", logging.WARNING, reason=reason + hint)
        return False


_LOG = logging.getLogger("fairshare.http")
_AIOHTTP_SERVER = logging.getLogger("aiohttp.server")
if not any(isinstance(f, _BadRequests) for f in _AIOHTTP_SERVER.filters):
    _AIOHTTP_SERVER.addFilter(_BadRequests())


async def serve_http(
    registry: CollectorRegistry,
    host: str,
    port: int,
    health: HealthCheck,
    add_routes: Callable[[web.Application], None] | None = None,
    limits: HttpLimits | None = None,
    security: HttpSecurity | None = None,
) -> MetricsServer:
    """Serve ``/metrics``, ``/health`` and ``add_routes``' routes on ``host:port`` (0 picks a
    free port) on the running loop, with ``security``; raises OSError if the port cannot be
    bound (``ssl.SSLError`` if the certificate cannot be used)."""
    limits = limits or HttpLimits()
    security = security or HttpSecurity()
    middlewares = [_limit(limits), _guard(security)]
    if not security.server.tls:  # DNS rebinding: only Host headers naming this daemon
        middlewares.insert(0, host_check(known_names(host, security.host_names)))
    app = web.Application(middlewares=middlewares, client_max_size=limits.max_body_bytes)
    app.router.add_get("/metrics", _metrics_handler(registry))
    app.router.add_get("/health", _health_handler(health, security.required))
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
    try:
        context = security.ssl_context()
        site = web.TCPSite(runner, host or "0.0.0.0", port, reuse_port=False, ssl_context=context)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = int(runner.addresses[0][1])  # the port actually bound when port was 0
    return MetricsServer(_shown(host, bound), runner.cleanup, bound)


def write_metrics_addr(work_dir: Path, address: str) -> Path:
    """Write ``address`` to ``work_dir/metrics.addr`` atomically (tmp + rename)."""
    path = work_dir / METRICS_ADDR_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{address}\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
