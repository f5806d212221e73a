"""DRFH Table II / Fig. 5 on a scaled-down cluster: utilization Best-Fit >= First-Fit > Slots.

``examples/scenarios/drfh-table2-small.json`` is ``drfh-table2.json`` (2,000 servers, 24 h)
cut to 40 servers, 12 users and 40 minutes (same generator, seed 1), so all seven variants run
in a couple of seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analysis.sim.engine import results_document
from analysis.sim.scenario import parse_scenario
from analysis.sim.variants import run_variants, table_markdown

SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "scenarios"
SLOTS = ("slots-10", "slots-12", "slots-14", "slots-16", "slots-20")


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, Any]]:
    raw = json.loads((SCENARIOS / "drfh-table2-small.json").read_text())
    scenario = parse_scenario(raw)
    return {name: results_document(variant) for name, variant in scenario.variants}


def utilization(doc: dict[str, Any]) -> tuple[float, float]:
    used = doc["mean_utilization"]
    return used["cpus"], used["mem"]


def test_best_fit_at_least_first_fit_and_both_above_every_slot_size(
    runs: dict[str, dict[str, Any]],
) -> None:
    best_cpu, best_mem = utilization(runs["best-fit"])
    first_cpu, first_mem = utilization(runs["first-fit"])
    assert best_cpu >= first_cpu
    assert best_mem >= first_mem
    for name in SLOTS:
        slot_cpu, slot_mem = utilization(runs[name])
        # DRFH uses the cluster far better than slots (paper: Fig. 5, Table II).
        assert first_cpu > slot_cpu + 0.2, name
        assert first_mem > slot_mem + 0.2, name
    # the cluster is overloaded: DRFH keeps it busy
    assert min(best_cpu, best_mem) > 0.7


def test_the_variants_share_servers_and_workload(runs: dict[str, dict[str, Any]]) -> None:
    totals = {json.dumps(doc["total"]) for doc in runs.values()}
    submitted = {doc["jobs"]["submitted"] for doc in runs.values()}
    assert len(totals) == 1
    assert len(submitted) == 1
    assert runs["slots-14"]["slots_per_agent"] == 14
    assert runs["best-fit"]["placement"] == "best-fit"


def test_job_completion_times_are_consistent(runs: dict[str, dict[str, Any]]) -> None:
    for name, doc in runs.items():
        jobs = doc["jobs"]
        assert 0 < jobs["completed"] < jobs["submitted"], name  # overloaded: some never end
        cdf = jobs["cdf"]
        times = [point[0] for point in cdf]
        fractions = [point[1] for point in cdf]
        assert times == sorted(times)
        assert fractions == sorted(fractions) and fractions[-1] == 1.0
        assert times[-1] == jobs["max"]
        assert 0 < jobs["p50"] <= jobs["p90"] <= jobs["p99"] <= jobs["max"] <= doc["end_time"]
        assert min(times) <= jobs["mean"] <= jobs["max"]
        finished_tasks = sum(user["tasks_completed"] for user in doc["users"])
        assert doc["event_counts"]["finishes"] == finished_tasks
    # more capacity used, more jobs done: DRFH completes more jobs than any slot size
    done = {name: doc["jobs"]["completed"] for name, doc in runs.items()}
    assert min(done["best-fit"], done["first-fit"]) > max(done[name] for name in SLOTS)


def test_utilization_series_stay_within_the_pool(runs: dict[str, dict[str, Any]]) -> None:
    for doc in runs.values():
        for series in doc["series"]["utilization"].values():
            assert all(0.0 <= value <= 1.0 for value in series)


def test_run_variants_writes_table_and_per_variant_results(tmp_path: Path) -> None:
    raw = json.loads((SCENARIOS / "drfh-table2-small.json").read_text())
    raw["variants"] = [v for v in raw["variants"] if v["name"] in ("slots-14", "best-fit")]
    raw["until"] = 600
    written: list[Path] = []
    lines: list[str] = []

    def write(doc: dict[str, Any], path: Path) -> None:
        path.mkdir(parents=True)
        (path / "results.json").write_text(json.dumps(doc))
        written.append(path)

    summary = run_variants(parse_scenario(raw), tmp_path, write, report=lines.append)
    assert [path.name for path in written] == ["slots-14", "best-fit"]
    rows = summary["variants"]
    assert [row["name"] for row in rows] == ["slots-14", "best-fit"]
    assert rows[0]["paper_utilization"] == {"cpus": 0.439, "mem": 0.28}
    assert rows[1]["paper_utilization"] is None
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["variants"] == rows
    table = (tmp_path / "table2.md").read_text()
    assert table == table_markdown(rows)
    assert "| slots-14 |" in table and "43.9%" in table
    assert len(lines) == 2 and lines[0].startswith("slots-14: CPU ")
