"""The ``attnscore`` command line: one entry point, subcommands along the users' jobs.

Exit codes: 0 all passed, 1 some case failed, 2 usage error or invalid spec, 3 internal error.
Errors are one clear line (or one line per spec problem) on stderr, never a traceback.
"""

from __future__ import annotations

import functools
import gc
import importlib
import io
import json
import math
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from attnscore.spec.located import SpecError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


def _stdout() -> Console:
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:  # pipes and files: wide enough for tables, no colour codes
        console = Console(highlight=False, soft_wrap=False, width=140, color_system=None)
    return console


def _fail(message: str, code: int) -> None:
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


def handle_errors(command: F) -> F:
    """Turn user mistakes into one-line errors (exit 2) and surprises into exit 3."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from attnscore.submission.files import SubmissionError

        try:
            return command(*args, **kwargs)
        except SpecError as exc:
            for problem in exc.problems:
                click.echo(str(problem), err=True)
            click.echo(f"Error: invalid spec ({len(exc.problems)} problem{'s' * (len(exc.problems) != 1)})", err=True)
            sys.exit(EXIT_USAGE)
        except SubmissionError as exc:
            _fail(str(exc), EXIT_USAGE)
        except click.ClickException:
            raise
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            log = write_error_log(exc)
            attach = f"please report this and attach {log}" if log else "please report this"
            _fail(
                f"internal error: {type(exc).__name__}: {_one_line(exc)} ({attach}; nothing was written)", EXIT_INTERNAL
            )

    return wrapper  # type: ignore[return-value]


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """The exception's text on one line, at most ``limit`` characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_log_folder() -> Path:
    """Where internal-error logs go: ``$XDG_CACHE_HOME/attnscore/errors`` (default
    ``~/.cache/attnscore/errors``), a folder only its owner can enter."""
    import os

    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "attnscore" / "errors"


def write_error_log(exc: BaseException) -> Path | None:
    """Write the full traceback of an internal error to a new file only its owner can read (0600);
    its path, or None when neither the cache folder nor the temp folder can take it.

    The file holds the command line, the versions of attnscore, Python and torch, and the chained
    traceback, so that a user can attach it to a report. It goes to :func:`error_log_folder`
    (made 0700), or to the temp folder when that cannot be written. Never raises.
    """
    import os
    import platform
    import tempfile
    import time
    import traceback
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("attnscore")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        ours = "unknown"
    torch = sys.modules.get("torch")
    try:
        trace = "".join(traceback.format_exception(exc))
    except RecursionError:  # a chain or a stack too deep to format whole
        trace = "".join(traceback.format_exception(exc, limit=200, chain=False))
    text = (
        f"attnscore {ours} internal error at {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n"
        f"command: {' '.join(sys.argv)}\n"
        f"python {platform.python_version()} on {platform.platform()}; "
        f"torch {getattr(torch, '__version__', 'not loaded')}; pid {os.getpid()}\n\n{trace}"
    )
    name = f"internal-error-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-"
    for folder in (error_log_folder(), Path(tempfile.gettempdir())):
        try:
            if folder != Path(tempfile.gettempdir()):
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, path = tempfile.mkstemp(prefix=name, suffix=".log", dir=folder)  # 0600, a new file
            with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as out:
                out.write(text)
            return Path(path)
        except OSError:
            continue
    return None


def check_output_path(path: str) -> None:
    """Fail early (before any work) when ``path`` cannot be written: its folder must exist."""
    parent = Path(path).parent
    if not parent.is_dir():
        raise click.UsageError(f"cannot write {path}: the directory {parent} does not exist")


def write_atomically(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (:func:`attnscore.atomic.write_atomic`): never a
    half-written file; mode 0666 less the umask, like a shell redirection."""
    from attnscore.atomic import write_atomic

    check_output_path(path)
    write_atomic(path, text.encode("utf-8"))


class _LazyGroup(click.Group):
    """A command group whose ``lazy`` subcommands are imported only when named (or listed by
    ``--help``), so that a command does not pay for the imports of the others."""

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            module, _, name = self.lazy[cmd_name].partition(":")
            command: click.Command = getattr(importlib.import_module(module), name)
            return command
        return super().get_command(ctx, cmd_name)


@click.group(
    cls=_LazyGroup,
    lazy={"practice": "attnscore.practice.command:practice"},
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(package_name="attnscore")
def main() -> None:
    """Verify, grade and practise attention scores against YAML specs."""


def run() -> None:
    """The ``attnscore`` console script: :func:`main` in a process of its own.

    Before parsing, it moves every object the imports made (torch's alone are over a million) into
    the collector's permanent generation (:func:`gc.freeze`), so that no full collection in this
    short-lived process scans them again; each would cost about 0.1 s. Code that calls :func:`main`
    inside a longer-lived process (tests, notebooks) leaves its collector as it is.
    """
    gc.freeze()
    main(prog_name="attnscore")


def _spec_paths(specs: tuple[str, ...]) -> list[Path]:
    from attnscore.check.verify import bundled_spec_paths

    if specs:
        return [Path(s) for s in specs]
    paths = bundled_spec_paths()
    if not paths:
        raise click.UsageError("no SPEC given and no bundled specs found; pass spec files")
    return paths


@main.command()
@click.argument("specs", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--no-mutations", is_flag=True, help="Skip the mutation test (known mistakes against each spec).")
@handle_errors
def verify(specs: tuple[str, ...], no_mutations: bool) -> None:
    """Prove SPECS sound (default: all bundled specs): the reference passes, known mistakes are caught.

    Runs the reference on every case of each spec in every dtype (the spec's own, then the other
    dtypes `attnscore test --dtype` accepts), then runs every catalogue mistake the spec targets in
    each of those dtypes and prints a mutation table (mistakes x specs). Exits 0 only when the
    reference passes everything and every targeted mistake fails some case in every dtype, and is
    diagnosed as itself in the spec's own dtypes.
    """
    from rich.table import Table

    from attnscore.catalogue.mistakes import MISTAKES
    from attnscore.check.cases import build_cases
    from attnscore.check.verify import mutation_test_all, verify_dtypes, verify_spec
    from attnscore.spec.load import load_specs

    loaded = load_specs(_spec_paths(specs))
    table = Table(title="attnscore verify: reference against specs", header_style="bold")
    for column in ("spec", "dtype", "cases passed", "points", "failing cases"):
        table.add_column(column)
    ok = True
    mutations: dict[str, dict[str, str]] = {}
    for spec in loaded:
        dtypes = verify_dtypes(spec)
        cases = {dtype: build_cases(spec, dtype) for dtype in dtypes}
        for result in verify_spec(spec, dtypes, cases=cases):
            passed = sum(c.passed for c in result.cases)
            failing = ", ".join(f"{c.id} ({c.verdict.label})" for c in result.cases if not c.passed)
            ok &= result.all_passed
            style = "green" if result.all_passed else "red"
            table.add_row(
                spec.id,
                result.dtype,
                f"[{style}]{passed}/{len(result.cases)}[/]",
                f"{result.score}/{result.max_score}",
                failing or "-",
            )
        if not no_mutations:
            results = mutation_test_all(spec, cases, dtypes)
            mutations[spec.id] = _mutation_cells(results)
            ok &= all(r.ok for r in results)
    console = _stdout()
    console.print(table)
    if mutations:
        mtable = Table(title="mutation score: known mistakes against specs (every dtype)", header_style="bold")
        mtable.add_column("mistake", no_wrap=True)
        for spec_id in mutations:
            mtable.add_column(spec_id.replace("_", "_\n"), justify="center")
        for mistake_id in MISTAKES:
            if any(mistake_id in cells for cells in mutations.values()):
                mtable.add_row(mistake_id, *[cells.get(mistake_id, "·") for cells in mutations.values()])
        scores = []
        for cells in mutations.values():
            caught = sum("MISSED" not in v for v in cells.values())
            scores.append(f"{caught}/{len(cells)}")
        mtable.add_row("[bold]caught[/]", *scores)
        console.print(mtable)
        console.print(
            "✓ = caught in every dtype and diagnosed as itself in the spec's dtypes; caught (dtypes) = some case "
            "fails but the diagnosis differs there; MISSED (dtypes) = every case passes in those dtypes; "
            "· = the spec does not target it"
        )
    console.print(
        "[green]all specs verified[/]"
        if ok
        else "[red]some cases fail against the reference, or a known mistake is not caught and diagnosed[/]"
    )
    sys.exit(EXIT_OK if ok else EXIT_FAILED)


def _mutation_cells(results: list[Any]) -> dict[str, str]:
    """One table cell per mistake from its results in every dtype: ✓, ``caught (dtypes)`` or ``MISSED (dtypes)``."""
    by_mistake: dict[str, list[Any]] = {}
    for r in results:
        by_mistake.setdefault(r.mistake_id, []).append(r)
    cells = {}
    for mistake_id, rs in by_mistake.items():
        missed = [r.dtype for r in rs if not r.caught]
        undiagnosed = [r.dtype for r in rs if r.caught and not r.ok]
        if missed:
            cells[mistake_id] = f"[red]MISSED[/] ({', '.join(missed)})"
        elif undiagnosed:
            cells[mistake_id] = f"[yellow]caught[/] ({', '.join(undiagnosed)})"
        else:
            cells[mistake_id] = "[green]✓[/]"
    return cells


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"expected a finite number of seconds, found {value}")
    return value


def _has_dask() -> bool:
    try:
        import distributed  # noqa: F401 - optional (attnscore[dask]); imported only for --scheduler
    except ImportError:
        return False
    return True


def _grade_batch(
    paths: list[Any], spec: Any, out: str | None, scheduler: str | None, jobs: int, err: Console, options: Any
) -> tuple[list[Any], Any]:
    """Grade ``paths`` here, as a class run into ``out``, or on a dask cluster, with a progress bar."""
    from attnscore.grade.grading import grade_many
    from attnscore.report.progress import grading_progress

    run = None
    with grading_progress(err) as bar:
        task = bar.add_task(f"grading against {spec.id}", total=len(paths))
        if out is not None:
            from attnscore.grade.class_run import grade_class

            run = grade_class(
                paths,
                spec,
                out,
                jobs=jobs,
                scheduler=scheduler,
                on_plan=lambda _, todo: bar.update(task, total=todo),
                on_result=lambda *_: bar.advance(task),
                on_notice=lambda line: err.print(f"Warning: {line}", markup=False, highlight=False),
                **options,
            )
            results = [result for _, result in run.rows]
        elif scheduler is not None:
            from attnscore.grade.cluster import grade_on_cluster

            results = grade_on_cluster(
                paths,
                spec,
                scheduler,
                on_result=lambda _: bar.advance(task),
                on_notice=lambda line: err.print(f"Warning: {line}", markup=False, highlight=False),
                **options,
            )
        else:
            results = grade_many(paths, spec, jobs=jobs, on_result=lambda _: bar.advance(task), **options)
    return results, run


@main.command()
@click.argument("submissions", nargs=-1, required=True, type=click.Path())
@click.option(
    "--spec", "spec_path", required=True, type=click.Path(dir_okay=False), help="The spec file to grade against."
)
@click.option("--function", "function", default=None, help="Name of the graded function (default: the spec's).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "gradescope"]),
    default="text",
    show_default=True,
    help="text for people, json for tools, gradescope for results.json.",
)
@click.option(
    "--output",
    "output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the report to FILE instead of stdout (written atomically).",
)
@click.option(
    "--dtype",
    type=click.Choice(["float32", "float64", "float16", "bfloat16"]),
    default=None,
    help="Dtype the inputs are cast to (default: the spec's first).",
)
@click.option(
    "--seed", type=click.IntRange(min=0), default=None, help="Base seed for generated inputs (default: the spec's)."
)
@click.option(
    "--timeout",
    "timeout",
    type=click.FloatRange(min=0.1, max=600),
    default=None,
    callback=_finite,
    help="Wall-time limit per call in seconds (default: the spec's).",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1, max=64),
    default=1,
    show_default=True,
    help="Grader processes working in parallel (each submission still gets its own sandbox).",
)
@click.option(
    "--shrink-steps",
    "shrink_steps",
    type=click.IntRange(min=0, max=1000),
    default=50,
    show_default=True,
    help="Examples tried per failing property to find a minimal counterexample (0: off).",
)
@click.option(
    "--entry",
    "entry",
    default=None,
    metavar="FILE",
    help="Entry file of folder submissions, e.g. solution.py (default: the one top-level .py file that "
    "defines the function). A folder holding FILE is one submission.",
)
@click.option(
    "--no-template",
    "no_template",
    is_flag=True,
    default=False,
    help="Start a fresh interpreter for every worker instead of forking it from the pre-started worker "
    "template (slower; for comparison, or when the template cannot run).",
)
@click.option(
    "--device",
    default="cpu",
    show_default=True,
    help="cpu, cuda or cuda:N: the inputs are built on this device; each worker sees only that GPU "
    "(see docs/gpu-and-kernel-timing.md).",
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
    "--scheduler",
    "scheduler",
    default=None,
    metavar="ADDRESS",
    help="Grade on the dask.distributed cluster whose scheduler is ADDRESS (e.g. tcp://host:8786); "
    "needs attnscore[dask].",
)
@handle_errors
def grade(
    submissions: tuple[str, ...],
    spec_path: str,
    function: str | None,
    fmt: str,
    output: str | None,
    dtype: str | None,
    seed: int | None,
    timeout: float | None,
    shrink_steps: int,
    jobs: int,
    entry: str | None,
    out: str | None,
    scheduler: str | None,
    no_template: bool,
    device: str,
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
    from attnscore.grade.cluster import ClusterError, check_scheduler_address
    from attnscore.grade.gradebook import GradebookError
    from attnscore.report import batch_table, batch_to_json, gradescope_results, submission_text, submission_to_json
    from attnscore.report.results import Verdict
    from attnscore.sandbox.gpu import device_problem
    from attnscore.sandbox.launch import Limits, preflight, spec_exposure, warm_template
    from attnscore.spec.load import load_spec
    from attnscore.submission.files import find_submissions

    if output:
        check_output_path(output)
    if scheduler is not None:
        try:
            scheduler = check_scheduler_address(scheduler)
        except ClusterError as exc:
            _fail(f"--scheduler: {exc}", EXIT_USAGE)
    if device != "cpu":  # never touch CUDA in the grader for a CPU run
        import torch

        available = torch.cuda.is_available()
        wrong = device_problem(device, available, torch.cuda.device_count() if available else 0)
        if wrong is not None:
            raise click.UsageError(wrong)
    if out is not None and fmt == "gradescope":
        raise click.UsageError("--out (a class run) and --format gradescope (one student) cannot be combined")
    if scheduler is None:  # the worker template loads torch while this process loads the spec
        warm_template(Limits(template=False if no_template else None), wait=False)
    spec = load_spec(spec_path)
    if spec.student_copy is not None:
        raise click.UsageError(
            f"{spec_path} is a student copy (its hidden cases are left out): grade with the full spec"
        )
    ours = [p for p in (out, output) if p is not None]  # never graded as a student on the next run
    paths = find_submissions(list(submissions), entry=entry, one=fmt == "gradescope", exclude=ours)
    if fmt == "gradescope" and len(paths) != 1:
        raise click.UsageError(
            f"--format gradescope grades exactly one submission (a file, or one folder), found {len(paths)}"
        )
    if dtype is not None and dtype not in spec.dtypes:
        raise click.UsageError(f"--dtype {dtype} is not one of this spec's dtypes: {', '.join(spec.dtypes)}")
    limits = Limits(call_timeout_s=timeout or spec.timeout_s, template=False if no_template else None, device=device)
    # SIGTERM (a cancelled job, `timeout`) unwinds like Ctrl-C: every sandbox is closed, its
    # processes killed and its temporary folders removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    problem = preflight(limits)
    if problem is not None:
        _fail(f"the sandbox cannot run submissions on this machine: {problem} (nothing was graded)", EXIT_INTERNAL)
    exposed = spec_exposure(spec_path, limits)
    if exposed is not None:
        click.echo(f"Warning: {exposed}", err=True)
    if scheduler is not None and not _has_dask():
        raise click.UsageError(
            "--scheduler needs dask.distributed, which is not installed; install it with "
            "pip install 'attnscore[dask]' (here and on every worker)"
        )
    err = Console(stderr=True)
    options = {"function": function, "dtype": dtype, "seed": seed, "limits": limits, "shrink_steps": shrink_steps}
    try:
        results, run = _grade_batch(paths, spec, out, scheduler, jobs, err, options)
    except (GradebookError, ClusterError) as exc:
        _fail(str(exc), EXIT_USAGE)
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
        console = Console(file=io.StringIO(), record=True, width=140, color_system=None) if output else _stdout()
        console.print(submission_text(results[0]) if len(results) == 1 else batch_table(results))
        if output:
            write_atomically(output, console.export_text())
    else:
        if fmt == "json":
            data = submission_to_json(results[0]) if len(results) == 1 else batch_to_json(results)
        else:
            data = gradescope_results(results[0])
        text = json.dumps(data, indent=2, allow_nan=False, ensure_ascii=False) + "\n"
        if output:
            write_atomically(output, text)
        else:
            sys.stdout.write(text)
    broken = [r for r in results if any(c.verdict is Verdict.GRADER_ERROR for c in r.cases)]
    if broken:
        click.echo(f"Error: grader error while grading {', '.join(r.submission for r in broken)}", err=True)
        sys.exit(EXIT_INTERNAL)
    if run is not None and run.problems:  # every other student's outputs were written
        sys.exit(EXIT_INTERNAL)
    sys.exit(EXIT_OK if all(r.all_passed for r in results) else EXIT_FAILED)


@main.command("test")
@click.option(
    "--impl",
    "impl",
    required=True,
    metavar="MODULE:FUNCTION",
    help="The implementation to test, e.g. examples.impl.my_attention:scaled_score_matrix.",
)
@click.option(
    "--spec",
    "spec_paths",
    required=True,
    multiple=True,
    type=click.Path(dir_okay=False),
    help="Spec file(s) to run (repeat for several).",
)
@click.option(
    "--dtype",
    "dtypes",
    multiple=True,
    type=click.Choice(["float32", "float64", "float16", "bfloat16"]),
    help="Dtype(s) to test (repeatable; default: the spec's dtypes).",
)
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N.")
@click.option("--seed", type=int, default=None, help="Base seed for generated inputs (default: the spec's).")
@click.option(
    "--ratio",
    type=click.FloatRange(min=1.0),
    default=None,
    metavar="K",
    help="Use the low-precision rule: error at most K x the reference's own error in the same dtype.",
)
@click.option(
    "--tie",
    "ties",
    multiple=True,
    metavar="SYMBOL=SAME_AS",
    help="Give two shape symbols one size, as a kernel requires (e.g. d_v=d_k); worked examples "
    "that break it are adapted (V padded with zero columns or cut, expected values recomputed) "
    "where that keeps what they check, else left out and listed (repeatable).",
)
@click.option(
    "--where",
    "wheres",
    multiple=True,
    metavar="BOUND",
    help="Bound the shapes to the kernel's domain, e.g. 'n_q<=n_k' or 'd_k<=128' (SYMBOL OP SYMBOL "
    "or SYMBOL OP INTEGER; OP one of <=, <, >=, >, ==, !=): generated inputs are drawn inside it, "
    "worked examples outside it are skipped by constraint and listed (repeatable).",
)
@click.option(
    "--allow",
    "allows",
    multiple=True,
    metavar="CORNER",
    help="Set a convention corner aside, e.g. fully_masked_row (rows whose every key is masked: "
    "NaN or the mean of V accepted there); every other entry is still compared (repeatable).",
)
@click.option(
    "--keyword",
    "keywords",
    multiple=True,
    metavar="NAME=VALUE",
    help="Pass a constant keyword argument to every call (e.g. is_causal=true for a causal flag; "
    "VALUE is a YAML scalar: true, 0.5, 3, text) (repeatable).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handle_errors
def test_impl(
    impl: str,
    spec_paths: tuple[str, ...],
    dtypes: tuple[str, ...],
    device: str,
    seed: int | None,
    ratio: float | None,
    ties: tuple[str, ...],
    wheres: tuple[str, ...],
    allows: tuple[str, ...],
    keywords: tuple[str, ...],
    fmt: str,
) -> None:
    """Run specs against an importable implementation, in this process (trusted code).

    Exit code 0 when every case passed in every dtype, 1 when some case failed, 2 for a usage error.
    """
    import functools

    from attnscore.check.implementation import ImplError, check_device, load_impl, run_impl
    from attnscore.report import submission_text, submission_to_json
    from attnscore.spec.load import load_specs

    try:
        function = load_impl(impl)
        check_device(device)
    except ImplError as exc:
        raise click.UsageError(str(exc)) from None
    if ratio is not None and not math.isfinite(ratio):
        raise click.UsageError(f"--ratio: expected a finite number >= 1, found {ratio}")
    tie_map = dict(_pair(text, "--tie") for text in ties)
    from attnscore.maths.bounds import parse_bound

    try:
        bounds = tuple(parse_bound(text) for text in wheres)
    except ValueError as exc:
        raise click.UsageError(f"--where: {exc}") from None
    keyword_map = {name: _yaml_scalar(value, name) for name, value in (_pair(t, "--keyword") for t in keywords)}
    if keyword_map:
        function = functools.partial(function, **keyword_map)
    results = []
    for spec in load_specs(list(spec_paths)):
        if tie_map:
            try:
                spec, dropped = spec.tied(tie_map)
            except ValueError as exc:
                raise click.UsageError(f"--tie: {exc}") from None
            tie_text = ", ".join(f"{a}={b}" for a, b in tie_map.items())
            adapted = spec.adapted_examples()
            if adapted:
                click.echo(
                    f"{spec.id}: adapted {len(adapted)} worked example(s) to {tie_text} "
                    f"(expected values recomputed): {', '.join(adapted)}",
                    err=True,
                )
            if dropped:
                click.echo(
                    f"{spec.id}: left out {len(dropped)} worked example(s) whose shapes break "
                    f"{tie_text}: {', '.join(dropped)}",
                    err=True,
                )
        if bounds:
            try:
                spec, skipped = spec.bounded(bounds)
            except ValueError as exc:
                raise click.UsageError(f"--where: {exc}") from None
            if skipped:
                click.echo(
                    f"{spec.id}: skipped by constraint {', '.join(map(str, bounds))}: {'; '.join(skipped)}",
                    err=True,
                )
        if allows:
            try:
                spec = spec.allowing(tuple(a.replace("-", "_") for a in allows))
            except ValueError as exc:
                raise click.UsageError(f"--allow: {exc}") from None
        if ratio is not None:
            import dataclasses

            from attnscore.maths.tolerance import Tolerance

            spec = dataclasses.replace(spec, tolerance=Tolerance(mode="ratio", factor=ratio))
        for dtype in dtypes or spec.dtypes:
            results.append(run_impl(spec, function, dtype=dtype, device=device, seed=seed, name=impl))
    if fmt == "json":
        data = [submission_to_json(r) for r in results]
        sys.stdout.write(
            json.dumps(data if len(data) > 1 else data[0], indent=2, allow_nan=False, ensure_ascii=False) + "\n"
        )
    else:
        console = _stdout()
        for r in results:
            console.print(f"[bold]{r.spec_id}[/] ({r.spec_path}) in {r.dtype} on {r.device}")
            console.print(submission_text(r))
    sys.exit(EXIT_OK if all(r.all_passed for r in results) else EXIT_FAILED)


def _pair(text: str, option: str) -> tuple[str, str]:
    """``NAME=VALUE`` split in two, or a usage error naming the option."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise click.UsageError(f"{option}: expected NAME=VALUE, found {text!r}")
    return name.strip(), value.strip()


def _yaml_scalar(value: str, name: str) -> object:
    """A keyword's value read as a YAML scalar (``true``, ``3``, ``0.5``, text)."""
    import yaml

    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        parsed = value
    if not isinstance(parsed, (bool, int, float, str)) or parsed is None:
        raise click.UsageError(f"--keyword: expected a scalar value for {name}, found {value!r}")
    return parsed


@main.command()
@handle_errors
def schema() -> None:
    """Print the JSON Schema of the spec format (for editors that complete and check specs)."""
    from attnscore.spec.load import spec_schema

    click.echo(json.dumps(spec_schema(), indent=2, ensure_ascii=False))


@main.command("specs")
@click.option("--markdown", is_flag=True, help="Print the spec, property and mistake catalogues as Markdown tables.")
@handle_errors
def list_specs(markdown: bool) -> None:
    """List the bundled specs and the registered properties."""
    from attnscore.catalogue.properties import PROPERTIES
    from attnscore.check.verify import bundled_spec_paths
    from attnscore.spec.load import load_specs

    if markdown:
        from attnscore.report.catalogue_markdown import mistake_table, property_table, spec_table

        tables = (spec_table(load_specs(list(bundled_spec_paths()))), property_table(), mistake_table())
        sys.stdout.write("\n\n".join(tables) + "\n")
        return
    console = _stdout()
    for spec in load_specs(list(bundled_spec_paths())):
        console.print(
            f"[bold]{spec.path}[/]  {spec.id} v{spec.version}: {spec.title} "
            f"({len(spec.worked_examples)} worked examples, {len(spec.properties)} properties, "
            f"{spec.max_points} points)"
        )
    console.print("\n[bold]Registered properties[/]")
    for prop in PROPERTIES.values():
        console.print(f"  {prop.name}: {prop.summary}")


@main.command("bench")
@click.option("--impl", required=True, metavar="MODULE:FUNCTION", help="The implementation to time.")
@click.option(
    "--spec", "spec_path", required=True, type=click.Path(dir_okay=False), help="The spec whose contract it has."
)
@click.option(
    "--dtype",
    type=click.Choice(["float32", "float64", "float16", "bfloat16"]),
    default=None,
    help="Dtype of the inputs (default: the spec's first).",
)
@click.option("--device", default="cpu", show_default=True, help="cpu (wall time) or cuda[:N] (CUDA events).")
@click.option(
    "--size",
    "sizes",
    multiple=True,
    metavar="SYMBOL=N",
    help="An input size: n_q, n_k, d_k, d_v, d_q, d_a, or batch=B,H for the batch dims "
    "(repeatable; default batch=4,8 n_q=n_k=1024, widths 64).",
)
@click.option(
    "--keyword",
    "keywords",
    multiple=True,
    metavar="NAME=VALUE",
    help="A constant keyword argument for the implementation (e.g. is_causal=true) (repeatable).",
)
@click.option(
    "--warmup", type=click.IntRange(min=0, max=1000), default=3, show_default=True, help="Untimed calls first."
)
@click.option("--repeats", type=click.IntRange(min=1, max=10000), default=20, show_default=True, help="Timed calls.")
@click.option("--no-flush", is_flag=True, help="Do not overwrite a 256 MB buffer before each call (warm caches).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handle_errors
def bench_impl(
    impl: str,
    spec_path: str,
    dtype: str | None,
    device: str,
    sizes: tuple[str, ...],
    keywords: tuple[str, ...],
    warmup: int,
    repeats: int,
    no_flush: bool,
    fmt: str,
) -> None:
    """Time an implementation against attnscore's reference and torch's own op, in one run.

    Median and interquartile range in milliseconds over --repeats calls; CUDA events on a GPU, wall
    time on the CPU; the cache is flushed before each call. Exit code 0 when the implementation ran
    and agrees with the reference, 1 when it raised or its result differs, 2 for a usage error.
    """
    from attnscore.check.implementation import ImplError, check_device, load_impl
    from attnscore.spec.load import load_spec
    from attnscore.timing.benchmark import bench, parse_sizes
    from attnscore.timing.kernel_timer import FLUSH_BYTES

    try:
        function = load_impl(impl)
        check_device(device)
    except ImplError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        size_map = parse_sizes(dict(_pair(text, "--size") for text in sizes))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    keyword_map = {name: _yaml_scalar(value, name) for name, value in (_pair(t, "--keyword") for t in keywords)}
    spec = load_spec(spec_path)
    result = bench(
        spec.contract,
        function,
        impl,
        sizes=size_map,
        dtype=dtype or spec.dtypes[0],
        device=device,
        warmup=warmup,
        repeats=repeats,
        flush_bytes=0 if no_flush else FLUSH_BYTES,
        keywords=keyword_map,
    )
    reference = result.candidates[1].timing
    rows: list[dict[str, Any]] = []
    for c in result.candidates:
        t = c.timing
        rows.append(
            {
                "label": c.label,
                "median_ms": None if t is None else t.median_ms,
                "iqr_ms": None if t is None else t.iqr_ms,
                "min_ms": None if t is None else t.min_ms,
                "vs_reference": None if t is None or reference is None else reference.median_ms / t.median_ms,
                "clock": None if t is None else t.clock,
                "error": c.error,
            }
        )
    failed = bool(result.disagreement) or result.candidates[0].timing is None
    if fmt == "json":
        data = {
            "contract": result.contract,
            "sizes": {k: list(v) for k, v in result.sizes.items()},
            "dtype": result.dtype,
            "device": result.device,
            "repeats": repeats,
            "warmup": warmup,
            "flushed": not no_flush,
            "candidates": rows,
            "max_abs_diff": result.max_abs_diff,
            "disagreement": result.disagreement,
        }
        sys.stdout.write(json.dumps(data, indent=2, allow_nan=False) + "\n")
    else:
        from rich.table import Table

        shape = ", ".join(f"{k}={','.join(map(str, v)) or '-'}" for k, v in result.sizes.items())
        table = Table(title=f"{result.contract} in {result.dtype} on {result.device} ({shape})", title_justify="left")
        for column in ("", "median ms", "IQR ms", "min ms", "speed-up vs reference"):
            table.add_column(column, justify="left" if not column else "right")
        for row in rows:
            if row["median_ms"] is None:
                table.add_row(row["label"], "failed", "", "", row["error"])
                continue
            table.add_row(
                row["label"],
                f"{row['median_ms']:.4g}",
                f"{row['iqr_ms']:.2g}",
                f"{row['min_ms']:.4g}",
                "" if row["vs_reference"] is None else f"{row['vs_reference']:.2f}x",
            )
        console = _stdout()
        console.print(table)
        clock = next((r["clock"] for r in rows if r["clock"]), "wall")
        console.print(
            f"{repeats} timed calls after {warmup} warm-up calls, {clock}; caches "
            f"{'warm' if no_flush else 'flushed before each call'}"
        )
        if result.disagreement:
            console.print(f"[bold red]Warning:[/] {result.disagreement}")
    sys.exit(EXIT_FAILED if failed else EXIT_OK)


@main.command("check")
@click.argument("solution", type=click.Path())
@click.option(
    "--spec", "spec_path", required=True, type=click.Path(dir_okay=False), help="The spec file to check against."
)
@click.option("--function", "function", default=None, help="Name of the graded function (default: the spec's).")
@click.option("--entry", "entry", default=None, metavar="FILE", help="Entry file of a folder solution.")
@click.option(
    "--dtype",
    type=click.Choice(["float32", "float64", "float16", "bfloat16"]),
    default=None,
    help="Dtype the inputs are cast to (default: the spec's first, as the grader).",
)
@click.option(
    "--shrink-steps",
    "shrink_steps",
    type=click.IntRange(min=0, max=1000),
    default=50,
    show_default=True,
    help="Examples tried per failing property to find a minimal counterexample (0: off).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handle_errors
def check_solution(
    solution: str,
    spec_path: str,
    function: str | None,
    entry: str | None,
    dtype: str | None,
    shrink_steps: int,
    fmt: str,
) -> None:
    """Self-check SOLUTION (.py, .ipynb or folder) on the spec's visible cases, on this machine.

    The grader's feedback for the visible cases only (hidden cases are neither run nor shown). The
    code runs in this process with a per-call time limit, without the grader's sandbox: use it
    on your own code.

    Exit code 0 when every visible case passed, 1 when some failed, 2 for a usage error.
    """
    from attnscore.selfcheck import check_path
    from attnscore.spec.load import load_spec

    spec = load_spec(spec_path)
    if dtype is not None and dtype not in spec.dtypes:
        raise click.UsageError(f"--dtype {dtype} is not one of this spec's dtypes: {', '.join(spec.dtypes)}")
    outcome = check_path(solution, spec, function=function, entry=entry, dtype=dtype, shrink_steps=shrink_steps)
    if fmt == "json":
        from attnscore.report.json_report import submission_to_json

        data = {**submission_to_json(outcome.result), "hidden_cases_not_run": outcome.hidden}
        sys.stdout.write(json.dumps(data, indent=2, allow_nan=False, ensure_ascii=False) + "\n")
    else:
        from attnscore.report.text import submission_text

        console = _stdout()
        console.print(submission_text(outcome.result))
        console.print(outcome.footer())
    sys.exit(EXIT_OK if outcome.passed else EXIT_FAILED)


@main.group("export")
def export() -> None:
    """Build deployable graders for course platforms (Gradescope, PrairieLearn)."""


@export.command("gradescope")
@click.option("--spec", "spec_path", required=True, type=click.Path(dir_okay=False, exists=True), help="The spec.")
@click.option(
    "-o", "--output", "output", required=True, type=click.Path(dir_okay=False), help="The zip to write (atomically)."
)
@click.option("--function", default=None, help="Name of the graded function (default: the spec's).")
@click.option("--entry", default=None, metavar="FILE", help="Entry file of multi-file submissions, e.g. solution.py.")
@handle_errors
def export_gradescope(spec_path: str, output: str, function: str | None, entry: str | None) -> None:
    """Write the Gradescope autograder zip (setup.sh, run_autograder, the spec, pinned requirements).

    Upload the zip as the assignment's autograder; each submission is graded in attnscore's
    sandbox into /autograder/results/results.json.
    """
    from attnscore.export.bundle import ExportError
    from attnscore.export.gradescope import build_gradescope_bundle

    try:
        names = build_gradescope_bundle(spec_path, output, function=function, entry=entry)
    except ExportError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(f"wrote {output}: {len(names)} files (setup.sh, run_autograder, spec.yaml, requirements.txt, python/)")


@export.command("student-spec")
@click.option("--spec", "spec_path", required=True, type=click.Path(dir_okay=False), help="The full spec.")
@click.option(
    "-o", "--output", "output", required=True, type=click.Path(dir_okay=False), help="The YAML to write (atomically)."
)
@handle_errors
def export_student_spec(spec_path: str, output: str) -> None:
    """Write the student copy of a spec: its visible cases only, for `attnscore check`.

    Same id, version, seed, points and tolerances; hidden worked examples and properties are left
    out (only their number and points are said). Hand this file out, never the full spec.
    """
    from attnscore.export.bundle import ExportError
    from attnscore.export.student_spec import write_student_spec

    try:
        text = write_student_spec(spec_path, output)
    except ExportError as exc:
        raise click.UsageError(str(exc)) from None
    except OSError as exc:
        raise click.UsageError(f"cannot write {output}: {exc.strerror or exc}") from None
    click.echo(
        f"wrote {output}: the visible cases of {spec_path}; {text.hidden_cases} hidden "
        f"case{'s' * (text.hidden_cases != 1)} left out"
    )


@export.command("prairielearn")
@click.option("--spec", "spec_path", required=True, type=click.Path(dir_okay=False, exists=True), help="The spec.")
@click.option("-o", "--output", "output", required=True, type=click.Path(file_okay=False), help="The folder to write.")
@click.option("--image", default="attnscore-grader", show_default=True, help="The grader image's name.")
@click.option("--file-name", "file_name", default="solution.py", show_default=True, help="The file students upload.")
@click.option("--function", default=None, help="Name of the graded function (default: the spec's).")
@click.option(
    "--timeout", type=click.IntRange(min=10, max=600), default=120, show_default=True, help="Job time limit, s."
)
@handle_errors
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
        raise click.UsageError(str(exc)) from None
    click.echo(f"wrote {len(written)} files under {output}: image/ (build with image/build.sh) and question/")
