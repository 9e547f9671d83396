"""The Gradescope autograder bundle: ``attnscore export gradescope --spec SPEC -o autograder.zip``.

The zip holds, at its top level (Gradescope unpacks it into ``/autograder/source``):

- ``setup.sh`` and ``run_autograder`` from ``graders/gradescope/`` (see their comments);
- ``spec.yaml``, the spec (setup.sh makes ``/autograder/source`` readable by root only), with its
  instructor reference files (``function.reference``) at their paths relative to it; or, for an
  assignment, ``assignment/`` holding the assignment file, every question's spec and every
  instructor reference file in their relative layout
  (:mod:`attnscore.export.assignment_files`), and ``spec-path.txt``, the assignment file's path in
  the bundle, which ``run_autograder`` grades with (``--spec``) instead of ``spec.yaml``;
- ``requirements.txt``, every dependency pinned for the target base image
  (:mod:`attnscore.export.targets`: Ubuntu 22.04 with Python 3.10 by default, or 24.04 with 3.12),
  ``python-version.txt``, that image's Python, and ``base-image.txt``, its name (setup.sh stops
  before installing anything when the image's ``python3`` is another);
- ``grade-options.txt``, extra ``attnscore grade`` options, one per line (``--function``, ``--entry``,
  ``--hidden-cases``: how students see hidden cases and their total, see :mod:`attnscore.report.gradescope`);
- ``course-requirements.txt`` and ``system-packages.txt``, the spec's ``environment`` (every
  question's together, for an assignment): the packages submissions may import and the system
  packages ``torch.compile`` needs, installed by setup.sh (:mod:`attnscore.export.course_environment`);
- ``python/``, an installable copy of the attnscore that exported it (its package files, licence
  and a ``pyproject.toml`` from its metadata: :func:`attnscore.export.bundle.source_files`),
  installed by setup.sh. Exporting needs no source checkout: an installed wheel does it.

Run as a module, it writes the results file ``run_autograder`` falls back on when ``attnscore
grade`` wrote none: ``python -m attnscore.export.gradescope RESULTS EXIT_STATUS STDERR_FILE``.
"""

from __future__ import annotations

import io
import json
import stat
import sys
import zipfile
from pathlib import Path

from attnscore.atomic import write_atomic
from attnscore.boundary.untrusted import clean_text
from attnscore.export.assignment_files import (
    assignment_layout,
    graded_environment,
    load_graded,
    spec_reference_layout,
)
from attnscore.export.bundle import ExportError, graders_dir, source_files
from attnscore.export.course_environment import COURSE_REQUIREMENTS, SYSTEM_PACKAGES, course_files
from attnscore.export.grader_paths import without_grader_path
from attnscore.export.targets import check_target, choose_target, target_requirements
from attnscore.report.gradescope import DEFAULT_HIDDEN_CASES, HIDDEN_CASES

__all__ = ["build_gradescope_bundle", "failure_results", "SPEC_PATH"]

SPEC_PATH = "spec-path.txt"
"""The member naming the assignment file (an assignment's bundle; a spec's bundle has ``spec.yaml``)."""

_EXECUTABLE = stat.S_IFREG | 0o755
_READABLE = stat.S_IFREG | 0o644
_FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # the same spec and versions give the same zip, byte for byte


def _add(archive: zipfile.ZipFile, name: str, data: bytes, mode: int = _READABLE) -> None:
    info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
    info.external_attr = mode << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


def build_gradescope_bundle(
    spec_path: str | Path,
    output: str | Path,
    *,
    function: str | None = None,
    entry: str | None = None,
    hidden_cases: str = DEFAULT_HIDDEN_CASES,
    python: str | None = None,
    image: str | None = None,
) -> list[str]:
    """Write the autograder zip for ``spec_path`` to ``output`` (atomically) and return its member names.

    Args:
        spec_path: a spec file or an assignment file (validated first, every question's spec too:
            an invalid one builds nothing).
        output: the ``.zip`` to write; its folder must exist.
        function: the graded function's name, when not the spec's (a spec only: an assignment
            names each question's function).
        entry: the entry file of a multi-file submission (``--entry``), e.g. ``solution.py``.
        hidden_cases: how students see the hidden cases, and so whether they see their total
            (one of :data:`attnscore.report.gradescope.HIDDEN_CASES`; the default, ``visible``,
            shows them at once with verdict and points only, and the total with them).
        python: the target image's Python (``"3.10"`` or ``"3.12"``), when ``image`` is not given.
        image: the Gradescope base image (``"ubuntu-22.04"``, the default, or ``"ubuntu-24.04"``).

    Raises:
        attnscore.spec.located.SpecError: the spec is invalid.
        ExportError: attnscore is not installed as a distribution, ``output``'s folder does not
            exist, the spec (or a question's) is a student copy, ``function`` is given with an
            assignment, ``hidden_cases`` is not one of the choices, or no
            target matches ``python``/``image`` or its pins cannot carry attnscore
            (:func:`attnscore.export.targets.check_target`); nothing is written then.
    """
    if hidden_cases not in HIDDEN_CASES:
        raise ExportError(f"expected --hidden-cases to be one of {', '.join(HIDDEN_CASES)}, found {hidden_cases!r}")
    from attnscore.spec.model import Spec

    graded = load_graded(spec_path)  # invalid specs and assignments stop here, located
    environment = graded_environment(graded, spec_path, function, "a Gradescope autograder")
    if isinstance(graded, Spec):
        references = spec_reference_layout(graded)
        ours = {"setup.sh", "run_autograder", "spec.yaml", "requirements.txt", "python-version.txt", "base-image.txt",
                "grade-options.txt", COURSE_REQUIREMENTS, SYSTEM_PACKAGES, SPEC_PATH}  # fmt: skip
        for name, _ in references:
            if name in ours or name.startswith("python/"):
                raise ExportError(f"cannot carry the spec's reference file {name}: the bundle has a file of that name")
    platform = choose_target(python=python, image=image)
    check_target(platform)
    target = Path(output)
    if not target.parent.is_dir():
        raise ExportError(f"cannot write {target}: the directory {target.parent} does not exist")
    scripts = graders_dir("gradescope")
    options = [
        *(["--function", function] if function else []),
        *(["--entry", entry] if entry else []),
        *["--hidden-cases", hidden_cases],
    ]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        _add(archive, "setup.sh", (scripts / "setup.sh").read_bytes(), _EXECUTABLE)
        _add(archive, "run_autograder", (scripts / "run_autograder").read_bytes(), _EXECUTABLE)
        if isinstance(graded, Spec):
            _add(archive, "spec.yaml", Path(spec_path).read_bytes())
            for name, path in references:  # the instructor's own reference, beside the spec
                _add(archive, name, path.read_bytes())
        else:
            layout = assignment_layout(graded)
            _add(archive, SPEC_PATH, f"{layout.entry}\n".encode())
            for name, path in layout.files:
                _add(archive, name, path.read_bytes())
        _add(archive, "requirements.txt", ("\n".join(target_requirements(platform)) + "\n").encode())
        _add(archive, "python-version.txt", f"{platform.python}\n".encode())
        _add(archive, "base-image.txt", f"{platform.image}\n".encode())
        _add(archive, "grade-options.txt", "".join(f"{o}\n" for o in options).encode())
        for name, content in course_files(environment, "gradescope"):
            _add(archive, name, content)
        for name, content in source_files():
            _add(archive, f"python/{name}", content)
        names = archive.namelist()
    write_atomic(target, buffer.getvalue())
    return names


def failure_results(status: int, stderr: str, submission: str | Path | None = None) -> dict[str, object]:
    """Gradescope results for a run where ``attnscore grade`` wrote nothing: score 0 and why.

    ``status`` 2 is the submission's problem (nothing gradable in it); anything else is the
    machine's, and says so. ``submission``, the folder that was graded
    (``/autograder/submission``), is taken out of the text
    (:func:`attnscore.export.grader_paths.without_grader_path`).
    """
    if submission is not None:
        stderr = without_grader_path(stderr, submission)
    lines = [line.removeprefix("Error: ") for line in stderr.splitlines() if line.strip()]
    reason = clean_text("\n".join(lines[-5:]) or f"attnscore exited with status {status}", 2000)
    if status == 2:
        output = f"Your submission could not be graded: {reason}"
    else:
        output = f"The autograder could not grade this submission (a problem of the grading machine): {reason}"
    return {"score": 0, "output": output, "output_format": "text", "visibility": "visible", "tests": []}


def _main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m attnscore.export.gradescope RESULTS EXIT_STATUS STDERR_FILE", file=sys.stderr)
        return 2
    results, status, errors = argv
    try:
        stderr = Path(errors).read_text(encoding="utf-8", errors="replace")
    except OSError:
        stderr = ""
    submission = Path(results).parent.parent / "submission"  # RESULTS is ROOT/results/results.json
    data = failure_results(int(status) if status.lstrip("-").isdigit() else -1, stderr, submission)
    write_atomic(results, (json.dumps(data, indent=2, allow_nan=False) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
