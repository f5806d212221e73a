"""``TaskLogServicer`` over a real gRPC server on loopback: pages, tails, follow, and every
refusal (bad request, unknown or ambiguous task, a log file that is a link, too many streams).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import pytest
from fairshare.v1 import task_logs_pb2, task_logs_pb2_grpc

from agent.core.records import TaskKey
from agent.tasks.logs_service import PAGE_BYTES, TaskLogServicer, tail_offset
from agent.tasks.sandbox import Sandboxes

REQUEST = task_logs_pb2.StreamLogRequest
DEADLINE = 10.0
Stub = task_logs_pb2_grpc.TaskLogServiceStub


@pytest.mark.parametrize(
    ("text", "lines", "expected"),
    [
        (b"a\nb\nc\n", 2, b"b\nc\n"),
        (b"a\nb\nc", 2, b"b\nc"),  # a last line without its newline counts
        (b"a\nb\nc\n", 5, b"a\nb\nc\n"),
        (b"a\nb\nc\n", 0, b""),
        (b"", 3, b""),
        (b"\n\n", 1, b"\n"),
    ],
)
def test_tail_offset(tmp_path: Path, text: bytes, lines: int, expected: bytes) -> None:
    path = tmp_path / "f"
    path.write_bytes(text)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert text[tail_offset(fd, len(text), lines) :] == expected
    finally:
        os.close(fd)


def test_tail_offset_looks_back_a_bounded_amount(tmp_path: Path) -> None:
    text = b"x" * 100_000 + b"\nlast\n"
    path = tmp_path / "f"
    path.write_bytes(text)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert tail_offset(fd, len(text), 5, limit=1000) == len(text) - 1000
    finally:
        os.close(fd)


def serve(
    tmp_path: Path,
    body: Callable[[Stub, Sandboxes, set[TaskKey]], Awaitable[None]],
    max_streams: int = 4,
) -> None:
    async def main() -> None:
        sandboxes = Sandboxes(tmp_path)
        running: set[TaskKey] = set()
        servicer = TaskLogServicer(
            sandboxes, running.__contains__, max_streams=max_streams, poll=0.02
        )
        server = grpc.aio.server()
        task_logs_pb2_grpc.add_TaskLogServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                await asyncio.wait_for(body(Stub(channel), sandboxes, running), DEADLINE)
        finally:
            await server.stop(None)

    asyncio.run(main())


async def read_all(
    stub: Stub, request: task_logs_pb2.StreamLogRequest
) -> list[task_logs_pb2.StreamLogResponse]:
    return [page async for page in stub.StreamLog(request)]


async def refused(stub: Stub, request: task_logs_pb2.StreamLogRequest) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await read_all(stub, request)
    return caught.value


def test_a_whole_file_comes_in_pages_and_a_tail_in_one(tmp_path: Path) -> None:
    async def body(stub: Stub, sandboxes: Sandboxes, _: set[TaskKey]) -> None:
        sandbox = sandboxes.prepare(("fw-1", "t"), "", None).sandbox
        text = b"".join(b"line %06d\n" % i for i in range(20_000))  # 220 KB
        (sandbox / "stdout").write_bytes(text)
        (sandbox / "stderr").write_bytes(b"oops\n")
        pages = await read_all(stub, REQUEST(task_id="t"))
        assert b"".join(p.data for p in pages) == text
        assert all(len(p.data) <= PAGE_BYTES for p in pages) and len(pages) == 4
        assert [p.offset for p in pages] == [0, PAGE_BYTES, 2 * PAGE_BYTES, 3 * PAGE_BYTES]
        assert {p.framework_id for p in pages} == {"fw-1"}
        tail = await read_all(stub, REQUEST(task_id="t", tail_lines=2, framework_id="fw-1"))
        assert b"".join(p.data for p in tail) == b"line 019998\nline 019999\n"
        errors = await read_all(stub, REQUEST(task_id="t", file=REQUEST.FILE_STDERR))
        assert [p.data for p in errors] == [b"oops\n"]
        resumed = await read_all(stub, REQUEST(task_id="t", offset=len(text) - 5))
        assert [p.data for p in resumed] == [b"9999\n"]
        empty = await read_all(stub, REQUEST(task_id="t", offset=len(text) + 10))
        assert [(p.data, p.offset) for p in empty] == [(b"", len(text) + 10)]  # answered at once

    serve(tmp_path, body)


def test_follow_streams_what_is_written_until_the_task_ends(tmp_path: Path) -> None:
    async def body(stub: Stub, sandboxes: Sandboxes, running: set[TaskKey]) -> None:
        key = ("fw-1", "live")
        out = sandboxes.prepare(key, "", None).stdout
        running.add(key)
        call = stub.StreamLog(REQUEST(task_id="live", follow=True))
        assert (await call.read()).data == b""  # the first message comes at once
        with out.open("ab") as file:
            file.write(b"one\n")
            file.flush()
            assert (await call.read()).data == b"one\n"
            file.write(b"two\n")
        running.discard(key)  # the task ended: the stream sends the rest, then ends
        assert (await call.read()).data == b"two\n"
        assert await call.read() is grpc.aio.EOF

    serve(tmp_path, body)


def test_refusals(tmp_path: Path) -> None:
    async def body(stub: Stub, sandboxes: Sandboxes, running: set[TaskKey]) -> None:
        for framework in ("fw-a", "fw-b"):
            sandboxes.prepare((framework, "shared"), "", None)
        linked = sandboxes.prepare(("fw-a", "linked"), "", None).sandbox
        (linked / "stdout").unlink()
        (linked / "stdout").symlink_to(tmp_path / "agent.sqlite")
        cases = [
            (REQUEST(), grpc.StatusCode.INVALID_ARGUMENT, "task_id is empty"),
            (REQUEST(task_id="x", offset=-1), grpc.StatusCode.INVALID_ARGUMENT, "offset"),
            (REQUEST(task_id="x", tail_lines=10_001), grpc.StatusCode.INVALID_ARGUMENT, "tail"),
            (REQUEST(task_id="nope"), grpc.StatusCode.NOT_FOUND, "no sandbox of task nope"),
            (REQUEST(task_id="../fw-a"), grpc.StatusCode.NOT_FOUND, "no sandbox"),
            (REQUEST(task_id="shared"), grpc.StatusCode.FAILED_PRECONDITION, "fw-a, fw-b"),
            (REQUEST(task_id="linked"), grpc.StatusCode.FAILED_PRECONDITION, "not a regular"),
        ]
        for request, code, fragment in cases:
            error = await refused(stub, request)
            assert error.code() == code and fragment in (error.details() or "")
        assert len(await read_all(stub, REQUEST(task_id="shared", framework_id="fw-b"))) == 1
        running.add(("fw-a", "shared"))
        held = stub.StreamLog(REQUEST(task_id="shared", framework_id="fw-a", follow=True))
        await held.read()  # the one stream this agent serves is taken
        error = await refused(stub, REQUEST(task_id="shared", framework_id="fw-b"))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        held.cancel()
        await asyncio.sleep(0.1)  # the agent sees the cancellation and frees the slot
        assert len(await read_all(stub, REQUEST(task_id="shared", framework_id="fw-b"))) == 1

    serve(tmp_path, body, max_streams=1)
