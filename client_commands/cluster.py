"""Operator commands over frameworks and tasks: ``fairshare frameworks``, ``fairshare tasks``,
``fairshare stop`` (docs/architecture.md §7; Mesos's /teardown and /tasks, Nomad's ``job stop``).

- ``fairshare frameworks`` lists the frameworks (id, name, role, state, weight, dominant and
  weighted share, running/wanted tasks, failover deadline); ``--teardown ID`` removes one for
  good (its tasks are killed);
- ``fairshare tasks [--framework F] [--state S]`` lists tasks (``F`` an id or a name);
  ``--kill TASK_ID`` kills one (with ``--framework`` when two frameworks have that task id);
- ``fairshare stop NAME`` tears down the framework named ``NAME`` (what ``fairshare run
  --detach`` started); several frameworks of that name: it names them and changes nothing.

How a command reaches the master and says why it could not: ``client_commands.master_calls``.

Invariants (the ``fairshare`` CLI contract): bad input exits 2 naming the flag, and sends
nothing; an unknown id or name exits 1 with the master's or our reason; a master that is down
or that is not a master (an agent's port: UNIMPLEMENTED) exits 1 with one line saying so;
success prints what was done (or the table) and exits 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Final

from fairshare.cli import Command
from fairshare.resources import ResourceVector
from fairshare.settings import CLIENT_SETTINGS, add_setting_flags
from fairshare.task_states import TaskState
from fairshare.v1 import common_pb2, operator_pb2
from fairshare.wire import WireRangeError, resources_from_pb, seconds_from_timestamp

from client_commands.master_calls import (
    CALL_TIMEOUT,
    CommandFailed,
    MasterAddress,
    call_master,
    get_state,
    render_rows,
    run_command,
)

__all__ = ["framework_rows", "frameworks_command", "stop_command", "tasks_command"]

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_BAD_INPUT: Final = 2
State = operator_pb2.GetStateResponse


def _text(resources: common_pb2.Resources) -> str:
    vector: ResourceVector = resources_from_pb(resources)
    return str(vector) if vector else "-"


def _task_state(value: int) -> str:
    return common_pb2.TaskState.Name(value).removeprefix("TASK_STATE_")  # type: ignore[arg-type]


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
        rows.append(
            [
                info.framework_id,
                info.name,
                info.role or "*",
                State.Framework.State.Name(framework.state).removeprefix("STATE_"),
                f"{framework.weight:g}",
                f"{framework.dominant_share:.3f}",
                f"{framework.weighted_share:.3f}",
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
        print(render_rows(header, framework_rows(get_state(master)), "(no frameworks)"))
        return EXIT_OK

    return run_command("frameworks", args, body)


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
        state = get_state(master)
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

    return run_command("tasks", args, body)


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
            for f in get_state(master).frameworks
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

    return run_command("stop", args, body)


frameworks_command: Final = Command(add_frameworks_arguments, run_frameworks)
tasks_command: Final = Command(add_tasks_arguments, run_tasks)
stop_command: Final = Command(add_stop_arguments, run_stop)
