"""``attnscore grade``: submissions against a spec, each in a sandboxed worker; reports and exit codes.

The checks that need no grading come first (the output folder, the scheduler address, the
device, the spec), so that a mistake costs nothing; the batch itself runs in
:func:`attnscore.cli.batch.grade_batch`.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sys

import click

from attnscore.cli.errors import EXIT_INTERNAL, BadInput, BadUsage, MachineFailure
from attnscore.cli.options import (
    check_spec_dtype,
    device_option,
    dtype_option,
    entry_option,
    format_option,
    function_option,
    outside_reference_option,
    seconds_option,
    shrink_steps_option,
    spec_option,
    time_budget_option,
)
from attnscore.cli.output import check_output_path, finish, stdout_console, write_atomically

__all__ = ["grade"]


@click.command("grade")
@click.argument("submissions", nargs=-1, required=True, type=click.Path())
@spec_option("The spec to grade against, or an assignment file (several questions, each a spec).")
@outside_reference_option()
@function_option()
@format_option(
    "text",
    "json",
    "gradescope",
    "junit",
    help="text for people, json for tools, gradescope for results.json, junit for JUnit XML (a testsuite per "
    "question of an assignment, per submission).",
)
@click.option(
    "--output",
    "output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the report to FILE instead of stdout (written atomically).",
)
@dtype_option("Dtype the inputs are cast to (default: the spec's first).")
@click.option(
    "--seed", type=click.IntRange(min=0), default=None, help="Base seed for generated inputs (default: the spec's)."
)
@seconds_option("--timeout", "timeout", 600, help="Wall-time limit per call in seconds (default: the spec's).")
@time_budget_option()
@click.option(
    "--jobs",
    type=click.IntRange(min=1, max=64),
    default=1,
    show_default=True,
    help="Grader processes working in parallel (each submission still gets its own sandbox).",
)
@shrink_steps_option()
@entry_option(
    "Entry file of folder submissions, e.g. solution.py (default: the one top-level .py file that "
    "defines the function). A folder holding FILE is one submission."
)
@click.option(
    "--no-template",
    "no_template",
    is_flag=True,
    default=False,
    help="Start a fresh interpreter for every worker instead of forking it from the pre-started worker "
    "template (slower; for comparison, or when the template cannot run).",
)
@device_option(
    "cpu, cuda or cuda:N: the inputs are built on this device; each worker sees only that GPU "
    "(see docs/gpu-and-kernel-timing.md)."
)
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False),
    default=None,
    metavar="DIR",
    help="Class run: keep a resumable gradebook in DIR/gradebook.sqlite and write DIR/feedback/*.txt, "
    "DIR/grades.csv and DIR/report.html; only new or changed submissions are graded.",
)
@click.option(
    "--hidden-cases",
    "hidden_cases",
    type=click.Choice(["visible", "summary", "after_due_date", "after_published", "hidden"]),
    default=None,
    help="With --format gradescope: how hidden cases are shown, and so whether students see their total "
    "(default visible: at once, verdict and points only; see docs/notebooks-and-platforms.md).",
)
@click.option(
    "--scheduler",
    "scheduler",
    default=None,
    metavar="ADDRESS",
    help="Grade on the dask.distributed cluster whose scheduler is ADDRESS (e.g. tcp://host:8786); "
    "needs attnscore[dask].",
)
def grade(
    submissions: tuple[str, ...],
    spec_path: str,
    allow_outside_reference: bool,
    function: str | None,
    fmt: str,
    output: str | None,
    dtype: str | None,
    seed: int | None,
    timeout: float | None,
    time_budget: float | None,
    shrink_steps: int,
    jobs: int,
    entry: str | None,
    out: str | None,
    scheduler: str | None,
    no_template: bool,
    device: str,
    hidden_cases: str | None,
) -> None:
    """Grade SUBMISSIONS against a spec, each in a sandboxed worker.

    A submission is a .py file or a folder of files (one student's upload: an entry file and its
    helper modules). A folder of .py files and student folders is a class: each file and each
    subfolder is one submission. With --format gradescope the folder given is one submission.

    With --out DIR, a class run: results are committed to DIR/gradebook.sqlite as they finish, so
    a run killed at any moment and started again grades only what is left; unchanged submissions
    are not graded again, changed ones (or a changed spec) are. See docs/class-grading.md.

    Exit code 0 when every case of every submission passed, 1 when some case failed, 3 when the
    grading machine failed (a grader error, or a class run could not store or write some student's
    outputs; the other submissions are still graded and reported).
    """
    from attnscore.sandbox.limits import Limits
    from attnscore.sandbox.processes import warm_template  # neither imports torch

    # A class run into a folder that already holds a gradebook may have nothing left to grade:
    # its template starts once the run knows it grades something (grade_batch's ``warm``).
    rerun = out is not None and os.path.isfile(os.path.join(out, "gradebook.sqlite"))  # class_run.GRADEBOOK

    def warm() -> None:
        warm_template(Limits(template=False if no_template else None), wait=False)

    if scheduler is None and device == "cpu" and not rerun:
        # first: the worker template loads torch in its own process while this one imports the
        # grader and loads the spec (both import torch as well)
        warm()

    from rich.console import Console

    from attnscore.cli.batch import grade_batch, has_dask
    from attnscore.grade.cluster import ClusterError, check_scheduler_address
    from attnscore.grade.environment import environment_problem
    from attnscore.grade.gradebook import GradebookError
    from attnscore.report import batch_table, batch_to_json, gradescope_results, submission_text, submission_to_json
    from attnscore.report.gradescope import DEFAULT_HIDDEN_CASES
    from attnscore.report.results import Verdict
    from attnscore.sandbox.gpu import device_problem
    from attnscore.sandbox.launch import preflight, spec_exposure
    from attnscore.spec.assignment import Assignment, load_spec_or_assignment
    from attnscore.submission.files import find_submissions

    if output:
        check_output_path(output)
    if scheduler is not None:
        try:
            scheduler = check_scheduler_address(scheduler)
        except ClusterError as exc:
            raise BadInput(f"--scheduler: {exc}") from None
    if device != "cpu":  # never touch CUDA in the grader for a CPU run
        import torch

        available = torch.cuda.is_available()
        wrong = device_problem(device, available, torch.cuda.device_count() if available else 0)
        if wrong is not None:
            raise BadUsage(wrong)
    if hidden_cases is not None and fmt != "gradescope":
        raise BadUsage(f"--hidden-cases {hidden_cases} is for --format gradescope, found --format {fmt}")
    if out is not None and fmt == "gradescope":
        raise BadUsage("--out (a class run) and --format gradescope (one student) cannot be combined")
    if scheduler is None and device != "cpu" and not rerun:  # after the device check: torch loads beside the spec
        warm()
    graded = load_spec_or_assignment(spec_path, allow_outside_reference=allow_outside_reference)
    if isinstance(graded, Assignment):
        if function is not None:
            raise BadUsage("--function does not apply to an assignment: each question names its function")
        if scheduler is not None:
            raise BadUsage("--scheduler does not take an assignment yet: grade it on this machine (--jobs N)")
    specs = [q.spec for q in graded.questions] if isinstance(graded, Assignment) else [graded]
    for spec in specs:
        if spec.student_copy is not None:
            raise BadUsage(f"{spec.path} is a student copy (its hidden cases are left out): grade with the full spec")
    ours = [p for p in (out, output) if p is not None]  # never graded as a student on the next run
    paths = find_submissions(list(submissions), entry=entry, one=fmt == "gradescope", exclude=ours)
    if fmt == "gradescope" and len(paths) != 1:
        raise BadUsage(f"--format gradescope grades exactly one submission (a file, or one folder), found {len(paths)}")
    for spec in specs:
        check_spec_dtype(dtype, spec)
    from attnscore.grade.time_budget import assignment_limits, grading_limits

    template = False if no_template else None
    try:
        if isinstance(graded, Assignment):
            limits = assignment_limits(
                graded, timeout=timeout, time_budget=time_budget, template=template, device=device
            )
        else:
            limits = grading_limits(graded, timeout=timeout, time_budget=time_budget, template=template, device=device)
    except ValueError as exc:
        raise BadUsage(str(exc)) from None
    # SIGTERM (a cancelled job, `timeout`) unwinds like Ctrl-C: every sandbox is closed, its
    # processes killed and its temporary folders removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    problem = preflight(limits)
    if problem is not None:
        raise MachineFailure(f"the sandbox cannot run submissions on this machine: {problem} (nothing was graded)")
    for spec in specs:
        problem = environment_problem(spec, limits)
        if problem is not None:
            raise MachineFailure(f"{problem} (nothing was graded)")
    # the files a submission must not read: the spec (its hidden expected values), the instructor's references
    if isinstance(graded, Assignment):
        exposures = [spec_exposure(str(f), limits) for f in graded.files()]
    else:
        exposures = [spec_exposure(spec_path, limits, graded.reference_files)]
    for exposed in exposures:
        if exposed is not None:
            click.echo(f"Warning: {exposed}", err=True)
    if scheduler is not None and not has_dask():
        raise BadUsage(
            "--scheduler needs dask.distributed, which is not installed; install it with "
            "pip install 'attnscore[dask]' (here and on every worker)"
        )
    err = Console(stderr=True)
    options = {
        **({} if isinstance(graded, Assignment) else {"function": function}),
        "dtype": dtype,
        "seed": seed,
        "limits": limits,
        "shrink_steps": shrink_steps,
        "cache_cases": True,  # a cold run reads the spec's built cases (attnscore.check.case_cache)
    }
    try:
        # a class's text table reads each result's summary; one student's text and the other formats show all of it
        whole = fmt != "text" or len(paths) == 1
        results, run = grade_batch(
            paths, graded, out, scheduler, jobs, err, options, warm=None if scheduler else warm, whole=whole
        )
    except (GradebookError, ClusterError) as exc:
        raise BadInput(str(exc)) from None
    if run is not None:
        click.echo(
            f"class run: {len(run.graded)} graded, {len(run.reused)} unchanged (not graded again); "
            f"wrote {run.out / 'grades.csv'}, {run.out / 'report.html'} and feedback/",
            err=True,
        )
        for student, problem in run.problems:
            click.echo(f"Error: {student}: {problem}", err=True)
    if fmt == "text":
        from attnscore.sandbox.launch import protections

        click.echo(f"sandbox: {protections(limits)}", err=True)
        recorded = Console(file=io.StringIO(), record=True, width=140, color_system=None, force_jupyter=False)
        console = recorded if output else stdout_console()
        console.print(submission_text(results[0]) if len(results) == 1 else batch_table(results))
        if output:
            write_atomically(output, console.export_text())
    else:
        if fmt == "junit":
            from attnscore.report.junit import junit_xml

            text = junit_xml(results)
        else:
            if fmt == "json":
                data = submission_to_json(results[0]) if len(results) == 1 else batch_to_json(results)
            else:
                data = gradescope_results(results[0], hidden_cases or DEFAULT_HIDDEN_CASES)
            text = json.dumps(data, indent=2, allow_nan=False, ensure_ascii=False) + "\n"
        if output:
            write_atomically(output, text)
        else:
            sys.stdout.write(text)
    broken = [r for r in results if any(c.verdict is Verdict.GRADER_ERROR for c in r.cases)]
    if broken:
        raise MachineFailure(f"grader error while grading {', '.join(r.submission for r in broken)}")
    if run is not None and run.problems:  # reported above, and every other student's outputs were written
        sys.exit(EXIT_INTERNAL)
    finish(all(r.all_passed for r in results))
