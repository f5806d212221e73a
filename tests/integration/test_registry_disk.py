"""The registry's disk under a real master (issue 13): a registry file deleted while the master
runs fails the next write with UNAVAILABLE (the master says why), and a read-only work dir stops
the master before it serves, with one line saying so."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from daemons import ROOT, Daemon, daemon_env
from wire_fakes import FrameworkConn, get_state


def test_a_registry_deleted_under_the_master_fails_writes_unavailable(master: Daemon) -> None:
    with grpc.insecure_channel(master.address) as channel:
        FrameworkConn(channel, "before")
        (master.work_dir / "registry.sqlite").unlink()
        with pytest.raises(grpc.RpcError) as caught:
            FrameworkConn(channel, "after")
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
        assert "vanished" in caught.value.details()  # type: ignore[attr-defined]
        assert [f.framework_info.name for f in get_state(channel).frameworks] == ["before"]
    assert "vanished since the master opened it" in master.log()


def _can_mount_read_only(directory: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", f"mount --bind {directory} {directory}"],
        capture_output=True,
        timeout=10,
        check=False,
    )
    return probe.returncode == 0


def test_a_read_only_work_dir_stops_the_master_before_it_serves(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    if not _can_mount_read_only(work):
        pytest.skip("needs unshare -m and mount (root in a mount namespace)")
    first = Daemon("master", ["--port", "0", "--metrics-port", "0", "--work-dir", str(work)],
                   work, "master.addr")  # fmt: skip
    first.wait_ready()
    assert first.stop() == 0
    master = [sys.executable, "-m", "fairshare.cli", "master", "--port", "0", "--metrics-port",
              "0", "--work-dir", str(work)]  # fmt: skip
    script = f'mount --bind {work} {work} && mount -o remount,ro,bind {work} && exec "$@"'
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", *master],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "cannot be written (Read-only file system)" in done.stderr
    assert "listening" not in done.stderr and "Traceback" not in done.stderr
    assert not (work / "master.addr").exists()
