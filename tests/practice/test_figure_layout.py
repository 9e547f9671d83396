"""The Markdown worksheets' SVG figures, measured as a browser draws them: headless Chromium reads
every label's box (``getBoundingClientRect`` of the ``label-*`` groups); no two labels of a figure
may overlap, and none may leave the picture."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from fractions import Fraction as F
from pathlib import Path

import pytest

from attnscore.practice.figures import svg_figure
from attnscore.practice.generators import generate_family
from attnscore.practice.problem import Arrow
from tests.guards import HANG_GUARD_S

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed")]

_PROBE = """<!doctype html><html><body>{svgs}<pre id="boxes"></pre><script>
const out = [];
for (const figure of document.querySelectorAll("div.figure")) {{
  const svg = figure.querySelector("svg").getBoundingClientRect();
  const labels = [...figure.querySelectorAll("g[id^='label-']")].map(g => {{
    const r = g.getBoundingClientRect();
    return [g.id, r.left, r.top, r.right, r.bottom];
  }});
  out.push({{name: figure.id, svg: [svg.left, svg.top, svg.right, svg.bottom], labels}});
}}
document.getElementById("boxes").textContent = JSON.stringify(out);
</script></body></html>"""


def measure(figures: dict[str, bytes], folder: Path) -> dict[str, dict]:
    """Each figure's SVG box and its labels' boxes (CSS pixels), as Chromium lays them out."""
    svgs = "".join(
        f'<div class="figure" id="{name}">{re.sub(rb"<[?!][^>]*>", b"", svg).decode()}</div>'
        for name, svg in figures.items()
    )
    page = folder / "probe.html"
    page.write_text(_PROBE.format(svgs=svgs), encoding="utf-8")
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=10000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    found = re.search(r'<pre id="boxes">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stderr[-2000:]
    text = found.group(1).replace("&quot;", '"').replace("&amp;", "&")
    return {entry["name"]: entry for entry in json.loads(text)}


def disjoint(a, b) -> bool:
    """Whether two boxes (left, top, right, bottom) share no area."""
    return a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]


def arrows(q, *keys):
    """A query and keys k1, k2, ... as arrows."""
    out = [Arrow("q", F(q[0]), F(q[1]), "query")]
    return tuple(out + [Arrow(f"k{j + 1}", F(x), F(y), "key") for j, (x, y) in enumerate(keys)])


# Hard cases: a key equal to the query, keys along one line, tips a grid step apart, four keys close together.
CROWDED = {
    "key-equals-query": arrows((4, -1), (4, -1), (-2, 4), (4, 2)),
    "keys-on-one-line": arrows((1, 1), (2, 2), (3, 3), (-1, -1)),
    "tips-one-step-apart": arrows((2, 1), (2, 2), (1, 2), (2, 0)),
    "close-keys": arrows((-3, -3), (-2, 1), (-2, 0), (2, 1), (-1, 1)),
    "axis-keys": arrows((0, 3), (0, -3), (3, 0), (-3, 0)),
}


@pytest.fixture(scope="module")
def boxes(families, tmp_path_factory) -> dict[str, dict]:
    """Every figure of 20 variants of each family that draws one, and the crowded cases, measured."""
    figures = {name: svg_figure(a) for name, a in CROWDED.items()}
    for family in families.values():
        for p in generate_family(family, 20, 11)[0]:
            if p.figure:
                figures[p.uid] = svg_figure(p.figure)
    assert len(figures) > 15
    return measure(figures, tmp_path_factory.mktemp("figures"))


def test_every_arrow_has_one_label(boxes):
    """Each figure has one label group per arrow (the probe found them all)."""
    for name, a in CROWDED.items():
        assert sorted(label[0] for label in boxes[name]["labels"]) == sorted(f"label-{x.label}" for x in a)


def test_labels_pairwise_disjoint(boxes):
    """No two labels of a figure overlap, as Chromium draws them."""
    clashes = [
        (name, a[0], b[0])
        for name, entry in boxes.items()
        for a, b in itertools.combinations(entry["labels"], 2)
        if not disjoint(a[1:], b[1:])
    ]
    assert clashes == []


def test_labels_inside_the_picture(boxes):
    """Every label lies inside its SVG's box (nothing cut off by the tight bounding box)."""
    outside = [
        (name, label[0])
        for name, entry in boxes.items()
        for label in entry["labels"]
        if not (
            entry["svg"][0] <= label[1]
            and entry["svg"][1] <= label[2]
            and label[3] <= entry["svg"][2]
            and label[4] <= entry["svg"][3]
        )
    ]
    assert outside == []
