"""``fairshare simulate``: results written, determinism, bad scenarios (exit 2 naming the field).

Run in-process through ``fairshare.cli.main`` and, for the contract a user sees, as a real
subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fairshare import cli

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "examples" / "scenarios"


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_simulate_writes_results(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "sim"
    code, stdout, err = run_main(
        capsys, "simulate", str(SCENARIOS / "drfh-fig3.json"), "--out", str(out)
    )
    assert (code, err) == (0, "")
    assert str(out) in stdout
    results = json.loads((out / "results.json").read_text())
    assert {u["id"]: u["tasks_running"] for u in results["users"]} == {"user-1": 10, "user-2": 10}
    if results["plots"]:
        assert all((out / name).is_file() for name in results["plots"])
    else:
        assert "matplotlib" in results["plots_skipped"]


def test_simulate_is_deterministic(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scenario = str(SCENARIOS / "erlang-jobs.json")
    for name in ("a", "b"):
        assert run_main(capsys, "simulate", scenario, "--out", str(tmp_path / name))[0] == 0
    first = (tmp_path / "a" / "results.json").read_text()
    assert first == (tmp_path / "b" / "results.json").read_text()


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ('{"users": []}', "agents"),
        ('{"agents": [{"resources": {"cpus": 1}}], "users": [{"task": {"cpus": 1}}]}', "tasks"),
        ("not json", "file"),
    ],
)
def test_simulate_bad_scenario_exits_2_naming_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, field: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    code, out, err = run_main(capsys, "simulate", str(path), "--out", str(tmp_path / "o"))
    assert (code, out) == (2, "")
    assert err.startswith("fairshare simulate: bad scenario: ")
    assert field in err
    assert not (tmp_path / "o").exists()


def test_simulate_missing_scenario_subprocess(tmp_path: Path) -> None:
    done = run_cli("simulate", str(tmp_path / "missing.json"), "--out", str(tmp_path / "o"))
    assert done.returncode == 2
    assert done.stdout == ""
    assert "missing.json" in done.stderr
    assert "Traceback" not in done.stderr
