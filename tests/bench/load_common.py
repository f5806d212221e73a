"""Plumbing shared by the live benchmark's load processes (``load_agents``, ``load_frameworks``).

A load process is started and driven by ``bench_live.py`` over pipes:

- commands arrive as JSON lines on stdin: ``{"cmd": NAME, "id": N, ...}``; each gets exactly one
  reply line on stdout: ``{"id": N, ...}`` (``{"id": N, "error": TEXT}`` if the handler raised);
- unsolicited lines on stdout carry an ``"event"`` key (``ready``, ``failed``);
- EOF on stdin means the driver is gone: the process stops. Every process also has a hard
  lifetime (``--max-seconds``), so no load process can outlive a benchmark run by much.

Every timestamp a load process reports is ``time.monotonic()``, i.e. CLOCK_MONOTONIC, which is
the same clock in every process of the machine, so the driver can compare stamps taken in
different processes (the offer latency does).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import grpc
from fairshare.resources import ResourceVector
from fairshare.transport import ClientSecurity, client_channel
from fairshare.v1 import common_pb2

__all__ = [
    "Handler",
    "channel",
    "emit",
    "resources_pb",
    "run_process",
    "serve_control",
]

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""A command handler: the command's JSON object in, the reply's fields out."""

CONTROL_LINE_LIMIT = 1 << 24


def emit(payload: dict[str, Any]) -> None:
    """Write one JSON line to stdout (the driver reads it)."""
    sys.stdout.write(json.dumps(payload, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def resources_pb(text: str) -> common_pb2.Resources:
    """Mesos text (``cpus:8;mem:16384``) as a wire ``Resources``, sorted by name."""
    vector = ResourceVector.parse(text)
    return common_pb2.Resources(
        items=[common_pb2.Resource(name=n, millis=m) for n, m in sorted(vector.millis_items())]
    )


BENCH_TLS_CA = "BENCH_TLS_CA"
BENCH_TOKEN = "BENCH_TOKEN"
"""Environment of the load processes when the master is secured (``bench_security.py``): the
CA bundle to trust, the bearer token ``PRINCIPAL:SECRET`` to present."""


def channel(target: str, index: int) -> grpc.aio.Channel:
    """A channel with its own TCP connection (``index`` keeps gRPC from sharing subchannels);
    TLS with a bearer token when ``BENCH_TLS_CA`` (and ``BENCH_TOKEN``) are set."""
    options: list[tuple[str, Any]] = [
        ("grpc.use_local_subchannel_pool", 1),
        ("fairshare.bench.channel", index),
        ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ]
    ca, token = os.environ.get(BENCH_TLS_CA), os.environ.get(BENCH_TOKEN)
    if ca is None:
        return grpc.aio.insecure_channel(target, options=options)
    security = ClientSecurity(ca=Path(ca), token=token)
    return client_channel(target, security, options)


async def serve_control(handlers: Mapping[str, Handler], stop: asyncio.Event) -> None:
    """Answer commands from stdin until EOF, a ``stop`` command or ``stop`` being set."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=CONTROL_LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while not stop.is_set():
        line = await reader.readline()
        if not line:
            break
        command = json.loads(line)
        name = command.get("cmd", "")
        if name == "stop":
            emit({"id": command.get("id"), "ok": True})
            break
        handler = handlers.get(name)
        try:
            if handler is None:
                raise ValueError(f"unknown command {name!r}")
            reply = await handler(command)
        except Exception as error:  # reported to the driver, which fails the run
            reply = {"error": f"{type(error).__name__}: {error}"}
            traceback.print_exc()
        emit({"id": command.get("id"), **reply})
    stop.set()


def run_process(main: Callable[[asyncio.Event], Awaitable[None]], max_seconds: float) -> int:
    """Run ``main(stop)`` on a fresh loop for at most ``max_seconds``; returns the exit code."""

    async def bounded() -> None:
        stop = asyncio.Event()
        try:
            await asyncio.wait_for(main(stop), max_seconds)
        except TimeoutError:
            print(f"load process: lifetime of {max_seconds:g}s reached", file=sys.stderr)

    started = time.monotonic()
    try:
        asyncio.run(bounded())
    except Exception:
        traceback.print_exc()
        emit({"event": "failed", "after": time.monotonic() - started})
        return 1
    return 0
