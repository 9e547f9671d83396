"""The building blocks of worked solutions, shared by the problem kinds (:mod:`attnscore.practice.kinds`).

Exact maths (:func:`dot`), math text for numbers, vectors, matrices and dot-product steps, and
the checks every kind applies to its answers and options (:class:`Rejected` for a degenerate
problem: a tie for "highest", a zero answer, duplicate options, a key on a rounding halfway point).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction

from attnscore.practice.numbers import format_exact, is_halfway, is_terminating
from attnscore.practice.problem import Arrow, NumericAnswer
from attnscore.practice.richtext import Rich, math, plain, text

__all__ = [
    "Rejected",
    "dot",
    "norm2",
    "sign_word",
    "num",
    "number_text",
    "paren",
    "vec",
    "mat",
    "dot_steps",
    "vector_text",
    "common_places",
    "letters",
    "check_distinct",
    "numeric",
    "approx",
    "arrows",
    "argmax_unique",
    "describe_long",
    "RAW_NOT_WEIGHT",
]


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


def num(x: Fraction) -> str:
    """A number in math: ``-1``, ``0.5``, ``\\frac{2}{3}``."""
    if is_terminating(x):
        return format_exact(x)
    sign = "-" if x < 0 else ""
    return f"{sign}\\frac{{{abs(x.numerator)}}}{{{x.denominator}}}"


def number_text(x: Fraction) -> str:
    """A number as the options show it (``-1``, ``0.5``, ``\\frac{2}{3}``)."""
    return num(x)


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
    return f"k = {vec(v)}"


def paren(x: Fraction) -> str:
    """A number in math, in parentheses when negative (as a factor or addend)."""
    return f"({num(x)})" if x < 0 else num(x)


def vec(v: Sequence[Fraction]) -> str:
    """A vector in math: ``[1,\\ -2]``; a long one of two constant halves with ``\\ldots``."""
    if len(v) > 6:
        return _long_vec(v)
    return "[" + ",\\ ".join(num(x) for x in v) + "]"


def _long_vec(v: Sequence[Fraction]) -> str:
    """A long vector made of two constant halves: ``[2, \\ldots, 2, -1, \\ldots, -1]``."""
    half = len(v) // 2
    first, second = v[0], v[-1]
    if first == second:
        return f"[{num(first)},\\ \\ldots,\\ {num(first)}]"
    return f"[{num(first)},\\ \\ldots,\\ {num(v[half - 1])},\\ {num(v[half])},\\ \\ldots,\\ {num(second)}]"


def mat(m: Sequence[Sequence[Fraction]]) -> str:
    """A matrix in math (``bmatrix``), rows as given."""
    rows = " \\\\ ".join(" & ".join(num(x) for x in row) for row in m)
    return f"\\begin{{bmatrix}} {rows} \\end{{bmatrix}}"


def dot_steps(q: Sequence[Fraction], k: Sequence[Fraction]) -> str:
    """``0 \\cdot 0 + 1 \\cdot (-1) = 0 + (-1) = -1`` (the products line is skipped for d_k = 1)."""
    products = " + ".join(f"{paren(a)} \\cdot {paren(b)}" for a, b in zip(q, k, strict=True))
    terms = [a * b for a, b in zip(q, k, strict=True)]
    total = sum(terms, Fraction(0))
    middle = " + ".join(paren(t) for t in terms)
    return f"{products} = {middle} = {num(total)}" if len(terms) > 1 else f"{products} = {num(total)}"


def norm2(v: Sequence[Fraction]) -> Fraction:
    """Exact squared length ``v · v``."""
    return dot(v, v)


def letters(n: int) -> str:
    """The first ``n`` option letters: ``ABC...``."""
    return "ABCDEFGH"[:n]


def check_distinct(options: Sequence[Rich]) -> None:
    """Raise Rejected("duplicate options") when two options read the same."""
    texts = [plain(o) for o in options]
    if len(set(texts)) != len(texts):
        raise Rejected("duplicate options")


def numeric(name: str, label: str, value: Fraction, places: int, allow_zero: bool = False) -> NumericAnswer:
    """A numeric blank; Rejected for a zero answer (unless allowed) or one on a rounding halfway point."""
    if value == 0 and not allow_zero:
        raise Rejected("zero answer")
    if is_halfway(value, places):
        raise Rejected("answer on a rounding halfway point")
    return NumericAnswer(name=name, label=math(label), exact=value, places=places)


def approx(answer: NumericAnswer) -> str:
    """``= -1`` or ``= \\frac{2}{3} \\approx 0.667`` for a worked solution."""
    exact = num(answer.exact)
    if answer.rounded:
        return f"{exact} \\approx {answer.key}"
    return exact


def arrows(q: Sequence[Fraction], keys: Sequence[Sequence[Fraction]], names: Sequence[str]) -> tuple[Arrow, ...]:
    """The figure's arrows: the query and the named keys (none unless ``d_k = 2``)."""
    if len(q) != 2:
        return ()
    return (Arrow("q", q[0], q[1], "query"),) + tuple(
        Arrow(n, k[0], k[1], "key") for n, k in zip(names, keys, strict=True)
    )


def argmax_unique(values: Sequence[Fraction]) -> int:
    """The position of the largest value; Rejected("tie for highest") when it is shared."""
    best = max(values)
    if list(values).count(best) > 1:
        raise Rejected("tie for highest")
    return list(values).index(best)


def describe_long(name: str, v: Sequence[Fraction]) -> Rich:
    d, half = len(v), len(v) // 2
    if v[0] == v[-1]:
        return math(name) + text(f" has all {d} entries equal to ") + math(num(v[0]))
    return (
        math(name)
        + text(f" has its first {half} entries equal to ")
        + math(num(v[0]))
        + text(f" and its last {half} equal to ")
        + math(num(v[-1]))
    )


RAW_NOT_WEIGHT = text(
    "Remember that these are raw scores, not weights: a score can be negative and the scores of "
    "several keys need not add up to 1. Softmax turns scores into weights in the next step."
)
