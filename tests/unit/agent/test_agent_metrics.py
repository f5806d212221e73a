"""The agent's metrics: ``AgentCollector`` over built ``AgentMetrics`` values and over a real
(unstarted) ``AgentRuntime``, exposed through the daemon's own registry and parsed back."""

from __future__ import annotations

import asyncio
import dataclasses
import threading

from fairshare.resources import ResourceVector
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from agent.core.records import MEMORY_PEAK_BUCKETS, AgentSpec, CommandUsage
from agent.metrics import TASK_STATES, AgentCollector, build_registry, on_loop
from agent.runtime import AgentMetrics, AgentRuntime, RuntimeConfig

MIB = 1048576
AGENT_FAMILIES = {
    "fairshare_agent_build_info": "gauge",
    "fairshare_agent_tasks": "gauge",
    "fairshare_agent_resource_capacity": "gauge",
    "fairshare_agent_resource_used": "gauge",
    "fairshare_agent_status_updates_pending": "gauge",
    "fairshare_agent_status_update_retries": "counter",
    "fairshare_agent_master_connected": "gauge",
    "fairshare_agent_reconnects": "counter",
}
SAMPLE_NAMES = {
    "fairshare_agent_build_info",
    "fairshare_agent_tasks",
    "fairshare_agent_resource_capacity",
    "fairshare_agent_resource_used",
    "fairshare_agent_status_updates_pending",
    "fairshare_agent_status_update_retries_total",
    "fairshare_agent_master_connected",
    "fairshare_agent_reconnects_total",
}

BUSY = AgentMetrics(
    connected=True,
    agent_id="ag-1",
    tasks_by_state={"RUNNING": 3, "KILLING": 1, "FINISHED": 1},
    tasks_terminal_total={"FINISHED": 7},
    pending_updates=2,
    updates_sent_total=20,
    update_retries_total=4,
    acks_total=18,
    acks_ignored_total=0,
    reconnects_total=1,
    registrations_total=1,
    reregistrations_total=1,
    heartbeats_total=9,
    heartbeat_failures_total=0,
    resources_total_millis={"cpus": 4000, "mem": 8192000, "disk": 1024000, "ports": 100000},
    resources_used_millis={"cpus": 2500, "mem": 3072000},
)


COMMAND_FAMILIES = {
    "fairshare_agent_isolation_info": "gauge",
    "fairshare_agent_command_tasks": "gauge",
    "fairshare_agent_command_task_memory_bytes": "gauge",
    "fairshare_agent_command_task_cpu_seconds": "counter",
    "fairshare_agent_command_task_memory_peak_bytes": "histogram",
}
COMMAND_SAMPLES = {
    "fairshare_agent_isolation_info",
    "fairshare_agent_command_tasks",
    "fairshare_agent_command_task_memory_bytes",
    "fairshare_agent_command_task_cpu_seconds_total",
    "fairshare_agent_command_task_memory_peak_bytes_bucket",
    "fairshare_agent_command_task_memory_peak_bytes_count",
    "fairshare_agent_command_task_memory_peak_bytes_sum",
}


def scrape(metrics: AgentMetrics) -> list[Sample]:
    text = generate_latest(build_registry(AgentCollector(lambda: metrics, "1.2.3"))).decode()
    families = list(text_string_to_metric_families(text))
    commands = metrics.command is not None
    expected = {**AGENT_FAMILIES, **(COMMAND_FAMILIES if commands else {})}
    assert {f.name: f.type for f in families} == expected
    samples = [s for f in families for s in f.samples]
    names = SAMPLE_NAMES | (COMMAND_SAMPLES if commands else set())
    assert {s.name for s in samples} == names  # no _created, nothing else
    return samples


def by_label(samples: list[Sample], name: str, label: str) -> dict[str, float]:
    return {s.labels[label]: s.value for s in samples if s.name == name}


def single(samples: list[Sample], name: str) -> float:
    (value,) = [s.value for s in samples if s.name == name]
    return value


def test_a_busy_agent() -> None:
    samples = scrape(BUSY)
    tasks = by_label(samples, "fairshare_agent_tasks", "state")
    assert tuple(tasks) == TASK_STATES and "unspecified" not in tasks
    assert tasks["running"] == 3 and tasks["killing"] == 1 and tasks["finished"] == 1
    assert sum(tasks.values()) == 5
    assert by_label(samples, "fairshare_agent_resource_capacity", "resource") == {
        "cpus": 4.0,
        "disk": 1024 * MIB,
        "mem": 8192 * MIB,
        "ports": 100.0,
    }
    assert by_label(samples, "fairshare_agent_resource_used", "resource") == {
        "cpus": 2.5,
        "disk": 0.0,
        "mem": 3072 * MIB,
        "ports": 0.0,
    }
    assert single(samples, "fairshare_agent_status_updates_pending") == 2
    assert single(samples, "fairshare_agent_status_update_retries_total") == 4
    assert single(samples, "fairshare_agent_master_connected") == 1
    assert single(samples, "fairshare_agent_reconnects_total") == 1
    (info,) = [s for s in samples if s.name == "fairshare_agent_build_info"]
    assert info.labels["version"] == "1.2.3" and set(info.labels) == {"version", "python"}


def test_a_disconnected_agent() -> None:
    samples = scrape(dataclasses.replace(BUSY, connected=False, tasks_by_state={}))
    assert single(samples, "fairshare_agent_master_connected") == 0
    assert set(by_label(samples, "fairshare_agent_tasks", "state").values()) == {0}


def test_a_fresh_runtime_on_its_loop_from_another_thread() -> None:
    spec = AgentSpec("h", 0, ResourceVector.parse("cpus:2;mem:1024"), (), "1")

    async def main() -> str:
        runtime = AgentRuntime(RuntimeConfig(master="127.0.0.1:1"), spec)
        take = on_loop(asyncio.get_running_loop(), runtime.metrics)
        out: list[str] = []
        registry = build_registry(AgentCollector(take, "1"))
        thread = threading.Thread(target=lambda: out.append(generate_latest(registry).decode()))
        thread.start()
        while thread.is_alive():
            await asyncio.sleep(0.005)
        return out[0]

    text = asyncio.run(main())
    assert 'fairshare_agent_resource_capacity{resource="mem"} 1.073741824e+09' in text
    assert "fairshare_agent_master_connected 0.0" in text


def test_command_task_usage_without_per_task_series() -> None:
    usage = CommandUsage(
        isolation="cgroups",
        live_tasks=2,
        live_memory_bytes=300 * MIB,
        cpu_seconds_total=12.5,
        memory_peaks=(1, 0, 2, 0, 0, 0, 1),  # <= 16 MiB, <= 256 MiB twice, above 16 GiB
        memory_peak_sum=20 * 1024 * MIB,
    )
    samples = scrape(dataclasses.replace(BUSY, command=usage))
    assert by_label(samples, "fairshare_agent_isolation_info", "mode") == {"cgroups": 1}
    assert single(samples, "fairshare_agent_command_tasks") == 2
    assert single(samples, "fairshare_agent_command_task_memory_bytes") == 300 * MIB
    assert single(samples, "fairshare_agent_command_task_cpu_seconds_total") == 12.5
    buckets = by_label(samples, "fairshare_agent_command_task_memory_peak_bytes_bucket", "le")
    assert list(buckets.values()) == [1, 1, 3, 3, 3, 3, 4]  # cumulative
    bounds = list(buckets)
    assert bounds == [str(float(bound)) for bound in MEMORY_PEAK_BUCKETS] + ["+Inf"]
    assert single(samples, "fairshare_agent_command_task_memory_peak_bytes_count") == 4
    labels = {key for s in samples for key in s.labels}
    assert labels <= {"state", "resource", "version", "python", "mode", "le"}  # no task ids
