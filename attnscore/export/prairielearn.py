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
  ``/grade/tests`` for the grader; students never see it).

The entry point is :mod:`attnscore.export.prairielearn_grader`.
"""

from __future__ import annotations

import html
import json
import shutil
import sys
import uuid
from pathlib import Path

from attnscore.atomic import write_atomic
from attnscore.export.bundle import ExportError, graders_dir, pinned_requirements, reference_files, source_files
from attnscore.export.course_environment import (
    COURSE_REQUIREMENTS,
    SYSTEM_PACKAGES,
    course_requirements,
    system_packages,
)
from attnscore.export.student_spec import refuse_student_copy
from attnscore.spec.load import load_spec

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
        spec_path: the spec file (validated first).
        output: a folder (created when missing; its parent must exist). Existing files in it are
            replaced; nothing else there is touched.
        image: the image name the question asks PrairieLearn for (``externalGradingOptions.image``).
        file_name: the file students upload (``solution.py``, or a notebook ``solution.ipynb``).
        function: the graded function's name, when not the spec's.
        timeout_s: PrairieLearn's time limit for one grading job, seconds.

    Returns:
        The files written.

    Raises:
        attnscore.spec.located.SpecError: the spec is invalid.
        ExportError: attnscore is not installed as a distribution, the spec is a student copy, ``output``'s parent is
            missing, or ``file_name`` is not a plain ``.py``/``.ipynb`` file name.
    """
    spec = load_spec(spec_path)
    refuse_student_copy(spec, "a PrairieLearn grader")
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
    put(f"image/{COURSE_REQUIREMENTS}", course_requirements(spec.environment))
    put(f"image/{SYSTEM_PACKAGES}", system_packages(spec.environment, "prairielearn"))
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
    name = function or spec.function
    signature = f"{name}({', '.join(p for p, _ in spec.contract.parameters)})"
    info = {
        "uuid": str(uuid.uuid5(_UUID_NAMESPACE, f"{spec.id}:{spec.version}")),
        "title": spec.title,
        "topic": "Attention scores",
        "tags": ["attnscore", spec.id],
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
    put("question/tests/spec.yaml", Path(spec_path).read_bytes())
    for name, content in reference_files(spec_path, spec.reference_files):  # a spec's own reference, beside it
        put(f"question/tests/{name}", content)
    options = {"function": name} | ({"entry": file_name} if file_name else {})
    put("question/tests/options.json", (json.dumps(options, indent=2) + "\n").encode())
    return written
