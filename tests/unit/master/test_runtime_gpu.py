"""The master offers agents with GPUs only to frameworks that subscribed with GPU_RESOURCES."""

from __future__ import annotations

from test_runtime_cycle import MasterRuntime, agent, framework, offers_of, scenario, settle


def test_gpu_agents_go_only_to_frameworks_with_the_capability() -> None:
    async def test(runtime: MasterRuntime) -> None:
        plain, plain_events = framework(runtime, "plain")
        gpu, gpu_events = framework(runtime, "trainer", capabilities=frozenset({"GPU_RESOURCES"}))
        gpu_agent, _ = agent(runtime, "cpus:4;mem:1024;gpus:1")
        await settle()
        assert offers_of(plain_events) == []
        assert [o.agent_id for o in offers_of(gpu_events)] == [gpu_agent]
        cpu_agent, _ = agent(runtime, "cpus:4;mem:1024")
        await settle()
        assert [o.agent_id for o in offers_of(plain_events)] == [cpu_agent]
        assert runtime.state.core.frameworks[plain].gpu_aware is False
        assert runtime.state.core.frameworks[gpu].gpu_aware is True

    scenario(test)
