"""Tests for taking submissions in (attnscore.submission.files) and for what students are told about them:
folder submissions with helper modules, entry files, batches of student folders, tuples returned,
exceptions whose ``__str__`` raises, and spec paths in feedback."""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from attnscore.check.cases import build_cases
from attnscore.cli import main
from attnscore.grade.grading import grade_many, grade_submission
from attnscore.report.results import Verdict
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec
from attnscore.submission.files import Submission, SubmissionError, find_submissions

ROOT = Path(__file__).resolve().parents[2]
SPEC_PATH = ROOT / "specs" / "dot_product_scores.yaml"
LIMITS = Limits(call_timeout_s=30.0)  # far from any call here: nothing should time out
CORRECT = "def scores(q, keys):\n    return keys @ q\n"


@pytest.fixture(scope="module")
def spec():
    return load_spec(SPEC_PATH)


@pytest.fixture(scope="module")
def cases(spec):
    return build_cases(spec)


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def test_folder_submission_imports_its_helper_module(tmp_path, spec, cases):
    """A correct solution that imports a helper module from its own folder gets full marks."""
    folder = write(
        tmp_path / "alice",
        {
            "solution.py": "from helper import dot\n\ndef scores(q, keys):\n    return dot(keys, q)\n",
            "helper.py": "def dot(keys, q):\n    return keys @ q\n",
            "utils/__init__.py": "",
            "utils/extra.py": "X = 1\n",
        },
    )
    [submission] = find_submissions([str(folder)], one=True)
    assert submission.entry is None
    assert [name for name, _ in submission.files] == ["helper.py", "solution.py", "utils/__init__.py", "utils/extra.py"]
    result = grade_submission(submission, spec, cases, limits=LIMITS, shrink_steps=0)
    assert result.score == Fraction(11), [c.message for c in result.cases]


def test_folder_submission_with_package_import_and_entry(tmp_path, spec, cases):
    """--entry names the graded file; a subpackage of the folder imports too."""
    folder = write(
        tmp_path / "bob",
        {
            "main.py": "from lib.ops import scores\n",
            "lib/__init__.py": "",
            "lib/ops.py": "def scores(q, keys):\n    return keys @ q\n",
            "notes.py": "def scores(q, keys):\n    return 0 * q\n",
        },
    )
    [submission] = find_submissions([str(folder)], entry="main.py")
    assert submission.entry == "main.py"
    result = grade_submission(submission, spec, cases, limits=LIMITS, shrink_steps=0)
    assert result.score == Fraction(11)


@pytest.mark.parametrize(
    "files, verdict, message",
    [
        pytest.param(
            {"a.py": "def scores(q, keys):\n    return keys @ q\n", "b.py": "def scores(q, keys):\n    return q\n"},
            Verdict.FUNCTION_MISSING,
            "more than one of your files defines 'scores' (a.py, b.py); keep it in one file, "
            "or ask your instructor which file is graded",
            id="two files define it",
        ),
        pytest.param(
            {"a.py": "X = 1\n", "b.py": "Y = 2\n"},
            Verdict.FUNCTION_MISSING,
            "none of your files defines a function named 'scores' (files: a.py, b.py)",
            id="no file defines it",
        ),
    ],
)
def test_entry_cannot_be_chosen(tmp_path, spec, cases, files, verdict, message):
    """When no single top-level file defines the function, every case says why, in the student's terms."""
    [submission] = find_submissions([str(write(tmp_path / "s", files))], one=True)
    result = grade_submission(submission, spec, cases, limits=LIMITS, shrink_steps=0)
    assert {c.verdict for c in result.cases} == {verdict}
    assert result.error == message


def test_the_file_that_defines_it_wins_over_one_that_imports_it(tmp_path, spec, cases):
    """A test script that imports the solution does not make the choice ambiguous."""
    folder = write(
        tmp_path / "s",
        {"solution.py": CORRECT, "test_mine.py": "from solution import scores\nprint(scores)\n"},
    )
    [submission] = find_submissions([str(folder)], one=True)
    assert grade_submission(submission, spec, cases, limits=LIMITS, shrink_steps=0).score == Fraction(11)


def test_class_folder_layout(tmp_path):
    """A class folder: loose .py files and student folders are each one submission, sorted by name."""
    write(
        tmp_path / "class",
        {
            "carol.py": CORRECT,
            "alice/solution.py": CORRECT,
            "alice/helper.py": "",
            "bob/work.py": CORRECT,
            ".hidden/x.py": "",
            "__pycache__/y.py": "",
        },
    )
    found = find_submissions([str(tmp_path / "class")])
    assert [(s.path.name, s.entry) for s in found] == [("alice", None), ("bob", None), ("carol.py", "carol.py")]
    with_entry = find_submissions([str(tmp_path / "class")], entry="solution.py")
    assert [s.path.name for s in with_entry] == ["alice", "bob", "carol.py"]


def test_folder_reading_ignores_links_and_refuses_what_is_too_big(tmp_path):
    """Symbolic links are never followed (a link to /etc/passwd is not read); size limits are located errors."""
    folder = write(tmp_path / "s", {"solution.py": CORRECT})
    os.symlink("/etc/passwd", folder / "passwd.py")
    [submission] = find_submissions([str(folder)], one=True)
    assert [name for name, _ in submission.files] == ["solution.py"]
    (folder / "big.py").write_bytes(b"#" * (1024 * 1024 + 1))
    with pytest.raises(SubmissionError, match=r"big\.py: expected at most 1048576 bytes, found 1048577"):
        find_submissions([str(folder)], one=True)


@pytest.mark.parametrize(
    "entry, text",
    [
        pytest.param("../x.py", "--entry '../x.py': expected a relative path to a .py or .ipynb file", id="escapes"),
        pytest.param("/abs.py", "--entry '/abs.py': expected a relative path to a .py or .ipynb file", id="absolute"),
        pytest.param(
            "notes.txt", "--entry 'notes.txt': expected a relative path to a .py or .ipynb file", id="not python"
        ),
    ],
)
def test_bad_entry_is_a_usage_error(tmp_path, entry, text):
    """--entry must name a .py file inside the folder."""
    write(tmp_path / "s", {"solution.py": CORRECT})
    with pytest.raises(SubmissionError, match=text.replace(".", r"\.")):
        find_submissions([str(tmp_path / "s")], entry=entry)


def test_missing_entry_in_a_single_folder(tmp_path):
    """A folder given as one submission without the named entry file says which files it has."""
    write(tmp_path / "s", {"solution.py": CORRECT})
    with pytest.raises(SubmissionError, match=r"expected the entry file 'main\.py' in this folder, found solution\.py"):
        find_submissions([str(tmp_path / "s")], entry="main.py", one=True)


def test_gradescope_grades_a_folder_of_two_files(tmp_path):
    """Gradescope hands over one folder: two uploaded files give one report with full marks."""
    folder = write(
        tmp_path / "submission",
        {
            "solution.py": "from helper import dot\n\ndef scores(q, keys):\n    return dot(keys, q)\n",
            "helper.py": "def dot(keys, q):\n    return keys @ q\n",
        },
    )
    out = tmp_path / "results.json"
    result = CliRunner().invoke(
        main, ["grade", str(folder), "--spec", str(SPEC_PATH), "--format", "gradescope", "--output", str(out)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["score"] == 11 and all(t["status"] == "passed" for t in data["tests"])


def test_files_of_a_folder_are_read_before_any_submission_runs(tmp_path, spec):
    """A helper changed on disk during the batch is graded as it was when grading started."""
    write(
        tmp_path / "class",
        {
            "a.py": CORRECT,
            "b/solution.py": "from helper import f as scores\n",
            "b/helper.py": "def f(q, keys):\n    return keys @ q\n",
        },
    )
    found = find_submissions([str(tmp_path / "class")])

    def tamper(_result):
        (tmp_path / "class" / "b" / "helper.py").write_text("def f(q, keys):\n    return q.sum() + 99\n")

    results = grade_many(found, spec, limits=LIMITS, on_result=tamper, shrink_steps=0)
    assert [r.score for r in results] == [Fraction(11), Fraction(11)]


@pytest.mark.parametrize(
    "body, message",
    [
        pytest.param(
            "    s = keys @ q\n    return s, s.softmax(-1)\n",
            "returned a tuple of 2 values (shapes (3,) and (3,)); return only the output, one tensor "
            "(e.g. `return out`, not `return out, weights`)",
            id="tuple of two tensors",
        ),
        pytest.param(
            "    s = keys @ q\n    return s, None\n",
            "returned a tuple of 2 values (shapes (3,) and None); return only the output, one tensor "
            "(e.g. `return out`, not `return out, weights`)",
            id="tuple of a tensor and None",
        ),
        pytest.param(
            "    s = keys @ q\n    return s, 0.5\n",
            "returned a tuple of 2 values (shapes (3,) and a number); return only the output, one tensor "
            "(e.g. `return out`, not `return out, weights`)",
            id="tuple of a tensor and a number",
        ),
        pytest.param(
            "    s = keys @ q\n    return [s, s[:1]]\n",
            "returned a list of 2 values with different shapes ((3,) and (1,)); return only the output, one tensor",
            id="list of two shapes",
        ),
    ],
)
def test_several_results_are_named_in_the_students_terms(tmp_path, spec, cases, body, message):
    """A tuple or ragged list of tensors is a bad return type with a message about what was returned."""
    path = tmp_path / "s.py"
    path.write_text("def scores(q, keys):\n" + body)
    result = grade_submission(path, spec, cases, limits=LIMITS, shrink_steps=0)
    first = result.cases[0]
    assert first.verdict is Verdict.BAD_RETURN_TYPE
    assert message in first.message.splitlines()


def test_a_list_of_rows_or_zero_dim_scores_is_one_result(tmp_path, spec, cases):
    """A list of 0-d tensors (one score per key) is still a correct answer."""
    path = tmp_path / "s.py"
    path.write_text("import torch\n\ndef scores(q, keys):\n    return [torch.dot(k, q) for k in keys]\n")
    assert grade_submission(path, spec, cases, limits=LIMITS, shrink_steps=0).score == Fraction(11)


@pytest.mark.parametrize(
    "str_body",
    [pytest.param("raise RuntimeError('nope')", id="__str__ raises"), pytest.param("return None", id="__str__ None")],
)
def test_exception_whose_str_fails_is_an_exception(tmp_path, spec, cases, str_body):
    """An exception whose __str__ raises or returns None is the student's exception, shown by type."""
    path = tmp_path / "s.py"
    path.write_text(
        f"class Broken(Exception):\n    def __str__(self):\n        {str_body}\n\n"
        "def scores(q, keys):\n    raise Broken()\n"
    )
    result = grade_submission(path, spec, cases, limits=LIMITS, shrink_steps=0)
    assert {c.verdict for c in result.cases} == {Verdict.EXCEPTION}
    visible = result.cases[0].message.splitlines()
    assert "raised Broken (its message could not be shown: __str__ failed)" in visible
    hidden = [c for c in result.cases if c.visibility == "hidden"]
    for case in hidden:
        assert (
            "raised an exception of its own class (its type and message are not shown for a hidden case)"
            in case.message.splitlines()
        )


def test_feedback_names_the_spec_by_its_id_wherever_the_grader_started(tmp_path, monkeypatch):
    """Feedback shows the spec as <id>.yaml, from any folder, never the machine's absolute path."""
    sub = tmp_path / "s.py"
    sub.write_text("def scores(q, keys):\n    return (keys @ q).abs()\n")
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["grade", str(sub), "--spec", str(SPEC_PATH), "--format", "json"])
    data = json.loads(result.output)
    assert data["cases"][1]["location"] == "dot_product_scores.yaml:45"
    assert data["spec"]["path"] == "dot_product_scores.yaml" and data["submission"] == "s.py"
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["grade", str(sub), "--spec", str(SPEC_PATH), "--format", "gradescope"])
    assert str(ROOT) not in result.output
    assert "(dot_product_scores.yaml:45)" in json.loads(result.output)["tests"][1]["output"]


def test_single_file_submission_keeps_its_name():
    """A single file is laid out under its own name, as its own entry."""
    submission = Submission.from_file(ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py")
    assert submission.entry == "correct_matmul.py" and [n for n, _ in submission.files] == ["correct_matmul.py"]


def test_student_folder_without_the_entry_file_gets_a_verdict(tmp_path, spec, cases):
    """In a class, a student whose folder lacks the entry file is told so; the batch goes on."""
    write(tmp_path / "class", {"alice/solution.py": CORRECT, "bob/work.py": CORRECT})
    alice, bob = find_submissions([str(tmp_path / "class")], entry="solution.py")
    assert grade_submission(alice, spec, cases, limits=LIMITS, shrink_steps=0).score == Fraction(11)
    result = grade_submission(bob, spec, cases, limits=LIMITS, shrink_steps=0)
    assert {c.verdict for c in result.cases} == {Verdict.FUNCTION_MISSING}
    assert result.error == "your submission has no file named 'solution.py' (its .py files: work.py)"


@pytest.mark.parametrize(
    "files",
    [
        pytest.param(
            {
                "solution.py": "try:\n    from fast import scores\nexcept ImportError:\n"
                "    def scores(q, keys):\n        return keys @ q\n",
                "utils.py": "X = 1\n",
            },
            id="def inside try/except",
        ),
        pytest.param(
            {
                "solution.py": "from typing import Callable\nscores: Callable = lambda q, keys: keys @ q\n",
                "helpers.py": "Y = 2\n",
            },
            id="annotated assignment",
        ),
        pytest.param(
            {"solution.py": CORRECT, "first_attempt.py": "def scores(q, keys):\n    return q\n"},
            id="tie broken by the conventional name",
        ),
        pytest.param(
            {
                "solution.py": "MODE = 'plain'\nfrom scale import apply\n\n"
                "def scores(q, keys):\n    return apply(keys @ q)\n",
                "scale.py": "from solution import MODE\n\ndef apply(s):\n    assert MODE == 'plain'\n    return s\n",
            },
            id="helper imports the entry by its file name",
        ),
    ],
)
def test_entry_choice_and_import_like_python_does(tmp_path, spec, cases, files):
    """Correct uploads written the ways students write them get full marks as one folder submission."""
    [submission] = find_submissions([str(write(tmp_path / "s", files))], one=True)
    result = grade_submission(submission, spec, cases, limits=LIMITS, shrink_steps=0)
    assert result.score == Fraction(11), [c.message for c in result.cases]


def test_one_students_folder_never_stops_the_class(tmp_path, spec):
    """Too many files, an oversized file or a link to another student's work: that student's verdict only."""
    write(tmp_path / "class", {"alice/solution.py": CORRECT, "carol.py": CORRECT})
    write(tmp_path / "class" / "mallory", {f"f{i:03}.py": "" for i in range(201)})
    (tmp_path / "class" / "zed.py").write_bytes(b"#" * (1024 * 1024 + 1))
    os.symlink(tmp_path / "class" / "alice" / "solution.py", tmp_path / "class" / "linked.py")
    os.symlink(tmp_path / "class" / "alice", tmp_path / "class" / "linked_folder")
    found = find_submissions([str(tmp_path / "class")])
    assert [s.path.name for s in found] == ["alice", "carol.py", "mallory", "zed.py"]
    problems = {s.path.name: s.problem for s in found}
    assert problems["mallory"] == "your submission could not be read: expected at most 200 files, found more"
    assert problems["zed.py"] == "your submission could not be read: expected at most 1048576 bytes, found 1048577"
    results = grade_many(found, spec, limits=LIMITS, shrink_steps=0)
    assert [r.score for r in results] == [Fraction(11), Fraction(11), Fraction(0), Fraction(0)]
    assert {c.verdict for c in results[2].cases} == {Verdict.FUNCTION_MISSING}
    assert results[2].error == problems["mallory"]


def test_entry_in_a_subfolder_imports_top_level_helpers(tmp_path, spec, cases):
    """--entry src/main.py: modules beside it and at the folder's top level both import."""
    folder = write(
        tmp_path / "s",
        {
            "src/main.py": "from local import f\nfrom shared import g\n\n"
            "def scores(q, keys):\n    return g(f(keys, q))\n",
            "src/local.py": "def f(keys, q):\n    return keys @ q\n",
            "shared.py": "def g(x):\n    return x\n",
        },
    )
    [submission] = find_submissions([str(folder)], entry="src/main.py")
    assert grade_submission(submission, spec, cases, limits=LIMITS, shrink_steps=0).score == Fraction(11)
