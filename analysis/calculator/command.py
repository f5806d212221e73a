"""``fairshare allocate CASE.json``: print the allocation of a case file as JSON (docs/cases.md).

The case is read by ``analysis.calculator.case`` and allocated by
``analysis.calculator.allocation`` (the master's own core in ``tasks`` mode, the papers' closed
forms in ``fluid`` mode, Static H-DRF over a role tree).
``--policy``, ``--placement``, ``--mode`` and ``--hierarchy`` override the case file's values;
they are not settings (no variable or TOML key), so a case file alone always gives the same
answer.

Invariants: a case that cannot be read or allocated exits 2 with ``fairshare allocate: FILE:
<message naming the field>`` on stderr and nothing on stdout; success prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Final

from fairshare.cli import command_settings
from fairshare.settings import SHARED_SETTINGS, add_setting_flags

from analysis.calculator import MODES, POLICIES, CaseError, allocate, load_case_text, parse_case
from master.core.hierarchy import HIERARCHIES
from master.core.placement import PLACEMENT_POLICIES

__all__ = ["ALLOCATE_SETTINGS", "add_arguments", "main"]

EXIT_BAD_INPUT: Final = 2
ALLOCATE_SETTINGS: Final = tuple(s for s in SHARED_SETTINGS if s.name != "master")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare allocate``."""
    parser.description = (
        "Allocate a case file (format: one pool 'resources' or heterogeneous"
        " 'agents', and 'frameworks' with a task shape and optional role; docs/cases.md) and"
        " print the result as JSON."
    )
    parser.add_argument("case", metavar="CASE.json", help="case file, or - for stdin")
    parser.add_argument(
        "--policy",
        choices=POLICIES,
        help="fairness policy (default: the case's, else drf; ceei in fluid mode only)",
    )
    parser.add_argument(
        "--placement",
        choices=sorted(PLACEMENT_POLICIES),
        help="placement across agents (default: the case's, else best-fit)",
    )
    parser.add_argument(
        "--mode",
        choices=list(MODES),
        help="whole tasks placed by the master's core, or the papers' divisible-task"
        " solutions (default: the case's, else tasks)",
    )
    parser.add_argument(
        "--hierarchy",
        choices=list(HIERARCHIES),
        help="how frameworks' roles are used: H-DRF over the role tree, Mesos's naive"
        " hierarchical DRF, or no tree (default: the case's, else hdrf under drf, flat"
        " otherwise)",
    )
    add_setting_flags(parser, ALLOCATE_SETTINGS)


def main(args: argparse.Namespace) -> int:
    """``fairshare allocate``: print the allocation of a case file as JSON."""
    command_settings("allocate", ALLOCATE_SETTINGS, args)
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
        case = parse_case(
            load_case_text(text, source), args.policy, args.placement, args.mode, args.hierarchy
        )
        result = allocate(case)
    except CaseError as error:
        print(f"fairshare allocate: {source}: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(json.dumps(result, indent=2))
    return 0
