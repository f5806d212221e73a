"""Which ``Host`` headers a plaintext HTTP port answers (DNS rebinding).

A web page on another site can make a browser send requests to a name it controls that resolves
to 127.0.0.1 (DNS rebinding): the browser then reads a local daemon's plaintext port as if it
were that site's, the ``Host`` header still naming the attacker's domain. A plaintext port
therefore answers only ``Host`` headers that name this daemon: an IP address literal (a
rebinding needs a name), ``localhost`` (and names under ``.localhost``), this machine's host
name, the address the port is bound to, and names the daemon is configured to be reached by
(the master's ``--advertise``); any other name is 421 Misdirected Request, naming the host. A
request without ``Host`` (HTTP/1.0) and ``/health`` (probes of load balancers and orchestrators
that use a service name) are answered. A TLS port needs no such check: a browser reaching it by
another name refuses the certificate.

Invariants: names compare case-insensitively and without a trailing dot; a port in the header
is ignored; nothing here resolves a name (no DNS lookup per request).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp import web

__all__ = ["OPEN_HOST_PATHS", "allowed", "host_check", "host_name", "known_names"]

OPEN_HOST_PATHS = frozenset({"/health"})


def host_name(header: str) -> str:
    """The host of a ``Host`` header without its port, lower case, without a trailing dot."""
    text = header.strip().lower()
    if text.startswith("["):
        return text[1:].partition("]")[0]
    if text.count(":") == 1:
        text = text.partition(":")[0]
    return text.rstrip(".")


def _literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def known_names(bound_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The names a port bound to ``bound_host`` answers, besides IP literals and localhost."""
    names = {socket.gethostname(), bound_host, *extra}
    return frozenset(host_name(name) for name in names if name)


def allowed(header: str | None, names: frozenset[str]) -> bool:
    """True when a request with ``Host: header`` is answered (module docstring)."""
    if header is None:
        return True
    name = host_name(header)
    if _literal(name) or name == "localhost" or name.endswith(".localhost"):
        return True
    return name in names


def host_check(names: frozenset[str]) -> Any:
    """An aiohttp middleware answering 421 to requests naming another host."""

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        header = request.headers.get("Host")
        if request.path in OPEN_HOST_PATHS or allowed(header, names):
            return await handler(request)
        name = host_name(header or "")
        error = f"misdirected request: this port does not serve the host {name!r}"
        return web.json_response({"error": error}, status=421)

    return middleware
