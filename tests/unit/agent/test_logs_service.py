"""``TaskLogServicer`` over a real gRPC server on loopback: pages, tails, follow, and every
refusal (bad request, unknown or ambiguous task, a log file that is a link, too many streams);
credentials: none, forged, for another agent, expired, for another task or framework, and the
streams counted per principal.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import pytest
from fairshare.log_access import ANY, GRANT_TTL, Grant, agent_key, new_secret, sign
from fairshare.v1 import task_logs_pb2, task_logs_pb2_grpc

from agent.core.records import TaskKey
from agent.tasks.logs_service import PAGE_BYTES, TaskLogServicer, tail_offset
from agent.tasks.sandbox import Sandboxes

DEADLINE = 10.0
Stub = task_logs_pb2_grpc.TaskLogServiceStub
SECRET = new_secret()
KEY = agent_key(SECRET, "ag-1")  # this test's agent


def REQUEST(
    *,
    frameworks: tuple[str, ...] = ANY,
    principal: str = "alice",
    key: bytes = KEY,
    expires: float | None = None,
    grant_task: str | None = None,
    **fields: object,
) -> task_logs_pb2.StreamLogRequest:
    """A request with the master's credential for its task (``grant_task``: for another)."""
    request = task_logs_pb2.StreamLogRequest(**fields)  # type: ignore[arg-type]
    at = time.time() + GRANT_TTL if expires is None else expires
    text = Grant(principal, grant_task or request.task_id or "x", frameworks, at).encode()
    request.credential.grant = text
    request.credential.signature = sign(key, text)
    return request


REQUEST.FILE_STDERR = task_logs_pb2.StreamLogRequest.FILE_STDERR  # type: ignore[attr-defined]


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
    max_streams_per_principal: int = 4,
    key: bytes | None = KEY,
) -> None:
    async def main() -> None:
        sandboxes = Sandboxes(tmp_path)
        running: set[TaskKey] = set()
        servicer = TaskLogServicer(
            sandboxes,
            running.__contains__,
            lambda: key,
            max_streams=max_streams,
            max_streams_per_principal=max_streams_per_principal,
            poll=0.02,
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


def test_only_the_masters_credential_for_this_agent_and_task_opens_a_log(tmp_path: Path) -> None:
    async def body(stub: Stub, sandboxes: Sandboxes, _: set[TaskKey]) -> None:
        sandboxes.prepare(("fw-a", "t"), "", None).stdout.write_bytes(b"a's output\n")
        sandboxes.prepare(("fw-b", "t"), "", None).stdout.write_bytes(b"b's output\n")
        unauthenticated, denied = grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED
        bare = task_logs_pb2.StreamLogRequest(task_id="t", framework_id="fw-a")
        other_agent = agent_key(SECRET, "ag-2")
        cases = [
            (bare, unauthenticated, "no credential"),
            (REQUEST(task_id="t", key=other_agent), unauthenticated, "not signed for it"),
            (REQUEST(task_id="t", key=new_secret()), unauthenticated, "not signed for it"),
            (REQUEST(task_id="t", expires=time.time() - 120), unauthenticated, "expired"),
            (REQUEST(task_id="t", grant_task="other"), denied, "for task 'other'"),
            (REQUEST(task_id="t", framework_id="fw-b", frameworks=("fw-a",)), denied, "fw-b"),
        ]
        forged = REQUEST(task_id="t", frameworks=("fw-a",))
        forged.credential.grant = Grant("alice", "t", ANY, time.time() + 60).encode()
        cases.append((forged, unauthenticated, "not signed for it"))  # widened after signing
        for request, code, fragment in cases:
            error = await refused(stub, request)
            assert error.code() == code and fragment in (error.details() or ""), error
        # A grant covering fw-a only does not see fw-b's sandbox of the same task id.
        pages = await read_all(stub, REQUEST(task_id="t", frameworks=("fw-a",)))
        assert [(p.framework_id, p.data) for p in pages] == [("fw-a", b"a's output\n")]
        error = await refused(stub, REQUEST(task_id="t", frameworks=("fw-c",)))
        assert error.code() == grpc.StatusCode.NOT_FOUND

    serve(tmp_path, body)


def test_an_agent_without_a_key_from_the_master_serves_no_log(tmp_path: Path) -> None:
    async def body(stub: Stub, sandboxes: Sandboxes, _: set[TaskKey]) -> None:
        sandboxes.prepare(("fw-a", "t"), "", None)
        error = await refused(stub, REQUEST(task_id="t"))
        assert error.code() == grpc.StatusCode.UNAVAILABLE and "no log key" in (
            error.details() or ""
        )

    serve(tmp_path, body, key=None)


def test_one_principals_streams_do_not_lock_another_out(tmp_path: Path) -> None:
    async def body(stub: Stub, sandboxes: Sandboxes, running: set[TaskKey]) -> None:
        key = ("fw-a", "live")
        sandboxes.prepare(key, "", None)
        running.add(key)
        held = []
        for _ in range(3):  # mallory's whole share of this agent's streams
            call = stub.StreamLog(REQUEST(task_id="live", follow=True, principal="mallory"))
            await call.read()
            held.append(call)
        error = await refused(stub, REQUEST(task_id="live", follow=True, principal="mallory"))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "principal 'mallory' has 3 log streams" in (error.details() or "")
        mine = stub.StreamLog(REQUEST(task_id="live", follow=True, principal="alice"))
        assert (await mine.read()).data == b""  # the owner is still served
        error = await refused(stub, REQUEST(task_id="live", principal="bob"))
        assert "4 log streams are open" in (error.details() or "")  # the agent's own cap
        for call in [*held, mine]:
            call.cancel()

    serve(tmp_path, body, max_streams=4, max_streams_per_principal=3)
