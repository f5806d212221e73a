"""The exact two-phase simplex (analysis.fluid.linear_program)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.fluid.linear_program import Constraint, LPStatus, solve_lp

F = Fraction


def fr(*values: int | Fraction) -> tuple[Fraction, ...]:
    return tuple(F(v) for v in values)


def test_textbook_maximum() -> None:
    # Hillier & Lieberman's Wyndor Glass: max 3x + 5y, x <= 4, 2y <= 12, 3x + 2y <= 18.
    result = solve_lp([3, 5], [([1, 0], "<=", 4), ([0, 2], "<=", 12), ([3, 2], "<=", 18)])
    assert result.status is LPStatus.OPTIMAL
    assert result.x == fr(2, 6)
    assert result.objective == 36
    assert result.duals == fr(0, F(3, 2), 1)  # the shadow prices of the three plants


def test_minimise_by_negating_with_fractional_vertex() -> None:
    # min x + y  s.t.  x + 2y >= 4, 3x + y >= 6  ->  (8/5, 6/5), value 14/5 exactly.
    result = solve_lp([-1, -1], [([1, 2], ">=", 4), ([3, 1], ">=", 6)])
    assert result.status is LPStatus.OPTIMAL
    assert result.x == fr(F(8, 5), F(6, 5))
    assert result.objective == F(-14, 5)
    assert result.duals == fr(F(-2, 5), F(-1, 5))  # raising a >= bound lowers the maximum


def test_equality_constraints() -> None:
    result = solve_lp(
        [2, 1, 0], [([1, 1, 1], "==", 3), ([1, 0, 0], "<=", 2), ([0, 1, -1], "==", 0)]
    )
    assert result.status is LPStatus.OPTIMAL
    assert result.x == fr(2, F(1, 2), F(1, 2))
    assert result.objective == F(9, 2)


def test_redundant_equalities_are_dropped() -> None:
    rows = [([1, 1], "==", 2), ([2, 2], "==", 4), ([3, 3], "==", 6)]
    result = solve_lp([1, 0], rows)
    assert result.status is LPStatus.OPTIMAL
    assert result.x == fr(2, 0)


def test_negative_right_hand_side_is_flipped() -> None:
    # -x - y <= -2 is x + y >= 2.
    result = solve_lp([-1, -2], [Constraint([-1, -1], "<=", -2)])
    assert result.status is LPStatus.OPTIMAL
    assert result.x == fr(2, 0)
    assert result.objective == -2
    assert result.duals == fr(1)


def test_zero_rhs_ge_row_and_equality_duals() -> None:
    # max x + y  s.t.  x - y >= 0, x + y == 4 (its dual is free), x <= 3.
    result = solve_lp([1, 1], [([1, -1], ">=", 0), ([1, 1], "==", 4), ([1, 0], "<=", 3)])
    assert result.status is LPStatus.OPTIMAL
    assert result.objective == 4
    assert result.duals is not None
    assert sum(y * b for y, b in zip(result.duals, [0, 4, 3], strict=True)) == 4


def test_beale_degenerate_program_does_not_cycle() -> None:
    # Beale (1955): cycles forever under Dantzig's rule without an anti-cycling rule.
    objective: list[Fraction | int] = [F(3, 4), -20, F(1, 2), -6]
    rows: list[tuple[list[Fraction | int], str, int]] = [
        ([F(1, 4), -8, -1, 9], "<=", 0),
        ([F(1, 2), -12, F(-1, 2), 3], "<=", 0),
        ([0, 0, 1, 0], "<=", 1),
    ]
    result = solve_lp(objective, rows)
    assert result.status is LPStatus.OPTIMAL
    assert result.objective == F(5, 4)
    assert result.x == fr(1, 0, 1, 0)


def test_degenerate_zero_rhs_equalities() -> None:
    # The shape of the DRFH level program: totals tied to t by equalities with rhs 0.
    rows = [([1, 0, -2], "==", 0), ([0, 1, -1], "==", 0), ([1, 3, 0], "<=", 10)]
    result = solve_lp([0, 0, 1], rows)
    assert result.status is LPStatus.OPTIMAL
    assert result.x == fr(4, 2, 2)


def test_infeasible() -> None:
    result = solve_lp([1, 1], [([1, 1], "<=", 1), ([1, 1], ">=", 2)])
    assert result.status is LPStatus.INFEASIBLE
    assert result.x is None
    assert result.objective is None


def test_infeasible_equalities() -> None:
    assert solve_lp([0], [([1], "==", 1), ([1], "==", 2)]).status is LPStatus.INFEASIBLE


def test_unbounded() -> None:
    result = solve_lp([1, 0], [([1, -1], "<=", 1)])
    assert result.status is LPStatus.UNBOUNDED
    assert result.x is None


def test_unbounded_after_phase_one() -> None:
    assert solve_lp([0, 1], [([1, -1], "==", 1)]).status is LPStatus.UNBOUNDED


def test_no_constraints() -> None:
    assert solve_lp([-1, 0], []).x == fr(0, 0)
    assert solve_lp([1], []).status is LPStatus.UNBOUNDED
    assert solve_lp([], []).x == fr()


def test_inputs_are_not_mutated() -> None:
    coefficients = [F(1), F(2)]
    rows = [(coefficients, "<=", F(4))]
    solve_lp([1, 1], rows)
    assert coefficients == [1, 2]


@pytest.mark.parametrize(
    ("objective", "rows", "error"),
    [
        ([1, 1], [([1], "<=", 1)], ValueError),
        ([1], [([1], "<", 1)], ValueError),
        ([1], [([0.5], "<=", 1)], TypeError),
        ([1.0], [([1], "<=", 1)], TypeError),
        ([1], [([1], "<=", True)], TypeError),
    ],
)
def test_bad_input(
    objective: list[object], rows: list[tuple[object, str, object]], error: type[Exception]
) -> None:
    with pytest.raises(error):
        solve_lp(objective, rows)  # type: ignore[arg-type]


# -- brute force: on a bounded program the optimum is the best feasible vertex -------------------


def _solve_square(matrix: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction] | None:
    size = len(rhs)
    a = [[*row, b] for row, b in zip(matrix, rhs, strict=True)]
    for col in range(size):
        pivot = next((r for r in range(col, size) if a[r][col]), None)
        if pivot is None:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(size):
            if r != col and a[r][col]:
                factor = a[r][col] / a[col][col]
                a[r] = [x - factor * y for x, y in zip(a[r], a[col], strict=True)]
    return [a[r][size] / a[r][r] for r in range(size)]


def _best_vertex(
    objective: Sequence[int], rows: Sequence[tuple[list[int], str, int]]
) -> Fraction | None:
    width = len(objective)
    planes = [(list(map(F, c)), F(b)) for c, _, b in rows]
    planes += [([F(int(j == k)) for k in range(width)], F(0)) for j in range(width)]
    best: Fraction | None = None
    for chosen in itertools.combinations(planes, width):
        x = _solve_square([c for c, _ in chosen], [b for _, b in chosen])
        if x is None or any(v < 0 for v in x):
            continue
        feasible = True
        for c, sense, b in rows:
            lhs = sum((F(a) * v for a, v in zip(c, x, strict=True)), F(0))
            if (
                (sense == "<=" and lhs > b)
                or (sense == ">=" and lhs < b)
                or (sense == "==" and lhs != b)
            ):
                feasible = False
        if feasible:
            value = sum((F(a) * v for a, v in zip(objective, x, strict=True)), F(0))
            best = value if best is None else max(best, value)
    return best


_coef = st.integers(min_value=-4, max_value=4)


@st.composite
def _programs(draw: st.DrawFn) -> tuple[list[int], list[tuple[list[int], str, int]]]:
    width = draw(st.integers(min_value=1, max_value=3))
    objective = draw(st.lists(_coef, min_size=width, max_size=width))
    rows = [([int(j == k) for k in range(width)], "<=", 6) for j in range(width)]  # bounded
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        coefficients = draw(st.lists(_coef, min_size=width, max_size=width))
        sense = draw(st.sampled_from(["<=", ">=", "=="]))
        rows.append((coefficients, sense, draw(st.integers(min_value=-6, max_value=6))))
    return objective, rows


@settings(max_examples=100, deadline=None)
@given(_programs())
def test_matches_vertex_enumeration(
    program: tuple[list[int], list[tuple[list[int], str, int]]],
) -> None:
    objective, rows = program
    result = solve_lp(objective, rows)
    best = _best_vertex(objective, rows)
    if best is None:
        assert result.status is LPStatus.INFEASIBLE
        return
    assert result.status is LPStatus.OPTIMAL
    assert result.objective == best
    assert result.x is not None
    for c, sense, b in rows:
        lhs = sum((F(a) * v for a, v in zip(c, result.x, strict=True)), F(0))
        assert {"<=": lhs <= b, ">=": lhs >= b, "==": lhs == b}[sense]
    assert all(v >= 0 for v in result.x)
    _assert_dual_optimal(objective, rows, result.x, result.duals)


def _assert_dual_optimal(
    objective: Sequence[int],
    rows: Sequence[tuple[list[int], str, int]],
    x: Sequence[Fraction],
    duals: Sequence[Fraction] | None,
) -> None:
    """Dual feasibility, strong duality and complementary slackness, exactly."""
    assert duals is not None
    assert len(duals) == len(rows)
    for y, (_, sense, _) in zip(duals, rows, strict=True):
        assert {"<=": y >= 0, ">=": y <= 0, "==": True}[sense]
    for j, c in enumerate(objective):
        reduced = sum((y * row[j] for y, (row, _, _) in zip(duals, rows, strict=True)), F(0)) - c
        assert reduced >= 0
        assert reduced == 0 or x[j] == 0
    value = sum((F(c) * v for c, v in zip(objective, x, strict=True)), F(0))
    assert sum((y * b for y, (_, _, b) in zip(duals, rows, strict=True)), F(0)) == value
