"""Reservations against real processes: an agent's static ``--reserve``, the operator's
``fairshare reserve``/``unreserve``, both offered only to their role's subtree; dynamic ones
kept across a master restart (SQLite registry) and an HA failover (etcd registry).

- A static reservation of ``eng=cpus:4`` on a 12-cpu agent: a ``sci`` framework wanting 12
  one-cpu tasks runs 8 and never more (sampled), then an ``eng`` framework arriving at the full
  cluster gets its 4 at once (nothing of sci's is touched).
- ``fairshare reserve`` of ``cpus:3`` for ``eng`` (bad flags exit 2, too much exits 1 naming
  what is free; ``quota`` and ``agents`` list it); after a kill -9 and restart of the master the
  agent rejoins with the reservation, ``sci`` runs 5 of 8 cpus and never more; ``unreserve``
  gives it the other 3.
- Three HA masters on etcd: a reservation made through the leader is kept by the next leader
  after a kill -9 (the agent rejoins it with the reservation, offered to its role only).

Every wait polls ``GetState`` with a deadline; the samples are every 0.2 s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from daemons import DEFAULT_MASTER_FLAGS, Client, Daemon, wait_for
from fairshare.cli import main
from fairshare.v1 import operator_pb2
from faults import restart_master
from ha import HAMasters
from role_cluster import RoleCluster
from wire_fakes import get_state

SETTLE = 30.0
TASK = "cpus:1;mem:64"


def reservations(state: operator_pb2.GetStateResponse) -> list[tuple[str, str, bool]]:
    """(role, resources, dynamic) of every agent's reservations, as GetState shows them."""
    found = []
    for agent in state.agents:
        for reservation in agent.reservations:
            items = {i.name: i.millis for i in reservation.resources.items}
            text = ";".join(f"{n}:{m // 1000}" for n, m in sorted(items.items()))
            found.append((reservation.role, text, reservation.dynamic))
    return found


def agent_id(channel: grpc.Channel) -> str:
    (agent,) = get_state(channel).agents
    return agent.agent_id


@pytest.fixture
def cluster(
    master_factory: Callable[..., Daemon],
    clients: Callable[..., Client],
    agent_factory: Callable[..., list[Daemon]],
) -> Iterator[RoleCluster]:
    made = RoleCluster(master_factory(*DEFAULT_MASTER_FLAGS), clients, agent_factory)
    yield made
    made.close()


def test_a_static_reservation_is_offered_to_its_role_only(
    cluster: RoleCluster, agent_factory: Callable[..., list[Daemon]]
) -> None:
    cluster.run("sci", "sci", TASK, 12)
    wait_for(cluster.declared, SETTLE, "sci to declare its demand")
    agent_factory(cluster.master, 1, "cpus:12;mem:12288", "--reserve", "eng=cpus:4;mem:256")
    wait_for(lambda: cluster.running()["sci"] == 8, SETTLE, "8 tasks of sci running")
    samples = cluster.samples(2.0)
    assert max(s["sci"] for s in samples) == 8, samples  # the reserved 4 cpus stay idle
    assert reservations(get_state(cluster.channel)) == [("eng", "cpus:4;mem:256", False)]
    cluster.run("eng", "eng/ml", TASK, 4)  # a sub-role of eng: the reservation serves it
    wait_for(lambda: cluster.running()["eng/ml"] == 4, SETTLE, "eng/ml to run on the reservation")
    assert cluster.running()["sci"] == 8  # nothing of sci was taken


def test_dynamic_reservations_through_the_cli_survive_a_master_restart(
    cluster: RoleCluster,
    agent_factory: Callable[..., list[Daemon]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent_factory(cluster.master, 1, "cpus:8;mem:8192")
    wait_for(lambda: len(get_state(cluster.channel).agents) == 1, SETTLE, "the agent")
    agent = agent_id(cluster.channel)
    address = cluster.master.address

    def cli(verb: str, *flags: str) -> int:
        return main([verb, "--master", cluster.master.address, *flags])

    assert cli("reserve", "--agent", agent, "--role", "*", "--resources", "cpus:1") == 2
    assert "--role: '*' is the unreserved role" in capsys.readouterr().err
    assert cli("reserve", "--agent", agent, "--role", "eng", "--resources", "cpu s:1") == 2
    assert "--resources" in capsys.readouterr().err
    assert cli("reserve", "--agent", agent, "--role", "eng", "--resources", "cpus:9") == 1
    assert "FAILED_PRECONDITION" in capsys.readouterr().err
    assert reservations(get_state(cluster.channel)) == []  # refused calls changed nothing
    assert cli("reserve", "--agent", agent, "--role", "eng", "--resources", "cpus:3") == 0
    assert f"reserved cpus:3 of agent {agent} for eng" in capsys.readouterr().out
    assert cli("quota") == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].split() == ["ROLE", "GUARANTEE", "LIMIT", "CONSUMED", "RESERVED"]
    assert listed[1].split() == ["eng", "-", "-", "cpus:3", "cpus:3"]  # idle, counted whole
    assert main(["agents", "--master", address]) == 0
    assert "eng=cpus:3" in capsys.readouterr().out

    cluster.master = restart_master(cluster.master, *DEFAULT_MASTER_FLAGS)
    try:
        cluster.channel.close()
        channel = cluster.channel = grpc.insecure_channel(cluster.master.address)
        wait_for(
            lambda: reservations(get_state(channel)) == [("eng", "cpus:3", True)],
            SETTLE,
            "the agent back with its dynamic reservation",
        )
        cluster.run("sci", "sci", TASK, 8)
        wait_for(lambda: cluster.running()["sci"] == 5, SETTLE, "5 tasks of sci running")
        assert max(s["sci"] for s in cluster.samples(2.0)) == 5
        assert cli("unreserve", "--agent", agent, "--role", "eng", "--resources", "cpus:3") == 0
        wait_for(lambda: cluster.running()["sci"] == 8, SETTLE, "sci on the unreserved cpus")
        assert reservations(get_state(channel)) == []
    finally:
        cluster.master.kill()


def test_a_reservation_survives_an_ha_failover(
    etcd_url: str,
    tmp_path: Path,
    agent_factory: Callable[..., list[Daemon]],
    clients: Callable[..., Client],
) -> None:
    ha = HAMasters(tmp_path, etcd_url)
    leader = ha.leader()
    agent_factory(ha.addresses, 1, "cpus:6;mem:6144")
    with grpc.insecure_channel(leader.address) as channel:
        wait_for(lambda: len(get_state(channel).agents) == 1, SETTLE, "the agent")
        agent = agent_id(channel)
    flags = ["--agent", agent, "--role", "eng", "--resources", "cpus:2"]
    assert main(["reserve", "--master", ha.addresses, *flags]) == 0
    leader.kill()
    new = ha.leader(exclude=leader, timeout=15)
    with grpc.insecure_channel(new.address) as channel:
        wait_for(
            lambda: reservations(get_state(channel)) == [("eng", "cpus:2", True)],
            SETTLE,
            "the new leader to have the agent back with its reservation",
        )
        roles = RoleCluster(new, clients, agent_factory)
        try:
            roles.run("sci", "sci", TASK, 6, "--master", ha.addresses)
            wait_for(lambda: roles.running()["sci"] == 4, SETTLE, "4 tasks of sci running")
            assert max(s["sci"] for s in roles.samples(1.5)) == 4
        finally:
            roles.close()
