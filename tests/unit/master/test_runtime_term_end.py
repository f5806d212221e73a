"""The end of a leadership term (HA masters, docs/architecture.md §5), in process: a runtime drained
while it still waited for agents to reregister finishes nothing when the window ends (its
registry belongs to a term that is over: the next term decides who is unreachable)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_runtime_cycle import AgentSpec, MasterRuntime, R, RuntimeConfig

from master.core import CoreConfig
from master.registry import SqliteRegistry

CONFIG = RuntimeConfig(
    core=CoreConfig(validate=True),
    allocation_interval=60.0,
    heartbeat_interval=60.0,
    reregistration_timeout=0.2,
)


def test_a_drained_runtime_does_not_finish_its_recovery(tmp_path: Path) -> None:
    async def scenario() -> None:
        first = MasterRuntime(CONFIG, registry=SqliteRegistry.open(tmp_path))
        await first.start()
        first.agents.register(AgentSpec("a", 1, R("cpus:1;mem:128")))
        await first.stop()
        first.state.registry.close()

        registry = SqliteRegistry.open(tmp_path)
        second = MasterRuntime(CONFIG, registry=registry)
        second.recovery.recover()
        await second.start()
        assert second.state.recovering and second.state.awaited
        writes = registry.writes
        await second.stop()  # the term ended before the window did
        await asyncio.sleep(0.4)  # past the reregistration window
        assert second.state.recovering  # nothing finished: no agent marked unreachable
        assert registry.writes == writes
        registry.close()

    asyncio.run(scenario())
