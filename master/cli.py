"""The ``fairshare`` command line (DESIGN.md §4): one entry point, one subcommand per job.

Contract: bad input prints ``fairshare SUBCOMMAND: <message naming the field>`` on stderr and
exits 2 (argparse's usage errors exit 2 as well); a subcommand that is not built yet says so on
stderr and exits 1; success exits 0. No traceback reaches the user for bad input.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from fairshare.settings import SettingsError, parse_duration

__all__ = ["main"]

EXIT_BAD_INPUT = 2
EXIT_NOT_BUILT = 1
_NOT_BUILT: dict[str, str] = {}


def _add_daemon_flags(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # The daemons' modules own their flags (one per setting); imported by name, as the agent's
    # module is not the master's to import.
    epilog = (
        "Every flag may also come from FAIRSHARE_{NAME}_<FLAG> (e.g. FAIRSHARE_{NAME}_PORT;"
        " FAIRSHARE_LOG_FORMAT and FAIRSHARE_LOG_LEVEL too) or from the [{name}] table of the"
        " --config TOML file; flags win over variables, variables over the file."
    )
    for name, summary, module in (
        ("master", "run the master daemon", "master.daemon"),
        ("agent", "run an agent daemon", "agent.daemon"),
    ):
        parser = sub.add_parser(
            name, help=summary, epilog=epilog.format(NAME=name.upper(), name=name)
        )
        importlib.import_module(module).add_arguments(parser)


def _add_client_flags(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = sub.add_parser("status", help="show cluster state")
    status.add_argument("--master", required=True, metavar="HOST:PORT")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--watch", action="store_true", help="redraw every --interval; Ctrl-C ends")
    status.add_argument(
        "--interval", type=parse_duration, default=2.0, help="--watch refresh (default 2s)"
    )
    run = sub.add_parser("run", help="keep up to N placeholder tasks of a shape running")
    run.add_argument("--master", required=True, metavar="HOST:PORT")
    run.add_argument("--name", required=True)
    run.add_argument("--task", required=True, help="task shape, e.g. 'cpus:1;mem:4096'")
    run.add_argument("--count", type=int, default=1)
    run.add_argument("--duration", type=parse_duration)
    run.add_argument("--role", default="*")
    run.add_argument("--weight", type=float, default=1.0)
    up = sub.add_parser("up", help="run a master and N agents as local processes")
    up.add_argument("--agents", type=int, default=2, help="how many agents (default 2)")
    up.add_argument("--resources", help="each agent's resources (default: this host's)")
    up.add_argument("--port", type=int, default=5050, help="master port, 0 picks one")
    up.add_argument(
        "--metrics-port",
        type=int,
        default=9100,
        help="master metrics port; agent i gets the next ones (deploy/prometheus's targets);"
        " 0 picks free ports",
    )
    up.add_argument("--work-dir", help="base directory of the daemons (default: a temp dir)")
    up.add_argument("--policy", choices=["drf", "asset", "pf", "slots"], default="drf")
    up.add_argument("--placement", choices=["best-fit", "first-fit", "random"], default="best-fit")
    up.add_argument(
        "--demo",
        action="store_true",
        help="also run the DRF paper's two frameworks and print the status as they run",
    )
    up.add_argument(
        "--for",
        dest="duration",
        type=parse_duration,
        metavar="DURATION",
        help="stop everything after this long (default: until Ctrl-C)",
    )
    simulate = sub.add_parser("simulate", help="trace-driven simulation")
    simulate.add_argument("scenario", metavar="SCENARIO.json")
    simulate.add_argument("--out", default="./fairshare-sim")
    simulate.add_argument(
        "--progress",
        action="store_true",
        help="a progress bar on stderr (shown anyway when stderr is a terminal)",
    )


def _add_agents_flags(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    agents = sub.add_parser(
        "agents",
        help="deactivate or reactivate agents (maintenance)",
        description="Deactivate agents (their offers are rescinded and nothing of them is"
        " offered; their tasks keep running) or reactivate them, all named agents in one call.",
    )
    agents.add_argument("--master", required=True, metavar="HOST:PORT")
    action = agents.add_mutually_exclusive_group(required=True)
    action.add_argument("--deactivate", nargs="+", metavar="AGENT_ID", help="agents to deactivate")
    action.add_argument("--reactivate", nargs="+", metavar="AGENT_ID", help="agents to reactivate")


def _add_weights_flags(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    weights = sub.add_parser(
        "weights",
        help="list, set or clear operator weights of roles and frameworks",
        description="Without --set or --clear: list the weights the operator set. A framework's"
        " weight overrides its role's, which overrides the weight the framework subscribed with;"
        " weights are durable (kept in the master's registry).",
    )
    weights.add_argument("--master", required=True, metavar="HOST:PORT")
    target = weights.add_mutually_exclusive_group()
    target.add_argument("--role", help="the role whose weight to set or clear")
    target.add_argument("--framework", metavar="FRAMEWORK_ID", help="one framework's weight")
    action = weights.add_mutually_exclusive_group()
    action.add_argument("--set", type=float, metavar="W", help="the weight, in (0, 1e6]")
    action.add_argument("--clear", action="store_true", help="remove the stored weight")


def _add_allocate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    allocate = sub.add_parser(
        "allocate",
        help="offline allocation calculator",
        description="Allocate a case file (DESIGN.md §4 format) and print the result as JSON.",
    )
    allocate.add_argument("case", metavar="CASE.json", help="case file, or - for stdin")
    allocate.add_argument("--policy", choices=["drf", "asset", "pf", "ceei", "slots"])
    allocate.add_argument("--placement", choices=["best-fit", "first-fit", "random"])
    allocate.add_argument("--mode", choices=["tasks", "fluid"])


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="fairshare",
        description="A Mesos-style resource-offer manager with Dominant Resource Fairness.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_daemon_flags(sub)
    _add_client_flags(sub)
    _add_agents_flags(sub)
    _add_weights_flags(sub)
    _add_allocate(sub)
    return parser


def run_allocate(args: argparse.Namespace) -> int:
    """``fairshare allocate``: print the allocation of a case file as JSON."""
    from master.calculator import CaseError, allocate, load_case_text, parse_case

    source = args.case
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as error:
        print(f"fairshare allocate: cannot read {source}: {error.strerror}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UnicodeDecodeError:
        print(f"fairshare allocate: {source} is not UTF-8 text", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        case = parse_case(load_case_text(text, source), args.policy, args.placement, args.mode)
        result = allocate(case)
    except CaseError as error:
        print(f"fairshare allocate: {source}: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(json.dumps(result, indent=2))
    return 0


# Subcommand -> "module:function" taking the parsed arguments and returning the exit code;
# imported lazily so that one subcommand never pays for another's imports.
_HANDLERS: dict[str, str] = {
    "allocate": "master.cli:run_allocate",
    "master": "master.daemon:main",
    "agent": "agent.daemon:main",
    "run": "framework_sdk.cli:run",
    "status": "framework_sdk.cli:status",
    "up": "master.local_cluster:run_up",
    "agents": "master.maintenance_cli:run_agents",
    "weights": "master.maintenance_cli:run_weights",
    "simulate": "master.sim.cli:run_simulate",
}


def _handler(command: str) -> Callable[[argparse.Namespace], int] | None:
    target = _HANDLERS.get(command)
    if target is None:
        return None
    module_name, _, function_name = target.partition(":")
    handler: Callable[[argparse.Namespace], int] = getattr(
        importlib.import_module(module_name), function_name
    )
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``fairshare`` with ``argv`` (default: the process's arguments); returns the exit code."""
    args = build_parser().parse_args(argv)
    handler = _handler(args.command)
    if handler is None:
        print(f"fairshare {args.command}: {_NOT_BUILT[args.command]}", file=sys.stderr)
        return EXIT_NOT_BUILT
    try:
        return handler(args)
    except SettingsError as error:
        print(f"fairshare {args.command}: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # the reader went away (`fairshare status | head`): not an error
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
