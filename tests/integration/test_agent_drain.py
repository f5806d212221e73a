"""Draining an agent end to end (issue 24, item 11), with a real master, two agents, an SDK
framework and the ``fairshare`` commands:

- bad input (an unknown agent, a negative deadline, ``--deadline`` alone) is refused with its
  code and changes nothing;
- ``fairshare agents --drain X --deadline 8s``: X is DRAINING in ``fairshare agents``,
  ``fairshare status`` (text and ``--json``, with the deadline), GetState, the HTTP API's state
  document and ``fairshare_agents{state="draining"}``; no offer of X reaches the framework
  afterwards (any offer in flight is rescinded) while the other agent's keep coming; its two
  tasks run until the deadline and are KILLED at it (never before), then X is DRAINED;
- draining an agent that runs nothing makes it DRAINED at once;
- both states survive a kill -9 and restart of the master (the SQLite registry);
  ``--reactivate`` ends the drain.

Every wait polls with a deadline; every process is stopped at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from daemons import DEFAULT_MASTER_FLAGS, ROOT, Daemon, daemon_env, wait_for
from fairshare.v1 import operator_pb2, operator_pb2_grpc
from faults import agent_states, cluster_state, restart_master
from google.protobuf.duration_pb2 import Duration

from framework_sdk import (
    Framework,
    FrameworkInfo,
    OfferRescinded,
    OffersReceived,
    ResourceVector,
    StatusUpdate,
    TaskSpec,
    TaskState,
)

SETTLE = 60.0
GRACE = 8.0
SHAPE = ResourceVector.parse("cpus:0.5;mem:64")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *args],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


class Prober:
    """A framework that launches two endless tasks on its first offer's agent and declines
    every other offer with a short filter, so offers keep coming: what it saw, and when."""

    def __init__(self, framework: Framework) -> None:
        self.framework = framework
        self.agent_id = ""
        self.offers: list[tuple[float, str, str]] = []  # (received, agent id, offer id)
        self.rescinded: set[str] = set()
        self.updates: list[tuple[float, str, TaskState]] = []
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        async for event in self.framework.events():
            now = time.time()
            if isinstance(event, OffersReceived):
                for offer in event.offers:
                    self.offers.append((now, offer.agent_id, offer.offer_id))
                    if not self.agent_id:
                        self.agent_id = offer.agent_id
                        tasks = [TaskSpec(f"t{i}", SHAPE) for i in (1, 2)]
                        await self.framework.launch(offer, tasks)
                    else:
                        await self.framework.decline(offer, refuse_seconds=0.2)
            elif isinstance(event, OfferRescinded):
                self.rescinded.add(event.offer_id)
            elif isinstance(event, StatusUpdate):
                self.updates.append((now, event.task_id, event.state))

    def states(self, task_id: str) -> list[TaskState]:
        return [state for _, t, state in self.updates if t == task_id]

    async def wait(self, condition: Callable[[], bool], what: str) -> None:
        try:
            async with asyncio.timeout(SETTLE):
                while not condition():
                    await asyncio.sleep(0.1)
        except TimeoutError:
            pytest.fail(f"timed out waiting for {what}; updates: {self.updates}")

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def state_of(master: str, agent_id: str) -> str:
    state = cluster_state(master)
    return "" if state is None else agent_states(state).get(agent_id, "")


def http_state(master: Daemon) -> dict[str, Any]:
    url = f"http://{master.metrics_address}/api/v1/state"
    with urllib.request.urlopen(url, timeout=10) as answer:
        document: dict[str, Any] = json.load(answer)
    return document


def metrics(master: Daemon) -> str:
    with urllib.request.urlopen(f"http://{master.metrics_address}/metrics", timeout=10) as answer:
        text: str = answer.read().decode()
    return text


def drain_rpc(master: str, request: operator_pb2.DrainAgentRequest) -> grpc.StatusCode:
    with grpc.insecure_channel(master) as channel:
        try:
            operator_pb2_grpc.OperatorServiceStub(channel).DrainAgent(request, timeout=10)
        except grpc.RpcError as error:
            return error.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_drain_kills_at_the_deadline_then_drained_and_survives_a_restart(
    master_factory: Callable[..., Daemon], agent_factory: Callable[..., list[Daemon]]
) -> None:
    master = master_factory(*DEFAULT_MASTER_FLAGS)
    agent_factory(master, 2, "cpus:2;mem:512")
    at = ("--master", master.address)

    async def scenario() -> tuple[str, str]:
        info = FrameworkInfo(name="prober", failover_timeout=60.0)
        async with Framework.connect(master.address, info) as connected:
            prober = Prober(connected)
            try:
                await prober.wait(
                    lambda: all(TaskState.RUNNING in prober.states(t) for t in ("t1", "t2")),
                    "t1 and t2 RUNNING",
                )
                x = prober.agent_id
                await prober.wait(lambda: any(a != x for _, a, _ in prober.offers), "offers of Y")
                y = next(a for _, a, _ in prober.offers if a != x)

                # bad input: refused with its code, nothing changes
                unknown = await asyncio.to_thread(cli, "agents", *at, "--drain", "nosuch")
                assert unknown.returncode == 1 and "NOT_FOUND" in unknown.stderr
                negative = await asyncio.to_thread(
                    cli, "agents", *at, "--drain", x, "--deadline=-5s"
                )
                assert negative.returncode == 2
                assert "fairshare agents: --deadline: '-5s'" in negative.stderr
                alone = await asyncio.to_thread(cli, "agents", *at, "--deadline", "5s")
                assert alone.returncode == 2 and "only with --drain" in alone.stderr
                backwards = operator_pb2.DrainAgentRequest(
                    agent_id=x, deadline=Duration(seconds=-5)
                )
                code = await asyncio.to_thread(drain_rpc, master.address, backwards)
                assert code == grpc.StatusCode.INVALID_ARGUMENT
                assert await asyncio.to_thread(state_of, master.address, x) == "ACTIVE"

                drain = await asyncio.to_thread(
                    cli, "agents", *at, "--drain", x, "--deadline", f"{GRACE:g}s"
                )
                returned = time.time()
                assert drain.returncode == 0, drain.stderr
                assert drain.stdout.startswith(f"draining agent {x}: it is offered to nobody")

                listed = await asyncio.to_thread(cli, "agents", *at)
                assert any(line.split()[:1] == [x] and "DRAINING" in line.split()
                           for line in listed.stdout.splitlines()), listed.stdout  # fmt: skip
                status = json.loads((await asyncio.to_thread(cli, "status", *at, "--json")).stdout)
                (doc,) = [a for a in status["agents"] if a["id"] == x]
                assert doc["state"] == "DRAINING" and doc["reachable"]
                deadline = float(doc["drain_deadline"])
                assert returned - 30 < deadline - GRACE <= returned
                text = (await asyncio.to_thread(cli, "status", *at)).stdout
                assert "DRAINING (kill at " in text
                (http,) = [a for a in http_state(master)["agents"] if a["id"] == x]
                assert http["state"] == "DRAINING" and http["drain_deadline"] == pytest.approx(
                    deadline, abs=1e-3
                )
                assert 'fairshare_agents{state="draining"} 1.0' in metrics(master)

                await prober.wait(
                    lambda: all(TaskState.KILLED in prober.states(t) for t in ("t1", "t2")),
                    "t1 and t2 KILLED at the deadline",
                )
                for received, task_id, state in prober.updates:
                    if state is TaskState.KILLED:
                        assert received >= deadline, f"{task_id} killed before the deadline"
                drained = wait_for(
                    lambda: state_of(master.address, x) == "DRAINED", SETTLE, "X DRAINED"
                )
                assert drained
                late = [o for t, a, o in prober.offers if a == x and t > returned]
                assert set(late) <= prober.rescinded, "an offer of X after the drain"
                assert any(a == y and t > returned for t, a, _ in prober.offers)
                return x, y
            finally:
                await prober.close()

    x, y = asyncio.run(scenario())
    state = cluster_state(master.address)
    assert state is not None and not [o for o in state.offers if o.agent_id == x]

    empty = cli("agents", *at, "--drain", y)  # nothing runs on Y: DRAINED at once
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.startswith(f"agent {y} is DRAINED")
    assert state_of(master.address, y) == "DRAINED"
    assert 'fairshare_agents{state="drained"} 2.0' in metrics(master)

    restarted = restart_master(master, *DEFAULT_MASTER_FLAGS)
    try:
        wait_for(
            lambda: {state_of(restarted.address, a) for a in (x, y)} == {"DRAINED"},
            SETTLE,
            "both agents DRAINED after the restart",
        )
        back = cli("agents", "--master", restarted.address, "--reactivate", x)
        assert back.returncode == 0, back.stderr
        assert state_of(restarted.address, x) == "ACTIVE"
        assert state_of(restarted.address, y) == "DRAINED"
    finally:
        restarted.kill()
