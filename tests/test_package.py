"""Tests that attnscore installs like a real package: ``python -m build`` makes a wheel and an sdist
with the bundled specs and schema inside, and a fresh venv with the wheel installed runs the
command line and grades a submission from outside the checkout.

Skipped when ``build`` is not installed (it is in the ``dev`` extra). The build runs without
isolation (``--no-isolation``, with this environment's setuptools), so it needs no network; the
fresh venv reuses this environment's installed dependencies through a ``.pth`` line and installs
only the wheel (``pip install --no-deps --no-index``).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted(p.name for p in (ROOT / "specs").glob("*.yaml"))
PRACTICE = sorted(p.name for p in (ROOT / "specs" / "practice").glob("*.yaml"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("build") is None or importlib.util.find_spec("setuptools") is None,
        reason="python -m build needs the build package (pip install 'attnscore[dev]') and setuptools",
    ),
]


def run(*argv: str | Path, cwd: Path, timeout: float = HANG_GUARD_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist and the wheel, built by ``python -m build`` from the checkout."""
    out = tmp_path_factory.mktemp("dist")
    done = run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT, cwd=out, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory) -> Path:
    """A fresh venv holding the wheel, reusing this environment's dependencies (never its attnscore)."""
    where = tmp_path_factory.mktemp("venv") / "venv"
    done = run(sys.executable, "-m", "venv", "--without-pip", where, cwd=where.parent)
    assert done.returncode == 0, done.stderr
    python = where / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=where).stdout.strip()
    ours = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    Path(site, "machine-packages.pth").write_text("".join(f"{p}\n" for p in ours))  # plain paths: no editable hook
    [wheel] = dist.glob("*.whl")
    done = run(
        sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "--force-reinstall",
        wheel, cwd=where.parent, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return where


def test_wheel_and_sdist_hold_the_bundled_specs_and_schema(dist):
    """Every spec, practice family and the JSON Schema are inside both archives, beside the code."""
    [wheel] = dist.glob("*.whl")
    [sdist] = dist.glob("*.tar.gz")
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    wanted = {f"attnscore/bundled_specs/{n}" for n in SPECS} | {
        f"attnscore/bundled_specs/practice/{n}" for n in PRACTICE
    }
    wanted |= {
        "attnscore/bundled_specs/spec-v1.schema.json",
        "attnscore/bundled_specs/assignment-v1.schema.json",
        "attnscore/cli/__init__.py",
        "attnscore/boundary/worker.py",
    }
    assert wanted <= in_wheel, sorted(wanted - in_wheel)
    assert wanted | {"pyproject.toml", "README.md"} <= in_sdist, sorted(wanted - in_sdist)
    assert any(n.endswith("entry_points.txt") for n in in_wheel)


def test_the_installed_wheel_runs_from_outside_the_checkout(venv, tmp_path):
    """`attnscore verify --help`, `attnscore specs` and `attnscore schema` run from the wheel, outside the checkout."""
    attnscore = venv / "bin" / "attnscore"
    where = run(venv / "bin" / "python", "-c", "import attnscore; print(attnscore.__file__)", cwd=tmp_path)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr
    helped = run(attnscore, "verify", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and helped.stdout.startswith("Usage: attnscore verify"), helped.stderr
    specs = run(attnscore, "specs", cwd=tmp_path)
    assert specs.returncode == 0, specs.stderr
    for name in SPECS:  # each bundled spec, listed from the installed package
        assert f"{venv}/lib/" in specs.stdout and f"/attnscore/bundled_specs/{name}" in specs.stdout, name
    schema = run(attnscore, "schema", cwd=tmp_path)
    assert schema.returncode == 0 and "properties" in json.loads(schema.stdout), schema.stderr


def test_the_installed_wheel_grades_a_submission_in_its_sandbox(venv, tmp_path):
    """A correct example graded by the installed wheel, sandboxed, against its bundled spec: 11 of 11."""
    (tmp_path / "solution.py").write_bytes(
        (ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py").read_bytes()
    )
    python = venv / "bin" / "python"
    spec = run(
        python, "-c", "import attnscore, os; print(os.path.join(os.path.dirname(attnscore.__file__), "
        "'bundled_specs', 'dot_product_scores.yaml'))", cwd=tmp_path,
    ).stdout.strip()  # fmt: skip
    done = run(venv / "bin" / "attnscore", "grade", "solution.py", "--spec", spec, "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert (result["score"], result["error"]) == (11, None)
