#!/usr/bin/env python3
"""What floods of one tenant cost a secured master (issue 23, item 6), measured, not asserted.

Run (from the repository root; about a minute):

    .venv/bin/python tests/bench/bench_tenant_floods.py [--repo DIR] [--seconds 10]

``--repo DIR`` runs the master of another checkout (its ``.venv``, its code; e.g. the tree before
a change) while the floods are this file's, so a figure can be compared before and after.

A master serving TLS with bearer tokens (``--credentials``) is started, and for ``--seconds``
each (the master's CPU read from /proc before and after each phase):

- **idle**: nothing, the baseline;
- **wrong tokens**: ``--threads`` clients call ``GetState`` over one TLS connection, each call
  with a new wrong token of a known principal (every one would cost a scrypt hash); the codes
  they get (UNAUTHENTICATED: hashed; RESOURCE_EXHAUSTED: throttled) and the owner's calls served
  meanwhile (its token checked before the flood);
- **unknown principals**: the same with tokens of principals that do not exist (cheap before the
  dummy hash: the timing told who exists); the median time of one refusal of each kind is shown;
- **SETTINGS flood**: one TLS connection speaking HTTP/2 that sends SETTINGS frames as fast as
  it can (reading the ACKs); whether the master closed the connection, and the CPU;
- **silent connections**: ``--silent`` TCP connections to the gRPC port that never send a byte,
  with the master's ``--max-connections`` below that; whether the owner's new connection is
  served while they are open, and when the master closed them (the handshake timeout).

Nothing here asserts; the figures are printed.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_procs import clean_env, cpu_seconds, kill_group  # noqa: E402
from fairshare.credentials import entry_toml, hash_secret, new_secret  # noqa: E402
from fairshare.local_ca import LocalCa  # noqa: E402
from fairshare.transport import ClientSecurity, client_channel_sync  # noqa: E402
from fairshare.v1 import operator_pb2, operator_pb2_grpc  # noqa: E402

ROOT = HERE.parents[1]
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty SETTINGS frame, stream 0
ACL = '[[view_state]]\nprincipals = ["ops"]\n'


def start_master(repo: Path, directory: Path, extra: tuple[str, ...]) -> tuple[Any, str, Path]:
    """A secured master of ``repo``; (process, address, CA bundle)."""
    ca = LocalCa.create(directory / "pki")
    issued = ca.issue("master", "daemon")
    token = f"ops:{new_secret()}"
    credentials = directory / "credentials.toml"
    credentials.write_text(entry_toml("ops", hash_secret(token.partition(":")[2])))
    (directory / "acls.toml").write_text(ACL)
    work = directory / "master"
    argv = ["-m", "fairshare.cli", "master", "--port", "0", "--metrics-port", "0",
            "--work-dir", str(work), "--tls-cert", str(issued.cert), "--tls-key", str(issued.key),
            "--credentials", str(credentials), "--acls", str(directory / "acls.toml"),
            "--log-level", "WARNING", *extra]  # fmt: skip
    python = repo / ".venv" / "bin" / "python"
    log = (directory / "master.log").open("wb")
    proc = subprocess.Popen(
        [str(python), *argv],
        cwd=repo,
        env=clean_env(),
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    address_file = work / "master.addr"
    deadline = time.monotonic() + 60
    while not (address_file.exists() and address_file.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            kill_group(proc)
            raise SystemExit(f"the master did not start: see {directory / 'master.log'}")
        time.sleep(0.05)
    start_master.token = token  # type: ignore[attr-defined]
    return proc, address_file.read_text().strip(), ca.cert


def cpu_during(pid: int, seconds: float, work: Callable[[threading.Event], None]) -> float:
    """The master's CPU (percent of one core) while ``work`` runs for ``seconds``."""
    stop = threading.Event()
    thread = threading.Thread(target=work, args=(stop,), daemon=True)
    before, started = cpu_seconds(pid), time.monotonic()
    thread.start()
    time.sleep(seconds)
    stop.set()
    used, elapsed = cpu_seconds(pid) - before, time.monotonic() - started
    thread.join(timeout=30)
    return 100.0 * used / elapsed


def token_flood(
    address: str, ca: Path, threads: int, token_of: Callable[[int], str], codes: dict[str, int],
    latencies: list[float],
) -> Callable[[threading.Event], None]:  # fmt: skip
    def work(stop: threading.Event) -> None:
        channel = client_channel_sync(address, ClientSecurity(ca=ca))
        stub = operator_pb2_grpc.OperatorServiceStub(channel)
        counter = iter(range(10**9))
        lock = threading.Lock()

        def one() -> None:
            while not stop.is_set():
                with lock:
                    number = next(counter)
                started = time.perf_counter()
                metadata = (("authorization", f"Bearer {token_of(number)}"),)
                try:
                    stub.GetState(operator_pb2.GetStateRequest(), timeout=30, metadata=metadata)
                    code = "OK"
                except grpc.RpcError as error:
                    code = error.code().name  # type: ignore[attr-defined]
                with lock:
                    codes[code] = codes.get(code, 0) + 1
                    if code == "UNAUTHENTICATED":
                        latencies.append(time.perf_counter() - started)

        workers = [threading.Thread(target=one, daemon=True) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        channel.close()

    return work


def owner_served(address: str, ca: Path, token: str, stop: threading.Event, out: list[str]) -> None:
    with client_channel_sync(address, ClientSecurity(ca=ca, token=token)) as channel:
        stub = operator_pb2_grpc.OperatorServiceStub(channel)
        while not stop.is_set():
            try:
                stub.GetState(operator_pb2.GetStateRequest(), timeout=30)
                out.append("OK")
            except grpc.RpcError as error:
                out.append(error.code().name)  # type: ignore[attr-defined]
            time.sleep(0.05)


def settings_flood(
    address: str, ca: Path, result: dict[str, Any]
) -> Callable[[threading.Event], None]:
    def work(stop: threading.Event) -> None:
        host, _, port = address.rpartition(":")
        context = ssl.create_default_context(cafile=str(ca))
        context.set_alpn_protocols(["h2"])
        sent = 0
        try:
            with socket.create_connection((host, int(port)), timeout=10) as raw, \
                    context.wrap_socket(raw, server_hostname="localhost") as tls:  # fmt: skip
                tls.sendall(PREFACE + SETTINGS)
                tls.settimeout(0.001)
                while not stop.is_set():
                    tls.sendall(SETTINGS * 64)
                    sent += 64
                    try:
                        if tls.recv(65536) == b"":
                            result["closed"] = True
                            break
                    except (TimeoutError, ssl.SSLWantReadError):
                        pass
        except (OSError, ssl.SSLError) as error:
            result["closed"] = f"{type(error).__name__}: {error}"
        result["frames"] = sent

    return work


def silent(address: str, ca: Path, token: str, count: int) -> dict[str, Any]:
    host, _, port = address.rpartition(":")
    sockets = [socket.create_connection((host, int(port)), timeout=10) for _ in range(count)]
    time.sleep(1.0)
    started = time.monotonic()
    try:
        with client_channel_sync(address, ClientSecurity(ca=ca, token=token)) as channel:
            operator_pb2_grpc.OperatorServiceStub(channel).GetState(
                operator_pb2.GetStateRequest(), timeout=10
            )
        owner = f"served in {time.monotonic() - started:.2f}s"
    except grpc.RpcError as error:
        owner = f"refused: {error.code().name}"  # type: ignore[attr-defined]
    closed_at: list[float] = []
    for one in sockets:
        one.settimeout(max(0.1, 40 - (time.monotonic() - started)))
        try:
            one.recv(1)
            closed_at.append(time.monotonic() - started)
        except OSError:
            pass
        one.close()
    return {"owner": owner, "closed": len(closed_at), "of": count,
            "last_closed_after_s": round(max(closed_at), 1) if closed_at else None}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout whose master runs")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--silent", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-floods-") as scratch:
        directory = Path(scratch)
        extra = ("--max-connections", str(args.silent // 2))
        proc, address, ca = start_master(args.repo.resolve(), directory, extra)
        token = start_master.token  # type: ignore[attr-defined]
        try:
            print(f"master of {args.repo.resolve()} at {address} (pid {proc.pid})")
            with client_channel_sync(address, ClientSecurity(ca=ca, token=token)) as channel:
                operator_pb2_grpc.OperatorServiceStub(channel).GetState(
                    operator_pb2.GetStateRequest(), timeout=30
                )  # the owner's token checked once
            idle = cpu_during(proc.pid, args.seconds, lambda stop: stop.wait())
            print(f"idle                 master CPU {idle:6.1f}%")
            for name, token_of in (
                ("wrong tokens", lambda n: f"ops:{new_secret()}{n}"),
                ("unknown principals", lambda n: f"p{n}-{os.getpid()}:{new_secret()}"),
            ):
                codes: dict[str, int] = {}
                latencies: list[float] = []
                served: list[str] = []
                stop_owner = threading.Event()
                owner = threading.Thread(
                    target=owner_served, args=(address, ca, token, stop_owner, served), daemon=True
                )
                owner.start()
                flood = token_flood(address, ca, args.threads, token_of, codes, latencies)
                cpu = cpu_during(proc.pid, args.seconds, flood)
                stop_owner.set()
                owner.join(timeout=30)
                median = statistics.median(latencies) * 1000 if latencies else float("nan")
                print(f"{name:20s} master CPU {cpu:6.1f}%  codes {codes}  median refusal"
                      f" {median:.1f} ms  owner {served.count('OK')}/{len(served)} OK")  # fmt: skip
                time.sleep(6)  # the throttle refills between phases
            result: dict[str, Any] = {}
            cpu = cpu_during(proc.pid, args.seconds, settings_flood(address, ca, result))
            print(f"SETTINGS flood       master CPU {cpu:6.1f}%  {result}")
            print(f"silent connections   {silent(address, ca, token, args.silent)}"
                  f" (--max-connections {args.silent // 2})")  # fmt: skip
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                kill_group(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
