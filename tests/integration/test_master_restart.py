"""Master restart from its durable registry (issue 5, docs/architecture.md §4), with real processes.

kill -9 of the master under a steady workload, then a restart on the same work dir and port:
agents reregister with their tasks, frameworks resubscribe with their ids and keep their tasks,
no task is launched twice, and offers resume in DRF order. A missing, corrupt or newer-schema
registry stops the master with a clear message instead of starting afresh.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from daemons import DEFAULT_MASTER_FLAGS, ROOT, Daemon, daemon_env, wait_for
from faults import (
    FrameworkProcess,
    agent_states,
    cluster_state,
    registered,
    restart_master,
    running_tasks,
)

from master.registry import SCHEMA_VERSION

SETTLE = 45.0
MASTER_FLAGS = (*DEFAULT_MASTER_FLAGS, "--agent-timeout", "5s", "--reregistration-timeout", "20s")


def steady(master: Daemon, frameworks: list[FrameworkProcess]) -> dict[str, str] | None:
    """``{task_id: agent_id}`` once every framework has all its tasks RUNNING."""
    state = cluster_state(master.address)
    if state is None or state.offers:
        return None
    running = running_tasks(state)
    for framework in frameworks:
        mine = [t for t in running if t.startswith(f"{framework.name}-")]
        if len(mine) != framework.tasks:
            return None
    return running


def test_kill_9_master_restart_keeps_every_task(
    master_factory: Callable[..., Daemon],
    agent_factory: Callable[..., list[Daemon]],
    tmp_path: Path,
) -> None:
    master = master_factory(*MASTER_FLAGS)
    a = FrameworkProcess(master.address, "A", "cpus:1;mem:256", 6, tmp_path)
    b = FrameworkProcess(master.address, "B", "cpus:2;mem:256", 3, tmp_path)
    started: list[FrameworkProcess] = [a, b]
    try:
        agents = agent_factory(master, 3, "cpus:6;mem:4096")
        before = wait_for(lambda: steady(master, [a, b]), SETTLE, "A 6 and B 3 tasks running")
        wait_for(lambda: registered(agents), SETTLE, "the three agents registered")
        ids = {a.name: a.framework_id(), b.name: b.framework_id()}

        master = restart_master(master, *MASTER_FLAGS)  # kill -9, then the same work dir
        after = wait_for(lambda: steady(master, [a, b]), SETTLE, "every task running again")
        assert after == before  # same ids on the same agents
        state = wait_for(
            lambda: (
                (s := cluster_state(master.address)) is not None
                and sorted(agent_states(s).values()) == ["ACTIVE"] * 3
                and s
            ),
            SETTLE,
            "the three agents back",
        )
        assert not isinstance(state, bool)
        wait_for(lambda: a.subscriptions() == 2 and b.subscriptions() == 2, SETTLE, "resubscribed")
        assert {a.name: a.framework_id(), b.name: b.framework_id()} == ids
        for framework in (a, b):  # nothing launched again, every task told RUNNING again
            assert sorted(framework.launched()) == sorted(
                t for t in before if t.startswith(f"{framework.name}-")
            )
            assert set(framework.latest().values()) == {"RUNNING"}
        shares = {f.framework_info.name: f.dominant_share for f in state.frameworks}
        assert shares == pytest.approx({"A": 1 / 3, "B": 1 / 3})

        # Offers resume: a newcomer gets a new agent's resources; nobody else launches.
        c = FrameworkProcess(master.address, "C", "cpus:1;mem:256", 4, tmp_path)
        started.append(c)
        wait_for(lambda: c.subscriptions() == 1, SETTLE, "C subscribed")
        agent_factory(master, 1, "cpus:4;mem:4096")
        wait_for(lambda: steady(master, [a, b, c]), SETTLE, "C running 4 tasks")
        assert len(a.launched()) == 6 and len(b.launched()) == 3
    finally:
        for framework in started:
            framework.kill()
        master.kill()  # the restarted one (the fixture stops the first)


def test_agents_missing_after_the_reregistration_window_become_unreachable(
    master_factory: Callable[..., Daemon],
    agent_factory: Callable[..., list[Daemon]],
    tmp_path: Path,
) -> None:
    flags = (*DEFAULT_MASTER_FLAGS, "--agent-timeout", "5s", "--reregistration-timeout", "2s")
    master = master_factory(*flags)
    a = FrameworkProcess(master.address, "A", "cpus:1;mem:256", 2, tmp_path)
    try:
        _, leaves = agent_factory(master, 2, "cpus:1;mem:1024")
        wait_for(lambda: steady(master, [a]), SETTLE, "2 tasks running")
        leaves.kill()
        master = restart_master(master, *flags)
        state = wait_for(
            lambda: (
                (s := cluster_state(master.address)) is not None
                and sorted(agent_states(s).values()) == ["ACTIVE", "UNREACHABLE"]
                and s
            ),
            SETTLE,
            "the missing agent unreachable",
        )
        assert not isinstance(state, bool)
        active = [i for i, s in agent_states(state).items() if s == "ACTIVE"]
        assert list(running_tasks(state).values()) == active  # the task on the missing agent
        # is unknown to this master: the framework hears of it by reconciliation (UNREACHABLE)
    finally:
        a.kill()
        master.kill()  # the restarted one (the fixture stops the first)


def run_master(work_dir: Path) -> subprocess.CompletedProcess[str]:
    """``fairshare master`` on ``work_dir``, expected to refuse to start."""
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


def prepared_work_dir(master_factory: Callable[..., Daemon]) -> Path:
    master = master_factory()
    assert master.stop() == 0
    assert (master.work_dir / "registry.sqlite").exists()
    return master.work_dir


def test_missing_registry_stops_the_master(master_factory: Callable[..., Daemon]) -> None:
    work_dir = prepared_work_dir(master_factory)
    (work_dir / "registry.sqlite").unlink()
    done = run_master(work_dir)
    assert done.returncode == 1
    assert "registry.sqlite is missing" in done.stderr and "cluster" in done.stderr
    assert not (work_dir / "registry.sqlite").exists()  # never silently recreated


def test_corrupt_registry_stops_the_master(master_factory: Callable[..., Daemon]) -> None:
    work_dir = prepared_work_dir(master_factory)
    path = work_dir / "registry.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    done = run_master(work_dir)
    assert done.returncode == 1
    assert "corrupt" in done.stderr and str(path) in done.stderr
    assert path.read_bytes().startswith(b"this is not a database")  # left for the operator


def test_newer_schema_registry_stops_the_master(master_factory: Callable[..., Daemon]) -> None:
    work_dir = prepared_work_dir(master_factory)
    with sqlite3.connect(work_dir / "registry.sqlite") as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    done = run_master(work_dir)
    assert done.returncode == 1
    assert f"schema version 99, newer than this master's {SCHEMA_VERSION}" in done.stderr
