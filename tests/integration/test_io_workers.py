"""``fairshare master --io-workers 2``: real agents, ``fairshare run`` and
``fairshare status`` through the workers; a worker killed -9 costs its agents a reconnection and
nothing else (no task lost, none launched twice); the workers go with the master.

The workers serve the master's one public port (SO_REUSEPORT): every client here is given the
address of ``master.addr``, as with one process. What authentication and the ACL do through a
worker is ``test_authorization``'s (its every-RPC test runs with workers too).
"""

from __future__ import annotations

import os
import re
import signal
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import grpc
from daemons import DEFAULT_MASTER_FLAGS, Client, Daemon, fairshare_status, wait_for
from fairshare.v1 import common_pb2 as C
from wire_fakes import get_state

WORKER_FLAGS = (*DEFAULT_MASTER_FLAGS, "--io-workers", "2")
RUNNING = C.TASK_STATE_RUNNING


def worker_pids(master: Daemon) -> list[int]:
    """The master's child processes now (its I/O workers)."""
    pids: list[int] = []
    for task in Path(f"/proc/{master.proc.pid}/task").iterdir():
        try:
            pids += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return pids


def alive(pid: int) -> bool:
    """The process ``pid`` exists and is not a zombie."""
    try:
        return " Z " not in Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1][:3]
    except OSError:
        return False


def running_tasks(address: str) -> dict[str, str]:
    """``{task_id: agent_id}`` of the RUNNING tasks, from GetState through a worker."""
    with grpc.insecure_channel(address) as channel:
        state = get_state(channel)
    return {t.info.task_id: t.info.agent_id for t in state.tasks if t.status.state == RUNNING}


def active_agents(address: str) -> int:
    """Agents ACTIVE in ``fairshare status`` (an Operator call through a worker)."""
    agents = fairshare_status(address)["agents"]
    return sum(1 for a in agents if a["state"] == "ACTIVE")


def start_run(clients: Callable[..., Client], address: str, count: int) -> Client:
    """``fairshare run`` keeping ``count`` tasks; its failover timeout lets it resubscribe after
    a broken connection (without one, its tasks end with its stream, workers or not)."""
    return clients(
        "-m", "fairshare.cli", "run", "--master", address, "--name", "web",
        "--task", "cpus:0.5;mem:64", "--count", str(count), "--failover-timeout", "60s",
    )  # fmt: skip


def test_agents_run_and_status_through_two_workers(
    master_factory: Callable[..., Daemon],
    agent_factory: Callable[..., list[Daemon]],
    clients: Callable[..., Client],
) -> None:
    master = master_factory(*WORKER_FLAGS)
    assert len(worker_pids(master)) == 2
    assert master.log().count("io_worker.linked") == 2
    agents = agent_factory(master, 3, "cpus:2;mem:1024")
    wait_for(lambda: active_agents(master.address) == 3, 20, "3 agents ACTIVE in status")
    start_run(clients, master.address, 4)
    wait_for(lambda: len(running_tasks(master.address)) == 4, 30, "4 tasks RUNNING")
    document = fairshare_status(master.address)
    frameworks = document["frameworks"]
    assert [f["tasks"].get("RUNNING") for f in frameworks] == [4]
    assert {a.log().count("master.connected") for a in agents} == {1}  # nothing reconnected
    url = f"http://{master.metrics_address}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        metrics = response.read().decode()
    series = re.findall(r"^fairshare_io_worker_queue_depth\{(.*)\} ", metrics, re.MULTILINE)
    labels = sorted(tuple(sorted(re.findall(r'(\w+)="(\w+)"', s))) for s in series)
    assert labels == [
        (("direction", d), ("worker", w)) for d in ("to_core", "to_worker") for w in "01"
    ]
    # The calls the workers served themselves are counted by the core as in one process.
    wait_for(
        lambda: (
            rpc_count(master, "SchedulerService/Accept") >= 1
            and rpc_count(master, "OperatorService/GetState") >= 1
        ),
        10,
        "the workers' calls counted in fairshare_rpc_requests_total",
    )


def rpc_count(master: Daemon, method: str, code: str = "OK") -> float:
    """``fairshare_rpc_requests_total`` of ``method`` and ``code`` on the master's /metrics."""
    url = f"http://{master.metrics_address}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        metrics = response.read().decode()
    labels = f'{{code="{code}",method="{method}"}}'
    found = re.search(rf"^fairshare_rpc_requests_total{re.escape(labels)} (\S+)$", metrics, re.M)
    return float(found.group(1)) if found else 0.0


def test_a_worker_killed_costs_only_reconnections(
    master_factory: Callable[..., Daemon],
    agent_factory: Callable[..., list[Daemon]],
    clients: Callable[..., Client],
) -> None:
    master = master_factory(*WORKER_FLAGS)
    agents = agent_factory(master, 4, "cpus:2;mem:1024")
    wait_for(lambda: active_agents(master.address) == 4, 20, "4 agents ACTIVE")
    run = start_run(clients, master.address, 6)
    before = wait_for(
        lambda: (tasks := running_tasks(master.address)) and len(tasks) == 6 and tasks,
        30,
        "6 tasks RUNNING",
    )
    # Kill workers one at a time until one that served agents is gone (the kernel chose).
    ended = 0
    killed: list[int] = []
    for _ in range(4):
        pid = next(p for p in worker_pids(master) if p not in killed)
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
        wait_for(lambda pid=pid: not alive(pid), 10, "the worker gone")  # type: ignore[misc]
        wait_for(lambda: len(worker_pids(master)) == 2, 20, "the worker started again")
        wait_for(lambda: master.log().count("io_worker.linked") == 2 + len(killed), 20, "linked")
        ended = sum(
            int(n) for n in re.findall(r"io_worker.unlinked .*sessions_ended=(\d+)", master.log())
        )
        if ended:
            break
    assert ended >= 1, "no worker served an agent"
    wait_for(
        lambda: sum(a.log().count("master.connected") for a in agents) >= 4 + ended,
        30,
        "the cut agents reconnected",
    )
    wait_for(lambda: active_agents(master.address) == 4, 30, "4 agents ACTIVE again")
    time.sleep(1.0)  # let any loss or duplicate show (a lost task would be replaced)
    after = running_tasks(master.address)
    assert after == before  # the same tasks on the same agents: none lost, none replaced
    launched = Counter(
        match
        for agent in agents
        for match in re.findall(r"task.state.changed \S+ task_id=(\S+) state=RUNNING", agent.log())
    )
    assert launched == Counter(dict.fromkeys(before, 1))  # each task RUNNING once on the agents
    assert "agent.reregistered" in master.log()
    assert run.proc.poll() is None


def test_the_workers_go_with_the_master(master_factory: Callable[..., Daemon]) -> None:
    stopped = master_factory(*WORKER_FLAGS)
    workers = worker_pids(stopped)
    assert stopped.stop() == 0
    wait_for(lambda: not any(alive(p) for p in workers), 10, "workers exited with a stop")
    killed = master_factory(*WORKER_FLAGS)
    workers = worker_pids(killed)
    assert len(workers) == 2
    killed.kill()  # kill -9: the workers' parent-death signal takes them
    wait_for(lambda: not any(alive(p) for p in workers), 10, "workers exited with a kill -9")
