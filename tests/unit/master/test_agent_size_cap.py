"""``Authority.check_agent_size``: no agent reports more of a resource than
``RuntimeLimits.max_agent_resources`` (names it does not list: its ``*`` entry), no principal's
agents together more than ``max_principal_resources`` (issue 23: fifty agents at the per-agent
cap flattened every share), and no agent brings the cluster past ``max_resource_names``."""

from __future__ import annotations

import pytest
from fairshare.resources import ResourceVector

from master.core.errors import InvalidArgument, ResourceExhausted
from master.core.resource_caps import DEFAULT_MAX_AGENT_RESOURCES, ResourceCap
from master.runtime.authority import Authority, RuntimeLimits


def test_the_default_cap_admits_the_largest_machines_and_refuses_absurd_ones() -> None:
    authority = Authority()
    authority.check_agent_size(ResourceVector.parse("cpus:1920;mem:33554432;gpus:16"))
    authority.check_agent_size(DEFAULT_MAX_AGENT_RESOURCES.named)  # at the cap: admitted
    with pytest.raises(
        InvalidArgument, match=r"cpus:4000000000000000 .*--max-agent-resources cpus:100000"
    ):
        authority.check_agent_size(ResourceVector.parse("cpus:4000000000000000;mem:64"))
    with pytest.raises(InvalidArgument, match=r"widgets:.*--max-agent-resources \*:1000000\)"):
        authority.check_agent_size(ResourceVector(cpus=1, widgets=10**12))


def test_an_operator_cap_names_the_first_resource_above_it() -> None:
    cap = ResourceCap.parse("cpus:8;mem:64;*:100")
    authority = Authority(limits=RuntimeLimits(max_agent_resources=cap))
    authority.check_agent_size(ResourceVector(cpus=8, mem=64, widgets=100))
    with pytest.raises(InvalidArgument, match="mem:65 is more than one agent may have"):
        authority.check_agent_size(ResourceVector(cpus=1, mem=65))
    with pytest.raises(InvalidArgument, match=r"widgets:101 .*\(--max-agent-resources \*:100\)"):
        authority.check_agent_size(ResourceVector(cpus=1, widgets=101))


def test_a_cap_without_a_star_caps_other_names_at_its_largest_quantity() -> None:
    cap = ResourceCap.parse("cpus:8;mem:64")
    assert cap.millis("widgets") == 64_000
    assert str(cap) == "cpus:8;mem:64;*:64"
    assert ResourceCap.parse(str(DEFAULT_MAX_AGENT_RESOURCES)) == DEFAULT_MAX_AGENT_RESOURCES
    for bad in ("*:0", "*:1;*:2", "cpus:-1", "*:x"):
        with pytest.raises(ValueError):
            ResourceCap.parse(bad)


def test_the_agents_of_one_principal_are_capped_together() -> None:
    cap = ResourceCap.parse("cpus:100;*:10")
    authority = Authority(limits=RuntimeLimits(max_principal_resources=cap))
    authority.check_agent_size(ResourceVector(cpus=40), "rack", {"cpus": 60_000})  # 100: at it
    with pytest.raises(
        InvalidArgument,
        match=r"cpus:41 would bring the agents of principal 'rack' to 101,.*"
        r"--max-principal-resources cpus:100",
    ):
        authority.check_agent_size(ResourceVector(cpus=41), "rack", {"cpus": 60_000})
    with pytest.raises(InvalidArgument, match=r"widgets.*--max-principal-resources \*:10"):
        authority.check_agent_size(ResourceVector(cpus=1, widgets=6), "", {"widgets": 5_000})


def test_new_resource_names_beyond_the_cluster_bound_are_exhausted() -> None:
    authority = Authority(limits=RuntimeLimits(max_resource_names=3))
    known = {"cpus", "mem"}
    authority.check_agent_size(ResourceVector(cpus=1, mem=1, gpus=1), known_names=known)
    with pytest.raises(ResourceExhausted, match=r"at most 3 .*--max-resource-names.*a, b"):
        authority.check_agent_size(ResourceVector(cpus=1, a=1, b=1), known_names=known)
    assert authority.exhausted == 1
    authority.check_agent_size(ResourceVector(cpus=1, mem=2), known_names=known | {"a"})


def test_a_reregistering_agent_is_not_counted_twice_against_its_principal() -> None:
    """At the principal's cap, an agent may still reregister (its own registered resources are
    not counted again), but not grow past the cap."""
    import asyncio

    from master.core import CoreConfig
    from master.model import AgentSpec
    from master.runtime import MasterRuntime, RuntimeConfig

    limits = RuntimeLimits(max_principal_resources=ResourceCap.parse("cpus:8;*:1000000"))
    config = RuntimeConfig(core=CoreConfig(validate=True), allocation_interval=60.0, limits=limits)

    async def main() -> None:
        runtime = MasterRuntime(config)
        await runtime.start()
        try:
            spec = AgentSpec("h", 0, ResourceVector(cpus=4, mem=64))
            first = runtime.agents.register(spec).agent_id
            runtime.agents.register(spec)
            with pytest.raises(InvalidArgument, match="--max-principal-resources cpus:8"):
                runtime.agents.register(spec)
            runtime.agents.reregister(first, spec, [])
            grown = AgentSpec("h", 0, ResourceVector(cpus=5, mem=64))
            with pytest.raises(InvalidArgument, match="to 9, more than"):
                runtime.agents.reregister(first, grown, [])
        finally:
            await runtime.stop()

    asyncio.run(main())
