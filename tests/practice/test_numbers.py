"""Exact numbers: formatting, the half-away-from-zero rounding rule, well-formedness."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction as F

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnscore.practice.numbers import (
    answer_text,
    as_fraction,
    format_exact,
    is_halfway,
    is_rounded,
    is_well_formed,
    round_half_away,
    tolerance_for,
)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(F(-1), "-1", id="negative integer"),
        pytest.param(F(0), "0", id="zero"),
        pytest.param(F(7, 10), "0.7", id="one decimal"),
        pytest.param(F(3, 10) + F(0), "0.3", id="0.3 without float artefact"),
        pytest.param(F(1, 160), "0.00625", id="small dyadic, no exponent"),
        pytest.param(F(-5, 3), "-5/3", id="non-terminating"),
        pytest.param(F(-1, 100000), "-0.00001", id="no 1e-05"),
    ],
)
def test_format_exact(value, text):
    """format_exact prints integers, plain decimals and fractions, never exponents."""
    assert format_exact(value) == text


@pytest.mark.parametrize(
    ("value", "places", "rounded"),
    [
        pytest.param(F(1, 8), 2, "0.13", id="0.125 rounds up (Python round gives 0.12)"),
        pytest.param(F(-1, 8), 2, "-0.13", id="-0.125 rounds away from zero"),
        pytest.param(F(-1, 1000), 2, "0.00", id="tiny negative is 0.00, not -0.00"),
        pytest.param(F(2, 3), 3, "0.667", id="2/3"),
        pytest.param(F(-2, 3), 0, "-1", id="no decimals"),
    ],
)
def test_round_half_away(value, places, rounded):
    """Rounding is half away from zero, exact, and never prints -0."""
    from attnscore.practice.numbers import format_decimal

    assert format_decimal(round_half_away(value, places).quantize(Decimal(1).scaleb(-places))) == rounded


def test_round_half_away_rejects_negative_places():
    """A negative number of places is refused with the value in the message."""
    with pytest.raises(ValueError, match="places must be >= 0, found -1"):
        round_half_away(F(1), -1)


@pytest.mark.parametrize(
    ("value", "places", "text", "is_rounded_key"),
    [
        pytest.param(F(-1), 3, "-1", False, id="integer stays exact"),
        pytest.param(F(3, 10), 3, "0.3", False, id="exact decimal keeps its own digits"),
        pytest.param(F(2999, 10000), 3, "0.300", True, id="rounded keeps trailing zeros"),
        pytest.param(F(1, 3), 3, "0.333", True, id="1/3"),
    ],
)
def test_answer_text(value, places, text, is_rounded_key):
    """The key is exact when it fits in `places` decimals, else rounded with trailing zeros kept."""
    assert answer_text(value, places) == text
    assert is_rounded(value, places) is is_rounded_key


@pytest.mark.parametrize(
    ("value", "places", "expected"),
    [(F(1, 8), 2, True), (F(-5, 1000), 2, True), (F(1, 3), 2, False), (F(1, 4), 2, False)],
)
def test_is_halfway(value, places, expected):
    """Halfway points are detected exactly so that generators can reject them."""
    assert is_halfway(value, places) is expected


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("-1", True),
        ("0.667", True),
        ("0", True),
        ("-0.5", True),
        ("-0", False),
        ("-0.00", False),
        ("1e-05", False),
        ("0.30000000000000004", False),
        ("01", False),
        ("+1", False),
        ("", False),
    ],
)
def test_is_well_formed(text, ok):
    """Well-formed numbers have no -0, exponent, leading zero or float artefact."""
    assert is_well_formed(text) is ok


def test_as_fraction_refuses_binary_floats():
    """Floats are refused: 0.1 is not exactly one tenth."""
    with pytest.raises(TypeError, match="found float 0.1"):
        as_fraction(0.1)
    assert as_fraction("0.1") == F(1, 10)


def test_tolerance_is_half_a_unit():
    """The tolerance for 3 places is 0.0005."""
    assert tolerance_for(3) == F(5, 10000)


@given(
    st.decimals(min_value=-1000, max_value=1000, places=4, allow_nan=False, allow_infinity=False),
    st.integers(min_value=0, max_value=3),
)
def test_round_half_away_matches_decimal_half_up(value, places):
    """Exact rounding agrees with Decimal's ROUND_HALF_UP (which is half away from zero)."""
    expected = value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    assert round_half_away(F(value), places) == expected


@given(st.fractions(max_denominator=64))
def test_format_exact_round_trips(value):
    """Every exact text reads back as the same Fraction and is well-formed when decimal."""
    text = format_exact(value)
    if "/" in text:
        num, den = text.split("/")
        assert F(int(num), int(den)) == value
    else:
        assert F(Decimal(text)) == value
        assert is_well_formed(text)
