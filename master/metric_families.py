"""The master's metric families, each built from one ``PoolSummary`` (the snapshot's counts,
frameworks, roles and pool sums: ``master.runtime.views.build_pool_summary``) or the runtime's
counters (``master.metrics`` yields them per scrape; names fixed by the metrics contract).

Every function here is pure: it reads immutable values and returns new families, never touching
the runtime. Invariants:
- resources are in base units: cpus in cores, gpus in devices, mem and disk in bytes (MiB x
  1048576), any other resource in its own unit; for every resource of the pool
  ``free + offered + used == capacity`` (the summary's pool figures);
- label values are bounded: states from fixed lists (all exported, 0 when none), resource names,
  framework ids (at most ``MAX_FRAMEWORK_SERIES`` frameworks, those with the largest shares;
  ``fairshare_framework_info`` maps each id to its name and role, so two frameworks of one name
  stay two series), role paths (at most ``MAX_FRAMEWORK_SERIES`` roles too, those with the
  largest weighted shares); never task, offer or agent ids (``master.metrics`` adds the RPC
  counts, by method and status code name, and caps every family's series);
- ``fairshare_role_share`` is a role's weighted share (share / weight) as the allocator's
  hierarchy computes it (what it orders sibling roles by), ``fairshare_role_weight`` its
  operator weight (1 when unset) and ``fairshare_role_allocated`` what its subtree's frameworks
  hold, per resource of the pool (0 when none), in base units as
  ``fairshare_framework_allocation``;
- ``fairshare_tasks`` counts the tasks the master tracks now (a task that ended is dropped once its
  framework acknowledged it, so terminal states are mostly 0); ``fairshare_tasks_ended_total``
  counts every task that reached a terminal state, by that state, since the master started;
  ``fairshare_tasks_preempted_total`` the tasks the rebalancer (``--rebalance``) killed, by
  framework id (the same frameworks as ``fairshare_framework_info``, 0 until their first kill).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from master.runtime.counters import DurationHistogram, RuntimeCounters
from master.runtime.views import PoolSummary

__all__ = [
    "AGENT_STATES",
    "FRAMEWORK_STATES",
    "MAX_FRAMEWORK_SERIES",
    "LeadershipSample",
    "base_units",
    "cluster_families",
    "counter_families",
    "ended_family",
    "framework_families",
    "leadership_families",
    "resource_families",
    "role_families",
]

AGENT_STATES = ("active", "deactivated", "draining", "drained", "unreachable")
FRAMEWORK_STATES = ("active", "suppressed", "disconnected")
TASK_STATES = tuple(s.value.lower() for s in TaskState if s is not TaskState.UNKNOWN)
ALLOCATION_STATES = ("free", "offered", "used")
OFFER_OUTCOMES = ("sent", "accepted", "declined", "rescinded")
STATUS_EVENTS = ("forwarded", "acknowledged", "retried")
BYTES_PER_MIB = 1048576
BYTE_RESOURCES = frozenset({"mem", "disk"})
MAX_FRAMEWORK_SERIES = 500
ENDED_STATES = tuple(s.value.lower() for s in TaskState if s.is_terminal)


@dataclass(frozen=True, slots=True)
class LeadershipSample:
    """This master's part in the election: leading now, its epoch, terms won since it
    started."""

    leading: bool
    epoch: int
    terms_won: int


def base_units(resources: ResourceVector) -> dict[str, float]:
    """Per resource name, its amount in Prometheus base units."""
    out: dict[str, float] = {}
    for name, millis in resources.millis_items():
        value = millis / 1000
        out[name] = value * BYTES_PER_MIB if name in BYTE_RESOURCES else value
    return out


def by_state(
    name: str, documentation: str, states: Iterable[str], counts: dict[str, int]
) -> GaugeMetricFamily:
    """A gauge by ``state``: every state of ``states`` (0 when none), then unknown ones."""
    family = GaugeMetricFamily(name, documentation, labels=["state"])
    for state in states:
        family.add_metric([state], counts.get(state, 0))
    for state in sorted(set(counts).difference(states)):  # a state the list does not know yet
        family.add_metric([state], counts[state])
    return family


def count(values: Iterable[str]) -> dict[str, int]:
    """How many times each value occurs."""
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def histogram(name: str, documentation: str, data: DurationHistogram) -> HistogramMetricFamily:
    """A duration histogram family of ``data``'s cumulative buckets."""
    family = HistogramMetricFamily(name, documentation)
    family.add_metric([], data.cumulative(), data.total)
    return family


def ended_family(tasks_ended: dict[TaskState, int]) -> Metric:
    """Tasks that reached a terminal state, by that state (every terminal state, 0 when none)."""
    ended = CounterMetricFamily(
        "fairshare_tasks_ended",
        "Tasks that reached a terminal state since the master started, by that state.",
        labels=["state"],
    )
    for state in ENDED_STATES:
        ended.add_metric([state], tasks_ended.get(TaskState(state.upper()), 0))
    return ended


def leadership_families(sample: LeadershipSample) -> Iterator[Metric]:
    """This master's part in the election: leading, epoch, terms won."""
    yield GaugeMetricFamily(
        "fairshare_master_leader",
        "1 while this master leads (HA masters: the others are followers), else 0.",
        value=int(sample.leading),
    )
    yield GaugeMetricFamily(
        "fairshare_master_epoch",
        "The leadership epoch of this master's current term (0: not leading, or alone).",
        value=sample.epoch,
    )
    yield CounterMetricFamily(
        "fairshare_master_terms_won",
        "Leadership terms this master won since it started.",
        value=sample.terms_won,
    )


def cluster_families(summary: PoolSummary) -> Iterator[Metric]:
    """Agents, frameworks and tracked tasks by state (every state of the fixed lists),
    outstanding offers."""
    agents = {state.lower(): n for state, n in summary.agent_states.items()}
    yield by_state("fairshare_agents", "Agents by state.", AGENT_STATES, agents)
    frameworks = count(f.state.lower() for f in summary.frameworks)
    yield by_state("fairshare_frameworks", "Frameworks by state.", FRAMEWORK_STATES, frameworks)
    tasks = {state.value.lower(): n for state, n in summary.task_states.items()}
    yield by_state("fairshare_tasks", "Tracked tasks by state.", TASK_STATES, tasks)
    yield GaugeMetricFamily(
        "fairshare_offers_outstanding",
        "Offers sent and not yet answered.",
        summary.offers,
    )


def resource_families(summary: PoolSummary) -> Iterator[Metric]:
    """The pool's capacity per resource and its split into free, offered and used."""
    capacity = base_units(summary.total)
    parts = {
        "free": base_units(summary.free),
        "offered": base_units(summary.offered),
        "used": base_units(summary.used),
    }
    total = GaugeMetricFamily(
        "fairshare_resource_capacity",
        "Resources of the agents in the pool (base units).",
        labels=["resource"],
    )
    split = GaugeMetricFamily(
        "fairshare_resource_allocation",
        "Pool resources by state; free + offered + used == capacity.",
        labels=["resource", "state"],
    )
    for resource in sorted(capacity):
        total.add_metric([resource], capacity[resource])
        for state in ALLOCATION_STATES:
            split.add_metric([resource, state], parts[state].get(resource, 0.0))
    yield total
    yield split


def framework_families(summary: PoolSummary) -> Iterator[Metric]:
    """Per framework (at most ``MAX_FRAMEWORK_SERIES``, the largest shares): name and role,
    shares, allocation, preempted tasks."""
    shown = sorted(summary.frameworks, key=lambda f: (-f.dominant_share, f.spec.framework_id))
    info = GaugeMetricFamily(
        "fairshare_framework_info",
        "Name and role of each framework (value 1), to join on framework_id.",
        labels=["framework_id", "name", "role"],
    )
    share = GaugeMetricFamily(
        "fairshare_framework_dominant_share",
        "Unweighted dominant share of each framework (0..1), as in fairshare status.",
        labels=["framework_id"],
    )
    weighted = GaugeMetricFamily(
        "fairshare_framework_weighted_share",
        "Dominant share divided by the framework's weight (what DRF orders by).",
        labels=["framework_id"],
    )
    amounts = GaugeMetricFamily(
        "fairshare_framework_allocation",
        "Resources offered to or used by each framework (base units).",
        labels=["framework_id", "resource"],
    )
    preempted = CounterMetricFamily(
        "fairshare_tasks_preempted",
        "Tasks the rebalancer (--rebalance) killed since the master started, by framework"
        " (0 for every framework until then, so rate() and increase() see the first kill).",
        labels=["framework_id"],
    )
    for view in sorted(shown[:MAX_FRAMEWORK_SERIES], key=lambda f: f.spec.framework_id):
        framework_id = view.spec.framework_id
        preempted.add_metric([framework_id], view.preempted)
        info.add_metric([framework_id, view.spec.name, view.spec.role or "*"], 1)
        share.add_metric([framework_id], view.dominant_share)
        weighted.add_metric([framework_id], view.weighted_share)
        for resource, value in sorted(base_units(view.allocated).items()):
            amounts.add_metric([framework_id, resource], value)
    yield info
    yield share
    yield weighted
    yield amounts
    yield preempted


def role_families(summary: PoolSummary) -> Iterator[Metric]:
    """Per role (at most ``MAX_FRAMEWORK_SERIES``, the largest weighted shares): weighted share,
    weight, allocation; then the quota families."""
    shown = sorted(summary.roles, key=lambda r: (-r.weighted_share, r.path))
    share = GaugeMetricFamily(
        "fairshare_role_share",
        "Weighted share of each role (share / weight) as the allocator's hierarchy computes"
        " it: among sibling roles the lowest is served first.",
        labels=["role"],
    )
    weight = GaugeMetricFamily(
        "fairshare_role_weight",
        "Operator weight of each role (1 when unset): weighs it among its siblings.",
        labels=["role"],
    )
    allocated = GaugeMetricFamily(
        "fairshare_role_allocated",
        "Resources offered to or used by the frameworks of each role and the roles below it"
        " (base units).",
        labels=["role", "resource"],
    )
    resources = sorted(base_units(summary.total))
    for view in sorted(shown[:MAX_FRAMEWORK_SERIES], key=lambda r: r.path):
        share.add_metric([view.path], view.weighted_share)
        weight.add_metric([view.path], view.weight)
        held = base_units(view.allocated)
        for resource in sorted(set(resources).union(held)):
            allocated.add_metric([view.path, resource], held.get(resource, 0.0))
    yield share
    yield weight
    yield allocated
    yield from quota_families(summary)


def quota_families(summary: PoolSummary) -> Iterator[Metric]:
    """Quotas and reservations per role: guarantee, limit, consumed, below guarantee, reserved."""
    guarantee = GaugeMetricFamily(
        "fairshare_role_quota_guarantee",
        "Guaranteed resources of each role with a quota (base units).",
        labels=["role", "resource"],
    )
    limit = GaugeMetricFamily(
        "fairshare_role_quota_limit",
        "Resources each role's subtree may hold at most (base units; only limited ones).",
        labels=["role", "resource"],
    )
    consumed = GaugeMetricFamily(
        "fairshare_role_quota_consumed",
        "Resources offered to or used by each quota role's subtree, and its reservations'"
        " idle parts (base units): what counts toward its guarantee and limit.",
        labels=["role", "resource"],
    )
    starved = GaugeMetricFamily(
        "fairshare_role_below_guarantee",
        "1 when a role holds less than its guarantee of some resource while a framework of"
        " its subtree wants more tasks, else 0.",
        labels=["role"],
    )
    reserved = GaugeMetricFamily(
        "fairshare_role_reserved",
        "Resources reserved for exactly this role on every agent, used or not (base units).",
        labels=["role", "resource"],
    )
    reserving = [r for r in summary.roles if r.reserved]
    for view in reserving[:MAX_FRAMEWORK_SERIES]:
        for resource, amount in sorted(base_units(view.reserved).items()):
            reserved.add_metric([view.path, resource], amount)
    quota_roles = [r for r in summary.roles if r.guarantee or r.limit is not None]
    for view in quota_roles[:MAX_FRAMEWORK_SERIES]:
        held = base_units(view.allocated + view.idle_reserved)
        guaranteed = base_units(view.guarantee)
        limited = base_units(view.limit or ResourceVector())
        for resource, amount in sorted(guaranteed.items()):
            guarantee.add_metric([view.path, resource], amount)
        for resource, amount in sorted(limited.items()):
            limit.add_metric([view.path, resource], amount)
        for resource in sorted(set(guaranteed) | set(limited)):
            consumed.add_metric([view.path, resource], held.get(resource, 0.0))
        starved.add_metric([view.path], float(view.below_guarantee and view.wanting))
    yield guarantee
    yield limit
    yield consumed
    yield starved
    yield reserved


def counter_families(counters: RuntimeCounters) -> Iterator[Metric]:
    """The runtime's counters: offers by outcome, allocation runs and durations, status updates,
    registry write durations."""
    offers = CounterMetricFamily("fairshare_offers", "Offers by outcome.", labels=["outcome"])
    for outcome, n in zip(
        OFFER_OUTCOMES,
        (
            counters.offers_sent,
            counters.offers_accepted,
            counters.offers_declined,
            counters.offers_rescinded,
        ),
        strict=True,
    ):
        offers.add_metric([outcome], n)
    yield offers
    yield CounterMetricFamily(
        "fairshare_allocation_runs", "Allocation runs.", counters.allocation_runs
    )
    yield histogram(
        "fairshare_allocation_run_duration_seconds",
        "Duration of one allocation run.",
        counters.allocation_durations,
    )
    updates = CounterMetricFamily(
        "fairshare_status_updates",
        "Agent status updates forwarded to frameworks (first time), forwarded again "
        "(retried) and acknowledged back to agents.",
        labels=["event"],
    )
    for event, n in zip(
        STATUS_EVENTS,
        (counters.status_forwarded, counters.acknowledgements, counters.status_retried),
        strict=True,
    ):
        updates.add_metric([event], n)
    yield updates
    yield histogram(
        "fairshare_registry_write_duration_seconds",
        "Duration of one durable registry write.",
        counters.registry_write_durations,
    )
