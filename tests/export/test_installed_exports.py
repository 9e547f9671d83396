"""The platform exports from an installed wheel, run the way the platforms run them.

``python -m build`` makes the wheel and the sdist from the checkout; the wheel goes into a fresh
venv (no source checkout anywhere near it), which exports the Gradescope bundle and the
PrairieLearn grader. The bundle's ``python/`` copy of attnscore is then installed as ``setup.sh``
and the Dockerfile install it (``pip install --no-deps``) into a second fresh venv, and
Gradescope's ``run_autograder`` and PrairieLearn's entry point grade a correct and a wrong
submission with it, in folders laid out like ``/autograder`` and ``/grade``. The packaging
metadata is checked on the same build: the MIT licence file and SPDX ``License-Expression``,
built without setuptools' deprecation warning.

Like tests/test_package.py: skipped without ``build`` (the ``dev`` extra); the builds run without
isolation and the venvs reuse this environment's installed dependencies through a ``.pth`` line, so
nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
SUBS = ROOT / "examples" / "submissions" / "scores"
GRADERS = {
    "gradescope/setup.sh",
    "gradescope/run_autograder",
    "prairielearn/Dockerfile",
    "prairielearn/grade.py",
    "prairielearn/question.html",
}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("build") is None or importlib.util.find_spec("setuptools") is None,
        reason="python -m build needs the build package (pip install 'attnscore[dev]') and setuptools",
    ),
]


def run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S
    )


def fresh_venv(where: Path) -> Path:
    """A venv at ``where`` seeing this environment's installed packages (plain paths, no editable
    hook: never this checkout's attnscore); returns its python."""
    done = run(sys.executable, "-m", "venv", "--without-pip", where, cwd=where.parent)
    assert done.returncode == 0, done.stderr
    python = where / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=where).stdout.strip()
    ours = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    Path(site, "machine-packages.pth").write_text("".join(f"{p}\n" for p in ours))
    return python


def pip_install(python: Path, *args: str | Path) -> None:
    done = run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", *args, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def where_attnscore_is(python: Path, cwd: Path) -> str:
    return run(python, "-c", "import attnscore; print(attnscore.__file__)", cwd=cwd).stdout.strip()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    """The sdist and the wheel (``python -m build`` from the checkout) and what the build printed."""
    out = tmp_path_factory.mktemp("dist")
    done = run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT, cwd=out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out, done.stdout + done.stderr


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed; returns its python."""
    python = fresh_venv(tmp_path_factory.mktemp("wheel") / "venv")
    [wheel] = built[0].glob("*.whl")
    pip_install(python, "--force-reinstall", wheel)
    return python


@pytest.fixture(scope="module")
def exported(installed, tmp_path_factory) -> Path:
    """Both exports, made by the installed wheel's command line from a folder outside the checkout."""
    out = tmp_path_factory.mktemp("exported")
    assert where_attnscore_is(installed, out).startswith(str(installed.parent.parent))
    attnscore = installed.parent / "attnscore"
    gradescope = run(attnscore, "export", "gradescope", "--spec", "dot_product_scores", "-o", out / "gs.zip", cwd=out)
    assert gradescope.returncode == 0, gradescope.stdout + gradescope.stderr
    assert gradescope.stdout.startswith(f"wrote {out / 'gs.zip'}: ")
    prairielearn = run(attnscore, "export", "prairielearn", "--spec", "dot_product_scores", "-o", out / "pl", cwd=out)
    assert prairielearn.returncode == 0, prairielearn.stdout + prairielearn.stderr
    return out


@pytest.fixture(scope="module")
def grader_python(exported, tmp_path_factory) -> Path:
    """The bundle's python/ copy installed into a fresh venv as setup.sh installs it; returns its python."""
    source = tmp_path_factory.mktemp("source")
    with zipfile.ZipFile(exported / "gs.zip") as archive:
        archive.extractall(source)
    python = fresh_venv(tmp_path_factory.mktemp("grader") / "venv")
    pip_install(python, "--no-build-isolation", source / "python")
    assert where_attnscore_is(python, source).startswith(str(python.parent.parent))
    return python


def test_licence_file_and_spdx_metadata_without_a_deprecation_warning(built):
    """LICENSE (MIT, "attnscore authors") in the sdist and the wheel's dist-info/licenses;
    metadata License-Expression: MIT and License-File: LICENSE; the build prints no deprecation."""
    out, printed = built
    licence = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License\n\nCopyright (c) 2026 attnscore authors\n")
    [wheel] = out.glob("*.whl")
    [sdist] = out.glob("*.tar.gz")
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("attnscore-0.1.0.dist-info/licenses/LICENSE").decode() == licence
        metadata = archive.read("attnscore-0.1.0.dist-info/METADATA").decode().split("\n\n", 1)[0].splitlines()
    with tarfile.open(sdist) as archive:
        member = archive.extractfile("attnscore-0.1.0/LICENSE")
        assert member is not None and member.read().decode() == licence
    assert {"Metadata-Version: 2.4", "License-Expression: MIT", "License-File: LICENSE"} <= set(metadata)
    assert not [line for line in metadata if line.startswith(("License:", "Classifier: License"))]
    assert "deprecat" not in printed.lower(), [line for line in printed.splitlines() if "eprecat" in line]
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8").splitlines()  # (no tomllib on 3.10)
    assert {'license = "MIT"', 'license-files = ["LICENSE"]'} <= set(project)
    assert 'requires = ["setuptools>=77.0.3", "packaging>=24.2"]' in project


def test_wheel_and_sdist_carry_the_graders_files(built):
    """The graders' files are package data, in the wheel and the sdist, byte for byte."""
    out, _ = built
    [wheel] = out.glob("*.whl")
    [sdist] = out.glob("*.tar.gz")
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = {name: archive.read(f"attnscore/export/graders/{name}") for name in GRADERS}
    with tarfile.open(sdist) as archive:
        in_sdist = {}
        for name in GRADERS:
            member = archive.extractfile(f"attnscore-0.1.0/attnscore/export/graders/{name}")
            assert member is not None, name
            in_sdist[name] = member.read()
    checkout = {name: (ROOT / "graders" / name).read_bytes() for name in GRADERS}
    assert in_wheel == checkout == in_sdist


def test_the_installed_wheel_exports_both_graders(exported):
    """Both exports from the wheel: the grader files as in the checkout, a python/ copy with its
    LICENSE and a pyproject.toml from the wheel's metadata, and no graders' files in the copy."""
    with zipfile.ZipFile(exported / "gs.zip") as archive:
        names = set(archive.namelist())
        assert archive.read("setup.sh") == (ROOT / "graders" / "gradescope" / "setup.sh").read_bytes()
        assert archive.read("run_autograder") == (ROOT / "graders" / "gradescope" / "run_autograder").read_bytes()
        assert archive.read("python/LICENSE") == (ROOT / "LICENSE").read_bytes()
        copy = archive.read("python/pyproject.toml").decode().splitlines()
    assert {"python/attnscore/cli/__init__.py", "python/attnscore/bundled_specs/dot_product_scores.yaml"} <= names
    assert not any("/graders/" in n or "__pycache__" in n for n in names)
    assert {
        'requires = ["setuptools>=77.0.3", "packaging>=24.2"]',
        'name = "attnscore"',
        'version = "0.1.0"',
        'license = "MIT"',
        'license-files = ["LICENSE"]',
        '"attnscore" = "attnscore.cli:run"',
        '[project.entry-points."pytest11"]',
        '"attnscore" = "attnscore.pytest_plugin"',
    } <= set(copy)
    [dependencies] = [line for line in copy if line.startswith("dependencies = ")]
    assert '"torch>=2.1"' in dependencies and "pytest" not in dependencies  # the extras are not the grader's
    image = exported / "pl" / "image"
    for name in ("Dockerfile", "grade.py"):
        assert (image / name).read_bytes() == (ROOT / "graders" / "prairielearn" / name).read_bytes()
    assert (image / "python" / "LICENSE").is_file() and (image / "python" / "pyproject.toml").is_file()
    assert (exported / "pl" / "question" / "tests" / "spec.yaml").is_file()


def _autograder(tmp_path: Path, exported: Path, python: Path, submission: Path) -> dict:
    """/autograder under tmp_path: the bundle in source/, the file in submission/; Gradescope's
    run_autograder with the grader's python; results.json."""
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    with zipfile.ZipFile(exported / "gs.zip") as archive:
        archive.extractall(root / "source")
    (root / "submission" / "solution.py").write_bytes(submission.read_bytes())
    env = {**os.environ, "ATTNSCORE_AUTOGRADER_ROOT": str(root), "ATTNSCORE_PYTHON": str(python)}
    done = run("bash", root / "source" / "run_autograder", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def _prairielearn(tmp_path: Path, exported: Path, python: Path, submission: Path) -> dict:
    """/grade under tmp_path: the question's tests/, the file in student/; the image's entry point
    (grade.py) with the grader's python; results.json."""
    root = tmp_path / "grade"
    for folder in ("student", "data", "serverFilesCourse", "tests"):
        (root / folder).mkdir(parents=True)
    (root / "data" / "data.json").write_text(json.dumps({"params": {}, "submitted_answers": {}}))
    for path in (exported / "pl" / "question" / "tests").iterdir():
        (root / "tests" / path.name).write_bytes(path.read_bytes())
    (root / "student" / "solution.py").write_bytes(submission.read_bytes())
    env = {**os.environ, "ATTNSCORE_GRADE_ROOT": str(root)}
    done = run(python, exported / "pl" / "image" / "grade.py", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def test_gradescope_run_autograder_from_the_exported_copy(tmp_path, exported, grader_python):
    """Gradescope's way: a correct file 11 of 11; softmax applied 1 of 11 with its diagnosis; the
    hidden case is "hidden case 1", never named."""
    right = _autograder(tmp_path / "right", exported, grader_python, SUBS / "correct_matmul.py")
    assert right["score"] == 11 and {t["status"] for t in right["tests"]} == {"passed"}
    assert len(right["tests"]) == 7 and right["output"] == "dot_product_scores v1: 11/11 points"
    wrong = _autograder(tmp_path / "wrong", exported, grader_python, SUBS / "cosine_similarity.py")
    assert wrong["score"] == 2 and wrong["output"] == "dot_product_scores v1: 2/11 points"
    assert any("Known mistake (cosine_similarity)" in t["output"] for t in wrong["tests"])
    [hidden] = [t for t in wrong["tests"] if t["name"] == "hidden case 1"]
    assert (hidden["score"], hidden["max_score"], hidden["status"]) == (0, 2, "failed")
    text = json.dumps(wrong)
    assert "three_dims_mixed_signs" not in text and "dot_product_scores.yaml:" in text


def test_prairielearn_entry_point_from_the_exported_copy(tmp_path, exported, grader_python):
    """PrairieLearn's way: a correct file scores 1; softmax applied 1/11; "hidden case 1" unnamed."""
    right = _prairielearn(tmp_path / "right", exported, grader_python, SUBS / "correct_matmul.py")
    assert (right["gradable"], right["score"]) == (True, 1.0)
    assert right["message"] == "dot_product_scores v1: 11/11 points"
    wrong = _prairielearn(tmp_path / "wrong", exported, grader_python, SUBS / "cosine_similarity.py")
    assert wrong["gradable"] is True and wrong["score"] == pytest.approx(2 / 11)
    [hidden] = [t for t in wrong["tests"] if t["name"] == "hidden case 1"]
    assert (hidden["description"], hidden["points"], hidden["max_points"]) == ("", 0, 2)
    assert "three_dims_mixed_signs" not in json.dumps(wrong)
