"""``fairshare allocate`` over a role tree: ``roles``, ``role``, ``hierarchy`` and the per-role
output (docs/cases.md), in tasks mode (the core) and fluid mode (Static H-DRF); cases without
roles keep exactly the output they had."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fairshare import cli

from analysis.calculator import CaseError, allocate, parse_case

ROOT = Path(__file__).resolve().parents[3]
CASES = ROOT / "examples" / "cases"
ONE_VS_THREE = str(CASES / "roles-one-vs-three.json")
NESTED = str(CASES / "roles-nested-weights.json")
STARVATION = str(CASES / "hdrf-starvation.json")
ROLE_KEYS = {"path", "weight", "tasks", "dominant_share", "allocated"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["allocate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def result(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, "")
    document: dict[str, Any] = json.loads(out)
    return document


def tasks_of(document: dict[str, Any], section: str = "frameworks") -> dict[str, Any]:
    key = "name" if section == "frameworks" else "path"
    return {row[key]: row["tasks"] for row in document[section]}


@pytest.mark.parametrize("mode", ["tasks", "fluid"])
@pytest.mark.parametrize("hierarchy", ["hdrf", "naive"])
def test_one_framework_against_three_gets_half(
    capsys: pytest.CaptureFixture[str], mode: str, hierarchy: str
) -> None:
    document = result(capsys, ONE_VS_THREE, "--mode", mode, "--hierarchy", hierarchy)
    assert tasks_of(document) == {"a1": 6, "b1": 2, "b2": 2, "b3": 2}
    assert tasks_of(document, "roles") == {"a": 6, "b": 6}
    assert document["hierarchy"] == hierarchy
    for row in document["roles"]:
        assert set(row) == ROLE_KEYS  # whole numbers: no *_exact fields
        assert row["dominant_share"] == 0.5
        assert row["weight"] == 1.0
    assert document["roles"][1]["allocated"] == {"cpus": 6, "mem": 1536}


@pytest.mark.parametrize("mode", ["tasks", "fluid"])
def test_flat_lets_the_role_with_more_frameworks_take_more(
    capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    document = result(capsys, ONE_VS_THREE, "--mode", mode, "--hierarchy", "flat")
    assert tasks_of(document, "roles") == {"a": 3, "b": 9}
    assert document["hierarchy"] == "flat"


@pytest.mark.parametrize("mode", ["tasks", "fluid"])
def test_nested_weights_three_nine_four(capsys: pytest.CaptureFixture[str], mode: str) -> None:
    document = result(capsys, NESTED, "--mode", mode)
    assert document["hierarchy"] == "hdrf"  # the case's
    assert tasks_of(document) == {"dev": 3, "prod": 9, "sci": 4}
    roles = {row["path"]: row for row in document["roles"]}
    assert list(roles) == ["eng", "eng/dev", "eng/prod", "sci"]
    assert [row["weight"] for row in roles.values()] == [3.0, 1.0, 3.0, 1.0]
    assert roles["eng"]["tasks"] == 12
    assert roles["eng"]["dominant_share"] == 0.75
    assert roles["sci"]["allocated"] == {"cpus": 4, "mem": 256}


def test_nested_weights_flat_is_todays_answer_with_the_role_weights_on_the_frameworks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """flat copies a role's weight onto its frameworks: the same case without roles and with
    those weights on the frameworks gives the same frameworks and utilization."""
    raw = json.loads(Path(NESTED).read_text(encoding="utf-8"))
    weights = {role: entry["weight"] for role, entry in raw.pop("roles").items()}
    raw.pop("hierarchy")
    for fw in raw["frameworks"]:
        fw["weight"] = weights[fw.pop("role")]
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(raw), encoding="utf-8")
    for mode in ("tasks", "fluid"):
        flat = result(capsys, NESTED, "--hierarchy", "flat", "--mode", mode)
        today = result(capsys, str(plain), "--mode", mode)
        assert "roles" not in today and "hierarchy" not in today
        assert flat["frameworks"] == today["frameworks"]
        assert flat["utilization"] == today["utilization"]


@pytest.mark.parametrize("hierarchy", ["hdrf", "naive", "flat"])
def test_the_papers_starvation_example_in_fluid_mode(
    capsys: pytest.CaptureFixture[str], hierarchy: str
) -> None:
    """Static allocations agree (§4.1): n1 and n2/g hold half the memory each, n2/c every cpu.
    The naive hierarchy starves n2/g only under churn (docs/experiments.md)."""
    document = result(capsys, STARVATION, "--hierarchy", hierarchy)
    assert document["mode"] == "fluid"
    assert tasks_of(document) == {"n1": 5, "n2-c": 10, "n2-g": 5}
    roles = {row["path"]: row for row in document["roles"]}
    assert roles["n1"]["allocated"] == roles["n2/g"]["allocated"] == {"mem": 5}
    assert roles["n2"]["allocated"] == {"cpus": 10, "mem": 5}
    assert roles["n2"]["dominant_share"] == 1


def test_the_starvation_example_in_tasks_mode_under_hdrf(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = result(capsys, STARVATION, "--mode", "tasks")
    assert tasks_of(document) == {"n1": 5, "n2-c": 10, "n2-g": 5}


def test_fractional_role_rows_carry_exact_values(capsys: pytest.CaptureFixture[str]) -> None:
    document = result(capsys, NESTED, "--mode", "fluid", "--hierarchy", "flat")
    roles = {row["path"]: row for row in document["roles"]}
    assert roles["eng"]["tasks_exact"] == "64/5"
    assert roles["eng"]["dominant_share_exact"] == "4/5"
    assert roles["eng"]["tasks"] == 12.8


def test_frameworks_in_the_default_role_and_declared_roles_are_listed() -> None:
    case = parse_case(
        {
            "resources": {"cpus": 4},
            "roles": {"idle": {}},
            "frameworks": [
                {"name": "x", "task": {"cpus": 1}},
                {"name": "y", "task": {"cpus": 1}, "role": "eng"},
            ],
        }
    )
    output = allocate(case)
    assert [(row["path"], row["tasks"]) for row in output["roles"]] == [
        ("*", 2),
        ("eng", 2),
        ("idle", 0),
    ]


UNLIKE_AGENTS: dict[str, Any] = {
    "agents": [
        {"id": "s1", "resources": {"cpus": 2, "mem": 12}},
        {"id": "s2", "resources": {"cpus": 12, "mem": 2}},
    ],
    "frameworks": [
        {"name": "u1", "task": {"cpus": 0.2, "mem": 1}, "role": "a"},
        {"name": "u2", "task": {"cpus": 1, "mem": 0.2}, "role": "b"},
    ],
    "mode": "fluid",
}


def test_a_role_tree_on_unlike_agents_is_refused_in_fluid_mode() -> None:
    with pytest.raises(CaseError, match="single pool"):
        allocate(parse_case(UNLIKE_AGENTS))
    flat = allocate(parse_case({**UNLIKE_AGENTS, "hierarchy": "flat"}))  # DRFH, as today
    assert flat["hierarchy"] == "flat"
    assert [row["tasks"] for row in flat["frameworks"]] == [10, 10]


@pytest.mark.parametrize("mode", ["tasks", "fluid"])
def test_other_policies_use_no_tree(mode: str) -> None:
    raw = json.loads(Path(ONE_VS_THREE).read_text(encoding="utf-8"))
    raw.pop("hierarchy")
    output = allocate(parse_case(raw, policy="asset", mode=mode))
    assert output["hierarchy"] == "flat"
    assert {row["path"]: row["tasks"] for row in output["roles"]} == {"a": 3, "b": 9}


# -- cases without roles: today's output, whatever the hierarchy ------------------------------


def _plain_cases() -> list[Path]:
    plain = []
    for path in sorted(CASES.glob("*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        if "roles" not in raw and not any("role" in fw for fw in raw["frameworks"]):
            plain.append(path)
    return plain


def test_the_original_examples_have_no_roles() -> None:
    names = [path.name for path in _plain_cases()]
    assert names == [
        "asset-theorem1.json",
        "drf-table1.json",
        "drfh-fig1.json",
        "weighted-capped.json",
    ]


@pytest.mark.parametrize("policy", [None, "drf"])
@pytest.mark.parametrize("mode", ["tasks", "fluid"])
@pytest.mark.parametrize("path", _plain_cases(), ids=lambda path: path.stem)
def test_a_case_without_roles_gives_the_same_output_under_every_hierarchy(
    capsys: pytest.CaptureFixture[str], path: Path, mode: str, policy: str | None
) -> None:
    """Every framework in the default role: one group, so hdrf and naive are flat, and the
    output (byte for byte) is the one before roles: no roles section, no hierarchy field."""
    flags = ["--mode", mode] + ([] if policy is None else ["--policy", policy])
    code, default, err = run(capsys, str(path), *flags)
    assert (code, err) == (0, "")
    document = json.loads(default)
    assert set(document) - {"placement"} == {"frameworks", "utilization", "policy", "mode"}
    assert all("role" not in key for row in document["frameworks"] for key in row)
    hierarchies = ["flat", "hdrf", "naive"] if document["policy"] == "drf" else ["flat"]
    for hierarchy in hierarchies:
        assert run(capsys, str(path), *flags, "--hierarchy", hierarchy) == (0, default, "")


# -- bad cases: exit 2 naming the field --------------------------------------------------------


FRAMEWORKS = [{"name": "A", "task": {"cpus": 1}, "role": "eng"}]
BAD: list[tuple[str, dict[str, Any], list[str]]] = [
    ("bad role key", {"roles": {"eng//dev": {}}}, ["roles.eng//dev", "empty segment"]),
    ("star segment", {"roles": {"eng/*": {}}}, ["roles.eng/*", "default role"]),
    ("empty role key", {"roles": {"": {}}}, ["roles", "empty role path"]),
    ("roles not an object", {"roles": ["eng"]}, ["roles: expected an object"]),
    ("role entry not an object", {"roles": {"eng": 3}}, ["roles.eng: expected an object"]),
    ("unknown role field", {"roles": {"eng": {"wieght": 3}}}, ["roles.eng.wieght", "unknown"]),
    ("negative role weight", {"roles": {"eng": {"weight": -1}}}, ["roles.eng.weight", "-1"]),
    ("zero role weight", {"roles": {"eng": {"weight": 0}}}, ["roles.eng.weight"]),
    ("text role weight", {"roles": {"eng": {"weight": "3"}}}, ["roles.eng.weight", "'3'"]),
    ("bool role weight", {"roles": {"eng": {"weight": True}}}, ["roles.eng.weight"]),
    ("huge role weight", {"roles": {"eng": {"weight": 1e9}}}, ["roles.eng.weight", "1e+06"]),
    ("unknown hierarchy", {"hierarchy": "mesos"}, ["hierarchy", "'mesos'", "hdrf, naive, flat"]),
    (
        "tree hierarchy with another policy",
        {"hierarchy": "hdrf", "policy": "asset"},
        ["hierarchy", "needs policy 'drf'"],
    ),
    (
        "bad framework role",
        {"frameworks": [{"name": "A", "task": {"cpus": 1}, "role": "-eng"}]},
        ["frameworks[0].role", "starts with '-'"],
    ),
    (
        "framework role not text",
        {"frameworks": [{"name": "A", "task": {"cpus": 1}, "role": 7}]},
        ["frameworks[0].role", "7"],
    ),
]


@pytest.mark.parametrize(
    ("extra", "fragments"), [(e, f) for _, e, f in BAD], ids=[n for n, _, _ in BAD]
)
def test_a_bad_role_case_exits_2_naming_the_field(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    extra: dict[str, Any],
    fragments: list[str],
) -> None:
    path = tmp_path / "case.json"
    path.write_text(
        json.dumps({"resources": {"cpus": 4}, "frameworks": FRAMEWORKS, **extra}), encoding="utf-8"
    )
    code, out, err = run(capsys, str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"fairshare allocate: {path}: ")
    for fragment in fragments:
        assert fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_framework_weight_the_core_refuses_exits_2_in_tasks_mode(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The core takes weights in [1e-6, 1e6]; fluid mode any positive one (it used to be a
    traceback in tasks mode)."""
    path = tmp_path / "case.json"
    case = {
        "resources": {"cpus": 9},
        "frameworks": [{"name": "A", "task": "cpus:1", "weight": 1e-9}],
    }
    path.write_text(json.dumps(case), encoding="utf-8")
    code, out, err = run(capsys, str(path))
    assert (code, out) == (2, "")
    assert "frameworks[0].weight" in err and "1e-06" in err and "Traceback" not in err
    assert tasks_of(result(capsys, str(path), "--mode", "fluid")) == {"A": 9}


def test_an_unknown_hierarchy_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["allocate", ONE_VS_THREE, "--hierarchy", "mesos"])
    assert caught.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "--hierarchy" in err


def test_the_hierarchy_flag_wins_over_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert result(capsys, ONE_VS_THREE)["hierarchy"] == "hdrf"
    assert result(capsys, ONE_VS_THREE, "--hierarchy", "flat")["hierarchy"] == "flat"
