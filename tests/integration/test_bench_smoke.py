"""Smoke test of the live load benchmark (``tests/bench/bench_live.py --quick``).

It runs the benchmark's quick pass (a real master, simulated agents and frameworks in separate
processes on 127.0.0.1, under a minute) and checks only that it exits 0 and prints its table:
never a figure or a time (docs/architecture.md §11: benchmarks are not timed assertions).
The benchmark
itself fails (exit 1) when a phase breaks, the master exits non-zero after SIGTERM or logs an
internal error.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tests" / "bench" / "bench_live.py"
TIMEOUT = 240.0
HEADINGS = (
    "fairshare live benchmark",
    "figure",
    "measured",
    "goal",
    "offers delivered per second (saturated)",
    "offer latency p50 at",
    "offer latency p99 at",
    "task launches per second to RUNNING + acked",
    "offers delivered per second (saturated), Mesos HTTP API",
    "task launches per second to RUNNING + acked, Mesos HTTP API",
    "master RSS at 100 connected agents",
    "master RSS at 300 connected agents",
)


@pytest.mark.bench
def test_quick_benchmark_runs_and_prints_its_table() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRSHARE_")}
    proc = subprocess.Popen(
        [sys.executable, str(BENCH), "--quick"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the benchmark stops its processes on SIGTERM
        try:
            output, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
        pytest.fail(f"the quick benchmark took over {TIMEOUT:g}s:\n{output[-4000:]}")
    assert proc.returncode == 0, output[-4000:]
    for heading in HEADINGS:
        assert heading in output, f"missing {heading!r} in:\n{output[-4000:]}"
