"""Operator commands against real processes (issue 16 items 3 and 9): ``fairshare frameworks
[--teardown]``, ``fairshare tasks [--framework] [--state] [--kill]``, ``fairshare agents
[--remove]``, ``fairshare stop``, ``fairshare weights [list]``, and the Operator RPCs behind
them with their precise error codes; ``status`` pointed at an agent's port says so."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import grpc
from daemons import (
    DEFAULT_MASTER_FLAGS,
    ROOT,
    Client,
    Daemon,
    daemon_env,
    fairshare_status,
    wait_for,
)
from fairshare.v1 import operator_pb2
from faults import restart_master
from test_live_cluster import SETTLE, run_framework
from wire_fakes import operator, rpc_code


def fairshare(*argv: str) -> subprocess.CompletedProcess[str]:
    """``fairshare *argv`` as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *argv],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def running(master: Daemon, name: str, count: int) -> dict[str, Any] | None:
    document = fairshare_status(master.address)
    mine = [f for f in document["frameworks"] if f["name"] == name]
    if len(mine) == 1 and mine[0]["tasks"].get("RUNNING") == count:
        return mine[0]
    return None


def test_frameworks_tasks_kill_and_teardown(
    master: Daemon, agent_factory: Callable[..., list[Daemon]], clients: Callable[..., Client]
) -> None:
    agent_factory(master, 1, "cpus:4;mem:8192")
    run_framework(clients, master, "batch", "cpus:1;mem:1024", 2)
    framework = wait_for(lambda: running(master, "batch", 2), SETTLE, "batch running 2 tasks")
    listed = fairshare("frameworks", "--master", master.address)
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split()[:4] == ["FRAMEWORK", "NAME", "ROLE", "STATE"]
    assert row.split()[:4] == [framework["id"], "batch", "*", "SUPPRESSED"]  # has all it wants
    assert "2/2" in row

    tasks = fairshare("tasks", "--master", master.address, "--framework", "batch")
    assert tasks.returncode == 0, tasks.stderr
    rows = tasks.stdout.splitlines()[1:]
    assert len(rows) == 2 and all("RUNNING" in r for r in rows)
    victim = rows[0].split()[0]
    none = fairshare("tasks", "--master", master.address, "--state", "finished")
    assert none.stdout.splitlines()[1:] == ["(no tasks)"]

    killed = fairshare("tasks", "--master", master.address, "--kill", victim)
    assert killed.returncode == 0, killed.stderr
    assert f"killing task {victim}" in killed.stdout
    wait_for(
        lambda: victim not in {t["task_id"] for t in fairshare_status(master.address)["tasks"]},
        SETTLE,
        f"{victim} ended",
    )
    again = fairshare("tasks", "--master", master.address, "--kill", victim)
    assert again.returncode == 1 and "no task" in again.stderr

    down = fairshare("frameworks", "--master", master.address, "--teardown", framework["id"])
    assert down.returncode == 0, down.stderr
    document = wait_for(
        lambda: (
            (d := fairshare_status(master.address))["frameworks"] == [] and not d["tasks"] and d
        ),
        SETTLE,
        "batch removed with its tasks",
    )
    assert document["used"] == {}
    unknown = fairshare("frameworks", "--master", master.address, "--teardown", framework["id"])
    assert unknown.returncode == 1 and "NOT_FOUND" in unknown.stderr


def test_stop_by_name_and_operator_rpc_errors(
    master: Daemon, agent_factory: Callable[..., list[Daemon]], clients: Callable[..., Client]
) -> None:
    agent_factory(master, 1)
    run_framework(clients, master, "svc", "cpus:1;mem:512", 1)
    wait_for(lambda: running(master, "svc", 1), SETTLE, "svc running")
    missing = fairshare("stop", "--master", master.address, "nosuch")
    assert missing.returncode == 1 and "no framework is named 'nosuch'" in missing.stderr
    stopped = fairshare("stop", "--master", master.address, "svc")
    assert stopped.returncode == 0 and stopped.stdout.startswith("stopped svc"), stopped.stderr
    wait_for(lambda: not fairshare_status(master.address)["frameworks"], SETTLE, "svc gone")

    with grpc.insecure_channel(master.address) as channel:
        stub = operator(channel)
        teardown = operator_pb2.TeardownFrameworkRequest
        assert (
            rpc_code(lambda: stub.TeardownFramework(teardown())) == grpc.StatusCode.INVALID_ARGUMENT
        )
        assert rpc_code(lambda: stub.TeardownFramework(teardown(framework_id="fw-x"))) == (
            grpc.StatusCode.NOT_FOUND
        )
        kill = operator_pb2.KillTaskRequest
        assert rpc_code(lambda: stub.KillTask(kill(framework_id="fw-x", task_id="t"))) == (
            grpc.StatusCode.NOT_FOUND
        )
        assert rpc_code(lambda: stub.KillTask(kill(task_id="t"))) == (
            grpc.StatusCode.INVALID_ARGUMENT
        )
        remove = operator_pb2.RemoveAgentRequest
        assert rpc_code(lambda: stub.RemoveAgent(remove())) == grpc.StatusCode.INVALID_ARGUMENT
        assert rpc_code(lambda: stub.RemoveAgent(remove(agent_id="ag-x"))) == (
            grpc.StatusCode.NOT_FOUND
        )


def test_agents_listing_and_removal_of_an_unreachable_agent_is_durable(
    master_factory: Callable[..., Daemon], agent_factory: Callable[..., list[Daemon]]
) -> None:
    flags = (*DEFAULT_MASTER_FLAGS, "--agent-timeout", "1s")
    master = master_factory(*flags)
    stays, leaves = agent_factory(master, 2, "cpus:2;mem:1024", "--attributes", "rack:r1")
    wait_for(lambda: len(fairshare_status(master.address)["agents"]) == 2, SETTLE, "2 agents")
    listed = fairshare("agents", "--master", master.address)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].split()[:4] == ["AGENT", "ADDRESS", "STATE", "ATTRIBUTES"]
    assert sum("ACTIVE" in r and "rack:r1" in r for r in listed.stdout.splitlines()) == 2

    ids = [a["id"] for a in fairshare_status(master.address)["agents"]]
    connected = fairshare("agents", "--master", master.address, "--remove", ids[0])
    assert connected.returncode == 1 and "FAILED_PRECONDITION" in connected.stderr
    leaves.kill()

    def unreachable() -> str | None:
        states = {a["id"]: a["state"] for a in fairshare_status(master.address)["agents"]}
        lost = [i for i, s in states.items() if s == "UNREACHABLE"]
        return lost[0] if lost else None

    lost = wait_for(unreachable, SETTLE, "an agent unreachable")
    removed = fairshare("agents", "--master", master.address, "--remove", lost)
    assert removed.returncode == 0, removed.stderr
    assert [a["id"] for a in fairshare_status(master.address)["agents"]] == [
        i for i in ids if i != lost
    ]
    twice = fairshare("agents", "--master", master.address, "--remove", lost)
    assert twice.returncode == 1 and "already removed" in twice.stderr

    master = restart_master(master, *flags)  # durable: still removed after a restart
    wait_for(
        lambda: (
            [a["id"] for a in fairshare_status(master.address)["agents"]]
            == [i for i in ids if i != lost]
        ),
        SETTLE,
        "only the remaining agent listed after the restart",
    )
    assert stays.proc.poll() is None


def test_weights_list_and_status_at_an_agent_port(
    master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    empty = fairshare("weights", "--master", master.address)
    assert empty.returncode == 0 and "no weights set" in empty.stdout
    listed = fairshare("weights", "list", "--master", master.address)  # the README's hint
    assert listed.returncode == 0 and "no weights set" in listed.stdout, listed.stderr
    (agent,) = agent_factory(master, 1)
    for command in (["status"], ["frameworks"], ["agents"], ["weights"]):
        wrong = fairshare(*command, "--master", agent.address)
        assert wrong.returncode == 1, command
        assert "is not a fairshare master" in wrong.stderr, (command, wrong.stderr)
        assert "Method not found" not in wrong.stderr
