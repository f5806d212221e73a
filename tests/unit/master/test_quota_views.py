"""Quota in the master's snapshot and metrics: each quota role's guarantee, limit and what its
subtree holds; a role with a quota and no framework is listed; the alert's gauge is 1 only for
a role below its guarantee whose frameworks want more."""

from __future__ import annotations

import asyncio

from fairshare.resources import ResourceVector
from pool_summary_check import assert_summary_matches
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from master.core import CoreConfig
from master.metrics import MasterCollector, build_registry, sampler
from master.model import AgentSpec, Demand, FrameworkInfo
from master.runtime import MasterRuntime, RuntimeConfig

R = ResourceVector.parse


def test_quota_roles_in_the_snapshot_and_the_metrics() -> None:
    async def main() -> tuple[object, dict[tuple[str, str, str | None], float]]:
        runtime = MasterRuntime(
            RuntimeConfig(
                core=CoreConfig(validate=True),
                allocation_interval=60.0,
                heartbeat_interval=60.0,
                allocation_batch=0.0,
            )
        )
        await runtime.start()
        try:
            runtime.agents.register(AgentSpec("h1", 0, R("cpus:4;mem:4096")))
            core = runtime.state.core
            core.handle_set_quota("eng", R("cpus:8"), R("cpus:10"), 0.0)  # more than the pool
            core.handle_set_quota("ml", R("cpus:1"), None, 0.0)  # nobody in it yet
            spec = FrameworkInfo(name="ci", role="eng/dev")
            runtime.frameworks.subscribe(
                spec, Demand(task_resources=R("cpus:1;mem:64"), max_tasks=10), False
            )
            for _ in range(3):
                await asyncio.sleep(0)
            registry = build_registry(MasterCollector(sampler(runtime.state, runtime.operator, {})))
            families = text_string_to_metric_families(generate_latest(registry).decode())
            values = {
                (s.name, s.labels.get("role", ""), s.labels.get("resource")): s.value
                for family in families
                for s in family.samples
            }
            return runtime.operator.snapshot(), values
        finally:
            await runtime.stop()

    snapshot, values = asyncio.run(main())
    by_path = {view.path: view for view in snapshot.roles}  # type: ignore[attr-defined]
    assert {"eng", "eng/dev", "ml"} <= set(by_path)
    eng, ml = by_path["eng"], by_path["ml"]
    assert (eng.guarantee, eng.limit) == (R("cpus:8"), R("cpus:10"))
    assert ml.guarantee == R("cpus:1") and ml.subtree_frameworks == 0
    # the pool has 4 cpus: eng's guarantee of 8 cannot be met, and its framework wants more
    assert eng.below_guarantee and eng.wanting
    assert values[("fairshare_role_quota_guarantee", "eng", "cpus")] == 8.0
    assert values[("fairshare_role_quota_limit", "eng", "cpus")] == 10.0
    assert values[("fairshare_role_quota_consumed", "eng", "cpus")] == eng.allocated.get("cpus")
    assert values[("fairshare_role_below_guarantee", "eng", None)] == 1.0
    assert values[("fairshare_role_below_guarantee", "ml", None)] == 0.0  # no demand: no alert


def test_reservations_in_the_snapshot_and_the_metrics() -> None:
    """A static reservation of ml: the role is listed with what is reserved for it, its idle
    reservation counts in its quota consumption, and the agent shows it (static)."""

    async def main() -> tuple[object, dict[tuple[str, str, str | None], float]]:
        runtime = MasterRuntime(
            RuntimeConfig(
                core=CoreConfig(validate=True),
                allocation_interval=60.0,
                heartbeat_interval=60.0,
                allocation_batch=0.0,
            )
        )
        await runtime.start()
        try:
            spec = AgentSpec("h1", 0, R("cpus:4;mem:4096"), reservations=(("ml", R("cpus:2")),))
            runtime.agents.register(spec)
            runtime.state.core.handle_set_quota("ml", R("cpus:1"), None, 0.0)
            assert_summary_matches(runtime)  # the reserved free part is not in the pool's free
            registry = build_registry(MasterCollector(sampler(runtime.state, runtime.operator, {})))
            families = text_string_to_metric_families(generate_latest(registry).decode())
            values = {
                (s.name, s.labels.get("role", ""), s.labels.get("resource")): s.value
                for family in families
                for s in family.samples
            }
            return runtime.operator.snapshot(), values
        finally:
            await runtime.stop()

    snapshot, values = asyncio.run(main())
    (ml,) = [view for view in snapshot.roles if view.path == "ml"]  # type: ignore[attr-defined]
    assert ml.reserved == R("cpus:2") and ml.idle_reserved == R("cpus:2")
    assert not ml.below_guarantee  # the idle reservation holds its guarantee
    (agent,) = snapshot.agents  # type: ignore[attr-defined]
    assert agent.reservations == (("ml", R("cpus:2"), False),)
    assert agent.free + agent.reserved_free == R("cpus:4;mem:4096")
    assert values[("fairshare_role_reserved", "ml", "cpus")] == 2.0
    assert values[("fairshare_role_quota_consumed", "ml", "cpus")] == 2.0


def test_quota_columns_in_fairshare_roles_and_status() -> None:
    from fairshare.role_tree import role_rows, roles_to_dicts

    from master.service.state import state_to_pb

    async def main() -> object:
        runtime = MasterRuntime(
            RuntimeConfig(
                core=CoreConfig(validate=True),
                allocation_interval=60.0,
                heartbeat_interval=60.0,
                allocation_batch=0.0,
            )
        )
        await runtime.start()
        try:
            runtime.agents.register(AgentSpec("h1", 0, R("cpus:4;mem:4096")))
            runtime.state.core.handle_set_quota("eng", R("cpus:8"), R("cpus:10"), 0.0)
            spec = FrameworkInfo(name="ci", role="eng")
            runtime.frameworks.subscribe(
                spec, Demand(task_resources=R("cpus:1;mem:64"), max_tasks=10), False
            )
            for _ in range(3):
                await asyncio.sleep(0)
            return state_to_pb(runtime.operator.snapshot())
        finally:
            await runtime.stop()

    state = asyncio.run(main())
    (eng,) = roles_to_dicts(state.roles)  # type: ignore[attr-defined]
    assert (eng["guarantee"], eng["limit"], eng["below_guarantee"]) == (
        {"cpus": 8.0},
        {"cpus": 10.0},
        True,
    )
    (row,) = role_rows([eng])
    assert row[-2:] == ["cpus:8 (below)", "cpus:10"]
