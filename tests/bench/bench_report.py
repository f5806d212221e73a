"""Figures and the printed table of the live benchmark (``bench_live.py``).

- ``Results``: the table's rows (figure, measured, goal, verdict), details printed as they come,
  notes (a figure that could only be reported in part) and problems (the run failed);
- ``latencies``: offer latencies from the stamps the framework processes recorded;
- ``print_table``: the report, with the command line and the machine.
"""

from __future__ import annotations

import argparse
import os
import platform
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Results", "latencies", "mib", "print_table", "quantile", "verdict"]


@dataclass
class Results:
    """Figures and details gathered by the phases."""

    rows: list[tuple[str, str, str, str]] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    saturated: float | None = None

    def row(self, figure: str, measured: str, goal: str, verdict: str) -> None:
        self.rows.append((figure, measured, goal, verdict))

    def note(self, text: str) -> None:
        self.details.append(text)
        print(f"  {text}", flush=True)


def verdict(value: float, goal: float, higher_is_better: bool) -> str:
    met = value >= goal if higher_is_better else value <= goal
    return "met" if met else "MISSED"


def quantile(ordered: list[float], q: float) -> float:
    """Nearest-rank quantile of a sorted list."""
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB"


def latencies(collected: list[dict[str, Any]]) -> tuple[list[float], list[float], int]:
    """(from Decline issued, from Decline returned, unmatched releases), sorted, in seconds."""
    arrivals: dict[str, list[float]] = {}
    for part in collected:
        for key, stamp in part["arrivals"]:
            arrivals.setdefault(key, []).append(stamp)
    for stamps in arrivals.values():
        stamps.sort()
    from_issue, from_return, unmatched = [], [], 0
    for part in collected:
        for key, issued, returned in part["releases"]:
            stamps = arrivals.get(key, [])
            index = bisect_right(stamps, issued)
            if index == len(stamps):
                unmatched += 1
                continue
            from_issue.append(stamps[index] - issued)
            from_return.append(stamps[index] - returned)
    from_issue += [float("inf")] * unmatched
    from_return += [float("inf")] * unmatched
    return sorted(from_issue), sorted(from_return), unmatched


def print_table(args: argparse.Namespace, results: Results, command: str, took: float) -> None:
    width = max(len(row[0]) for row in results.rows) if results.rows else 40
    measured_width = max([len(row[1]) for row in results.rows] + [8])
    print()
    print("fairshare live benchmark (issue 3): real master, simulated agents and frameworks")
    print(f"command: {command}")
    if args.quick:
        print("(--quick smoke pass: small numbers, not the benchmark's figures)")
    print(
        f"machine: {os.cpu_count()} CPUs, Python {platform.python_version()},"
        f" {platform.system()} {platform.release()}; run took {took:.0f} s"
    )
    print(
        f"setup: {args.agents:,} agents ({args.agent_resources}) in {args.agent_procs} processes,"
        f" {args.frameworks} frameworks in {args.framework_procs} processes,"
        f" allocation interval {args.allocation_interval}, master log level"
        f" {args.master_log_level}; windows {args.repeats} x {args.window:g} s (median)"
    )
    print()
    print(f"{'figure':<{width}}  {'measured':<{measured_width}}  {'goal':<14}  verdict")
    print(f"{'-' * width}  {'-' * measured_width}  {'-' * 14}  -------")
    for figure, measured, goal, mark in results.rows:
        print(f"{figure:<{width}}  {measured:<{measured_width}}  {goal:<14}  {mark}")
    if results.warnings:
        print("\nnotes:")
        for warning in results.warnings:
            print(f"  - {warning}")
    if results.failures:
        print("\nproblems:")
        for failure in results.failures:
            print(f"  - {failure}")
