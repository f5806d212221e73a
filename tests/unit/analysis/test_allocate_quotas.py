"""``fairshare allocate`` with quotas: ``roles`` entries' ``guarantee`` and ``limit``
(docs/cases.md), in tasks mode (the core's two stages) and fluid mode (the filling of
``analysis.fluid.tree``), the role rows' quota fields, and the refusals; cases without quotas
keep exactly the output they had (``test_allocate_roles.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fairshare import cli

from analysis.calculator import CaseError, allocate, parse_case

ROOT = Path(__file__).resolve().parents[3]
CASES = ROOT / "examples" / "cases"
LIMIT = str(CASES / "quota-limit.json")
GUARANTEE = str(CASES / "quota-guarantee.json")
HEADROOM = str(CASES / "quota-headroom.json")
QUOTA_KEYS = {"guarantee", "limit", "consumption", "below_guarantee"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["allocate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def result(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, "")
    document: dict[str, Any] = json.loads(out)
    return document


def tasks_of(document: dict[str, Any]) -> dict[str, Any]:
    return {row["name"]: row["tasks"] for row in document["frameworks"]}


def roles_of(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["path"]: row for row in document["roles"]}


MODES = [
    (mode, hierarchy) for mode in ("tasks", "fluid") for hierarchy in ("hdrf", "naive", "flat")
]


@pytest.mark.parametrize(("mode", "hierarchy"), MODES)
def test_a_limited_role_alone_gets_its_limit(
    capsys: pytest.CaptureFixture[str], mode: str, hierarchy: str
) -> None:
    document = result(capsys, LIMIT, "--mode", mode, "--hierarchy", hierarchy)
    assert tasks_of(document) == {"batch": 4}
    (row,) = document["roles"]
    assert row["limit"] == {"cpus": 4} and row["guarantee"] == {}
    assert row["consumption"] == row["allocated"] == {"cpus": 4, "mem": 1024}
    assert row["below_guarantee"] is False
    assert document["utilization"]["cpus"] == pytest.approx(1 / 3)


@pytest.mark.parametrize(("mode", "hierarchy"), MODES)
def test_a_guaranteed_role_gets_its_guarantee_beside_two_others(
    capsys: pytest.CaptureFixture[str], mode: str, hierarchy: str
) -> None:
    document = result(capsys, GUARANTEE, "--mode", mode, "--hierarchy", hierarchy)
    assert tasks_of(document) == {"prod": 8, "dev": 2, "ci": 2}
    roles = roles_of(document)
    assert list(roles) == ["ci", "dev", "prod"]
    assert roles["prod"]["guarantee"] == {"cpus": 8}
    assert roles["prod"]["limit"] is None
    assert roles["prod"]["consumption"] == {"cpus": 8, "mem": 2048}
    assert not any(row["below_guarantee"] for row in roles.values())
    assert roles["dev"]["guarantee"] == {} and roles["dev"]["limit"] is None
    for row in roles.values():
        assert set(row) == {"path", "weight", "tasks", "dominant_share", "allocated", *QUOTA_KEYS}


@pytest.mark.parametrize("mode", ["tasks", "fluid"])
def test_an_unmet_guarantee_keeps_its_headroom_free(
    capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    """oncall guarantees 4 cpus and has no framework: Mesos 1.9 keeps them free; batch is
    limited to 10 but gets 6 of the 8 left (web wants 2)."""
    document = result(capsys, HEADROOM, "--mode", mode)
    assert tasks_of(document) == {"batch": 6, "web": 2}
    roles = roles_of(document)
    assert roles["oncall"]["below_guarantee"] is True
    assert roles["oncall"]["consumption"] == {} and roles["oncall"]["tasks"] == 0
    assert roles["batch"]["limit"] == {"cpus": 10}
    assert document["utilization"]["cpus"] == pytest.approx(2 / 3)


def test_fluid_rows_are_exact_and_below_guarantee_is_exact() -> None:
    """prod guarantees 7 cpus but wants 6.5: below its guarantee by half a cpu, which the
    headroom keeps free; dev and ci share the other 5 (2.5 each; whole tasks 2 and 3)."""
    raw = json.loads(Path(GUARANTEE).read_text(encoding="utf-8"))
    raw["roles"]["prod"]["guarantee"] = "cpus:7"
    raw["frameworks"][0]["max_tasks"] = 6
    raw["frameworks"].append({"name": "half", "role": "prod", "task": "cpus:0.5", "max_tasks": 1})
    output = allocate(parse_case(raw, mode="fluid"))
    roles = roles_of(output)
    assert roles["prod"]["consumption"] == {"cpus": 6.5, "mem": 1536}
    assert roles["prod"]["below_guarantee"] is True
    assert roles["prod"]["tasks"] == 7
    assert tasks_of(output) == {"prod": 6, "dev": 2.5, "ci": 2.5, "half": 1}
    assert roles["dev"]["tasks_exact"] == "5/2" and roles["dev"]["below_guarantee"] is False
    tasks = allocate(parse_case(raw, mode="tasks"))
    assert roles_of(tasks)["prod"]["below_guarantee"] is True
    assert tasks_of(tasks) == {"prod": 6, "dev": 2, "ci": 3, "half": 1}


def test_nested_guarantees_and_limits_in_both_modes() -> None:
    """x and y fill eng's guarantee of 8 equally, x goes on to its own 6, where eng meets its
    limit of 10: sci, twice eng's weight, gets the 2 left."""
    case = {
        "resources": "cpus:12;mem:12288",
        "roles": {
            "eng": {"guarantee": {"cpus": 8}, "limit": {"cpus": 10}},
            "eng/x": {"guarantee": "cpus:6"},
            "sci": {"weight": 2},
        },
        "frameworks": [
            {"name": "x", "role": "eng/x", "task": "cpus:1;mem:256"},
            {"name": "y", "role": "eng/y", "task": "cpus:1;mem:256"},
            {"name": "s", "role": "sci", "task": "cpus:1;mem:256"},
        ],
    }
    for mode in ("tasks", "fluid"):
        output = allocate(parse_case(case, mode=mode))
        assert tasks_of(output) == {"x": 6, "y": 4, "s": 2}, mode
        roles = roles_of(output)
        assert roles["eng"]["consumption"] == {"cpus": 10, "mem": 2560}
        assert not roles["eng"]["below_guarantee"] and not roles["eng/x"]["below_guarantee"]
        assert roles["eng/y"]["guarantee"] == {} and roles["sci"]["weight"] == 2


def test_a_case_without_quotas_has_no_quota_fields() -> None:
    output = allocate(parse_case(json.loads((CASES / "roles-one-vs-three.json").read_text())))
    assert all(not QUOTA_KEYS & set(row) for row in output["roles"])


# -- refusals: exit 2 naming the field ---------------------------------------------------------


FRAMEWORKS = [{"name": "A", "task": {"cpus": 1}, "role": "eng"}]
BAD: list[tuple[str, dict[str, Any], list[str]]] = [
    ("guarantee a number", {"eng": {"guarantee": 4}}, ["roles.eng.guarantee", "expected"]),
    ("limit a list", {"eng": {"limit": ["cpus"]}}, ["roles.eng.limit", "expected"]),
    ("empty guarantee", {"eng": {"guarantee": {}}}, ["roles.eng.guarantee", "no positive"]),
    ("negative limit", {"eng": {"limit": {"cpus": -1}}}, ["roles.eng.limit", "-1"]),
    ("bad text", {"eng": {"limit": "cpus=4"}}, ["roles.eng.limit", "NAME:VALUE"]),
    ("zero limit", {"eng": {"limit": {"cpus": 4, "mem": 0}}}, ["roles.eng.limit.mem", "above 0"]),
    ("zero in text", {"eng": {"guarantee": "cpus:0;mem:1"}}, ["roles.eng.guarantee.cpus"]),
    ("unknown field", {"eng": {"quota": {}}}, ["roles.eng.quota", "weight, guarantee, limit"]),
    (
        "guarantee above limit",
        {"eng": {"guarantee": "cpus:8", "limit": "cpus:4"}},
        ["roles: quota of 'eng'", "guarantee cpus:8 is above its limit cpus:4"],
    ),
    (
        "sub-roles guarantee more",
        {
            "eng": {"guarantee": "cpus:4"},
            "eng/a": {"guarantee": "cpus:3"},
            "eng/b": {"guarantee": "cpus:2"},
        },
        ["roles: quota of 'eng'", "sub-roles guarantee cpus:5"],
    ),
    (
        "child limit above parent's",
        {"eng": {"limit": "cpus:4"}, "eng/a": {"limit": "cpus:6"}},
        ["roles: quota of 'eng/a'", "above its parent 'eng'"],
    ),
]


@pytest.mark.parametrize(
    ("roles", "fragments"), [(r, f) for _, r, f in BAD], ids=[n for n, _, _ in BAD]
)
def test_a_bad_quota_exits_2_naming_the_field(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    roles: dict[str, Any],
    fragments: list[str],
) -> None:
    path = tmp_path / "case.json"
    case = {"resources": {"cpus": 4}, "frameworks": FRAMEWORKS, "roles": roles}
    path.write_text(json.dumps(case), encoding="utf-8")
    code, out, err = run(capsys, str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"fairshare allocate: {path}: ")
    for fragment in fragments:
        assert fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_fluid_quotas_need_drf_and_one_pool() -> None:
    quota = {"roles": {"eng": {"limit": "cpus:1"}}, "frameworks": FRAMEWORKS}
    with pytest.raises(
        CaseError, match=r"roles: quotas in fluid mode .*\(policy drf\), not 'asset'"
    ):
        allocate(parse_case({**quota, "resources": "cpus:4"}, policy="asset", mode="fluid"))
    assert tasks_of(allocate(parse_case({**quota, "resources": "cpus:4"}, policy="asset"))) == {
        "A": 1
    }
    agents = [
        {"id": "s1", "resources": {"cpus": 2, "mem": 12}},
        {"id": "s2", "resources": {"cpus": 12, "mem": 2}},
    ]
    with pytest.raises(CaseError, match="with quotas needs a single pool"):
        allocate(parse_case({**quota, "agents": agents}, mode="fluid", hierarchy="flat"))
    assert tasks_of(allocate(parse_case({**quota, "agents": agents}))) == {"A": 1}
