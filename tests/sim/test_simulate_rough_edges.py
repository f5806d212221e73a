"""``fairshare simulate`` for a newcomer (issue 16 items 6 and 7): a bad ``--out``, a case file
given as a scenario and Ctrl-C are one-line errors; the plots hide no series, are titled and
labelled by name; the summary says what ran, not only what completed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fairshare.cli import main

from analysis.sim.command import user_summary
from analysis.sim.output import pyplot
from analysis.sim.plots import draw_figure

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "examples" / "scenarios"


def test_out_that_cannot_be_used_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "results"
    a_file.write_text("")
    for out, says in ((a_file, "is not a directory"), (Path("/proc/forbidden"), "cannot create")):
        assert main(["simulate", str(SCENARIOS / "drf-table1.json"), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("fairshare simulate: --out: ") and says in err
        assert "Traceback" not in err


def test_a_case_file_names_its_unknown_key(capsys: pytest.CaptureFixture[str]) -> None:
    case = ROOT / "examples" / "cases" / "drf-table1.json"
    assert main(["simulate", str(case), "--out", "/tmp/unused-sim-out"]) == 2
    err = capsys.readouterr().err
    assert "unknown key" in err and "docs/cases.md" in err
    assert "no agents" not in err


def test_ctrl_c_ends_without_a_traceback(tmp_path: Path) -> None:
    sim = subprocess.Popen(
        [sys.executable, "-m", "fairshare.cli", "simulate", str(SCENARIOS / "drfh-table2.json"),
         "--out", str(tmp_path)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        try:
            sim.wait(3)  # well into the simulation (the whole run takes minutes)
        except subprocess.TimeoutExpired:
            sim.send_signal(signal.SIGINT)
        _, err = sim.communicate(timeout=60)
    finally:
        if sim.poll() is None:
            sim.kill()
            sim.communicate()
    assert sim.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err


def test_overlapping_series_stay_visible_titled_and_named(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    assert main(["simulate", str(SCENARIOS / "drf-table1.json"), "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "results.json").read_text())
    shares = result["series"]["dominant_share"]
    assert [v[-1] for v in shares.values()] == pytest.approx([2 / 3, 2 / 3])  # the same line
    plt = pyplot()
    fig = draw_figure(plt, result, "dominant_share", "global dominant share", "drf-table1")
    try:
        ax = fig.axes[0]
        lines = ax.get_lines()
        assert [line.get_label() for line in lines] == ["B", "A"]  # names, not fw-1-B
        assert len({line.get_linestyle() for line in lines}) == 2  # B is not hidden under A
        assert lines[0].get_linewidth() > lines[1].get_linewidth()  # the lower one is wider
        assert ax.get_ylim()[1] > 1.0  # a share of 1.0 is not drawn on the frame
        assert "drf-table1" in ax.get_title() and "policy drf" in ax.get_title()
    finally:
        plt.close(fig)


def test_the_summary_says_running_and_completed() -> None:
    user = {"id": "fw-1-B", "name": "B", "tasks_completed": 0, "tasks_running": 5}
    assert user_summary(user) == "B: 5 running, 0 completed"
