"""Prometheus metrics of the master
(docs/architecture.md §8; names fixed by the metrics contract).

``MasterCollector`` builds every family at scrape time from one ``MasterSample``: a
``PoolSummary`` (what a ``ClusterSnapshot`` holds, counted instead of viewed per agent, task and
offer) plus copies of the runtime's counters and of the RPC interceptor's counts,
all taken in one step of the runtime's event loop (``take_sample``). There is no second copy of
the state and nothing is updated per event except the runtime's plain integer counters.

Threading: ``serve_http`` (``fairshare.metrics_server``: the master's one HTTP port, on its
loop) formats a scrape with prometheus_client's own exposition in a worker thread. The collector
never reads loop-owned state from that thread: ``on_loop`` hands ``take_sample`` to the loop with
``run_coroutine_threadsafe`` and waits at most ``timeout`` seconds for the sample (immutable
values and copies); formatting then happens off the loop. A scrape thus costs the loop one
pass over the agents (about 10 ms at 10,000 agents; a whole snapshot would take 180 ms).

Invariants:
- one ``CollectorRegistry`` per daemon (``build_registry``), never the global one; no
  ``_created`` series (only metric families are yielded, never instrumented objects);
- no family has more than ``MAX_SERIES_PER_FAMILY`` series (``bounded``;
  ``fairshare_metric_series_dropped`` counts what was left out, by family);
- the families themselves, their units and label bounds: ``master.metric_families``.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from fairshare.metrics_server import (
    METRICS_ADDR_FILE,
    MetricsServer,
    build_registry,
    on_loop,
    serve_http,
    write_metrics_addr,
)
from fairshare.task_states import TaskState
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from master.metric_families import (
    AGENT_STATES,
    FRAMEWORK_STATES,
    MAX_FRAMEWORK_SERIES,
    LeadershipSample,
    base_units,
    cluster_families,
    counter_families,
    ended_family,
    framework_families,
    leadership_families,
    resource_families,
    role_families,
)
from master.runtime import RuntimeConfig, RuntimeState
from master.runtime.counters import RuntimeCounters
from master.runtime.operator import OperatorCalls
from master.runtime.views import PoolSummary

__all__ = [
    "AGENT_STATES",
    "FRAMEWORK_STATES",
    "MAX_FRAMEWORK_SERIES",
    "MAX_SERIES_PER_FAMILY",
    "METRICS_ADDR_FILE",
    "LeadershipSample",
    "MasterCollector",
    "MasterSample",
    "MetricsServer",
    "base_units",
    "bounded",
    "build_registry",
    "on_loop",
    "sampler",
    "serve_http",
    "write_metrics_addr",
]

MAX_SERIES_PER_FAMILY = 20_000
"""Series of one metric family at most (``bounded``): frameworks and roles are capped by
``master.metric_families.MAX_FRAMEWORK_SERIES``, resource names by the master's
--max-resource-names; this bounds their products too."""


def bounded(family: Metric, dropped: dict[str, int]) -> Metric:
    """``family`` with at most ``MAX_SERIES_PER_FAMILY`` samples (histograms, whose series are
    fixed, are left whole); what it left out is added to ``dropped`` under the family's name."""
    if isinstance(family, HistogramMetricFamily) or len(family.samples) <= MAX_SERIES_PER_FAMILY:
        return family
    dropped[family.name] = len(family.samples) - MAX_SERIES_PER_FAMILY
    del family.samples[MAX_SERIES_PER_FAMILY:]
    return family


@dataclass(frozen=True, slots=True)
class MasterSample:
    """Everything one scrape reports, taken in one step of the runtime's loop; a master that
    does not lead (HA) has no summary, and reports its build, leadership and RPC counts only."""

    summary: PoolSummary | None
    counters: RuntimeCounters
    rpc_counts: dict[tuple[str, str], int]
    tasks_ended: dict[TaskState, int]
    leadership: LeadershipSample | None = None
    io_queues: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per I/O worker (``--io-workers``): operations it had queued for the core when it last
    sent, and operations the core has queued for it."""


class MasterCollector(Collector):
    """Yields the master's metric families from ``source()`` (one sample per scrape)."""

    def __init__(self, source: Callable[[], MasterSample]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        dropped: dict[str, int] = {}
        for family in self._families():
            yield bounded(family, dropped)
        if dropped:
            gauge = GaugeMetricFamily(
                "fairshare_metric_series_dropped",
                f"Series left out of a family beyond {MAX_SERIES_PER_FAMILY} (its first ones"
                " in their order are kept).",
                labels=["family"],
            )
            for name, count in sorted(dropped.items()):
                gauge.add_metric([name], count)
            yield gauge

    def _families(self) -> Iterator[Metric]:
        sample = self._source()
        summary = sample.summary
        info = GaugeMetricFamily(
            "fairshare_build_info", "Version of the master.", labels=["version", "python"]
        )
        version = summary.version if summary is not None else RuntimeConfig().version
        info.add_metric([version, platform.python_version()], 1)
        yield info
        if sample.leadership is not None:
            yield from leadership_families(sample.leadership)
        if summary is not None:
            yield from cluster_families(summary)
            yield from resource_families(summary)
            yield from framework_families(summary)
            yield from role_families(summary)
            yield from counter_families(sample.counters)
            yield ended_family(sample.tasks_ended)
        rpc = CounterMetricFamily(
            "fairshare_rpc_requests",
            "gRPC requests served, by method and status code.",
            labels=["method", "code"],
        )
        for (method, code), n in sorted(sample.rpc_counts.items()):
            rpc.add_metric([method, code], n)
        yield rpc
        if sample.io_queues:
            depth = GaugeMetricFamily(
                "fairshare_io_worker_queue_depth",
                "Operations queued on an I/O worker's link to the core (--io-workers): to_core"
                " as the worker last said, to_worker waiting in the core.",
                labels=["worker", "direction"],
            )
            for worker, (to_core, to_worker) in sorted(sample.io_queues.items()):
                depth.add_metric([worker, "to_core"], to_core)
                depth.add_metric([worker, "to_worker"], to_worker)
            yield depth


def sampler(
    state: RuntimeState, operator: OperatorCalls, rpc_counts: dict[tuple[str, str], int]
) -> Callable[[], MasterSample]:
    """``take()``: one ``MasterSample`` of the runtime (call it on the runtime's loop)."""

    def take() -> MasterSample:
        return MasterSample(
            operator.pool_summary(),
            state.counters.copy(),
            dict(rpc_counts),
            dict(state.tasks.ended_counts),
        )

    return take
