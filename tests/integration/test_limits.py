"""Limits of a real master (issue 13): frameworks per principal and registration rate
(RESOURCE_EXHAUSTED, nothing registered), a ping flood closed with GOAWAY after two strikes,
connections beyond ``--max-connections`` refused while the cap is reached and served again once
it is not, idle and silent connections closed, and one message size for every process."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from daemons import Daemon, health_status, wait_for
from fairshare.transport import CHANNEL_OPTIONS, MAX_MESSAGE_BYTES, ServerLimits, server_options
from wire_fakes import FakeAgent, FrameworkConn, get_state

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
GOAWAY = 0x7


def _frame(kind: int, payload: bytes = b"", flags: int = 0, stream: int = 0) -> bytes:
    return (
        struct.pack(">I", len(payload))[1:]
        + bytes([kind, flags])
        + struct.pack(">I", stream)
        + payload
    )


def _http2(address: str) -> socket.socket:
    """A raw HTTP/2 connection to ``address`` with the preface and empty SETTINGS sent."""
    host, _, port = address.rpartition(":")
    connection = socket.create_connection((host, int(port)), timeout=10)
    connection.sendall(PREFACE + _frame(0x4))
    return connection


def _read_exactly(connection: socket.socket, size: int) -> bytes:
    """``size`` bytes from ``connection`` (fewer only if it closes)."""
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _held_http2(address: str, within: float = 10.0) -> socket.socket:
    """A raw HTTP/2 connection the server has taken: its SETTINGS frame came back. A connection
    refused at the cap is closed without one (a connection the test closed a moment ago, such as
    the readiness probe's, may still count there), so that one is dropped and another opened."""
    deadline = time.monotonic() + within
    while True:
        connection = _http2(address)
        connection.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            header = _read_exactly(connection, 9)
        except (TimeoutError, ConnectionResetError):
            header = b""
        if len(header) == 9 and header[3] == 0x4:
            _read_exactly(connection, int.from_bytes(header[:3], "big"))  # the SETTINGS payload
            return connection
        connection.close()
        if time.monotonic() > deadline:
            raise AssertionError(f"the master took no new connection within {within:g}s")
        time.sleep(0.05)


def _frames_until_closed(connection: socket.socket, within: float) -> list[int]:
    """Frame types the server sends until it closes the connection (bounded by ``within``)."""
    data, deadline = b"", time.monotonic() + within
    while time.monotonic() < deadline:
        connection.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = connection.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    kinds, offset = [], 0
    while offset + 9 <= len(data):
        length = int.from_bytes(data[offset : offset + 3], "big")
        kinds.append(data[offset + 3])
        offset += 9 + length
    return kinds


def test_frameworks_per_principal_and_registration_rate_are_limited(
    master_factory: Callable[..., Daemon],
) -> None:
    master = master_factory(
        "--max-frameworks-per-principal", "2", "--registration-burst", "3",
        "--registration-rate", "0.01",
    )  # fmt: skip
    with grpc.insecure_channel(master.address) as channel:
        kept = [FrameworkConn(channel, f"f{i}", principal="team") for i in range(2)]
        with pytest.raises(grpc.RpcError) as caught:
            FrameworkConn(channel, "f3", principal="team")
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
        assert "registered 2 frameworks" in caught.value.details()  # type: ignore[attr-defined]
        FakeAgent(channel, "cpus:1;mem:64")  # the burst's third registration
        with pytest.raises(grpc.RpcError) as caught:
            FakeAgent(channel, "cpus:1;mem:64")
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
        assert "faster than" in caught.value.details()  # type: ignore[attr-defined]
        state = get_state(channel)
        assert len(state.frameworks) == 2 and len(state.agents) == 1
        assert {f.framework_info.framework_id for f in state.frameworks} == {k.id for k in kept}


def test_a_ping_flood_is_closed_after_two_strikes(master: Daemon) -> None:
    connection = _http2(master.address)
    sent = 0
    try:
        for number in range(50):
            try:
                connection.sendall(_frame(0x6, struct.pack(">Q", number)))
            except (BrokenPipeError, ConnectionResetError):
                break  # the master closed the connection: the flood ended there
            sent += 1
            time.sleep(0.05)
        kinds = _frames_until_closed(connection, 10)
    finally:
        connection.close()
    assert sent < 50 or GOAWAY in kinds, (sent, kinds)
    assert health_status(master.address) == 1  # the master itself is fine


def test_connections_beyond_the_cap_are_refused_until_there_is_room(
    master_factory: Callable[..., Daemon],
) -> None:
    master = master_factory("--max-connections", "4")
    idle: list[socket.socket] = []
    try:
        for _ in range(4):
            idle.append(_held_http2(master.address))
        refused = lambda: health_status(master.address, timeout=1, fresh=True) == 0  # noqa: E731
        wait_for(refused, 10, "a refused client")
    finally:
        for connection in idle:
            connection.close()
    served = lambda: health_status(master.address, timeout=1, fresh=True) == 1  # noqa: E731
    wait_for(served, 10, "a served client again")


def test_idle_and_silent_connections_are_closed(
    master_factory: Callable[..., Daemon],
) -> None:
    """A connection that never sends the HTTP/2 preface is closed after the fixed handshake
    timeout (``ServerLimits.handshake_timeout``, 10 s; the idle timeout, 5 min by default, cannot
    be what closed it); one that finished the handshake but makes no call is closed with GOAWAY
    after ``--idle-timeout``. Two masters, both watched at once."""
    master = master_factory("--idle-timeout", "1s")
    patient = master_factory()  # idle timeout 5 min: only the handshake timeout can close
    host, _, port = patient.address.rpartition(":")
    silent = socket.create_connection((host, int(port)), timeout=10)  # sends nothing at all
    idle = _held_http2(master.address)
    started = time.monotonic()
    try:
        idle_kinds = _frames_until_closed(idle, 20)
        idle_closed = time.monotonic() - started
        _frames_until_closed(silent, 25 - (time.monotonic() - started))  # its SETTINGS, then?
        silent_closed = time.monotonic() - started  # below 20 s: the master closed it
    finally:
        idle.close()
        silent.close()
    assert GOAWAY in idle_kinds and idle_closed < 8, (idle_kinds, idle_closed)
    assert 5 < silent_closed < 20, silent_closed
    assert health_status(master.address) == 1 and health_status(patient.address) == 1


def test_every_process_sends_and_accepts_the_same_largest_message() -> None:
    client: dict[str, Any] = dict(CHANNEL_OPTIONS)
    server: dict[str, Any] = dict(server_options(ServerLimits()))
    for options in (client, server):
        assert options["grpc.max_receive_message_length"] == MAX_MESSAGE_BYTES
        assert options["grpc.max_send_message_length"] == MAX_MESSAGE_BYTES
    assert server["grpc.http2.max_ping_strikes"] > 0  # pings are policed (0 would allow a flood)
