"""Helpers of the fault tests: framework processes that log every event, daemon restarts with
the same work dir (kill -9 first), cluster state over gRPC, and the fault tally.

The tally counts, per framework log (``fault_framework.py``): tasks launched; tasks accounted
for (running now, by the master's GetState, or ended with a terminal update the framework
received); tasks lost without a report (neither) - the number that must be 0.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import daemons
import grpc
from daemons import ROOT, Daemon, daemon_env, start_master
from fairshare.v1 import common_pb2 as C
from fairshare.v1 import operator_pb2
from wire_fakes import get_state

FRAMEWORK_SCRIPT = Path(__file__).with_name("fault_framework.py")
AGENT_STATE = operator_pb2.GetStateResponse.Agent.State


class FrameworkProcess:
    """A ``fault_framework.py`` process and its JSON-lines log."""

    def __init__(
        self,
        master: str,
        name: str,
        task: str,
        tasks: int,
        directory: Path,
        duration: float | None = None,
        wrap: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.wrap = list(wrap)  # a command prefix: ip netns exec NAME
        self.duration = duration
        self.master = master
        self.task = task
        self.tasks = tasks
        self.log_path = directory / f"{name}.jsonl"
        self.out_path = directory / f"{name}.out"
        self.proc: subprocess.Popen[bytes] | None = None
        daemons.STARTED.append(self)  # killed in the test's teardown whatever happens
        self.start(resume=False)

    def start(self, resume: bool = True, failover_timeout: float = 120.0) -> None:
        """Start (or, with ``resume``, restart from its log) the framework process."""
        argv = [*self.wrap, sys.executable, str(FRAMEWORK_SCRIPT), "--master", self.master]
        argv += ["--name", self.name, "--task", self.task, "--tasks", str(self.tasks)]
        argv += ["--log", str(self.log_path), "--failover-timeout", str(failover_timeout)]
        if self.duration is not None:
            argv += ["--duration", str(self.duration)]
        if resume:
            argv.append("--resume")
        with self.out_path.open("ab") as out:
            self.proc = subprocess.Popen(
                argv, cwd=ROOT, env=daemon_env(), stdin=subprocess.DEVNULL, stdout=out, stderr=out
            )

    def kill(self) -> None:
        """SIGKILL (no teardown: the master keeps the framework for its failover timeout)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def records(self) -> list[dict[str, Any]]:
        """Every record written so far."""
        if not self.log_path.exists():
            return []
        lines = self.log_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def launched(self) -> list[str]:
        """Task ids launched (in order; a failed launch call is not counted)."""
        records = self.records()
        failed = {t for r in records if r["kind"] == "launch_failed" for t in r["tasks"]}
        return [
            r["task_id"] for r in records if r["kind"] == "launch" and r["task_id"] not in failed
        ]

    def updates(self, task_id: str | None = None) -> list[dict[str, Any]]:
        """Status updates received (of one task)."""
        return [
            r
            for r in self.records()
            if r["kind"] == "update" and (task_id is None or r["task_id"] == task_id)
        ]

    def latest(self) -> dict[str, str]:
        """The latest state the framework was told, per task id."""
        return {r["task_id"]: r["state"] for r in self.updates()}

    def framework_id(self) -> str:
        ids = [r["framework_id"] for r in self.records() if r["kind"] == "subscribed"]
        return ids[-1] if ids else ""

    def subscriptions(self) -> int:
        return sum(1 for r in self.records() if r["kind"] == "subscribed")


def registered(agents: Sequence[Daemon]) -> bool:
    """Every agent has its id from the master: it logged ``agent.registered`` (or
    ``agent.reregistered``) once it had saved the answer. The master marks an agent ACTIVE before
    its answer arrives; killed in between, the master leaves the agent to register afresh."""
    return all(
        "agent.registered" in log or "agent.reregistered" in log
        for log in (agent.log() for agent in agents)
    )


def restart_master(old: Daemon, *flags: str, env: dict[str, str] | None = None) -> Daemon:
    """kill -9 ``old`` (if alive) and start a master on the same work dir and port."""
    old.kill()
    port = old.address.rsplit(":", 1)[1]
    _keep_log(old)
    return start_master(old.work_dir, "--port", port, *flags, env=env)


def kill_io_worker(master: Daemon) -> int:
    """kill -9 one of the master's I/O workers (``--io-workers``); its pid."""
    children: list[int] = []
    for task in Path(f"/proc/{master.proc.pid}/task").iterdir():
        with contextlib.suppress(OSError):
            children += [int(p) for p in (task / "children").read_text().split()]
    if not children:
        raise AssertionError("the master has no I/O worker to kill")
    os.kill(children[0], signal.SIGKILL)
    return children[0]


def restart_agent(old: Daemon, master_address: str, resources: str, *flags: str) -> Daemon:
    """kill -9 ``old`` (if alive) and start an agent on the same work dir."""
    old.kill()
    return daemons.restart_agent(old, master_address, *flags, resources=resources)


def _keep_log(daemon: Daemon) -> None:
    n = 1
    while daemon.log_path.with_name(f"{daemon.log_path.name}.{n}").exists():
        n += 1
    os.replace(daemon.log_path, daemon.log_path.with_name(f"{daemon.log_path.name}.{n}"))


def pause(daemon: Daemon) -> None:
    """SIGSTOP: the process hangs (no heartbeats, no answers)."""
    daemon.signal(signal.SIGSTOP)


def resume(daemon: Daemon) -> None:
    """SIGCONT."""
    daemon.signal(signal.SIGCONT)


def cluster_state(address: str) -> operator_pb2.GetStateResponse | None:
    """GetState, or None while the master does not answer."""
    try:
        with grpc.insecure_channel(address) as channel:
            return get_state(channel)
    except grpc.RpcError:
        return None


def running_tasks(state: operator_pb2.GetStateResponse) -> dict[str, str]:
    """``{task_id: agent_id}`` of the tasks the master knows RUNNING."""
    running = C.TASK_STATE_RUNNING
    return {t.info.task_id: t.info.agent_id for t in state.tasks if t.status.state == running}


def agent_states(state: operator_pb2.GetStateResponse) -> dict[str, str]:
    """``{agent_id: "ACTIVE" | "UNREACHABLE" | ...}``."""
    return {a.agent_id: AGENT_STATE.Name(a.state).removeprefix("STATE_") for a in state.agents}


@dataclass
class Tally:
    """The fault tally of one run."""

    faults: Counter[str] = field(default_factory=Counter)
    launched: int = 0
    running: int = 0
    ended_reported: int = 0
    lost_unreported: list[str] = field(default_factory=list)
    duplicate_launches: int = 0
    duplicate_updates: int = 0

    @property
    def accounted(self) -> int:
        return self.running + self.ended_reported

    def lines(self) -> list[str]:
        faults = ", ".join(f"{kind} {count}" for kind, count in sorted(self.faults.items()))
        return [
            f"faults injected:              {sum(self.faults.values())} ({faults})",
            f"tasks launched:               {self.launched}",
            f"tasks accounted for:          {self.accounted}"
            f" (running {self.running}, ended and reported {self.ended_reported})",
            f"tasks lost without a report:  {len(self.lost_unreported)}"
            + (f" {sorted(self.lost_unreported)}" if self.lost_unreported else ""),
            f"tasks launched twice:         {self.duplicate_launches}",
            f"updates delivered twice:      {self.duplicate_updates}",
        ]


def tally(
    frameworks: list[FrameworkProcess], state: operator_pb2.GetStateResponse, faults: Counter[str]
) -> Tally:
    """Account for every task the frameworks launched, against the master's final state."""
    result = Tally(faults=faults)
    running = running_tasks(state)
    for framework in frameworks:
        launched = framework.launched()
        result.launched += len(launched)
        result.duplicate_launches += len(launched) - len(set(launched))
        seen = Counter((r["task_id"], r["uuid"]) for r in framework.updates() if r["uuid"])
        result.duplicate_updates += sum(count - 1 for count in seen.values())
        terminal = {r["task_id"] for r in framework.updates() if r["terminal"]}
        for task_id in dict.fromkeys(launched):
            if task_id in terminal:
                result.ended_reported += 1
            elif task_id in running:
                result.running += 1
            else:
                result.lost_unreported.append(f"{framework.name}:{task_id}")
    return result
