"""Role paths (``eng``, ``eng/dev``; ``fairshare.roles``) at every edge that checks a role: the
master's wire check (``convert.check_role``), the ACL's role objects and subtree patterns
(``eng/*``), ``fairshare weights --role`` and ``fairshare run --role`` (exit 2 naming the flag),
the SDK's fake master, and the SQLite registry that keeps role weights by path."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from fairshare.cli import main
from fairshare.v1 import common_pb2, scheduler_pb2

from client_commands.run import add_run_arguments, run_config
from framework_sdk._fake_cluster import Refusal
from framework_sdk.testing import FakeMaster
from master.acl import Acl, AclError, parse
from master.core.errors import InvalidArgument
from master.model import FrameworkInfo
from master.registry import SqliteRegistry
from master.service import convert

TOO_DEEP = "/".join(["r"] * 17)
TOO_LONG = "r" * 257
BAD_ROLES = [
    ("eng//dev", "role 'eng//dev' has an empty segment"),
    ("/eng", "role '/eng' has an empty segment"),
    ("eng/", "role 'eng/' has an empty segment"),
    ("eng/./x", "role 'eng/./x' has a '.' segment"),
    ("eng/..", "role 'eng/..' has a '..' segment"),
    ("-x", "role '-x': segment '-x' starts with '-'"),
    ("eng/*", "role 'eng/*': '*' is the default role, not a segment of a path"),
    ("a b", "role 'a b' is malformed"),
    (TOO_DEEP, f"role {TOO_DEEP!r} has 17 levels; at most 16"),
    (TOO_LONG, "role has 257 characters; at most 256"),
]


# -- the master's wire check ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "checked"),
    [
        ("", "*"),
        ("*", "*"),
        ("eng", "eng"),
        ("eng/dev", "eng/dev"),
        ("eng/dev/ci", "eng/dev/ci"),
        ("batch.prod-1", "batch.prod-1"),
        ("/".join(["r"] * 16), "/".join(["r"] * 16)),
        ("r" * 256, "r" * 256),
    ],
)
def test_convert_accepts_role_paths(role: str, checked: str) -> None:
    assert convert.check_role(role) == checked


@pytest.mark.parametrize(("role", "message"), BAD_ROLES)
def test_convert_refuses_bad_paths_naming_the_rule(role: str, message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        convert.check_role(role)
    assert str(raised.value).startswith(message)


def test_a_framework_subscribes_with_a_path_and_the_field_is_named() -> None:
    info = common_pb2.FrameworkInfo(name="x", role="eng/dev")
    assert convert.framework_spec(info).role == "eng/dev"
    with pytest.raises(InvalidArgument, match=r"^framework_info\.role 'eng//dev' has an empty"):
        convert.framework_spec(common_pb2.FrameworkInfo(name="x", role="eng//dev"))


# -- the ACL ---------------------------------------------------------------------------------


def test_a_subtree_pattern_matches_the_roles_strictly_below_it() -> None:
    acl = parse(
        {
            "set_weights": [
                {"principals": ["lead"], "roles": ["eng/*"]},
                {"principals": ["ops"], "roles": "ANY"},
                {"principals": ["sci"], "roles": ["sci", "sci/*"]},
            ],
            "register_frameworks": [
                {"principals": ["team"], "roles": ["eng/*", "*"]},
                {"principals": ["exact"], "roles": ["eng/dev"]},
            ],
        },
        "test",
    )
    allowed = {
        role: acl.decide("set_weights", "lead", role).allowed
        for role in ("eng/dev", "eng/dev/ci", "eng", "sci", "engineering/x", "eng2/dev", "*")
    }
    assert allowed == {
        "eng/dev": True,
        "eng/dev/ci": True,
        "eng": False,  # strictly below: not eng itself
        "sci": False,
        "engineering/x": False,
        "eng2/dev": False,
        "*": False,
    }
    assert acl.decide("set_weights", "ops", "sci/x").allowed  # ANY
    assert all(acl.decide("set_weights", "sci", r).allowed for r in ("sci", "sci/a", "sci/a/b"))
    assert not acl.decide("set_weights", "sci", "eng").allowed
    assert acl.decide("register_frameworks", "team", "eng/dev").allowed
    assert acl.decide("register_frameworks", "team", "*").allowed
    assert not acl.decide("register_frameworks", "team", "eng").allowed
    assert acl.decide("register_frameworks", "exact", "eng/dev").allowed  # exact names as before
    assert not acl.decide("register_frameworks", "exact", "eng/dev/ci").allowed
    assert not acl.decide("register_frameworks", "exact", "eng").allowed


def test_subtree_patterns_are_role_objects_only() -> None:
    acl = parse(
        {"teardown_frameworks": [{"principals": ["ops"], "framework_principals": ["team/*"]}]},
        "test",
    )
    assert acl.decide("teardown_frameworks", "ops", "team/*").allowed
    assert not acl.decide("teardown_frameworks", "ops", "team/x").allowed


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("eng//dev", "'eng//dev' is not a role or a subtree of one"),
        ("eng//dev/*", "role 'eng//dev' has an empty segment"),
        ("eng/*/x", "role 'eng/*/x': '*' is the default role"),
        ("eng/*/*", "role 'eng/*': '*' is the default role"),
        ("/*", "'/*' names no role below which to match"),
        ("*/*", "'*/*' names no role below which to match"),
        ("eng/", "role 'eng/' has an empty segment"),
        ("-x/*", "segment '-x' starts with '-'"),
        (TOO_DEEP + "/*", "has 17 levels; at most 16"),
    ],
)
def test_a_malformed_role_pattern_refuses_the_file_naming_the_rule(pattern: str, says: str) -> None:
    document = {
        "set_weights": [
            {"principals": ["ops"], "roles": "ANY"},
            {"principals": ["lead"], "roles": ["eng", pattern]},
        ]
    }
    with pytest.raises(AclError) as raised:
        parse(document, "acls.toml")
    message = str(raised.value)
    assert message.startswith("ACL file acls.toml, set_weights rule 2: roles: ")
    assert says in message


def test_an_acl_file_with_a_subtree_loads(tmp_path: Path) -> None:
    path = tmp_path / "acls.toml"
    path.write_text('[[set_weights]]\nprincipals = ["lead"]\nroles = ["eng", "eng/*"]\n')
    acl = Acl.load(path)
    assert all(acl.decide("set_weights", "lead", r).allowed for r in ("eng", "eng/dev"))
    assert not acl.decide("set_weights", "lead", "sci").allowed


# -- the CLI ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("role", "message"), BAD_ROLES)
def test_weights_role_refuses_a_bad_path_with_exit_2_naming_the_flag(
    role: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["weights", "--master", "127.0.0.1:1", f"--role={role}", "--set", "2"]
    assert main(argv) == 2  # before any call: 127.0.0.1:1 would be exit 1
    err = capsys.readouterr().err
    assert err.startswith(f"fairshare weights: --role: {message}"), err
    assert "Traceback" not in err


@pytest.mark.parametrize(("role", "message"), BAD_ROLES)
def test_run_role_refuses_a_bad_path_with_exit_2_naming_the_flag(
    role: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--master", "127.0.0.1:1", "--name", "w", "--task", "cpus:1", f"--role={role}"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"fairshare run: --role {role!r}: {message}"), err
    assert "Traceback" not in err


@pytest.mark.parametrize("role", ["eng", "eng/dev", "eng/dev/ci", "*"])
def test_run_takes_a_role_path(role: str) -> None:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    args = parser.parse_args(["--name", "web", "--task", "cpus:1", "--role", f" {role} "])
    assert run_config(args).role == role


# -- the SDK's fake master -------------------------------------------------------------------


def test_the_fake_master_takes_a_path_and_refuses_what_the_master_refuses() -> None:
    state = FakeMaster().state

    def subscribe(role: str) -> str:
        info = common_pb2.FrameworkInfo(name="x", role=role)
        framework, _ = state.subscribe(scheduler_pb2.SubscribeRequest(framework_info=info))
        return framework.info.role

    assert subscribe("eng/dev") == "eng/dev"
    with pytest.raises(Refusal) as raised:
        subscribe("eng//dev")
    assert raised.value.message.startswith("framework_info.role 'eng//dev' has an empty segment")


# -- the registry ----------------------------------------------------------------------------


def test_role_paths_round_trip_in_the_sqlite_registry(tmp_path: Path) -> None:
    registry = SqliteRegistry.open(tmp_path)
    registry.set_weight("role", "batch", 2.0)  # a flat role, as every older registry holds
    registry.set_weight("role", "eng/dev", 3.0)
    registry.set_weight("role", "eng/dev/ci", 0.5)
    registry.put_framework(
        FrameworkInfo(framework_id="fw-1", name="ci", role="eng/dev/ci", weight=1.0), 100.0
    )
    registry.close()
    reopened = SqliteRegistry.open(tmp_path)
    assert reopened.role_weights == {"batch": 2.0, "eng/dev": 3.0, "eng/dev/ci": 0.5}
    assert reopened.frameworks["fw-1"].spec.role == "eng/dev/ci"
    reopened.set_weight("role", "eng/dev", None)
    reopened.close()
    assert SqliteRegistry.open(tmp_path).role_weights == {"batch": 2.0, "eng/dev/ci": 0.5}
