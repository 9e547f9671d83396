"""A class run keys its stored results on the spec's own reference files too: editing the
instructor's reference regrades the class, an unchanged one reuses it (attnscore.grade.class_run)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from attnscore.grade.class_run import grade_class
from attnscore.spec.load import load_spec
from attnscore.submission.files import find_submissions

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "specs"
RIGHT = b"import torch\ndef softmax(x, dim):\n    return torch.softmax(x, dim=dim)\n"


@pytest.mark.slow
def test_an_edited_reference_regrades_and_an_unchanged_one_reuses(tmp_path: Path) -> None:
    """Same spec file, same submissions: a reference edited between runs regrades every student."""
    course = tmp_path / "course"
    course.mkdir()
    for name in ("softmax_own_reference.yaml", "softmax_reference.py", "softmax_check.py"):
        shutil.copy(EXAMPLES / name, course / name)
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "alice.py").write_bytes(RIGHT)
    submissions = find_submissions([str(tmp_path / "class")])
    spec = load_spec(course / "softmax_own_reference.yaml")
    first = grade_class(submissions, spec, tmp_path / "out")
    assert first.graded == ("alice.py",)
    again = grade_class(submissions, load_spec(course / "softmax_own_reference.yaml"), tmp_path / "out")
    assert again.graded == () and again.reused == ("alice.py",)
    reference = course / "softmax_reference.py"
    reference.write_text(reference.read_text() + "\n# edited: the instructor fixed a comment\n")
    edited = grade_class(submissions, load_spec(course / "softmax_own_reference.yaml"), tmp_path / "out")
    assert edited.graded == ("alice.py",) and edited.reused == ()
