"""Worked solutions: exact answers for the design's worked examples; degenerate givens rejected."""

from __future__ import annotations

from fractions import Fraction
from fractions import Fraction as F

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnscore.practice.generators import featured_problems, fixed_problem
from attnscore.practice.richtext import plain
from attnscore.practice.solutions import Rejected, build_problem


def _answers(problem):
    return {a.name: a.exact for q in problem.questions for a in q.numeric}


def _v(*xs):
    return tuple(F(str(x)) for x in xs)


def test_practice_example_is_anti_aligned(families):
    """q=[0,1], k=[0,-1] (design.md): score -1, option C (negative: anti-aligned), explained."""
    p = fixed_problem(families["one-score"], _v(0, 1), [_v(0, -1)])
    assert _answers(p) == {"score": F(-1)}
    choice = p.questions[1].choice
    assert choice.correct == 2 and plain(choice.options[2]).startswith("Negative: the key is anti-aligned")
    solution = " ".join(plain(s) for s in p.solution)
    assert "0 \\cdot 0 + 1 \\cdot (-1) = 0 + (-1) = -1" in solution
    assert "exactly the opposite direction to the query (180°)" in solution
    assert "not weights" in solution


@pytest.mark.parametrize(
    ("family", "givens", "answers"),
    [
        pytest.param(
            "score-vector",
            {"q": _v(1, 0), "keys": (_v(1, 0), _v(0.5, 1), _v(0.7, 0.7))},
            {"s_1": F(1), "s_2": F(1, 2), "s_3": F(7, 10)},
            id="one query, three keys",
        ),
        pytest.param(
            "score-matrix",
            {"Q": (_v(1, 2), _v(3, 4)), "K": (_v(5, 6), _v(7, 8))},
            {"S_11": F(17), "S_12": F(23), "S_21": F(39), "S_22": F(53)},
            id="Q K^T, not Q K",
        ),
        pytest.param(
            "scaled-score",
            {"q": _v(1, 1, 1, 1), "k": _v(1, 1, 1, 1)},
            {"raw": F(4), "scaled": F(2)},
            id="scale by sqrt(d_k)=2, not d_k",
        ),
        pytest.param(
            "softmax-exact",
            {"base": 1, "multipliers": (2, 1, 3)},
            {"w_1": F(1, 3), "w_2": F(1, 6), "w_3": F(1, 2)},
            id="softmax with ln differences",
        ),
        pytest.param("softmax-ranking", {"scores": _v(3, -1, 0)}, {"sum": F(2)}, id="sum of raw scores"),
    ],
)
def test_exact_answers(families, family, givens, answers):
    """Answers are exact fractions computed from the shown numbers."""
    assert _answers(build_problem(families[family], givens)) == answers


def test_rounded_key_for_softmax(families):
    """1/3 is keyed 0.333 and says it is rounded; 1/2 stays exact."""
    p = build_problem(families["softmax-exact"], {"base": 1, "multipliers": (2, 1, 3)})
    keys = {a.name: (a.key, a.rounded) for a in p.questions[0].numeric}
    assert keys == {"w_1": ("0.333", True), "w_2": ("0.167", True), "w_3": ("0.5", False)}


@pytest.mark.parametrize(
    ("family", "givens", "reason"),
    [
        pytest.param(
            "score-vector",
            {"q": _v(1, 0), "keys": (_v(1, 0), _v(1, 1), _v(0, 1))},
            "zero answer",
            id="zero score outside the perpendicular family",
        ),
        pytest.param(
            "score-vector",
            {"q": _v(1, 0), "keys": (_v(2, 0), _v(2, 1), _v(-1, 1))},
            "tie for highest",
            id="tie for the most relevant key",
        ),
        pytest.param("softmax-exact", {"base": 0, "multipliers": (1, 1, 1)}, "all scores equal", id="uniform"),
        pytest.param(
            "softmax-ranking",
            {"scores": _v(2, -1, 0)},
            "scores add up to 1",
            id="scores that look like weights",
        ),
        pytest.param(
            "multiple-choice",
            {
                "template": "scaled_value",
                "q": _v(2),
                "k": _v(3),
                "options": ("sqrt", "d", "none", "times_sqrt"),
            },
            "duplicate options",
            id="s and s/sqrt(1) would be the same option",
        ),
        pytest.param(
            "scaled-score",
            {"q": _v(0.5), "k": _v(0.5)},
            "answer on a rounding halfway point",
            id="key 0.25 at places=1 is halfway",
        ),
    ],
)
def test_degenerate_givens_are_rejected(families, family, givens, reason):
    """Degenerate problems raise Rejected with a reason used in acceptance reports."""
    from dataclasses import replace

    fam = families[family]
    if reason.startswith("answer on"):
        fam = replace(fam, places=1)
    with pytest.raises(Rejected) as info:
        build_problem(fam, givens)
    assert info.value.reason == reason


def test_perpendicular_allowed_in_one_score(families):
    """The one-score family is the perpendicular family: a zero score is a valid answer there."""
    p = fixed_problem(families["one-score"], _v(1, 2), [_v(-2, 1)])
    assert _answers(p) == {"score": F(0)} and p.questions[1].choice.correct == 1


@pytest.mark.parametrize(
    "family",
    ["one-score", "score-vector", "score-matrix", "scaled-score", "softmax-exact", "softmax-ranking"],
)
def test_featured_examples_build(families, family):
    """Every featured example in specs/practice builds into a problem with a worked solution."""
    problems = featured_problems(families[family])
    assert problems and all(p.solution and p.index is None for p in problems)


def test_fixed_problem_argument_errors(families):
    """--q/--k numbers of different widths or for the wrong kind are refused with the reason."""
    with pytest.raises(ValueError, match=r"same width d_k, found widths \[2, 3\]"):
        fixed_problem(families["one-score"], _v(0, 1), [_v(0, -1, 1)])
    with pytest.raises(ValueError, match="takes exactly one --k, found 2"):
        fixed_problem(families["one-score"], _v(0, 1), [_v(0, -1), _v(1, 0)])
    with pytest.raises(ValueError, match="--q/--k work with one_score"):
        fixed_problem(families["score-matrix"], _v(0, 1), [_v(0, -1)])


@given(st.lists(st.integers(-10_000, 10_000).map(lambda n: Fraction(n, 32)), min_size=1, max_size=6))
def test_common_places_round_trips(values):
    """Options printed with one number of decimals parse back to their exact values."""
    from attnscore.practice.solutions import common_places

    texts = common_places(values)
    assert len({len(t.partition(".")[2]) for t in texts}) == 1
    assert [Fraction(t) for t in texts] == values


def test_common_places_rejects_repeating_decimals():
    """1/3 has no finite decimal expansion: a clear ValueError."""
    from attnscore.practice.solutions import common_places

    with pytest.raises(ValueError, match="terminating decimals"):
        common_places([Fraction(1, 3)])


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        pytest.param(("sqrt",), Fraction(5, 2), id="right: 5 / 2"),
        pytest.param(("d",), Fraction(5, 4), id="divide by d_k"),
        pytest.param(("none",), Fraction(5), id="no scaling"),
        pytest.param(("times_sqrt",), Fraction(10), id="times sqrt"),
        pytest.param(("slip", 0), Fraction(3, 2), id="sign slip in 1*1"),
    ],
)
def test_scaled_option_values(claim, expected):
    """q = [1, 2, 0, 1], k = [1, 1, 3, 2]: q . k = 5 and each mistake's value."""
    from attnscore.practice.solutions import scaled_option_value

    q = tuple(Fraction(x) for x in (1, 2, 0, 1))
    k = tuple(Fraction(x) for x in (1, 1, 3, 2))
    assert scaled_option_value(claim, q, k) == expected
