"""The simulator's PNG plots (matplotlib is in the test extras): each kind of run draws its
figures, and results.json lists them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fairshare.cli import main

SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "scenarios"
PNG = b"\x89PNG\r\n\x1a\n"


def simulate(scenario: Path, out: Path) -> dict[str, object]:
    assert main(["simulate", str(scenario), "--out", str(out)]) == 0
    document: dict[str, object] = json.loads((out / "results.json").read_text())
    return document


def assert_pngs(out: Path, names: list[str]) -> None:
    for name in names:
        data = (out / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 5_000, name


def test_a_users_scenario_plots_shares_and_utilization(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    document = simulate(SCENARIOS / "drfh-fig3.json", tmp_path)
    assert document["plots"] == ["shares.png", "utilization.png"]
    assert_pngs(tmp_path, ["shares.png", "utilization.png"])


def test_variants_plot_fig5_and_the_jct_cdf(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    document = simulate(SCENARIOS / "drfh-table2-small.json", tmp_path)
    assert document["plots"] in (
        ["utilization.png", "jct_cdf.png"],
        ["jct_cdf.png", "utilization.png"],
    )
    assert_pngs(tmp_path, ["jct_cdf.png", "utilization.png"])


def test_a_load_sweep_plots_service_rates(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    raw = json.loads((SCENARIOS / "br-fig1-unbalanced.json").read_text())
    raw.update(jobs=600, warmup_jobs=60)
    raw["sweep"]["loads"] = [0.3, 0.6]
    scenario = tmp_path / "sweep.json"
    scenario.write_text(json.dumps(raw))
    document = simulate(scenario, tmp_path / "out")
    assert document["plots"] == ["service_rate.png"]
    assert_pngs(tmp_path / "out", ["service_rate.png"])
