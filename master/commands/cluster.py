"""Operator commands over frameworks and tasks: ``fairshare frameworks``, ``fairshare tasks``,
``fairshare stop`` (docs/architecture.md §7; Mesos's /teardown and /tasks, Nomad's ``job stop``).

- ``fairshare frameworks`` lists the frameworks (id, name, role, state, weight, dominant and
  weighted share, running/wanted tasks, failover deadline); ``--teardown ID`` removes one for
  good (its tasks are killed);
- ``fairshare tasks [--framework F] [--state S]`` lists tasks (``F`` an id or a name);
  ``--kill TASK_ID`` kills one (with ``--framework`` when two frameworks have that task id);
- ``fairshare stop NAME`` tears down the framework named ``NAME`` (what ``fairshare run
  --detach`` started); several frameworks of that name: it names them and changes nothing.

``master_failure`` and ``call_master`` are shared with ``master.commands.operator``.

Invariants (the ``fairshare`` CLI contract): bad input exits 2 naming the flag, and sends
nothing; an unknown id or name exits 1 with the master's or our reason; a master that is down
or that is not a master (an agent's port: UNIMPLEMENTED) exits 1 with one line saying so;
success prints what was done (or the table) and exits 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import grpc
from fairshare.cli import Command, command_settings, note
from fairshare.masters import NoLeaderYet, call_leader
from fairshare.resources import ResourceVector
from fairshare.settings import CLIENT_SETTINGS, add_setting_flags, client_security
from fairshare.task_states import TaskState
from fairshare.tls_probe import diagnose_target
from fairshare.transport import INSECURE, ClientSecurity
from fairshare.v1 import common_pb2, operator_pb2, operator_pb2_grpc
from fairshare.wire import WireRangeError, resources_from_pb, seconds_from_timestamp

__all__ = [
    "CALL_TIMEOUT",
    "MasterAddress",
    "call_master",
    "frameworks_command",
    "master_failure",
    "render_rows",
    "report_refusal",
    "stop_command",
    "tasks_command",
]

EXIT_OK: Final = 0
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
            f"the master at {master} does not know who this is ({details}): give --token-file"
            " or --tls-cert/--tls-key"
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


def _state(master: MasterAddress) -> State:
    state = call_master(master, lambda s: s.GetState(operator_pb2.GetStateRequest(), timeout=10))
    if state.trimmed:
        left_out = "; ".join(state.trimmed)
        print(f"fairshare: the master left out, to fit one message: {left_out}", file=sys.stderr)
    return state


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


def _text(resources: common_pb2.Resources) -> str:
    vector: ResourceVector = resources_from_pb(resources)
    return str(vector) if vector else "-"


def _task_state(value: int) -> str:
    return common_pb2.TaskState.Name(value).removeprefix("TASK_STATE_")  # type: ignore[arg-type]


def _run(name: str, args: argparse.Namespace, body: Callable[[MasterAddress], int]) -> int:
    master = MasterAddress.of(command_settings(name, CLIENT_SETTINGS, args))
    try:
        return body(master)
    except CommandFailed as failure:
        print(f"fairshare {name}: {failure}", file=sys.stderr)
        return failure.code


# -- fairshare frameworks ---------------------------------------------------------------------


def _deadline(framework: State.Framework) -> str:
    if not framework.HasField("failover_deadline"):
        return "-"
    try:
        deadline = seconds_from_timestamp(framework.failover_deadline, "failover_deadline")
    except WireRangeError:
        return "?"
    left = deadline - time.time()
    return f"in {max(0.0, left):.0f}s"


def framework_rows(state: State) -> list[list[str]]:
    """One row per framework: what ``fairshare frameworks`` prints."""
    rows = []
    for framework in state.frameworks:
        info = framework.framework_info
        counts = {_task_state(c.state): c.count for c in framework.task_counts}
        wanted = "-"
        if framework.HasField("demand") and framework.demand.HasField("max_tasks"):
            wanted = str(framework.demand.max_tasks)
        weighted = framework.dominant_share / framework.weight if framework.weight else 0.0
        rows.append(
            [
                info.framework_id,
                info.name,
                info.role or "*",
                State.Framework.State.Name(framework.state).removeprefix("STATE_"),
                f"{framework.weight:g}",
                f"{framework.dominant_share:.3f}",
                f"{weighted:.3f}",
                framework.dominant_resource or "-",
                f"{counts.get('RUNNING', 0)}/{wanted}",
                _deadline(framework),
            ]
        )
    return rows


def add_frameworks_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare frameworks``."""
    parser.description = (
        "List the frameworks, or with --teardown remove one for good: its tasks are killed, its"
        " offers rescinded, and its id can never subscribe again."
    )
    parser.add_argument("--teardown", metavar="FRAMEWORK_ID", help="the framework to remove")
    add_setting_flags(parser, CLIENT_SETTINGS)


def run_frameworks(args: argparse.Namespace) -> int:
    """``fairshare frameworks``: list or tear down; returns the exit code."""
    if args.teardown is not None and not args.teardown.strip():
        print("fairshare frameworks: --teardown: the framework id is empty", file=sys.stderr)
        return EXIT_BAD_INPUT

    def body(master: MasterAddress) -> int:
        if args.teardown is not None:
            framework_id = args.teardown.strip()
            request = operator_pb2.TeardownFrameworkRequest(framework_id=framework_id)
            call_master(master, lambda s: s.TeardownFramework(request, timeout=CALL_TIMEOUT))
            print(f"tore down framework {framework_id}")
            return EXIT_OK
        header = [
            "FRAMEWORK",
            "NAME",
            "ROLE",
            "STATE",
            "WEIGHT",
            "SHARE",
            "WEIGHTED",
            "DOMINANT",
            "RUNNING/WANTED",
            "FAILOVER",
        ]
        print(render_rows(header, framework_rows(_state(master)), "(no frameworks)"))
        return EXIT_OK

    return _run("frameworks", args, body)


# -- fairshare tasks --------------------------------------------------------------------------


def _framework_ids(state: State, wanted: str) -> set[str]:
    """Ids of the frameworks whose id or name is ``wanted``."""
    return {
        f.framework_info.framework_id
        for f in state.frameworks
        if wanted in (f.framework_info.framework_id, f.framework_info.name)
    }


def add_tasks_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare tasks``."""
    parser.description = (
        "List the tasks the master tracks (running, or ended and not yet acknowledged), or with"
        " --kill kill one on its framework's behalf."
    )
    parser.add_argument("--framework", metavar="F", help="only this framework's (id or name)")
    parser.add_argument(
        "--state",
        type=str.upper,
        choices=[s.value for s in TaskState if s is not TaskState.UNKNOWN],
        metavar="STATE",
        help="only tasks in this state (RUNNING, STAGING, KILLING, ...)",
    )
    parser.add_argument("--kill", metavar="TASK_ID", help="kill this task")
    add_setting_flags(parser, CLIENT_SETTINGS)


def _kill(master: MasterAddress, state: State, task_id: str, framework: str | None) -> int:
    owners = sorted(
        t.framework_id
        for t in state.tasks
        if t.info.task_id == task_id
        and (framework is None or t.framework_id in _framework_ids(state, framework))
    )
    if not owners:
        where = f" of framework {framework}" if framework else ""
        raise CommandFailed(f"--kill: no task {task_id!r}{where} is tracked by the master")
    if len(owners) > 1:
        raise CommandFailed(
            f"--kill: frameworks {', '.join(owners)} each have a task {task_id!r}:"
            " say which with --framework ID",
            EXIT_BAD_INPUT,
        )
    request = operator_pb2.KillTaskRequest(framework_id=owners[0], task_id=task_id)
    call_master(master, lambda s: s.KillTask(request, timeout=CALL_TIMEOUT))
    print(f"killing task {task_id} of framework {owners[0]}")
    return EXIT_OK


def run_tasks(args: argparse.Namespace) -> int:
    """``fairshare tasks``: list or kill; returns the exit code."""
    for flag, value in (("--framework", args.framework), ("--kill", args.kill)):
        if value is not None and not value.strip():
            print(f"fairshare tasks: {flag}: the value is empty", file=sys.stderr)
            return EXIT_BAD_INPUT

    def body(master: MasterAddress) -> int:
        state = _state(master)
        framework = args.framework.strip() if args.framework is not None else None
        if args.kill is not None:
            return _kill(master, state, args.kill.strip(), framework)
        ids = None if framework is None else _framework_ids(state, framework)
        if ids == set():
            raise CommandFailed(f"--framework: no framework has the id or name {framework!r}")
        names = {f.framework_info.framework_id: f.framework_info.name for f in state.frameworks}
        hosts = {a.agent_id: a.agent_info.hostname for a in state.agents}
        rows = [
            [
                task.info.task_id,
                names.get(task.framework_id, task.framework_id),
                task.framework_id,
                hosts.get(task.info.agent_id, "?"),
                task.info.agent_id,
                _task_state(task.status.state),
                _text(task.info.resources),
            ]
            for task in state.tasks
            if (ids is None or task.framework_id in ids)
            and (args.state is None or _task_state(task.status.state) == args.state)
        ]
        header = ["TASK", "FRAMEWORK", "FRAMEWORK_ID", "HOST", "AGENT", "STATE", "RESOURCES"]
        print(render_rows(header, rows, "(no tasks)"))
        return EXIT_OK

    return _run("tasks", args, body)


# -- fairshare stop ---------------------------------------------------------------------------


def add_stop_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare stop``."""
    parser.description = (
        "Tear down the framework named NAME (e.g. one started with fairshare run --detach):"
        " its tasks are killed and it is removed for good."
    )
    parser.add_argument("name", metavar="NAME", help="the framework's name")
    add_setting_flags(parser, CLIENT_SETTINGS)


def run_stop(args: argparse.Namespace) -> int:
    """``fairshare stop NAME``; returns the exit code."""
    name = args.name.strip()
    if not name:
        print("fairshare stop: NAME: the name is empty", file=sys.stderr)
        return EXIT_BAD_INPUT

    def body(master: MasterAddress) -> int:
        ids = sorted(
            f.framework_info.framework_id
            for f in _state(master).frameworks
            if f.framework_info.name == name
        )
        if not ids:
            raise CommandFailed(f"no framework is named {name!r}")
        if len(ids) > 1:
            raise CommandFailed(
                f"{len(ids)} frameworks are named {name!r} ({', '.join(ids)}): tear one down"
                " with fairshare frameworks --teardown ID",
                EXIT_BAD_INPUT,
            )
        request = operator_pb2.TeardownFrameworkRequest(framework_id=ids[0])
        call_master(master, lambda s: s.TeardownFramework(request, timeout=CALL_TIMEOUT))
        print(f"stopped {name} (framework {ids[0]}): its tasks are being killed")
        return EXIT_OK

    return _run("stop", args, body)


frameworks_command: Final = Command(add_frameworks_arguments, run_frameworks)
tasks_command: Final = Command(add_tasks_arguments, run_tasks)
stop_command: Final = Command(add_stop_arguments, run_stop)
