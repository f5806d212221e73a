"""``fairshare allocate``: the example cases, bad input, the contract.

Run in-process through ``fairshare.cli.main`` (fast, with ``capsys``) and, for the contract that
a user sees (exit codes, stdout/stderr, no traceback), as a real subprocess.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from fairshare import cli

ROOT = Path(__file__).resolve().parents[3]
CASES = ROOT / "examples" / "cases"
DRF_TABLE1 = str(CASES / "drf-table1.json")
DRFH_FIG1 = str(CASES / "drfh-fig1.json")
ASSET_THEOREM1 = str(CASES / "asset-theorem1.json")
WEIGHTED_CAPPED = str(CASES / "weighted-capped.json")


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def allocate_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run_main(capsys, "allocate", *argv)
    assert (code, err) == (0, "")
    return json.loads(out)


def by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in result["frameworks"]}


def run_cli(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *argv],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def write_case(tmp_path: Path, case: object, name: str = "case.json") -> str:
    path = tmp_path / name
    path.write_text(case if isinstance(case, str) else json.dumps(case), encoding="utf-8")
    return str(path)


GOOD_FRAMEWORKS = [
    {"name": "A", "task": {"cpus": 1, "mem": 4}},
    {"name": "B", "task": {"cpus": 3, "mem": 1}},
]


# -- allocate, tasks mode --------------------------------------------------------------------------


def test_allocate_drf_table1(capsys: pytest.CaptureFixture[str]) -> None:
    result = allocate_json(capsys, DRF_TABLE1)
    rows = by_name(result)
    assert [row["name"] for row in result["frameworks"]] == ["A", "B"]
    assert rows["A"]["tasks"] == 3
    assert rows["B"]["tasks"] == 2
    assert rows["A"]["dominant_share"] == rows["B"]["dominant_share"] == 2 / 3
    assert rows["A"]["allocated"] == {"cpus": 3.0, "mem": 12.0}
    assert rows["B"]["allocated"] == {"cpus": 6.0, "mem": 2.0}
    assert rows["A"]["per_agent"] == {"pool": 3}
    assert result["utilization"] == {"cpus": 1.0, "mem": 14 / 18}
    assert (result["policy"], result["mode"], result["placement"]) == ("drf", "tasks", "best-fit")


def test_allocate_drfh_fig1_best_fit(capsys: pytest.CaptureFixture[str]) -> None:
    rows = by_name(allocate_json(capsys, DRFH_FIG1))
    assert rows["user1"]["tasks"] == rows["user2"]["tasks"] == 10
    assert rows["user1"]["per_agent"] == {"s1": 10}
    assert rows["user2"]["per_agent"] == {"s2": 10}
    assert rows["user1"]["dominant_share"] == pytest.approx(5 / 7, abs=1e-12)
    assert rows["user2"]["dominant_share"] == pytest.approx(5 / 7, abs=1e-12)


def test_placement_flag_wins_over_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    result = allocate_json(capsys, DRFH_FIG1, "--placement", "first-fit")
    rows = by_name(result)
    assert rows["user1"]["tasks"] == rows["user2"]["tasks"] == 6
    assert rows["user1"]["per_agent"] == {"s1": 5, "s2": 1}
    assert rows["user2"]["per_agent"] == {"s1": 1, "s2": 5}
    assert result["placement"] == "first-fit"


def test_policy_flag_asset_on_theorem1(capsys: pytest.CaptureFixture[str]) -> None:
    result = allocate_json(capsys, ASSET_THEOREM1, "--policy", "asset")
    rows = by_name(result)
    assert (rows["user1"]["tasks"], rows["user2"]["tasks"]) == (6, 12)
    assert result["policy"] == "asset"
    assert result["utilization"] == {"cpus": 0.6, "mem": 1.0}


def test_policy_flag_wins_over_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    rows = by_name(allocate_json(capsys, ASSET_THEOREM1, "--policy", "drf"))
    assert (rows["user1"]["tasks"], rows["user2"]["tasks"]) == (5, 15)


def test_weighted_capped_example(capsys: pytest.CaptureFixture[str]) -> None:
    rows = by_name(allocate_json(capsys, WEIGHTED_CAPPED))
    assert rows["web"]["tasks"] == 10  # max_tasks
    assert rows["analytics"]["tasks"] > rows["training"]["tasks"]
    used_cpus = (
        2 * rows["analytics"]["tasks"] + rows["web"]["tasks"] + 4 * rows["training"]["tasks"]
    )
    assert used_cpus <= 64
    assert rows["training"]["allocated"]["gpus"] == rows["training"]["tasks"]


def test_allocate_reads_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(Path(DRF_TABLE1).read_text(encoding="utf-8")))
    rows = by_name(allocate_json(capsys, "-"))
    assert (rows["A"]["tasks"], rows["B"]["tasks"]) == (3, 2)


def test_allocate_resources_as_text_and_max_tasks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    case = {
        "resources": "cpus:9;mem:18",
        "frameworks": [
            {"name": "A", "task": "cpus:1;mem:4", "max_tasks": 1},
            {"name": "B", "task": {"cpus": 3, "mem": 1}},
        ],
    }
    result = allocate_json(capsys, write_case(tmp_path, case))
    rows = by_name(result)
    assert rows["A"]["tasks"] == 1  # capped (3 without the cap)
    assert rows["B"]["tasks"] == 2  # a third B task needs 3 cpus, 2 are left
    assert result["utilization"] == {"cpus": 7 / 9, "mem": 6 / 18}


def test_same_case_same_output(capsys: pytest.CaptureFixture[str]) -> None:
    first = run_main(capsys, "allocate", DRFH_FIG1, "--placement", "random")
    second = run_main(capsys, "allocate", DRFH_FIG1, "--placement", "random")
    assert first == second
    assert first[0] == 0


def test_allocate_subprocess_prints_json(tmp_path: Path) -> None:
    done = run_cli("allocate", "examples/cases/drf-table1.json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    rows = by_name(json.loads(done.stdout))
    assert (rows["A"]["tasks"], rows["B"]["tasks"]) == (3, 2)
    assert rows["A"]["dominant_share"] == rows["B"]["dominant_share"] == 2 / 3


# -- bad input: exit 2, the field named on stderr, nothing on stdout -------------------------------


BAD_CASES: list[tuple[str, object, list[str]]] = [
    ("invalid JSON", '{"resources": {"cpus": 9}', ["not valid JSON"]),
    ("empty file", "", ["not valid JSON"]),
    ("not an object", "[1, 2]", ["expected a JSON object"]),
    (
        "both resources and agents",
        {
            "resources": {"cpus": 9},
            "agents": [{"id": "s1", "resources": {"cpus": 1}}],
            "frameworks": GOOD_FRAMEWORKS,
        },
        ["resources", "agents"],
    ),
    ("neither resources nor agents", {"frameworks": GOOD_FRAMEWORKS}, ["resources", "agents"]),
    ("empty frameworks", {"resources": {"cpus": 9, "mem": 18}, "frameworks": []}, ["frameworks"]),
    ("missing frameworks", {"resources": {"cpus": 9, "mem": 18}}, ["frameworks"]),
    (
        "negative quantity",
        {
            "resources": {"cpus": 9, "mem": 18},
            "frameworks": [{"name": "A", "task": {"cpus": -1, "mem": 4}}],
        },
        ["frameworks[0].task", "'cpus'", "negative"],
    ),
    (
        "NaN quantity",
        '{"resources": {"cpus": 9, "mem": 18},'
        ' "frameworks": [{"name": "A", "task": {"cpus": NaN}}]}',
        ["frameworks[0].task", "'cpus'", "NaN"],
    ),
    (
        "infinite pool",
        '{"resources": {"cpus": Infinity}, "frameworks": [{"name": "A", "task": {"cpus": 1}}]}',
        ["resources", "'cpus'", "infinite"],
    ),
    (
        "garbage resource text",
        {"resources": "cpus:9;;mem:1", "frameworks": GOOD_FRAMEWORKS},
        ["resources", "empty entry"],
    ),
    (
        "empty task",
        {"resources": {"cpus": 9}, "frameworks": [{"name": "A", "task": {}}]},
        ["frameworks[0].task"],
    ),
    (
        "unknown framework field",
        {
            "resources": {"cpus": 9},
            "frameworks": [{"name": "A", "task": {"cpus": 1}, "max_task": 3}],
        },
        ["frameworks[0].max_task", "unknown field"],
    ),
    (
        "unknown top-level field",
        {"resources": {"cpus": 9}, "frameworks": GOOD_FRAMEWORKS, "polcy": "drf"},
        ["polcy", "unknown field"],
    ),
    (
        "duplicate framework names",
        {
            "resources": {"cpus": 9},
            "frameworks": [{"name": "A", "task": {"cpus": 1}}, {"name": "A", "task": {"cpus": 2}}],
        },
        ["frameworks[1].name", "'A'"],
    ),
    (
        "framework without name",
        {"resources": {"cpus": 9}, "frameworks": [{"task": {"cpus": 1}}]},
        ["frameworks[0].name"],
    ),
    (
        "framework without task",
        {"resources": {"cpus": 9}, "frameworks": [{"name": "A"}]},
        ["frameworks[0].task", "missing"],
    ),
    (
        "zero weight",
        {"resources": {"cpus": 9}, "frameworks": [{"name": "A", "task": {"cpus": 1}, "weight": 0}]},
        ["frameworks[0].weight"],
    ),
    (
        "text weight",
        {
            "resources": {"cpus": 9},
            "frameworks": [{"name": "A", "task": {"cpus": 1}, "weight": "2"}],
        },
        ["frameworks[0].weight"],
    ),
    (
        "bool weight",
        {
            "resources": {"cpus": 9},
            "frameworks": [{"name": "A", "task": {"cpus": 1}, "weight": True}],
        },
        ["frameworks[0].weight"],
    ),
    (
        "negative max_tasks",
        {
            "resources": {"cpus": 9},
            "frameworks": [{"name": "A", "task": {"cpus": 1}, "max_tasks": -1}],
        },
        ["frameworks[0].max_tasks"],
    ),
    (
        "fractional max_tasks",
        {
            "resources": {"cpus": 9},
            "frameworks": [{"name": "A", "task": {"cpus": 1}, "max_tasks": 2.5}],
        },
        ["frameworks[0].max_tasks"],
    ),
    (
        "unknown policy in the file",
        {"resources": {"cpus": 9}, "frameworks": GOOD_FRAMEWORKS, "policy": "fifo"},
        ["policy", "'fifo'"],
    ),
    (
        "unknown placement in the file",
        {"resources": {"cpus": 9}, "frameworks": GOOD_FRAMEWORKS, "placement": "worst-fit"},
        ["placement", "'worst-fit'"],
    ),
    (
        "unknown mode in the file",
        {"resources": {"cpus": 9}, "frameworks": GOOD_FRAMEWORKS, "mode": "exact"},
        ["mode", "'exact'"],
    ),
    (
        "duplicate agent ids",
        {
            "agents": [
                {"id": "s1", "resources": {"cpus": 1}},
                {"id": "s1", "resources": {"cpus": 2}},
            ],
            "frameworks": GOOD_FRAMEWORKS,
        },
        ["agents[1].id", "'s1'"],
    ),
    (
        "agent without resources",
        {"agents": [{"id": "s1"}], "frameworks": GOOD_FRAMEWORKS},
        ["agents[0].resources"],
    ),
    ("empty agents", {"agents": [], "frameworks": GOOD_FRAMEWORKS}, ["agents"]),
]


@pytest.mark.parametrize(
    ("case", "fragments"), [(c, f) for _, c, f in BAD_CASES], ids=[n for n, _, _ in BAD_CASES]
)
def test_bad_case_exits_2_naming_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: object, fragments: list[str]
) -> None:
    path = write_case(tmp_path, case)
    code, out, err = run_main(capsys, "allocate", path)
    assert code == 2
    assert out == ""
    assert err.startswith("fairshare allocate: ")
    assert path in err
    for fragment in fragments:
        assert fragment in err
    assert "Traceback" not in err
    assert err.count("\n") == 1


def test_invalid_json_names_the_file_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write_case(tmp_path, '{"resources": {"cpus": 9},\n "frameworks": [}')
    code, out, err = run_main(capsys, "allocate", path)
    assert (code, out) == (2, "")
    assert "not valid JSON" in err
    assert "line 2" in err
    assert err.count(path) == 1, err  # not "fairshare allocate: X: X: not valid JSON ..."


def test_huge_exponent_in_resource_text_exits_2_without_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    case = {"resources": "cpus:1e1000000;mem:18", "frameworks": GOOD_FRAMEWORKS}
    path = write_case(tmp_path, case)
    done = run_cli("allocate", path)
    assert "Traceback" not in done.stderr
    assert done.returncode == 2
    assert done.stdout == ""
    assert "resources" in done.stderr and "cpus" in done.stderr


def test_missing_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.json")
    code, out, err = run_main(capsys, "allocate", missing)
    assert (code, out) == (2, "")
    assert "cannot read" in err and missing in err


def test_directory_and_binary_file_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run_main(capsys, "allocate", str(tmp_path))
    assert (code, out) == (2, "")
    assert "cannot read" in err
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00")
    code, out, err = run_main(capsys, "allocate", str(binary))
    assert (code, out) == (2, "")
    assert "not UTF-8" in err


def test_unknown_policy_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["allocate", DRF_TABLE1, "--policy", "fifo"])
    assert caught.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "--policy" in err and "fifo" in err


@pytest.mark.parametrize(
    ("case", "fragments"),
    [
        (
            {
                "resources": {"cpus": 9, "mem": 18},
                "frameworks": [{"name": "A", "task": {"cpus": -1, "mem": 4}}],
            },
            ["frameworks[0].task", "cpus"],
        ),
        ('{"resources": {"cpus": 9}', ["not valid JSON"]),
        (
            {
                "resources": {"cpus": 9},
                "frameworks": [{"name": "A", "task": {"cpus": 1}, "max_task": 3}],
            },
            ["max_task"],
        ),
    ],
)
def test_bad_case_subprocess_has_no_traceback(
    tmp_path: Path, case: object, fragments: list[str]
) -> None:
    done = run_cli("allocate", write_case(tmp_path, case))
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    for fragment in fragments:
        assert fragment in done.stderr


def test_missing_file_subprocess(tmp_path: Path) -> None:
    done = run_cli("allocate", str(tmp_path / "missing.json"))
    assert (done.returncode, done.stdout) == (2, "")
    assert "missing.json" in done.stderr
    assert "Traceback" not in done.stderr


# -- fluid mode (needs analysis.fluid.solver) ------------------------------------------------------


def test_fluid_drf_table1(capsys: pytest.CaptureFixture[str]) -> None:
    result = allocate_json(capsys, DRF_TABLE1, "--mode", "fluid")
    rows = by_name(result)
    assert rows["A"]["tasks"] == 3
    assert rows["B"]["tasks"] == 2
    assert result["mode"] == "fluid"


def test_fluid_asset_gives_the_water_filling_solution(capsys: pytest.CaptureFixture[str]) -> None:
    rows = by_name(allocate_json(capsys, DRF_TABLE1, "--policy", "asset", "--mode", "fluid"))
    assert rows["A"]["tasks"] == pytest.approx(2.52)
    assert rows["B"]["tasks"] == pytest.approx(2.16)
    assert rows["A"]["tasks_exact"] == "63/25"
    assert rows["B"]["tasks_exact"] == "54/25"
    # asset fairness: equal sums of shares, 63/25 * (1/9 + 4/18) == 54/25 * (3/9 + 1/18)
    assert Fraction(63, 25) * (Fraction(1, 9) + Fraction(4, 18)) == Fraction(54, 25) * (
        Fraction(3, 9) + Fraction(1, 18)
    )


def test_fluid_pf_gives_the_kkt_optimum(capsys: pytest.CaptureFixture[str]) -> None:
    rows = by_name(allocate_json(capsys, DRF_TABLE1, "--policy", "pf", "--mode", "fluid"))
    assert rows["A"]["tasks"] == pytest.approx(45 / 11, abs=1e-9)
    assert rows["B"]["tasks"] == pytest.approx(18 / 11, abs=1e-9)


def test_fluid_accepts_every_weight_the_case_accepts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # weight 1e-9 is a positive finite number, so the case is valid; alone in the pool the
    # framework gets all 9 cpus whatever its weight (no traceback, no rounding to weight 0)
    case = {
        "resources": {"cpus": 9},
        "frameworks": [{"name": "A", "task": {"cpus": 1}, "weight": 1e-9}],
    }
    path = write_case(tmp_path, case)
    done = run_cli("allocate", path, "--mode", "fluid")
    assert "Traceback" not in done.stderr
    assert done.returncode == 0, done.stderr
    assert by_name(json.loads(done.stdout))["A"]["tasks"] == 9


def test_fluid_subprocess() -> None:
    done = run_cli(
        "allocate", "examples/cases/drf-table1.json", "--policy", "asset", "--mode", "fluid"
    )
    assert done.returncode == 0, done.stderr
    rows = by_name(json.loads(done.stdout))
    assert (rows["A"]["tasks_exact"], rows["B"]["tasks_exact"]) == ("63/25", "54/25")


def test_a_case_with_too_many_whole_tasks_exits_2_and_points_to_fluid_mode(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    case = {"resources": {"cpus": 100000}, "frameworks": [{"name": "A", "task": {"cpus": 0.001}}]}
    code, out, err = run_main(capsys, "allocate", write_case(tmp_path, case))
    assert (code, out) == (2, "")
    assert "100,000,000" in err and "--mode fluid" in err


def test_ceei_is_the_pf_optimum_in_fluid_mode_and_refused_in_tasks_mode(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_main(
        capsys, "allocate", "examples/cases/drf-table1.json", "--policy", "ceei", "--mode", "fluid"
    )
    assert code == 0, err
    rows = by_name(json.loads(out))
    assert rows["A"]["tasks"] == pytest.approx(45 / 11, abs=1e-9)
    assert rows["B"]["tasks"] == pytest.approx(18 / 11, abs=1e-9)
    code, out, err = run_main(
        capsys, "allocate", "examples/cases/drf-table1.json", "--policy", "ceei"
    )
    assert (code, out) == (2, "")
    assert "policy: ceei" in err and "fluid" in err
