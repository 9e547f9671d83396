"""Canvas maths as images: every MathJax expression becomes an <img> with its LaTeX as alt text."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
import zipfile
from collections import Counter
from html import unescape

import pytest
from click.testing import CliRunner
from PIL import Image

from attnscore.cli import main
from attnscore.practice.export_qti import IMAGE_BASE, QTI_NS, qti_zip
from attnscore.practice.generators import featured_problems, generate_family
from attnscore.practice.math_images import MathImageError, math_png
from attnscore.practice.worksheet import Worksheet

from .conftest import SPECS

SHEET = Worksheet("Maths <images>", 6, None, "attnscore practice --seed 6 --format qti --math-images")
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def problems(families):
    """Featured examples and two variants of every family (matrices, aligned rows, fractions)."""
    out = []
    for fam in families.values():
        out += featured_problems(fam) + generate_family(fam, 2, 6)[0]
    return out


@pytest.fixture(scope="module")
def with_images(problems):
    """The Canvas package with maths as images."""
    return qti_zip(problems, SHEET, math_images=True)


def _package(data: bytes) -> tuple[dict[str, bytes], list[str]]:
    """The zip's files and every HTML fragment (mattext) of its assessment."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    xml = next(v for k, v in files.items() if k.endswith(".xml") and k != "imsmanifest.xml")
    root = ET.fromstring(xml)
    return files, [m.text or "" for m in root.iter(f"{{{QTI_NS}}}mattext")]


def _mathjax(html: str) -> list[str]:
    return [unescape(a or b) for a, b in re.findall(r"\\\((.*?)\\\)|\\\[(.*?)\\\]", html, flags=re.S)]


@pytest.mark.slow
def test_every_expression_becomes_an_image(problems, with_images):
    """Each \\(...\\) and \\[...\\] of the default export is an <img> whose alt is that LaTeX."""
    _, plain_html = _package(qti_zip(problems, SHEET))
    files, image_html = _package(with_images)
    expected = Counter(m for h in plain_html for m in _mathjax(h))
    assert sum(expected.values()) > 500
    found: Counter[str] = Counter()
    for html in image_html:
        assert "\\(" not in html and "\\[" not in html, html[:200]
        for img in ET.fromstring(f"<div>{html}</div>").iter("img"):
            alt, src = img.get("alt", ""), img.get("src", "")
            assert alt and img.get("title") == alt
            assert src.startswith(IMAGE_BASE) and src.removeprefix(IMAGE_BASE) in files, src
            assert float(img.get("width")) > 0 and float(img.get("height")) > 0
            found[alt] += 1
    assert found == expected


def test_images_are_valid_pngs_listed_in_the_manifest(with_images):
    """Every image is a PNG that Pillow reads, and the manifest lists it as webcontent."""
    files, _ = _package(with_images)
    images = sorted(n for n in files if n.startswith("images/"))
    assert images and all(n.endswith(".png") for n in images)
    manifest = ET.fromstring(files["imsmanifest.xml"])
    web = {r.get("href") for r in manifest.iter() if r.get("type") == "webcontent"}
    assert web == set(images)
    for name in images:
        data = files[name]
        assert data.startswith(PNG)
        with Image.open(io.BytesIO(data)) as im:
            im.verify()
        with Image.open(io.BytesIO(data)) as im:
            assert im.format == "PNG" and im.size[0] > 0 and im.size[1] > 0
            assert im.getextrema()[3][1] > 0, f"{name} is blank"


@pytest.mark.slow
def test_default_package_is_unchanged(problems, with_images):
    """Without the option the zip has no images and keeps MathJax text; both are byte-reproducible."""
    files, html = _package(qti_zip(problems, SHEET))
    assert not [n for n in files if n.startswith("images/")]
    assert any("\\(" in h for h in html)
    assert qti_zip(problems, SHEET, math_images=True) == with_images


@pytest.mark.parametrize(
    ("latex", "shape"),
    [
        pytest.param("q \\cdot k = -1", "wide", id="inline"),
        pytest.param("\\begin{aligned} a &= 1 \\\\ b &= 2 \\end{aligned}", "tall", id="aligned rows"),
        pytest.param("Q = \\begin{bmatrix} 1 & 2 \\\\ 3 & 4 \\\\ 5 & 6 \\end{bmatrix}", "tall", id="3x2 matrix"),
    ],
)
def test_math_png_layout(latex, shape):
    """Aligned rows and matrices are stacked; an inline expression is one line."""
    img = math_png(latex)
    one_line = math_png("x").height_px
    assert (img.height_px > 1.8 * one_line) == (shape == "tall")
    assert img.data.startswith(PNG) and 0 < img.depth_px < img.height_px


@pytest.mark.parametrize(
    ("latex", "reason"),
    [
        pytest.param("\\frac{1}{", "mathtext cannot draw", id="unbalanced braces"),
        pytest.param("\\notacommand x", "mathtext cannot draw", id="unknown command"),
        pytest.param("\\begin{cases} x \\end{cases}", "only the aligned and bmatrix", id="unsupported environment"),
    ],
)
def test_math_png_refuses_what_mathtext_cannot_draw(latex, reason):
    """Unreadable LaTeX raises MathImageError naming the expression."""
    with pytest.raises(MathImageError, match=reason) as info:
        math_png(latex)
    assert repr(latex) in str(info.value)


def test_cli_flag(tmp_path):
    """--math-images writes images into the Canvas zip, and is refused for other formats."""
    runner = CliRunner()
    ok = runner.invoke(
        main,
        ["practice", "--families-dir", str(SPECS), "one-score", "--count", "1"]
        + ["--format", "qti", "--math-images", "--out", str(tmp_path)],
    )
    assert ok.exit_code == 0, ok.output
    with zipfile.ZipFile(tmp_path / "quiz-qti.zip") as zf:
        assert any(n.startswith("images/") for n in zf.namelist())
    bad = runner.invoke(main, ["practice", "--families-dir", str(SPECS), "--math-images", "--out", str(tmp_path)])
    assert bad.exit_code == 2
    assert "Error: --math-images works only with --format qti, found --format md" in bad.output
