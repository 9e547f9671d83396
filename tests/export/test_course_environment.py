"""The course's environment in the exported graders (attnscore.export.course_environment): the files
that carry a spec's packages and torch.compile's system packages, and the Gradescope setup.sh and
PrairieLearn Dockerfile steps that install them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from attnscore.export.gradescope import build_gradescope_bundle
from attnscore.export.prairielearn import export_prairielearn
from attnscore.export.prairielearn_grader import grade_job

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "dot_product_scores.yaml"
ABSENT = "attnscore-course-package-that-is-not-installed"
GUARD_S = 600


def _spec_with(tmp_path: Path, environment: str) -> Path:
    text = SPEC.read_text().replace("nonfinite: match\n", f"nonfinite: match\nenvironment: {environment}\n", 1)
    path = tmp_path / "dot_product_scores.yaml"
    path.write_text(text)
    return path


def _bundle(tmp_path: Path, spec: Path) -> Path:
    path = tmp_path / "autograder.zip"
    build_gradescope_bundle(spec, path)
    return path


def test_a_gradescope_bundle_carries_the_courses_environment(tmp_path):
    """course-requirements.txt lists the packages as written; system-packages.txt g++ and python3-dev."""
    spec = _spec_with(tmp_path, '{packages: [einops, "jaxtyping>=0.2"], torch_compile: true}')
    with zipfile.ZipFile(_bundle(tmp_path, spec)) as archive:
        requirements = archive.read("course-requirements.txt").decode().splitlines()
        system = archive.read("system-packages.txt").decode()
    assert requirements[0].startswith("#") and requirements[1:] == ["einops", "jaxtyping>=0.2"]
    assert system == "g++\npython3-dev\n"


def test_a_spec_without_an_environment_adds_nothing_to_install(tmp_path):
    """No packages (a comment only) and no system packages."""
    with zipfile.ZipFile(_bundle(tmp_path, SPEC)) as archive:
        requirements = archive.read("course-requirements.txt").decode().splitlines()
        system = archive.read("system-packages.txt")
    assert [line for line in requirements if not line.startswith("#")] == [] and system == b""


STUB_PYTHON3 = """\
#!/usr/bin/env bash
# The image's python3: says its version; its "venv" logs what it is asked to do.
if [ "$1" = "-c" ]; then echo "3.10"; exit 0; fi
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    mkdir -p "$3/bin"
    printf '#!/usr/bin/env bash\\necho "python $*" >> "$SETUP_LOG"\\n' > "$3/bin/python"
    printf 'if [ "$3" = freeze ]; then echo numpy==2.2.6; fi\\n' >> "$3/bin/python"
    printf '#!/usr/bin/env bash\\necho "attnscore $*" >> "$SETUP_LOG"\\n' > "$3/bin/attnscore"
    chmod +x "$3/bin/python" "$3/bin/attnscore"
    exit 0
fi
echo "unexpected python3 $*" >&2
exit 9
"""

STUB_APT = """\
#!/usr/bin/env bash
echo "apt-get $*" >> "$SETUP_LOG"
"""


def _run_setup(tmp_path: Path, spec: Path) -> list[str]:
    """setup.sh of ``spec``'s bundle with python3 and apt-get stood in for: the commands it ran, in order."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(_bundle(tmp_path, spec)) as archive:
        archive.extractall(root / "source")
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "python3").write_text(STUB_PYTHON3)
    (stubs / "apt-get").write_text(STUB_APT)
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    log = tmp_path / "setup.log"
    env = {
        **os.environ,
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "SETUP_LOG": str(log),
        "ATTNSCORE_AUTOGRADER_ROOT": str(root),
        "ATTNSCORE_SETUP_PYTHON3": str(stubs / "python3"),
        "ATTNSCORE_SETUP_VENV": str(tmp_path / "opt" / "venv"),
    }
    done = subprocess.run(
        ["bash", str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True, timeout=GUARD_S
    )
    assert done.returncode == 0, done.stderr
    source = str(root / "source")
    lines = log.read_text().splitlines()
    return [re.sub(r"/\S*/tmp\.\w+", "CONSTRAINTS", line).replace(source, "SOURCE") for line in lines]


def test_setup_installs_the_system_packages_and_the_courses_packages_after_the_pins(tmp_path):
    """apt installs g++ and python3-dev; pip installs the course's packages constrained by what is installed."""
    ran = _run_setup(tmp_path, _spec_with(tmp_path, "{packages: [einops], torch_compile: true}"))
    assert "apt-get install -y --no-install-recommends g++ python3-dev" in ran
    pins = ran.index("python -m pip install --no-cache-dir --only-binary=:all: -r SOURCE/requirements.txt")
    freeze = ran.index("python -m pip freeze --all")
    course = ran.index("python -m pip install --no-cache-dir -c CONSTRAINTS -r SOURCE/course-requirements.txt")
    attnscore = ran.index("python -m pip install --no-cache-dir --no-deps SOURCE/python")
    assert pins < freeze < course < attnscore


def test_setup_installs_nothing_more_for_a_spec_without_an_environment(tmp_path):
    """Neither apt nor pip is asked for anything beyond the grader's own."""
    ran = _run_setup(tmp_path, SPEC)
    assert not any("course-requirements" in line or "freeze" in line for line in ran), ran
    assert not any("g++" in line for line in ran), ran


def test_the_prairielearn_image_installs_the_courses_environment(tmp_path):
    """The image context holds both files; the Dockerfile installs g++ (its Python has headers) and the packages."""
    spec = _spec_with(tmp_path, "{packages: [einops], torch_compile: true}")
    out = tmp_path / "pl"
    export_prairielearn(spec, out)
    image = out / "image"
    assert (image / "system-packages.txt").read_text() == "g++\n"
    assert (image / "course-requirements.txt").read_text().splitlines()[1:] == ["einops"]
    dockerfile = (image / "Dockerfile").read_text()
    apt = "apt-get install -y --no-install-recommends bubblewrap $(cat /opt/attnscore/system-packages.txt)"
    assert apt in dockerfile
    assert "pip install --no-cache-dir -c /opt/attnscore/constraints.txt -r /opt/attnscore/course-requirements.txt" in (
        dockerfile
    )


def test_a_prairielearn_job_without_a_listed_package_is_not_gradable(tmp_path, monkeypatch):
    """The course's problem, not the student's: gradable false, saying what to install."""
    root = tmp_path / "grade"
    (root / "student").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "student" / "solution.py").write_text("def scores(q, keys):\n    return keys @ q\n")
    (root / "tests" / "spec.yaml").write_bytes(_spec_with(tmp_path, f"{{packages: [{ABSENT}]}}").read_bytes())
    (root / "tests" / "options.json").write_text(json.dumps({"function": "scores"}))
    data = grade_job(root)
    assert data["gradable"] is False
    assert data["message"] == (
        "The grader cannot run submissions on this machine: the spec's environment lists packages this machine "
        f"lacks: {ABSENT} (not installed); install them with: pip install {ABSENT}"
    )


@pytest.mark.parametrize("platform", ["gradescope", "prairielearn"])
def test_system_packages_are_empty_without_torch_compile(platform):
    """Listing packages alone needs no system package."""
    from attnscore.export.course_environment import system_packages
    from attnscore.spec.environment import Environment

    assert system_packages(Environment(("einops",)), platform) == b""
