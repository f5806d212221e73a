"""Agent maintenance live (Mesos DEACTIVATE_AGENT / REACTIVATE_AGENT) and DRFH on a real cluster.

Real master and agent processes, real ``fairshare run`` frameworks, ``fairshare agents`` and
``fairshare status --json``. A deactivated agent's offers are rescinded and nothing of it is
offered while its tasks run on; reactivating several agents in one call lets one allocation run
see them together. That is how the DRFH test gets the paper's setting (both users and both
servers present at once) without depending on arrival order: offers are never preempted, so an
agent offered alone would be split by whoever is there first.

Every wait polls ``fairshare status`` (or the event stream) with a deadline, never a bare sleep.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import pytest
from daemons import ROOT, Daemon, daemon_env, wait_for
from fairshare.resources import ResourceVector
from fairshare.v1 import operator_pb2
from test_live_cluster import SETTLE, Client, by_name, declared, run_framework, running, status
from wire_fakes import FrameworkConn, operator, rpc_code, vec

R = ResourceVector.parse
SMALL_CPU = "cpus:2;mem:12288"  # DRFH Fig. 2: server 1 <2 CPUs, 12 GB>
BIG_CPU = "cpus:12;mem:2048"  # server 2 <12 CPUs, 2 GB>


@pytest.fixture
def clients(tmp_path: Path) -> Iterator[Callable[..., Client]]:
    """``clients(*argv)`` starts ``python *argv``; every client is killed in teardown."""
    started: list[Client] = []

    def start(*argv: str) -> Client:
        client = Client(list(argv), tmp_path / f"client{len(started)}.log")
        started.append(client)
        return client

    yield start
    for client in started:
        client.kill()


def fairshare_agents(master: Daemon, *argv: str) -> subprocess.CompletedProcess[str]:
    """``fairshare agents --master ADDRESS *argv``."""
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", "agents", "--master", master.address, *argv],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def agent_ids(master: Daemon, *totals: str) -> list[str]:
    """The ids of the pooled agents with these totals (waits until all are in the pool)."""

    def find() -> list[str] | None:
        by_total = {
            ResourceVector(a["resources"]["total"]): a["id"] for a in status(master)["agents"]
        }
        ids = [by_total.get(R(total)) for total in totals]
        return None if None in ids else [i for i in ids if i is not None]

    found: list[str] = wait_for(find, SETTLE, f"agents {totals} in the pool")
    return found


def agent_states(document: dict[str, Any]) -> dict[str, str]:
    return {agent["id"]: agent["state"] for agent in document["agents"]}


def test_drfh_live(
    master: Daemon,
    agent_factory: Callable[..., list[Daemon]],
    clients: Callable[..., Client],
) -> None:
    """DRFH (Wang et al., Fig. 2): servers <2 CPUs, 12 GB> and <12 CPUs, 2 GB>, users
    <0.2 CPU, 1 GB> and <1 CPU, 0.2 GB> each wanting 20 tasks -> 10 and 10 running, each user
    on its matching server, global dominant shares 5/7 each."""
    agent_factory(master, 1, SMALL_CPU)
    agent_factory(master, 1, BIG_CPU)
    s1, s2 = agent_ids(master, SMALL_CPU, BIG_CPU)
    done = fairshare_agents(master, "--deactivate", s1, s2)
    assert done.returncode == 0, done.stderr
    assert agent_states(status(master)) == {s1: "DEACTIVATED", s2: "DEACTIVATED"}
    run_framework(clients, master, "memory-heavy", "cpus:0.2;mem:1024", 20)
    run_framework(clients, master, "cpu-heavy", "cpus:1;mem:204.8", 20)
    wait_for(lambda: declared(master, "memory-heavy", "cpu-heavy"), SETTLE, "demand declared")
    assert not status(master)["offers"]  # nothing is offered while both agents are deactivated
    done = fairshare_agents(master, "--reactivate", s1, s2)
    assert done.returncode == 0, done.stderr

    def settled() -> dict[str, Any] | None:
        document = status(master)
        counts = running(document)
        if counts == {"memory-heavy": 10, "cpu-heavy": 10} and not document["offers"]:
            return document
        return None

    document = wait_for(settled, SETTLE, "10 and 10 running, no offer outstanding")
    frameworks = by_name(document)
    placed = {
        name: {t["agent_id"] for t in document["tasks"] if t["framework_id"] == fw["id"]}
        for name, fw in frameworks.items()
    }
    assert placed == {"memory-heavy": {s1}, "cpu-heavy": {s2}}
    for fw in frameworks.values():
        assert Fraction(fw["dominant_share"]).limit_denominator(100) == Fraction(5, 7)
    assert frameworks["memory-heavy"]["dominant_resource"] == "mem"
    assert frameworks["cpu-heavy"]["dominant_resource"] == "cpus"
    assert set(agent_states(document).values()) == {"ACTIVE"}
    # Settled: further allocation runs (every 200 ms) change nothing while the tasks run.
    for _ in range(3):
        assert running(status(master)) == {"memory-heavy": 10, "cpu-heavy": 10}


def test_deactivated_agent_is_not_offered_while_its_tasks_run_on(
    master: Daemon,
    agent_factory: Callable[..., list[Daemon]],
    clients: Callable[..., Client],
) -> None:
    agent_factory(master, 1, "cpus:4;mem:4096")
    (agent_id,) = agent_ids(master, "cpus:4;mem:4096")
    run_framework(clients, master, "svc", "cpus:1;mem:512", 2)
    wait_for(lambda: running(status(master)) == {"svc": 2}, SETTLE, "svc 2 running")
    with grpc.insecure_channel(master.address) as channel:
        holder = FrameworkConn(channel, "holder")  # coarse offers, never accepts
        (offer,) = holder.offers()
        assert offer.agent_id == agent_id
        assert vec(offer.resources) == R("cpus:2;mem:3072")

        done = fairshare_agents(master, "--deactivate", agent_id)
        assert done.returncode == 0, done.stderr
        assert holder.take("rescind").offer_id == offer.offer_id
        for _ in range(3):  # each status call spans allocation runs: none offers the agent
            document = status(master)
            assert not document["offers"] and running(document)["svc"] == 2
            assert agent_states(document) == {agent_id: "DEACTIVATED"}
        (view,) = document["agents"]
        assert view["reachable"] and view["resources"]["used"] == {"cpus": 2.0, "mem": 1024.0}
        assert document["total"] == {"cpus": 4.0, "mem": 4096.0}  # still in the pool
        holder.assert_no("offers", within=0.5)

        done = fairshare_agents(master, "--reactivate", agent_id)
        assert done.returncode == 0, done.stderr
        (again,) = holder.offers()
        assert again.agent_id == agent_id and vec(again.resources) == R("cpus:2;mem:3072")
        assert running(status(master))["svc"] == 2
        holder.close()


def test_bad_maintenance_requests_change_nothing(
    master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    agent_factory(master, 1, "cpus:1;mem:1024")
    (agent_id,) = agent_ids(master, "cpus:1;mem:1024")
    with grpc.insecure_channel(master.address) as channel:
        stub = operator(channel)
        deactivate, reactivate = stub.DeactivateAgents, stub.ReactivateAgents
        refused: list[tuple[Callable[..., Any], Any, str]] = [
            (deactivate, operator_pb2.DeactivateAgentsRequest(), "INVALID_ARGUMENT"),
            (deactivate, operator_pb2.DeactivateAgentsRequest(agent_ids=[agent_id, ""]),
             "INVALID_ARGUMENT"),
            (deactivate, operator_pb2.DeactivateAgentsRequest(agent_ids=[agent_id, "ag-x"]),
             "NOT_FOUND"),
            (reactivate, operator_pb2.ReactivateAgentsRequest(), "INVALID_ARGUMENT"),
            (reactivate, operator_pb2.ReactivateAgentsRequest(agent_ids=["ag-x"]), "NOT_FOUND"),
        ]  # fmt: skip
        for method, request, code in refused:
            assert rpc_code(partial(method, request, timeout=10)) == grpc.StatusCode[code]
    assert agent_states(status(master)) == {agent_id: "ACTIVE"}
    done = fairshare_agents(master, "--deactivate", agent_id, "ag-unknown")
    assert done.returncode == 1
    assert "NOT_FOUND" in done.stderr and "ag-unknown" in done.stderr
    done = fairshare_agents(master, "--reactivate", " ")
    assert done.returncode == 2 and "--reactivate" in done.stderr
    assert agent_states(status(master)) == {agent_id: "ACTIVE"}
    # Idempotent: deactivating twice, reactivating twice.
    for flag, state in (("--deactivate", "DEACTIVATED"), ("--reactivate", "ACTIVE")):
        for _ in range(2):
            done = fairshare_agents(master, flag, agent_id)
            assert done.returncode == 0, done.stderr
        assert agent_states(status(master)) == {agent_id: state}
