"""``agent.tasks.sandbox``: safe paths from ids, working directories kept inside the sandbox, log
files never read through a link, and garbage collection that spares what the master still knows.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agent.tasks.executors.supervisor import EXIT_FILE, SUPERVISOR_FILE, process_record, write_json
from agent.tasks.sandbox import SandboxError, Sandboxes, open_log, path_component, read_tail

FW = "fw-1"


@pytest.mark.parametrize(
    ("identifier", "component"),
    [
        ("web-1.a_b", "web-1.a_b"),
        ("..", "%2E."),
        (".", "%2E"),
        (".hidden", "%2Ehidden"),
        ("a/../b", "a%2F..%2Fb"),
        ("", "%00"),
        ("é x", "%C3%A9%20x"),
    ],
)
def test_ids_become_one_safe_path_component(identifier: str, component: str) -> None:
    assert path_component(identifier) == component


def test_long_ids_are_cut_and_stay_distinct() -> None:
    first, second = path_component("x" * 300 + "1"), path_component("x" * 300 + "2")
    assert len(first) <= 200 and first != second and "/" not in first


def test_prepare_makes_the_sandbox_the_logs_and_the_working_dir(tmp_path: Path) -> None:
    sandboxes = Sandboxes(tmp_path)
    prepared = sandboxes.prepare((FW, "t/1"), "out/logs", None)
    assert prepared.sandbox == tmp_path / "sandboxes" / FW / "t%2F1"
    assert prepared.cwd == prepared.sandbox / "out/logs" and prepared.cwd.is_dir()
    assert prepared.stdout.read_text() == "" and prepared.stderr.exists()
    run_dir = sandboxes.run_dir((FW, "t/1"))
    assert run_dir.is_dir() and (run_dir.stat().st_mode & 0o777) == 0o700
    prepared.stdout.write_text("old run\n")
    (prepared.sandbox / "kept").write_text("x")
    again = sandboxes.prepare((FW, "t/1"), "", None)  # the same task id again
    assert again.stdout.read_text() == "" and (again.sandbox / "kept").exists()


def test_a_working_dir_through_a_link_out_of_the_sandbox_is_refused(tmp_path: Path) -> None:
    sandboxes = Sandboxes(tmp_path)
    sandbox = sandboxes.prepare((FW, "t"), "", None).sandbox
    outside = tmp_path / "outside"
    outside.mkdir()
    (sandbox / "escape").symlink_to(outside)
    (sandbox / "sub").mkdir()
    (sandbox / "inside").symlink_to(sandbox / "sub", target_is_directory=True)
    with pytest.raises(SandboxError, match="symbolic link"):
        sandboxes.prepare((FW, "t"), "escape/deeper", None)
    assert not (outside / "deeper").exists()  # nothing was created out there
    assert sandboxes.prepare((FW, "t"), "inside/x", None).cwd.is_dir()  # links within are fine


def test_log_files_are_never_read_or_truncated_through_a_link(tmp_path: Path) -> None:
    sandboxes = Sandboxes(tmp_path)
    sandbox = sandboxes.prepare((FW, "t"), "", None).sandbox
    secret = tmp_path / "secret"
    secret.write_text("do not show\n")
    (sandbox / "stdout").unlink()
    (sandbox / "stdout").symlink_to(secret)
    with pytest.raises(SandboxError, match="stdout"):
        open_log(sandbox, "stdout")
    assert read_tail(sandbox, "stdout") == ""
    with pytest.raises(SandboxError, match="stdout"):
        sandboxes.prepare((FW, "t"), "", None)
    assert secret.read_text() == "do not show\n"
    with pytest.raises(SandboxError, match="not one of"):
        open_log(sandbox, "../agent.sqlite")


def test_read_tail_keeps_the_last_non_empty_lines(tmp_path: Path) -> None:
    sandbox = Sandboxes(tmp_path).prepare((FW, "t"), "", None).sandbox
    (sandbox / "stderr").write_text("".join(f"line {i}\n\n" for i in range(100)))
    assert read_tail(sandbox, "stderr", lines=3) == "line 97\nline 98\nline 99"


def test_find_by_task_id_across_frameworks(tmp_path: Path) -> None:
    sandboxes = Sandboxes(tmp_path)
    for framework in ("fw-a", "fw b"):
        sandboxes.prepare((framework, "job"), "", None)
    assert [f for f, _ in sandboxes.find("job")] == ["fw b", "fw-a"]
    assert [f for f, _ in sandboxes.find("job", "fw-a")] == ["fw-a"]
    assert sandboxes.find("other") == [] and sandboxes.find("job", "fw-c") == []


def ended(sandboxes: Sandboxes, task_id: str, ago: float, size: int = 0) -> Path:
    key = (FW, task_id)
    sandbox = sandboxes.prepare(key, "", None).sandbox
    (sandbox / "data").write_bytes(b"x" * size)
    write_json(
        sandboxes.run_dir(key) / EXIT_FILE, {"outcome": "exited", "ended_at": time.time() - ago}
    )
    return sandbox


def test_gc_removes_old_sandboxes_but_never_tracked_or_running_ones(tmp_path: Path) -> None:
    sandboxes = Sandboxes(tmp_path)
    old = ended(sandboxes, "old", ago=3600)
    tracked = ended(sandboxes, "tracked", ago=3600)  # terminal, update not acknowledged
    running = ended(sandboxes, "running", ago=3600)
    write_json(sandboxes.run_dir((FW, "running")) / SUPERVISOR_FILE, process_record(os.getpid()))
    young = ended(sandboxes, "young", ago=10)
    removed = sandboxes.collect([(FW, "tracked")], max_age=600, budget_bytes=None, min_age=0)
    assert removed == [old]
    assert not old.exists() and not sandboxes.run_dir((FW, "old")).exists()
    assert tracked.exists() and running.exists() and young.exists()


def test_gc_keeps_sandboxes_within_the_disk_budget_oldest_first(tmp_path: Path) -> None:
    sandboxes = Sandboxes(tmp_path)
    first = ended(sandboxes, "first", ago=300, size=64 << 10)
    second = ended(sandboxes, "second", ago=200, size=64 << 10)
    third = ended(sandboxes, "third", ago=100, size=64 << 10)
    assert sandboxes.collect([], max_age=3600, budget_bytes=150 << 10) == []  # all just ended
    removed = sandboxes.collect([], max_age=3600, budget_bytes=150 << 10, min_age=0)
    assert removed == [first] and second.exists() and third.exists()
    assert sandboxes.collect([(FW, "second")], 3600, budget_bytes=1, min_age=0) == [third]
