"""README.md and docs/*.md output excerpts are real output: each marked block is what its command prints now."""

from __future__ import annotations

import pytest

from tests.excerpts import EXCERPTS, PAGES, ROOT, Block, all_blocks, blocks, make, normalised

BLOCKS = all_blocks()


def test_every_excerpt_is_shown_and_every_marker_names_one():
    """No marker names an unknown excerpt, and each excerpt is shown on some page (none stale)."""
    shown = {b.name for b in BLOCKS}
    assert shown <= set(EXCERPTS), sorted(shown - set(EXCERPTS))
    assert set(EXCERPTS) <= shown, sorted(set(EXCERPTS) - shown)
    assert {b.page.name for b in BLOCKS} >= {"README.md", "grading.md", "feedback.md", "commands.md"}


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"{b.page.relative_to(ROOT).as_posix()}:{b.name}")
def test_block_is_what_the_command_prints(block: Block):
    """The block equals a fresh run's excerpt, timings and column padding aside
    (regenerate with `make docs-excerpts`)."""
    fresh = make(block.name)
    assert normalised(block.text) == normalised(fresh), (
        f"{block.page.relative_to(ROOT)}: excerpt {block.name!r} has drifted from the real output; "
        "run `make docs-excerpts`"
    )


def test_normalised_sets_aside_only_timings_and_padding():
    """Durations and runs of spaces are made equal; a changed count is not."""
    a = "  x.py    5/13   19.3s    ok     value\nScore: 2/13  (7.1 s)\n27 of 54 entries"
    b = "  x.py   5/13   3.5s   ok   value\nScore: 2/13  (12 s)\n27 of 54 entries"
    assert normalised(a) == normalised(b)
    assert normalised(a) != normalised(b.replace("27 of 54", "45 of 54"))
    assert normalised("5 submissions") == "5 submissions"  # a count before a word is no duration


def test_marker_without_a_fence_is_named(tmp_path):
    """A marker that is not followed by a fence is an error naming the page and line."""
    page = tmp_path / "p.md"
    page.write_text("text\n<!-- excerpt: usage-error (make docs-excerpts) -->\nno fence\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"p.md:2: expected a ``` fence after the excerpt marker"):
        blocks(page)


def test_pages_are_the_readme_and_the_docs():
    """The blocks are looked for on the README and every docs page."""
    assert PAGES[0] == ROOT / "README.md" and all(p.parent == ROOT / "docs" for p in PAGES[1:])
