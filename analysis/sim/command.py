"""``fairshare simulate SCENARIO.json --out DIR``: run a scenario, write results (and plots).

Exit codes: 0 done; 2 the scenario cannot be read or is invalid (the message names the field),
or ``--out`` is not a directory that can be made and written (checked once the scenario is
read, before simulating: a bad scenario creates nothing); 1 the results
could not be written; 130 interrupted (Ctrl-C), without a traceback.
Writes ``DIR/results.json``; PNG plots only when matplotlib is importable (the optional
plotting extra), otherwise ``results.json`` says why there are none. Deterministic for a seed.
A scenario with ``variants`` runs each one (``analysis.sim.variants``: DRFH Table II, Fig. 5).
A progress bar goes to stderr when it is a terminal or with ``--progress``; it never changes
results. ``add_arguments`` and ``main`` are the command's entry in ``fairshare.cli``'s table;
``--out`` is a setting (``FAIRSHARE_SIMULATE_OUT``, ``out`` in the ``[simulate]`` TOML table).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fairshare.cli import command_settings
from fairshare.settings import SHARED_SETTINGS, Setting, add_setting_flags, non_empty_text

from analysis.sim.dynamic import run_dynamic_file
from analysis.sim.engine import ProgressCallback, results_document
from analysis.sim.output import pyplot, write_results
from analysis.sim.plots import draw_figure, plots_of
from analysis.sim.progress import ProgressBar, progress_wanted
from analysis.sim.scenario import Scenario, ScenarioError, parse_scenario
from analysis.sim.variants import run_variants

__all__ = ["SIMULATE_SETTINGS", "add_arguments", "load_scenario", "main", "simulate"]

EXIT_BAD_SCENARIO = 2
EXIT_INTERRUPTED = 130
SIMULATE_SETTINGS = (
    Setting(
        "out",
        non_empty_text,
        "./fairshare-sim",
        "directory for results.json and the PNG plots (created if missing)",
        metavar="DIR",
    ),
    *(setting for setting in SHARED_SETTINGS if setting.name != "master"),
)
"""The settings of ``fairshare simulate``."""


def load_scenario(path: str) -> Scenario:
    """Read and check a scenario file; raises ``ScenarioError`` (field ``file`` if unreadable)."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError("file", f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ScenarioError("file", f"{path} is not JSON: {exc}") from None
    return parse_scenario(raw)


def simulate(scenario: Scenario, progress: ProgressCallback | None = None) -> dict[str, Any]:
    """Run ``scenario`` and return the results document."""
    return results_document(scenario, progress)


def _plot(result: dict[str, Any], out: Path, title: str) -> list[str]:
    """Write PNG plots of shares and utilization; the caller checked matplotlib is there."""
    plt = pyplot()
    written = []
    for key, what, name in plots_of(result):
        fig = draw_figure(plt, result, key, what, title)
        fig.savefig(out / name, dpi=100)
        plt.close(fig)
        written.append(name)
    return written


def _writer(title: str, variants: bool = False) -> Callable[[dict[str, Any], Path], None]:
    """Write one run's results, the plots titled by the scenario (and variant) name."""

    def write(doc: dict[str, Any], out: Path) -> None:
        name = f"{title} / {out.name}" if variants else title
        write_results(doc, out, lambda directory: _plot(doc, directory, name))

    return write


def _out_problem(out: Path) -> str | None:
    """Why ``--out`` cannot receive the results (made if missing), or None."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return f"cannot create {out}: {error.strerror or error}"
    if not os.access(out, os.W_OK | os.X_OK):
        return f"cannot write into {out}"
    return None


def user_summary(user: dict[str, Any]) -> str:
    """``B: 2 tasks running, 0 completed`` (completed alone read as nothing ran)."""
    name = user.get("name", user["id"])
    return f"{name}: {user.get('tasks_running', 0)} running, {user['tasks_completed']} completed"


def _bars(enabled: bool) -> tuple[list[ProgressBar], Any]:
    """A factory of progress bars (``None`` when disabled) and the list of bars made."""
    made: list[ProgressBar] = []

    def bar_for(label: str) -> ProgressCallback | None:
        if not enabled:
            return None
        for previous in made:
            previous.close()
        made.clear()
        made.append(ProgressBar(label))
        return made[-1]

    return made, bar_for


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare simulate``."""
    parser.description = (
        "Run a scenario (examples/scenarios/) on the master's own core in simulated time and"
        " write the results as JSON, with PNG plots when matplotlib is installed."
    )
    parser.add_argument("scenario", metavar="SCENARIO.json", help="the scenario file")
    add_setting_flags(parser, SIMULATE_SETTINGS)
    parser.add_argument(
        "--progress",
        action="store_true",
        help="a progress bar on stderr (shown anyway when stderr is a terminal)",
    )


def main(args: argparse.Namespace) -> int:
    """``fairshare simulate``: run the scenario, write the results; the exit code (130 after
    Ctrl-C, 1 when the results cannot be written)."""
    out_dir: str = command_settings("simulate", SIMULATE_SETTINGS, args)["out"]
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        print(f"fairshare simulate: --out: {out_dir} is not a directory", file=sys.stderr)
        return EXIT_BAD_SCENARIO
    try:
        return _simulate(args, out_dir)
    except KeyboardInterrupt:
        print("\nfairshare simulate: interrupted; results not written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as error:
        print(f"fairshare simulate: cannot write the results: {error}", file=sys.stderr)
        return 1


def _simulate(args: argparse.Namespace, out_dir: str) -> int:
    dynamic_exit = run_dynamic_file(args.scenario, out_dir)  # "model": "dynamic" (B&R §3-4)
    if dynamic_exit is not None:
        return dynamic_exit
    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as exc:
        print(f"fairshare simulate: bad scenario: {exc}", file=sys.stderr)
        return EXIT_BAD_SCENARIO
    problem = _out_problem(Path(out_dir))  # before the work: a bad --out is said at once
    if problem is not None:
        print(f"fairshare simulate: --out: {problem}", file=sys.stderr)
        return EXIT_BAD_SCENARIO
    made, bar_for = _bars(progress_wanted(bool(getattr(args, "progress", False))))
    out = Path(out_dir)
    if scenario.variants:

        def report(line: str) -> None:
            for bar in made:
                bar.close()
            made.clear()
            print(line, flush=True)

        run_variants(scenario, out, _writer(Path(args.scenario).stem, True), bar_for, report)
        print(f"simulated {len(scenario.variants)} variants; wrote {out}")
        return 0
    doc = simulate(scenario, bar_for(Path(args.scenario).stem))
    for bar in made:
        bar.close()
    _writer(Path(args.scenario).stem)(doc, out)
    users = "; ".join(user_summary(u) for u in doc["users"][:10])
    more = f", … {len(doc['users']) - 10} more users" if len(doc["users"]) > 10 else ""
    print(
        f"simulated {doc['events']} events to t={doc['end_time']:.1f}s ({users}{more}); wrote {out}"
    )
    return 0
