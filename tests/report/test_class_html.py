"""Tests for the class report page (attnscore.report.class_html), parsed and rendered in Chromium."""

from __future__ import annotations

import base64
import io
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image
import pytest

from attnscore.report.class_html import class_report_html, ranked_mistakes, timing_outliers
from tests.classdata import class_rows
from tests.guards import HANG_GUARD_S

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (.ci/run installs it when it can)")


class _Page(HTMLParser):
    """Collects tables (by id, rows of cell texts), images, scripts and links of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.images: list[dict[str, str]] = []
        self.ids: set[str] = set()
        self.tags: list[str] = []
        self.urls: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        self.urls += [v for k, v in attrs.items() if k in ("src", "href", "srcset", "action") and v]
        if tag == "table":
            self._table = attrs.get("id", "")
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self.images.append(attrs)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    page.close()
    return page


def test_report_counts_mistakes_pass_rates_and_outliers():
    """The tables hold the class's real counts: mistakes ranked by students, pass rates, the slow one."""
    page = _parse(class_report_html(class_rows(), "dot_product_scores v1"))
    mistakes = page.tables["mistake-table"]
    assert mistakes[0] == ["mistake", "students", "cases", "example student", "example case", "feedback"]
    assert [row[:4] for row in mistakes[1:]] == [
        ["softmax_applied", "3", "4", "bob.py"],
        ["cosine_similarity", "1", "1", "dave.py"],
    ]
    assert mistakes[1][5] == "you made softmax_applied"
    rates = {row[0]: row[2:] for row in page.tables["case-table"][1:]}
    assert rates == {
        "example:aligned": ["3", "6", "50%"],
        "example:anti_aligned": ["4", "6", "67%"],
        "property:equals_qk_entries": ["4", "6", "67%"],
    }
    assert page.tables["timing-table"][1:] == [["slow.py", "30.00", "30.0"]]
    students = {row[0]: row[1:3] for row in page.tables["student-table"][1:]}
    assert students["bob.py"] == ["0.3333", "5.3333"] and len(students) == 6
    assert {"summary", "histogram", "pass-rates", "heatmap"} <= page.ids


def test_report_is_self_contained_and_escapes_student_text():
    """No script, no external URL; every plot is an inline PNG that decodes; names are escaped."""
    text = class_report_html(class_rows(), "<title> & co")
    page = _parse(text)
    assert "script" not in page.tags and "link" not in page.tags
    assert page.urls and all(u.startswith("data:image/png;base64,") for u in page.urls)
    assert len(page.images) == 3
    for image in page.images:
        picture = matplotlib.image.imread(io.BytesIO(base64.b64decode(image["src"].split(",", 1)[1])), format="png")
        assert picture.shape[0] > 100 and picture.shape[1] > 100 and picture.std() > 0.01
    assert "<script>" not in text and "=evil&lt;script&gt;.py" in text
    assert "&lt;title&gt; &amp; co: class report" in text


def test_empty_class_gives_a_page_that_says_so():
    """No rows: a valid page with a note, no plots."""
    page = _parse(class_report_html([], "spec"))
    assert "empty" in page.ids and not page.images


def test_helpers_rank_and_find_outliers():
    """ranked_mistakes orders by students then id; timing outliers need more than twice the median."""
    rows = class_rows()
    assert [m.id for m in ranked_mistakes(rows)] == ["softmax_applied", "cosine_similarity"]
    assert timing_outliers(rows) == [("slow.py", 30.0)]
    assert timing_outliers(rows[:5]) == []  # 1.1 s among 1 s is no outlier
    assert timing_outliers(rows[:2]) == []  # too few to say


def _render(page: Path, shot: Path, profile: Path) -> tuple[list[str], object]:
    """Screenshot ``page`` in headless Chromium; returns the console lines it logged and the picture."""
    assert CHROMIUM is not None
    proc = subprocess.run(
        [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", "--enable-logging=stderr", "--log-level=0",
            "--window-size=1200,2400", f"--screenshot={shot}", page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )  # fmt: skip
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return console, matplotlib.image.imread(shot) if shot.exists() else None


@pytest.mark.slow
@needs_chromium
def test_report_renders_in_headless_chromium_without_console_errors(tmp_path):
    """Chromium draws the page (a non-blank screenshot) and logs nothing to the console."""
    page = tmp_path / "report.html"
    page.write_text(class_report_html(class_rows(), "dot_product_scores v1"), encoding="utf-8")
    console, picture = _render(page, tmp_path / "shot.png", tmp_path / "profile")
    assert console == []
    assert picture is not None and picture.shape[:2] == (2400, 1200)
    rgb = picture[..., :3]
    assert (rgb < 0.5).any(axis=-1).mean() > 0.01  # text and plots, not a blank page
    assert ((rgb[..., 1] > 0.5) & (rgb[..., 0] < 0.5)).any()  # the green of passing cells and bars


@pytest.mark.slow
@needs_chromium
def test_chromium_check_catches_console_errors(tmp_path):
    """The console check above is real: a page that throws is caught."""
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><p>x</p><script>console.error('boom'); missing();</script>")
    console, _ = _render(page, tmp_path / "shot.png", tmp_path / "profile")
    assert any("boom" in line for line in console)
    assert any("missing is not defined" in line for line in console)


def test_heatmap_cells_are_the_fraction_of_points_in_its_colours(monkeypatch):
    """Each cell of the heatmap is coloured here, before matplotlib scales the image (RGBA bytes):
    a student's passed case is the colour map's top colour, a failed one its bottom colour."""
    from matplotlib import colormaps

    from attnscore.report import class_html

    drawn = []
    monkeypatch.setattr(class_html, "_png", lambda figure: drawn.append(figure) or "")
    rows = class_rows()
    case_ids = [c.id for c in rows[0][1].cases]
    class_html._heatmap(rows, case_ids)
    cells = drawn[0].axes[0].images[0].get_array()
    top, bottom = (tuple(colormaps["RdYlGn"](v, bytes=True)) for v in (1.0, 0.0))
    assert cells.shape == (6, len(case_ids), 4) and str(cells.dtype) == "uint8"
    alice, bob = cells[0], cells[1]  # alice passed everything; bob failed both examples
    assert {tuple(c) for c in alice} == {top}
    assert [tuple(bob[case_ids.index(i)]) for i in ("example:aligned", "example:anti_aligned")] == [bottom, bottom]
    assert len(drawn[0].axes) == 2  # the image and its colour bar
