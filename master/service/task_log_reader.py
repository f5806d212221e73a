"""``TaskLogReader``: the master reads a task's log from its agent on a caller's behalf, for the
dashboard's ``/api/v1/logs`` (``master.web.routes``; the browser speaks no gRPC).

The caller's grant comes first and from the runtime (``OperatorCalls.grant_logs``: the same
decision and the same counted refusals as ``GrantLogAccess``, for the HTTP request's
principal), so the master reads exactly what ``fairshare logs`` would let that principal read:
the grant names the principal, the task and its frameworks, and each agent checks its own
signature of it (``fairshare.log_access``). This module only carries the grant to the agents'
``TaskLogService`` (task_logs.proto), as the SDK's ``stream_logs`` does, without following.

The master reaches agents with ``security``: with TLS, the cluster CA and the master's own
certificate (``--tls-ca``, ``--tls-cert``; an agent that verifies client certificates sees the
master's); without, in plaintext. An agent whose hostname does not resolve (``fairshare up``
names its agents ``agent-1``, ...) is tried at ``fallback_host``.

Invariants: nothing changes anywhere (a read); agents are asked ``SEARCH_BATCH`` at a time, the
first with the task's sandbox is read; at most ``MAX_BYTES`` are returned (the last ones: the
read starts at the last ``tail`` lines, and keeps the end when more comes); every call is
bounded by ``TIMEOUT``; an agent's refusal is the ``CoreError`` of its code (``NotFound`` when
no agent has the sandbox, ``Unavailable`` when none of those that may have it answers).
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Final

import grpc
from fairshare.transport import INSECURE, ClientSecurity, client_channel
from fairshare.v1 import task_logs_pb2, task_logs_pb2_grpc

from master.core import CoreError, FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from master.runtime.log_grants import LogAgent, LogGrant
from master.runtime.state import Unavailable

__all__ = ["MAX_BYTES", "SEARCH_BATCH", "TIMEOUT", "TaskLogReader"]

SEARCH_BATCH: Final = 16
TIMEOUT: Final = 10.0
MAX_BYTES: Final = 1 << 20
"""The most bytes of a log one read returns (the last ones)."""

_ERRORS: Final[dict[grpc.StatusCode, type[CoreError]]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: PermissionDenied,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.NOT_FOUND: NotFound,
}


@dataclasses.dataclass(frozen=True, slots=True)
class _Found:
    data: bytes


class TaskLogReader:
    """Reads one log file of a task from the agents a grant names."""

    def __init__(self, security: ClientSecurity = INSECURE, fallback_host: str = "127.0.0.1"):
        self.security = dataclasses.replace(security, token=None)  # agents never get a token
        self.fallback_host = fallback_host

    @classmethod
    def of_master(
        cls, ca: Path | None, cert: Path | None, key: Path | None, host: str
    ) -> TaskLogReader:
        """The master's reader: the cluster CA and its own certificate when it has both, else
        plaintext; agents that do not resolve are tried at the master's ``host``."""
        if ca is not None and cert is not None:
            return cls(ClientSecurity(ca, cert, key), host)
        return cls(INSECURE, host)

    async def read(
        self, granted: LogGrant, task_id: str, framework_id: str, stderr: bool, tail: int
    ) -> bytes:
        """The last ``tail`` lines of the task's stdout (``stderr``: its stderr), at most
        ``MAX_BYTES`` (the module docstring says which errors)."""
        request = task_logs_pb2.StreamLogRequest(
            framework_id=framework_id,
            task_id=task_id,
            file=task_logs_pb2.StreamLogRequest.FILE_STDERR
            if stderr
            else task_logs_pb2.StreamLogRequest.FILE_STDOUT,
            tail_lines=tail,
        )
        request.credential.grant = granted.grant
        agents = [a for a in granted.agents if a.port > 0]
        unreachable: CoreError | None = None
        for start in range(0, len(agents), SEARCH_BATCH):
            batch = agents[start : start + SEARCH_BATCH]
            answers = await asyncio.gather(
                *(self._read_one(agent, request) for agent in batch), return_exceptions=True
            )
            for answer in answers:
                if isinstance(answer, _Found):
                    return answer.data
                if isinstance(answer, Unavailable):
                    unreachable = answer
                elif isinstance(answer, BaseException) and not isinstance(answer, NotFound):
                    raise answer
        if unreachable is not None:
            raise unreachable
        raise NotFound(f"no sandbox of task {task_id!r} on the {len(agents)} agents asked")

    async def _address(self, agent: LogAgent) -> str:
        host = agent.hostname
        try:
            await asyncio.get_running_loop().getaddrinfo(host, agent.port)
        except OSError:
            host = self.fallback_host
        return f"[{host}]:{agent.port}" if ":" in host else f"{host}:{agent.port}"

    async def _read_one(
        self, agent: LogAgent, request: task_logs_pb2.StreamLogRequest
    ) -> _Found | None:
        """The file from one agent; ``NotFound`` when it has no such sandbox."""
        signed = task_logs_pb2.StreamLogRequest()
        signed.CopyFrom(request)
        signed.credential.signature = agent.signature
        data = bytearray()
        async with client_channel(await self._address(agent), self.security) as channel:
            call = task_logs_pb2_grpc.TaskLogServiceStub(channel).StreamLog(signed)
            try:
                async with asyncio.timeout(TIMEOUT):
                    async for page in call:
                        data += page.data
                        if len(data) > MAX_BYTES:
                            del data[: len(data) - MAX_BYTES]
            except TimeoutError:
                call.cancel()
                raise Unavailable(
                    f"agent {agent.agent_id} did not answer in {TIMEOUT:g}s"
                ) from None
            except grpc.aio.AioRpcError as error:
                kind = _ERRORS.get(error.code(), Unavailable)
                raise kind(
                    f"agent {agent.agent_id}: {error.details() or error.code().name}"
                ) from None
        return _Found(bytes(data))
