"""Talking to the leading master, for every client command: one place for how a command
finds the leader, calls it and says why it could not.

``MasterAddress`` is where a command sends its calls and with which TLS and identity;
``on_leader``/``call_master`` call the leading master (following ``--master``'s list or etcd
through the election: ``no leader yet`` is said once and the masters are asked again);
``master_failure`` names in one line why a master did not answer as one (TLS and port mistakes
by ``fairshare.tls_probe``, an agent's port, an election, a missing identity);
``report_refusal``/``CommandFailed`` turn a refusal into the CLI contract's exit codes.

Invariants: a refusal for invalid input exits 2, any other failure 1, with one line on stderr
naming the master; no traceback reaches the user; nothing here retries a call the master
refused (only the search for a leader is retried).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import grpc
from fairshare.cli import command_settings, note
from fairshare.masters import NoLeaderYet, call_leader
from fairshare.settings import CLIENT_SETTINGS, client_security
from fairshare.tls_probe import diagnose_target
from fairshare.transport import INSECURE, ClientSecurity
from fairshare.v1 import operator_pb2, operator_pb2_grpc

__all__ = [
    "CALL_TIMEOUT",
    "CommandFailed",
    "MasterAddress",
    "call_master",
    "fetch_state",
    "get_state",
    "master_failure",
    "on_leader",
    "render_rows",
    "report_refusal",
    "run_command",
]

EXIT_FAILURE: Final = 1
EXIT_BAD_INPUT: Final = 2
CALL_TIMEOUT: Final = 10.0
T = TypeVar("T")
State = operator_pb2.GetStateResponse
Stub = operator_pb2_grpc.OperatorServiceStub


@dataclass(frozen=True, slots=True)
class MasterAddress:
    """The master a command talks to, and how (``str`` of it is the address, for messages)."""

    address: str
    security: ClientSecurity = INSECURE

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> MasterAddress:
        """From resolved ``CLIENT_SETTINGS`` (``SettingsError`` naming a bad security flag)."""
        return cls(values["master"], client_security(values))

    def __str__(self) -> str:
        return self.address


class CommandFailed(Exception):
    """The command cannot go on: ``str`` is the message, ``code`` the exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def master_failure(master: MasterAddress | str, error: grpc.RpcError) -> str:
    """One line saying why the master at ``master`` did not answer as a master."""
    code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = error.details() if isinstance(error, grpc.Call) else str(error)
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return f"{master} is not a fairshare master (it does not serve the operator API; an agent?)"
    if isinstance(error, NoLeaderYet):
        return f"the masters at {master} answer, but {details}"
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL):
        security = master.security if isinstance(master, MasterAddress) else INSECURE
        mistake = diagnose_target(str(master), security, details or "")
        if mistake is not None:  # TLS or port mistakes, named (gRPC says "Socket closed")
            return mistake
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return f"no master answers at {master} ({code.name}: {details})"
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return (
            f"the master at {master} does not know who this is (UNAUTHENTICATED: {details}):"
            " give --token-file or --tls-cert/--tls-key"
        )
    return f"the master at {master} refused: {code.name}: {details}"


def report_refusal(command: str, master: MasterAddress | str, error: grpc.RpcError) -> int:
    """Print why the master did not do what ``fairshare COMMAND`` asked (one line on stderr)
    and return the exit code: 2 when the master says the input is invalid, else 1."""
    code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = error.details() if isinstance(error, grpc.Call) else str(error)
    why = (
        master_failure(master, error)
        if code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.UNAVAILABLE)
        else f"the master at {master} refused: {code.name}: {details}"
    )
    print(f"fairshare {command}: {why}", file=sys.stderr)
    return EXIT_BAD_INPUT if code == grpc.StatusCode.INVALID_ARGUMENT else EXIT_FAILURE


def on_leader(master: MasterAddress, call: Callable[[grpc.Channel], T]) -> T:
    """``call(channel)`` on the leading master, with the command's TLS and identity (raises
    ``grpc.RpcError``)."""
    return call_leader(master.address, call, security=master.security, on_election=note)


def call_master(master: MasterAddress, call: Callable[[Stub], T]) -> T:
    """Run ``call`` with an Operator API stub; raises ``CommandFailed`` with one line on errors
    (exit 2 when the master says the input is invalid)."""
    try:
        return on_leader(master, lambda channel: call(Stub(channel)))
    except grpc.RpcError as error:
        code = error.code() if isinstance(error, grpc.Call) else None
        exit_code = EXIT_BAD_INPUT if code == grpc.StatusCode.INVALID_ARGUMENT else EXIT_FAILURE
        raise CommandFailed(master_failure(master, error), exit_code) from None


def get_state(master: MasterAddress) -> State:
    """The leading master's ``GetState`` (``CommandFailed`` with one line on errors); when the
    master left something out to fit one message (``trimmed``), a line on stderr says what."""
    state = call_master(
        master, lambda stub: stub.GetState(operator_pb2.GetStateRequest(), timeout=CALL_TIMEOUT)
    )
    if state.trimmed:
        left_out = "; ".join(state.trimmed)
        print(f"fairshare: the master left out, to fit one message: {left_out}", file=sys.stderr)
    return state


def fetch_state(
    master: MasterAddress,
    on_election: Callable[[str], None] | None = note,
    timeout: float = CALL_TIMEOUT,
) -> State:
    """The leading master's ``GetState`` (raises ``grpc.RpcError`` if no master answers as one);
    during an election ``on_election`` is told and the masters are asked again
    (``call_leader``): ``status --watch`` shows the failure in its frame instead."""

    def ask(channel: grpc.Channel) -> State:
        response: State = Stub(channel).GetState(operator_pb2.GetStateRequest(), timeout=timeout)
        return response

    return call_leader(master.address, ask, security=master.security, on_election=on_election)


def render_rows(header: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> str:
    """A left-aligned table; ``empty`` on its own line when there are no rows."""
    widths = [len(title) for title in header]
    for row in rows:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    return "\n".join(lines if rows else [*lines, empty])


def run_command(name: str, args: argparse.Namespace, body: Callable[[MasterAddress], int]) -> int:
    """Resolve ``fairshare NAME``'s client settings and run ``body`` on its master; a
    ``CommandFailed`` is printed as ``fairshare NAME: <why>`` and gives the exit code."""
    master = MasterAddress.of(command_settings(name, CLIENT_SETTINGS, args))
    try:
        return body(master)
    except CommandFailed as failure:
        print(f"fairshare {name}: {failure}", file=sys.stderr)
        return failure.code
