"""Tests for class runs (attnscore.grade.class_run): killed for real, resumed, regraded only when changed."""

from __future__ import annotations

import csv
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnscore.grade.gradebook import Gradebook
from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
SCORES = ROOT / "examples" / "submissions" / "scores"
SPEC = ROOT / "specs" / "dot_product_scores.yaml"
ATTNSCORE = Path(sys.executable).parent / "attnscore"
CLASS = {
    "ada.py": "correct_matmul.py",
    "ben.py": "correct_loops.py",
    "cy.py": "cosine_similarity.py",
    "dee.py": "correct_numpy_einsum.py",
    "eve.py": "syntax_error.py",
    "fay": "correct_with_helper",
}


def _make_class(folder: Path) -> None:
    folder.mkdir()
    for name, example in CLASS.items():
        source = SCORES / example
        if source.is_dir():
            shutil.copytree(source, folder / name)
        else:
            shutil.copy(source, folder / name)


def _grade(klass: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(ATTNSCORE), "grade", str(klass), "--spec", str(SPEC), "--out", str(out), "--shrink-steps", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: the kill below reaches its sandboxes too
        text=True,
    )


def _events(out: Path) -> dict[str, int]:
    path = out / "gradebook.sqlite"
    if not path.exists():
        return {}
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
    try:
        return dict(db.execute("SELECT student, COUNT(*) FROM events GROUP BY student").fetchall())
    except sqlite3.OperationalError:  # tables not created yet
        return {}
    finally:
        db.close()


def _finish(proc: subprocess.Popen, timeout: float = HANG_GUARD_S) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


@pytest.mark.slow
def test_class_run_killed_mid_batch_resumes_and_grades_each_submission_once(tmp_path):
    """SIGKILL mid-batch, restart: every student graded exactly once; a third run grades nothing;
    a changed submission and then a changed spec are graded again.

    The last student (zed, graded last) sleeps while imported in the first run, so that run is
    still going, whatever the machine's speed, when two students are committed and it is killed;
    zed is fixed before the second run."""
    klass, out = tmp_path / "class", tmp_path / "out"
    _make_class(klass)
    students = [*CLASS, "zed.py"]
    right = (SCORES / "correct_matmul.py").read_text()
    (klass / "zed.py").write_text("import time\n\ntime.sleep(3600)\n" + right)
    first = _grade(klass, out)
    deadline = time.monotonic() + 600  # a guard against a hang only: zed holds the run open
    while len(_events(out)) < 2 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first.poll() is None, "the first run ended before it could be killed mid-batch"
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    committed = _events(out)
    assert 2 <= len(committed) < len(students) and set(committed.values()) == {1}
    assert "zed.py" not in committed
    (klass / "zed.py").write_text(right)

    code, stdout, stderr = _finish(_grade(klass, out))
    assert code == 1, stderr  # cy and eve fail cases
    assert _events(out) == dict.fromkeys(students, 1)
    assert f"class run: {len(students) - len(committed)} graded, {len(committed)} unchanged" in stderr
    db = sqlite3.connect(out / "gradebook.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    runs = db.execute("SELECT to_grade, finished_at IS NOT NULL FROM runs ORDER BY id").fetchall()
    assert runs == [(len(students), 0), (len(students) - len(committed), 1)]
    db.close()

    # Outputs cover the whole class, graded in either run.
    table = list(csv.DictReader((out / "grades.csv").read_text(encoding="utf-8-sig").splitlines()))
    scores = {row["student"]: (row["score"], row["max"]) for row in table}
    assert scores == {
        "ada.py": ("11", "11"), "ben.py": ("11", "11"), "cy.py": ("2", "11"),
        "dee.py": ("11", "11"), "eve.py": ("0", "11"), "fay": ("11", "11"), "zed.py": ("11", "11"),
    }  # fmt: skip
    assert sorted(p.name for p in (out / "feedback").iterdir()) == sorted(f"{n}.txt" for n in students)
    assert "SyntaxError" in (out / "feedback" / "eve.py.txt").read_text()
    assert "Score: 2/11" in (out / "feedback" / "cy.py.txt").read_text()
    assert (out / "report.html").read_text().count("<tr>") > len(students)
    for name in students:  # the summary table on stdout lists everyone
        assert name in stdout

    code, _, stderr = _finish(_grade(klass, out))
    assert "class run: 0 graded, 7 unchanged" in stderr
    assert _events(out) == dict.fromkeys(students, 1)

    (klass / "ada.py").write_text((SCORES / "cosine_similarity.py").read_text())
    code, _, stderr = _finish(_grade(klass, out))
    assert "class run: 1 graded, 6 unchanged" in stderr
    assert _events(out) == {**dict.fromkeys(students, 1), "ada.py": 2}
    assert "Score: 2/11" in (out / "feedback" / "ada.py.txt").read_text()

    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.read_text().replace("timeout_s: 3", "timeout_s: 4"))
    code, _, stderr = _finish(
        subprocess.Popen(
            [str(ATTNSCORE), "grade", str(klass), "--spec", str(spec), "--out", str(out), "--shrink-steps", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    )
    assert "class run: 7 graded, 0 unchanged" in stderr
    assert _events(out) == {**dict.fromkeys(students, 2), "ada.py": 3}


@pytest.mark.parametrize(
    ("args", "line"),
    [
        pytest.param(
            ["--format", "gradescope"],
            "Error: --out (a class run) and --format gradescope (one student) cannot be combined",
            id="gradescope with out",
        ),
    ],
)
def test_class_run_usage_errors(tmp_path, args, line):
    """Combinations that make no sense are one-line usage errors (exit 2), before any grading."""
    klass = tmp_path / "class"
    _make_class(klass)
    proc = subprocess.run(
        [str(ATTNSCORE), "grade", str(klass), "--spec", str(SPEC), "--out", str(tmp_path / "out"), *args],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == line
    assert not (tmp_path / "out").exists()


def test_duplicate_student_names_are_refused(tmp_path):
    """Two submissions with one name (from two folders) cannot share a gradebook row."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    shutil.copy(SCORES / "correct_matmul.py", tmp_path / "a" / "x.py")
    shutil.copy(SCORES / "correct_loops.py", tmp_path / "b" / "x.py")
    proc = subprocess.run(
        [str(ATTNSCORE), "grade", str(tmp_path / "a"), str(tmp_path / "b"), "--spec", str(SPEC), "--out",
         str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "two submissions are both named 'x.py'" in proc.stderr
    assert not (tmp_path / "out" / "gradebook.sqlite").exists()


def test_a_locked_gradebook_is_a_one_line_error(tmp_path):
    """A second run on an --out folder in use stops with one line, exit 2."""
    klass = tmp_path / "class"
    _make_class(klass)
    with Gradebook(tmp_path / "out" / "gradebook.sqlite"):
        proc = subprocess.run(
            [str(ATTNSCORE), "grade", str(klass), "--spec", str(SPEC), "--out", str(tmp_path / "out")],
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
        )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("Error: ")
    assert "another attnscore grade run is using this gradebook" in proc.stderr


def _left_in(tmpdir: Path) -> list[str]:
    """What a run left in ``tmpdir`` besides the interpreter's mirror, a cache a root grader without
    bwrap keeps there on purpose (root's own, writable by nobody else: checked here)."""
    kept = [n for n in os.listdir(tmpdir) if n.startswith("attnscore-mirror-")]
    assert all(os.stat(tmpdir / n).st_uid == 0 and not os.stat(tmpdir / n).st_mode & 0o022 for n in kept)
    return [n for n in os.listdir(tmpdir) if n not in kept]


@pytest.mark.slow
def test_a_deep_folder_chain_does_not_stop_the_class_and_leaves_nothing(tmp_path):
    """A student whose code builds a 3,000-deep folder chain (shutil.rmtree raised RecursionError:
    exit 3, nothing reported) is graded with the rest of the class; nothing is left in the
    temporary folder; a rerun is clean."""
    import tempfile

    klass, out = tmp_path / "class", tmp_path / "out"
    klass.mkdir()
    shutil.copy(ROOT / "tests" / "hostile" / "submissions" / "deep_folder_chain.py", klass / "deep.py")
    shutil.copy(SCORES / "correct_matmul.py", klass / "ada.py")
    tmpdir = Path(tempfile.mkdtemp(prefix="deep-class-"))  # one the worker's uid may enter, all to this test
    os.chmod(tmpdir, 0o755)
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    try:
        first = subprocess.run(
            [str(ATTNSCORE), "grade", str(klass), "--spec", str(SPEC), "--out", str(out), "--shrink-steps", "0"],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        assert first.returncode == 0, first.stderr
        assert "class run: 2 graded, 0 unchanged" in first.stderr
        table = list(csv.DictReader((out / "grades.csv").read_text(encoding="utf-8-sig").splitlines()))
        assert {row["student"]: row["score"] for row in table} == {"ada.py": "11", "deep.py": "11"}
        assert _left_in(tmpdir) == []
        again = subprocess.run(
            [str(ATTNSCORE), "grade", str(klass), "--spec", str(SPEC), "--out", str(out), "--shrink-steps", "0"],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert "class run: 0 graded, 2 unchanged" in again.stderr
        assert _left_in(tmpdir) == []
    finally:
        from attnscore.sandbox.removal import remove_tree

        remove_tree(tmpdir)


def test_temporary_files_of_a_run_killed_mid_write_are_swept(tmp_path):
    """The atomic writer's leftovers (.NAME.XXXXXXXX.tmp) go; feedback files and other names stay."""
    from attnscore.grade.class_run import sweep_partial_writes

    (tmp_path / ".ben.py.txt.6yzv40gu.tmp").write_text("half")
    (tmp_path / "ben.py.txt").write_text("feedback")
    (tmp_path / ".hidden.txt").write_text("kept")
    (tmp_path / ".folder.tmp").mkdir()
    (tmp_path / ".link.tmp").symlink_to(tmp_path / "ben.py.txt")
    assert sweep_partial_writes(tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [".folder.tmp", ".hidden.txt", ".link.tmp", "ben.py.txt"]
    assert sweep_partial_writes(tmp_path / "missing") == 0
