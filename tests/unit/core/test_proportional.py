"""PF prices and allocation (master.core.proportional), against Bonald & Roberts §2.4."""

from __future__ import annotations

import math
import random
import time

import pytest

from master.core.proportional import pf_allocation, pf_kkt_residual, pf_prices

TOL = 1e-9


def _close(actual: list[float], expected: list[float], tol: float = TOL) -> bool:
    return len(actual) == len(expected) and all(
        math.isclose(a, e, rel_tol=tol, abs_tol=tol) for a, e in zip(actual, expected, strict=True)
    )


def _solve(rows: list[list[float]]) -> tuple[list[float], list[float]]:
    nu = pf_prices(rows)
    return nu, pf_allocation(rows, nu)


# -- the paper's examples -------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["newton", "gradient"])
def test_proposition_5_truthful(method: str) -> None:
    rows = [[1 / 2, 1], [1, 1 / 2]]
    nu = pf_prices(rows, method=method)  # type: ignore[arg-type]
    assert _close(nu, [1, 1])
    assert _close(pf_allocation(rows, nu), [2 / 3, 2 / 3])


@pytest.mark.parametrize("method", ["newton", "gradient"])
def test_proposition_5_job_1_lies(method: str) -> None:
    # Job 1 claims 2/3 of resource 1 per task instead of 1/2: nu' = (2, 0), phi' = (3/4, 1/2).
    # Degenerate: resource 2 is exactly full with price 0.
    rows = [[2 / 3, 1], [1, 1 / 2]]
    nu = pf_prices(rows, method=method)  # type: ignore[arg-type]
    assert _close(nu, [2, 0])
    assert _close(pf_allocation(rows, nu), [3 / 4, 1 / 2])


def test_remark_3_both_jobs_lose() -> None:
    nu, phi = _solve([[1, 1], [1, 1 / 2]])
    assert _close(nu, [2, 0])
    assert nu[1] == 0.0  # clipped at zero exactly
    assert _close(phi, [1 / 2, 1 / 2])


def test_remark_4_truthful_corrects_the_paper() -> None:
    # The paper prints nu = (1, 1) for a1 = (1/2, 1), a2 = (1, 1/3); that nu gives
    # phi_1 = 1 / (1/2 + 1) = 2/3, not the printed 4/5. Solving KKT (3) with both resources
    # saturated, 5/4 = nu1/2 + nu2 and 5/3 = nu1 + nu2/3, gives nu = (3/2, 1/2) (sum 2 = n,
    # eq. 5), which does yield the printed phi = (4/5, 3/5). We assert the correct nu.
    nu, phi = _solve([[1 / 2, 1], [1, 1 / 3]])
    assert _close(nu, [3 / 2, 1 / 2])
    assert _close(phi, [4 / 5, 3 / 5])
    assert not _close(pf_allocation([[1 / 2, 1], [1, 1 / 3]], [1, 1]), [4 / 5, 3 / 5])


def test_remark_4_job_1_lies() -> None:
    nu, phi = _solve([[2 / 3, 1], [1, 1 / 3]])
    assert _close(nu, [2, 0])
    assert _close(phi, [3 / 4, 1 / 2])
    # True tasks of job 1 (needs (1/2, 1)) from the resources (1/2, 3/4) it now gets: 3/4 < 4/5.
    true_tasks = min(phi[0] * (2 / 3) / (1 / 2), phi[0] * 1 / 1)
    assert true_tasks < 4 / 5


def test_drf_paper_example_is_ceei() -> None:
    # 9 CPUs, 18 GB; A <1, 4>, B <3, 1>: CEEI (= PF) gives 45/11 and 18/11 tasks.
    _, phi = _solve([[1 / 9, 4 / 18], [3 / 9, 1 / 18]])
    assert _close(phi, [45 / 11, 18 / 11])


# -- properties -----------------------------------------------------------------------------------


def _random_rows(rng: random.Random, n: int, width: int) -> list[list[float]]:
    rows = []
    for _ in range(n):
        row = [rng.random() if rng.random() < 0.7 else 0.0 for _ in range(width)]
        if max(row) == 0:
            row[rng.randrange(width)] = rng.uniform(0.01, 1)
        rows.append(row)
    return rows


@pytest.mark.parametrize("seed", range(12))
def test_eq_5_prices_sum_to_n_and_kkt_holds(seed: int) -> None:
    rng = random.Random(seed)
    n, width = rng.randint(1, 40), rng.randint(1, 4)
    rows = _random_rows(rng, n, width)
    nu = pf_prices(rows)
    assert math.isclose(sum(nu), n, rel_tol=1e-10)
    assert all(v >= 0 for v in nu)
    assert pf_kkt_residual(rows, nu) <= 1e-10
    phi = pf_allocation(rows, nu)
    for j in range(width):  # feasibility (1) and complementary slackness (4)
        load = sum(p * row[j] for p, row in zip(phi, rows, strict=True))
        assert load <= 1 + 1e-10
        assert nu[j] == 0 or math.isclose(load, 1, rel_tol=1e-9)
    # Proposition 4 (sharing incentive): phi_i max_j a_ij >= 1/n.
    assert all(p * max(row) >= 1 / n - 1e-10 for p, row in zip(phi, rows, strict=True))


@pytest.mark.parametrize("seed", range(4))
def test_gradient_iteration_reaches_the_same_fixed_point(seed: int) -> None:
    rng = random.Random(100 + seed)
    rows = _random_rows(rng, 6, 3)
    newton = pf_prices(rows)
    gradient = pf_prices(rows, method="gradient", max_iterations=100_000)
    assert _close(pf_allocation(rows, gradient), pf_allocation(rows, newton), 1e-7)


def test_local_fairness_single_resource() -> None:
    rows = [[0.5], [0.1], [0.02], [1.0]]
    nu, phi = _solve(rows)
    assert _close(nu, [4])
    assert all(math.isclose(p * row[0], 1 / 4) for p, row in zip(phi, rows, strict=True))


def test_weighted_single_resource_shares_follow_weights() -> None:
    rows = [[0.5], [0.1], [0.25]]
    weights = [1.0, 2.0, 5.0]
    nu = pf_prices(rows, weights=weights)
    assert _close(nu, [8])  # eq. 5 weighted: sum nu = sum w
    phi = pf_allocation(rows, nu, weights=weights)
    assert _close([p * row[0] for p, row in zip(phi, rows, strict=True)], [1 / 8, 2 / 8, 5 / 8])


def test_scale_invariance_proposition_6() -> None:
    rows = [[1 / 2, 1], [1, 1 / 3], [0.2, 0.7]]
    scaled = [[3 * a for a in rows[0]], rows[1], [0.5 * a for a in rows[2]]]
    phi = pf_allocation(rows, pf_prices(rows))
    phi_scaled = pf_allocation(scaled, pf_prices(scaled))
    assert _close(phi_scaled, [phi[0] / 3, phi[1], phi[2] / 0.5])


def test_caps_match_an_explicit_private_resource() -> None:
    # A cap m on job i is a private extra resource with a_i,cap = 1/m (module docstring).
    rows = [[1 / 9, 4 / 18], [3 / 9, 1 / 18], [0.1, 0.1]]
    caps: list[float | None] = [None, 1.0, 2.5]
    nu = pf_prices(rows, caps=caps)
    phi = pf_allocation(rows, nu, caps=caps)
    extended = [
        [*rows[0], 0.0, 0.0],
        [*rows[1], 1 / 1.0, 0.0],
        [*rows[2], 0.0, 1 / 2.5],
    ]
    nu_ext = pf_prices(extended)
    assert _close(phi, pf_allocation(extended, nu_ext))
    assert _close(nu, nu_ext[:2])
    assert pf_kkt_residual(rows, nu, caps=caps) <= 1e-10
    assert phi[1] <= 1.0 + 1e-12


def test_all_jobs_capped_below_capacity_gives_zero_prices() -> None:
    rows = [[0.1, 0.2], [0.3, 0.1]]
    nu = pf_prices(rows, caps=[1.0, 1.0])
    assert nu == [0.0, 0.0]
    assert pf_allocation(rows, nu, caps=[1.0, 1.0]) == [1.0, 1.0]


def test_identical_columns_singular_hessian() -> None:
    rows = [[0.2, 0.2, 0.5], [0.4, 0.4, 0.1], [0.3, 0.3, 0.3]]
    nu = pf_prices(rows)
    assert pf_kkt_residual(rows, nu) <= 1e-10
    assert math.isclose(sum(nu), 3, rel_tol=1e-10)


def test_unused_resource_has_price_zero() -> None:
    rows = [[0.5, 0.0], [0.25, 0.0]]
    nu = pf_prices(rows)
    assert nu[1] == 0.0
    assert _close(nu, [2, 0])


def test_thousand_jobs_four_resources_converges() -> None:
    # Sanity for the live allocator's size; the residual is asserted, not the time.
    rows = _random_rows(random.Random(2024), 1000, 4)
    started = time.perf_counter()
    nu = pf_prices(rows)
    elapsed = time.perf_counter() - started
    assert pf_kkt_residual(rows, nu) <= 1e-10
    assert math.isclose(sum(nu), 1000, rel_tol=1e-10)
    print(f"pf_prices 1000 x 4: {elapsed * 1000:.1f} ms")


def test_no_jobs() -> None:
    assert pf_prices([]) == []
    assert pf_allocation([], []) == []


@pytest.mark.parametrize(
    "rows",
    [
        [[0.0, 0.0]],
        [[0.5, -0.1]],
        [[0.5, math.nan]],
        [[0.5, math.inf]],
        [[0.5, 0.5], [0.5]],
        [[]],
    ],
)
def test_bad_task_shares(rows: list[list[float]]) -> None:
    with pytest.raises(ValueError):
        pf_prices(rows)


def test_bad_weights_caps_prices_and_method() -> None:
    rows = [[0.5, 0.5]]
    with pytest.raises(ValueError, match="weight"):
        pf_prices(rows, weights=[0.0])
    with pytest.raises(ValueError, match="weights"):
        pf_prices(rows, weights=[1.0, 1.0])
    with pytest.raises(ValueError, match="cap"):
        pf_prices(rows, caps=[0.0])
    with pytest.raises(ValueError, match="prices"):
        pf_allocation(rows, [1.0])
    with pytest.raises(ValueError, match="prices"):
        pf_allocation(rows, [1.0, -1.0])
    with pytest.raises(ValueError, match="method"):
        pf_prices(rows, method="simplex")  # type: ignore[arg-type]


def test_unpriced_job_is_unbounded() -> None:
    assert pf_allocation([[1.0, 0.0]], [0.0, 1.0]) == [math.inf]
    assert pf_kkt_residual([[1.0, 0.0]], [0.0, 1.0]) == math.inf
