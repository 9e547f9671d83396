"""Exports: well-formed files whose keys each platform's own tolerance rule accepts (and nothing beyond)."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
import zipfile

import pytest

from attnscore.practice.export_moodle import moodle_xml, read_moodle_numeric
from attnscore.practice.export_prairielearn import prairielearn_files, read_prairielearn_numeric
from attnscore.practice.export_qti import QTI_NS, qti_zip, read_qti_numeric
from attnscore.practice.generators import featured_problems, generate_family
from attnscore.practice.tolerance import canvas_accepts, moodle_accepts, prairielearn_accepts
from attnscore.practice.worksheet import Worksheet

SHEET = Worksheet("Q&A <practice>", 4, "erin", "attnscore practice --seed 4 --student erin")
EPS = 1e-9


@pytest.fixture(scope="module")
def problems(families):
    """Featured examples plus a few variants of every family."""
    out = []
    for fam in families.values():
        out += featured_problems(fam) + generate_family(fam, 3, 4, "erin")[0]
    return out


@pytest.mark.parametrize(
    ("rule", "args", "accepted"),
    [
        pytest.param(moodle_accepts, (1.0005, 1.0, 0.0005), True, id="Moodle: boundary is inclusive"),
        pytest.param(moodle_accepts, (1.0005 + EPS, 1.0, 0.0005), False, id="Moodle: just outside"),
        pytest.param(moodle_accepts, (0.0, 0.0, 0.0), True, id="Moodle: zero key, zero tolerance"),
        pytest.param(canvas_accepts, (0.9995, 1.0, 0.9995, 1.0005), True, id="Canvas: lower bound inclusive"),
        pytest.param(canvas_accepts, (1.0005 + EPS, 1.0, 0.9995, 1.0005), False, id="Canvas: above the margin"),
        pytest.param(canvas_accepts, (0.0, 0.00005, 0.00004, 0.00006), True, id="Canvas stores < 1e-4 as 0"),
        pytest.param(prairielearn_accepts, (-0.9995, -1.0, 0.0, 0.0005), True, id="PL: atol boundary inclusive"),
        pytest.param(prairielearn_accepts, (-0.9995 + EPS, -1.0, 0.0, 0.0005), False, id="PL: just outside"),
        pytest.param(prairielearn_accepts, (1.005, 1.0, 0.01, 0.0), True, id="PL: rtol scales with the key"),
    ],
)
def test_tolerance_rules(rule, args, accepted):
    """The platform rules are modelled with their own boundary conventions."""
    assert rule(*args) is accepted


def _probe(accepts, key: float, tol: float) -> None:
    assert accepts(key), key
    assert not accepts(key + tol + EPS), (key, tol)
    assert not accepts(key - tol - EPS), (key, tol)


def test_moodle_keys(problems):
    """Moodle XML parses; each numerical key is accepted and key ± (tolerance + ε) rejected."""
    data = moodle_xml(problems, SHEET)
    root = ET.fromstring(data)
    assert root.find("question/category/text").text == "$course$/attnscore practice/Q&A <practice>"
    keys = read_moodle_numeric(data)
    assert len(keys) == sum(len(q.numeric) for p in problems for q in p.questions)
    for _, answer, tol in keys:
        a, t = float(answer), float(tol)
        _probe(lambda x, a=a, t=t: moodle_accepts(x, a, t), a, t)
    choice = root.find("question[@type='multichoice']")
    assert [a.get("fraction") for a in choice.findall("answer")].count("100") == 1


def test_moodle_worked_example(families):
    """The practice example becomes a numerical question keyed -1 ± 0.0005 and a multichoice keyed C."""
    p = featured_problems(families["one-score"])[0]
    data = moodle_xml([p], SHEET)
    assert read_moodle_numeric(data) == [("one-score-v2-fixed-01 (a)", "-1", "0.0005")]
    mc = ET.fromstring(data).find("question[@type='multichoice']")
    assert [a.get("fraction") for a in mc.findall("answer")] == ["0", "0", "100"]


def test_qti_package(problems):
    """The Canvas zip has a manifest pointing at a parseable QTI 1.2 file with margin-rule keys."""
    with zipfile.ZipFile(io.BytesIO(qti_zip(problems, SHEET))) as zf:
        names = zf.namelist()
        manifest = ET.fromstring(zf.read("imsmanifest.xml"))
        href = manifest.find(".//{*}file").get("href")
        assert href in names and manifest.find(".//{*}resource").get("type") == "imsqti_xmlv1p2"
        qti = zf.read(href)
    root = ET.fromstring(qti)
    assert root.tag == f"{{{QTI_NS}}}questestinterop"
    items = read_qti_numeric(qti)
    assert items
    for ident, exact, lo, hi in items:
        e, lo_, hi_ = float(exact), float(lo), float(hi)
        assert abs((hi_ - e) - 0.0005) < 1e-12 and abs((e - lo_) - 0.0005) < 1e-12, ident
        _probe(lambda x, e=e, lo_=lo_, hi_=hi_: canvas_accepts(x, e, lo_, hi_), e, hi_ - e)
        assert not any(0 < abs(v) < 1e-4 for v in (e, lo_, hi_)), "Canvas would store it as 0"


def test_prairielearn_questions(problems):
    """Every question folder has info.json (v3, uuid) and question.html whose keys pass relabs with rtol=0."""
    files = prairielearn_files(problems, SHEET)
    uids = {p.uid for p in problems}
    assert {path.split("/")[1] for path in files} == uids
    uuids = set()
    for path, data in files.items():
        if path.endswith("info.json"):
            info = json.loads(data)
            assert info["type"] == "v3" and info["topic"] == "Attention scores"
            uuids.add(info["uuid"])
            continue
        for name, correct, rtol, atol in read_prairielearn_numeric(data.decode()):
            assert rtol == "0", name  # never relative tolerance: an answer can be 0
            c, a = float(correct), float(atol)
            _probe(lambda x, c=c, a=a: prairielearn_accepts(x, c, 0.0, a), c, a)
    assert len(uuids) == len(uids)


def test_prairielearn_choice_markup(families):
    """Choice parts use pl-multiple-choice with fixed order and one correct answer."""
    p = featured_problems(families["one-score"])[0]
    html = prairielearn_files([p], SHEET)[f"questions/{p.uid}/question.html"].decode()
    root = ET.fromstring(f"<root>{html}</root>")
    mc = root.find("pl-multiple-choice")
    assert mc.get("fixed-order") == "true"
    assert [a.get("correct") for a in mc.findall("pl-answer")] == ["false", "false", "true"]
    assert root.find("pl-number-input").get("correct-answer") == "-1"
