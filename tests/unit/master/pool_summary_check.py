"""``assert_summary_matches``: the metrics' ``PoolSummary`` of a runtime holds exactly what its
``ClusterSnapshot`` of the same moment says (counts, frameworks, roles, pool sums)."""

from __future__ import annotations

from collections import Counter

from master.runtime import MasterRuntime


def assert_summary_matches(runtime: MasterRuntime) -> None:
    """Take both on the same loop step and compare every figure the metrics report."""
    snapshot = runtime.operator.snapshot()
    summary = runtime.operator.pool_summary()
    agents = Counter(a.state for a in snapshot.agents if a.state != "GONE")
    assert dict(summary.agent_states) == dict(agents)
    assert dict(summary.task_states) == dict(Counter(t.status.state for t in snapshot.tasks))
    assert summary.offers == len(snapshot.offers)
    assert summary.frameworks == snapshot.frameworks
    assert summary.roles == snapshot.roles
    pool = (summary.total, summary.free, summary.offered, summary.used)
    assert pool == (snapshot.total, snapshot.free, snapshot.offered, snapshot.used)
    assert summary.version == snapshot.version
