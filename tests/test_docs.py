"""README.md and docs/*.md: links and anchors resolve, named files exist, the README's spec loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# Paths of this repository named in prose or code spans: attnscore/check/judge.py, tests/test_x.py ...
NAMED_PATH = re.compile(r"(?<![\w/.])((?:attnscore|tests|benchmarks|specs|examples|docs|graders)/[\w./-]*\w)")


def _prose(text: str) -> str:
    """The page without its fenced blocks (console output and samples may name made-up files)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {
        slug(line.lstrip("#")) for line in _prose(page.read_text(encoding="utf-8")).splitlines() if line.startswith("#")
    }


@pytest.mark.parametrize(
    "heading, anchor",
    [
        pytest.param("`attnscore verify`: proving each spec's worth", "attnscore-verify-proving-each-specs-worth"),
        pytest.param("Low precision and `--ratio`", "low-precision-and---ratio", id="double hyphen kept"),
        pytest.param("Batches: files and folders", "batches-files-and-folders", id="colon dropped"),
    ],
)
def test_slug_is_githubs_anchor(heading, anchor):
    """Headings become the anchors GitHub gives them."""
    assert slug(heading) == anchor


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_and_anchors_resolve(page):
    """Every relative link names a file that exists, and every #anchor a heading of that file."""
    broken = []
    for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading with the anchor #{anchor}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_named_files_exist(page):
    """Module and file paths named in the prose exist (the package layout is by stage)."""
    missing = [
        name
        for name in NAMED_PATH.findall(_prose(page.read_text(encoding="utf-8")))
        if "*" not in name and "<" not in name and not (ROOT / name).exists()
    ]
    assert not missing, f"{page.relative_to(ROOT)} names files that do not exist: {sorted(set(missing))}"


def test_readme_spec_sample_is_a_valid_spec(tmp_path):
    """The spec shown in the README loads, and its worked example is the toolkit's worked example."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    sample = re.search(r"```yaml\n(.*?)```", readme, flags=re.S)
    assert sample is not None, "README.md has no yaml sample"
    path = tmp_path / "sample.yaml"
    path.write_text(sample.group(1), encoding="utf-8")
    spec = load_spec(path)
    assert spec.function == "scores" and spec.worked_examples[0].id == "aligned_perpendicular_partial"
    assert yaml.safe_load(sample.group(1))["worked_examples"][0]["expected"] == [1, 0, 0.7]


def test_readme_is_a_front_door():
    """The README stays short (the reference lives in docs/) and links every docs page."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    linked = {Path(target.partition("#")[0]).name for target in LINK.findall(readme)}
    unlinked = sorted(p.name for p in PAGES[1:] if p.name not in linked)
    assert not unlinked, f"README.md does not link {unlinked}"
