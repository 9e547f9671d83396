"""JSON output: the problems (no answers) and the answer key, with sorted keys and exact numbers as text."""

from __future__ import annotations

import json
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from attnscore.practice.numbers import format_exact
from attnscore.practice.problem import Problem
from attnscore.practice.richtext import to_markdown
from attnscore.practice.worksheet import Worksheet

__all__ = ["problems_json", "key_json", "plain_givens", "dumps"]

_LETTERS = "ABCDEFGH"


def plain_givens(value: Any) -> Any:
    """Givens as JSON data: Fractions as exact text (``"-1"``, ``"0.7"``, ``"2/3"``), tuples as lists."""
    if isinstance(value, Fraction):
        return format_exact(value)
    if isinstance(value, dict):
        return {str(k): plain_givens(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, (list, tuple)):
        return [plain_givens(v) for v in value]
    return value


def dumps(data: Any) -> bytes:
    """Deterministic JSON bytes (sorted keys, 2-space indent, UTF-8, final newline; NaN refused)."""
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def _meta(p: Problem) -> dict[str, Any]:
    return {
        "uid": p.uid,
        "family": p.family_id,
        "version": p.family_version,
        "kind": p.kind,
        "index": p.index,
        "base_seed": p.base_seed,
        "student": p.student,
    }


def problems_json(problems: Sequence[Problem], sheet: Worksheet) -> bytes:
    """The problems as JSON (statements and prompts in Markdown with ``$`` math); no answers."""
    items = []
    for p in problems:
        items.append(
            {
                **_meta(p),
                "title": p.title,
                "givens": plain_givens(dict(p.givens)),
                "statement": [to_markdown(s).strip("\n") for s in p.statement],
                "questions": [
                    {
                        "part": q.part,
                        "prompt": to_markdown(q.prompt),
                        "blanks": [
                            {"name": a.name, "label": to_markdown(a.label), "places": a.places} for a in q.numeric
                        ],
                        "options": [to_markdown(o) for o in q.choice.options] if q.choice else [],
                    }
                    for q in p.questions
                ],
            }
        )
    return dumps(
        {
            "format": "attnscore-practice/1",
            "title": sheet.title,
            "rounding": sheet.rounding,
            "problems": items,
        }
    )


def key_json(problems: Sequence[Problem], sheet: Worksheet) -> bytes:
    """The answer key as JSON: per problem its seed, each numeric key (exact, keyed, tolerance) and choice."""
    items = []
    for p in problems:
        answers, choices = {}, {}
        for q in p.questions:
            for a in q.numeric:
                answers[f"{q.part}.{a.name}"] = {
                    "key": a.key,
                    "exact": format_exact(a.exact),
                    "rounded": a.rounded,
                    "places": a.places,
                    "tolerance": format_exact(a.tolerance),
                }
            if q.choice is not None:
                choices[f"{q.part}.{q.choice.name}"] = {
                    "correct": _LETTERS[q.choice.correct],
                    "position": q.choice.correct,
                }
        items.append({**_meta(p), "seed": p.seed, "answers": answers, "choices": choices})
    return dumps(
        {
            "format": "attnscore-practice-key/1",
            "command": sheet.command,
            "rounding": sheet.rounding,
            "problems": items,
        }
    )
