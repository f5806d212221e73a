"""Smoke test of the command-task benchmark (``tests/bench/bench_exec.py --quick``): it exits 0
and prints its table; never a figure or a time (docs/architecture.md §11).
The benchmark itself exits 1
when a task does not finish, and stops every process it started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tests" / "bench" / "bench_exec.py"
HEADINGS = ("fairshare command-task benchmark", "launches/s", "placeholder", "command",
            "one idle supervisor")  # fmt: skip


@pytest.mark.bench
def test_quick_command_benchmark_runs_and_prints_its_table() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRSHARE_")}
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    for heading in HEADINGS:
        assert heading in done.stdout, f"missing {heading!r} in:\n{output[-4000:]}"
