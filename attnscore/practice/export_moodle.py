"""Moodle XML export: one question per lettered part, the worked solution as general feedback.

A part with one numeric blank becomes a ``numerical`` question (nominal tolerance: half a unit in
the last requested place), a part with several blanks a ``cloze`` question with
``{1:NUMERICAL:=key:tolerance}`` fields, a choice part a ``multichoice`` question (single answer,
options in the printed order). Moodle's numeric fields take decimals only, so prompts ask for
decimals ("to 3 decimal places", never "exactly", which would invite ``3/19``). Text is HTML,
escaped with ``xml.sax.saxutils`` and then stored by ``xml.etree`` (which escapes it once more
as XML text).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from attnscore.practice.numbers import format_exact
from attnscore.practice.problem import Problem, Question
from attnscore.practice.richtext import to_html
from attnscore.practice.worksheet import Worksheet

__all__ = ["moodle_xml", "read_moodle_numeric"]


def _text(parent: ET.Element, tag: str, html: str, fmt: str | None = "html") -> ET.Element:
    el = ET.SubElement(parent, tag, {"format": fmt} if fmt else {})
    ET.SubElement(el, "text").text = html
    return el


def _paras(rich_paras: Sequence) -> str:
    return "".join(f"<p>{to_html(r)}</p>" for r in rich_paras)


def _question(quiz: ET.Element, p: Problem, q: Question, stem: str, feedback: str) -> None:
    prompt = stem + f"<p>({q.part}) {to_html(q.prompt, decimals_only=True)}</p>"
    if q.choice is not None:
        qtype = "multichoice"
    elif len(q.numeric) == 1:
        qtype = "numerical"
    else:
        qtype = "cloze"
        blanks = "".join(
            f"<p>{to_html(a.label)} = {{1:NUMERICAL:={a.key}:{format_exact(a.tolerance)}}}</p>" for a in q.numeric
        )
        prompt += blanks
    el = ET.SubElement(quiz, "question", {"type": qtype})
    _text(el, "name", f"{p.uid} ({q.part})", fmt=None)
    _text(el, "questiontext", prompt)
    _text(el, "generalfeedback", feedback)
    ET.SubElement(el, "defaultgrade").text = "1"
    ET.SubElement(el, "penalty").text = "0"
    ET.SubElement(el, "hidden").text = "0"
    ET.SubElement(el, "idnumber").text = f"{p.uid}-{q.part}"
    if qtype == "numerical":
        a = q.numeric[0]
        ans = ET.SubElement(el, "answer", {"fraction": "100", "format": "moodle_auto_format"})
        ET.SubElement(ans, "text").text = a.key
        ET.SubElement(ans, "tolerance").text = format_exact(a.tolerance)
        _text(ans, "feedback", "")
        ET.SubElement(el, "unitgradingtype").text = "0"
        ET.SubElement(el, "unitpenalty").text = "0"
        ET.SubElement(el, "showunits").text = "3"
        ET.SubElement(el, "unitsleft").text = "0"
    elif qtype == "multichoice":
        if q.choice is None:  # unreachable: qtype is multichoice only for choice parts
            return
        ET.SubElement(el, "single").text = "true"
        ET.SubElement(el, "shuffleanswers").text = "0"
        ET.SubElement(el, "answernumbering").text = "ABCD"
        for i, option in enumerate(q.choice.options):
            ans = ET.SubElement(el, "answer", {"fraction": "100" if i == q.choice.correct else "0", "format": "html"})
            ET.SubElement(ans, "text").text = to_html(option)
            _text(ans, "feedback", "")


def moodle_xml(problems: Sequence[Problem], sheet: Worksheet) -> bytes:
    """The problems as a Moodle XML question bank (UTF-8 bytes), in a category named after the worksheet."""
    quiz = ET.Element("quiz")
    cat = ET.SubElement(quiz, "question", {"type": "category"})
    _text(cat, "category", f"$course$/attnscore practice/{sheet.title}", fmt=None)
    for p in problems:
        stem = (f"<p>{to_html((('text', p.intro),))}</p>" if p.intro else "") + _paras(p.statement)
        feedback = _paras(p.solution)
        for q in p.questions:
            _question(quiz, p, q, stem, feedback)
    ET.indent(quiz)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(quiz, encoding="unicode").encode("utf-8") + b"\n"


def read_moodle_numeric(xml_bytes: bytes) -> list[tuple[str, str, str]]:
    """Every numeric key in a Moodle XML export as ``(question name, answer, tolerance)``.

    Reads ``numerical`` answers and the ``{1:NUMERICAL:=answer:tolerance}`` fields of cloze questions.

    Raises:
        xml.etree.ElementTree.ParseError: the XML is not well-formed.
    """
    import re

    root = ET.fromstring(xml_bytes)
    out = []
    for q in root.iter("question"):
        name = q.findtext("name/text") or ""
        if q.get("type") == "numerical":
            for ans in q.iter("answer"):
                out.append((name, ans.findtext("text") or "", ans.findtext("tolerance") or ""))
        elif q.get("type") == "cloze":
            html = q.findtext("questiontext/text") or ""
            out += [(name, a, t) for a, t in re.findall(r"\{1:NUMERICAL:=([^:}]+):([^}#]+)\}", html)]
    return out
