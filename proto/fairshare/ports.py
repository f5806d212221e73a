"""Can a TCP port be listened on? Asked before a server binds, so that a daemon that cannot
have its port says which flag names it and why, instead of a gRPC core log line.

``port_problem(host, port)`` binds a throwaway socket (with ``SO_REUSEADDR``, as the servers
do, so connections in TIME_WAIT do not count) and returns ``None`` when the port is free, or
the reason (``address already in use``) when it is not. Port 0 is always free. There is a race
(another process may take the port between the check and the bind); the servers' own errors
still apply then.
"""

from __future__ import annotations

import socket

__all__ = ["port_problem"]


def port_problem(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on, or None if it can."""
    if port == 0:
        return None
    try:
        infos = socket.getaddrinfo(
            host.strip("[]") or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except OSError as error:
        return f"cannot resolve {host!r}: {error}"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
            probe.listen(1)
        except OSError as error:
            return error.strerror or str(error)
    return None
