"""PrairieLearn's side of a randomised question: one variant from PrairieLearn's variant seed.

This module runs *inside PrairieLearn*: ``attnscore practice --format prairielearn`` copies it,
with the generator modules it imports (standard library only), into every question folder
(see :mod:`attnscore.practice.vendor`), and the question's ``server.py`` calls :func:`fill_data`
from its ``generate(data)``.

The variant is ``generate_variant(family, base_seed=data["variant_seed"], student=None, index=0)``,
the same call ``attnscore practice FAMILY --seed SEED --count 1`` makes, so a student's variant
can be regenerated (and its worked solution printed) from the seed PrairieLearn shows.

``data["params"]`` gets the rendered text (HTML with MathJax ``\\(...\\)``) that ``question.html``
fills in with mustache; ``data["correct_answers"]`` gets each numeric blank's key (the answer key's
value), which ``pl-number-input`` compares with ``comparison="relabs"``, ``rtol="0"`` and
``atol`` = half a unit in the last requested place, exactly the answer key's rule. Choice blanks
carry ``correct="true"`` on one ``pl-answer``; ``pl-multiple-choice`` keys itself from that.

Example:
    >>> from attnscore.practice.families import parse_family_text
    >>> fam = parse_family_text("id: demo\\nversion: 1\\nkind: scaled_score\\ntitle: Demo\\n", "demo.yaml")[0]
    >>> data = {"variant_seed": 7, "params": {}, "correct_answers": {}}
    >>> fill_data(fam, data).uid
    'demo-v1-s7-0000'
    >>> sorted(data["correct_answers"]) == sorted(data["params"]["answers_names"])
    True
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from attnscore.practice.family import Family
from attnscore.practice.generators import generate_variant
from attnscore.practice.numbers import format_exact
from attnscore.practice.problem import Problem
from attnscore.practice.richtext import to_html

__all__ = ["SEED_MAX", "VariantSeedError", "answers_name", "variant_seed_of", "problem_params", "fill_data"]

SEED_MAX = 2**63 - 1  # the largest --seed the command line takes


class VariantSeedError(ValueError):
    """``data["variant_seed"]`` is missing or is not an integer from 0 to :data:`SEED_MAX`.

    Attributes:
        found: the value found (``None`` when the key is missing).
    """

    def __init__(self, found: Any, missing: bool = False) -> None:
        what = "nothing (no 'variant_seed' key)" if missing else f"{found!r} ({type(found).__name__})"
        super().__init__(
            f"data['variant_seed'] must be an integer from 0 to {SEED_MAX} (PrairieLearn passes one to "
            f"generate(data)), found {what}; call generate() with PrairieLearn's data dict"
        )
        self.found = found


def answers_name(part: str, name: str) -> str:
    """The ``answers-name`` of one blank: ``"<part>_<name>"`` with anything but ``[A-Za-z0-9_]`` as ``_``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", f"{part}_{name}")


def variant_seed_of(data: Any) -> int:
    """PrairieLearn's variant seed from ``data``, checked.

    Raises:
        VariantSeedError: ``data`` is not a dict with an integer ``variant_seed`` in ``[0, SEED_MAX]``
            (booleans, floats and numeric strings are refused: the same seed must mean the same variant).
    """
    if not isinstance(data, dict) or "variant_seed" not in data:
        raise VariantSeedError(None, missing=True)
    seed = data["variant_seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise VariantSeedError(seed)
    return seed


def problem_params(p: Problem) -> dict[str, Any]:
    """The JSON ``params`` that ``question.html`` renders for one problem.

    Returns:
        ``{"attnscore": {...seed, uid, command}, "intro", "statement": [{"html"}], "parts": [{"part",
        "prompt", "numeric": [{"name", "label", "atol"}], "choice": {"name", "options": [{"html",
        "correct"}]} or None}], "solution": [{"html"}], "answers_names": [...]}``; every text is HTML.
    """
    parts = []
    names: list[str] = []
    for q in p.questions:
        numeric = []
        for a in q.numeric:
            names.append(answers_name(q.part, a.name))
            numeric.append({"name": names[-1], "label": to_html(a.label) + " =", "atol": format_exact(a.tolerance)})
        choice = None
        if q.choice is not None:
            names.append(answers_name(q.part, q.choice.name))
            choice = {
                "name": names[-1],
                "options": [
                    {"html": to_html(o), "correct": "true" if i == q.choice.correct else "false"}
                    for i, o in enumerate(q.choice.options)
                ],
            }
        parts.append({"part": q.part, "prompt": to_html(q.prompt), "numeric": numeric, "choice": choice})
    command = f"attnscore practice {p.family_id} --seed {p.base_seed} --count 1"
    return {
        "attnscore": {"family": p.family_id, "version": p.family_version, "seed": p.base_seed, "uid": p.uid},
        "command": command,
        "intro": to_html((("text", p.intro),)) if p.intro else "",
        "statement": [{"html": to_html(r)} for r in p.statement],
        "parts": parts,
        "solution": [{"html": to_html(r)} for r in p.solution],
        "answers_names": names,
    }


def fill_data(family: Family, data: dict[str, Any]) -> Problem:
    """Generate the variant for ``data["variant_seed"]`` and fill ``data["params"]`` and ``data["correct_answers"]``.

    Numeric blanks get their key as a float (``correct_answers["a_score"] = -1.0``); choice blanks
    are keyed in the markup. Returns the :class:`~attnscore.practice.problem.Problem` drawn.

    Raises:
        VariantSeedError: the seed is missing or not an integer in range.
        GenerationError: the family's constraints accepted no draw (the family file needs fixing).
    """
    seed = variant_seed_of(data)
    problem = generate_variant(family, seed, None, 0)
    data.setdefault("params", {}).update(problem_params(problem))
    answers = data.setdefault("correct_answers", {})
    for q in problem.questions:
        for a in q.numeric:
            answers[answers_name(q.part, a.name)] = float(Fraction(a.key))
    return problem
