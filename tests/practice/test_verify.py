"""--verify: clean on the shipped families, and it catches what it claims to catch (meta tests)."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction as F

import pytest

from attnscore.practice.generators import generate_family
from attnscore.practice.verify import _check_problem, bad_number_tokens, verify_families


@pytest.mark.slow
def test_shipped_families_verify_clean(families):
    """200 variants per family pass every check."""
    report = verify_families(list(families.values()), 200, 0, render_sample=10)
    assert report.ok, report.failures[:5]
    assert {r.family_id for r in report.families} == set(families)
    mc = next(r for r in report.families if r.family_id == "multiple-choice")
    assert sum(mc.positions.values()) == 200 and len(mc.positions) == 4


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("score = -0", ["-0"]),
        ("w = -0.00 here", ["-0.00"]),
        ("1e-05", ["1e-05"]),
        ("0.30000000000000004", ["0.30000000000000004"]),
        ("s = -0.5, e^{-1}, 10, 2e, [0,\\ -1]", []),
    ],
)
def test_bad_number_tokens(text, bad):
    """Ill-formed numbers are found; well-formed ones (and e^{-1}) are not."""
    assert bad_number_tokens(text) == bad


def test_wrong_answer_is_caught(families):
    """A problem whose exact answer is off by one is reported against the float64 solver."""
    p = generate_family(families["score-vector"], 1, 0)[0][0]
    q = p.questions[0]
    wrong = replace(q, numeric=(replace(q.numeric[0], exact=q.numeric[0].exact + 1),) + q.numeric[1:])
    failures = _check_problem(replace(p, questions=(wrong,) + p.questions[1:]))
    assert any("s_1: exact" in f and "float64 solver" in f for f in failures)


def test_wrong_keyed_option_is_caught(families):
    """A choice keyed at the wrong position is reported."""
    p = generate_family(families["multiple-choice"], 1, 0)[0][0]
    q = p.questions[0]
    moved = replace(q, choice=replace(q.choice, correct=(q.choice.correct + 1) % 4))
    failures = _check_problem(replace(p, questions=(moved,)))
    assert any("keyed option" in f for f in failures)


def test_duplicate_rate_is_enforced(families):
    """A family stated to allow no duplicates fails when its tiny grid forces some."""
    fam = replace(families["scaled-score"], d_k=(4,), values=(F(1), F(2), F(1)), max_duplicate_rate=0.0)
    report = verify_families([fam], 30, 0, render_sample=0)
    assert any(
        "duplicate variants among 30, far above the 0 expected at the stated 0% for 1000" in f for f in report.failures
    ), report.failures


@pytest.mark.parametrize(
    ("x", "df", "p"),
    [(3.841458820694124, 1, 0.05), (5.991464547107979, 2, 0.05), (16.26623619623813, 3, 0.001), (0.0, 3, 1.0)],
)
def test_chi_square_sf(x, df, p):
    """The closed-form chi-square tail matches the tables."""
    from attnscore.practice.verify import chi_square_sf

    assert chi_square_sf(x, df) == pytest.approx(p, rel=1e-6)


def test_chi_square_sf_rejects_bad_input():
    """df < 1 is a clear ValueError."""
    from attnscore.practice.verify import chi_square_sf

    with pytest.raises(ValueError, match="df >= 1"):
        chi_square_sf(1.0, 0)


def test_fixed_option_order_is_caught(families):
    """Options always in one order (the old one-score meaning question) fail the balance test."""
    from attnscore.practice.verify import _balance_tests

    tests = _balance_tests({("meaning", 3, "position"): __import__("collections").Counter({0: 500, 1: 300, 2: 200})})
    assert tests[0].failed and tests[0].statistic == pytest.approx(140.0)
    skipped = _balance_tests({("meaning", 3, "position"): __import__("collections").Counter({0: 10, 1: 10})})
    assert skipped[0].p_value is None and "for power" in skipped[0].skipped


def test_a_chance_duplicate_below_the_class_size_is_not_a_failure(families):
    """One repeat among 50 (2%) is what a 1% rate at 1,000 makes likely enough: no failure."""
    from attnscore.practice.verify import _poisson_tail

    assert _poisson_tail(1, 0.01 * 50 * 50 / 1000) > 0.001  # one repeat at 50: p = 0.025
    assert _poisson_tail(5, 0.01 * 50 * 50 / 1000) < 0.001  # five repeats at 50: far too many
    assert _poisson_tail(0, 3.0) == 1.0
