"""`export student-spec -o handout/a1.yaml` creates the missing folder `handout/` (as `export
prairielearn -o pl/` creates pl/), for a spec and an assignment; a longer missing path, or a spec that
has no student copy, creates nothing."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from attnscore.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOT = ROOT / "specs" / "dot_product_scores.yaml"
OWN = ROOT / "examples" / "specs" / "softmax_own_reference.yaml"


def _export(spec: Path, out: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["export", "student-spec", "--spec", str(spec), "-o", str(out)])
    return result.exit_code, result.output


def test_a_spec_copy_creates_its_folder(tmp_path: Path) -> None:
    """handout/ is made and holds the copy."""
    code, output = _export(DOT, tmp_path / "handout" / "a1.yaml")
    assert code == 0, output
    assert sorted(p.name for p in (tmp_path / "handout").iterdir()) == ["a1.yaml"]
    text = (tmp_path / "handout" / "a1.yaml").read_text(encoding="utf-8")
    assert text.splitlines()[1].startswith("# Student copy of spec dot_product_scores version 1,")


def test_an_assignment_copy_creates_its_folder(tmp_path: Path) -> None:
    """The assignment's copy and its _specs/ folder go into the new handout/."""
    a1 = tmp_path / "a1.yaml"
    a1.write_text(
        "format: attnscore-assignment/1\nid: a1\ntitle: A1\nquestions:\n  - {id: scores, spec: dot_product_scores}\n",
        encoding="utf-8",
    )
    code, output = _export(a1, tmp_path / "handout" / "a1.yaml")
    assert code == 0, output
    assert sorted(p.name for p in (tmp_path / "handout").iterdir()) == ["a1.yaml", "a1_specs"]
    assert sorted(p.name for p in (tmp_path / "handout" / "a1_specs").iterdir()) == ["scores.yaml"]


def test_a_longer_missing_path_is_refused(tmp_path: Path) -> None:
    """Two missing folders: exit 2, naming both, and nothing made."""
    out = tmp_path / "no" / "deeper" / "a1.yaml"
    code, output = _export(DOT, out)
    assert code == 2, output
    flat = " ".join(output.split())
    assert f"cannot write {out}: its folder {out.parent} does not exist, nor does {out.parent.parent}" in flat
    assert not (tmp_path / "no").exists()


def test_a_refused_copy_makes_no_folder(tmp_path: Path) -> None:
    """A spec graded against the instructor's own reference has no student copy: handout/ is not made."""
    code, output = _export(OWN, tmp_path / "handout" / "a1.yaml")
    assert code == 2, output
    assert "function.reference" in " ".join(output.split())
    assert not (tmp_path / "handout").exists()
