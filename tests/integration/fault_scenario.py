"""The fault tally: a steady workload on a real cluster while faults are injected, then every
task the frameworks launched is accounted for.

Run alone: ``.venv/bin/python tests/integration/fault_scenario.py`` prints the tally (daemons'
logs go to a temporary directory, printed too); ``test_fault_tally.py`` runs the same scenario
and asserts that no task was lost without a report, launched twice or reported twice.

The workload: a master that drops 30% of the acknowledgements it should pass to agents (the
``FAIRSHARE_MASTER_FAULT_DROP_ACKS`` hook: agents must retry, frameworks must not see
duplicates), three agents, framework A keeping 4 long tasks and framework B keeping 3 tasks of
2 s (each replaced by a new one when it ends). The faults, in order, each followed by a wait
until the workload is whole again: kill -9 of an agent and its restart on the same work dir;
SIGSTOP of an agent past the agent timeout, then SIGCONT; kill -9 of the master and its restart
on the same work dir; kill -9 of framework B and its restart with its framework id. With I/O
workers (``Scenario(..., io_workers=2)``, the master's ``--io-workers``), kill -9 of one worker
too, after the master's restart: its clients reconnect through the others.
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

from daemons import DEFAULT_MASTER_FLAGS, Daemon, start_agent, start_master, wait_for
from fairshare.v1 import operator_pb2
from faults import (
    FrameworkProcess,
    Tally,
    agent_states,
    cluster_state,
    kill_io_worker,
    pause,
    restart_agent,
    restart_master,
    resume,
    running_tasks,
    tally,
)

SETTLE = 60.0
MASTER_FLAGS = (*DEFAULT_MASTER_FLAGS, "--agent-timeout", "3s", "--reregistration-timeout", "15s")
MASTER_ENV = {"FAIRSHARE_MASTER_FAULT_DROP_ACKS": "0.3"}
AGENT_RESOURCES = "cpus:4;mem:2048"


class Scenario:
    """The cluster of the scenario and the faults injected so far."""

    def __init__(self, directory: Path, io_workers: int = 0) -> None:
        self.directory = directory
        self.faults: Counter[str] = Counter()
        self.flags = (*MASTER_FLAGS, "--io-workers", str(io_workers))
        self.io_workers = io_workers
        self.master = start_master(directory / "master", *self.flags, env=MASTER_ENV)
        self.a = FrameworkProcess(self.master.address, "A", "cpus:1;mem:256", 4, directory)
        self.b = FrameworkProcess(self.master.address, "B", "cpus:1;mem:128", 3, directory, 2.0)
        self.agents = [
            start_agent(self.master.address, directory / f"agent{i}", resources=AGENT_RESOURCES)
            for i in range(3)
        ]

    @property
    def frameworks(self) -> list[FrameworkProcess]:
        return [self.a, self.b]

    def whole(self) -> bool:
        """Every agent active, every framework subscribed and with its tasks running."""
        state = cluster_state(self.master.address)
        if state is None:
            return False
        if sorted(agent_states(state).values()).count("ACTIVE") < len(self.agents):
            return False
        disconnected = operator_pb2.GetStateResponse.Framework.STATE_DISCONNECTED
        if len(state.frameworks) < len(self.frameworks) or any(
            f.state == disconnected for f in state.frameworks
        ):
            return False  # agents may be back (and tasks running) before frameworks are
        running = running_tasks(state)
        return all(
            sum(1 for t in running if t.startswith(f"{f.name}-")) == f.tasks
            for f in self.frameworks
        )

    def settle(self, what: str) -> None:
        wait_for(self.whole, SETTLE, what)

    def run(self) -> Tally:
        self.settle("the workload running")
        # 1. kill -9 of an agent, restarted on the same work dir.
        self.agents[0] = restart_agent(self.agents[0], self.master.address, AGENT_RESOURCES)
        self.faults["agent kill -9"] += 1
        self.settle("the workload whole after an agent crash")
        # 2. An agent hangs past the agent timeout, then resumes.
        pause(self.agents[1])
        self.faults["agent SIGSTOP"] += 1
        try:
            wait_for(
                lambda: (
                    (s := cluster_state(self.master.address)) is not None
                    and "UNREACHABLE" in agent_states(s).values()
                ),
                SETTLE,
                "the hung agent unreachable",
            )
        finally:
            resume(self.agents[1])
        self.settle("the workload whole after an agent hang")
        # 3. kill -9 of the master, restarted on the same work dir.
        self.master = restart_master(self.master, *self.flags, env=MASTER_ENV)
        self.faults["master kill -9"] += 1
        self.settle("the workload whole after a master crash")
        if self.io_workers:  # 3b. kill -9 of one I/O worker: its clients reconnect
            kill_io_worker(self.master)
            self.faults["I/O worker kill -9"] += 1
            self.settle("the workload whole after an I/O worker crash")
        # 4. kill -9 of framework B, restarted with its framework id.
        self.b.kill()
        self.b.start(resume=True)
        self.faults["framework kill -9"] += 1
        wait_for(lambda: self.b.subscriptions() >= 3, SETTLE, "B resubscribed")
        self.settle("the workload whole after a framework crash")
        self.faults["dropped acknowledgements"] += self.dropped_acks()
        state = cluster_state(self.master.address)
        assert state is not None
        return tally(self.frameworks, state, self.faults)

    def dropped_acks(self) -> int:
        logs = [self.master.log_path, *self.master.log_path.parent.glob("master.master.log.*")]
        return sum(p.read_text(errors="replace").count("fault.ack.dropped") for p in logs)

    def stop(self) -> None:
        for framework in self.frameworks:
            framework.kill()
        for daemon in [*self.agents, self.master]:
            daemon.kill()

    def daemons(self) -> list[Daemon]:
        return [self.master, *self.agents]


def main() -> int:
    directory = Path(tempfile.mkdtemp(prefix="fairshare-faults-"))
    scenario = Scenario(directory)
    try:
        result = scenario.run()
    finally:
        scenario.stop()
    print("\n".join(result.lines()))
    print(f"logs: {directory}")
    return 0 if not result.lost_unreported else 1


if __name__ == "__main__":
    sys.exit(main())
