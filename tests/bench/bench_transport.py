"""The raw transport ceiling: what grpc.aio itself does on this machine, with no fairshare code.

Run (from the repository root; about 30 s, ``--quick`` about 8 s):

    .venv/bin/python tests/bench/bench_transport.py

Two processes on 127.0.0.1: an echo server (this file with ``--serve``, a grpc.aio server with
generic handlers: no protobuf, the payload is ``--payload`` raw bytes) and the client (this
process, one grpc.aio channel). Both run Python's asyncio loop exactly as the master and its
peers do, on the same cores, so the figures are the ceiling any fairshare figure is a fraction
of. What is measured, each over ``--repeats`` windows of ``--window`` seconds (medians):

- **unary echo calls/s**: ``--concurrency`` coroutines each call ``Echo`` in a loop (one request,
  one response);
- **bidi stream msgs/s**: one bidirectional stream; a writer keeps up to ``--concurrency``
  messages in flight, the server echoes each message back as it reads it; a message counts
  when its echo is back (so one "message" is one message each way, like a unary call);
- **one-way stream msgs/s, client to server**: the client writes messages as fast as flow
  control lets it, the server only reads them (what agents' updates and heartbeats are);
- **one-way stream msgs/s, server to client**: the server writes, the client reads (what the
  master's commands and framework events are);
- the CPU microseconds per operation of each side (``/proc``, ``resource``), i.e. what one call
  or one message costs the serving side and the calling side.

Nothing here asserts on time; the figures are printed. The server process is killed on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

HERE = Path(__file__).resolve().parent
SERVICE = "bench.Echo"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# -- the server ----------------------------------------------------------------------------------


async def _echo(request: bytes, context: Any) -> bytes:
    return request


async def _echo_stream(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
    async for request in requests:
        yield request


async def _sink(requests: AsyncIterator[bytes], context: Any) -> bytes:
    """Read every message; answer with how many there were."""
    count = 0
    async for _ in requests:
        count += 1
    return count.to_bytes(8, "big")


async def _source(request: bytes, context: Any) -> AsyncIterator[bytes]:
    """Write ``request``'s count of messages of its length."""
    count = int.from_bytes(request[:8], "big")
    payload = b"x" * len(request)
    for _ in range(count):
        yield payload


async def serve() -> None:
    server = grpc.aio.server()
    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(_echo),
        "EchoStream": grpc.stream_stream_rpc_method_handler(_echo_stream),
        "Sink": grpc.stream_unary_rpc_method_handler(_sink),
        "Source": grpc.unary_stream_rpc_method_handler(_source),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # EOF: driver gone
    await server.stop(0)


# -- the client ----------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


async def unary_window(channel: grpc.aio.Channel, args: argparse.Namespace) -> int:
    call = channel.unary_unary(f"/{SERVICE}/Echo")
    payload = b"x" * args.payload
    done = 0
    deadline = time.monotonic() + args.window

    async def caller() -> None:
        nonlocal done
        while time.monotonic() < deadline:
            await call(payload)
            done += 1

    await asyncio.gather(*(caller() for _ in range(args.concurrency)))
    return done


async def stream_window(channel: grpc.aio.Channel, args: argparse.Namespace) -> int:
    call = channel.stream_stream(f"/{SERVICE}/EchoStream")()
    payload = b"x" * args.payload
    window = asyncio.Semaphore(args.concurrency)
    deadline = time.monotonic() + args.window
    done = 0

    async def writer() -> None:
        while time.monotonic() < deadline:
            await window.acquire()
            await call.write(payload)
        await call.done_writing()

    async def reader() -> None:
        nonlocal done
        async for _ in call:
            done += 1
            window.release()

    await asyncio.gather(writer(), reader())
    return done


async def sink_window(channel: grpc.aio.Channel, args: argparse.Namespace) -> int:
    call = channel.stream_unary(f"/{SERVICE}/Sink")()
    payload = b"x" * args.payload
    deadline = time.monotonic() + args.window
    while time.monotonic() < deadline:
        for _ in range(100):
            await call.write(payload)
    await call.done_writing()
    return int.from_bytes(await call, "big")


async def source_window(channel: grpc.aio.Channel, args: argparse.Namespace) -> int:
    count = int(args.window * 20_000)  # more than one window's worth: cancelled at the deadline
    request = count.to_bytes(8, "big") + b"x" * max(0, args.payload - 8)
    call = channel.unary_stream(f"/{SERVICE}/Source")(request)
    deadline = time.monotonic() + args.window
    done = 0
    async for _ in call:
        done += 1
        if done % 100 == 0 and time.monotonic() >= deadline:
            call.cancel()
            break
    return done


@dataclass
class Figure:
    label: str
    rate: float
    spread: str
    server_us: float
    client_us: float


async def measure(
    label: str, window: Callable[[], Awaitable[int]], server_pid: int, args: argparse.Namespace
) -> Figure:
    """Median ops/s and CPU microseconds per op of each side over ``--repeats`` windows."""
    await window()  # warm-up
    rates, server, client = [], [], []
    for _ in range(args.repeats):
        cpu0, own0, wall0 = cpu_seconds(server_pid), own_cpu(), time.monotonic()
        ops = await window()
        wall = time.monotonic() - wall0
        rates.append(ops / wall)
        server.append((cpu_seconds(server_pid) - cpu0) / max(ops, 1) * 1e6)
        client.append((own_cpu() - own0) / max(ops, 1) * 1e6)
    figure = Figure(
        label,
        statistics.median(rates),
        f"{min(rates):,.0f}-{max(rates):,.0f}",
        statistics.median(server),
        statistics.median(client),
    )
    print(f"  {label}: {figure.rate:,.0f}/s ({figure.spread})", flush=True)
    return figure


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def client(args: argparse.Namespace, port: int, server_pid: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        await channel.channel_ready()
        figures = [
            await measure(label, lambda w=window: w(channel, args), server_pid, args)  # type: ignore[misc]
            for label, window in (
                ("unary echo calls", unary_window),
                ("bidi stream, one echo per message", stream_window),
                ("one-way stream, client to server", sink_window),
                ("one-way stream, server to client", source_window),
            )
        ]
    print()
    print(
        f"transport ceiling: grpc.aio on 127.0.0.1, two processes, {args.payload}-byte messages,"
        f" {args.concurrency} in flight, {args.repeats} x {args.window:g} s windows (median)"
    )
    print(f"  {'figure':<40}{'per second':>12}{'range':>16}{'server us':>11}{'client us':>11}")
    for f in figures:
        print(
            f"  {f.label:<40}{f.rate:>12,.0f}{f.spread:>16}{f.server_us:>11.0f}{f.client_us:>11.0f}"
        )
    print("  (us: CPU microseconds per call or message, of the serving and the calling process)")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="1 window of 1 s per figure")
    parser.add_argument("--window", type=float, default=3.0, help="seconds per window")
    parser.add_argument("--repeats", type=int, default=3, help="windows per figure (median)")
    parser.add_argument("--concurrency", type=int, default=64, help="calls/messages in flight")
    parser.add_argument("--payload", type=int, default=100, help="bytes per message")
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(serve())
        return 0
    if args.quick:
        args.window, args.repeats = 1.0, 1
    print(
        f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]},"
        f" grpcio {grpc.__version__}"
    )
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        asyncio.run(client(args, port, server.pid))
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
