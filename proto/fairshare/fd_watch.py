"""File descriptors a daemon has open, watched against its limit (docs/security.md, Limits).

Every connection costs a daemon a file descriptor; a daemon that runs out can no longer open
its registry or accept anyone. The daemons raise their soft limit to the hard one at start,
cap gRPC connections below it (``fairshare.transport.ServerLimits.max_connections``: the limit
minus ``RESERVE``) and run ``watch_fds``: once the descriptors in use pass ``WARN_SHARE`` of the
limit, one WARNING line ``fds.high`` says so (at most one a minute) naming the limit and the
cap, so the operator learns why new clients are refused.

Invariant: reading the count is one ``os.listdir`` of ``/proc/self/fd`` every ``PERIOD``
seconds (nothing where ``/proc`` is missing); the watcher never raises.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Final

from fairshare.logs import log_event

__all__ = ["PERIOD", "RESERVE", "WARN_SHARE", "connection_cap", "open_fds", "watch_fds"]

RESERVE: Final = 512
"""Descriptors kept for the daemon's own files, HTTP clients and outgoing connections."""
WARN_SHARE: Final = 0.8
PERIOD: Final = 5.0
REPEAT: Final = 60.0


def connection_cap(fd_limit: int) -> int:
    """The gRPC connections a daemon accepts at most under ``fd_limit`` descriptors."""
    return max(64, fd_limit - RESERVE)


def open_fds() -> int | None:
    """Descriptors the process has open (None where ``/proc`` cannot tell)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


async def watch_fds(limit: int, cap: int, log: logging.Logger) -> None:
    """Log ``fds.high`` (WARNING, once a minute at most) while descriptors in use pass
    ``WARN_SHARE`` of ``limit``; runs until cancelled."""
    loop = asyncio.get_running_loop()
    warned = -REPEAT
    while True:
        await asyncio.sleep(PERIOD)
        used = open_fds()
        if used is None:
            return
        if used >= WARN_SHARE * limit and loop.time() - warned >= REPEAT:
            warned = loop.time()
            log_event(
                log,
                "fds.high",
                logging.WARNING,
                used=used,
                limit=limit,
                max_connections=cap,
                hint="new connections beyond max_connections are refused; raise LimitNOFILE",
            )
