"""``client_commands.log_frameworks``: ``fairshare logs --framework`` by id or name, and the
candidates of a shared task id (issue 24, item 8)."""

from __future__ import annotations

import pytest
from fairshare.v1 import operator_pb2

from client_commands.log_frameworks import (
    AmbiguousFramework,
    FrameworkName,
    framework_to_ask,
    frameworks_named_in,
    resolve_framework,
)

FRAMEWORKS = [
    FrameworkName("f1", "alpha"),
    FrameworkName("f2", "beta"),
    FrameworkName("f3", "beta"),
]


def state(tasks: list[tuple[str, str]]) -> operator_pb2.GetStateResponse:
    response = operator_pb2.GetStateResponse()
    for framework in FRAMEWORKS:
        added = response.frameworks.add()
        added.framework_info.framework_id = framework.framework_id
        added.framework_info.name = framework.name
    for framework_id, task_id in tasks:
        task = response.tasks.add()
        task.framework_id = framework_id
        task.info.task_id = task_id
    return response


def test_an_id_wins_then_a_unique_name_then_the_value_as_given() -> None:
    assert resolve_framework(FRAMEWORKS, "f2") == "f2"
    assert resolve_framework(FRAMEWORKS, "alpha") == "f1"
    assert resolve_framework(FRAMEWORKS, "gone-id") == "gone-id"  # for the master to judge


def test_a_name_two_frameworks_share_names_both() -> None:
    with pytest.raises(AmbiguousFramework, match=r"2 frameworks are named 'beta' \(f2, f3\)"):
        resolve_framework(FRAMEWORKS, "beta")


def test_a_task_id_in_several_frameworks_lists_them_with_names_and_the_flag() -> None:
    with pytest.raises(AmbiguousFramework) as raised:
        framework_to_ask(state([("f1", "job"), ("f2", "job"), ("f1", "other")]), "job", "")
    message = str(raised.value)
    assert "f1 (name 'alpha'); f2 (name 'beta')" in message and "--framework" in message
    assert framework_to_ask(state([("f1", "job")]), "job", "") == ""
    assert framework_to_ask(state([("f1", "job"), ("f2", "job")]), "job", "alpha") == "f1"
    assert framework_to_ask(None, "job", "alpha") == "alpha"  # no state: passed through


def test_the_frameworks_an_agents_refusal_names() -> None:
    text = "task id job has sandboxes in frameworks f1, f3: give the framework"
    assert [f.framework_id for f in frameworks_named_in(FRAMEWORKS, text)] == ["f1", "f3"]
