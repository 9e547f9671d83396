"""Worked solutions: turn a family and its givens into a :class:`~attnscore.practice.problem.Problem`.

The givens (exact numbers, option order) fully determine the problem, so a featured example,
a ``--q/--k`` problem and a generated variant go through the same code. Every answer is computed
here with :class:`fractions.Fraction` from the values shown to the student; the independent
float64 check lives in :mod:`attnscore.practice.verify`.

Raises :class:`Rejected` when the givens make a degenerate problem (a tie for "highest", a zero
answer outside the perpendicular family, duplicate options, a key on a rounding halfway point).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from math import isqrt
from typing import Any

from attnscore.practice.family import Family
from attnscore.practice.numbers import format_exact, is_halfway, is_terminating
from attnscore.practice.problem import Arrow, ChoiceAnswer, NumericAnswer, Problem, Question
from attnscore.practice.richtext import Rich, answer_form, display, math, plain, text

__all__ = [
    "Rejected",
    "build_problem",
    "dot",
    "sign_word",
    "scaled_option_value",
    "scaled_option_values",
    "number_text",
    "vector_text",
    "common_places",
    "claim_text_length",
    "CONCEPTS",
]

Vector = tuple[Fraction, ...]
Matrix = tuple[Vector, ...]


class Rejected(ValueError):
    """The givens make a degenerate problem; ``reason`` is a short label used in acceptance reports."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ---------------------------------------------------------------- exact maths and math text


def dot(q: Sequence[Fraction], k: Sequence[Fraction]) -> Fraction:
    """Exact dot product ``q · k`` (shapes ``(d_k,)``, ``(d_k,)``)."""
    return sum((a * b for a, b in zip(q, k, strict=True)), Fraction(0))


def sign_word(s: Fraction) -> str:
    """``aligned`` (s > 0), ``perpendicular`` (s = 0) or ``anti-aligned`` (s < 0)."""
    return "aligned" if s > 0 else "perpendicular" if s == 0 else "anti-aligned"


def _n(x: Fraction) -> str:
    """A number in math: ``-1``, ``0.5``, ``\\frac{2}{3}``."""
    if is_terminating(x):
        return format_exact(x)
    sign = "-" if x < 0 else ""
    return f"{sign}\\frac{{{abs(x.numerator)}}}{{{x.denominator}}}"


def number_text(x: Fraction) -> str:
    """A number as the options show it (``-1``, ``0.5``, ``\\frac{2}{3}``)."""
    return _n(x)


def common_places(values: Sequence[Fraction]) -> list[str]:
    """Terminating numbers printed with one number of decimals (the most any of them needs):
    ``[1.5, 0.75, 3]`` -> ``["1.50", "0.75", "3.00"]``, so an option's length does not single it out.

    Raises:
        ValueError: a value has no finite decimal expansion.
    """
    if not all(is_terminating(v) for v in values):
        raise ValueError(f"common_places needs terminating decimals, found {[str(v) for v in values]}")
    places = max(len(format_exact(v).partition(".")[2]) for v in values)
    return [format(Decimal(v.numerator) / Decimal(v.denominator), f".{places}f") for v in values]


def vector_text(v: Sequence[Fraction]) -> str:
    """A key option's text as shown: ``k = [1,\\ -2]`` (shape ``(d_k,)``)."""
    return f"k = {_vec(v)}"


def _p(x: Fraction) -> str:
    """A number in math, in parentheses when negative (as a factor or addend)."""
    return f"({_n(x)})" if x < 0 else _n(x)


def _vec(v: Sequence[Fraction]) -> str:
    if len(v) > 6:
        return _long_vec(v)
    return "[" + ",\\ ".join(_n(x) for x in v) + "]"


def _long_vec(v: Sequence[Fraction]) -> str:
    """A long vector made of two constant halves: ``[2, \\ldots, 2, -1, \\ldots, -1]``."""
    half = len(v) // 2
    first, second = v[0], v[-1]
    if first == second:
        return f"[{_n(first)},\\ \\ldots,\\ {_n(first)}]"
    return f"[{_n(first)},\\ \\ldots,\\ {_n(v[half - 1])},\\ {_n(v[half])},\\ \\ldots,\\ {_n(second)}]"


def _mat(m: Sequence[Sequence[Fraction]]) -> str:
    rows = " \\\\ ".join(" & ".join(_n(x) for x in row) for row in m)
    return f"\\begin{{bmatrix}} {rows} \\end{{bmatrix}}"


def _dot_steps(q: Sequence[Fraction], k: Sequence[Fraction]) -> str:
    """``0 \\cdot 0 + 1 \\cdot (-1) = 0 + (-1) = -1`` (the products line is skipped for d_k = 1)."""
    products = " + ".join(f"{_p(a)} \\cdot {_p(b)}" for a, b in zip(q, k, strict=True))
    terms = [a * b for a, b in zip(q, k, strict=True)]
    total = sum(terms, Fraction(0))
    middle = " + ".join(_p(t) for t in terms)
    return f"{products} = {middle} = {_n(total)}" if len(terms) > 1 else f"{products} = {_n(total)}"


def _norm2(v: Sequence[Fraction]) -> Fraction:
    return dot(v, v)


def _letters(n: int) -> str:
    return "ABCDEFGH"[:n]


def _check_distinct(options: Sequence[Rich]) -> None:
    texts = [plain(o) for o in options]
    if len(set(texts)) != len(texts):
        raise Rejected("duplicate options")


def _numeric(name: str, label: str, value: Fraction, places: int, allow_zero: bool = False) -> NumericAnswer:
    if value == 0 and not allow_zero:
        raise Rejected("zero answer")
    if is_halfway(value, places):
        raise Rejected("answer on a rounding halfway point")
    return NumericAnswer(name=name, label=math(label), exact=value, places=places)


def _approx(answer: NumericAnswer) -> str:
    """``= -1`` or ``= \\frac{2}{3} \\approx 0.667`` for a worked solution."""
    exact = _n(answer.exact)
    if answer.rounded:
        return f"{exact} \\approx {answer.key}"
    return exact


_RAW_NOT_WEIGHT = text(
    "Remember that these are raw scores, not weights: a score can be negative and the scores of "
    "several keys need not add up to 1. Softmax turns scores into weights in the next step."
)

# ---------------------------------------------------------------- one score


def _one_score(fam: Family, g: Mapping[str, Any]) -> dict[str, Any]:
    q, k = g["q"], g["k"]
    s = dot(q, k)
    angle = ""
    if s != 0 and s * s == _norm2(q) * _norm2(k):
        angle = (
            "in exactly the same direction as the query (0°)"
            if s > 0
            else "in exactly the opposite direction to the query (180°)"
        )
    order = tuple(g.get("order", (1, 0, -1)))
    if sorted(order) != [-1, 0, 1]:
        raise ValueError(f"one_score 'order' must be a permutation of (1, 0, -1), found {order!r}")
    sign = order.index((s > 0) - (s < 0))
    by_sign = {
        1: text("Positive: the key is aligned with the query (the angle between them is less than 90°)."),
        0: text("Zero: the key is perpendicular to the query (90°); it offers nothing the query looks for."),
        -1: text("Negative: the key is anti-aligned (more than 90°); it points away from what the query looks for."),
    }
    options = tuple(by_sign[x] for x in order)
    meaning = {
        "aligned": "The score is positive, so the key is aligned with the query: it points roughly where "
        "the query looks.",
        "perpendicular": "The score is zero, so the key is perpendicular to the query: it offers nothing "
        "the query looks for.",
        "anti-aligned": "The score is negative, so the key is anti-aligned: it points away from what the "
        "query looks for.",
    }[sign_word(s)]
    if angle:
        meaning += f" Here the key points {angle}."
    return {
        "statement": (
            text("A query ")
            + math("q")
            + text(" describes what a token is looking for; a key ")
            + math("k")
            + text(" describes what another token offers. Their attention score is the dot product ")
            + math("q \\cdot k")
            + text("."),
            display(f"q = {_vec(q)}, \\qquad k = {_vec(k)}"),
        ),
        "questions": (
            Question(
                "a",
                text("Compute the score ") + math("q \\cdot k") + text("."),
                numeric=(_numeric("score", "q \\cdot k", s, fam.places, allow_zero=True),),
            ),
            Question(
                "b",
                text("What does the sign of the score tell you about the key?"),
                choice=ChoiceAnswer("meaning", options, sign, tuple(("sign", x) for x in order), shuffled="order" in g),
            ),
        ),
        "solution": (
            text("(a) Multiply matching entries of ")
            + math("q")
            + text(" and ")
            + math("k")
            + text(" and add the products:"),
            display(f"q \\cdot k = {_dot_steps(q, k)}"),
            text(f"(b) {meaning} Answer: {_letters(3)[sign]}."),
            _RAW_NOT_WEIGHT,
        ),
        "figure": _arrows(q, (k,), ("k",)),
    }


def _arrows(q: Sequence[Fraction], keys: Sequence[Sequence[Fraction]], names: Sequence[str]) -> tuple[Arrow, ...]:
    if len(q) != 2:
        return ()
    return (Arrow("q", q[0], q[1], "query"),) + tuple(
        Arrow(n, k[0], k[1], "key") for n, k in zip(names, keys, strict=True)
    )


# ---------------------------------------------------------------- one query, several keys


def _argmax_unique(values: Sequence[Fraction]) -> int:
    best = max(values)
    if list(values).count(best) > 1:
        raise Rejected("tie for highest")
    return list(values).index(best)


def _score_vector(fam: Family, g: Mapping[str, Any]) -> dict[str, Any]:
    q, keys = g["q"], g["keys"]
    n = len(keys)
    s = [dot(q, k) for k in keys]
    answers = tuple(_numeric(f"s_{j + 1}", f"s_{{{j + 1}}}", v, fam.places) for j, v in enumerate(s))
    best = _argmax_unique(s)
    key_lines = ",\\qquad ".join(f"k_{{{j + 1}}} = {_vec(k)}" for j, k in enumerate(keys))
    steps = " \\\\ ".join(f"s_{{{j + 1}}} &= q \\cdot k_{{{j + 1}}} = {_dot_steps(q, k)}" for j, k in enumerate(keys))
    total = sum(s, Fraction(0))
    return {
        "statement": (
            text(f"One query is compared with {n} keys. Each key gets the score ")
            + math("s_j = q \\cdot k_j")
            + text("."),
            display(f"q = {_vec(q)}, \\qquad {key_lines}"),
        ),
        "questions": (
            Question(
                "a",
                text("Compute the score vector ") + math(f"s = (s_1, \\ldots, s_{{{n}}})") + text("."),
                numeric=answers,
            ),
            Question(
                "b",
                text("Which key is most relevant to the query?"),
                choice=ChoiceAnswer(
                    "most_relevant",
                    tuple(text(f"Key {j + 1}") for j in range(n)),
                    best,
                    tuple(("key_highest", j) for j in range(n)),
                ),
            ),
        ),
        "solution": (
            text("(a) Score the query against each key in turn:"),
            display(f"\\begin{{aligned}} {steps} \\end{{aligned}}"),
            text("Stacked as rows of the key matrix ")
            + math("K")
            + text(", this is ")
            + math(f"s = K q = {_vec(s)}")
            + text("."),
            text("(b) The largest score is ")
            + math(f"s_{{{best + 1}}} = {_n(s[best])}")
            + text(f", so key {best + 1} matches the query best. Answer: {_letters(n)[best]}."),
            _RAW_NOT_WEIGHT + text(" Here they add up to ") + math(_n(total)) + text("."),
        ),
        "figure": _arrows(q, keys, [f"k{j + 1}" for j in range(n)]),
    }


# ---------------------------------------------------------------- Q K^T


def _score_matrix(fam: Family, g: Mapping[str, Any]) -> dict[str, Any]:
    Q, K = g["Q"], g["K"]
    n_q, n_k, d = len(Q), len(K), len(Q[0])
    S = [[dot(qi, kj) for kj in K] for qi in Q]
    answers = tuple(
        _numeric(f"S_{i + 1}{j + 1}", f"(Q K^\\top)_{{{i + 1}{j + 1}}}", S[i][j], fam.places)
        for i in range(n_q)
        for j in range(n_k)
    )
    steps = " \\\\ ".join(
        f"(Q K^\\top)_{{{i + 1}{j + 1}}} &= q_{{{i + 1}}} \\cdot k_{{{j + 1}}} = {_dot_steps(Q[i], K[j])}"
        for i in range(n_q)
        for j in range(n_k)
    )
    return {
        "statement": (
            text(f"Each of the {n_q} rows of ")
            + math("Q")
            + text(f" is a query and each of the {n_k} rows of ")
            + math("K")
            + text(" is a key (width ")
            + math(f"d_k = {d}")
            + text(")."),
            display(f"Q = {_mat(Q)}, \\qquad K = {_mat(K)}"),
        ),
        "questions": (
            Question(
                "a",
                text("Compute the score matrix ")
                + math("Q K^\\top")
                + text(f" (shape {n_q} × {n_k}: one row per query, one column per key)."),
                numeric=answers,
            ),
        ),
        "solution": (
            text("Entry ")
            + math("(i, j)")
            + text(" is the score of query ")
            + math("i")
            + text(" against key ")
            + math("j")
            + text(": row ")
            + math("i")
            + text(" of ")
            + math("Q")
            + text(" dotted with row ")
            + math("j")
            + text(" of ")
            + math("K")
            + text(" (a row of ")
            + math("K")
            + text(", not a column: that is what the transpose does)."),
            display(f"\\begin{{aligned}} {steps} \\end{{aligned}}"),
            display(f"Q K^\\top = {_mat(S)}"),
            _RAW_NOT_WEIGHT,
        ),
        "figure": (),
    }


# ---------------------------------------------------------------- scaled scores


def _describe_long(name: str, v: Sequence[Fraction]) -> Rich:
    d, half = len(v), len(v) // 2
    if v[0] == v[-1]:
        return math(name) + text(f" has all {d} entries equal to ") + math(_n(v[0]))
    return (
        math(name)
        + text(f" has its first {half} entries equal to ")
        + math(_n(v[0]))
        + text(f" and its last {half} equal to ")
        + math(_n(v[-1]))
    )


def _scaled_score(fam: Family, g: Mapping[str, Any]) -> dict[str, Any]:
    q, k = g["q"], g["k"]
    d = len(q)
    root = isqrt(d)
    s = dot(q, k)
    scaled = s / root
    raw = _numeric("raw", "q \\cdot k", s, fam.places)
    out = _numeric("scaled", "\\frac{q \\cdot k}{\\sqrt{d_k}}", scaled, fam.places)
    if d > 6:
        givens = _describe_long("q", q) + text("; ") + _describe_long("k", k) + text(".")
        half = d // 2
        work = (
            f"q \\cdot k = {half} \\cdot {_p(q[0])} \\cdot {_p(k[0])} + {half} \\cdot {_p(q[-1])} \\cdot "
            f"{_p(k[-1])} = {_n(half * q[0] * k[0])} + {_p(half * q[-1] * k[-1])} = {_n(s)}"
        )
    else:
        givens = display(f"q = {_vec(q)}, \\qquad k = {_vec(k)}")
        work = f"q \\cdot k = {_dot_steps(q, k)}"
    return {
        "statement": (
            text("Scaled dot-product attention divides each score by ")
            + math("\\sqrt{d_k}")
            + text(", the square root of the query/key width. Here ")
            + math(f"d_k = {d}")
            + text("."),
            givens,
        ),
        "questions": (
            Question("a", text("Compute the raw score ") + math("q \\cdot k") + text("."), numeric=(raw,)),
            Question(
                "b",
                text("Compute the scaled score ") + math("q \\cdot k / \\sqrt{d_k}") + text("."),
                numeric=(out,),
            ),
        ),
        "solution": (
            text("(a) The raw score is the dot product:"),
            display(work),
            text("(b) ") + math(f"\\sqrt{{d_k}} = \\sqrt{{{d}}} = {root}") + text(", so"),
            display(f"\\frac{{q \\cdot k}}{{\\sqrt{{d_k}}}} = \\frac{{{_n(s)}}}{{{root}}} = {_approx(out)}"),
            text("Why scale: with random entries the spread of a raw score grows like ")
            + math("\\sqrt{d_k}")
            + text(
                "; dividing by it keeps the scores in a range where softmax is not saturated. "
                "Divide by the square root of "
            )
            + math("d_k")
            + text(", not by ")
            + math("d_k")
            + text(" itself."),
        ),
        "figure": _arrows(q, (k,), ("k",)) if d == 2 else (),
    }


# ---------------------------------------------------------------- softmax


def _ln_score(base: int, m: int) -> str:
    if m == 1:
        return str(base)
    if base == 0:
        return f"\\ln {m}"
    return f"{base} + \\ln {m}"


def _exp_factor(base: int) -> str:
    return "" if base == 0 else "e" if base == 1 else f"e^{{{base}}}"


def _softmax_exact(fam: Family, g: Mapping[str, Any]) -> dict[str, Any]:
    base, ms = g["base"], g["multipliers"]
    n = len(ms)
    total = sum(ms)
    weights = [Fraction(m, total) for m in ms]
    if len(set(ms)) == 1:
        raise Rejected("all scores equal")
    answers = tuple(_numeric(f"w_{j + 1}", f"w_{{{j + 1}}}", w, fam.places) for j, w in enumerate(weights))
    best = _argmax_unique(weights)
    f = _exp_factor(base)

    def times_f(m: int) -> str:
        return str(m) if not f else f if m == 1 else f"{m}{f}"

    exps = " \\\\ ".join(f"e^{{s_{{{j + 1}}}}} &= e^{{{_ln_score(base, m)}}} = {times_f(m)}" for j, m in enumerate(ms))
    raw_sum = times_f(total)
    wlines = " \\\\ ".join(
        f"w_{{{j + 1}}} &= \\frac{{{times_f(m)}}}{{{raw_sum}}} = {_approx(a)}"
        for j, (m, a) in enumerate(zip(ms, answers, strict=True))
    )
    return {
        "statement": (
            text(f"A query has the raw scores below against {n} keys (ln is the natural logarithm)."),
            display("s = [" + ",\\ ".join(_ln_score(base, m) for m in ms) + "]"),
        ),
        "questions": (
            Question(
                "a",
                text("Compute the attention weights ")
                + math("w = \\operatorname{softmax}(s)")
                + text(", ")
                + answer_form(fam.places)
                + text("."),
                numeric=answers,
            ),
            Question(
                "b",
                text("Which key gets the largest weight?"),
                choice=ChoiceAnswer(
                    "largest_weight",
                    tuple(text(f"Key {j + 1}") for j in range(n)),
                    best,
                    tuple(("largest_weight", j) for j in range(n)),
                ),
            ),
        ),
        "solution": (
            text("(a) Softmax exponentiates each score and divides by the sum: ")
            + math("w_j = e^{s_j} / \\sum_i e^{s_i}")
            + text(". Since ")
            + math("e^{\\ln m} = m")
            + text(":"),
            display(f"\\begin{{aligned}} {exps} \\end{{aligned}}"),
            text("The sum is ")
            + math(raw_sum)
            + text(" and any common factor cancels, so each weight is a plain fraction:"),
            display(f"\\begin{{aligned}} {wlines} \\end{{aligned}}"),
            text(
                "(b) Softmax keeps the order of the scores, so the largest score wins: key "
                f"{best + 1}. Answer: {_letters(n)[best]}."
            ),
            text(
                "Raw scores are not weights: they need not be positive and need not add up to 1. "
                "The weights are positive and add up to exactly 1."
            ),
        ),
        "figure": (),
    }


#: Statements about raw scores and softmax weights: (id, text, is it true for every score vector?).
CONCEPTS = (
    (
        "keeps_order",
        "Softmax keeps the order of the scores, makes every weight positive and makes the weights add up to 1.",
        True,
    ),
    (
        "scores_are_weights",
        "The raw scores can be used as weights directly: a larger score already means more attention.",
        False,
    ),
    ("divide_by_sum", "The weights are the scores divided by their sum.", False),
    ("negative_weight", "A key with a negative score gets a negative weight.", False),
    ("positive_sum_one", "Every weight is positive and the weights add up to 1.", True),
    ("larger_wins", "A larger score always gets a larger weight.", True),
    (
        "largest_takes_all",
        "The key with the largest score gets all of the attention (weight 1) and every other key gets weight 0.",
        False,
    ),
    ("zero_score_zero_weight", "A key whose score is 0 gets weight 0.", False),
)


def _ordering_text(perm: Sequence[int]) -> Rich:
    return math(" > ".join(f"w_{{{j + 1}}}" for j in perm))


def _softmax_ranking(fam: Family, g: Mapping[str, Any]) -> dict[str, Any]:
    s = g["scores"]
    n = len(s)
    if len(set(s)) != n:
        raise Rejected("tie for highest")
    total = sum(s, Fraction(0))
    if total == 1:
        raise Rejected("scores add up to 1")
    sum_answer = _numeric("sum", "s_1 + \\cdots + s_n", total, fam.places)
    right = tuple(sorted(range(n), key=lambda j: -s[j]))
    orderings = g.get("orderings") or (right, tuple(reversed(right)), tuple(range(n)))
    opts = tuple(_ordering_text(p) for p in orderings)
    _check_distinct(opts)
    concept_ids = g.get("concepts") or tuple(c[0] for c in CONCEPTS[:4])
    concepts = {c[0]: c for c in CONCEPTS}
    c_opts = tuple(text(concepts[c][1]) for c in concept_ids)
    order_txt = " > ".join(f"w_{{{j + 1}}}" for j in right)
    return {
        "statement": (
            text(f"A query has these raw scores against {n} keys:"),
            display(f"s = {_vec(s)}"),
        ),
        "questions": (
            Question("a", text("What do the raw scores add up to?"), numeric=(sum_answer,)),
            Question(
                "b",
                text("Without computing any exponential, order the attention weights ")
                + math("w = \\operatorname{softmax}(s)")
                + text(" from largest to smallest."),
                choice=ChoiceAnswer(
                    "ordering",
                    opts,
                    orderings.index(right),
                    tuple(("ordering", tuple(p)) for p in orderings),
                    shuffled=True,
                ),
            ),
            Question(
                "c",
                text("Which statement about scores and weights is true?"),
                choice=ChoiceAnswer(
                    "concept",
                    c_opts,
                    next(i for i, c in enumerate(concept_ids) if concepts[c][2]),
                    tuple(("concept", c) for c in concept_ids),
                    shuffled=True,
                ),
            ),
        ),
        "solution": (
            text("(a) ")
            + math(" + ".join(_p(x) for x in s) + f" = {_n(total)}")
            + text(". The raw scores do not add up to 1 (and can be negative), so they are not weights."),
            text("(b) Softmax ")
            + math("w_j = e^{s_j} / \\sum_i e^{s_i}")
            + text(
                " is increasing in each score: a larger score always gets a larger weight. Sorting the scores gives "
            )
            + math(order_txt)
            + text(f". Answer: {_letters(len(orderings))[orderings.index(right)]}."),
            text("(c) Every weight ")
            + math("e^{s_j} / \\sum_i e^{s_i}")
            + text(
                " is positive, the weights add up to 1 and their order is the order of the scores. "
                "Dividing by the sum of the raw scores fails as soon as a score is negative "
                "or the sum is zero. "
                f"Answer: {_letters(len(concept_ids))[next(i for i, c in enumerate(concept_ids) if concepts[c][2])]}."
            ),
        ),
        "figure": (),
    }


# ---------------------------------------------------------------- multiple choice


def _claim_text(claim: tuple[Any, ...]) -> Rich:
    kind = claim[0]
    if kind == "highest":
        return text(f"Key {claim[1] + 1} has the highest score.")
    if kind == "score_is":
        return text(f"The score of key {claim[1] + 1} is ") + math(_n(claim[2])) + text(".")
    if kind == "negative":
        return text(f"Key {claim[1] + 1} points away from the query: its score is negative.")
    if kind == "perpendicular":
        return text(f"Key {claim[1] + 1} is perpendicular to the query: its score is zero.")
    if kind == "are_weights":
        return text("The raw scores are already attention weights: they are positive and add up to 1.")
    raise ValueError(f"unknown claim {claim!r}")


def claim_text_length(claim: tuple[Any, ...]) -> int:
    """Length of a statement option's plain text (what ``--verify`` ranks by)."""
    return len(plain(_claim_text(claim)))


def claim_truth(claim: tuple[Any, ...], s: Sequence[Fraction]) -> bool:
    """Whether a statement claim holds for the exact scores ``s`` (shape ``(n_k,)``)."""
    kind = claim[0]
    if kind == "highest":
        return all(s[claim[1]] > v for j, v in enumerate(s) if j != claim[1])
    if kind == "score_is":
        return s[claim[1]] == claim[2]
    if kind == "negative":
        return s[claim[1]] < 0
    if kind == "perpendicular":
        return s[claim[1]] == 0
    if kind == "are_weights":
        return all(v >= 0 for v in s) and sum(s) == 1
    raise ValueError(f"unknown claim {claim!r}")


_SCALINGS = {
    "sqrt": "the right scaling",
    "d": "dividing by d_k instead of its square root",
    "half_d": "dividing by d_k / 2 instead of the square root of d_k",
    "none": "forgetting to scale",
    "times_sqrt": "multiplying by the square root instead of dividing",
}


def _terms(q: Sequence[Fraction], k: Sequence[Fraction]) -> list[Fraction]:
    """The dot product's terms as a student writes them: one per entry, or one per constant half."""
    d = len(q)
    if d <= 4:
        return [a * b for a, b in zip(q, k, strict=True)]
    half = d // 2
    if any(len(set(v[:half])) != 1 or len(set(v[half:])) != 1 for v in (q, k)):
        return [dot(q[:half], k[:half]), dot(q[half:], k[half:])]
    return [half * q[0] * k[0], half * q[-1] * k[-1]]


def scaled_option_value(claim: Sequence[Any], q: Sequence[Fraction], k: Sequence[Fraction]) -> Fraction:
    """The exact value of one "which scaled score" option (``claim`` as in the generator's ``options``).

    ``("sqrt",)`` is ``q · k / sqrt(d_k)``; ``("d",)``, ``("half_d",)``, ``("none",)`` and
    ``("times_sqrt",)`` divide by ``d_k``, by ``d_k / 2``, not at all, or multiply by ``sqrt(d_k)``;
    ``("slip", i)`` is the right scaling of the dot product with term ``i``'s sign flipped.

    Raises:
        ValueError: an unknown claim.
    """
    return scaled_option_values([claim], q, k)[0]


def scaled_option_values(
    claims: Sequence[Sequence[Any]], q: Sequence[Fraction], k: Sequence[Fraction]
) -> list[Fraction]:
    """:func:`scaled_option_value` of several claims, computing ``q · k`` once.

    Raises:
        ValueError: an unknown claim.
    """
    d = len(q)
    root = isqrt(d)
    terms = _terms(q, k)
    halves = d > 4 and all(len(set(v[: d // 2])) == 1 and len(set(v[d // 2 :])) == 1 for v in (q, k))
    s = sum(terms, Fraction(0)) if halves else dot(q, k)  # two products instead of d_k when in halves
    values = {"sqrt": s / root, "d": s / d, "half_d": s / Fraction(d, 2), "none": s, "times_sqrt": s * root}
    out = []
    for claim in claims:
        if claim[0] == "slip":
            out.append((s - 2 * terms[claim[1]]) / root)
        elif claim[0] in values:
            out.append(values[claim[0]])
        else:
            raise ValueError(f"unknown scaled-score option {tuple(claim)!r}")
    return out


def _mistake_text(claim: Sequence[Any], d: int) -> str:
    if claim[0] != "slip":
        return _SCALINGS[claim[0]]
    if d <= 4:
        return f"a sign slip in the product of entry {claim[1] + 1}"
    return f"a sign slip in the {('first', 'second')[claim[1]]} half's products"


def _multiple_choice(fam: Family, g: Mapping[str, Any]) -> dict[str, Any]:
    template = g["template"]
    q = g["q"]
    if template == "highest_key":
        keys = g["keys"]
        s = [dot(q, k) for k in keys]
        best = _argmax_unique(s)
        if 0 in s:
            raise Rejected("zero answer")
        opts = tuple(math(vector_text(k)) for k in keys)
        _check_distinct(opts)
        steps = ",\\quad ".join(f"q \\cdot {_vec(k)} = {_n(v)}" for k, v in zip(keys, s, strict=True))
        return {
            "statement": (text("The query is ") + math(f"q = {_vec(q)}") + text("."),),
            "questions": (
                Question(
                    "a",
                    text("Which key scores highest against this query?"),
                    choice=ChoiceAnswer(
                        "highest",
                        opts,
                        best,
                        tuple(("key_highest", j) for j in range(len(keys))),
                        shuffled=True,
                    ),
                ),
            ),
            "solution": (
                text("Score every key:"),
                display(steps),
                text(f"The highest score is {format_exact(s[best])}. Answer: {_letters(len(keys))[best]}."),
            ),
            "figure": _arrows(q, keys, [f"{c}" for c in _letters(len(keys))]),
        }
    if template == "true_statement":
        keys, claims = g["keys"], g["claims"]
        s = [dot(q, k) for k in keys]
        if 0 in s:
            raise Rejected("zero answer")
        truths = [claim_truth(c, s) for c in claims]
        if truths.count(True) != 1:
            raise Rejected("not exactly one true statement")
        opts = tuple(_claim_text(c) for c in claims)
        _check_distinct(opts)
        right = truths.index(True)
        key_lines = ",\\qquad ".join(f"k_{{{j + 1}}} = {_vec(k)}" for j, k in enumerate(keys))
        steps = ",\\quad ".join(f"s_{{{j + 1}}} = {_n(v)}" for j, v in enumerate(s))
        return {
            "statement": (text("A query and three keys:"), display(f"q = {_vec(q)}, \\qquad {key_lines}")),
            "questions": (
                Question(
                    "a",
                    text("Which statement about the scores is true?"),
                    choice=ChoiceAnswer("true_statement", opts, right, tuple(claims), shuffled=True),
                ),
            ),
            "solution": (
                text("Score every key: ") + math(steps) + text("."),
                text(
                    "Check each statement against these scores: only one holds, option "
                    f"{_letters(len(claims))[right]}. (Raw scores are not weights: they can be negative and "
                    "need not add up to 1.)"
                ),
            ),
            "figure": _arrows(q, keys, [f"k{j + 1}" for j in range(len(keys))]),
        }
    # scaled_value
    k = g["k"]
    options = tuple((o,) if isinstance(o, str) else tuple(o) for o in g["options"])
    d = len(q)
    raw = dot(q, k)
    if raw == 0:
        raise Rejected("zero answer")
    values = scaled_option_values(options, q, k)
    opts = tuple(math(t) for t in common_places(values))
    _check_distinct(opts)
    right = options.index(("sqrt",))
    if d > 6:
        givens = _describe_long("q", q) + text("; ") + _describe_long("k", k) + text(".")
    else:
        givens = display(f"q = {_vec(q)}, \\qquad k = {_vec(k)}")
    mistakes = "; ".join(
        f"{format_exact(v)} comes from {_mistake_text(o, d)}"
        for o, v in zip(options, values, strict=True)
        if o != ("sqrt",)
    )
    return {
        "statement": (text("A query and a key of width ") + math(f"d_k = {d}") + text(":"), givens),
        "questions": (
            Question(
                "a",
                text("What is the scaled score ") + math("q \\cdot k / \\sqrt{d_k}") + text("?"),
                choice=ChoiceAnswer("scaled", opts, right, tuple(("scaled", *o) for o in options), shuffled=True),
            ),
        ),
        "solution": (
            math(f"q \\cdot k = {_n(raw)}")
            + text(" and ")
            + math(f"\\sqrt{{{d}}} = {isqrt(d)}")
            + text(", so ")
            + math(f"q \\cdot k / \\sqrt{{d_k}} = {_n(values[right])}")
            + text(f". Answer: {_letters(len(options))[right]}."),
            text(f"The other options are common mistakes: {mistakes}."),
        ),
        "figure": (),
    }


_BUILDERS = {
    "one_score": _one_score,
    "score_vector": _score_vector,
    "score_matrix": _score_matrix,
    "scaled_score": _scaled_score,
    "multiple_choice": _multiple_choice,
}


def build_problem(
    family: Family,
    givens: Mapping[str, Any],
    *,
    index: int | None = None,
    seed: int | None = None,
    base_seed: int | None = None,
    student: str | None = None,
    attempts: int = 1,
) -> Problem:
    """Build the problem, its exact answers and its worked solution from ``givens``.

    Args:
        family: the validated family.
        givens: exact numbers (Fractions) in the kind's layout (see :mod:`attnscore.practice.generators`).
        index, seed, base_seed, student: where the variant came from (``None`` for fixed problems).
        attempts: draws the generator needed (for acceptance reports).

    Raises:
        Rejected: the givens make a degenerate problem.
    """
    if family.kind == "softmax":
        parts = _softmax_exact(family, givens) if "multipliers" in givens else _softmax_ranking(family, givens)
    else:
        parts = _BUILDERS[family.kind](family, givens)
    return Problem(
        family_id=family.id,
        family_version=family.version,
        kind=family.kind,
        title=family.title,
        index=index,
        seed=seed,
        base_seed=base_seed,
        student=student,
        givens=dict(givens),
        statement=parts["statement"],
        questions=parts["questions"],
        solution=parts["solution"],
        figure=parts["figure"],
        attempts=attempts,
        intro=family.intro,
    )
