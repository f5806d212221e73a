"""``fairshare.command``: the shape of a command task, and its wire form (``fairshare.wire``).

Every process (SDK, master, agent) accepts exactly the commands ``Command`` accepts: a bad one
raises ``ValueError`` naming the field; a good one survives the wire round trip unchanged.
"""

from __future__ import annotations

import pytest
from fairshare.command import (
    MAX_ARGS,
    MAX_COMMAND_BYTES,
    Command,
    ResourceUsage,
    normalize_working_dir,
)
from fairshare.v1 import common_pb2
from fairshare.wire import command_from_pb, command_to_pb, usage_from_pb, usage_to_pb


def test_a_shell_command_runs_under_sh() -> None:
    command = Command(shell="echo hello | tr a-z A-Z")
    assert command.program == ("/bin/sh", "-c", "echo hello | tr a-z A-Z")
    assert Command(argv=["ls", "-l"]).program == ("ls", "-l")


def test_env_is_sorted_and_hashable() -> None:
    command = Command(shell="env", env={"B": "2", "A": "1"})
    assert command.env == (("A", "1"), ("B", "2"))
    assert command == Command(shell="env", env=[("A", "1"), ("B", "2")])
    assert hash(command) == hash(Command(shell="env", env={"A": "1", "B": "2"}))


@pytest.mark.parametrize(
    ("given", "normalized"),
    [("", ""), (".", ""), ("./a//b/", "a/b"), ("a/./b", "a/b"), ("a.b/..c", "a.b/..c")],
)
def test_working_dir_is_normalized(given: str, normalized: str) -> None:
    assert normalize_working_dir(given) == normalized
    assert Command(shell="pwd", working_dir=given).working_dir == normalized


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({}, "exactly one of argv and shell"),
        ({"argv": ["a"], "shell": "b"}, "exactly one of argv and shell"),
        ({"shell": " \t"}, "blank"),
        ({"argv": [""]}, "argv\\[0\\]"),
        ({"argv": ["x"] * (MAX_ARGS + 1)}, f"more than {MAX_ARGS}"),
        ({"shell": "é" * (MAX_COMMAND_BYTES // 2 + 1)}, f"more than {MAX_COMMAND_BYTES}"),
        ({"argv": ["a", "b\0c"]}, "argv\\[1\\] contains a NUL"),
        ({"shell": "a\0"}, "shell contains a NUL"),
        ({"shell": "x", "env": {"X": "a\0"}}, "env X contains a NUL"),
        ({"shell": "x", "env": {"": "a"}}, "env name"),
        ({"shell": "x", "env": {"A=B": "a"}}, "env name"),
        ({"shell": "x", "env": [("A", "1"), ("A", "2")]}, "given twice"),
        ({"shell": "x", "working_dir": "/tmp"}, "absolute"),
        ({"shell": "x", "working_dir": ".."}, "'..'"),
        ({"shell": "x", "working_dir": "a/../b"}, "'..'"),
        ({"shell": "x", "working_dir": "a/" * 600}, "longer than"),
        ({"shell": "x", "working_dir": "a\0"}, "NUL"),
        ({"shell": "x", "user": "root:0"}, "user"),
        ({"shell": "x", "user": "-rf"}, "user"),
        ({"shell": "x", "kill_grace_period": float("nan")}, "kill_grace_period"),
        ({"shell": "x", "kill_grace_period": 3600.5}, "kill_grace_period"),
    ],
)
def test_bad_commands_are_refused(fields: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        Command(**fields)  # type: ignore[arg-type]


def test_wire_round_trip() -> None:
    command = Command(
        argv=["python3", "-c", "import sys; print(sys.argv)", "é"],
        env={"LANG": "C.UTF-8"},
        working_dir="a/b",
        user="nobody",
        kill_grace_period=0.25,
    )
    message = command_to_pb(command)
    assert command_from_pb(message) == command
    assert command_from_pb(common_pb2.ProcessInfo.FromString(message.SerializeToString())) == (
        command
    )
    plain = command_to_pb(Command(shell="true"))
    assert not plain.HasField("kill_grace_period")
    assert command_from_pb(plain).kill_grace_period is None


def test_wire_refuses_what_command_refuses() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        command_from_pb(common_pb2.ProcessInfo())
    negative = common_pb2.ProcessInfo(shell="true")
    negative.kill_grace_period.seconds = -5
    with pytest.raises(ValueError, match="kill_grace_period"):
        command_from_pb(negative)


def test_usage_round_trip_and_range() -> None:
    usage = ResourceUsage(cpu_seconds=2.5, memory_peak_bytes=123 << 20)
    assert usage_from_pb(usage_to_pb(usage)) == usage
    with pytest.raises(ValueError):
        ResourceUsage(cpu_seconds=-1.0)
    with pytest.raises(ValueError):
        usage_from_pb(common_pb2.ResourceUsage(memory_peak_bytes=-3))
