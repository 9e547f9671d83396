"""PrairieLearn export: one question folder per problem (``info.json`` + ``question.html``).

Numeric blanks use ``pl-number-input`` with ``comparison="relabs"``, ``rtol="0"`` and ``atol`` equal
to half a unit in the last requested place (never a relative tolerance: an answer can be 0);
choice parts use ``pl-multiple-choice`` with ``fixed-order="true"`` so the letters match the key.
The worked solution goes in ``pl-answer-panel``. No ``server.py`` is needed: each variant is a
static question with its numbers fixed. Attribute values are escaped with ``xml.sax.saxutils``.
"""

from __future__ import annotations

import json
import re
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from xml.sax.saxutils import quoteattr

from attnscore.practice.numbers import format_exact
from attnscore.practice.problem import Problem
from attnscore.practice.richtext import to_html
from attnscore.practice.worksheet import Worksheet

__all__ = ["prairielearn_files", "question_html", "read_prairielearn_numeric"]

_NAMESPACE = uuid.UUID("6f1c7f0e-8d0b-5a3e-9a55-61747473636f")  # fixed namespace for uuid5 of question uids


def _answers_name(part: str, name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", f"{part}_{name}")


def question_html(p: Problem) -> str:
    """The ``question.html`` of one problem (well-formed XHTML-style markup)."""
    lines = ["<pl-question-panel>"]
    if p.intro:
        lines.append(f"<p>{to_html((('text', p.intro),))}</p>")
    lines += [f"<p>{to_html(r)}</p>" for r in p.statement]
    lines.append("</pl-question-panel>")
    for q in p.questions:
        lines.append(f"<p>({q.part}) {to_html(q.prompt)}</p>")
        for a in q.numeric:
            lines.append(
                f"<pl-number-input answers-name={quoteattr(_answers_name(q.part, a.name))} "
                f'correct-answer={quoteattr(a.key)} comparison="relabs" rtol="0" '
                f"atol={quoteattr(format_exact(a.tolerance))} label={quoteattr(to_html(a.label) + ' =')}>"
                "</pl-number-input>"
            )
        if q.choice is not None:
            lines.append(
                f"<pl-multiple-choice answers-name={quoteattr(_answers_name(q.part, q.choice.name))} "
                'fixed-order="true">'
            )
            for i, option in enumerate(q.choice.options):
                correct = "true" if i == q.choice.correct else "false"
                lines.append(f'  <pl-answer correct="{correct}">{to_html(option)}</pl-answer>')
            lines.append("</pl-multiple-choice>")
    lines.append("<pl-answer-panel>")
    lines += [f"<p>{to_html(r)}</p>" for r in p.solution]
    lines.append("</pl-answer-panel>")
    return "\n".join(lines) + "\n"


def _info(p: Problem, sheet: Worksheet) -> bytes:
    info = {
        "uuid": str(uuid.uuid5(_NAMESPACE, p.uid)),
        "title": f"{p.title} ({p.uid})",
        "topic": "Attention scores",
        "tags": ["attnscore", p.family_id, f"v{p.family_version}"] + ([f"seed-{p.seed}"] if p.seed is not None else []),
        "type": "v3",
    }
    return (json.dumps(info, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def prairielearn_files(problems: Sequence[Problem], sheet: Worksheet) -> dict[str, bytes]:
    """``questions/<uid>/info.json`` and ``questions/<uid>/question.html`` for every problem."""
    files: dict[str, bytes] = {}
    for p in problems:
        files[f"questions/{p.uid}/info.json"] = _info(p, sheet)
        files[f"questions/{p.uid}/question.html"] = question_html(p).encode("utf-8")
    return files


def read_prairielearn_numeric(html: str) -> list[tuple[str, str, str, str]]:
    """Every ``pl-number-input`` as ``(answers-name, correct-answer, rtol, atol)``.

    Raises:
        xml.etree.ElementTree.ParseError: the markup is not well-formed.
    """
    root = ET.fromstring(f"<root>{html}</root>")
    return [
        (el.get("answers-name", ""), el.get("correct-answer", ""), el.get("rtol", ""), el.get("atol", ""))
        for el in root.iter("pl-number-input")
    ]
