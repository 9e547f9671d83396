"""PrairieLearn export: randomised questions (one per family), static fixed problems, an assessment.

A **family** becomes one randomised question folder ``questions/<family id>/``:

- ``question.html``: PrairieLearn elements with mustache placeholders (``{{params.parts}}``...):
  ``pl-number-input`` per numeric blank (``comparison="relabs"``, ``rtol="0"``, ``atol`` = half a
  unit in the last requested place: never relative, an answer can be 0) and ``pl-multiple-choice``
  (``fixed-order="true"``, the order the generator placed the options in) per choice blank, as the
  family's kind needs (:data:`KIND_ELEMENTS`); the worked solution in ``pl-answer-panel``;
- ``server.py``: ``generate(data)`` draws the variant from ``data["variant_seed"]`` through
  attnscore's own generator and fills ``data["params"]`` and ``data["correct_answers"]`` (see
  :mod:`attnscore.practice.prairielearn_server`); grading is the elements' own, with the key's
  tolerance, so no ``grade()`` is needed;
- ``attnscore_practice_<hash>/``: the generator modules, vendored (standard library only, see
  :mod:`attnscore.practice.vendor`), because PrairieLearn's Python has no attnscore;
- ``info.json`` (type ``v3``, a uuid derived from the family id, so exporting again updates the
  same question).

A **fixed** problem (``--featured`` examples, ``--q``/``--k``) has no seed to draw from and stays a
static folder ``questions/<uid>/`` (``info.json`` with ``singleVariant: true`` + ``question.html``
with the numbers written in).
``courseInstances/attnscore/assessments/practice/infoAssessment.json`` pools them (a Homework: every
attempt at a question draws a fresh variant), with ``infoCourse.json`` and
``infoCourseInstance.json`` so the folder is a course PrairieLearn can load as it is. Attribute
values are escaped with ``xml.sax.saxutils``; mustache escapes the values it fills in.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any
from xml.sax.saxutils import quoteattr

from attnscore.practice.family import Family
from attnscore.practice.kinds import REGISTRY
from attnscore.practice.numbers import format_exact
from attnscore.practice.prairielearn_server import answers_name
from attnscore.practice.problem import Problem
from attnscore.practice.richtext import to_html
from attnscore.practice.vendor import VendorError, vendor_package
from attnscore.practice.worksheet import Worksheet

__all__ = [
    "KIND_ELEMENTS",
    "COURSE_INSTANCE",
    "ASSESSMENT",
    "PrairieLearnExportError",
    "prairielearn_files",
    "prairielearn_course",
    "question_html",
    "question_template",
    "server_py",
    "read_prairielearn_numeric",
]

_NAMESPACE = uuid.UUID("6f1c7f0e-8d0b-5a3e-9a55-61747473636f")  # fixed namespace for uuid5 of question uids

# The answer elements each family kind's questions use (``Kind.pl_elements``; a kind missing here cannot be exported).
KIND_ELEMENTS: Mapping[str, tuple[str, ...]] = MappingProxyType({k.name: k.pl_elements for k in REGISTRY.values()})
COURSE_INSTANCE = "attnscore"
ASSESSMENT = "practice"
_TOPIC = "Attention scores"


class PrairieLearnExportError(ValueError):
    """A family or problem cannot be expressed as a PrairieLearn question.

    Attributes:
        what: the family id or problem uid at fault.
    """

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"PrairieLearn export: {what}: {why}")
        self.what = what


def _answers_name(part: str, name: str) -> str:
    return answers_name(part, name)


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
        "singleVariant": True,  # its numbers are written in: one variant, never a "new variant" button
    }
    return (json.dumps(info, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def prairielearn_files(problems: Sequence[Problem], sheet: Worksheet) -> dict[str, bytes]:
    """``questions/<uid>/info.json`` and ``questions/<uid>/question.html`` for every problem."""
    files: dict[str, bytes] = {}
    for p in problems:
        files[f"questions/{p.uid}/info.json"] = _info(p, sheet)
        files[f"questions/{p.uid}/question.html"] = question_html(p).encode("utf-8")
    return files


def question_template(kind: str) -> str:
    """The mustache ``question.html`` of a randomised question of family kind ``kind``.

    ``server.py`` fills ``params`` (see :func:`attnscore.practice.prairielearn_server.problem_params`);
    rendered, the markup has the same elements and attributes as :func:`question_html` of the same
    problem, except that numeric keys come from ``data["correct_answers"]``.

    Raises:
        PrairieLearnExportError: no PrairieLearn elements are known for ``kind``.
    """
    elements = KIND_ELEMENTS.get(kind)
    if elements is None:
        raise PrairieLearnExportError(
            f"kind {kind!r}",
            f"no PrairieLearn elements are known for this kind (known: {', '.join(KIND_ELEMENTS)}); "
            "give its kind module in attnscore/practice/kinds/ pl_elements and register it",
        )
    lines = [
        "<pl-question-panel>",
        "{{#params.intro}}<p>{{{params.intro}}}</p>{{/params.intro}}",
        "{{#params.statement}}",
        "<p>{{{html}}}</p>",
        "{{/params.statement}}",
        "</pl-question-panel>",
        "{{#params.parts}}",
        "<p>({{part}}) {{{prompt}}}</p>",
    ]
    if "pl-number-input" in elements:
        lines += [
            "{{#numeric}}",
            '<pl-number-input answers-name="{{name}}" comparison="relabs" rtol="0" atol="{{atol}}" '
            'label="{{label}}"></pl-number-input>',
            "{{/numeric}}",
        ]
    if "pl-multiple-choice" in elements:
        lines += [
            "{{#choice}}",
            '<pl-multiple-choice answers-name="{{name}}" fixed-order="true">',
            "{{#options}}",
            '  <pl-answer correct="{{correct}}">{{{html}}}</pl-answer>',
            "{{/options}}",
            "</pl-multiple-choice>",
            "{{/choice}}",
        ]
    lines += [
        "{{/params.parts}}",
        "<pl-answer-panel>",
        "{{#params.solution}}",
        "<p>{{{html}}}</p>",
        "{{/params.solution}}",
        "<p>Variant seed {{params.attnscore.seed}}; the same variant and its worked solution: "
        "<code>{{params.command}}</code></p>",
        "</pl-answer-panel>",
    ]
    return "\n".join(lines) + "\n"


def _family_literal(family: Family) -> str:
    """``Family(...)`` as Python source, one field a line (Fractions as ``Fraction(p, q)``)."""
    fields = [f"    {f.name}={getattr(family, f.name)!r}," for f in dataclasses.fields(family)]
    return "Family(\n" + "\n".join(fields) + "\n)"


def server_py(family: Family, package: str, version: str = "") -> str:
    """The ``server.py`` of ``family``'s randomised question (imports the vendored ``package``).

    Raises:
        PrairieLearnExportError: the family's kind has no PrairieLearn elements (see :data:`KIND_ELEMENTS`).
    """
    question_template(family.kind)  # the same check, so that no server.py is written for it
    embedded = dataclasses.replace(family, path=Path(family.path).name, featured=())
    title = family.title.replace("\\", "/").replace('"', "'")
    return f'''"""PrairieLearn question: {title} (attnscore family {family.id} v{family.version}).

Written by 'attnscore practice --format prairielearn' (attnscore {version or "unknown version"}); do not edit,
export again instead. generate(data) draws the variant from PrairieLearn's data["variant_seed"] with
attnscore's own generator (vendored in {package}/), so

    attnscore practice {family.id} --seed SEED --count 1

prints the same variant and its worked solution. The elements in question.html grade the answers
with the answer key's tolerance.
"""

from fractions import Fraction

from {package}.family import Family
from {package}.prairielearn_server import fill_data

FAMILY = {_family_literal(embedded)}


def generate(data):
    """Fill data["params"] and data["correct_answers"] for the variant of data["variant_seed"]."""
    fill_data(FAMILY, data)
'''


def _dump(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _uuid(name: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, name))


def prairielearn_course(
    families: Sequence[Family], fixed: Sequence[Problem], sheet: Worksheet, version: str = ""
) -> dict[str, bytes]:
    """A PrairieLearn course: one randomised question per family, static fixed problems, an assessment.

    Args:
        families: the families to randomise (each becomes ``questions/<family id>/``).
        fixed: problems with fixed numbers (featured examples, ``--q``/``--k``): ``questions/<uid>/``.
        sheet: the worksheet header (the assessment's title).
        version: the attnscore version written into ``server.py`` and the vendored files.

    Returns:
        ``relative path -> bytes``: the question folders, ``infoCourse.json``,
        ``courseInstances/attnscore/infoCourseInstance.json`` and
        ``courseInstances/attnscore/assessments/practice/infoAssessment.json``.

    Raises:
        PrairieLearnExportError: a family's kind has no PrairieLearn elements, two questions would
            share a folder, or there is nothing to export.
    """
    if not families and not fixed:
        raise PrairieLearnExportError("(nothing)", "no family and no fixed problem to export")
    files: dict[str, bytes] = {}
    try:
        vendored = vendor_package(["prairielearn_server"], version) if families else {}
    except VendorError as exc:
        raise PrairieLearnExportError("generator modules", str(exc)) from None
    package = next(iter(vendored), "/").split("/")[0]
    qids: list[str] = []
    zones: dict[str, list[dict[str, Any]]] = {}
    for fam in families:
        template = question_template(fam.kind)
        if fam.id in qids:
            raise PrairieLearnExportError(fam.id, "two families share this id")
        qids.append(fam.id)
        base = f"questions/{fam.id}"
        info = {
            "uuid": _uuid(f"family:{fam.id}"),
            "title": fam.title,
            "topic": _TOPIC,
            "tags": ["attnscore", fam.id, f"v{fam.version}", fam.kind],
            "type": "v3",
        }
        files[f"{base}/info.json"] = _dump(info)
        files[f"{base}/question.html"] = template.encode("utf-8")
        files[f"{base}/server.py"] = server_py(fam, package, version).encode("utf-8")
        files.update({f"{base}/{path}": data for path, data in vendored.items()})
        zones.setdefault(REGISTRY[fam.kind].zone_title, []).append({"id": fam.id, "autoPoints": 1, "maxAutoPoints": 3})
    for p in fixed:
        if p.uid in qids:
            raise PrairieLearnExportError(p.uid, "a family and a fixed problem would share this question folder")
        qids.append(p.uid)
        files[f"questions/{p.uid}/info.json"] = _info(p, sheet)
        files[f"questions/{p.uid}/question.html"] = question_html(p).encode("utf-8")
        zones.setdefault("Worked examples", []).append({"id": p.uid, "autoPoints": 1})
    tags = sorted({t for path, data in files.items() if path.endswith("info.json") for t in json.loads(data)["tags"]})
    files["infoCourse.json"] = _dump(
        {
            "uuid": _uuid("course:attnscore"),
            "name": "attnscore",
            "title": "Attention scores practice (attnscore)",
            "topics": [{"name": _TOPIC, "color": "blue1", "description": "Dot products, scaling and softmax."}],
            "tags": [{"name": t, "color": "gray1"} for t in tags],
            "assessmentSets": [{"abbreviation": "HW", "name": "Homework", "heading": "Homework", "color": "green1"}],
        }
    )
    files[f"courseInstances/{COURSE_INSTANCE}/infoCourseInstance.json"] = _dump(
        {"uuid": _uuid(f"course-instance:{COURSE_INSTANCE}"), "longName": "attnscore practice"}
    )
    files[f"courseInstances/{COURSE_INSTANCE}/assessments/{ASSESSMENT}/infoAssessment.json"] = _dump(
        {
            "uuid": _uuid("assessment:" + ",".join(qids)),
            "type": "Homework",
            "title": sheet.title,
            "set": "Homework",
            "number": "1",
            "text": "Every attempt at a question draws a fresh variant: practise until each one is right three times.",
            "zones": [{"title": title, "questions": questions} for title, questions in zones.items()],
        }
    )
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
