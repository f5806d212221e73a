"""Fixtures that start real fairshare daemons (helpers in ``daemons.py``).

- ``master``: a master with a 200 ms allocation interval and the core's invariant checks on;
- ``master_factory(*flags, env=None)``: more masters, with any flags;
- ``agent_factory(master, n=1, resources="cpus:4;mem:8192", *flags)``: ``n`` agent processes.

- ``clients(*argv)``: ``python *argv`` processes (frameworks, commands), output to a log file.

Every process is killed in teardown (whatever the test did to it, restarted ones included:
``reap_processes`` kills all a test started, see ``daemons.STARTED``); a master whose log shows an
internal error (a traceback, an RPC that failed with INTERNAL) fails the test in teardown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from daemons import (
    DEFAULT_MASTER_FLAGS,
    STARTED,
    Client,
    Daemon,
    reap_started,
    start_agent,
    start_master,
)

INTERNAL_ERRORS = ("Traceback", "rpc.failed", "timer.failed")


@pytest.fixture(autouse=True)
def reap_processes() -> Iterator[None]:
    """Kill every process the test started (daemons, restarted daemons, clients, frameworks)."""
    since = len(STARTED)
    try:
        yield
    finally:
        reap_started(since)


@pytest.fixture
def clients(tmp_path: Path) -> Callable[..., Client]:
    """``clients(*argv)`` starts ``python *argv``; ``reap_processes`` kills them all."""
    count = 0

    def start(*argv: str) -> Client:
        nonlocal count
        count += 1
        return Client(list(argv), tmp_path / f"client{count - 1}.log")

    return start


@pytest.fixture
def master_factory(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """``master_factory(*flags, env=None)`` starts a master; all are killed in teardown."""
    started: list[Daemon] = []

    def factory(*flags: str, env: dict[str, str] | None = None) -> Daemon:
        work_dir = tmp_path / f"master{len(started)}"
        master = start_master(work_dir, *flags, env=env)
        started.append(master)
        return master

    yield factory
    for master in started:
        master.kill()
    broken = [m.log_path for m in started if any(mark in m.log() for mark in INTERNAL_ERRORS)]
    if broken:
        pytest.fail(f"the master logged an internal error; see {broken}")


@pytest.fixture
def master(master_factory: Callable[..., Daemon]) -> Daemon:
    """A master with a 200 ms allocation interval and the core's invariant checks on."""
    return master_factory(*DEFAULT_MASTER_FLAGS)


@pytest.fixture
def agent_factory(tmp_path: Path) -> Iterator[Callable[..., list[Daemon]]]:
    """``agent_factory(master, n=1, resources=..., *flags)`` starts ``n`` agent processes."""
    started: list[Daemon] = []

    def factory(
        master: Daemon | str, n: int = 1, resources: str = "cpus:4;mem:8192", *flags: str
    ) -> list[Daemon]:
        address = master if isinstance(master, str) else master.address
        agents = []
        for _ in range(n):
            work_dir = tmp_path / f"agent{len(started)}"
            agent = start_agent(address, work_dir, *flags, resources=resources)
            started.append(agent)
            agents.append(agent)
        return agents

    yield factory
    for agent in started:
        agent.kill()
