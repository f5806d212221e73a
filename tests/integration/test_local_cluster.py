"""``fairshare up``: a master and agents as local processes, stopped cleanly on SIGTERM."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from daemons import ROOT, STARTED, daemon_env, fairshare_status, wait_for
from fairshare.etcd import refused_at_start
from fairshare.etcd_security import EtcdSecurity
from fairshare.master_target import EtcdTarget


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
        _check_etcd_secured(tmp_path / "master-1" / "master.log")
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


def _check_etcd_secured(master_log: Path) -> None:
    """Issue 23, finding 2: the etcd of ``up --masters 3`` serves TLS with client certificates
    and authentication, and the masters sign the registry's rows."""
    log = master_log.read_text()
    assert "registry_rows=signed" in log
    assert 'etcd="tls=on cert=on user=fairshare-master"' in log
    url = re.search(r"election\.started etcd=(\S+)", log)
    assert url is not None, log[-2000:]
    target = EtcdTarget.parse(url.group(1))
    tls = master_log.parent.parent / "tls"
    ca = tls / "ca.pem"
    for security in (EtcdSecurity(), EtcdSecurity(ca=ca)):  # no certificate: nothing read
        refused = refused_at_start(target, security)
        assert refused is not None and "refused this process" in refused, security


def _pid_of(*words: str) -> int:
    """The pid of the one live process whose command line has all ``words`` in a row."""
    needle = " ".join(words)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in line and "fairshare.cli master" in line:
            found.append(int(entry.name))
    assert len(found) == 1, (needle, found)
    return found[0]


class _Process:
    """A process the test did not start itself (the detached run's follower)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)


class _Lines:
    """The lines a process prints, read in the background."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert process.stdout is not None
        stream = process.stdout
        self._thread = threading.Thread(target=lambda: self.lines.extend(stream), daemon=True)
        self._thread.start()

    def text(self) -> str:
        return "".join(self.lines)


def _status(masters: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", "status", "--master", masters, "--json"],
        cwd=ROOT, env=daemon_env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_kill_9_of_the_leader_under_up_leaves_a_leader_and_every_task(tmp_path: Path) -> None:
    """Issue 24, item 1: ``up --masters 3``, kill -9 of the leader: ``up`` goes on and starts
    the dead master again (saying so), another master leads, the agents and every task stay;
    ``fairshare status`` during the election says so and answers once a leader is elected."""
    up = _up(tmp_path, "--masters", "3", "--agents", "2", "--resources", "cpus:2;mem:2048")
    printed = _Lines(up)
    try:
        addr_files = [tmp_path / f"master-{i}" / "master.addr" for i in (1, 2, 3)]
        masters = wait_for(
            lambda: (
                "Ctrl-C stops everything" in printed.text()
                and ",".join(f.read_text().strip() for f in addr_files)
            ),
            60,
            "the cluster up",
        )
        run = subprocess.run(
            [sys.executable, "-m", "fairshare.cli", "run", "--master", masters, "--name", "web",
             "--task", "cpus:1;mem:128", "--count", "4", "--detach"],
            cwd=ROOT, env=daemon_env(), capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert run.returncode == 0 and "runs 4 task(s)" in run.stdout, run.stdout + run.stderr
        follower = re.search(r"process (\d+) follows them", run.stdout)
        assert follower, run.stdout
        STARTED.append(_Process(int(follower.group(1))))  # killed at the end: up stops first
        before = json.loads(_status(masters).stdout)
        dead = before["leader"]["address"]
        index = masters.split(",").index(dead) + 1
        os.kill(_pid_of("--work-dir", str(tmp_path / f"master-{index}")), signal.SIGKILL)

        asked = time.time()
        during = _status(masters)  # at once: the dead leader's lease still names it
        assert during.returncode == 0, during.stderr
        assert "Connection refused" not in during.stderr
        leader = json.loads(during.stdout)["leader"]
        # a new term (the restarted master, back on the dead one's address, may win it)
        assert leader["epoch"] > before["leader"]["epoch"], (leader, before["leader"])
        if leader["elected_at"] > asked:  # asked during the election (not after, on a slow day)
            assert "no leader yet: election in progress" in during.stderr, during.stderr

        wait_for(lambda: f"is back on {dead}" in printed.text(), 60, "the dead master restarted")
        assert f"master {index} exited with code -9; restarting it on {dead}" in printed.text()

        def settled() -> dict[str, Any] | None:
            state = json.loads(_status(masters).stdout)
            tasks = [t for t in state["tasks"] if t["state"] == "RUNNING"]
            agents = [a for a in state["agents"] if a["state"] == "ACTIVE"]
            (web,) = state["frameworks"]  # its follower declares its demand to the new leader
            counts = (len(tasks), len(agents), web["running"], web["wanted"])
            return state if counts == (4, 2, 4, 4) else None

        after = wait_for(settled, 60, "both agents and the 4 tasks with the new leader")
        assert after["leader"]["epoch"] > before["leader"]["epoch"]
        assert {t["task_id"] for t in after["tasks"]} == {t["task_id"] for t in before["tasks"]}
        restarted = wait_for(
            lambda: addr_files[index - 1].exists() and addr_files[index - 1].read_text().strip(),
            30,
            "the restarted master's address",
        )
        assert restarted == dead  # in its slot: the --master list stays right
        assert up.poll() is None, printed.text()
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=60)
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            try:
                up.wait(timeout=60)
            except subprocess.TimeoutExpired:
                up.kill()
                up.wait()
    assert up.returncode == 0, printed.text()
