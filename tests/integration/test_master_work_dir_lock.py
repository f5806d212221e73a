"""One master per work dir (issue 12): a second master on the work dir of a running one exits 1
with one line naming the holder, and touches nothing of the first."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from daemons import ROOT, Daemon, daemon_env, health_status, start_master
from faults import cluster_state


def second_master(work_dir: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "fairshare.cli", "master", "--port", "0", "--metrics-port", "0"]
    return subprocess.run(
        [*argv, "--work-dir", str(work_dir)],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_second_master_on_the_same_work_dir_exits_and_touches_nothing(
    master_factory: Callable[..., Daemon],
) -> None:
    first = master_factory()
    files = {name: (first.work_dir / name).read_text() for name in ("master.addr", "metrics.addr")}
    registry = (first.work_dir / "registry.sqlite").stat()

    done = second_master(first.work_dir)

    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"pid {first.proc.pid}" in lines[0] and first.address in lines[0], lines[0]
    assert str(first.work_dir) in lines[0]
    for name, text in files.items():
        assert (first.work_dir / name).read_text() == text
    assert (first.work_dir / "registry.sqlite").stat().st_mtime_ns == registry.st_mtime_ns
    assert health_status(first.address) == 1
    assert cluster_state(first.address) is not None
    assert "registry" not in first.log().split("listening", 1)[1]  # no write failure after it
    assert first.stop() == 0


def test_the_lock_is_released_by_a_crash(master_factory: Callable[..., Daemon]) -> None:
    first = master_factory()
    first.kill()  # kill -9: the kernel releases the flock
    (first.work_dir / "master.addr").unlink()  # stale: the wait must read the new one
    second = start_master(first.work_dir)  # reaped by the autouse fixture
    assert health_status(second.address) == 1
    assert second.stop() == 0
