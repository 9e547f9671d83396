"""The ``attnscore practice`` command: generate, export and verify practice problems.

Exit codes: 0 success, 1 ``--verify`` found a failure, 2 usage error or invalid family file.
Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import click

from attnscore.practice import kinds
from attnscore.practice.export_json import key_json, problems_json
from attnscore.practice.export_moodle import moodle_xml
from attnscore.practice.export_prairielearn import PrairieLearnExportError, prairielearn_course
from attnscore.practice.export_qti import qti_zip
from attnscore.practice.families import Family, FamilyFileError, load_families, load_family_file
from attnscore.practice.generators import (
    CapacityError,
    GenerationError,
    GenerationStats,
    capacity,
    featured_problems,
    fixed_problem,
    generate_family,
)
from attnscore.practice.numbers import as_fraction
from attnscore.practice.problem import Problem
from attnscore.practice.render_latex import render_key_latex, render_worksheet_latex
from attnscore.practice.render_md import render_key_md, render_worksheet_md
from attnscore.practice.solutions import Rejected
from attnscore.practice.verify import VerifyReport, verify_families
from attnscore.practice.worksheet import Worksheet
from attnscore.practice.writer import write_outputs

__all__ = ["practice", "FORMATS", "build_outputs", "default_families_dir"]

FORMATS = ("md", "latex", "json", "moodle-xml", "qti", "prairielearn")
_STUDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class InvalidFamilyError(click.ClickException):
    """A family file or family name is invalid (exit code 2, like a usage error)."""

    exit_code = 2


def default_families_dir() -> Path:
    """``./specs/practice`` when it exists, else the bundled families (``attnscore/bundled_specs/practice``)."""
    local = Path("specs/practice")
    return local if local.is_dir() else (Path(__file__).resolve().parents[1] / "bundled_specs" / "practice").resolve()


def _select(names: tuple[str, ...], directory: Path | None) -> list[Family]:
    """Resolve FAMILY arguments (ids or YAML paths); all families of the folder when none is given."""
    try:
        from_files = [f for n in names if n.endswith((".yaml", ".yml")) for f in load_family_file(n)]
        ids = [n for n in names if not n.endswith((".yaml", ".yml"))]
        known: list[Family] = []
        if ids or not names:
            folder = directory or default_families_dir()
            if not folder.is_dir():
                raise click.UsageError(f"families folder {str(folder)!r} does not exist; pass --families-dir DIR")
            known = load_families(folder)
    except FamilyFileError as exc:
        raise InvalidFamilyError(str(exc)) from None
    if not names:
        return known
    by_id = {f.id: f for f in known}
    unknown = [n for n in ids if n not in by_id]
    if unknown:
        raise click.UsageError(f"unknown family {unknown[0]!r}; known families: {', '.join(sorted(by_id))}")
    return from_files + [by_id[n] for n in ids]


def _vector(text: str, option: str) -> tuple[Fraction, ...]:
    try:
        values = tuple(as_fraction(part.strip()) for part in text.split(","))
    except (ValueError, TypeError):
        raise click.BadParameter(
            f"expected comma-separated decimal numbers such as 0,1 or 0.5,-1, found {text!r}",
            param_hint=option,
        ) from None
    if any((v * 10).denominator != 1 or abs(v) > 100 for v in values):
        raise click.BadParameter(
            f"expected hand-friendly numbers (at most one decimal, |x| <= 100), found {text!r}",
            param_hint=option,
        )
    return values


def _command_line(
    names: tuple[str, ...],
    count: int,
    seed: int,
    student: str | None,
    fmt: str,
    featured: bool,
    q: str | None,
    ks: tuple[str, ...],
    with_solutions: bool,
    math_images: bool = False,
    families_dir: Path | None = None,
) -> str:
    parts = ["attnscore", "practice", *names]
    if families_dir is not None:
        parts += ["--families-dir", str(families_dir)]
    if q is not None:
        parts += ["--q", q] + [x for k in ks for x in ("--k", k)]
    else:
        parts += ["--count", str(count), "--seed", str(seed)]
        if student:
            parts += ["--student", student]
        if featured:
            parts.append("--featured")
    parts += ["--format", fmt]
    if with_solutions:
        parts.append("--with-solutions")
    if math_images:
        parts.append("--math-images")
    return shlex.join(parts)


def build_outputs(
    problems: list[Problem],
    sheet: Worksheet,
    fmt: str,
    figures: bool = True,
    families: Sequence[Family] = (),
    math_images: bool = False,
) -> dict[str, bytes]:
    """Every output file of one format as ``relative path -> bytes`` (pure: nothing is written).

    ``prairielearn`` makes one randomised question per family in ``families`` (each student's
    variant is drawn from PrairieLearn's seed, so the generated variants are not written) and a
    static question per fixed problem (``index`` None, or every problem when ``families`` is
    empty); its ``answer-key.json`` covers the static questions only. ``math_images`` (``qti``
    only): maths drawn as PNG images with the LaTeX as alt text.

    Raises:
        ValueError: ``fmt`` is not one of :data:`FORMATS`, or ``math_images`` with another format
            than ``qti``, or an expression that mathtext cannot draw.
        PrairieLearnExportError: a family's kind cannot be expressed in PrairieLearn.
    """
    if math_images and fmt != "qti":
        raise ValueError(f"--math-images works only with --format qti, found --format {fmt}")
    if fmt == "md":
        paths: dict[str, str] = {}
        files: dict[str, bytes] = {}
        if figures:
            from attnscore.practice.figures import svg_figure

            for p in problems:
                if p.figure:
                    paths[p.uid] = f"figures/{p.uid}.svg"
                    files[paths[p.uid]] = svg_figure(p.figure)
        files["worksheet.md"] = render_worksheet_md(problems, sheet, paths).encode("utf-8")
        files["answer-key.md"] = render_key_md(problems, sheet).encode("utf-8")
        return files
    if fmt == "latex":
        return {
            "worksheet.tex": render_worksheet_latex(problems, sheet).encode("utf-8"),
            "answer-key.tex": render_key_latex(problems, sheet).encode("utf-8"),
        }
    key = {"answer-key.json": key_json(problems, sheet)}
    if fmt == "json":
        return {"problems.json": problems_json(problems, sheet), **key}
    if fmt == "moodle-xml":
        return {"questions.xml": moodle_xml(problems, sheet), **key}
    if fmt == "qti":
        return {"quiz-qti.zip": qti_zip(problems, sheet, math_images), **key}
    if fmt == "prairielearn":
        fixed = [p for p in problems if p.index is None or not families]
        version = _version()
        files = prairielearn_course(families, fixed, sheet, version)
        return {**files, "answer-key.json": key_json(fixed, sheet)} if fixed else files
    raise ValueError(f"format must be one of {', '.join(FORMATS)}, found {fmt!r}")


def _version() -> str:
    try:
        return importlib.metadata.version("attnscore")
    except importlib.metadata.PackageNotFoundError:
        return ""


def _print_verify(report: VerifyReport) -> None:
    click.echo(
        f"{'family':<18} {'variants':>8} {'per s':>8} {'accepted':>9} {'capacity':>9} {'dup@1000':>8} "
        f"{'dupes':>6} {'max':>5}  positions"
    )
    for r in report.families:
        pos = " ".join(f"{'ABCDEFGH'[i]}:{r.positions[i]}" for i in sorted(r.positions)) or "-"
        click.echo(
            f"{r.family_id:<18} {r.variants:>8} {r.variants_per_second:>8.0f} {r.acceptance_rate:>9.1%} "
            f"{r.capacity:>9.2g} {r.class_duplicate_rate:>8.1%} {r.duplicate_rate:>6.1%} {r.max_duplicate_rate:>5.0%}  "
            f"{pos}"
        )
    tests = [(r.family_id, t) for r in report.families for t in r.balance]
    ran = [(f, t) for f, t in tests if t.p_value is not None]
    skipped = [(f, t) for f, t in tests if t.p_value is None]
    if ran:
        worst_family, worst = min(ran, key=lambda ft: ft[1].p_value or 1.0)
        click.echo(
            f"option balance: {len(ran)} chi-square test(s) of position/length/magnitude/value/norm ranks; "
            f"lowest p = {worst.p_value:.3g} ({worst_family} {worst.question}/{worst.n_options} {worst.feature})"
        )
    if skipped:
        click.echo(
            f"option balance: {len(skipped)} test(s) skipped, too few answers for power "
            "(raise --count; each rank needs 25 expected answers)"
        )
    failures = report.failures
    total = sum(r.variants for r in report.families)
    for f in failures[:20]:
        click.echo(f"FAIL {f}", err=True)
    status = "OK" if report.ok else f"{len(failures)} failure(s)"
    click.echo(
        f"verify: {status}: {len(report.families)} families, {total} variants, answers checked against "
        f"float64 reference/torch, exports parsed, tolerance rules checked ({report.seconds:.1f} s)"
    )


@click.command("practice")
@click.argument("families", nargs=-1)
@click.option(
    "--count",
    "-n",
    type=click.IntRange(1, 100_000),
    default=5,
    show_default=True,
    help="Variants per family.",
)
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=0, show_default=True, help="Base seed.")
@click.option("--student", default=None, help="Student id: each student gets their own variants.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="md", show_default=True)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Output folder (created if missing).",
)
@click.option(
    "--families-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder of family YAML files [default: specs/practice].",
)
@click.option("--featured/--no-featured", default=False, help="Put the families' fixed worked examples first.")
@click.option("--q", "q_text", default=None, help="A fixed query, e.g. 0,1 (with --k).")
@click.option("--k", "k_texts", multiple=True, help="A fixed key, e.g. 0,-1; repeat for several keys.")
@click.option("--with-solutions", is_flag=True, help="Print worked solutions in the worksheet too.")
@click.option("--no-figures", is_flag=True, help="Markdown: skip the SVG figures.")
@click.option(
    "--math-images",
    is_flag=True,
    help="qti: draw maths as PNG images (LaTeX as alt text) instead of MathJax \\(...\\) text.",
)
@click.option("--verify", "do_verify", is_flag=True, help="Check COUNT variants per family; write nothing.")
@click.option("--list", "do_list", is_flag=True, help="List the families and exit.")
def practice(
    families: tuple[str, ...],
    count: int,
    seed: int,
    student: str | None,
    fmt: str,
    out_dir: Path | None,
    families_dir: Path | None,
    featured: bool,
    q_text: str | None,
    k_texts: tuple[str, ...],
    with_solutions: bool,
    no_figures: bool,
    math_images: bool,
    do_verify: bool,
    do_list: bool,
) -> None:
    """Generate practice problems with worked solutions and an answer key.

    FAMILIES are family ids (see --list) or family YAML files; default: every family in
    --families-dir. Each variant's numbers come from a SHA-256 seed of (family id, version, --seed,
    --student, index, part), so the same arguments give byte-identical files.

    \b
    Examples:
      attnscore practice one-score --count 10 --seed 7 --student alice --out out/alice
      attnscore practice --q 0,1 --k 0,-1 --format latex --out out/example
      attnscore practice --verify --count 200
    """
    if student is not None and not _STUDENT.fullmatch(student):
        raise click.BadParameter(
            f"expected 1-64 letters, digits, '.', '_' or '-', found {student!r}", param_hint="'--student'"
        )
    if math_images and fmt != "qti":
        raise click.UsageError(f"--math-images works only with --format qti, found --format {fmt}")
    if k_texts and q_text is None:
        raise click.UsageError("--k needs --q (the query the keys are scored against)")
    if q_text is not None and not k_texts:
        raise click.UsageError("--q needs at least one --k")
    selected = _select(families, families_dir)
    if do_list:
        for f in selected:
            click.echo(f"{f.id:<18} v{f.version}  {f.kind:<16} capacity {capacity(f):<8.2g} {f.title}  ({f.path})")
        return
    if do_verify:
        too_small = [f for f in selected if count > capacity(f)]
        if too_small:
            raise click.UsageError(str(CapacityError(too_small[0].id, count, capacity(too_small[0]))))
        report = verify_families(selected, count, seed, student)
        _print_verify(report)
        if not report.ok:
            raise SystemExit(1)
        return
    if out_dir is None:
        raise click.UsageError("missing --out DIR (the folder for the worksheet and answer key)")
    stats: list[GenerationStats] = []
    try:
        if q_text is not None:
            q = _vector(q_text, "'--q'")
            keys = [_vector(k, "'--k'") for k in k_texts]
            wanted = kinds.for_key_count(len(keys))
            pool = selected if families else [f for f in selected if kinds.get(f.kind) is wanted]
            if not pool:
                raise click.UsageError(f"no {wanted.name} family found for --q/--k; name one as FAMILY")
            problems = [fixed_problem(pool[0], q, keys)]
        else:
            problems = []
            for fam in selected:
                if featured:
                    problems += featured_problems(fam)
                made, st = generate_family(fam, count, seed, student)
                problems += made
                stats.append(st)
    except Rejected as exc:
        raise click.UsageError(f"these numbers make a degenerate problem ({exc.reason}); choose others") from None
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    except CapacityError as exc:
        raise click.UsageError(str(exc)) from None
    except GenerationError as exc:
        raise InvalidFamilyError(str(exc)) from None
    title = "Attention scores: practice" if len(selected) != 1 or q_text else f"Practice: {selected[0].title}"
    places = problems[0].questions[0].numeric[0].places if problems and problems[0].questions[0].numeric else 3
    sheet = Worksheet(
        title,
        seed,
        student,
        _command_line(
            families, count, seed, student, fmt, featured, q_text, k_texts, with_solutions, math_images, families_dir
        ),
        places,
        with_solutions,
    )
    randomised = selected if fmt == "prairielearn" and q_text is None else []
    try:
        files = build_outputs(
            problems, sheet, fmt, figures=not no_figures, families=randomised, math_images=math_images
        )
    except PrairieLearnExportError as exc:
        raise InvalidFamilyError(str(exc)) from None
    except ValueError as exc:  # an expression mathtext cannot draw
        raise click.ClickException(str(exc)) from None
    try:
        written = write_outputs(out_dir, files)
    except OSError as exc:
        raise click.ClickException(f"cannot write to {str(out_dir)!r}: {exc.strerror or exc}") from None
    for st in stats:
        reasons = ", ".join(f"{r} {n}" for r, n in st.rejections.most_common(3)) or "none"
        click.echo(
            f"{st.family_id}: {st.variants} variant(s), acceptance {st.acceptance_rate:.1%} (rejected: {reasons})"
        )
    if randomised:
        fixed = sum(p.index is None for p in problems)
        click.echo(
            f"wrote {len(randomised)} randomised question(s) (one per family, variants drawn from PrairieLearn's "
            f"seed) and {fixed} fixed question(s) as {fmt} to {out_dir}: {len(written)} file(s)"
        )
    else:
        click.echo(f"wrote {len(problems)} problem(s) as {fmt} to {out_dir}: {len(written)} file(s)")
