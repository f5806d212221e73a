"""The output of a command task: ``stream_logs`` (the SDK; ``fairshare logs`` is its command,
``client_commands.logs``).

It reads the task's ``stdout`` or ``stderr`` from the sandbox on its agent through the agent's
``TaskLogService`` (task_logs.proto), like ``nomad alloc logs``.

Asking: the caller's identity (its certificate, its bearer token) goes to the master only. The
master's ``GrantLogAccess`` (authenticated and authorized there: the task's framework's
principal, the ACL's ``view_logs``, or the full view) answers with a short-lived grant for this
task and the agents to ask, each with its own signature of the grant; an agent gets its own
credential (the grant and its signature) and nothing else of the caller's (no token; a client
certificate still proves the connection, its key never leaves). A credential is worth nothing at
the master, at another agent or for another task (``fairshare.log_access``).

Finding the agent: the master names the task's agent if it tracks the task, else every
connected agent (a task the master no longer tracks ended and its end was acknowledged; its
sandbox stays on its agent until garbage-collected), asked ``SEARCH_BATCH`` at a time. It names
them also under a redacted view: the grant is for the caller's own tasks. An agent whose
hostname does not resolve (``fairshare up`` names its agents ``agent-1``, ...) is tried at the
master's host. ``agent`` (``--agent HOST:PORT``) asks only the listed agent at that address.

Invariants: bytes are passed on as the task wrote them (the command writes them to its stdout
unchanged, page by page); a task no agent has is ``NotFoundError``, a refusal (the master's or
an agent's) the ``CallError`` of its status code, an unreachable master or agent
``UnavailableError``; no call to an agent carries the caller's token.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

import grpc
from fairshare.transport import INSECURE, ClientSecurity, client_channel
from fairshare.v1 import operator_pb2, operator_pb2_grpc, task_logs_pb2, task_logs_pb2_grpc

from framework_sdk.errors import (
    CallError,
    NotFoundError,
    call_error,
)

__all__ = [
    "SEARCH_BATCH",
    "agent_security",
    "find_agents",
    "grant_access",
    "stream_logs",
]

SEARCH_BATCH: Final = 16
TIMEOUT: Final = 10.0
MAX_TAIL: Final = 10_000
_REQUEST = task_logs_pb2.StreamLogRequest
"""The settings of ``fairshare logs`` (``TASK_ID`` and the others are its arguments); its TLS
settings are used for the master and the agents alike (one cluster CA), its token for the master
only."""


def agent_security(security: ClientSecurity) -> ClientSecurity:
    """What a client presents to agents: its TLS settings without its bearer token."""
    return dataclasses.replace(security, token=None)


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


async def grant_access(
    master: str, task_id: str, framework_id: str = "", security: ClientSecurity = INSECURE
) -> operator_pb2.GrantLogAccessResponse:
    """The master's grant to read the task's logs, with the agents to ask (``CallError`` of
    the master's refusal; ``UnavailableError`` if it cannot be asked)."""
    request = operator_pb2.GrantLogAccessRequest(task_id=task_id, framework_id=framework_id)
    try:
        async with client_channel(master, security) as channel:
            stub = operator_pb2_grpc.OperatorServiceStub(channel)
            granted: operator_pb2.GrantLogAccessResponse = await stub.GrantLogAccess(
                request, timeout=TIMEOUT
            )
    except grpc.aio.AioRpcError as error:
        raise call_error("GrantLogAccess", error.code(), error.details() or "") from None
    return granted


async def _targets(
    master: str, granted: operator_pb2.GrantLogAccessResponse
) -> list[tuple[str, operator_pb2.LogAgent]]:
    return [(await _reachable(a.hostname, a.port, master), a) for a in granted.agents if a.port > 0]


async def find_agents(
    master: str, task_id: str, framework_id: str = "", security: ClientSecurity = INSECURE
) -> list[str]:
    """Addresses of the agents that may have the task's sandbox (the master's answer to
    ``GrantLogAccess``): its agent if the master tracks the task, else every connected agent."""
    granted = await grant_access(master, task_id, framework_id, security)
    return [address for address, _ in await _targets(master, granted)]


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


def _signed(
    request: task_logs_pb2.StreamLogRequest, grant: str, agent: operator_pb2.LogAgent
) -> task_logs_pb2.StreamLogRequest:
    """``request`` with the credential of ``agent`` (the grant and that agent's signature)."""
    signed = task_logs_pb2.StreamLogRequest()
    signed.CopyFrom(request)
    signed.credential.grant = grant
    signed.credential.signature = agent.signature
    return signed


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
    security: ClientSecurity = INSECURE,
) -> AsyncIterator[bytes]:
    """The bytes of a command task's stdout (``stderr``: its stderr), page by page: from the
    start, or the last ``tail`` lines; ``follow`` goes on until the task ends.

    Raises ``NotFoundError`` when no agent has the task's sandbox, a ``CallError`` for an
    agent's or the master's refusal.
    """
    request = _request(task_id, framework_id, stderr, follow, tail)
    granted = await grant_access(master, task_id, framework_id, security)
    targets = await _targets(master, granted)
    if agent is not None:
        targets = [(address, a) for address, a in targets if _same_address(address, agent, a)]
        if not targets:
            message = f"agent {agent} is not an agent the master names for task {task_id}"
            raise NotFoundError("GrantLogAccess", grpc.StatusCode.NOT_FOUND, message)
    to_agents = agent_security(security)
    opened = [
        (client_channel(address, to_agents), _signed(request, granted.grant, a))
        for address, a in targets
    ]
    try:
        call, first = await _search(task_id, opened)
        if call is None or first is None:
            where = f"agent {agent}" if agent else f"the {len(targets)} agents asked"
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
        for channel, _ in opened:
            await channel.close(None)


def _same_address(address: str, wanted: str, agent: operator_pb2.LogAgent) -> bool:
    """Whether ``wanted`` (``--agent HOST:PORT``) is the agent at ``address`` (as reached) or
    at its own ``hostname:port``."""
    host, port = _host_port(wanted)
    return wanted == address or (host == agent.hostname and port == str(agent.port))


async def _search(
    task_id: str,
    opened: Sequence[tuple[grpc.aio.Channel, task_logs_pb2.StreamLogRequest]],
) -> tuple[Any, task_logs_pb2.StreamLogResponse | None]:
    """The first agent (in order) that has the task, asking ``SEARCH_BATCH`` at a time;
    FAILED_PRECONDITION when agents of one batch have it in different frameworks."""
    unreachable: CallError | None = None
    for start in range(0, len(opened), SEARCH_BATCH):
        batch = opened[start : start + SEARCH_BATCH]
        answers = await asyncio.gather(*(_first(c, r) for c, r in batch), return_exceptions=True)
        found: list[tuple[Any, task_logs_pb2.StreamLogResponse]] = []
        for answer in answers:
            if isinstance(answer, CallError) and answer.code == grpc.StatusCode.UNAVAILABLE:
                unreachable = answer
            elif isinstance(answer, BaseException):
                _cancel_all(answers)
                raise answer
            elif answer[1] is not None:
                found.append((answer[0], answer[1]))
            else:
                answer[0].cancel()
        owners = sorted({first.framework_id for _, first in found if first.framework_id})
        if len(owners) > 1:  # sandboxes of one task id in several frameworks, on several agents
            _cancel_all(found)
            message = (
                f"task id {task_id!r} has sandboxes in frameworks {', '.join(owners)}:"
                " give the framework"
            )
            raise call_error("StreamLog", grpc.StatusCode.FAILED_PRECONDITION, message)
        if found:
            _cancel_all(found[1:])
            return found[0]
    if unreachable is not None:
        raise unreachable
    return None, None


def _cancel_all(answers: Sequence[object]) -> None:
    for answer in answers:
        if isinstance(answer, tuple):
            answer[0].cancel()
