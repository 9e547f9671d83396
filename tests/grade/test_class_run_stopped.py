"""A class run that stops on an error before grading anything leaves nothing half-written: an out
folder it created keeps no empty gradebook (nor its lock), and an existing gradebook stays as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from attnscore.cli import main
from attnscore.grade.gradebook import Gradebook

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "specs"
HEAD = '    """Softmax of x over dim, stable for large logits: exp(x - max) / sum(exp(x - max))."""\n'
RAISES = "    if x.shape[-1] > 3:\n        raise ValueError('only n <= 3')\n"


def _course(tmp_path: Path) -> tuple[Path, Path]:
    """The example spec with a reference that raises on drawn inputs, and a class of two."""
    for name in ("softmax_own_reference.yaml", "softmax_check.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    text = (EXAMPLES / "softmax_reference.py").read_text(encoding="utf-8")
    (tmp_path / "softmax_reference.py").write_text(text.replace(HEAD, HEAD + RAISES), encoding="utf-8")
    klass = tmp_path / "class"
    klass.mkdir()
    for student in ("alice.py", "bob.py"):
        (klass / student).write_text("import torch\n\ndef softmax(x, dim):\n    return torch.softmax(x, dim=dim)\n")
    return tmp_path / "softmax_own_reference.yaml", klass


def _grade(spec: Path, klass: Path, out: Path) -> tuple[int, str]:
    args = ["grade", str(klass), "--spec", str(spec), "--out", str(out), "--jobs", "2"]
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.output


def test_a_new_out_folder_is_removed_when_the_run_grades_nothing(tmp_path: Path) -> None:
    """The out folder (and its missing parent) the run made is gone again; the error is the reference's."""
    spec, klass = _course(tmp_path)
    out = tmp_path / "runs" / "a1"
    code, output = _grade(spec, klass, out)
    assert code == 2, output
    assert output.strip().splitlines()[-1].startswith("Error: the spec's reference failed on a drawn input")
    assert not (tmp_path / "runs").exists()


def test_an_existing_empty_out_folder_keeps_no_gradebook_or_lock(tmp_path: Path) -> None:
    """An out folder that existed stays, empty: no gradebook.sqlite, no .lock, no journal files."""
    spec, klass = _course(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    code, output = _grade(spec, klass, out)
    assert code == 2, output
    assert sorted(p.name for p in out.iterdir()) == []


def test_an_existing_gradebook_stays_as_it_was(tmp_path: Path) -> None:
    """A gradebook from an earlier run keeps its runs: the stopped run's row is not left in it."""
    spec, klass = _course(tmp_path)
    out = tmp_path / "out"
    with Gradebook(out / "gradebook.sqlite") as book:
        book.finish_run(book.start_run("earlier", "key", 2, 2))
    code, output = _grade(spec, klass, out)
    assert code == 2, output
    with Gradebook(out / "gradebook.sqlite") as book:
        rows = book._db.execute("SELECT spec_id, submissions FROM runs").fetchall()
    assert rows == [("earlier", 2)]
    assert sorted(p.name for p in out.iterdir()) == ["gradebook.sqlite", "gradebook.sqlite.lock"]
