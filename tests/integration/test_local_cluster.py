"""``fairshare up``: a master and agents as local processes, stopped cleanly on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from daemons import ROOT, daemon_env, fairshare_status, wait_for


def _up(work_dir: Path, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fairshare.cli", "up", "--port", "0", "--metrics-port", "0",
         "--work-dir", str(work_dir), *flags],
        cwd=ROOT,
        env=daemon_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip


def test_up_runs_a_cluster_and_sigterm_stops_every_daemon(tmp_path: Path) -> None:
    up = _up(tmp_path, "--agents", "2", "--resources", "cpus:2;mem:2048", "--rebalance")
    try:
        master_addr = tmp_path / "master" / "master.addr"
        address = wait_for(
            lambda: master_addr.read_text().strip() if master_addr.exists() else "",
            30,
            "the master's address",
        )
        agents = wait_for(
            lambda: len(fairshare_status(address)["agents"]) == 2,  # type: ignore[arg-type]
            30,
            "two agents registered",
        )
        assert agents
        up.send_signal(signal.SIGTERM)
        output, _ = up.communicate(timeout=60)
    finally:
        if up.poll() is None:
            up.kill()
            up.communicate()
    assert up.returncode == 0, output
    assert "fairshare up: master at" in output
    assert "rebalance=on" in (tmp_path / "master" / "master.log").read_text()  # --rebalance
    # Clean exits remove the address files: the master and both agents were stopped, not killed.
    assert not master_addr.exists()
    assert not list(tmp_path.glob("agent-*/agent.addr"))


def test_up_rejects_bad_flags_naming_them(tmp_path: Path) -> None:
    for flags, named in (
        (["--agents", "0"], "--agents"),
        (["--resources", "cpus:-1"], "--resources"),
        (["--rebalance", "--policy", "pf"], "--rebalance"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "fairshare.cli", "up", "--port", "0", *flags],
            cwd=ROOT,
            env=daemon_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert named in done.stderr
        assert "Traceback" not in done.stderr


def test_up_with_three_masters_runs_etcd_and_ha_masters(tmp_path: Path) -> None:
    up = _up(tmp_path, "--masters", "3", "--agents", "2", "--resources", "cpus:2;mem:2048")
    try:
        addr_files = [tmp_path / f"master-{i}" / "master.addr" for i in (1, 2, 3)]
        masters = wait_for(
            lambda: (
                all(f.exists() for f in addr_files)
                and ",".join(f.read_text().strip() for f in addr_files)
            ),
            60,
            "the three masters' addresses",
        )
        status = wait_for(
            lambda: (s := fairshare_status(masters)) and len(s["agents"]) == 2 and s,
            30,
            "two agents registered with the leader",
        )
        assert status["leader"]["address"] in masters.split(",")
        up.send_signal(signal.SIGTERM)
        output, _ = up.communicate(timeout=60)
    finally:
        if up.poll() is None:  # SIGTERM stops its children; SIGKILL only if it hangs
            up.send_signal(signal.SIGTERM)
            try:
                up.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                up.kill()
                up.communicate()
    assert up.returncode == 0, output
    assert "fairshare up: 3 HA masters at" in output
    assert not [f for f in addr_files if f.exists()]
