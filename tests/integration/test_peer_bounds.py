"""Bounds everywhere a peer can write (issue 23, finding 5), against real masters over gRPC.

Before: task labels (3 tasks of 7.9 MB) and agent attributes (2 agents of 9 MB) pushed GetState
over 16 MiB, so ``status``, ``tasks``, ``agents`` and ``logs`` failed for everyone (a traceback
per call) and new subscriptions died on their first offers event, also after a master restart;
50 agents of one principal at the per-agent cap flattened every share; resource names outside
the cap list were uncapped (22,093 metric series). Now each is refused at the source with its
precise code and nothing changes, or (what the bounds still allow in sum) a GetState is trimmed
by its stated rule and an offers event split, and the legitimate owner is still served.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from daemons import (
    DEFAULT_MASTER_FLAGS,
    Daemon,
    fairshare_status,
    start_master,
    wait_for,
)
from fairshare.transport import CHANNEL_OPTIONS, MAX_MESSAGE_BYTES
from fairshare.v1 import agent_pb2, common_pb2
from secure import Pki, channel, fairshare_cli, start_secure_master
from wire_fakes import FakeAgent, FrameworkConn, get_state, res

C = common_pb2
Code = grpc.StatusCode
BIG = 9 * 1024 * 1024
INTERNAL_ERRORS = ("Traceback", "rpc.failed", "timer.failed")


def _refused(call: Callable[[], Any]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    error: Any = caught.value
    return error.code(), error.details()


def _attributes(total: int, count: int = 1) -> list[common_pb2.Attribute]:
    return [C.Attribute(name=f"a{i:03}", value="v" * (total // count)) for i in range(count)]


def _agent_with(
    grpc_channel: grpc.Channel, resources: str, attributes: list[common_pb2.Attribute]
) -> FakeAgent:
    """A fake agent registering with ``attributes`` (FakeAgent registers without any)."""

    class Attributed(FakeAgent):
        def _connect(self, first: agent_pb2.ConnectRequest) -> agent_pb2.AgentRegistered:
            self.info.attributes.extend(attributes)
            first.register.agent_info.attributes.extend(attributes)
            return super()._connect(first)

    return Attributed(grpc_channel, resources)


@pytest.fixture
def insecure(master: Daemon) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(master.address) as opened:
        yield opened


def test_labels_attributes_names_and_messages_are_bounded_at_the_source(
    insecure: grpc.Channel,
) -> None:
    """9 MB of attributes, 40 resource names, a 100 KB resource name: INVALID_ARGUMENT naming
    the field, nothing registered; 7.9 MB of labels at Accept: INVALID_ARGUMENT, nothing
    launched, and the owner launches on the same offer; a reregistration bringing 9 MB of
    attributes is refused and the agent keeps its row; a 1 MB status message is cut to 4096
    characters on its way to the framework."""
    code, details = _refused(lambda: _agent_with(insecure, "cpus:4;mem:64", _attributes(BIG)))
    assert code == Code.INVALID_ARGUMENT and "agent_info.attributes" in details, details
    many = ";".join(f"r{i:02}:1" for i in range(40))
    code, details = _refused(lambda: FakeAgent(insecure, many))
    assert code == Code.INVALID_ARGUMENT
    assert "agent_info.resources: more than 32 resource names" in details, details
    code, details = _refused(lambda: FakeAgent(insecure, f"cpus:1;{'r' * 100_000}:1"))
    assert code == Code.INVALID_ARGUMENT and "at most 64" in details, details
    assert not get_state(insecure).agents

    agent = FakeAgent(insecure, "cpus:4;mem:4096")
    framework = FrameworkConn(insecure, "owner")
    offer = framework.offers()[0]
    labelled = C.TaskInfo(task_id="big", resources=res("cpus:1;mem:64"))
    labelled.labels.update({f"k{i}": "x" * 3000 for i in range(2700)})  # 7.9 MB
    code, details = _refused(lambda: framework.accept([offer.offer_id], [labelled]))
    assert code == Code.INVALID_ARGUMENT and "task 'big': labels: more than " in details
    assert not get_state(insecure).tasks
    small = C.TaskInfo(task_id="small", resources=res("cpus:1;mem:64"), labels={"team": "a"})
    framework.accept([offer.offer_id], [small])
    agent.take("launch_tasks")
    running = framework.take("update", status__task_id="small", status__state=C.TASK_STATE_RUNNING)
    framework.ack(running.status)

    status = C.TaskStatus(
        task_id="small",
        agent_id=agent.agent_id,
        state=C.TASK_STATE_RUNNING,
        uuid=uuid.uuid4().bytes,
        source=C.TaskStatus.SOURCE_AGENT,
        message="m" * 1_000_000,
    )
    status.timestamp.GetCurrentTime()
    update = agent_pb2.StatusUpdate(
        framework_id=framework.id, status=status, latest_state=C.TASK_STATE_RUNNING
    )
    agent.send(agent_pb2.ConnectRequest(updates=agent_pb2.StatusUpdates(updates=[update])))
    told = framework.take("update", status__uuid=status.uuid)
    assert told.status.message == "m" * 4096

    other = FakeAgent(insecure, "cpus:1;mem:64")
    other.info.attributes.extend(_attributes(BIG))
    code, details = _refused(other.reconnect)
    assert code == Code.INVALID_ARGUMENT and "agent_info.attributes" in details, details
    listed = {a.agent_id: a for a in get_state(insecure).agents}
    assert not listed[other.agent_id].agent_info.attributes
    assert [t.info.labels["team"] for t in get_state(insecure).tasks] == ["a"]


def test_the_agents_of_one_principal_are_capped_together_and_names_are_bounded(
    tmp_path: Path,
) -> None:
    """A rogue agent principal registers agents until its sum reaches
    ``--max-principal-resources``: the next is INVALID_ARGUMENT naming the flag, the pool
    unchanged, the owner's frameworks still offered the legitimate agent; an agent bringing the
    cluster past ``--max-resource-names`` is RESOURCE_EXHAUSTED."""
    pki = Pki(tmp_path / "pki")
    master = start_secure_master(
        tmp_path / "master",
        pki,
        "--max-principal-resources",
        "cpus:100;mem:1048576;*:10",
        "--max-resource-names",
        "4",
        "--agent-timeout",
        "10m",
    )
    try:
        with (
            channel(master.address, pki.security("rack-9")) as rogue,
            channel(master.address, pki.security("agent-1")) as legit,
            channel(master.address, pki.security("batch")) as tenant,
        ):
            for _ in range(2):
                FakeAgent(rogue, "cpus:40;mem:1024")
            code, details = _refused(lambda: FakeAgent(rogue, "cpus:40;mem:1024"))
            assert code == Code.INVALID_ARGUMENT, details
            assert "agents of principal 'rack-9' to 120" in details, details
            assert "--max-principal-resources cpus:100" in details, details
            code, details = _refused(lambda: FakeAgent(rogue, "cpus:1;mem:1;gpus:11"))
            assert code == Code.INVALID_ARGUMENT and "--max-principal-resources *:10" in details
            code, details = _refused(lambda: FakeAgent(rogue, "cpus:1;mem:1;x1:1;x2:1;x3:1"))
            assert code == Code.RESOURCE_EXHAUSTED and "--max-resource-names" in details

            state = get_state(tenant)
            assert len(state.agents) == 2
            total = {item.name: item.millis for item in state.total.items}
            assert total["cpus"] == 80_000
            own = FakeAgent(legit, "cpus:40;mem:1024")  # another principal: its own sum
            framework = FrameworkConn(tenant, "batch")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                offers = framework.offers(timeout=30)
                if own.agent_id in {offer.agent_id for offer in offers}:
                    break
                framework.decline([offer.offer_id for offer in offers], refuse=3600)
            else:
                raise AssertionError("the legitimate agent was never offered")
        assert not any(mark in master.log() for mark in INTERNAL_ERRORS), master.log()
    finally:
        master.kill()


def _launch_labelled(framework: FrameworkConn, offer: common_pb2.Offer, count: int) -> None:
    tasks = []
    for n in range(count):
        info = C.TaskInfo(task_id=f"{offer.agent_id[-6:]}-{n}", resources=res("cpus:0.1;mem:1"))
        info.labels.update({f"k{i:03}": "x" * 500 for i in range(120)})  # 60 KB
        info.process.argv.extend(["/bin/true", "y" * 120_000])
        tasks.append(info)
    framework.accept([offer.offer_id], tasks)


def test_every_bound_filled_still_serves_status_tasks_agents_logs_and_offers(
    master_factory: Callable[..., Daemon],
    agent_factory: Callable[..., list[Daemon]],
) -> None:
    """280 agents with 64 KB of attributes each and 60 tasks with 60 KB of labels and 120 KB of
    command each (every bound nearly full; 29 MB of state): GetState answers within the
    message limit saying what it left out, ``fairshare status``, ``tasks``, ``agents``, ``run``
    and ``logs`` work, and a new subscription gets every agent's offer in events each within
    the limit. No traceback is logged."""
    master = master_factory(*DEFAULT_MASTER_FLAGS, "--agent-timeout", "10m")
    agent_factory(master, 1, "cpus:2;mem:1024")
    with grpc.insecure_channel(master.address, options=CHANNEL_OPTIONS) as insecure:
        fakes = [
            _agent_with(insecure, "cpus:1;mem:32", _attributes(64_000, count=128))
            for _ in range(280)
        ]
        filler = FrameworkConn(insecure, "filler")
        offers: dict[str, common_pb2.Offer] = {}
        deadline = time.monotonic() + 120
        while len(offers) < 281 and time.monotonic() < deadline:
            offers.update({o.agent_id: o for o in filler.offers(timeout=60)})
        assert len(offers) == 281
        for fake in fakes[:6]:
            _launch_labelled(filler, offers.pop(fake.agent_id), 10)
        filler.decline([o.offer_id for o in offers.values()], refuse=3600)

        state = get_state(insecure)
        assert state.ByteSize() <= MAX_MESSAGE_BYTES
        assert list(state.trimmed[:2]) == ["task details", "agent attributes"], state.trimmed
        assert len(state.agents) == 281 and len(state.tasks) == 60
        document = fairshare_status(master.address)
        assert len(document["agents"]) == 281
        assert document["trimmed"][:2] == ["task details", "agent attributes"]
        for command in ("agents", "tasks"):
            done = fairshare_cli(command, "--master", master.address, timeout=60)
            assert done.returncode == 0, done.stderr
        assert "left out, to fit one message: task details" in done.stderr  # of tasks
        run = fairshare_cli(
            "run", "--master", master.address, "--name", "hi", "--task", "cpus:0.2;mem:64",
            "--command", "echo hello", timeout=120,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        logs = fairshare_cli("logs", "--master", master.address, "hi-1", timeout=60)
        assert (logs.returncode, logs.stdout) == (0, "hello\n"), logs.stderr

        late = FrameworkConn(insecure, "late")
        seen: set[str] = set()
        events = 0
        deadline = time.monotonic() + 120
        while len(seen) < 275 and time.monotonic() < deadline:
            seen |= {o.agent_id for o in late.offers(timeout=60)}
            events += 1
        assert len(seen) >= 275 and events >= 2, (len(seen), events)
        assert late.events.ended is None
    assert not any(mark in master.log() for mark in INTERNAL_ERRORS)


def test_a_registry_row_from_before_the_bounds_does_not_break_a_restarted_master(
    master_factory: Callable[..., Daemon],
) -> None:
    """Two agents whose registry rows hold 9 MB of attributes each (written before the bounds
    existed): the restarted master loads them without their attributes and says so in its log;
    GetState and ``fairshare status`` answer; the agents reregister."""
    master = master_factory(*DEFAULT_MASTER_FLAGS)
    with grpc.insecure_channel(master.address) as insecure:
        agents = [FakeAgent(insecure, "cpus:2;mem:64") for _ in range(2)]
        for agent in agents:
            agent.close()
    master.stop()
    with sqlite3.connect(master.work_dir / "registry.sqlite") as db:
        for agent in agents:
            (spec,) = db.execute(
                "SELECT spec FROM agents WHERE agent_id = ?", (agent.agent_id,)
            ).fetchone()
            big = spec.replace('"attributes": []', f'"attributes": [["rack", "{"r" * BIG}"]]')
            assert big != spec
            db.execute("UPDATE agents SET spec = ? WHERE agent_id = ?", (big, agent.agent_id))
    restarted = start_master(master.work_dir, *DEFAULT_MASTER_FLAGS)
    try:
        wait_for(
            lambda: restarted.log().count("registry.agent.trimmed") == 2,
            what="two trimmed registry rows logged",
        )
        state = get_state_of(restarted)
        assert len(state.agents) == 2 and not state.trimmed
        assert all(not a.agent_info.attributes for a in state.agents)
        assert len(fairshare_status(restarted.address)["agents"]) == 2
        with grpc.insecure_channel(restarted.address) as insecure:
            for agent in agents:
                agent.stub = type(agent.stub)(insecure)
                agent.reconnect()
        assert not any(mark in restarted.log() for mark in INTERNAL_ERRORS), restarted.log()
    finally:
        restarted.kill()


def get_state_of(master: Daemon) -> Any:
    with grpc.insecure_channel(master.address) as insecure:
        return get_state(insecure)
