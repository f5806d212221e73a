"""The ``fairshare`` command line (DESIGN.md §4): one entry point, one subcommand per job.

Contract: bad input prints ``fairshare SUBCOMMAND: <message naming the field>`` on stderr and
exits 2 (argparse's usage errors exit 2 as well); a subcommand that is not built yet says so on
stderr and exits 1; success exits 0. No traceback reaches the user for bad input.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["main", "parse_duration"]

EXIT_BAD_INPUT = 2
EXIT_NOT_BUILT = 1
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
_NOT_BUILT = {
    "master": "the master daemon is not built yet (issue: the live offer cycle over gRPC)",
    "agent": "the agent daemon is not built yet (issue: the live offer cycle over gRPC)",
    "status": "cluster status needs the master daemon, which is not built yet",
    "run": "the built-in framework needs the master daemon, which is not built yet",
    "up": "local clusters need the master and agent daemons, which are not built yet",
    "simulate": "the simulator is not built yet (issue: reproduce the papers' experiments)",
}


def parse_duration(text: str) -> float:
    """Seconds in ``text``: plain seconds or a unit suffix (``500ms``, ``15s``, ``2m``, ``1h``)."""
    match = _DURATION_RE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration (plain seconds or with ms, s, m, h: '500ms', '15s', '2m')"
        )
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def _add_master_flags(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    master = sub.add_parser("master", help="run the master daemon")
    master.add_argument("--port", type=int, default=5050)
    master.add_argument("--metrics-port", type=int, default=9100)
    master.add_argument("--work-dir", default="./fairshare-master")
    master.add_argument("--policy", choices=["drf", "asset", "pf", "slots"], default="drf")
    master.add_argument(
        "--placement", choices=["best-fit", "first-fit", "random"], default="best-fit"
    )
    master.add_argument("--allocation-interval", type=parse_duration, default=1.0)
    master.add_argument("--agent-timeout", type=parse_duration, default=15.0)


def _add_agent_flags(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    agent = sub.add_parser("agent", help="run an agent daemon")
    agent.add_argument("--master", required=True, metavar="HOST:PORT")
    agent.add_argument("--resources", help="e.g. 'cpus:8;mem:16384' (default: this host's)")
    agent.add_argument("--attributes", help="e.g. 'rack:r1;zone:a'")
    agent.add_argument("--port", type=int, default=0)
    agent.add_argument("--metrics-port", type=int, default=9101)
    agent.add_argument("--work-dir", default="./fairshare-agent")


def _add_client_flags(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = sub.add_parser("status", help="show cluster state")
    status.add_argument("--master", required=True, metavar="HOST:PORT")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    run = sub.add_parser("run", help="keep up to N placeholder tasks of a shape running")
    run.add_argument("--master", required=True, metavar="HOST:PORT")
    run.add_argument("--name", required=True)
    run.add_argument("--task", required=True, help="task shape, e.g. 'cpus:1;mem:4096'")
    run.add_argument("--count", type=int, default=1)
    run.add_argument("--duration", type=parse_duration)
    run.add_argument("--role", default="*")
    run.add_argument("--weight", type=float, default=1.0)
    up = sub.add_parser("up", help="run a master and N agents as local processes")
    up.add_argument("--agents", type=int, default=2)
    up.add_argument("--resources", default=None)
    simulate = sub.add_parser("simulate", help="trace-driven simulation")
    simulate.add_argument("scenario", metavar="SCENARIO.json")
    simulate.add_argument("--out", default="./fairshare-sim")


def _add_allocate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    allocate = sub.add_parser(
        "allocate",
        help="offline allocation calculator",
        description="Allocate a case file (DESIGN.md §4 format) and print the result as JSON.",
    )
    allocate.add_argument("case", metavar="CASE.json", help="case file, or - for stdin")
    allocate.add_argument("--policy", choices=["drf", "asset", "pf", "slots"])
    allocate.add_argument("--placement", choices=["best-fit", "first-fit", "random"])
    allocate.add_argument("--mode", choices=["tasks", "fluid"])


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="fairshare",
        description="A Mesos-style resource-offer manager with Dominant Resource Fairness.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_master_flags(sub)
    _add_agent_flags(sub)
    _add_client_flags(sub)
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
    except BrokenPipeError:  # the reader went away (`fairshare status | head`): not an error
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
