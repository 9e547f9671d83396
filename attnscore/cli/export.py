"""``attnscore export``: deployable graders for course platforms, and the student copy of a spec."""

from __future__ import annotations

import click

from attnscore.cli.errors import BadUsage
from attnscore.cli.options import entry_option, function_option, spec_option

# Gradescope's base images and their Pythons, as attnscore.export.targets.TARGETS has them (spelled
# out so that listing the commands imports no export code; tests/export/test_gradescope.py checks)
IMAGES = ["ubuntu-22.04", "ubuntu-24.04"]
PYTHONS = ["3.10", "3.12"]

__all__ = ["export"]


@click.group("export")
def export() -> None:
    """Build deployable graders for course platforms (Gradescope, PrairieLearn)."""


@export.command("gradescope")
@spec_option("The spec, or an assignment file (every question's spec and reference files go with it).", exists=True)
@click.option(
    "-o", "--output", "output", required=True, type=click.Path(dir_okay=False), help="The zip to write (atomically)."
)
@function_option()
@entry_option("Entry file of multi-file submissions, e.g. solution.py.")
@click.option(
    "--hidden-cases",
    "hidden_cases",
    type=click.Choice(["visible", "summary", "after_due_date", "after_published", "hidden"]),
    default="visible",
    show_default=True,
    help="How students see hidden cases, and so their total: visible (at once, verdict and points only; "
    "the total shown), summary (one test for all hidden cases; the total shown), after_due_date, "
    "after_published or hidden (Gradescope shows no total until they are shown).",
)
@click.option(
    "--image",
    "image",
    type=click.Choice(IMAGES),
    default=None,
    help="The Gradescope base image the bundle is pinned for (default ubuntu-22.04, Gradescope's default).",
)
@click.option(
    "--python",
    "python",
    type=click.Choice(PYTHONS),
    default=None,
    help="The base image's Python instead of its name: 3.10 (ubuntu-22.04) or 3.12 (ubuntu-24.04).",
)
def export_gradescope(
    spec_path: str,
    output: str,
    function: str | None,
    entry: str | None,
    hidden_cases: str,
    image: str | None,
    python: str | None,
) -> None:
    """Write the Gradescope autograder zip (setup.sh, run_autograder, the spec, pinned requirements).

    Upload the zip as the assignment's autograder and select the base image it was built for
    (--image, default ubuntu-22.04); each submission is graded in attnscore's sandbox into
    /autograder/results/results.json.
    """
    from attnscore.export.bundle import ExportError
    from attnscore.export.gradescope import build_gradescope_bundle

    try:
        names = build_gradescope_bundle(
            spec_path, output, function=function, entry=entry, hidden_cases=hidden_cases, python=python, image=image
        )
    except ExportError as exc:
        raise BadUsage(str(exc)) from None
    from attnscore.export.targets import choose_target

    chosen = choose_target(python=python, image=image)
    copied = sum(n.startswith("assignment/") for n in names)
    graded = f"assignment/ ({copied} files of the assignment)" if copied else "spec.yaml"
    click.echo(
        f"wrote {output}: {len(names)} files (setup.sh, run_autograder, {graded}, requirements.txt, python/) "
        f"for the base image {chosen.label}"
    )


@export.command("student-spec")
@spec_option("The full spec, or an assignment file.")
@click.option(
    "-o", "--output", "output", required=True, type=click.Path(dir_okay=False), help="The YAML to write (atomically)."
)
def export_student_spec(spec_path: str, output: str) -> None:
    """Write the student copy of a spec: its visible cases only, for `attnscore check`.

    Same id, version, seed, points and tolerances; hidden worked examples and properties are left
    out (only their number and points are said). Hand this file out, never the full spec.

    For an assignment, OUTPUT is the student copy of the assignment file, and each question's
    student spec goes to OUTPUT's stem + _specs/ beside it; hidden questions, and questions
    graded against the instructor's own reference file, are left out.
    """
    from attnscore.export.bundle import ExportError
    from attnscore.spec.assignment import is_assignment_file

    try:
        if is_assignment_file(spec_path):
            from attnscore.export.student_assignment import write_student_assignment

            written = write_student_assignment(spec_path, output)
            folder = written.specs[0][1].parent
            line = (
                f"wrote {output} and {len(written.specs)} student spec{'s' * (len(written.specs) != 1)} under "
                f"{folder}: the visible cases of {', '.join(q for q, _ in written.specs)}"
            )
            if written.left_out:
                line += "; left out: " + "; ".join(f"{q} ({why})" for q, why in written.left_out)
            click.echo(line)
            return
        from attnscore.export.student_spec import write_student_spec

        text = write_student_spec(spec_path, output)
    except ExportError as exc:
        raise BadUsage(str(exc)) from None
    except OSError as exc:
        raise BadUsage(f"cannot write {output}: {exc.strerror or exc}") from None
    click.echo(
        f"wrote {output}: the visible cases of {spec_path}; {text.hidden_cases} hidden "
        f"case{'s' * (text.hidden_cases != 1)} left out"
    )


@export.command("prairielearn")
@spec_option("The spec, or an assignment file (one question: every function in one upload).", exists=True)
@click.option("-o", "--output", "output", required=True, type=click.Path(file_okay=False), help="The folder to write.")
@click.option("--image", default="attnscore-grader", show_default=True, help="The grader image's name.")
@click.option("--file-name", "file_name", default="solution.py", show_default=True, help="The file students upload.")
@function_option()
@click.option(
    "--timeout", type=click.IntRange(min=10, max=600), default=120, show_default=True, help="Job time limit, s."
)
def export_prairielearn_command(
    spec_path: str, output: str, image: str, file_name: str, function: str | None, timeout: int
) -> None:
    """Write the PrairieLearn grader image context (OUTPUT/image) and a question (OUTPUT/question).

    Build the image with OUTPUT/image/build.sh, then copy OUTPUT/question into the course's
    questions/ folder.
    """
    from attnscore.export.bundle import ExportError
    from attnscore.export.prairielearn import export_prairielearn

    try:
        written = export_prairielearn(
            spec_path, output, image=image, file_name=file_name, function=function, timeout_s=timeout
        )
    except ExportError as exc:
        raise BadUsage(str(exc)) from None
    click.echo(f"wrote {len(written)} files under {output}: image/ (build with image/build.sh) and question/")
