"""How each course platform decides that a typed number matches the key (small pure functions).

These model the platforms' documented acceptance rules so that tests can check an export by its
own content: the key must be accepted and ``key ± (tolerance + ε)`` rejected.

- Moodle numerical (nominal tolerance): accepted when ``a - t' <= x <= a + t'`` where
  ``t' = t + eps · max(|t|, |a|, eps)`` (Moodle widens the interval by a tiny ``eps`` so that
  seemingly equal floats compare equal; boundaries are inclusive).
- Canvas numerical, "exact answer with margin" (QTI 1.2 export): accepted when ``x`` equals the
  ``varequal`` value or lies in ``[vargte, varlte]`` (inclusive). Canvas stores answers and
  bounds below 1e-4 in magnitude as 0 (see :func:`canvas_stored_value`).
- PrairieLearn ``pl-number-input comparison="relabs"``: accepted when
  ``|x - c| <= atol + rtol · |c|`` (``numpy.isclose`` semantics, inclusive).
"""

from __future__ import annotations

__all__ = [
    "MOODLE_EPSILON",
    "moodle_accepts",
    "canvas_accepts",
    "canvas_stored_value",
    "prairielearn_accepts",
]

#: The tiny widening Moodle adds to a nominal tolerance (order of a double's epsilon).
MOODLE_EPSILON = 1e-15


def moodle_accepts(response: float, answer: float, tolerance: float, epsilon: float = MOODLE_EPSILON) -> bool:
    """Moodle's nominal-tolerance rule for a numerical answer (see the module docstring)."""
    widened = abs(tolerance) + epsilon * max(abs(tolerance), abs(answer), epsilon)
    return answer - widened <= response <= answer + widened


def canvas_stored_value(value: float) -> float:
    """What Canvas keeps of a numerical answer or bound: values below 1e-4 in magnitude become 0."""
    return 0.0 if abs(value) < 1e-4 else value


def canvas_accepts(response: float, exact: float, lower: float, upper: float) -> bool:
    """Canvas' exact-answer-with-margin rule, from the exported ``varequal``/``vargte``/``varlte``."""
    exact, lower, upper = (canvas_stored_value(v) for v in (exact, lower, upper))
    return response == exact or lower <= response <= upper


def prairielearn_accepts(response: float, correct: float, rtol: float, atol: float) -> bool:
    """PrairieLearn's ``relabs`` comparison of ``pl-number-input``."""
    return abs(response - correct) <= atol + rtol * abs(correct)
