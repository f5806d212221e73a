"""Prometheus metrics of the agent
(docs/architecture.md §8; names fixed by the metrics contract).

``AgentCollector`` builds every family at scrape time from one ``AgentMetrics`` value
(``AgentRuntime.metrics()``: plain values and copies, built from the state in one call); the
runtime keeps only its plain integer counters.

Threading: ``serve_http`` (the metrics port: ``/metrics``, ``/health``) runs on the agent's loop
and formats a scrape in a worker thread. The collector never reads loop-owned state from that
thread: ``on_loop`` hands ``AgentRuntime.metrics`` to the runtime's loop with
``run_coroutine_threadsafe`` and waits at most ``timeout`` seconds for the value.

Command tasks (``AgentMetrics.command``): how many run, the memory they use now and the CPU
time they used in all (live ones as read from their cgroup or /proc, plus every ended one), a
histogram of the peak memory of ended ones, and the isolation mode as an info gauge. Per-task
usage goes in each task's terminal status update, not into labels: a series per task id would
grow without bound (Prometheus keeps a series for hours after it stops) and the agent cannot
know which ids an operator cares about.

Invariants: one ``CollectorRegistry`` per daemon, never the global one; no ``_created`` series;
resources in base units (cpus in cores, gpus in devices, mem and disk in bytes, any other
resource in its own unit); task states from the fixed wire list (all exported, 0 when none);
no task or framework ids in labels.
"""

from __future__ import annotations

import math
import platform
from collections.abc import Callable, Iterator

from fairshare.metrics_server import (
    METRICS_ADDR_FILE,
    MetricsServer,
    build_registry,
    on_loop,
    serve_http,
    write_metrics_addr,
)
from fairshare.v1 import common_pb2
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from agent.core.records import MEMORY_PEAK_BUCKETS, AgentMetrics, CommandUsage

__all__ = [
    "METRICS_ADDR_FILE",
    "TASK_STATES",
    "AgentCollector",
    "MetricsServer",
    "base_units",
    "build_registry",
    "on_loop",
    "serve_http",
    "write_metrics_addr",
]

TASK_STATES = tuple(
    name.removeprefix("TASK_STATE_").lower()
    for name, _ in common_pb2.TaskState.items()
    if name != "TASK_STATE_UNSPECIFIED"
)
BYTES_PER_MIB = 1048576
BYTE_RESOURCES = frozenset({"mem", "disk"})


def base_units(millis: dict[str, int]) -> dict[str, float]:
    """Per resource name, its amount in Prometheus base units."""
    out: dict[str, float] = {}
    for name, amount in millis.items():
        value = amount / 1000
        out[name] = value * BYTES_PER_MIB if name in BYTE_RESOURCES else value
    return out


class AgentCollector(Collector):
    """Yields the agent's metric families from ``source()`` (one value per scrape)."""

    def __init__(self, source: Callable[[], AgentMetrics], version: str) -> None:
        self._source = source
        self._version = version

    def collect(self) -> Iterator[Metric]:
        metrics = self._source()
        info = GaugeMetricFamily(
            "fairshare_agent_build_info", "Version of the agent.", labels=["version", "python"]
        )
        info.add_metric([self._version, platform.python_version()], 1)
        yield info
        tasks = GaugeMetricFamily(
            "fairshare_agent_tasks", "Tasks on this agent by state.", labels=["state"]
        )
        counts = {name.lower(): n for name, n in metrics.tasks_by_state.items()}
        for state in (*TASK_STATES, *sorted(set(counts).difference(TASK_STATES))):
            tasks.add_metric([state], counts.get(state, 0))
        yield tasks
        capacity = base_units(metrics.resources_total_millis)
        used = base_units(metrics.resources_used_millis)
        total = GaugeMetricFamily(
            "fairshare_agent_resource_capacity",
            "Resources this agent offers (base units).",
            labels=["resource"],
        )
        busy = GaugeMetricFamily(
            "fairshare_agent_resource_used",
            "Resources held by this agent's tasks (base units).",
            labels=["resource"],
        )
        for resource in sorted(set(capacity) | set(used)):
            total.add_metric([resource], capacity.get(resource, 0.0))
            busy.add_metric([resource], used.get(resource, 0.0))
        yield total
        yield busy
        yield from _connection(metrics)
        if metrics.command is not None:
            yield from _commands(metrics.command)


def _commands(usage: CommandUsage) -> Iterator[Metric]:
    mode = GaugeMetricFamily(
        "fairshare_agent_isolation_info",
        "How the agent confines command tasks (cgroups, rlimits or none).",
        labels=["mode"],
    )
    mode.add_metric([usage.isolation], 1)
    yield mode
    yield GaugeMetricFamily(
        "fairshare_agent_command_tasks",
        "Command tasks whose processes run on this agent.",
        usage.live_tasks,
    )
    yield GaugeMetricFamily(
        "fairshare_agent_command_task_memory_bytes",
        "Memory the running command tasks use now, together.",
        usage.live_memory_bytes,
    )
    yield CounterMetricFamily(
        "fairshare_agent_command_task_cpu_seconds",
        "CPU time command tasks used, running and ended ones together.",
        usage.cpu_seconds_total,
    )
    buckets: list[tuple[str, float]] = []
    count = 0
    for bound, n in zip((*MEMORY_PEAK_BUCKETS, math.inf), usage.memory_peaks, strict=True):
        count += n
        buckets.append(("+Inf" if bound == math.inf else str(float(bound)), count))
    yield HistogramMetricFamily(
        "fairshare_agent_command_task_memory_peak_bytes",
        "Peak memory of ended command tasks.",
        buckets=buckets,
        sum_value=usage.memory_peak_sum,
    )


def _connection(metrics: AgentMetrics) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "fairshare_agent_status_updates_pending",
        "Status updates not yet acknowledged by the master.",
        metrics.pending_updates,
    )
    yield CounterMetricFamily(
        "fairshare_agent_status_update_retries",
        "Status updates sent again after no acknowledgement.",
        metrics.update_retries_total,
    )
    yield GaugeMetricFamily(
        "fairshare_agent_master_connected",
        "1 while the agent is registered with the master and its command stream is open.",
        1 if metrics.connected else 0,
    )
    yield CounterMetricFamily(
        "fairshare_agent_reconnects",
        "Reconnections to the master after a session ended.",
        metrics.reconnects_total,
    )
