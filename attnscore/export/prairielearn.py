"""The PrairieLearn external grader: ``attnscore export prairielearn --spec SPEC -o DIR``.

Writes two folders under ``DIR``:

- ``image/``: the grader image's build context (``Dockerfile`` and ``grade.py`` from
  ``graders/prairielearn/``, ``requirements.txt`` pinned to the versions installed here,
  ``course-requirements.txt`` and ``system-packages.txt``, the spec's ``environment``
  (:mod:`attnscore.export.course_environment`), ``python/`` = an installable copy of the
  attnscore that exported it, from a checkout or an installed wheel alike) and ``build.sh``
  (``docker build`` for ``linux/amd64`` with this
  Python's version; push the image to Docker Hub for PrairieLearn to pull it, see
  ``docs/notebooks-and-platforms.md``);
- ``question/``: a question folder to copy into a course's ``questions/``: ``info.json``
  (``gradingMethod: External``, ``singleVariant: true`` since the question is not randomised,
  ``externalGradingOptions`` naming the image and its entry point, without the deprecated
  ``enabled``), ``question.html`` (a file upload of the solution and the grader's results) and
  ``tests/spec.yaml`` plus ``tests/options.json`` (PrairieLearn copies ``tests/`` to
  ``/grade/tests`` for the grader; students never see it), and the spec's instructor reference
  files (``function.reference``) at their paths relative to it.

An assignment is one PrairieLearn question (one upload defining every question's function): its
files go to ``tests/assignment/`` in their relative layout (the assignment file, every question's
spec, every instructor reference file: :mod:`attnscore.export.assignment_files`) and
``options.json``'s ``spec`` names the assignment file there; the page lists every function the
upload must define, and the image installs every question's environment together. The grader's
results then have a test per case, named with its question (:mod:`attnscore.report.prairielearn`).

The entry point is :mod:`attnscore.export.prairielearn_grader`.
"""

from __future__ import annotations

import html
import json
import shutil
import sys
import uuid
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

from attnscore.atomic import write_atomic
from attnscore.export.assignment_files import (
    ASSIGNMENT_FOLDER,
    assignment_layout,
    graded_environment,
    load_graded,
    spec_reference_layout,
)
from attnscore.export.bundle import ExportError, graders_dir, pinned_requirements, source_files
from attnscore.export.course_environment import course_files
from attnscore.spec.assignment import Assignment
from attnscore.spec.model import Spec

__all__ = ["export_prairielearn", "ENTRYPOINT", "DEFAULT_IMAGE"]

ENTRYPOINT = "/usr/local/bin/attnscore-grade"
"""Where the image installs ``graders/prairielearn/grade.py``."""
DEFAULT_IMAGE = "attnscore-grader"
_UUID_NAMESPACE = uuid.UUID("1f3c2b0e-6a55-4d8e-9a8e-7d7f3c6b2a10")  # stable question uuids per spec


def _write(path: Path, data: bytes, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data)
    if executable:
        path.chmod(0o755)


def _info(key: str, title: str, tag: str, image: str, timeout_s: int) -> dict[str, object]:
    """The question's ``info.json`` (``key``: what its stable uuid is made from)."""
    return {
        "uuid": str(uuid.uuid5(_UUID_NAMESPACE, key)),
        "title": title,
        "topic": "Attention scores",
        "tags": ["attnscore", tag],
        "type": "v3",
        "singleVariant": True,
        "gradingMethod": "External",
        "externalGradingOptions": {  # no "enabled": deprecated in PrairieLearn's schema (true is its default)
            "image": image,
            "entrypoint": ENTRYPOINT,
            "timeout": timeout_s,
            "enableNetworking": False,
        },
    }


def _signature(question_function: str, spec: Spec) -> str:
    """How the page shows what a question grades: ``softmax(x)``, the spec's fixed keywords
    (``function.keywords``, a contract's options) by name after the tensors (``softmax(x, dim=-1)``);
    for an ``nn.Module`` handed in (a spec's ``function.module``), its constructor's arguments and
    what ``forward`` takes:
    ``MultiHeadSelfAttention(d_model, num_heads).forward(x)`` (its weights are loaded by name)."""
    names = [p for p, _ in spec.contract.parameters]
    keywords = [f"{k}={v!r}" for k, v in dict(spec.contract.options).items()]  # passed by name on every call
    module = spec.module  # specs of a module handed in (function.module)
    if module is None:
        return f"{question_function}({', '.join([*names, *keywords])})"
    weights = {parameter for parameter, _ in module.weights}
    forward = list(module.forward) or [n for n in names if n not in weights]
    return f"{question_function}({', '.join(k for k, _ in module.init)}).forward({', '.join([*forward, *keywords])})"


def _assignment_question(
    assignment: Assignment,
    put: Callable[[str, bytes], None],
    templates: Path,
    image: str,
    timeout_s: int,
    file_name: str,
    out: Path,
) -> None:
    """The question folder of an assignment: one upload, every question's function, the
    assignment's files under ``tests/assignment/``."""
    info = _info(f"assignment:{assignment.id}:{assignment.version}", assignment.title, assignment.id, image, timeout_s)
    put("question/info.json", (json.dumps(info, indent=2, ensure_ascii=False) + "\n").encode())
    items = "\n".join(
        f"    <li><code>{html.escape(_signature(q.function, q.spec), quote=True)}</code>: "
        f"{html.escape(q.title.strip(), quote=True)} ({_points_text(q.points)} points)</li>"
        for q in assignment.questions
    )
    page = (templates / "assignment.html").read_text(encoding="utf-8")
    for key, value in {
        "title": assignment.title,
        "description": assignment.description,
        "file_name": file_name,
        "assignment_id": assignment.id,
        "assignment_version": str(assignment.version),
    }.items():
        page = page.replace("{{" + key + "}}", html.escape(value.strip(), quote=True))
    put("question/question.html", page.replace("{{functions}}", items).encode("utf-8"))
    tests = out / "question" / "tests"
    if (tests / ASSIGNMENT_FOLDER).exists():  # an earlier export's files: none of them may linger
        shutil.rmtree(tests / ASSIGNMENT_FOLDER)
    (tests / "spec.yaml").unlink(missing_ok=True)
    layout = assignment_layout(assignment)
    for name, path in layout.files:
        put(f"question/tests/{name}", path.read_bytes())
    options = {"spec": layout.entry, "entry": file_name}
    put("question/tests/options.json", (json.dumps(options, indent=2) + "\n").encode())


def _points_text(points: Fraction) -> str:
    """Exact points as a page shows them: ``10``, ``2.5``, or ``10/3``."""
    return str(points) if points.denominator != 1 and 10**6 % points.denominator else f"{float(points):g}"


def export_prairielearn(
    spec_path: str | Path,
    output: str | Path,
    *,
    image: str = DEFAULT_IMAGE,
    file_name: str = "solution.py",
    function: str | None = None,
    timeout_s: int = 120,
) -> list[Path]:
    """Write the image context and the question folder for ``spec_path`` under ``output``.

    Args:
        spec_path: the spec file, or an assignment file (validated first, every question's spec too).
        output: a folder (created when missing; its parent must exist). Existing files in it are
            replaced; nothing else there is touched.
        image: the image name the question asks PrairieLearn for (``externalGradingOptions.image``).
        file_name: the file students upload (``solution.py``, or a notebook ``solution.ipynb``).
        function: the graded function's name, when not the spec's (a spec only).
        timeout_s: PrairieLearn's time limit for one grading job, seconds.

    Returns:
        The files written.

    Raises:
        attnscore.spec.located.SpecError: the spec is invalid.
        ExportError: attnscore is not installed as a distribution, the spec (or a question's) is a
            student copy, ``output``'s parent is missing, ``function`` is given with an assignment,
            or ``file_name`` is not a plain ``.py``/``.ipynb`` file name.
    """
    graded = load_graded(spec_path)
    environment = graded_environment(graded, spec_path, function, "a PrairieLearn grader")
    out = Path(output)
    if not out.parent.is_dir():
        raise ExportError(f"cannot write {out}: the directory {out.parent} does not exist")
    if "/" in file_name or Path(file_name).suffix not in (".py", ".ipynb") or file_name.startswith("."):
        raise ExportError(f"--file-name {file_name!r}: expected a file name ending in .py or .ipynb, e.g. solution.py")
    templates = graders_dir("prairielearn")
    written: list[Path] = []

    def put(relative: str, data: bytes, executable: bool = False) -> None:
        _write(out / relative, data, executable)
        written.append(out / relative)

    # The image's build context.
    put("image/Dockerfile", (templates / "Dockerfile").read_bytes())
    put("image/grade.py", (templates / "grade.py").read_bytes(), executable=True)
    put("image/requirements.txt", ("\n".join(pinned_requirements()) + "\n").encode())
    for name, content in course_files(environment, "prairielearn"):
        put(f"image/{name}", content)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    build = (
        "#!/usr/bin/env bash\n# Build the grader image (the pins in requirements.txt were taken with Python "
        f'{python}).\nset -euo pipefail\ncd "$(dirname "$0")"\n'
        "# linux/amd64: the platform PrairieLearn's graders run. Then push it where PrairieLearn pulls from\n"
        f"# (Docker Hub): docker push {image}, and sync the image on the course's Sync page.\n"
        f'docker build --platform linux/amd64 --build-arg PYTHON_VERSION={python} -t "${{1:-{image}}}" .\n'
    )
    put("image/build.sh", build.encode(), executable=True)
    if (out / "image" / "python").exists():
        shutil.rmtree(out / "image" / "python")
    for name, content in source_files():
        put(f"image/python/{name}", content)

    # The question.
    if isinstance(graded, Assignment):
        _assignment_question(graded, put, templates, image, timeout_s, file_name, out)
        return written
    spec = graded
    name = function or spec.function
    keywords = [f"{k}={v!r}" for k, v in dict(spec.contract.options).items()]  # passed by name on every call
    signature = f"{name}({', '.join([*(p for p, _ in spec.contract.parameters), *keywords])})"
    info = _info(f"{spec.id}:{spec.version}", spec.title, spec.id, image, timeout_s)
    put("question/info.json", (json.dumps(info, indent=2, ensure_ascii=False) + "\n").encode())
    page = (templates / "question.html").read_text(encoding="utf-8")
    for key, value in {
        "title": spec.title,
        "description": spec.description,
        "signature": signature,
        "file_name": file_name,
        "spec_id": spec.id,
        "spec_version": str(spec.version),
    }.items():
        page = page.replace("{{" + key + "}}", html.escape(value.strip(), quote=True))
    put("question/question.html", page.encode("utf-8"))
    if (out / "question" / "tests" / ASSIGNMENT_FOLDER).exists():  # an earlier export of an assignment here
        shutil.rmtree(out / "question" / "tests" / ASSIGNMENT_FOLDER)
    put("question/tests/spec.yaml", Path(spec_path).read_bytes())
    for relative, path in spec_reference_layout(spec, "question/tests"):  # the instructor's own reference
        if relative == "question/tests/options.json":
            raise ExportError(f"cannot carry the spec's reference file {path}: the question's tests/ has options.json")
        put(relative, path.read_bytes())
    options = {"function": name} | ({"entry": file_name} if file_name else {})
    put("question/tests/options.json", (json.dumps(options, indent=2) + "\n").encode())
    return written
