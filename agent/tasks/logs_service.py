"""``TaskLogServicer``: the agent's ``TaskLogService`` (task_logs.proto), the output of its
command tasks for ``fairshare logs``.

Who may read: the master decides (``OperatorService.GrantLogAccess``: the task's framework's
principal, the ACL's ``view_logs``, a principal with the full view) and the agent checks the
credential it issued (``fairshare.log_access``): a grant signed with this agent's log key
(``log_key()``, from the master at registration; none yet: UNAVAILABLE), unexpired, for this
task; a request without one, or with one that does not verify, is UNAUTHENTICATED, one for
another task or naming a framework the grant does not cover PERMISSION_DENIED. Sandboxes of the
task in frameworks the grant does not cover are not there for this reader (NOT_FOUND), so a
search across agents for a task id another tenant also uses finds the reader's own. The
service needs no other identity of its caller (it is open at the agent's ``RpcGuard``): no
client sends an agent its own token.

A stream reads one file of one sandbox (``agent.tasks.sandbox.open_log``: a regular file, never
followed through a link) in pages of ``PAGE_BYTES``, from an offset or from the start of the
last ``tail_lines`` lines (found by reading back at most ``TAIL_SCAN_BYTES``). With ``follow``
it polls the file every ``poll`` seconds while the task still runs (``is_running``), and ends
after a last read once the task has ended.

Invariants: at most ``max_streams`` streams at once, and at most ``max_streams_per_principal``
of the principal a grant names (more: RESOURCE_EXHAUSTED), so one principal's follow streams
never lock another out; each holds one
file descriptor and one page of memory, released when the stream ends or the caller goes away;
gRPC's flow control paces the pages (``yield`` waits for a slow reader); the file descriptor is
closed whatever happens; nothing the request names can make the agent read outside the
sandboxes' ``stdout`` and ``stderr`` files (ids become single path components).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Final, NoReturn

import grpc
from fairshare.log_access import CredentialError, Grant, verify
from fairshare.v1 import task_logs_pb2, task_logs_pb2_grpc

from agent.core.records import TaskKey
from agent.tasks.sandbox import SandboxError, Sandboxes, open_log

__all__ = [
    "MAX_STREAMS",
    "MAX_STREAMS_PER_PRINCIPAL",
    "MAX_TAIL_LINES",
    "PAGE_BYTES",
    "SERVICE",
    "TaskLogServicer",
    "tail_offset",
]

SERVICE: Final = "fairshare.v1.TaskLogService"
"""The service's full name (open at the agent's ``RpcGuard``: the credential authorizes)."""
MAX_STREAMS: Final = 64
MAX_STREAMS_PER_PRINCIPAL: Final = 8
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


Context = grpc.aio.ServicerContext[task_logs_pb2.StreamLogRequest, task_logs_pb2.StreamLogResponse]


async def _refuse(context: Context, code: grpc.StatusCode, message: str) -> NoReturn:
    await context.abort(code, message)
    raise AssertionError("abort returned")  # abort raises; this tells the type checker


class TaskLogServicer(task_logs_pb2_grpc.TaskLogServiceServicer):
    """Streams sandbox files to holders of the master's credentials; ``is_running(key)`` tells
    whether the task may write more, ``log_key()`` is this agent's log key (None before the
    master gave one)."""

    def __init__(
        self,
        sandboxes: Sandboxes,
        is_running: Callable[[TaskKey], bool],
        log_key: Callable[[], bytes | None],
        *,
        max_streams: int = MAX_STREAMS,
        max_streams_per_principal: int = MAX_STREAMS_PER_PRINCIPAL,
        poll: float = 0.2,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sandboxes = sandboxes
        self._is_running = is_running
        self._log_key = log_key
        self._max_streams = max_streams
        self._max_per_principal = max_streams_per_principal
        self._open = 0
        self._by_principal: Counter[str] = Counter()
        self._poll = poll
        self._clock = clock

    async def StreamLog(
        self, request: task_logs_pb2.StreamLogRequest, context: Context
    ) -> AsyncIterator[task_logs_pb2.StreamLogResponse]:
        """One log file, page by page (see task_logs.proto)."""
        await self._check_shape(request, context)
        grant = await self._authorize(request, context)
        framework_id, fd = await self._open_file(request, grant, context)
        principal = grant.principal
        self._open += 1
        self._by_principal[principal] += 1
        try:
            async for page in self._pages(request, (framework_id, request.task_id), fd):
                yield page
        finally:
            self._open -= 1
            self._by_principal[principal] -= 1
            if self._by_principal[principal] <= 0:
                del self._by_principal[principal]
            os.close(fd)

    @staticmethod
    async def _check_shape(request: task_logs_pb2.StreamLogRequest, context: Context) -> None:
        invalid = grpc.StatusCode.INVALID_ARGUMENT
        if not request.task_id:
            await _refuse(context, invalid, "task_id is empty")
        if request.offset < 0:
            await _refuse(context, invalid, f"offset must be >= 0, got {request.offset}")
        if request.HasField("tail_lines") and not 0 <= request.tail_lines <= MAX_TAIL_LINES:
            await _refuse(context, invalid, f"tail_lines must be in [0, {MAX_TAIL_LINES}]")
        if request.file not in _FILES:
            await _refuse(context, invalid, f"unknown file {request.file}")

    async def _authorize(self, request: task_logs_pb2.StreamLogRequest, context: Context) -> Grant:
        """The request's grant, verified for this agent and this task (see the module
        docstring for the codes)."""
        if not request.HasField("credential"):
            await _refuse(
                context,
                grpc.StatusCode.UNAUTHENTICATED,
                "no credential: reading a task's logs takes one from the master"
                " (OperatorService.GrantLogAccess; fairshare logs asks for it)",
            )
        key = self._log_key()
        if not key:
            await _refuse(
                context,
                grpc.StatusCode.UNAVAILABLE,
                "this agent has no log key yet (not registered with a master): retry",
            )
        credential = request.credential
        try:
            grant = verify(key, credential.grant, credential.signature, self._clock())
        except CredentialError as error:
            await _refuse(context, grpc.StatusCode.UNAUTHENTICATED, str(error))
        if grant.task_id != request.task_id:
            await _refuse(
                context,
                grpc.StatusCode.PERMISSION_DENIED,
                f"the credential is for task {grant.task_id!r}, not {request.task_id!r}",
            )
        if request.framework_id and not grant.covers(request.framework_id):
            await _refuse(
                context,
                grpc.StatusCode.PERMISSION_DENIED,
                f"the credential does not cover framework {request.framework_id!r}",
            )
        return grant

    async def _open_file(
        self, request: task_logs_pb2.StreamLogRequest, grant: Grant, context: Context
    ) -> tuple[str, int]:
        found = [
            (framework, sandbox)
            for framework, sandbox in self._sandboxes.find(request.task_id, request.framework_id)
            if grant.covers(framework)
        ]
        if not found:
            owner = f" of framework {request.framework_id}" if request.framework_id else ""
            await _refuse(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"no sandbox of task {request.task_id}{owner} here",
            )
        if len(found) > 1:
            names = ", ".join(framework for framework, _ in found)
            await _refuse(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                f"task id {request.task_id} has sandboxes in frameworks {names}: give the"
                " framework",
            )
        principal = grant.principal
        if self._by_principal[principal] >= self._max_per_principal:
            who = f"principal {principal!r}" if principal else "anonymous readers"
            await _refuse(
                context,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{who} has {self._by_principal[principal]} log streams open on this agent"
                " (the most one principal may)",
            )
        if self._open >= self._max_streams:
            await _refuse(
                context,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{self._open} log streams are open on this agent (the most it serves)",
            )
        framework_id, sandbox = found[0]
        try:
            return framework_id, open_log(sandbox, _FILES[request.file])
        except SandboxError as error:
            await _refuse(context, grpc.StatusCode.FAILED_PRECONDITION, str(error))

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
