"""Tests for the PrairieLearn external grader: the export, and the entry point run in a folder laid out like /grade."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import nbformat
import pytest
from click.testing import CliRunner

from attnscore.cli import main
from attnscore.export.prairielearn import ENTRYPOINT
from attnscore.report.prairielearn import MAX_RESULTS_BYTES, prairielearn_json
from tests.guards import HANG_GUARD_S
from tests.practice.prairielearn_format import QUESTION

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "dot_product_scores.yaml"
SUBS = ROOT / "examples" / "submissions" / "scores"

# Written for these tests from PrairieLearn's external-grading documentation (the results file a
# grader writes, and a question's externalGradingOptions); not PrairieLearn's own schema files.
# externalGradingOptions leaves out "enabled": PrairieLearn's schema marks it deprecated.
_NUMBER = {"type": "number"}
RESULTS = {
    "type": "object",
    "required": ["gradable"],
    "properties": {
        "gradable": {"type": "boolean"},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "message": {"type": "string"},
        "output": {"type": "string"},
        "format_errors": {"type": "array", "items": {"type": "string"}},
        "images": {"type": "array"},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "points", "max_points"],
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "points": _NUMBER,
                    "max_points": _NUMBER,
                    "message": {"type": "string"},
                    "output": {"type": "string"},
                    "images": {"type": "array"},
                },
                "additionalProperties": False,
            },
        },
    },
    "if": {"properties": {"gradable": {"const": True}}},
    "then": {"required": ["score"]},
    "additionalProperties": False,
}
EXTERNAL_GRADING_OPTIONS = {
    "type": "object",
    "required": ["image", "entrypoint"],
    "properties": {
        "image": {"type": "string", "minLength": 1},
        "entrypoint": {"type": "string", "pattern": "^/"},
        "serverFilesCourse": {"type": "array", "items": {"type": "string"}},
        "timeout": {"type": "integer", "minimum": 1},
        "enableNetworking": {"type": "boolean"},
        "environment": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """The export, made by the command line."""
    out = tmp_path_factory.mktemp("pl") / "export"
    result = CliRunner().invoke(main, ["export", "prairielearn", "--spec", str(SPEC), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def grade(tmp_path: Path, exported: Path, files: dict[str, bytes], *, tests: Path | None = None) -> dict:
    """Lay out /grade under tmp_path, run the image's entry point (grade.py) and read results.json."""
    root = tmp_path / "grade"
    (root / "student").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "data" / "data.json").write_text(json.dumps({"params": {}, "submitted_answers": {}}))
    (root / "serverFilesCourse").mkdir()
    source = tests or exported / "question" / "tests"
    (root / "tests").mkdir()
    for path in source.iterdir():
        (root / "tests" / path.name).write_bytes(path.read_bytes())
    for name, content in files.items():
        (root / "student" / name).write_bytes(content)
    env = {**os.environ, "ATTNSCORE_GRADE_ROOT": str(root)}
    done = subprocess.run(
        [sys.executable, str(exported / "image" / "grade.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    jsonschema.validate(results, RESULTS)
    return results


def test_question_folder(exported):
    """info.json is a valid external-grading question naming the image's entry point; the page uploads solution.py."""
    info = json.loads((exported / "question" / "info.json").read_text())
    jsonschema.validate(info, QUESTION)
    jsonschema.validate(info["externalGradingOptions"], EXTERNAL_GRADING_OPTIONS)
    assert info["gradingMethod"] == "External" and info["singleVariant"] is True  # one fixed question
    assert "enabled" not in info["externalGradingOptions"]  # deprecated in PrairieLearn's schema
    assert info["externalGradingOptions"]["entrypoint"] == ENTRYPOINT == "/usr/local/bin/attnscore-grade"
    assert info["externalGradingOptions"]["image"] == "attnscore-grader"
    page = (exported / "question" / "question.html").read_text()
    assert '<pl-file-upload file-names="solution.py"></pl-file-upload>' in page
    assert "<pl-external-grader-results></pl-external-grader-results>" in page
    assert "<code>scores(q, keys)</code>" in page and "{{" not in page
    assert (exported / "question" / "tests" / "spec.yaml").read_bytes() == SPEC.read_bytes()
    assert json.loads((exported / "question" / "tests" / "options.json").read_text()) == {
        "function": "scores",
        "entry": "solution.py",
    }


def test_image_context_is_coherent(exported):
    """Every COPY source of the Dockerfile is in the context; the entry point installed is the one info.json names."""
    image = exported / "image"
    dockerfile = (image / "Dockerfile").read_text()
    assert re.search(r"^FROM python:\$\{PYTHON_VERSION\}-slim$", dockerfile, re.M)
    copies = re.findall(r"^COPY (\S+) (\S+)$", dockerfile, re.M)
    assert copies == [
        ("system-packages.txt", "/opt/attnscore/system-packages.txt"),
        ("requirements.txt", "/opt/attnscore/requirements.txt"),
        ("course-requirements.txt", "/opt/attnscore/course-requirements.txt"),
        ("python/", "/opt/attnscore/src/"),
        ("grade.py", ENTRYPOINT),
    ]
    for source, _ in copies:
        assert (image / source).exists(), source
    assert (image / "python" / "pyproject.toml").is_file()
    assert (image / "python" / "attnscore" / "cli" / "__init__.py").is_file()
    assert f'CMD ["{ENTRYPOINT}"]' in dockerfile
    assert "pip install --no-cache-dir -r /opt/attnscore/requirements.txt" in dockerfile
    build = (image / "build.sh").read_text()
    assert f"--build-arg PYTHON_VERSION={sys.version_info.major}.{sys.version_info.minor}" in build
    assert "docker build --platform linux/amd64 " in build  # PrairieLearn's graders run amd64 images
    assert "# (Docker Hub): docker push attnscore-grader, and sync the image" in build
    assert os.access(image / "grade.py", os.X_OK) and os.access(image / "build.sh", os.X_OK)


@pytest.mark.slow
def test_correct_submission(tmp_path, exported):
    """A correct solution.py: gradable, score 1, a test per case with full points."""
    results = grade(tmp_path, exported, {"solution.py": (SUBS / "correct_matmul.py").read_bytes()})
    assert results["gradable"] is True and results["score"] == 1.0
    assert len(results["tests"]) == 7
    assert all(t["points"] == t["max_points"] for t in results["tests"])
    assert results["message"] == "dot_product_scores v1: 11/11 points"
    assert any(t["name"] == "hidden case 1" for t in results["tests"])


@pytest.mark.slow
def test_wrong_submission_gets_partial_score_and_feedback(tmp_path, exported):
    """cosine similarity: 2 of 11 points (perpendicular keys score 0 either way), the diagnosis in the
    failing tests' messages, no hidden expected values."""
    results = grade(tmp_path, exported, {"solution.py": (SUBS / "cosine_similarity.py").read_bytes()})
    assert results["score"] == pytest.approx(2 / 11)
    failing = [t for t in results["tests"] if t["points"] < t["max_points"]]
    assert len(failing) == 6
    assert any("Known mistake (cosine_similarity)" in t["message"] for t in failing)
    hidden = [t for t in results["tests"] if t["name"].startswith("hidden case ")]
    assert hidden and all(
        "inputs and expected values, shape and dtype are not shown" in t["message"] for t in hidden
    ), hidden
    assert all("Inputs:" not in t["message"] and ", expected " not in t["message"] for t in hidden)


@pytest.mark.slow
def test_notebook_upload(tmp_path, exported):
    """A notebook named as the question's file is graded on its definitions."""
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("%matplotlib inline\nimport torch\ndef scores(q, keys):\n    return keys @ q")]
    )
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "spec.yaml").write_bytes(SPEC.read_bytes())
    (tests / "options.json").write_text(json.dumps({"entry": "solution.ipynb"}))
    results = grade(tmp_path, exported, {"solution.ipynb": nbformat.writes(nb).encode()}, tests=tests)
    assert results["score"] == 1.0


@pytest.mark.slow
@pytest.mark.parametrize(
    "files, message",
    [
        pytest.param(
            {},
            "Your submission could not be graded: expected a .py or .ipynb file directly in this folder",
            id="nothing",
        ),
        pytest.param(
            {"answer.py": b"def scores(q, keys):\n    return keys @ q\n"},
            "expected the entry file 'solution.py' in this folder, found answer.py",
            id="wrong file name",
        ),
    ],
)
def test_ungradable_submissions_are_format_errors(tmp_path, exported, files, message):
    """No file to grade: gradable false with a format error (not counted against the student)."""
    results = grade(tmp_path, exported, files)
    assert results["gradable"] is False
    assert message in results["format_errors"][0]


SYNTAX_ERROR = b"def scores(q, keys)\n    return keys @ q\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    "files, errors",
    [
        pytest.param(
            {"solution.py": SYNTAX_ERROR},
            ["solution.py, line 1: expected ':' (the file does not parse as Python)"],
            id="entry file",
        ),
        pytest.param(
            {"solution.py": b"from helper import scores\n", "helper.py": b"def scores(q, keys):\n  return (\n"},
            ["helper.py, line 2: '(' was never closed (the file does not parse as Python)"],
            id="helper it imports",
        ),
    ],
)
def test_submission_that_does_not_parse_is_not_gradable(tmp_path, exported, files, errors):
    """A file that does not parse: gradable false (no attempt charged), a format error per file, not a graded 0."""
    results = grade(tmp_path, exported, files)
    assert results["gradable"] is False and results["tests"] == []
    assert results["format_errors"] == errors
    assert results["message"].startswith("Your submission could not be graded: it does not parse as Python")
    assert "(this attempt is not counted against you)" in results["message"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "files, score",
    [
        pytest.param({"solution.py": b"raise ValueError('not yet')\n"}, 0.0, id="parses but raises at import"),
        pytest.param(
            {"solution.py": (SUBS / "correct_matmul.py").read_bytes(), "scratch.py": SYNTAX_ERROR},
            1.0,
            id="a scratch file that does not parse, never imported",
        ),
    ],
)
def test_submission_that_parses_is_graded(tmp_path, exported, files, score):
    """Code that parses is graded, even when it fails at import; an unused file that does not parse changes nothing."""
    results = grade(tmp_path, exported, files)
    assert results["gradable"] is True and results["score"] == score
    assert len(results["tests"]) == 7


def test_misconfigured_question_still_writes_results(tmp_path, exported):
    """An invalid spec in tests/: gradable false, and the message says it is the course's problem."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "spec.yaml").write_text(SPEC.read_text().replace("version: 1", "version: one"))
    results = grade(tmp_path, exported, {"solution.py": b"x = 1\n"}, tests=tests)
    assert results["gradable"] is False
    assert results["message"].startswith("The question is misconfigured (invalid spec): ")
    assert "version: expected integer, found string 'one'" in results["message"]


def test_results_are_kept_under_one_megabyte():
    """Huge messages are cut so that the file stays under PrairieLearn's 1 MB cap, and stays valid."""
    test = {"name": "t", "description": "", "points": 0, "max_points": 1, "message": "x" * 400_000, "output": ""}
    data = {"gradable": True, "score": 0.0, "message": "m", "output": "y" * 400_000, "tests": [test] * 5}
    text = prairielearn_json(data)
    assert len(text.encode()) < MAX_RESULTS_BYTES
    cut = json.loads(text)
    jsonschema.validate(cut, RESULTS)
    assert cut["tests"][0]["message"].endswith("(cut to fit PrairieLearn's 1 MB results)")


def test_bad_file_name_is_a_usage_error(tmp_path):
    """--file-name must be a .py or .ipynb file name."""
    result = CliRunner().invoke(
        main, ["export", "prairielearn", "--spec", str(SPEC), "-o", str(tmp_path / "x"), "--file-name", "../a.sh"]
    )
    assert result.exit_code == 2
    assert "--file-name '../a.sh': expected a file name ending in .py or .ipynb" in result.output


@pytest.mark.parametrize(
    "files, problems",
    [
        pytest.param({"solution.py": b"def f():\n    return 1\n"}, [], id="parses"),
        pytest.param({"solution.py": b"def f(:\n"}, ["solution.py, line 1: invalid syntax"], id="syntax error"),
        pytest.param(
            {"a.py": b"x = 1\n", "b.py": b"if x:\nreturn\n"},
            ["b.py, line 2: expected an indented block after 'if' statement on line 1"],
            id="indentation, second file",
        ),
        pytest.param({"n.py": b"a\x00b\n"}, ["n.py"], id="null byte"),
        pytest.param({"d.py": b"(" * 300}, ["d.py"], id="nesting too deep"),
        pytest.param({"notes.txt": b"def f(:\n"}, [], id="not a .py file"),
    ],
)
def test_unparsed_files(files, problems):
    """One line per .py file that does not parse (file, line, the parser's words); parsing runs nothing.
    (For a null byte or nesting too deep only the file is checked: the words differ between Pythons.)"""
    from attnscore.export.prairielearn_grader import unparsed_files
    from attnscore.submission.files import Submission

    found = unparsed_files(Submission(Path("student"), tuple(files.items()), None))
    assert len(found) == len(problems)
    for line, expected in zip(found, problems, strict=True):
        assert line == expected if ":" in expected else line.startswith(f"{expected}")
