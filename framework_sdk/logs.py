"""The output of a command task: ``stream_logs`` (SDK) and ``fairshare logs`` (its command).

Both read the task's ``stdout`` or ``stderr`` from the sandbox on its agent through the agent's
``TaskLogService`` (task_logs.proto), like ``nomad alloc logs``.

Finding the agent: the master's GetState lists the tasks it tracks with their agent, and each
agent's hostname and port (``AgentInfo``). A task the master no longer tracks (it ended and its
end was acknowledged) is looked for on every reachable agent, ``SEARCH_BATCH`` at a time: its
sandbox stays on its agent until garbage-collected. An agent whose hostname does not resolve
(``fairshare up`` names its agents ``agent-1``, ...) is tried at the master's host. ``agent``
(``--agent HOST:PORT``) skips the search.

Invariants: bytes are passed on as the task wrote them (the command writes them to its stdout
unchanged, page by page); a task no agent has is ``NotFoundError``, an agent's refusal the
``CallError`` of its status code, an unreachable master or agent ``UnavailableError``.
``fairshare logs`` exits 0 once the file is read (or followed to the task's end, or Ctrl-C), 1
when the task or its agent cannot be found or reached, 2 for bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

import grpc
from fairshare.cli import Command, command_settings
from fairshare.settings import SHARED_SETTINGS, SettingsError, add_setting_flags
from fairshare.v1 import operator_pb2, operator_pb2_grpc, task_logs_pb2, task_logs_pb2_grpc

from framework_sdk.errors import CallError, NotFoundError, call_error

__all__ = ["LOGS_SETTINGS", "SEARCH_BATCH", "find_agents", "logs_command", "stream_logs"]

SEARCH_BATCH: Final = 16
TIMEOUT: Final = 10.0
MAX_TAIL: Final = 10_000
_REQUEST = task_logs_pb2.StreamLogRequest
LOGS_SETTINGS: Final = SHARED_SETTINGS
"""The settings of ``fairshare logs`` (``TASK_ID`` and the others are its arguments)."""


def _host_port(address: str) -> tuple[str, str]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), port


async def _reachable(hostname: str, port: int, master: str) -> str:
    """``hostname:port``, or the master's host with ``port`` when ``hostname`` does not
    resolve."""
    try:
        await asyncio.get_running_loop().getaddrinfo(hostname, port)
    except OSError:
        hostname = _host_port(master)[0]
    return f"[{hostname}]:{port}" if ":" in hostname else f"{hostname}:{port}"


async def find_agents(master: str, task_id: str, framework_id: str = "") -> list[str]:
    """Addresses of the agents that may have the task's sandbox: its agent if the master
    tracks the task, else every reachable agent. ``UnavailableError`` if the master cannot be
    asked."""
    try:
        async with grpc.aio.insecure_channel(master) as channel:
            stub = operator_pb2_grpc.OperatorServiceStub(channel)
            state = await stub.GetState(operator_pb2.GetStateRequest(), timeout=TIMEOUT)
    except grpc.aio.AioRpcError as error:
        raise call_error("GetState", error.code(), error.details() or "") from None
    agents = {a.agent_id: a for a in state.agents if a.agent_info.port > 0}
    owners = [
        task.info.agent_id
        for task in state.tasks
        if task.info.task_id == task_id and framework_id in ("", task.framework_id)
    ]
    chosen = [agents[a] for a in dict.fromkeys(owners) if a in agents] or [
        a for a in agents.values() if a.reachable
    ]
    return [await _reachable(a.agent_info.hostname, a.agent_info.port, master) for a in chosen]


def _request(
    task_id: str, framework_id: str, stderr: bool, follow: bool, tail: int | None
) -> task_logs_pb2.StreamLogRequest:
    request = _REQUEST(
        framework_id=framework_id,
        task_id=task_id,
        file=_REQUEST.FILE_STDERR if stderr else _REQUEST.FILE_STDOUT,
        follow=follow,
    )
    if tail is not None:
        request.tail_lines = tail
    return request


async def _first(
    channel: grpc.aio.Channel, request: task_logs_pb2.StreamLogRequest
) -> tuple[Any, task_logs_pb2.StreamLogResponse | None]:
    """Open the stream on one agent; (call, its first message), None when it has no such task."""
    call = task_logs_pb2_grpc.TaskLogServiceStub(channel).StreamLog(request)
    try:
        async with asyncio.timeout(TIMEOUT):
            first = await call.read()
    except grpc.aio.AioRpcError as error:
        if error.code() == grpc.StatusCode.NOT_FOUND:
            return call, None
        raise call_error("StreamLog", error.code(), error.details() or "") from None
    except TimeoutError:
        call.cancel()
        raise call_error("StreamLog", grpc.StatusCode.DEADLINE_EXCEEDED, "no answer") from None
    if not isinstance(first, task_logs_pb2.StreamLogResponse):  # grpc.aio.EOF: nothing sent
        return call, task_logs_pb2.StreamLogResponse()
    return call, first


async def stream_logs(
    master: str,
    task_id: str,
    *,
    framework_id: str = "",
    stderr: bool = False,
    follow: bool = False,
    tail: int | None = None,
    agent: str | None = None,
) -> AsyncIterator[bytes]:
    """The bytes of a command task's stdout (``stderr``: its stderr), page by page: from the
    start, or the last ``tail`` lines; ``follow`` goes on until the task ends.

    Raises ``NotFoundError`` when no agent has the task's sandbox, a ``CallError`` for an
    agent's or the master's refusal.
    """
    request = _request(task_id, framework_id, stderr, follow, tail)
    addresses = [agent] if agent else await find_agents(master, task_id, framework_id)
    channels = {address: grpc.aio.insecure_channel(address) for address in addresses}
    try:
        call, first = await _search(channels, request)
        if call is None or first is None:
            where = f"agent {agent}" if agent else f"the {len(addresses)} agents asked"
            message = f"no sandbox of task {task_id} on {where}"
            raise NotFoundError("StreamLog", grpc.StatusCode.NOT_FOUND, message)
        if first.data:
            yield first.data
        try:
            while isinstance(page := await call.read(), task_logs_pb2.StreamLogResponse):
                yield page.data  # (read() returns grpc.aio.EOF at the end)
        except grpc.aio.AioRpcError as error:
            raise call_error("StreamLog", error.code(), error.details() or "") from None
    finally:
        for channel in channels.values():
            await channel.close(None)


async def _search(
    channels: dict[str, grpc.aio.Channel], request: task_logs_pb2.StreamLogRequest
) -> tuple[Any, task_logs_pb2.StreamLogResponse | None]:
    """The first agent (in order) that has the task, asking ``SEARCH_BATCH`` at a time."""
    ordered = list(channels.values())
    unreachable: CallError | None = None
    for start in range(0, len(ordered), SEARCH_BATCH):
        batch = ordered[start : start + SEARCH_BATCH]
        answers = await asyncio.gather(*(_first(c, request) for c in batch), return_exceptions=True)
        found: tuple[Any, task_logs_pb2.StreamLogResponse | None] | None = None
        for answer in answers:
            if isinstance(answer, CallError) and answer.code == grpc.StatusCode.UNAVAILABLE:
                unreachable = answer
            elif isinstance(answer, BaseException):
                _cancel_all(answers)
                raise answer
            elif answer[1] is not None and found is None:
                found = answer
            else:
                answer[0].cancel()
        if found is not None:
            return found
    if unreachable is not None:
        raise unreachable
    return None, None


def _cancel_all(answers: Sequence[object]) -> None:
    for answer in answers:
        if isinstance(answer, tuple):
            answer[0].cancel()


# -- fairshare logs ------------------------------------------------------------------------------


def add_logs_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare logs``."""
    parser.description = (
        "Print a command task's stdout (or stderr) from its sandbox on its agent, like"
        " `nomad alloc logs`; --follow goes on until the task ends."
    )
    parser.add_argument("task_id", metavar="TASK_ID", help="the task's id")
    parser.add_argument("--stderr", action="store_true", help="print stderr instead of stdout")
    parser.add_argument(
        "--follow", "-f", action="store_true", help="keep printing what the task writes"
    )
    parser.add_argument(
        "--tail", metavar="N", help=f"start at the last N lines (at most {MAX_TAIL})"
    )
    parser.add_argument(
        "--framework", default="", metavar="ID", help="the task's framework, if its id is shared"
    )
    parser.add_argument(
        "--agent", metavar="HOST:PORT", help="read from this agent (skips the search)"
    )
    add_setting_flags(parser, LOGS_SETTINGS)


def _tail(text: str | None) -> int | None:
    if text is None:
        return None
    if not text.isdigit() or int(text) > MAX_TAIL:
        raise SettingsError(f"--tail {text!r}: must be a whole number from 0 to {MAX_TAIL}")
    return int(text)


async def _print(master: str, args: argparse.Namespace, tail: int | None) -> None:
    out = sys.stdout.buffer
    async for data in stream_logs(
        master,
        args.task_id,
        framework_id=args.framework,
        stderr=args.stderr,
        follow=args.follow,
        tail=tail,
        agent=args.agent,
    ):
        out.write(data)
        out.flush()


def logs(args: argparse.Namespace) -> int:
    """``fairshare logs TASK_ID``: the task's output on stdout; the exit code."""
    values = command_settings("logs", LOGS_SETTINGS, args)
    tail = _tail(args.tail)
    if not args.task_id:
        raise SettingsError("TASK_ID: must not be empty")
    try:
        asyncio.run(_print(values["master"], args, tail))
    except KeyboardInterrupt:
        return 0
    except CallError as error:
        print(f"fairshare logs: {error}", file=sys.stderr)
        return 1
    with contextlib.suppress(OSError):
        sys.stdout.flush()
    return 0


logs_command: Final = Command(add_logs_arguments, logs)
