"""DRFH from any starting point (issue 15): the Fig. 1 cluster whatever order things arrive in.

DRFH Fig. 1 (Wang, Li & Liang): server s1 <2 CPUs, 12 GB>, s2 <12 CPUs, 2 GB>; user u1 runs
<0.2 CPU, 1 GB> tasks, u2 <1 CPU, 0.2 GB>; DRFH gives 10 and 10 (Fig. 3), per-server DRF 6 and
6 (Fig. 2). Each framework keeps up to 30 tasks of 3 s (plus up to 0.3 s of jitter) running, as
``fairshare run --count 30 --duration 3`` does; the model (``live_cluster_model``) runs the
pure core with allocation every 0.5 s.
"""

from __future__ import annotations

import itertools

import pytest
from live_cluster_model import FIG1_DRFH, FIG1_PER_SERVER_DRF, ClusterModel, fig1_model

from master.core import CoreConfig

PLAIN = CoreConfig(validate=True, fit_window=0)  # plain progressive filling (Best-Fit DRFH)

ORDERS = [list(order) for order in itertools.permutations(["s1", "s2", "u1", "u2"])]


def settled(model: ClusterModel, start: float, until: float) -> dict[str, dict[str, int]] | None:
    """The placement if it is the same at every whole second of [start, until], else None."""
    model.run_until(start)
    seen = model.placement()
    for second in range(int(start) + 1, int(until) + 1):
        model.run_until(second)
        if model.placement() != seen:
            return None
    return seen


def test_plain_filling_frameworks_first_then_servers_settles_at_per_server_drf_forever() -> None:
    """Without the fit-aware choice, the issue's measurement: both frameworks wait, then s1
    and s2 register one after the other. The run on s1 alone is DRF on s1 (u1 5 tasks, u2 1);
    when s2 comes u2 catches up there and u1 takes the last GB of s2; afterwards, whenever u1's
    task on s2 ends, u1 is the most deprived and s2 its only fit, so Fig. 2 is rebuilt every
    3 s."""
    model = fig1_model(["u1", "u2", "s1", "s2"], gap=1.0, jitter=0.3, seed=1, config=PLAIN)
    assert settled(model, 30.0, 60.0) == FIG1_PER_SERVER_DRF


def test_plain_filling_interleaved_arrivals_settle_on_the_wrong_servers_forever() -> None:
    """Without the fit-aware choice, s1, u1, s2, u2 one second apart: u1 alone takes s1 and
    the last 2 GB of s2; when its tasks on s1 end u2 is the most deprived and takes s1's CPUs;
    u1 is left with s2, where two of its tasks exhaust the memory. Then each user's only fit is
    the other's server: 2 and 2, rebuilt every 3 s (a fifth of what DRFH gives)."""
    model = fig1_model(["s1", "u1", "s2", "u2"], gap=1.0, jitter=0.3, seed=1, config=PLAIN)
    assert settled(model, 30.0, 60.0) == {"u1": {"s2": 2}, "u2": {"s1": 2}}


@pytest.mark.parametrize("gap", [0.0, 1.0, 2.0])
@pytest.mark.parametrize("order", ORDERS, ids="-".join)
def test_every_arrival_order_reaches_drfh_with_churn(order: list[str], gap: float) -> None:
    """Whatever the order (servers one by one either way, one framework first, all at once),
    10 and 10 within 30 s of the last arrival, and it stays. (Before the fit-aware choice 28
    of these 72 cases never got there: the two tests above.)"""
    model = fig1_model(order, gap=gap, jitter=0.3, seed=1)
    last = 3 * gap
    assert settled(model, last + 30.0, last + 60.0) == FIG1_DRFH
