"""``TaskLogServicer``: the agent's ``TaskLogService`` (task_logs.proto), the output of its
command tasks for ``fairshare logs``.

A stream reads one file of one sandbox (``agent.tasks.sandbox.open_log``: a regular file, never
followed through a link) in pages of ``PAGE_BYTES``, from an offset or from the start of the
last ``tail_lines`` lines (found by reading back at most ``TAIL_SCAN_BYTES``). With ``follow``
it polls the file every ``poll`` seconds while the task still runs (``is_running``), and ends
after a last read once the task has ended.

Invariants: at most ``max_streams`` streams at once (more: RESOURCE_EXHAUSTED), each holding one
file descriptor and one page of memory, released when the stream ends or the caller goes away;
gRPC's flow control paces the pages (``yield`` waits for a slow reader); the file descriptor is
closed whatever happens; nothing the request names can make the agent read outside the
sandboxes' ``stdout`` and ``stderr`` files (ids become single path components).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from typing import Final

import grpc
from fairshare.v1 import task_logs_pb2, task_logs_pb2_grpc

from agent.core.records import TaskKey
from agent.tasks.sandbox import SandboxError, Sandboxes, open_log

__all__ = ["MAX_TAIL_LINES", "PAGE_BYTES", "TaskLogServicer", "tail_offset"]

PAGE_BYTES: Final = 65_536
MAX_TAIL_LINES: Final = 10_000
TAIL_SCAN_BYTES: Final = 4 << 20
_FILES: Final = {
    task_logs_pb2.StreamLogRequest.FILE_UNSPECIFIED: "stdout",
    task_logs_pb2.StreamLogRequest.FILE_STDOUT: "stdout",
    task_logs_pb2.StreamLogRequest.FILE_STDERR: "stderr",
}


def tail_offset(fd: int, size: int, lines: int, limit: int = TAIL_SCAN_BYTES) -> int:
    """Where the last ``lines`` lines of the file start (a last line without its newline
    counts); looks back at most ``limit`` bytes."""
    if lines <= 0:
        return size
    floor = max(0, size - limit)
    end = size
    if end > floor and os.pread(fd, 1, end - 1) == b"\n":
        end -= 1  # the final newline ends the last line; it does not start one
    newlines = 0
    position = end
    while position > floor:
        start = max(floor, position - PAGE_BYTES)
        block = os.pread(fd, position - start, start)
        index = len(block)
        while (index := block.rfind(b"\n", 0, index)) >= 0:
            newlines += 1
            if newlines == lines:
                return start + index + 1
        position = start
    return floor


class TaskLogServicer(task_logs_pb2_grpc.TaskLogServiceServicer):
    """Streams sandbox files; ``is_running(key)`` tells whether the task may write more."""

    def __init__(
        self,
        sandboxes: Sandboxes,
        is_running: Callable[[TaskKey], bool],
        *,
        max_streams: int = 16,
        poll: float = 0.2,
    ) -> None:
        self._sandboxes = sandboxes
        self._is_running = is_running
        self._max_streams = max_streams
        self._open = 0
        self._poll = poll

    async def StreamLog(
        self,
        request: task_logs_pb2.StreamLogRequest,
        context: grpc.aio.ServicerContext[
            task_logs_pb2.StreamLogRequest, task_logs_pb2.StreamLogResponse
        ],
    ) -> AsyncIterator[task_logs_pb2.StreamLogResponse]:
        """One log file, page by page (see task_logs.proto)."""
        framework_id, fd = await self._open_file(request, context)
        self._open += 1
        try:
            async for page in self._pages(request, (framework_id, request.task_id), fd):
                yield page
        finally:
            self._open -= 1
            os.close(fd)

    async def _open_file(
        self,
        request: task_logs_pb2.StreamLogRequest,
        context: grpc.aio.ServicerContext[
            task_logs_pb2.StreamLogRequest, task_logs_pb2.StreamLogResponse
        ],
    ) -> tuple[str, int]:
        invalid = grpc.StatusCode.INVALID_ARGUMENT
        if not request.task_id:
            await context.abort(invalid, "task_id is empty")
        if request.offset < 0:
            await context.abort(invalid, f"offset must be >= 0, got {request.offset}")
        if request.HasField("tail_lines") and not 0 <= request.tail_lines <= MAX_TAIL_LINES:
            await context.abort(invalid, f"tail_lines must be in [0, {MAX_TAIL_LINES}]")
        if request.file not in _FILES:
            await context.abort(invalid, f"unknown file {request.file}")
        found = self._sandboxes.find(request.task_id, request.framework_id)
        if not found:
            owner = f" of framework {request.framework_id}" if request.framework_id else ""
            await context.abort(
                grpc.StatusCode.NOT_FOUND, f"no sandbox of task {request.task_id}{owner} here"
            )
        if len(found) > 1:
            names = ", ".join(framework for framework, _ in found)
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"task id {request.task_id} has sandboxes in frameworks {names}: give the"
                " framework",
            )
        if self._open >= self._max_streams:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{self._open} log streams are open on this agent (the most it serves)",
            )
        framework_id, sandbox = found[0]
        try:
            return framework_id, open_log(sandbox, _FILES[request.file])
        except SandboxError as error:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(error))
            raise  # abort raises; this line only tells the type checker

    async def _pages(
        self, request: task_logs_pb2.StreamLogRequest, key: TaskKey, fd: int
    ) -> AsyncIterator[task_logs_pb2.StreamLogResponse]:
        size = os.fstat(fd).st_size
        if request.HasField("tail_lines"):
            position = tail_offset(fd, size, request.tail_lines)
        else:
            position = request.offset
        first = True
        ended = False
        while True:
            data = os.pread(fd, PAGE_BYTES, position)
            if data or first:
                yield task_logs_pb2.StreamLogResponse(
                    framework_id=key[0], offset=position, data=data
                )
                position += len(data)
                first = False
                if data:
                    continue
            if not request.follow or ended:
                return
            ended = not self._is_running(key)  # one more read after the end, then stop
            if not ended:
                await asyncio.sleep(self._poll)
