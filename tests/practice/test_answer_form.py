"""Numeric answer wording follows what each platform's answer field accepts."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
import zipfile

import pytest

from attnscore.practice.command import build_outputs
from attnscore.practice.export_qti import QTI_NS
from attnscore.practice.generators import generate_family
from attnscore.practice.richtext import answer_form, plain, text, to_html, to_latex, to_markdown
from attnscore.practice.worksheet import Worksheet

SHEET = Worksheet("Softmax", 2, None, "attnscore practice softmax-exact --count 4 --seed 2")
EXACT = "exactly or to 3 decimal places"
DECIMAL = "to 3 decimal places"


@pytest.fixture(scope="module")
def softmax(families):
    """Four softmax-exact variants; at least one has a weight like 3/19 that does not terminate."""
    problems = generate_family(families["softmax-exact"], 4, 2)[0]
    assert any(a.rounded for p in problems for q in p.questions for a in q.numeric)
    return problems


def _moodle_texts(data: bytes) -> list[str]:
    return [q.findtext("questiontext/text") or "" for q in ET.fromstring(data).iter("question")]


def _qti_texts(data: bytes) -> list[str]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        xml = next(zf.read(n) for n in zf.namelist() if n.endswith(".xml") and n != "imsmanifest.xml")
    ns = {"q": QTI_NS}
    return [
        item.findtext("q:presentation/q:material/q:mattext", namespaces=ns) or ""
        for item in ET.fromstring(xml).iterfind(".//q:item", ns)
    ]


@pytest.mark.parametrize(
    ("fmt", "texts", "wording"),
    [
        pytest.param("moodle-xml", lambda f: _moodle_texts(f["questions.xml"]), DECIMAL, id="Moodle numerical/cloze"),
        pytest.param("qti", lambda f: _qti_texts(f["quiz-qti.zip"]), DECIMAL, id="Canvas numerical"),
        pytest.param("md", lambda f: [f["worksheet.md"].decode()], EXACT, id="Markdown"),
        pytest.param("latex", lambda f: [f["worksheet.tex"].decode()], EXACT, id="LaTeX"),
        pytest.param(
            "json",
            lambda f: [q["prompt"] for p in json.loads(f["problems.json"])["problems"] for q in p["questions"]],
            EXACT,
            id="JSON",
        ),
    ],
)
def test_wording_per_platform(softmax, fmt, texts, wording):
    """Decimal-only fields never invite a fraction; worksheets and JSON may ask for the exact value."""
    found = " ".join(texts(build_outputs(softmax, SHEET, fmt, figures=False)))
    weight_prompts = re.findall(r"softmax[^.]*?, ((?:exactly or )?to 3 decimal places)\.", found)
    assert weight_prompts and set(weight_prompts) == {wording}, weight_prompts
    if wording == DECIMAL:
        assert "exactly or" not in found


def test_latex_key_keeps_the_exact_fraction(softmax):
    """The LaTeX answer key shows each rounded weight's exact fraction next to its decimal key."""
    key = build_outputs(softmax, SHEET, "latex")["answer-key.tex"].decode()
    fractions = re.findall(r"\(exactly \$(\d+/\d+)\$\)", key)
    rounded = [a for p in softmax for q in p.questions for a in q.numeric if a.rounded]
    assert (
        len(fractions) == len(rounded)
        and fractions[0] == f"{rounded[0].exact.numerator}/{rounded[0].exact.denominator}"
    )


@pytest.mark.parametrize(
    ("places", "exact", "decimal"),
    [
        (3, "exactly or to 3 decimal places", "to 3 decimal places"),
        (1, "exactly or to 1 decimal place", "to 1 decimal place"),
        (0, "exactly or to a whole number", "to a whole number"),
    ],
)
def test_answer_form_renderings(places, exact, decimal):
    """Every writer words the form; only decimal-only HTML drops 'exactly'."""
    rich = text("Give w ") + answer_form(places)
    assert to_markdown(rich) == to_latex(rich) == plain(rich) == f"Give w {exact}"
    assert to_html(rich) == f"Give w {exact}"
    assert to_html(rich, decimals_only=True) == f"Give w {decimal}"


def test_answer_form_rejects_negative_places():
    """A negative number of places is refused with the value in the message."""
    with pytest.raises(ValueError, match="places must be >= 0, found -1"):
        answer_form(-1)
