"""Benchmark of the simulator (``analysis.sim``). Prints figures; asserts nothing about time.

Run: ``.venv/bin/python tests/bench/bench_sim.py`` (``--quick`` skips the whole 2,000-server
experiment, which takes minutes; ``--runs N`` sets the repetitions of the events/s runs).

1. Events per second (median of ``--runs`` runs) on large scenarios: the first hour of the
   DRFH Table II experiment with Best-Fit DRFH (2,000 servers, 100 users, synthetic Google-like
   workload, ``examples/scenarios/drfh-table2.json``) and the DRFH Fig. 4 run (100 servers).
   An event is a user joining or leaving, a job submission, an offer made by the core, a task
   launch or a task finish (``analysis.sim.engine``); allocation runs are not counted.
2. Wall time of the whole 2,000-server experiment: every variant of ``drfh-table2.json``
   (Slots at 10/12/14/16/20, First-Fit and Best-Fit DRFH), as ``fairshare simulate`` runs it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from analysis.sim.engine import Simulator
from analysis.sim.scenario import Scenario, parse_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "scenarios"


def _load(name: str, **changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((SCENARIOS / name).read_text())
    raw.update(changes)
    return raw


def _events_per_second(scenario: Scenario, runs: int) -> tuple[float, int, float]:
    rates = []
    events = 0
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        result = Simulator(scenario).run()
        elapsed = time.perf_counter() - started
        events = result.events
        seconds.append(elapsed)
        rates.append(events / elapsed)
    return statistics.median(rates), events, statistics.median(seconds)


def bench_events(runs: int) -> None:
    """Events/s on the first simulated hour of Table II (Best-Fit) and on Fig. 4."""
    table2 = parse_scenario(_load("drfh-table2.json", until=3600))
    best_fit = dict(table2.variants)["best-fit"]
    cases = [
        ("Table II best-fit, 2,000 servers, first hour", best_fit),
        ("DRFH Fig. 4, 100 servers", parse_scenario(_load("drfh-fig4.json"))),
    ]
    for label, scenario in cases:
        rate, events, seconds = _events_per_second(scenario, runs)
        print(f"{label}: {events:,} events, median {seconds:.2f} s, {rate:,.0f} events/s")


def bench_experiment() -> None:
    """Wall time of every variant of the 2,000-server Table II experiment."""
    scenario = parse_scenario(_load("drfh-table2.json"))
    total = 0.0
    for name, variant in scenario.variants:
        started = time.perf_counter()
        result = Simulator(variant).run()
        elapsed = time.perf_counter() - started
        total += elapsed
        used = result.mean_utilization
        print(
            f"  {name}: {elapsed:.1f} s, {result.events:,} events"
            f" ({result.events / elapsed:,.0f}/s), CPU {used['cpus']:.1%}, memory {used['mem']:.1%}"
        )
    print(f"2,000-server Table II experiment ({len(scenario.variants)} variants): {total:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the whole experiment")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    bench_events(args.runs)
    if not args.quick:
        bench_experiment()


if __name__ == "__main__":
    main()
