"""Scenarios with ``variants``: one run per variant, a comparison table and plots (DRFH Table II).

``fairshare simulate examples/scenarios/drfh-table2.json --out DIR`` runs every variant of the
scenario (e.g. Slots at 10/12/14/16/20 slots per maximum server, First-Fit and Best-Fit DRFH on
the same servers and workload, DRFH §VI) and writes:

- ``DIR/<variant>/results.json`` (+ that run's PNGs): the full results of each variant;
- ``DIR/results.json``: the comparison (per variant: mean CPU and memory utilization, Table II;
  job completion summary; each user's mean running tasks; events) and the paper's Table II
  numbers for the slot sizes it lists;
- ``DIR/table2.md``: the same table in Markdown;
- ``DIR/utilization.png`` (Fig. 5: CPU and memory utilization over time, one line per variant)
  and ``DIR/jct_cdf.png`` (the CDF of job completion times, as in DRFH Fig. 6a), only when
  matplotlib is importable;
- when users sit in roles: each variant's ``hierarchy`` and per-role time averages in the
  comparison (with a role's quota and when its guarantee was met, if it has one),
  ``DIR/roles.md`` (each role's mean share of each resource per variant) and
  ``DIR/roles.png`` (each variant's roles' dominant shares over time, two panels a row).

Invariants: every file but the stdout report is a deterministic function of the scenario (wall
times are only printed); variants are run in the order listed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from analysis.sim.engine import ProgressCallback, results_document
from analysis.sim.output import pyplot, write_results
from analysis.sim.plots import draw_roles_grid
from analysis.sim.scenario import Scenario

__all__ = ["PAPER_TABLE2", "roles_markdown", "run_variants", "summary_row", "table_markdown"]

# DRFH Table II: slots per maximum server -> (CPU %, memory %) of the Slots scheduler.
PAPER_TABLE2: dict[int, tuple[float, float]] = {
    10: (35.1, 23.4),
    12: (42.2, 27.4),
    14: (43.9, 28.0),
    16: (45.4, 24.2),
    20: (40.6, 20.0),
}

QUOTA_KEYS = ("guarantee", "limit", "quota_at", "guarantee_met_at")  # roles with a quota
Writer = Callable[[dict[str, Any], Path], None]
ProgressFactory = Callable[[str], ProgressCallback | None]


def summary_row(name: str, scenario: Scenario, doc: dict[str, Any]) -> dict[str, Any]:
    """One variant's line of the comparison (Table II plus job completion times)."""
    jobs = {key: value for key, value in doc["jobs"].items() if key != "cdf"}
    row: dict[str, Any] = {
        "name": name,
        "policy": scenario.policy,
        "placement": scenario.placement,
        "slots_per_agent": scenario.slots_per_agent if scenario.policy == "slots" else None,
        "mean_utilization": doc["mean_utilization"],
        "jobs": jobs,
        "tasks_completed": sum(user["tasks_completed"] for user in doc["users"]),
        "mean_running": {user["id"]: user["mean_running"] for user in doc["users"]},
        "events": doc["events"],
    }
    paper = PAPER_TABLE2.get(scenario.slots_per_agent) if scenario.policy == "slots" else None
    row["paper_utilization"] = (
        None if paper is None else {"cpus": paper[0] / 100, "mem": paper[1] / 100}
    )
    if "roles" in doc:
        row["hierarchy"] = doc["hierarchy"]
        row["roles"] = {
            role["path"]: {
                "mean_held": role["mean_held"],
                "mean_dominant_share": role["mean_dominant_share"],
                **{key: role[key] for key in QUOTA_KEYS if key in role},
            }
            for role in doc["roles"]
        }
    return row


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def table_markdown(rows: list[dict[str, Any]]) -> str:
    """The comparison as a Markdown table."""
    lines = [
        "| variant | CPU util. | memory util. | paper CPU | paper memory | jobs done |"
        " JCT median (s) | JCT p90 (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        used = row["mean_utilization"]
        paper = row["paper_utilization"] or {}
        jobs = row["jobs"]
        lines.append(
            f"| {row['name']} | {_percent(used.get('cpus'))} | {_percent(used.get('mem'))} |"
            f" {_percent(paper.get('cpus'))} | {_percent(paper.get('mem'))} |"
            f" {jobs['completed']}/{jobs['submitted']} | {_seconds(jobs['p50'])} |"
            f" {_seconds(jobs['p90'])} |"
        )
    return "\n".join(lines) + "\n"


def roles_markdown(rows: list[dict[str, Any]]) -> str:
    """Each role's time-averaged share of each resource, one line per variant and role."""
    lines = ["| variant | hierarchy | role | mean share held |", "|---|---|---|---|"]
    for row in rows:
        for path, role in row.get("roles", {}).items():
            held = ", ".join(
                f"{name} {_percent(value)}" for name, value in role["mean_held"].items() if value
            )
            lines.append(f"| {row['name']} | {row['hierarchy']} | {path} | {held or '-'} |")
    return "\n".join(lines) + "\n"


def _plot(docs: dict[str, dict[str, Any]], out: Path) -> list[str]:
    """Fig. 5 (utilization over time per variant) and the JCT CDF; matplotlib is there."""
    plt = pyplot()
    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for ax, resource, title in ((axes[0], "cpus", "CPU"), (axes[1], "mem", "memory")):
        for name, doc in docs.items():
            series = doc["series"]
            hours = [t / 3600 for t in series["time"]]
            ax.plot(hours, series["utilization"].get(resource, []), label=name)
        ax.set_ylabel(f"{title} utilization")
        ax.set_ylim(0, 1)
    axes[1].set_xlabel("time (h)")
    axes[0].legend(fontsize="small", ncol=4)
    fig.savefig(out / "utilization.png", dpi=100)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, doc in docs.items():
        cdf = doc["jobs"]["cdf"]
        ax.step([p[0] for p in cdf], [p[1] for p in cdf], where="post", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (s)")
    ax.set_ylabel("CDF (completed jobs)")
    ax.legend(fontsize="small")
    fig.savefig(out / "jct_cdf.png", dpi=100)
    plt.close(fig)
    written = ["utilization.png", "jct_cdf.png"]
    if any("roles" in doc for doc in docs.values()):
        fig = draw_roles_grid(plt, docs, "each role's dominant share over time")
        fig.savefig(out / "roles.png", dpi=100)
        plt.close(fig)
        written.append("roles.png")
    return written


def run_variants(
    scenario: Scenario,
    out: Path,
    write: Writer,
    progress_for: ProgressFactory = lambda name: None,
    report: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run each variant, write its results with ``write`` and the comparison files."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    docs: dict[str, dict[str, Any]] = {}
    for name, variant in scenario.variants:
        started = time.perf_counter()
        doc = results_document(variant, progress_for(name))
        seconds = time.perf_counter() - started
        write(doc, out / name)
        row = summary_row(name, variant, doc)
        rows.append(row)
        docs[name] = doc
        used = row["mean_utilization"]
        report(
            f"{name}: CPU {_percent(used.get('cpus'))}, memory {_percent(used.get('mem'))},"
            f" jobs {row['jobs']['completed']}/{row['jobs']['submitted']},"
            f" {doc['events']} events in {seconds:.1f}s"
            f" ({doc['events'] / max(seconds, 1e-9):,.0f} events/s)"
        )
    summary: dict[str, Any] = {"seed": scenario.seed, "variants": rows}
    (out / "table2.md").write_text(table_markdown(rows), encoding="utf-8")
    if any("roles" in row for row in rows):
        (out / "roles.md").write_text(roles_markdown(rows), encoding="utf-8")
    write_results(summary, out, lambda directory: _plot(docs, directory))
    return summary
