"""Agent loss with real processes (issue 5, docs/architecture.md §4): kill -9 and SIGSTOP/SIGCONT.

An agent that stops heartbeating is marked unreachable after ``--agent-timeout``: its frameworks
get one UNREACHABLE update per task (LOST without the PARTITION_AWARE capability), the pool
shrinks, other agents' tasks are untouched. A hung agent that resumes reregisters with its tasks
and they are RUNNING again, same ids, nothing launched twice.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from daemons import DEFAULT_MASTER_FLAGS, Daemon, fairshare_status, wait_for
from faults import (
    FrameworkProcess,
    agent_states,
    cluster_state,
    pause,
    resume,
    running_tasks,
)

SETTLE = 45.0
TIMEOUT_FLAGS = ("--agent-timeout", "3s")


def all_running(master: Daemon, framework: FrameworkProcess) -> dict[str, str] | None:
    state = cluster_state(master.address)
    if state is None:
        return None
    running = running_tasks(state)
    return running if len(running) == framework.tasks else None


def start_cluster(
    master_factory: Callable[..., Daemon],
    agent_factory: Callable[..., list[Daemon]],
    tmp_path: Path,
) -> tuple[Daemon, list[Daemon], FrameworkProcess, dict[str, str]]:
    master = master_factory(*DEFAULT_MASTER_FLAGS, *TIMEOUT_FLAGS)
    framework = FrameworkProcess(master.address, "A", "cpus:1;mem:256", 4, tmp_path)
    agents = agent_factory(master, 2, "cpus:2;mem:1024")  # 2 tasks on each
    placed = wait_for(lambda: all_running(master, framework), SETTLE, "4 tasks running")
    return master, agents, framework, placed


def agent_id_of(master: Daemon, agent: Daemon, placed: dict[str, str]) -> str:
    """The id the master gave ``agent`` (from its log line 'agent.registered agent_id=...')."""
    for word in agent.log().split():
        if word.startswith("agent_id=") and word.removeprefix("agent_id=") in placed.values():
            return word.removeprefix("agent_id=")
    raise AssertionError(f"no agent id in {agent.log_path}")


def test_kill_9_agent_reports_each_task_and_shrinks_the_pool(
    master_factory: Callable[..., Daemon],
    agent_factory: Callable[..., list[Daemon]],
    tmp_path: Path,
) -> None:
    master, (victim, _), framework, placed = start_cluster(master_factory, agent_factory, tmp_path)
    try:
        lost_agent = agent_id_of(master, victim, placed)
        doomed = sorted(t for t, a in placed.items() if a == lost_agent)
        kept = sorted(t for t, a in placed.items() if a != lost_agent)
        assert len(doomed) == 2 and len(kept) == 2
        victim.kill()  # kill -9

        def reported() -> bool:
            states = [(u["task_id"], u["state"]) for u in framework.updates()]
            return all((t, "UNREACHABLE") in states for t in doomed)

        wait_for(reported, SETTLE, "one UNREACHABLE update per task of the killed agent")
        for task_id in doomed:  # exactly one, with the reason
            unreachable = [u for u in framework.updates(task_id) if u["state"] == "UNREACHABLE"]
            assert [u["reason"] for u in unreachable] == ["AGENT_UNREACHABLE"]
        for task_id in kept:  # the other agent's tasks are untouched
            assert [u["state"] for u in framework.updates(task_id)] == ["STARTING", "RUNNING"]
        document = fairshare_status(master.address)
        agents = {a["id"]: a for a in document["agents"]}
        assert agents[lost_agent]["state"] == "UNREACHABLE"
        assert document["total"]["cpus"] == 2  # the pool shrank to the survivor
        state = cluster_state(master.address)
        assert state is not None and sorted(running_tasks(state)) == kept
    finally:
        framework.kill()


def test_hung_agent_is_unreachable_then_rejoins_with_its_tasks(
    master_factory: Callable[..., Daemon],
    agent_factory: Callable[..., list[Daemon]],
    tmp_path: Path,
) -> None:
    master, (hung, _), framework, placed = start_cluster(master_factory, agent_factory, tmp_path)
    try:
        hung_id = agent_id_of(master, hung, placed)
        paused = sorted(t for t, a in placed.items() if a == hung_id)
        pause(hung)  # SIGSTOP: alive but silent
        try:
            wait_for(
                lambda: (
                    (s := cluster_state(master.address)) is not None
                    and agent_states(s).get(hung_id) == "UNREACHABLE"
                ),
                SETTLE,
                "the hung agent unreachable",
            )
            wait_for(
                lambda: all(framework.latest().get(t) == "UNREACHABLE" for t in paused),
                SETTLE,
                "UNREACHABLE updates",
            )
        finally:
            resume(hung)  # SIGCONT: it finds it lost its registration and reregisters
        wait_for(
            lambda: all_running(master, framework) == placed,
            SETTLE,
            "the same tasks running on the same agents again",
        )
        # The master's state can be ahead of the framework's log: wait for the updates to land.
        wait_for(
            lambda: all(framework.latest().get(t) == "RUNNING" for t in paused),
            SETTLE,
            "the framework told the tasks run again",
        )
        for task_id in paused:
            states = [(u["state"], u["reason"]) for u in framework.updates(task_id)]
            assert states[-2:] == [
                ("UNREACHABLE", "AGENT_UNREACHABLE"),
                ("RUNNING", "RECONCILIATION"),
            ]
        assert sorted(framework.launched()) == sorted(placed)  # nothing launched again
        state = cluster_state(master.address)
        assert state is not None and agent_states(state)[hung_id] == "ACTIVE"
    finally:
        framework.kill()
