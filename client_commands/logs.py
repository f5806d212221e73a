"""``fairshare logs TASK_ID``: a command task's stdout or stderr, from its sandbox on its agent
(the SDK's ``stream_logs``, which asks the master for a grant and the agent for the bytes; see
``framework_sdk.logs`` for who may read what).

Invariants: bytes are written to stdout as the task wrote them; exit 0 once the file is read
(or followed to the task's end, or Ctrl-C), 1 when the task or its agent cannot be found or
reached or the read is refused, 2 for bad input, naming the flag: a task id several frameworks
use names them and asks for ``--framework ID`` or ``--framework NAME``
(``client_commands.log_frameworks``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Final

import grpc
from fairshare.cli import Command, command_settings
from fairshare.settings import CLIENT_SETTINGS, SettingsError, add_setting_flags, client_security
from fairshare.tls_probe import diagnose_target
from fairshare.transport import ClientSecurity, client_channel
from fairshare.v1 import operator_pb2, operator_pb2_grpc

from client_commands.log_frameworks import (
    AmbiguousFramework,
    ambiguity_message,
    framework_to_ask,
    frameworks_named_in,
    known_frameworks,
)
from framework_sdk.errors import CallError, FailedPreconditionError, NotFoundError
from framework_sdk.logs import MAX_TAIL, TIMEOUT, stream_logs

__all__ = ["LOGS_SETTINGS", "logs", "logs_command"]

LOGS_SETTINGS: Final = CLIENT_SETTINGS


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
        "--framework",
        default="",
        metavar="F",
        help="the task's framework (id or name), if its task id is shared",
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


async def _state(master: str, security: ClientSecurity) -> operator_pb2.GetStateResponse | None:
    """The master's state, or None when this caller may not read it (or it cannot be asked:
    the grant's call then says why)."""
    try:
        async with client_channel(master, security) as channel:
            stub = operator_pb2_grpc.OperatorServiceStub(channel)
            state: operator_pb2.GetStateResponse = await stub.GetState(
                operator_pb2.GetStateRequest(), timeout=TIMEOUT
            )
    except grpc.aio.AioRpcError:
        return None
    return state


async def _print(
    master: str, args: argparse.Namespace, tail: int | None, security: ClientSecurity
) -> None:
    out = sys.stdout.buffer
    state = await _state(master, security)
    framework_id = framework_to_ask(state, args.task_id, args.framework)
    try:
        async for data in _stream(master, args, framework_id, tail, security):
            out.write(data)
            out.flush()
    except NotFoundError as error:
        if framework_id and error.method == "GrantLogAccess" and "framework" in error.message:
            raise AmbiguousFramework(
                f"--framework: no framework has the id or name {args.framework!r}"
            ) from None
        raise
    except FailedPreconditionError as error:
        owners = frameworks_named_in(known_frameworks(state), error.message) if state else []
        if framework_id or len(owners) < 2:
            raise
        raise AmbiguousFramework(ambiguity_message(args.task_id, owners)) from None


def _stream(
    master: str,
    args: argparse.Namespace,
    framework_id: str,
    tail: int | None,
    security: ClientSecurity,
) -> AsyncIterator[bytes]:
    return stream_logs(
        master,
        args.task_id,
        framework_id=framework_id,
        stderr=args.stderr,
        follow=args.follow,
        tail=tail,
        agent=args.agent,
        security=security,
    )


def logs(args: argparse.Namespace) -> int:
    """``fairshare logs TASK_ID``: the task's output on stdout; the exit code."""
    values = command_settings("logs", LOGS_SETTINGS, args)
    tail = _tail(args.tail)
    security = client_security(values)
    if not args.task_id:
        raise SettingsError("TASK_ID: must not be empty")
    try:
        asyncio.run(_print(values["master"], args, tail, security))
    except KeyboardInterrupt:
        return 0
    except AmbiguousFramework as error:
        print(f"fairshare logs: {error}", file=sys.stderr)
        return 2
    except CallError as error:
        print(f"fairshare logs: {_why(values['master'], security, error)}", file=sys.stderr)
        return 1
    with contextlib.suppress(OSError):
        sys.stdout.flush()
    return 0


def _why(master: str, security: ClientSecurity, error: CallError) -> str:
    """One line: the TLS or port mistake when the master's call failed on one (gRPC says
    ``Socket closed`` or a handshake error), else the call's error."""
    if error.method != "StreamLog" and error.code in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.INTERNAL,
    ):
        mistake = diagnose_target(master, security, error.message)
        if mistake is not None:
            return mistake
    return str(error)


logs_command: Final = Command(add_logs_arguments, logs)
