"""Canvas QTI 1.2 export: a zip (``imsmanifest.xml`` + one assessment) that Canvas' quiz import reads.

Each numeric blank becomes a ``numerical_question`` with Canvas' "exact answer with margin" shape:
``varequal`` (the key) or ``vargte``/``varlte`` bounds (key ± tolerance, inclusive). Each choice
part becomes a ``multiple_choice_question`` with its options in the printed order. Text is HTML
escaped with ``xml.sax.saxutils`` and stored by ``xml.etree``.

Maths is MathJax text (``\\(...\\)``) by default. With ``math_images=True`` every expression is
drawn by :func:`attnscore.practice.math_images.math_png` instead and stored once per distinct
expression as ``images/<sha256>.png`` in the zip, listed in the manifest as ``webcontent`` and
referenced from the HTML as ``%24IMS-CC-FILEBASE%24/images/<sha256>.png`` with the LaTeX as
``alt`` text (the layout text2qti uses, which Canvas' importer resolves to the course files).
"""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape as _xml_escape
from xml.sax.saxutils import quoteattr

from attnscore.practice.numbers import format_decimal
from attnscore.practice.problem import NumericAnswer, Problem, Question
from attnscore.practice.richtext import Rich, to_html
from attnscore.practice.worksheet import Worksheet
from attnscore.practice.writer import zip_bytes

if TYPE_CHECKING:  # matplotlib is imported only when images are drawn
    from attnscore.practice.math_images import MathImage

__all__ = ["qti_zip", "qti_assessment_xml", "read_qti_numeric", "QTI_NS", "MathImages", "IMAGE_BASE"]

#: How an image in the package is referenced from QTI HTML (Canvas rewrites it to the course file).
IMAGE_BASE = "%24IMS-CC-FILEBASE%24/"

Html = Callable[..., str]


class MathImages:
    """Renders rich text as HTML with every maths expression as an ``<img>``; collects the PNGs.

    Attributes:
        files: zip path (``images/<sha256>.png``) -> PNG bytes, one per distinct expression.
    """

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self._drawn: dict[str, MathImage] = {}

    def _img(self, latex: str, display: bool) -> str:
        from attnscore.practice.math_images import math_png

        path = f"images/{hashlib.sha256(latex.encode()).hexdigest()[:32]}.png"
        if latex not in self._drawn:  # each distinct expression is drawn once
            self._drawn[latex] = math_png(latex)
        image = self._drawn[latex]
        self.files[path] = image.data
        style = "display: block; margin: 0.5em 0" if display else f"vertical-align: -{image.depth_px}px"
        return (
            f"<img src={quoteattr(IMAGE_BASE + path)} alt={quoteattr(latex)} title={quoteattr(latex)} "
            f'width="{image.width_px}" height="{image.height_px}" style="{style}"/>'
        )

    def __call__(self, rich: Rich, decimals_only: bool = False) -> str:
        """Like :func:`~attnscore.practice.richtext.to_html`, with maths as images."""
        out = []
        for style, content in rich:
            if style == "math":
                out.append(self._img(content, False))
            elif style == "display":
                out.append(self._img(content, True))
            elif style == "text":
                out.append(_xml_escape(content))
            else:
                out.append(to_html(((style, content),), decimals_only=decimals_only))
        return "".join(out)


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


def _scored_condition(item: ET.Element) -> ET.Element:
    """The item's scoring (a SCORE from 0 to 100) and its one condition, whose ``conditionvar`` the
    caller fills and whose ``setvar`` it sets."""
    proc = ET.SubElement(item, "resprocessing")
    ET.SubElement(
        ET.SubElement(proc, "outcomes"),
        "decvar",
        {"maxvalue": "100", "minvalue": "0", "varname": "SCORE", "vartype": "Decimal"},
    )
    return ET.SubElement(proc, "respcondition", {"continue": "No"})


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
    cond = _scored_condition(item)
    either = ET.SubElement(ET.SubElement(cond, "conditionvar"), "or")
    exact, lower, upper = _bounds(a)
    ET.SubElement(either, "varequal", {"respident": "response1"}).text = exact
    both = ET.SubElement(either, "and")
    ET.SubElement(both, "vargte", {"respident": "response1"}).text = lower
    ET.SubElement(both, "varlte", {"respident": "response1"}).text = upper
    ET.SubElement(cond, "setvar", {"action": "Set", "varname": "SCORE"}).text = "100"
    _feedback(item, feedback)


def _choice_item(
    section: ET.Element, ident: str, title: str, html: str, q: Question, feedback: str, to_html: Html = to_html
) -> None:
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
    cond = _scored_condition(item)
    ET.SubElement(ET.SubElement(cond, "conditionvar"), "varequal", {"respident": "response1"}).text = str(
        1000 + q.choice.correct
    )
    ET.SubElement(cond, "setvar", {"action": "Set", "varname": "SCORE"}).text = "100"
    _feedback(item, feedback)


def _assessment_id(sheet: Worksheet, problems: Sequence[Problem]) -> str:
    digest = hashlib.sha256("\n".join([sheet.command] + [p.uid for p in problems]).encode()).hexdigest()
    return f"attnscore-{digest[:16]}"


def qti_assessment_xml(
    problems: Sequence[Problem], sheet: Worksheet, ident: str, images: MathImages | None = None
) -> bytes:
    """The QTI 1.2 ``questestinterop`` document (UTF-8 bytes) for one Canvas quiz.

    ``images``: when given, maths becomes ``<img>`` elements and ``images.files`` collects the PNGs.

    Raises:
        attnscore.practice.math_images.MathImageError: with ``images``, an expression mathtext cannot draw.
    """
    html: Html = images if images is not None else to_html
    root = ET.Element("questestinterop", {"xmlns": QTI_NS})
    assessment = ET.SubElement(root, "assessment", {"ident": ident, "title": sheet.title})
    section = ET.SubElement(assessment, "section", {"ident": "root_section"})
    for p in problems:
        stem = "".join(f"<p>{html(r)}</p>" for r in p.statement)
        feedback = "".join(f"<p>{html(r)}</p>" for r in p.solution)
        for q in p.questions:
            prompt = f"{stem}<p>({q.part}) {html(q.prompt, decimals_only=True)}</p>"
            if q.choice is not None:
                _choice_item(section, f"{p.uid}-{q.part}", f"{p.uid} ({q.part})", prompt, q, feedback, html)
            for a in q.numeric:
                text = prompt if len(q.numeric) == 1 else f"{prompt}<p>Enter {html(a.label)}.</p>"
                _numeric_item(section, f"{p.uid}-{q.part}-{a.name}", f"{p.uid} ({q.part}) {a.name}", text, a, feedback)
    ET.indent(root)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode").encode("utf-8") + b"\n"


def _manifest(ident: str, title: str, images: Sequence[str] = ()) -> bytes:
    root = ET.Element("manifest", {"identifier": f"{ident}-manifest", "xmlns": _CP_NS})
    md = ET.SubElement(root, "metadata")
    ET.SubElement(md, "schema").text = "IMS Content"
    ET.SubElement(md, "schemaversion").text = "1.1.3"
    ET.SubElement(root, "organizations")
    resources = ET.SubElement(root, "resources")
    res = ET.SubElement(resources, "resource", {"identifier": ident, "type": "imsqti_xmlv1p2", "title": title})
    ET.SubElement(res, "file", {"href": f"{ident}/{ident}.xml"})
    for n, path in enumerate(images, start=1):
        web = ET.SubElement(
            resources, "resource", {"identifier": f"{ident}-image-{n}", "type": "webcontent", "href": path}
        )
        ET.SubElement(web, "file", {"href": path})
    ET.indent(root)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode").encode("utf-8") + b"\n"


def qti_zip(problems: Sequence[Problem], sheet: Worksheet, math_images: bool = False) -> bytes:
    """The Canvas import package: ``imsmanifest.xml`` and ``<id>/<id>.xml`` in a reproducible zip.

    ``math_images``: draw maths as PNG images (``images/*.png`` in the zip, LaTeX as alt text)
    instead of MathJax ``\\(...\\)`` text.

    Raises:
        attnscore.practice.math_images.MathImageError: with ``math_images``, an expression mathtext cannot draw.
    """
    ident = _assessment_id(sheet, problems)
    images = MathImages() if math_images else None
    assessment = qti_assessment_xml(problems, sheet, ident, images)
    pngs = dict(sorted(images.files.items())) if images is not None else {}
    return zip_bytes(
        {
            "imsmanifest.xml": _manifest(ident, sheet.title, list(pngs)),
            f"{ident}/{ident}.xml": assessment,
            **pngs,
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
        qtype = item.findtext(".//q:fieldentry", namespaces=ns)
        if qtype != "numerical_question":
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
