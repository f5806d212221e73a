"""``fairshare simulate SCENARIO.json --out DIR``: run a scenario, write results (and plots).

Exit codes: 0 done; 2 the scenario cannot be read or is invalid (the message names the field).
Writes ``DIR/results.json``; PNG plots only when matplotlib is importable (the optional
plotting extra), otherwise ``results.json`` says why there are none. Deterministic for a seed.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from master.sim.engine import Simulator
from master.sim.scenario import Scenario, ScenarioError, parse_scenario

__all__ = ["load_scenario", "run_simulate", "simulate"]

EXIT_BAD_SCENARIO = 2


def load_scenario(path: str) -> Scenario:
    """Read and check a scenario file; raises ``ScenarioError`` (field ``file`` if unreadable)."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError("file", f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ScenarioError("file", f"{path} is not JSON: {exc}") from None
    return parse_scenario(raw)


def simulate(scenario: Scenario) -> dict[str, Any]:
    """Run ``scenario`` and return the results document."""
    result = Simulator(scenario).run()
    doc = {
        "seed": scenario.seed,
        "policy": scenario.policy,
        "placement": scenario.placement,
        "agents": len(scenario.agents) + scenario.mix_count,
    }
    doc.update(result.to_json())
    return doc


def _plot(result: dict[str, Any], out: Path) -> list[str]:
    """Write PNG plots of shares and utilization; the caller checked matplotlib is there."""
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")

    series = result["series"]
    written = []
    for key, title, name in (
        ("dominant_share", "global dominant share", "shares.png"),
        ("utilization", "utilization", "utilization.png"),
    ):
        fig, ax = plt.subplots(figsize=(8, 4))
        for label, values in series[key].items():
            points = [(t, v) for t, v in zip(series["time"], values, strict=True) if v is not None]
            ax.step([t for t, _ in points], [v for _, v in points], where="post", label=label)
        ax.set_xlabel("time (s)")
        ax.set_ylabel(title)
        ax.set_ylim(0, 1)
        ax.legend()
        fig.savefig(out / name, dpi=100)
        plt.close(fig)
        written.append(name)
    return written


def _write(doc: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    if importlib.util.find_spec("matplotlib") is None:
        doc["plots"] = []
        doc["plots_skipped"] = (
            "matplotlib is not installed (optional extra: pip install -e .[numeric])"
        )
    else:
        doc["plots"] = _plot(doc, out)
    (out / "results.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def run_simulate(args: argparse.Namespace) -> int:
    """The ``simulate`` subcommand."""
    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as exc:
        print(f"fairshare simulate: bad scenario: {exc}", file=sys.stderr)
        return EXIT_BAD_SCENARIO
    doc = simulate(scenario)
    out = Path(args.out)
    _write(doc, out)
    users = ", ".join(f"{u['id']}: {u['tasks_completed']} tasks" for u in doc["users"])
    print(f"simulated {doc['events']} events to t={doc['end_time']:.1f}s ({users}); wrote {out}")
    return 0
