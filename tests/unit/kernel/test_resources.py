"""``fairshare.resources.ResourceVector``: Mesos syntax, exact arithmetic, bad input."""

from __future__ import annotations

import copy
import math
import pickle
from decimal import Decimal

import pytest
from fairshare.resources import canonical_order

from framework_sdk import MILLI, ResourceError, ResourceVector

R = ResourceVector


# -- parse / print -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("cpus:4;mem:8192", "cpus:4;mem:8192"),
        ("cpus:0.2;mem:204.8", "cpus:0.2;mem:204.8"),
        ("mem:8192;cpus:4", "cpus:4;mem:8192"),
        ("zeta:1;gpus:2;alpha:3;disk:4;mem:5;cpus:6", "cpus:6;mem:5;disk:4;gpus:2;alpha:3;zeta:1"),
        ("cpus:4;mem:8192;", "cpus:4;mem:8192"),
        ("  cpus : 4 ;  mem:\t8192 ; ", "cpus:4;mem:8192"),
        ("cpus:1.500", "cpus:1.5"),
        ("cpus:0.001", "cpus:0.001"),
        ("cpus:1.25;mem:0", "cpus:1.25"),
        ("cpus:4.0", "cpus:4"),
        ("ports_count:3;net/bw:1.5;a.b-c:2", "a.b-c:2;net/bw:1.5;ports_count:3"),
        ("", ""),
        ("   ", ""),
    ],
)
def test_parse_prints_canonical_form(text: str, canonical: str) -> None:
    vector = R.parse(text)
    assert str(vector) == canonical
    assert R.parse(str(vector)) == vector
    assert str(R.parse(str(vector))) == canonical


def test_parse_reads_exact_quantities() -> None:
    vector = R.parse("cpus:0.2;mem:204.8;disk:1024;gpus:1")
    assert vector.millis("cpus") == 200
    assert vector.millis("mem") == 204_800
    assert vector.millis("disk") == 1_024_000
    assert vector.millis("gpus") == 1000
    assert vector["cpus"] == 0.2
    assert vector["mem"] == 204.8
    assert vector["absent"] == 0.0
    assert vector.millis("absent") == 0


def test_iteration_and_to_dict_follow_canonical_order() -> None:
    vector = R({"b": 1, "gpus": 2, "a": 3, "mem": 4, "disk": 5, "cpus": 6})
    assert list(vector) == ["cpus", "mem", "disk", "gpus", "a", "b"]
    assert list(vector.to_dict().items()) == [
        ("cpus", 6.0),
        ("mem", 4.0),
        ("disk", 5.0),
        ("gpus", 2.0),
        ("a", 3.0),
        ("b", 1.0),
    ]
    assert list(vector.millis_items())[:2] == [("cpus", 6000), ("mem", 4000)]
    assert sorted(["zz", "gpus", "cpus", "aa", "mem"], key=canonical_order) == [
        "cpus",
        "mem",
        "gpus",
        "aa",
        "zz",
    ]


def test_to_dict_of_decimals_and_repr() -> None:
    vector = R.parse("cpus:0.2;mem:204.8")
    assert vector.to_dict() == {"cpus": 0.2, "mem": 204.8}
    assert repr(vector) == "ResourceVector.parse('cpus:0.2;mem:204.8')"
    assert eval(repr(vector), {"ResourceVector": R}) == vector
    assert vector.to_millis() == {"cpus": 200, "mem": 204_800}


def test_constructors_agree() -> None:
    from_text = R.parse("cpus:1.5;mem:2048")
    assert R({"cpus": 1.5, "mem": 2048}) == from_text
    assert R(cpus=1.5, mem=2048) == from_text
    assert R({"cpus": "1.5"}, mem=Decimal("2048")) == from_text
    assert R.from_millis({"cpus": 1500, "mem": 2_048_000}) == from_text
    assert R({" cpus ": 1.5, "mem": 2048}) == from_text


# -- exact arithmetic -----------------------------------------------------------------------------


def test_addition_is_exact() -> None:
    total = R(cpus=0.1) + R(cpus=0.2)
    assert total == R(cpus=0.3)
    assert total.millis("cpus") == 300
    assert total["cpus"] == 0.3
    assert str(total) == "cpus:0.3"
    ten = R()
    for _ in range(10):
        ten = ten + R(cpus=0.1)
    assert ten == R(cpus=1)
    assert str(ten) == "cpus:1"


def test_scaling_is_exact() -> None:
    assert 3 * R(cpus=0.2) == R(cpus=0.6)
    assert R(cpus=0.2) * 3 == R(cpus=0.6)
    assert str(3 * R(cpus=0.2, mem=204.8)) == "cpus:0.6;mem:614.4"
    assert 0 * R(cpus=1) == R()
    assert not (0 * R(cpus=1))
    with pytest.raises(ResourceError, match="negative factor"):
        R(cpus=1) * -1
    with pytest.raises(TypeError):
        R(cpus=1) * 1.5  # type: ignore[operator]
    with pytest.raises(TypeError):
        R(cpus=1) * True  # type: ignore[operator]


def test_subtraction_is_exact_and_drops_zeros() -> None:
    left = R(cpus=1, mem=0.3) - R(cpus=1, mem=0.1)
    assert left == R(mem=0.2)
    assert "cpus" not in left
    assert len(left) == 1
    assert R(cpus=0.3) - R(cpus=0.1) - R(cpus=0.2) == R()


def test_subtraction_below_zero_raises_naming_the_resource() -> None:
    with pytest.raises(ResourceError, match="'cpus'"):
        R(cpus=1) - R(cpus=1.001)
    with pytest.raises(ResourceError, match="'gpus'"):
        R(cpus=1) - R(gpus=1)


def test_saturating_sub_clamps_at_zero() -> None:
    assert R(cpus=1, mem=2).saturating_sub(R(cpus=3, gpus=1)) == R(mem=2)
    assert R(cpus=1).saturating_sub(R(cpus=1)) == R()
    assert R(cpus=2.5).saturating_sub(R(cpus=0.5)) == R(cpus=2)


def test_zero_quantities_are_dropped_for_equality_and_hash() -> None:
    with_zero = R(cpus=1, mem=0)
    assert with_zero == R(cpus=1)
    assert hash(with_zero) == hash(R(cpus=1))
    assert len(with_zero) == 1
    assert "mem" not in with_zero
    assert with_zero.names() == frozenset({"cpus"})
    assert R.parse("cpus:1;mem:0;disk:0.0") == R.parse("cpus:1")
    assert R.from_millis({"cpus": 0}) == R()
    assert not R(cpus=0)
    assert bool(R(cpus=0.001))
    assert {R(cpus=1, mem=0): "x"}[R(cpus=1)] == "x"


def test_inequality_and_other_types() -> None:
    assert R(cpus=1) != R(cpus=1.001)
    assert R(cpus=1) != R(mem=1)
    assert R(cpus=1) != {"cpus": 1.0}


def test_fits_in_and_comparisons() -> None:
    small = R(cpus=1)
    big = R(cpus=1, mem=1)
    assert small.fits_in(big)
    assert not big.fits_in(small)
    assert small <= big
    assert not big <= small
    assert big >= small
    assert not small >= big
    assert R() <= small
    assert small <= small
    assert small >= small
    assert not R(cpus=1.001).fits_in(R(cpus=1, mem=100))
    assert not R(gpus=1).fits_in(R(cpus=100))


def test_times_fits_in() -> None:
    assert R.parse("cpus:1;mem:4").times_fits_in(R.parse("cpus:9;mem:18")) == 4
    assert R.parse("cpus:3;mem:1").times_fits_in(R.parse("cpus:9;mem:18")) == 3
    assert R.parse("cpus:0.2;mem:1").times_fits_in(R.parse("cpus:2;mem:12")) == 10
    assert R(gpus=1).times_fits_in(R(cpus=100)) == 0
    assert R(cpus=2).times_fits_in(R(cpus=1.999)) == 0
    assert R().times_fits_in(R(cpus=1)) > 10**15


def test_shares() -> None:
    shares = R.parse("cpus:3;mem:1").shares(R.parse("cpus:9;mem:18;gpus:1"))
    assert shares == {"cpus": 3 / 9, "mem": 1 / 18}
    assert R().shares(R(cpus=1)) == {}
    with pytest.raises(ResourceError, match="'gpus'"):
        R(gpus=1).shares(R(cpus=1))


def test_dominant_share_and_exact_ties() -> None:
    total = R.parse("cpus:9;mem:18")
    a = R.parse("cpus:3;mem:12")
    b = R.parse("cpus:6;mem:3")
    assert a.dominant_share(total) == 12 / 18
    assert b.dominant_share(total) == 6 / 9
    assert a.dominant_share(total) == b.dominant_share(total)  # exact tie: 12/18 == 6/9
    assert R.parse("cpus:1;mem:4").dominant_share(total) == 4 / 18
    assert R().dominant_share(total) == 0.0
    assert R(gpus=1).dominant_share(total) == math.inf
    # many small pieces still tie exactly with the single-division value
    pieces = R()
    for _ in range(30):
        pieces = pieces + R(cpus=0.1)
    assert pieces.dominant_share(R(cpus=9)) == R(cpus=3).dominant_share(R(cpus=9)) == 1 / 3


@pytest.mark.parametrize(
    ("value", "millis"),
    [
        ("0.0015", 2),  # half-even: to the even milli
        ("0.0025", 2),
        ("0.0035", 4),
        ("1.2345", 1234),
        ("1.2355", 1236),
        ("0.0004", 0),
        ("0.0005", 0),
        ("0.0006", 1),
        (0.1 + 0.2, 300),
        (1.0005, 1000),
        ("2.5e-3", 2),
        ("1e3", 1_000_000),
        (7, 7000),
    ],
)
def test_rounding_to_three_decimals_half_even(value: object, millis: int) -> None:
    assert R(cpus=value).millis("cpus") == millis
    if isinstance(value, str) and millis == 0:  # issue 16: the text says so, not "no resources"
        with pytest.raises(ResourceError, match=r"below the smallest quantity, 0\.001"):
            R.parse(f"cpus:{value}")
    elif isinstance(value, str):
        assert R.parse(f"cpus:{value}").millis("cpus") == millis


@pytest.mark.parametrize("text", ["gpus:1.5", "gpus:0.5", "cpus:1;gpus:2.001"])
def test_gpus_are_whole_devices_in_the_text_syntax(text: str) -> None:
    with pytest.raises(ResourceError, match="gpus must be a whole number"):
        R.parse(text)
    assert R.parse("cpus:1;gpus:2").millis("gpus") == 2000


def test_millis_is_exact_integer() -> None:
    vector = R.parse("cpus:0.001;mem:123456.789")
    assert vector.millis("cpus") == 1
    assert vector.millis("mem") == 123_456_789
    assert isinstance(vector.millis("mem"), int)
    assert MILLI == 1000


# -- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("cpus", "'cpus' is not NAME:VALUE"),
        ("cpus:", "'cpus' has no quantity"),
        ("cpus:abc", "'abc' is not a number"),
        (":4", "name is empty"),
        ("cpus:4;;mem:2", "empty entry at position 2"),
        (";", "empty entry"),
        ("cpus:4;;", "empty entry"),
        ("cpus:4:5", "'cpus:4:5' is not NAME:VALUE"),
        ("cpus:-1", "negative"),
        ("cpus:-0.5", "negative"),
        ("cpus:nan", "NaN"),
        ("cpus:NaN", "NaN"),
        ("cpus:inf", "infinite"),
        ("cpus:-inf", "infinite"),
        ("cpus:1e30", "too large"),
        ("cpus:4;cpus:5", "'cpus' is given twice"),
        ("cpus:4; cpus :5", "'cpus' is given twice"),
        ("1cpus:4", "'1cpus' is malformed"),
        ("cp us:4", "'cp us' is malformed"),
        ("cpus!:4", "'cpus!' is malformed"),
        ("cpus:0x10", "'0x10' is not a number"),
    ],
)
def test_parse_rejects_garbage_naming_the_part(text: str, fragment: str) -> None:
    with pytest.raises(ResourceError) as caught:
        R.parse(text)
    assert fragment in str(caught.value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("value", [None, 3, b"cpus:1", ["cpus:1"]])
def test_parse_rejects_non_strings(value: object) -> None:
    with pytest.raises(ResourceError, match="must be a string"):
        R.parse(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (-1, "negative"),
        (-0.5, "negative"),
        ("-2", "negative"),
        (float("nan"), "NaN"),
        ("nan", "NaN"),
        (Decimal("NaN"), "NaN"),
        (float("inf"), "infinite"),
        (float("-inf"), "infinite"),
        ("inf", "infinite"),
        (True, "not a number"),
        (False, "not a number"),
        (None, "not a number"),
        ([1], "not a number"),
        ("abc", "not a number"),
        (10**16, "too large"),
        (1e300, "too large"),
        ("1e300", "too large"),
    ],
)
def test_bad_quantities_raise_naming_the_resource(value: object, fragment: str) -> None:
    with pytest.raises(ResourceError) as caught:
        R(gpus=value)
    assert "'gpus'" in str(caught.value)
    assert fragment in str(caught.value)
    with pytest.raises(ResourceError, match=fragment):
        R({"gpus": value})


@pytest.mark.parametrize("value", [-0.0001, "-0.0004", "-0.0005", Decimal("-0.0001")])
def test_tiny_negative_quantities_are_rejected_not_rounded_to_zero(value: object) -> None:
    # A negative input is bad input whatever its size (module docstring: "Every bad input
    # (negative, ...) raises ResourceError"); rounding must not turn it into an absent resource.
    with pytest.raises(ResourceError, match="negative"):
        R(cpus=value)
    with pytest.raises(ResourceError, match="negative"):
        R.parse(f"cpus:{value}")


def test_largest_quantity_is_accepted_and_one_more_is_not() -> None:
    biggest_whole = 2**62 // MILLI
    assert R(cpus=biggest_whole).millis("cpus") == biggest_whole * MILLI
    with pytest.raises(ResourceError, match="too large"):
        R(cpus=biggest_whole + 1)
    with pytest.raises(ResourceError, match="too large"):
        R.from_millis({"cpus": 2**62 + 1})


@pytest.mark.parametrize("value", ["1e1000000", "-1e1000000", "1E+999999999", Decimal("1e1000000")])
def test_huge_exponents_raise_resource_error_not_decimal_overflow(value: object) -> None:
    # Decimal parses these, but abs()/comparison in the default context (Emax 999999) raises
    # decimal.Overflow, which is no ResourceError (nor even a ValueError).
    with pytest.raises(ResourceError, match="'cpus'"):
        R(cpus=value)
    with pytest.raises(ResourceError, match="'cpus'"):
        R.parse(f"cpus:{value}")


@pytest.mark.parametrize(
    ("mapping", "fragment"),
    [
        ({"": 1}, "name is empty"),
        ({"   ": 1}, "name is empty"),
        ({"1a": 1}, "'1a' is malformed"),
        ({"a b": 1}, "'a b' is malformed"),
        ({"a:b": 1}, "'a:b' is malformed"),
        ({"a;b": 1}, "'a;b' is malformed"),
        ({1: 1}, "not a string"),
        ({"cpus": 1, " cpus": 2}, "'cpus' is given twice"),
    ],
)
def test_bad_names_raise(mapping: dict[object, object], fragment: str) -> None:
    with pytest.raises(ResourceError) as caught:
        R(mapping)  # type: ignore[arg-type]
    assert fragment in str(caught.value)


def test_duplicate_name_in_mapping_and_keywords() -> None:
    with pytest.raises(ResourceError, match="'cpus' is given twice"):
        R({"cpus": 1}, cpus=2)


def test_non_mapping_is_rejected() -> None:
    with pytest.raises(ResourceError, match="mapping"):
        R([("cpus", 1)])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("millis", "fragment"),
    [
        ({"cpus": 1.5}, "not an integer"),
        ({"cpus": True}, "not an integer"),
        ({"cpus": -1}, "negative"),
        ({"": 1}, "name is empty"),
        ({"cpus": 1, " cpus ": 2}, "given twice"),
    ],
)
def test_from_millis_validates(millis: dict[str, object], fragment: str) -> None:
    with pytest.raises(ResourceError, match=fragment):
        R.from_millis(millis)  # type: ignore[arg-type]


# -- immutability, pickling ------------------------------------------------------------------------


def test_operations_return_new_vectors() -> None:
    base = R(cpus=1)
    _ = base + R(cpus=1)
    _ = base - R(cpus=0.5)
    _ = 2 * base
    assert base == R(cpus=1)
    with pytest.raises(AttributeError):
        base.extra = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "text", ["", "cpus:4;mem:8192", "cpus:0.2;mem:204.8;disk:0.001;gpus:1;zz:3;net/bw:2.5"]
)
def test_pickle_and_copy_round_trip(text: str) -> None:
    vector = R.parse(text)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        restored = pickle.loads(pickle.dumps(vector, protocol=protocol))
        assert restored == vector
        assert hash(restored) == hash(vector)
        assert restored.to_millis() == vector.to_millis()
        assert type(restored) is R
    assert copy.deepcopy(vector) == vector
    assert copy.copy(vector) == vector
