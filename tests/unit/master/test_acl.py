"""The ACL file (master.acl): parsing with precise errors, Mesos-style first-match decisions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from master.acl import OPEN, Acl, AclError, parse

RULES = {
    "register_frameworks": [
        {"principals": ["batch"], "roles": ["batch", "*"], "max_weight": 4},
        {"principals": "ANY", "roles": "NONE"},
    ],
    "teardown_frameworks": [
        {"principals": ["ops"], "framework_principals": "ANY"},
        {"principals": ["batch", "web"], "framework_principals": "SELF"},
    ],
    "view_state": [{"principals": ["viewer"], "level": "redacted"}],
}


def test_first_matching_rule_decides_and_nothing_else_is_allowed() -> None:
    acl = parse(RULES, "test")
    rule = acl.decide("register_frameworks", "batch", "batch")
    assert rule.allowed and rule.rule.max_weight == 4
    assert not acl.decide("register_frameworks", "batch", "prod").allowed  # next rule: NONE
    assert not acl.decide("register_frameworks", "web", "*").allowed
    assert acl.decide("teardown_frameworks", "ops", "anyone").allowed
    assert acl.decide("teardown_frameworks", "web", "web").allowed  # SELF
    assert not acl.decide("teardown_frameworks", "web", "batch").allowed
    assert acl.decide("view_state", "viewer").rule.level == "redacted"
    assert not acl.decide("set_weights", "ops", "*").allowed  # no rule, not permissive
    assert not acl.decide("view_state", None).allowed  # anonymous


def test_open_allows_everything_with_the_default_weight_cap() -> None:
    decision = OPEN.decide("register_frameworks", None, "*")
    assert decision.allowed and decision.rule.max_weight == 100.0


def test_mesos_value_forms_and_json_files_load(tmp_path: Path) -> None:
    path = tmp_path / "acls.json"
    path.write_text(
        json.dumps(
            {
                "permissive": False,
                "register_agents": [{"principals": {"values": ["agent-1"]}}],
                "maintain_agents": [{"principals": {"type": "ANY"}}],
            }
        )
    )
    acl = Acl.load(path)
    assert acl.decide("register_agents", "agent-1").allowed
    assert not acl.decide("register_agents", "agent-2").allowed
    assert acl.decide("maintain_agents", "x").allowed


@pytest.mark.parametrize(
    ("document", "named"),
    [
        ({"teardown": []}, "unknown action 'teardown'"),
        ({"view_state": {}}, "must be a list"),
        ({"view_state": [{"level": "full"}]}, "principals is missing"),
        ({"view_state": [{"principals": "ANY", "level": "all"}]}, "level must be"),
        ({"register_frameworks": [{"principals": [], "roles": "ANY"}]}, "non-empty list"),
        ({"register_frameworks": [{"principals": "ANY", "max_weight": 1e9}]}, "max_weight"),
        ({"register_agents": [{"principals": "ANY", "roles": "ANY"}]}, "unknown keys"),
        ({"permissive": "yes"}, "permissive"),
    ],
)
def test_bad_files_are_refused_naming_the_rule(document: dict[str, object], named: str) -> None:
    with pytest.raises(AclError, match=named):
        parse(document, "acls.toml")


def test_a_toml_file_that_does_not_parse_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "acls.toml"
    path.write_text("[[view_state]\n")
    with pytest.raises(AclError, match=r"acls\.toml: not valid"):
        Acl.load(path)


def test_update_quota_takes_roles_and_subtree_patterns() -> None:
    acl = parse(
        {
            "update_quota": [
                {"principals": ["eng-lead"], "roles": ["eng/*"]},
                {"principals": ["ops"], "roles": "ANY"},
            ]
        },
        "acls.toml",
    )
    assert acl.decide("update_quota", "eng-lead", "eng/dev").allowed
    assert acl.decide("update_quota", "eng-lead", "eng/dev/ci").allowed
    assert not acl.decide("update_quota", "eng-lead", "eng").allowed  # not the role itself
    assert not acl.decide("update_quota", "eng-lead", "sci").allowed
    assert acl.decide("update_quota", "ops", "*").allowed
    assert not acl.decide("update_quota", "nobody", "eng/dev").allowed
    with pytest.raises(AclError, match="not a role or a subtree"):
        parse({"update_quota": [{"principals": "ANY", "roles": ["eng/*/x"]}]}, "acls.toml")


def test_run_tasks_maps_principals_to_users_and_root_only_by_name() -> None:
    acl = parse(
        {
            "run_tasks": [
                {"principals": ["batch"], "users": ["batch", "nobody"]},
                {"principals": ["ops"], "users": "ANY"},
                {"principals": ["ops"], "users": ["root"]},
                {"principals": ["web"], "users": "NONE"},
            ]
        },
        "acls.toml",
    )
    assert acl.decide("run_tasks", "batch", "batch").allowed
    refused = acl.decide("run_tasks", "batch", "web")
    assert not refused.allowed and "'web'" in refused.why  # the refusal names the user
    assert acl.decide("run_tasks", "ops", "anyone").allowed
    assert acl.decide("run_tasks", "ops", "root").allowed  # the third rule names root
    assert not acl.decide("run_tasks", "web", "web").allowed
    root = acl.decide("run_tasks", "batch", "root")
    assert not root.allowed and "'root'" in root.why
    # ANY, permissive and OPEN never mean root.
    anyone = parse({"permissive": True, "run_tasks": [{"principals": "ANY", "users": "ANY"}]}, "a")
    assert anyone.decide("run_tasks", "x", "x").allowed
    assert not anyone.decide("run_tasks", "x", "root").allowed
    assert OPEN.decide("run_tasks", None, "nobody").allowed
    assert not OPEN.decide("run_tasks", None, "root").allowed
    with pytest.raises(AclError, match="not a user name"):
        parse({"run_tasks": [{"principals": "ANY", "users": ["bad user"]}]}, "acls.toml")
    with pytest.raises(AclError, match="unknown keys"):
        parse({"run_tasks": [{"principals": "ANY", "roles": "ANY"}]}, "acls.toml")


def test_view_logs_takes_framework_principals() -> None:
    acl = parse(
        {
            "view_logs": [
                {"principals": ["auditor"], "framework_principals": ["batch"]},
                {"principals": ["ops"], "framework_principals": "ANY"},
            ]
        },
        "acls.toml",
    )
    assert acl.decide("view_logs", "auditor", "batch").allowed
    assert not acl.decide("view_logs", "auditor", "web").allowed
    assert not acl.decide("view_logs", "auditor", None).allowed  # not every framework
    assert acl.decide("view_logs", "ops", None).allowed
    assert not acl.decide("view_logs", "web", "batch").allowed
