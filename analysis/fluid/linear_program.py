"""An exact linear-program solver over ``fractions.Fraction`` (dense two-phase simplex).

Solves ``maximize c.x subject to A_k.x (<=|>=|==) b_k for every row k, x >= 0`` exactly and
returns an optimal vertex with its dual values. The fluid DRFH solver (``analysis.fluid.solver``)
uses it for the linear program (7) of Wang, Li and Liang (DRFH, §IV-A) and its weighted,
finite-task rounds (§V-A); it is kept general and knows nothing about resources.

Invariants:
- Arithmetic is exact: inputs are ``int`` or ``Fraction`` (floats are refused, so no binary
  rounding sneaks in). Each row is scaled to coprime integers and the tableau is pivoted with
  Edmonds' integer-preserving rule (every entry is a minor of the input, divisions are exact),
  which is the Fraction tableau without a gcd per operation. An optimal ``x`` satisfies every
  constraint exactly and ``objective == c.x`` exactly.
- The solver always terminates, even on degenerate programs: the entering column is Dantzig's
  (most negative reduced cost) while pivots strictly improve the objective, and Bland's (lowest
  index; leaving row by minimum ratio, ties to the lowest-indexed basic variable) from a
  degenerate pivot until the next improving one. Bland's rule cannot cycle from any basis, and a
  strictly improving pivot never returns to an earlier basis, so no basis repeats forever.
- Phase 1 maximises ``-sum(artificials)``; the program is infeasible exactly when that optimum is
  negative. Artificial variables left in the basis at zero are pivoted out, rows that cannot lose
  theirs are redundant and are dropped, and artificials never re-enter in phase 2. A ``>=`` row
  with right-hand side 0 is negated into a ``<=`` row, so it needs no artificial.
- ``duals[k]`` is the optimal dual value of constraint ``k`` as given, i.e. a supergradient of
  the optimal value in its right-hand side: ``>= 0`` for ``<=``, ``<= 0`` for ``>=``, free for
  ``==``; strong duality ``sum_k duals[k] b_k == objective`` holds exactly.
- The result is deterministic: the same program always gives the same vertex.
- Pure: no I/O, no randomness, no clock; inputs are never mutated.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, NamedTuple

__all__ = ["Constraint", "LPResult", "LPStatus", "Sense", "solve_lp"]

Sense = Literal["<=", ">=", "=="]
Number = Fraction | int

_SENSES: frozenset[str] = frozenset({"<=", ">=", "=="})
_FLIP: dict[str, str] = {"<=": ">=", ">=": "<=", "==": "=="}


class Constraint(NamedTuple):
    """One row ``coefficients . x  sense  rhs``; a plain 3-tuple works as well."""

    coefficients: Sequence[Number]
    sense: str
    rhs: Number


class LPStatus(enum.Enum):
    """How a linear program ended."""

    OPTIMAL = "optimal"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"


@dataclass(frozen=True)
class LPResult:
    """``x``, ``objective`` and ``duals`` (one per constraint) are set only when optimal."""

    status: LPStatus
    x: tuple[Fraction, ...] | None = None
    objective: Fraction | None = None
    duals: tuple[Fraction, ...] | None = None


def _exact(value: object, where: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, Fraction)):
        raise TypeError(f"{where}: {value!r} is not an int or Fraction (floats are refused)")
    return Fraction(value)


def _primitive(row: list[Fraction], rhs: Fraction) -> tuple[list[int], int, Fraction]:
    """The same constraint with coprime integers, and the positive factor it was scaled by."""
    scale = math.lcm(rhs.denominator, *(a.denominator for a in row))
    integers = [int(a * scale) for a in row]
    b = int(rhs * scale)
    divisor = math.gcd(b, *integers) or 1
    return [a // divisor for a in integers], b // divisor, Fraction(scale, divisor)


class _Row(NamedTuple):
    """A normalised constraint: ``coefficients . x sense rhs`` is ``factor`` times the input."""

    coefficients: list[int]
    sense: str
    rhs: int
    factor: Fraction


class _Tableau:
    """An integer-preserving simplex tableau (Edmonds' integer pivoting, as in lrs).

    The real tableau entry is ``rows[k][j] / denom``; ``rows[k]`` ends with the right-hand side
    and ``basis[k]`` is its basic variable, whose column is ``denom`` times a unit vector. Every
    entry is a minor of the (integer) input, so a pivot divides exactly and no gcd is ever taken.
    ``obj`` is the objective row in the same form, scaled by the lcm of the cost denominators:
    positive multiples of the reduced costs ``z_j - c_j`` and, last, of the objective value.
    """

    def __init__(self, rows: list[list[int]], basis: list[int]) -> None:
        self.rows = rows
        self.basis = basis
        self.denom = 1
        self.obj: list[int] = []
        self.obj_scale = 1

    def set_objective(self, costs: Sequence[Fraction]) -> None:
        """Load ``maximize costs.x``: ``obj`` is ``denom * scale`` times the reduced costs."""
        scale = math.lcm(*(c.denominator for c in costs))
        self.obj_scale = scale
        integers = [int(c * scale) for c in costs]
        obj = [-c * self.denom for c in integers] + [0]
        for row, var in zip(self.rows, self.basis, strict=True):
            factor = integers[var]
            if factor:
                obj = [o + factor * value for o, value in zip(obj, row, strict=True)]
        self.obj = obj

    def pivot(self, r: int, col: int) -> None:
        prow = self.rows[r]
        p, d = prow[col], self.denom
        for k, row in enumerate([*self.rows, self.obj]):
            f = row[col]
            if k == r:
                continue
            if f:
                row = [(a * p - f * b) // d for a, b in zip(row, prow, strict=True)]
            elif p != d:
                row = [a * p // d for a in row]
            if k < len(self.rows):
                self.rows[k] = row
            else:
                self.obj = row
        self.denom = p
        if p < 0:  # keep the denominator positive (only artificial drive-out pivots on p < 0)
            self.rows = [[-a for a in row] for row in self.rows]
            self.obj = [-a for a in self.obj]
            self.denom = -p
        self.basis[r] = col

    def entering(self, allowed: int, bland: bool) -> int | None:
        """A column below ``allowed`` with a negative reduced cost, ``None`` at the optimum.

        Dantzig's rule (most negative reduced cost, lowest index on ties) unless ``bland``, then
        Bland's rule (lowest index).
        """
        best: int | None = None
        for j in range(allowed):
            value = self.obj[j]
            if value < 0:
                if bland:
                    return j
                if best is None or value < self.obj[best]:
                    best = j
        return best

    def leaving(self, col: int) -> int | None:
        """Minimum ratio test; ties go to the lowest-indexed basic variable (Bland)."""
        best: int | None = None
        for r, row in enumerate(self.rows):
            if row[col] > 0:
                if best is None:
                    best = r
                    continue
                # row[-1] / row[col]  vs  best's ratio, cross-multiplied (both pivots > 0).
                here = row[-1] * self.rows[best][col]
                there = self.rows[best][-1] * row[col]
                if here < there or (here == there and self.basis[r] < self.basis[best]):
                    best = r
        return best

    def run(self, allowed: int) -> bool:
        """Pivot to optimality over columns ``< allowed``; False when unbounded."""
        bland = False
        while True:
            col = self.entering(allowed, bland)
            if col is None:
                return True
            r = self.leaving(col)
            if r is None:
                return False
            bland = self.rows[r][-1] == 0  # a degenerate pivot: the objective will not move
            self.pivot(r, col)


def _normalise(
    constraints: Iterable[tuple[Sequence[Number], str, Number]], width: int
) -> list[_Row]:
    """Check every row; make the right-hand sides non-negative and the coefficients integer."""
    out: list[_Row] = []
    for k, (coefficients, sense, rhs) in enumerate(constraints):
        if sense not in _SENSES:
            raise ValueError(f"constraint {k}: sense {sense!r} is not one of <=, >=, ==")
        if len(coefficients) != width:
            raise ValueError(
                f"constraint {k}: {len(coefficients)} coefficients for {width} variables"
            )
        row = [_exact(a, f"constraint {k}") for a in coefficients]
        b = _exact(rhs, f"constraint {k} right-hand side")
        sign = 1
        if b < 0 or (b == 0 and sense == ">="):
            row, sense, b, sign = [-a for a in row], _FLIP[sense], -b, -1
        integers, rhs_int, scale = _primitive(row, b)
        out.append(_Row(integers, sense, rhs_int, sign * scale))
    return out


def _build(rows: list[_Row], width: int) -> tuple[_Tableau, int, list[int]]:
    """Tableau with slack/surplus columns after the originals, artificials last.

    Returns the tableau, the index of the first artificial column, and for every row the column
    that starts in the basis (its slack or its artificial), where its dual value is read.
    """
    n_slack = sum(1 for row in rows if row.sense != "==")
    n_art = sum(1 for row in rows if row.sense != "<=")
    first_art = width + n_slack
    table: list[list[int]] = []
    basis: list[int] = []
    slack, art = width, first_art
    for row in rows:
        extra = [0] * (n_slack + n_art)
        if row.sense == "<=":
            extra[slack - width] = 1
            basis.append(slack)
            slack += 1
        else:
            if row.sense == ">=":
                extra[slack - width] = -1
                slack += 1
            extra[art - width] = 1
            basis.append(art)
            art += 1
        table.append([*row.coefficients, *extra, row.rhs])
    return _Tableau(table, list(basis)), first_art, basis


def _drive_out_artificials(tableau: _Tableau, first_art: int) -> None:
    """Pivot zero-level artificials out of the basis; drop rows that are redundant."""
    r = 0
    while r < len(tableau.rows):
        if tableau.basis[r] >= first_art:
            row = tableau.rows[r]
            col = next((j for j in range(first_art) if row[j]), None)
            if col is None:
                del tableau.rows[r]
                del tableau.basis[r]
                continue
            tableau.pivot(r, col)
        r += 1


def solve_lp(
    objective: Sequence[Number],
    constraints: Iterable[tuple[Sequence[Number], str, Number]],
) -> LPResult:
    """Maximise ``objective . x`` subject to ``constraints`` and ``x >= 0``, exactly.

    Each constraint is ``(coefficients, sense, rhs)`` (or a ``Constraint``) with ``sense`` one of
    ``"<="``, ``">="``, ``"=="`` and as many coefficients as ``objective`` has entries. Minimise
    by negating the objective. Raises ``ValueError`` for a malformed row and ``TypeError`` for a
    non-exact number.
    """
    width = len(objective)
    costs = [_exact(c, "objective") for c in objective]
    rows = _normalise(constraints, width)
    tableau, first_art, initial = _build(rows, width)
    columns = len(tableau.rows[0]) - 1 if tableau.rows else width
    if columns > first_art:
        tableau.set_objective([Fraction(0)] * first_art + [Fraction(-1)] * (columns - first_art))
        tableau.run(columns)  # bounded above by 0, never unbounded
        if tableau.obj[-1] < 0:
            return LPResult(LPStatus.INFEASIBLE)
        _drive_out_artificials(tableau, first_art)
    tableau.set_objective(costs + [Fraction(0)] * (columns - width))
    if not tableau.run(first_art):  # artificial columns stay, priced, but never enter
        return LPResult(LPStatus.UNBOUNDED)
    x = [Fraction(0)] * width
    for row, var in zip(tableau.rows, tableau.basis, strict=True):
        if var < width:
            x[var] = Fraction(row[-1], tableau.denom)
    value = sum((c * v for c, v in zip(costs, x, strict=True)), Fraction(0))
    scale = tableau.denom * tableau.obj_scale
    duals = tuple(
        Fraction(tableau.obj[col], scale) * row.factor
        for col, row in zip(initial, rows, strict=True)
    )
    return LPResult(LPStatus.OPTIMAL, tuple(x), value, duals)
