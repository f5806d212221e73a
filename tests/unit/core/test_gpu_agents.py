"""Agents with GPUs are offered only to GPU-aware frameworks (Mesos's GPU_RESOURCES capability,
common.proto), whether they declare a demand or take coarse offers."""

from __future__ import annotations

from fairshare.resources import ResourceVector

from master.core import CoreConfig, MasterState, RescindOffer, SendOffers

R = ResourceVector.parse


def cluster() -> MasterState:
    core = MasterState(CoreConfig(validate=True))
    core.handle_add_agent("plain", R("cpus:4;mem:64"), 0.0)
    core.handle_add_agent("gpu", R("cpus:4;mem:64;gpus:2"), 0.0)
    return core


def offered_agents(messages: list[object], framework_id: str) -> set[str]:
    return {
        offer.agent_id
        for m in messages
        if isinstance(m, SendOffers) and m.framework_id == framework_id
        for offer in m.offers
    }


def test_a_framework_without_the_capability_never_gets_gpu_agents() -> None:
    core = cluster()
    core.handle_add_framework("cpu-only", 0.0, gpu_aware=False)
    core.handle_update_demand("cpu-only", R("cpus:1;mem:1"), 100, 0.0)
    core.handle_add_framework("coarse", 0.0, gpu_aware=False)  # no demand: whole agents
    messages = core.handle_allocate(1.0)
    assert offered_agents(messages, "cpu-only") | offered_agents(messages, "coarse") == {"plain"}
    assert core.agents["gpu"].free == R("cpus:4;mem:64;gpus:2")  # kept for GPU work


def test_a_gpu_aware_framework_gets_them() -> None:
    core = cluster()
    core.handle_add_framework("trainer", 0.0, gpu_aware=True)
    core.handle_update_demand("trainer", R("cpus:1;mem:1;gpus:1"), 2, 0.0)
    core.handle_add_framework("cpu-only", 0.0, gpu_aware=False)
    core.handle_update_demand("cpu-only", R("cpus:1;mem:1"), 100, 0.0)
    messages = core.handle_allocate(1.0)
    assert offered_agents(messages, "trainer") == {"gpu"}
    assert offered_agents(messages, "cpu-only") == {"plain"}


def test_losing_the_capability_rescinds_gpu_offers() -> None:
    core = cluster()
    core.handle_add_framework("f", 0.0, gpu_aware=True)
    messages = core.handle_allocate(1.0)  # coarse: both agents
    assert offered_agents(messages, "f") == {"plain", "gpu"}
    rescinded = core.handle_set_gpu_aware("f", False, 2.0)
    assert [(type(m), core.offers.get(m.offer_id)) for m in rescinded] == [(RescindOffer, None)]
    assert {o.agent_id for o in core.offers.values()} == {"plain"}
    core.handle_remove_agent("gpu", 3.0)
    assert core.gpu_agents == set()
