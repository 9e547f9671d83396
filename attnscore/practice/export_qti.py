"""Canvas QTI 1.2 export: a zip (``imsmanifest.xml`` + one assessment) that Canvas' quiz import reads.

Each numeric blank becomes a ``numerical_question`` with Canvas' "exact answer with margin" shape:
``varequal`` (the key) or ``vargte``/``varlte`` bounds (key ± tolerance, inclusive). Each choice
part becomes a ``multiple_choice_question`` with its options in the printed order. Text is HTML
escaped with ``xml.sax.saxutils`` and stored by ``xml.etree``.
"""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from decimal import Decimal

from attnscore.practice.numbers import format_decimal
from attnscore.practice.problem import NumericAnswer, Problem, Question
from attnscore.practice.richtext import to_html
from attnscore.practice.worksheet import Worksheet
from attnscore.practice.writer import zip_bytes

__all__ = ["qti_zip", "qti_assessment_xml", "read_qti_numeric", "QTI_NS"]

QTI_NS = "http://www.imsglobal.org/xsd/ims_qtiasiv1p2"
_CP_NS = "http://www.imsglobal.org/xsd/imsccv1p1/imscp_v1p1"


def _meta(item: ET.Element, fields: dict[str, str]) -> None:
    md = ET.SubElement(ET.SubElement(item, "itemmetadata"), "qtimetadata")
    for label, entry in fields.items():
        f = ET.SubElement(md, "qtimetadatafield")
        ET.SubElement(f, "fieldlabel").text = label
        ET.SubElement(f, "fieldentry").text = entry


def _mattext(parent: ET.Element, html: str) -> None:
    ET.SubElement(ET.SubElement(parent, "material"), "mattext", {"texttype": "text/html"}).text = html


def _feedback(item: ET.Element, html: str) -> None:
    fb = ET.SubElement(item, "itemfeedback", {"ident": "general_fb"})
    _mattext(ET.SubElement(fb, "flow_mat"), html)


def _bounds(a: NumericAnswer) -> tuple[str, str, str]:
    key = Decimal(a.key)
    tol = Decimal(a.tolerance.numerator) / Decimal(a.tolerance.denominator)
    return a.key, format_decimal(key - tol), format_decimal(key + tol)


def _numeric_item(section: ET.Element, ident: str, title: str, html: str, a: NumericAnswer, feedback: str) -> None:
    item = ET.SubElement(section, "item", {"ident": ident, "title": title})
    _meta(item, {"question_type": "numerical_question", "points_possible": "1.0"})
    pres = ET.SubElement(item, "presentation")
    _mattext(pres, html)
    resp = ET.SubElement(pres, "response_str", {"ident": "response1", "rcardinality": "Single"})
    ET.SubElement(ET.SubElement(resp, "render_fib", {"fibtype": "Decimal"}), "response_label", {"ident": "answer1"})
    proc = ET.SubElement(item, "resprocessing")
    ET.SubElement(
        ET.SubElement(proc, "outcomes"),
        "decvar",
        {"maxvalue": "100", "minvalue": "0", "varname": "SCORE", "vartype": "Decimal"},
    )
    cond = ET.SubElement(proc, "respcondition", {"continue": "No"})
    either = ET.SubElement(ET.SubElement(cond, "conditionvar"), "or")
    exact, lower, upper = _bounds(a)
    ET.SubElement(either, "varequal", {"respident": "response1"}).text = exact
    both = ET.SubElement(either, "and")
    ET.SubElement(both, "vargte", {"respident": "response1"}).text = lower
    ET.SubElement(both, "varlte", {"respident": "response1"}).text = upper
    ET.SubElement(cond, "setvar", {"action": "Set", "varname": "SCORE"}).text = "100"
    _feedback(item, feedback)


def _choice_item(section: ET.Element, ident: str, title: str, html: str, q: Question, feedback: str) -> None:
    if q.choice is None:  # only called for choice parts
        return
    item = ET.SubElement(section, "item", {"ident": ident, "title": title})
    _meta(item, {"question_type": "multiple_choice_question", "points_possible": "1.0"})
    pres = ET.SubElement(item, "presentation")
    _mattext(pres, html)
    lid = ET.SubElement(pres, "response_lid", {"ident": "response1", "rcardinality": "Single"})
    render = ET.SubElement(lid, "render_choice")
    for i, option in enumerate(q.choice.options):
        _mattext(ET.SubElement(render, "response_label", {"ident": str(1000 + i)}), to_html(option))
    proc = ET.SubElement(item, "resprocessing")
    ET.SubElement(
        ET.SubElement(proc, "outcomes"),
        "decvar",
        {"maxvalue": "100", "minvalue": "0", "varname": "SCORE", "vartype": "Decimal"},
    )
    cond = ET.SubElement(proc, "respcondition", {"continue": "No"})
    ET.SubElement(ET.SubElement(cond, "conditionvar"), "varequal", {"respident": "response1"}).text = str(
        1000 + q.choice.correct
    )
    ET.SubElement(cond, "setvar", {"action": "Set", "varname": "SCORE"}).text = "100"
    _feedback(item, feedback)


def _assessment_id(sheet: Worksheet, problems: Sequence[Problem]) -> str:
    digest = hashlib.sha256("\n".join([sheet.command] + [p.uid for p in problems]).encode()).hexdigest()
    return f"attnscore-{digest[:16]}"


def qti_assessment_xml(problems: Sequence[Problem], sheet: Worksheet, ident: str) -> bytes:
    """The QTI 1.2 ``questestinterop`` document (UTF-8 bytes) for one Canvas quiz."""
    root = ET.Element("questestinterop", {"xmlns": QTI_NS})
    assessment = ET.SubElement(root, "assessment", {"ident": ident, "title": sheet.title})
    section = ET.SubElement(assessment, "section", {"ident": "root_section"})
    for p in problems:
        stem = "".join(f"<p>{to_html(r)}</p>" for r in p.statement)
        feedback = "".join(f"<p>{to_html(r)}</p>" for r in p.solution)
        for q in p.questions:
            prompt = f"{stem}<p>({q.part}) {to_html(q.prompt)}</p>"
            if q.choice is not None:
                _choice_item(section, f"{p.uid}-{q.part}", f"{p.uid} ({q.part})", prompt, q, feedback)
            for a in q.numeric:
                html = prompt if len(q.numeric) == 1 else f"{prompt}<p>Enter {to_html(a.label)}.</p>"
                _numeric_item(section, f"{p.uid}-{q.part}-{a.name}", f"{p.uid} ({q.part}) {a.name}", html, a, feedback)
    ET.indent(root)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode").encode("utf-8") + b"\n"


def _manifest(ident: str, title: str) -> bytes:
    root = ET.Element("manifest", {"identifier": f"{ident}-manifest", "xmlns": _CP_NS})
    md = ET.SubElement(root, "metadata")
    ET.SubElement(md, "schema").text = "IMS Content"
    ET.SubElement(md, "schemaversion").text = "1.1.3"
    ET.SubElement(root, "organizations")
    res = ET.SubElement(
        ET.SubElement(root, "resources"),
        "resource",
        {"identifier": ident, "type": "imsqti_xmlv1p2", "title": title},
    )
    ET.SubElement(res, "file", {"href": f"{ident}/{ident}.xml"})
    ET.indent(root)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode").encode("utf-8") + b"\n"


def qti_zip(problems: Sequence[Problem], sheet: Worksheet) -> bytes:
    """The Canvas import package: ``imsmanifest.xml`` and ``<id>/<id>.xml`` in a reproducible zip."""
    ident = _assessment_id(sheet, problems)
    return zip_bytes(
        {
            "imsmanifest.xml": _manifest(ident, sheet.title),
            f"{ident}/{ident}.xml": qti_assessment_xml(problems, sheet, ident),
        }
    )


def read_qti_numeric(xml_bytes: bytes) -> list[tuple[str, str, str, str]]:
    """Every numerical item as ``(item ident, varequal, vargte, varlte)``.

    Raises:
        xml.etree.ElementTree.ParseError: the XML is not well-formed.
    """
    ns = {"q": QTI_NS}
    root = ET.fromstring(xml_bytes)
    out = []
    for item in root.iterfind(".//q:item", ns):
        kind = item.findtext(".//q:fieldentry", namespaces=ns)
        if kind != "numerical_question":
            continue
        out.append(
            (
                item.get("ident", ""),
                item.findtext(".//q:varequal", namespaces=ns) or "",
                item.findtext(".//q:vargte", namespaces=ns) or "",
                item.findtext(".//q:varlte", namespaces=ns) or "",
            )
        )
    return out
