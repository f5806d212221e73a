"""The master's metrics: ``MasterCollector`` over a runtime in a known state, the RPC interceptor
on a real (local) grpc.aio server, and the duration histogram.

The exposition is produced with ``generate_latest`` on the daemon's own registry and parsed back
with prometheus_client's parser, so names, types and labels are checked as a scraper sees them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from fairshare.health import HealthCheckRequest, HealthCheckResponse, HealthServicer
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState
from grpc import aio
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from master.core import CoreConfig, TaskLaunch
from master.metrics import MasterCollector, build_registry, on_loop, sampler
from master.model import AgentSpec, FrameworkInfo, OffersEvent, StatusUpdate
from master.runtime import MasterRuntime, RuntimeConfig
from master.runtime.counters import BUCKETS, DurationHistogram
from master.service.rpc_metrics import RpcMetricsInterceptor, method_label

R = ResourceVector.parse
MIB = 1048576

MASTER_FAMILIES = {
    "fairshare_build_info": "gauge",
    "fairshare_agents": "gauge",
    "fairshare_frameworks": "gauge",
    "fairshare_tasks": "gauge",
    "fairshare_resource_capacity": "gauge",
    "fairshare_resource_allocation": "gauge",
    "fairshare_offers_outstanding": "gauge",
    "fairshare_offers": "counter",
    "fairshare_framework_info": "gauge",
    "fairshare_framework_dominant_share": "gauge",
    "fairshare_framework_weighted_share": "gauge",
    "fairshare_framework_allocation": "gauge",
    "fairshare_role_share": "gauge",
    "fairshare_role_weight": "gauge",
    "fairshare_role_allocated": "gauge",
    "fairshare_role_quota_guarantee": "gauge",
    "fairshare_role_quota_limit": "gauge",
    "fairshare_role_quota_consumed": "gauge",
    "fairshare_role_below_guarantee": "gauge",
    "fairshare_role_reserved": "gauge",
    "fairshare_tasks_ended": "counter",
    "fairshare_tasks_preempted": "counter",
    "fairshare_allocation_runs": "counter",
    "fairshare_allocation_run_duration_seconds": "histogram",
    "fairshare_status_updates": "counter",
    "fairshare_registry_write_duration_seconds": "histogram",
    "fairshare_rpc_requests": "counter",
}
LABELS = {
    "fairshare_build_info": {"version", "python"},
    "fairshare_agents": {"state"},
    "fairshare_frameworks": {"state"},
    "fairshare_tasks": {"state"},
    "fairshare_resource_capacity": {"resource"},
    "fairshare_resource_allocation": {"resource", "state"},
    "fairshare_offers_outstanding": set(),
    "fairshare_offers_total": {"outcome"},
    "fairshare_framework_info": {"framework_id", "name", "role"},
    "fairshare_framework_dominant_share": {"framework_id"},
    "fairshare_framework_weighted_share": {"framework_id"},
    "fairshare_framework_allocation": {"framework_id", "resource"},
    "fairshare_role_share": {"role"},
    "fairshare_role_weight": {"role"},
    "fairshare_role_allocated": {"role", "resource"},
    "fairshare_role_quota_guarantee": {"role", "resource"},
    "fairshare_role_quota_limit": {"role", "resource"},
    "fairshare_role_quota_consumed": {"role", "resource"},
    "fairshare_role_below_guarantee": {"role"},
    "fairshare_role_reserved": {"role", "resource"},
    "fairshare_tasks_ended_total": {"state"},
    "fairshare_tasks_preempted_total": {"framework_id"},
    "fairshare_allocation_runs_total": set(),
    "fairshare_status_updates_total": {"event"},
    "fairshare_rpc_requests_total": {"method", "code"},
}


def scenario(test: Callable[[MasterRuntime], Awaitable[None]]) -> None:
    config = RuntimeConfig(
        core=CoreConfig(validate=True),
        allocation_interval=60.0,
        heartbeat_interval=60.0,
        allocation_batch=0.0,
    )

    async def main() -> None:
        runtime = MasterRuntime(config)
        await runtime.start()
        try:
            await test(runtime)
        finally:
            await runtime.stop()

    asyncio.run(main())


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def scrape(runtime: MasterRuntime, rpc: dict[tuple[str, str], int] | None = None) -> list[Sample]:
    registry = build_registry(MasterCollector(sampler(runtime.state, runtime.operator, rpc or {})))
    text = generate_latest(registry).decode()
    families = list(text_string_to_metric_families(text))
    for family in families:
        assert MASTER_FAMILIES[family.name] == family.type, family.name
    assert {f.name for f in families} == set(MASTER_FAMILIES)
    return [sample for family in families for sample in family.samples]


def values(samples: list[Sample], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value for s in samples if s.name == name}


def one(samples: list[Sample], name: str, **labels: str) -> float:
    return values(samples, name)[tuple(sorted(labels.items()))]


async def busy_cluster(runtime: MasterRuntime) -> dict[str, str]:
    """Two agents, frameworks web (running one task; one offer outstanding), web again (same
    name) and batch (suppressed); one status update forwarded, retried and acknowledged."""
    ids = {}
    channels = {}
    for name, resources in (("a1", "cpus:4;mem:8192"), ("a2", "cpus:2;mem:1024;gpus:1")):
        session = runtime.agents.register(AgentSpec(name, 0, R(resources)))
        ids[name], channels[name] = session.agent_id, session.channel
    web = runtime.frameworks.subscribe(FrameworkInfo(name="web"), None, False)
    runtime.frameworks.subscribe(FrameworkInfo(name="batch"), None, True)
    await settle()
    offers = [o for e in web.channel.drain() if isinstance(e, OffersEvent) for o in e.offers]
    on_a1 = next(o for o in offers if o.agent_id == ids["a1"])
    task = TaskLaunch("t1", "t1", R("cpus:1;mem:1024"))
    runtime.frameworks.accept(web.framework_id, [on_a1.offer_id], [task], 60.0)
    update = StatusUpdate("t1", ids["a1"], TaskState.RUNNING, uuid=b"u" * 16, source="AGENT")
    reported = [(web.framework_id, update, TaskState.RUNNING)]
    runtime.agents.update_statuses(ids["a1"], channels["a1"], reported)
    runtime.agents.update_statuses(ids["a1"], channels["a1"], reported)  # the agent retried
    runtime.frameworks.acknowledge(web.framework_id, ids["a1"], "t1", b"u" * 16)
    runtime.frameworks.subscribe(
        FrameworkInfo(name="web"), None, False
    )  # a second framework named web
    await settle()
    return {"web": web.framework_id, **ids}


def test_names_types_and_labels_match_the_contract() -> None:
    async def test(runtime: MasterRuntime) -> None:
        await busy_cluster(runtime)
        samples = scrape(runtime, {("SchedulerService/Accept", "OK"): 3})
        for sample in samples:
            assert not sample.name.endswith("_created")
            base = sample.name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
            if base in LABELS:
                assert set(sample.labels) == LABELS[base], sample
        assert (
            one(
                samples, "fairshare_rpc_requests_total", method="SchedulerService/Accept", code="OK"
            )
            == 3
        )
        assert one(samples, "fairshare_build_info", version="0.1.0", python=_python()) == 1

    scenario(test)


def _python() -> str:
    import platform

    return platform.python_version()


def test_resources_add_up_and_are_in_base_units() -> None:
    async def test(runtime: MasterRuntime) -> None:
        await busy_cluster(runtime)
        samples = scrape(runtime)
        capacity = values(samples, "fairshare_resource_capacity")
        assert capacity == {
            (("resource", "cpus"),): 6.0,
            (("resource", "gpus"),): 1.0,
            (("resource", "mem"),): 9216 * MIB,
        }
        for resource in ("cpus", "gpus", "mem"):
            parts = [
                one(samples, "fairshare_resource_allocation", resource=resource, state=state)
                for state in ("free", "offered", "used")
            ]
            assert sum(parts) == pytest.approx(
                one(samples, "fairshare_resource_capacity", resource=resource)
            )
        assert one(samples, "fairshare_resource_allocation", resource="cpus", state="used") == 1.0
        assert (
            one(samples, "fairshare_resource_allocation", resource="mem", state="used")
            == 1024 * MIB
        )
        assert one(samples, "fairshare_offers_outstanding") == len(runtime.state.core.offers)

    scenario(test)


def test_states_are_bounded_and_all_exported() -> None:
    async def test(runtime: MasterRuntime) -> None:
        await busy_cluster(runtime)
        samples = scrape(runtime)
        assert values(samples, "fairshare_agents") == {
            (("state", "active"),): 2,
            (("state", "deactivated"),): 0,
            (("state", "draining"),): 0,
            (("state", "drained"),): 0,
            (("state", "unreachable"),): 0,
        }
        assert values(samples, "fairshare_frameworks") == {
            (("state", "active"),): 2,
            (("state", "suppressed"),): 1,
            (("state", "disconnected"),): 0,
        }
        tasks = values(samples, "fairshare_tasks")
        assert len(tasks) == 12 and tasks[(("state", "running"),)] == 1
        assert sum(tasks.values()) == 1

    scenario(test)


def test_frameworks_are_labelled_by_id_and_shares_match_the_snapshot() -> None:
    """Issue 16 item 8: two frameworks named ``web`` are two series, named by the info metric."""

    async def test(runtime: MasterRuntime) -> None:
        await busy_cluster(runtime)
        samples = scrape(runtime)
        snapshot = runtime.operator.snapshot()
        ids = {f.spec.framework_id: f for f in snapshot.frameworks}
        info = values(samples, "fairshare_framework_info")
        assert info == {
            (("framework_id", i), ("name", f.spec.name), ("role", "*")): 1.0 for i, f in ids.items()
        }
        assert sorted(f.spec.name for f in ids.values()) == ["batch", "web", "web"]
        shares = values(samples, "fairshare_framework_dominant_share")
        assert shares == {(("framework_id", i),): f.dominant_share for i, f in ids.items()}
        weighted = values(samples, "fairshare_framework_weighted_share")
        assert weighted == {
            (("framework_id", i),): f.dominant_share / f.weight for i, f in ids.items()
        }
        allocation = values(samples, "fairshare_framework_allocation")
        for framework_id, view in ids.items():
            for resource, millis in view.allocated.millis_items():
                key = (("framework_id", framework_id), ("resource", resource))
                factor = MIB if resource == "mem" else 1
                assert allocation[key] == millis / 1000 * factor

    scenario(test)


def test_ended_tasks_are_counted_by_state() -> None:
    """Issue 16 item 8: ``fairshare_tasks`` drops ended tasks; ``fairshare_tasks_ended_total``
    counts them, once each, whatever the agent retries."""

    async def test(runtime: MasterRuntime) -> None:
        ids = await busy_cluster(runtime)
        ended = values(scrape(runtime), "fairshare_tasks_ended_total")
        assert ended == {
            (("state", s),): 0.0
            for s in ("finished", "failed", "killed", "error", "lost", "dropped", "gone")
        }
        done = StatusUpdate("t1", ids["a1"], TaskState.FINISHED, uuid=b"v" * 16, source="AGENT")
        channel = runtime.state.agents[ids["a1"]].channel
        assert channel is not None
        for _ in range(2):  # the agent retries: still one task ended
            reported = [(ids["web"], done, TaskState.FINISHED)]
            runtime.agents.update_statuses(ids["a1"], channel, reported)
        runtime.frameworks.acknowledge(ids["web"], ids["a1"], "t1", b"v" * 16)
        samples = scrape(runtime)
        assert one(samples, "fairshare_tasks_ended_total", state="finished") == 1
        assert sum(values(samples, "fairshare_tasks_ended_total").values()) == 1
        assert one(samples, "fairshare_tasks", state="finished") == 0  # no longer tracked

    scenario(test)


def test_counters_follow_the_cycle() -> None:
    async def test(runtime: MasterRuntime) -> None:
        ids = await busy_cluster(runtime)
        samples = scrape(runtime)
        offers = {k[0][1]: v for k, v in values(samples, "fairshare_offers_total").items()}
        assert set(offers) == {"sent", "accepted", "declined", "rescinded"}
        assert offers["sent"] >= 2 and offers["accepted"] == 1
        updates = {k[0][1]: v for k, v in values(samples, "fairshare_status_updates_total").items()}
        assert updates == {"forwarded": 1, "retried": 1, "acknowledged": 1}
        runs = one(samples, "fairshare_allocation_runs_total")
        assert runs == runtime.state.counters.allocation_runs > 0
        assert one(samples, "fairshare_allocation_run_duration_seconds_count") == runs
        assert one(samples, "fairshare_allocation_run_duration_seconds_bucket", le="+Inf") == runs
        # Every durable change (agents admitted, frameworks registered) is one registry write.
        writes = one(samples, "fairshare_registry_write_duration_seconds_count")
        assert writes == runtime.state.registry.writes >= len(ids) + 1
        mine = [i for i, o in runtime.state.core.offers.items() if o.framework_id == ids["web"]]
        runtime.frameworks.decline(ids["web"], mine, None)
        later = scrape(runtime)
        assert one(later, "fairshare_offers_total", outcome="declined") == offers["declined"] + len(
            mine
        )

    scenario(test)


def test_the_collector_reads_the_runtime_on_its_loop_from_another_thread() -> None:
    async def test(runtime: MasterRuntime) -> None:
        await busy_cluster(runtime)
        take = on_loop(asyncio.get_running_loop(), sampler(runtime.state, runtime.operator, {}))
        seen: list[str] = []

        def scrape_from_thread() -> None:
            text = generate_latest(build_registry(MasterCollector(take))).decode()
            seen.append(text)

        thread = threading.Thread(target=scrape_from_thread)
        thread.start()
        while thread.is_alive():  # keep the loop turning so the sample can be taken
            await asyncio.sleep(0.005)
        assert 'fairshare_agents{state="active"} 2.0' in seen[0]

    scenario(test)


def test_the_global_registry_is_left_alone() -> None:
    before = {m.name for m in REGISTRY.collect()}

    async def test(runtime: MasterRuntime) -> None:
        scrape(runtime)

    scenario(test)
    assert not any(name.startswith("fairshare") for name in before)
    assert not any(m.name.startswith("fairshare") for m in REGISTRY.collect())


def test_duration_histogram_buckets_are_upper_bounds() -> None:
    histogram = DurationHistogram()
    for seconds in (0.0001, 0.00011, 0.003, 20.0):
        histogram.observe(seconds)
    buckets = dict(histogram.cumulative())
    assert len(buckets) == len(BUCKETS) + 1
    assert buckets["0.0001"] == 1  # le is inclusive
    assert buckets["0.00025"] == 2 and buckets["0.005"] == 3
    assert buckets["10.0"] == 3 and buckets["+Inf"] == 4 == histogram.count
    copy = histogram.copy()
    histogram.observe(1.0)
    assert copy.count == 4 and histogram.count == 5


def test_method_labels_drop_the_package() -> None:
    assert method_label("/fairshare.v1.SchedulerService/Accept") == "SchedulerService/Accept"
    assert method_label("/grpc.health.v1.Health/Check") == "Health/Check"


def test_the_interceptor_counts_calls_by_method_and_code() -> None:
    async def main() -> dict[tuple[str, str], int]:
        interceptor = RpcMetricsInterceptor()
        server = aio.server(interceptors=[interceptor])
        server.add_generic_rpc_handlers((HealthServicer(("svc",)).handler(),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                await _calls(channel)
                for _ in range(200):  # the server counts when it sees the cancellation
                    if ("Health/Watch", "CANCELLED") in interceptor.counts:
                        break
                    await asyncio.sleep(0.01)
        finally:
            await server.stop(None)
        return interceptor.counts

    counts = asyncio.run(main())
    assert counts == {
        ("Health/Check", "OK"): 2,
        ("Health/Check", "NOT_FOUND"): 1,
        ("Health/Watch", "CANCELLED"): 1,
    }


async def _calls(channel: aio.Channel) -> None:
    def method(name: str, kind: Any) -> Any:
        return kind(
            f"/grpc.health.v1.Health/{name}",
            request_serializer=HealthCheckRequest.SerializeToString,
            response_deserializer=HealthCheckResponse.FromString,
        )

    check = method("Check", channel.unary_unary)
    await check(HealthCheckRequest(service=""))
    await check(HealthCheckRequest(service="svc"))
    with pytest.raises(grpc.RpcError):
        await check(HealthCheckRequest(service="nope"))
    watch = method("Watch", channel.unary_stream)(HealthCheckRequest(service=""))
    await watch.read()
    watch.cancel()
    with pytest.raises(grpc.RpcError):  # not implemented: not counted (bounded labels)
        await channel.unary_unary("/no.Such/Method")(b"")


def test_per_framework_series_are_bounded() -> None:
    """Whatever clients register, at most MAX_FRAMEWORK_SERIES frameworks get series."""
    from master.metrics import MAX_FRAMEWORK_SERIES

    async def test(runtime: MasterRuntime) -> None:
        for n in range(MAX_FRAMEWORK_SERIES + 5):
            runtime.frameworks.subscribe(FrameworkInfo(name=f"fw{n}"), None, False)
        samples = scrape(runtime)
        for name in ("fairshare_framework_info", "fairshare_framework_dominant_share"):
            assert len(values(samples, name)) == MAX_FRAMEWORK_SERIES, name

    scenario(test)
