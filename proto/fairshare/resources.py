"""Exact multi-resource quantities: the ``ResourceVector`` and its Mesos text syntax.

A ``ResourceVector`` maps resource names (``cpus``, ``mem`` in MiB, ``disk`` in MiB, ``gpus`` or any
custom name) to non-negative quantities with exactly three decimals, like Mesos scalars.

Invariants:
- Quantities are stored as integers in milli-units (``1.5`` cpus is ``1500``); arithmetic is exact.
- Only strictly positive quantities are stored: a zero quantity and an absent name are the same
  thing, so equal vectors compare and hash equal whatever zeros they were built with.
- A vector never holds a negative quantity: subtraction that would go below zero raises
  ``ResourceError`` (use ``saturating_sub`` to clamp instead).
- Vectors are immutable; every operation returns a new vector.
- Every bad input (negative, NaN, infinite, too large, empty or malformed name, duplicate name,
  garbage text) raises ``ResourceError``, whose message names the offending part; the text
  syntax also refuses a positive quantity below 0.001 (it would round to nothing) and a
  fraction of a whole resource (``gpus:1.5``).

Text syntax (Mesos): ``cpus:4;mem:8192;disk:1024``. Whitespace around names and values is
ignored; ``str(vector)`` prints the canonical form (``cpus``, ``mem``, ``disk``, ``gpus`` first,
then the other names alphabetically; integers without a decimal point).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Final

__all__ = ["MILLI", "ResourceError", "ResourceVector", "canonical_order"]

MILLI: Final = 1000
"""Milli-units per unit: quantities have three decimals."""

_MAX_MILLIS: Final = 2**62  # far below int64 on the wire, far above any real machine
_MAX_DIGITS: Final = 15  # decimal exponent beyond which a quantity is too large in any unit
_NAME_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-/]*$")
_FIRST_NAMES: Final = ("cpus", "mem", "disk", "gpus")
_MILLI_QUANTUM: Final = Decimal("0.001")
WHOLE_RESOURCES: Final = frozenset({"gpus"})
"""Resources counted in whole devices: the text syntax refuses fractions of them (as Mesos)."""


class ResourceError(ValueError):
    """A resource quantity, name or text that cannot be a ``ResourceVector``."""


def canonical_order(name: str) -> tuple[int, str]:
    """Sort key that puts ``cpus, mem, disk, gpus`` first and the rest alphabetically."""
    try:
        return (_FIRST_NAMES.index(name), "")
    except ValueError:
        return (len(_FIRST_NAMES), name)


def _check_name(name: object) -> str:
    if not isinstance(name, str):
        raise ResourceError(f"resource name {name!r} is not a string")
    stripped = name.strip()
    if not stripped:
        raise ResourceError("resource name is empty")
    if not _NAME_RE.match(stripped):
        raise ResourceError(
            f"resource name {stripped!r} is malformed: use letters, digits, '_', '.', '-', '/',"
            " starting with a letter or '_'"
        )
    return stripped


def _to_millis(name: str, value: object) -> int:
    """Convert one quantity to milli-units, rounding half-even to three decimals."""
    if isinstance(value, bool):
        raise ResourceError(f"resource {name!r}: quantity {value!r} is not a number")
    if isinstance(value, int):
        millis = value * MILLI
    else:
        if isinstance(value, float):
            if math.isnan(value):
                raise ResourceError(f"resource {name!r}: quantity is NaN")
            if math.isinf(value):
                raise ResourceError(f"resource {name!r}: quantity is infinite")
            text = repr(value)
        elif isinstance(value, (str, Decimal)):
            text = str(value).strip()
        else:
            raise ResourceError(f"resource {name!r}: quantity {value!r} is not a number")
        try:
            dec = Decimal(text)
        except InvalidOperation:
            raise ResourceError(f"resource {name!r}: quantity {text!r} is not a number") from None
        if dec.is_nan():
            raise ResourceError(f"resource {name!r}: quantity is NaN")
        if dec.is_infinite():
            raise ResourceError(f"resource {name!r}: quantity is infinite")
        if dec < 0:  # before rounding: -0.0001 is a negative quantity, not zero
            raise ResourceError(f"resource {name!r}: quantity {text} is negative")
        if dec and dec.adjusted() > _MAX_DIGITS:  # the exponent alone: no arithmetic can overflow
            raise ResourceError(f"resource {name!r}: quantity {text} is too large")
        millis = int(dec.quantize(_MILLI_QUANTUM, rounding=ROUND_HALF_EVEN) * MILLI)
    if millis < 0:
        raise ResourceError(f"resource {name!r}: quantity {millis / MILLI:g} is negative")
    if millis > _MAX_MILLIS:
        raise ResourceError(f"resource {name!r}: quantity is too large")
    return millis


def _format_millis(millis: int) -> str:
    whole, frac = divmod(millis, MILLI)
    if frac == 0:
        return str(whole)
    return f"{whole}.{frac:03d}".rstrip("0")


class ResourceVector(Mapping[str, float]):
    """An immutable vector of named, non-negative, fixed-point (three decimal) quantities.

    Read quantities as floats with ``vector["cpus"]`` (absent names read as ``0.0``) or exactly
    with ``vector.millis("cpus")``. ``a + b``, ``a - b``, ``k * a`` are exact; ``a <= b`` and
    ``a.fits_in(b)`` test that ``a`` fits in ``b`` component-wise.
    """

    __slots__ = ("_m",)
    _m: dict[str, int]

    def __init__(self, quantities: Mapping[str, object] | None = None, /, **named: object) -> None:
        millis: dict[str, int] = {}
        items: list[tuple[object, object]] = []
        if quantities is not None:
            if not isinstance(quantities, Mapping):
                raise ResourceError(
                    f"resources must be a mapping of name to quantity, got {quantities!r}"
                )
            items.extend(quantities.items())
        items.extend(named.items())
        for raw_name, value in items:
            name = _check_name(raw_name)
            if name in millis:
                raise ResourceError(f"resource {name!r} is given twice")
            millis[name] = _to_millis(name, value)
        self._m = {k: v for k, v in millis.items() if v}

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def _trusted(cls, millis: dict[str, int]) -> ResourceVector:
        """Wrap an already-valid dict of positive milli quantities (no copy, no checks)."""
        vector = object.__new__(cls)
        vector._m = millis
        return vector

    @classmethod
    def from_millis(cls, millis: Mapping[str, int]) -> ResourceVector:
        """Build from integer milli-unit quantities (validated)."""
        out: dict[str, int] = {}
        for raw_name, value in millis.items():
            name = _check_name(raw_name)
            if name in out:
                raise ResourceError(f"resource {name!r} is given twice")
            if isinstance(value, bool) or not isinstance(value, int):
                raise ResourceError(
                    f"resource {name!r}: milli quantity {value!r} is not an integer"
                )
            if value < 0:
                raise ResourceError(f"resource {name!r}: quantity {value / MILLI:g} is negative")
            if value > _MAX_MILLIS:
                raise ResourceError(f"resource {name!r}: quantity is too large")
            if value:
                out[name] = value
        return cls._trusted(out)

    @classmethod
    def parse(cls, text: str) -> ResourceVector:
        """Parse the Mesos syntax ``cpus:4;mem:8192``. An empty string is the empty vector."""
        if not isinstance(text, str):
            raise ResourceError(f"resources text must be a string, got {text!r}")
        millis: dict[str, int] = {}
        stripped = text.strip()
        if not stripped:
            return cls._trusted({})
        for index, part in enumerate(stripped.split(";")):
            if not part.strip():
                if index == len(stripped.split(";")) - 1:
                    continue  # tolerate one trailing ';'
                raise ResourceError(f"resources {text!r}: empty entry at position {index + 1}")
            if part.count(":") != 1:
                raise ResourceError(f"resources {text!r}: entry {part.strip()!r} is not NAME:VALUE")
            raw_name, raw_value = part.split(":")
            name = _check_name(raw_name)
            if name in millis:
                raise ResourceError(f"resources {text!r}: resource {name!r} is given twice")
            if not raw_value.strip():
                raise ResourceError(f"resources {text!r}: resource {name!r} has no quantity")
            millis[name] = _to_millis(name, raw_value.strip())
            if millis[name] == 0 and Decimal(raw_value.strip()) > 0:  # rounded to 0: say so
                raise ResourceError(
                    f"resources {text!r}: {name} {raw_value.strip()} is below the smallest"
                    f" quantity, {1 / MILLI:g}"
                )
            if name in WHOLE_RESOURCES and millis[name] % MILLI:
                raise ResourceError(
                    f"resources {text!r}: {name} must be a whole number, got {raw_value.strip()}"
                )
        return cls._trusted({k: v for k, v in millis.items() if v})

    # -- Mapping protocol ---------------------------------------------------------------------

    def __getitem__(self, name: str) -> float:
        return self._m.get(name, 0) / MILLI

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._m, key=canonical_order))

    def __len__(self) -> int:
        return len(self._m)

    def __contains__(self, name: object) -> bool:
        return name in self._m

    def millis(self, name: str) -> int:
        """The exact quantity of ``name`` in milli-units (0 when absent)."""
        return self._m.get(name, 0)

    def millis_items(self) -> Iterator[tuple[str, int]]:
        """``(name, milli quantity)`` pairs of the positive quantities, canonical order."""
        for name in self:
            yield name, self._m[name]

    def names(self) -> frozenset[str]:
        """The names with a positive quantity."""
        return frozenset(self._m)

    def millis_view(self) -> Mapping[str, int]:
        """The internal ``{name: positive milli quantity}`` map, without a copy (hot paths only).

        Read-only by contract: mutating it breaks the vector's immutability.
        """
        return self._m

    def to_dict(self) -> dict[str, float]:
        """Plain ``{name: float}`` in canonical order (for JSON)."""
        return {name: self._m[name] / MILLI for name in self}

    def to_millis(self) -> dict[str, int]:
        """A copy of the exact ``{name: milli quantity}``."""
        return dict(self._m)

    # -- arithmetic ---------------------------------------------------------------------------

    def __add__(self, other: ResourceVector) -> ResourceVector:
        if not isinstance(other, ResourceVector):
            return NotImplemented
        if not other._m:
            return self
        if not self._m:
            return other
        out = self._m.copy()
        for name, value in other._m.items():
            out[name] = out.get(name, 0) + value
        return ResourceVector._trusted(out)

    def __sub__(self, other: ResourceVector) -> ResourceVector:
        if not isinstance(other, ResourceVector):
            return NotImplemented
        if not other._m:
            return self
        out = self._m.copy()
        for name, value in other._m.items():
            left = out.get(name, 0) - value
            if left < 0:
                raise ResourceError(
                    f"resource {name!r}: cannot take {value / MILLI:g}"
                    f" from {out.get(name, 0) / MILLI:g}"
                )
            if left:
                out[name] = left
            else:
                del out[name]
        return ResourceVector._trusted(out)

    def saturating_sub(self, other: ResourceVector) -> ResourceVector:
        """``self - other`` with every quantity clamped at zero."""
        out = {}
        for name, value in self._m.items():
            left = value - other._m.get(name, 0)
            if left > 0:
                out[name] = left
        return ResourceVector._trusted(out)

    def __mul__(self, factor: int) -> ResourceVector:
        if isinstance(factor, bool) or not isinstance(factor, int):
            return NotImplemented
        if factor < 0:
            raise ResourceError(f"cannot scale resources by negative factor {factor}")
        if factor == 0:
            return ResourceVector._trusted({})
        if factor == 1:
            return self
        return ResourceVector._trusted({k: v * factor for k, v in self._m.items()})

    __rmul__ = __mul__

    def fits_in(self, other: ResourceVector) -> bool:
        """True when every quantity of ``self`` is at most the same quantity of ``other``."""
        available = other._m
        for name, value in self._m.items():
            if available.get(name, 0) < value:
                return False
        return True

    def __le__(self, other: object) -> bool:
        if not isinstance(other, ResourceVector):
            return NotImplemented
        return self.fits_in(other)

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, ResourceVector):
            return NotImplemented
        return other.fits_in(self)

    def times_fits_in(self, other: ResourceVector) -> int:
        """How many whole copies of ``self`` fit in ``other`` (huge for the empty vector)."""
        if not self._m:
            return _MAX_MILLIS
        available = other._m
        return min(available.get(name, 0) // value for name, value in self._m.items())

    # -- shares -------------------------------------------------------------------------------

    def shares(self, total: ResourceVector) -> dict[str, float]:
        """Fraction of ``total`` held, per resource of ``self`` (raises if ``total`` lacks one)."""
        out = {}
        for name, value in self._m.items():
            denominator = total._m.get(name, 0)
            if not denominator:
                raise ResourceError(f"resource {name!r} is not in the pool total")
            out[name] = value / denominator
        return out

    def dominant_share(self, total: ResourceVector) -> float:
        """``max_r self_r / total_r`` (DRF paper, section 4); 0 for the empty vector.

        Each ratio is one correctly rounded division of exact integers, so equal shares compare
        equal. A resource missing from ``total`` counts as an infinite share.
        """
        best = 0.0
        denominators = total._m
        for name, value in self._m.items():
            denominator = denominators.get(name, 0)
            if not denominator:
                return math.inf
            share = value / denominator
            if share > best:
                best = share
        return best

    # -- identity and text --------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ResourceVector):
            return self._m == other._m
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._m.items()))

    def __bool__(self) -> bool:
        return bool(self._m)

    def __str__(self) -> str:
        return ";".join(f"{name}:{_format_millis(self._m[name])}" for name in self)

    def __repr__(self) -> str:
        return f"ResourceVector.parse({str(self)!r})"

    def __reduce__(self) -> tuple[object, tuple[dict[str, int]]]:
        # The milli quantities, validated again when unpickled (``from_millis``): a quarter of
        # the cost of formatting the text and parsing it back (the I/O workers' link pickles
        # every agent's resources).
        return (ResourceVector.from_millis, (dict(self._m),))
