"""ACL files: typos refused naming the file, rule and key, with the closest known word; denials
that say what the caller's rules grant; principals checked against the master's authentication
(issue 24, item 7)."""

from __future__ import annotations

import pytest

from master.acl import AclError, parse
from master.acl_checks import check_principals


@pytest.mark.parametrize(
    ("document", "named"),
    [
        (  # a misspelled word: refused, naming the rule, the key and the words
            {"kill_tasks": [{"principals": ["ops"], "framework_principals": "OWN"}]},
            r"acls\.toml, kill_tasks rule 1: framework_principals: 'OWN' is not one of"
            r' "ANY", "NONE", "SELF"',
        ),
        (
            {"view_state": [{"principals": "ANYONE"}]},
            r"view_state rule 1: principals: 'ANYONE' .*did you mean 'ANY'",
        ),
        (  # one name as a bare string: the list form is shown
            {"maintain_agents": [{"principals": "ops"}]},
            r'a name goes in a list: principals = \["ops"\]',
        ),
        (
            {"maintain_agents": [{"principals": ["ANY"]}]},
            r'"ANY" in a list would be a name: write principals = "ANY"',
        ),
        (
            {"register_frameworks": [{"principals": ["a"], "role": ["x"]}]},
            r"register_frameworks rule 1: unknown keys \['role'\]: 'role' \(did you mean 'roles'",
        ),
        (
            {"kill_tasks": [{"principals": ["a"], "roles": "ANY"}]},
            r"'roles' is not a key of kill_tasks rules",
        ),
        ({"kill_task": []}, r"unknown action 'kill_task' \(did you mean 'kill_tasks'"),
        ({"permisive": True}, r"unknown action 'permisive' \(did you mean 'permissive'"),
        (
            {"register_frameworks": [{"principals": ["a"], "max_weight": "4"}]},
            r"rule 1: max_weight must be a number in .*, not '4'",
        ),
        (
            {"view_state": [{"principals": ["a"], "level": "redact"}]},
            r"level must be one of full, redacted, not 'redact' \(did you mean 'redacted'",
        ),
        (
            {"view_state": [{"principals": [" ops"]}]},
            r"principals: ' ops' can be no caller's principal",
        ),
        (
            {"view_logs": [{"principals": ["a"], "framework_principals": ["x" * 129]}]},
            r"framework_principals: 'x+' can be no caller's principal",
        ),
        (
            {"view_state": [{"principals": {"value": ["a"]}}]},
            r'principals: a table must be \{"values"',
        ),
    ],
)
def test_typos_are_refused_naming_the_rule_and_the_key(
    document: dict[str, object], named: str
) -> None:
    with pytest.raises(AclError, match=named):
        parse(document, "acls.toml")


def test_words_in_any_case_and_self_in_a_list_still_load() -> None:
    acl = parse(
        {
            "kill_tasks": [{"principals": "any", "framework_principals": ["SELF", "batch"]}],
            "register_agents": [{"principals": {"type": "ANY"}}],
        },
        "acls.toml",
    )
    assert acl.decide("kill_tasks", "x", "x").allowed and acl.decide("kill_tasks", "x", "batch")
    assert acl.decide("register_agents", "agent-1").allowed


RULES = {
    "permissive": False,
    "register_frameworks": [
        {"principals": ["teamb"], "roles": ["x", "y"]},
        {"principals": ["teamb"], "roles": ["eng/*"]},
        {"principals": "ANY", "roles": "NONE"},
    ],
    "kill_tasks": [{"principals": ["alice"], "framework_principals": "SELF"}],
    "run_tasks": [{"principals": ["batch"], "users": ["batch"]}],
    "maintain_agents": [{"principals": ["ops"]}],
}


def test_a_denial_names_what_the_callers_rules_grant() -> None:
    acl = parse(RULES, "acls.toml")
    refused = acl.decide("register_frameworks", "teamb", "z")
    assert not refused.allowed
    assert refused.why == (
        "teamb may register_frameworks only for roles ['x', 'y', 'eng/*'], not 'z'"
        " (rules of acls.toml)"
    )
    assert acl.decide("register_frameworks", "teamb", "eng/dev").allowed
    other = acl.decide("kill_tasks", "alice", "bob")
    assert other.why == (
        "alice may kill_tasks only on the frameworks of principals ['SELF'], not 'bob'"
        " (rules of acls.toml)"
    )
    user = acl.decide("run_tasks", "batch", "web")
    assert "batch may run_tasks only as users ['batch'], not 'web'" in user.why
    # no rule for the caller at all: the old wording
    assert acl.decide("register_frameworks", "teamc", "z").why == (
        "a rule of acls.toml refuses register_frameworks"
    )
    assert (
        acl.decide("maintain_agents", "bob").why == "no rule of acls.toml lets bob maintain_agents"
    )


def test_principals_checked_against_the_credentials_file() -> None:
    acl = parse(
        {
            "maintain_agents": [{"principals": ["ops", "opps"]}],
            "view_logs": [{"principals": ["ops"], "framework_principals": ["batch"]}],
        },
        "acls.toml",
    )
    found = check_principals(acl, frozenset({"ops", "batch"}), certificates=False)
    assert found.errors == []
    assert found.warnings == [
        "ACL file acls.toml, maintain_agents rule 1: principals: principal 'opps' is not in the"
        " --credentials file (did you mean 'ops'?): no caller can be it until it is added and"
        " the master restarted"
    ]
    assert check_principals(acl, frozenset({"ops"}), certificates=True).warnings == []


def test_a_name_no_token_can_carry_is_an_error_without_certificates() -> None:
    acl = parse({"maintain_agents": [{"principals": ["Ops Team"]}]}, "acls.toml")
    found = check_principals(acl, frozenset({"ops"}), certificates=False)
    assert len(found.errors) == 1 and "'Ops Team' is not a principal name" in found.errors[0]
    assert check_principals(acl, frozenset(), certificates=True).errors == []  # a CN may be


def test_without_authentication_named_principals_are_a_warning() -> None:
    acl = parse({"maintain_agents": [{"principals": ["ops"]}]}, "acls.toml")
    (warning,) = check_principals(acl, None, certificates=False).warnings
    assert "authenticates no one" in warning and "'ops'" in warning
