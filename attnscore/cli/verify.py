"""``attnscore verify``: the reference against specs, and the mutation table of known mistakes."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import click

from attnscore.cli.errors import BadUsage
from attnscore.cli.options import SpecParam, outside_reference_option
from attnscore.cli.output import finish, stdout_console

__all__ = ["verify"]


def _spec_paths(specs: tuple[str, ...]) -> list[Path]:
    from attnscore.check.verify import bundled_spec_paths

    if specs:
        return [Path(s) for s in specs]
    paths = bundled_spec_paths()
    if not paths:
        raise BadUsage("no SPEC given and no bundled specs found; pass spec files")
    return paths


@click.command("verify")
@click.argument("specs", nargs=-1, type=SpecParam())
@click.option("--no-mutations", is_flag=True, help="Skip the mutation test (known mistakes against each spec).")
@click.option(
    "--jobs",
    type=click.IntRange(min=1, max=64),
    default=None,
    help="Processes verifying specs in parallel (default: one per CPU core, at most one per spec).",
)
@outside_reference_option()
def verify(specs: tuple[str, ...], no_mutations: bool, jobs: int | None, allow_outside_reference: bool) -> None:
    """Prove SPECS sound (default: all bundled specs): the reference passes, known mistakes are caught.

    Each SPEC is a spec file or a bundled spec's id (e.g. score_matrix), or an assignment file:
    then every question's spec is verified (each once).

    Runs the reference on every case of each spec in every dtype (the spec's own, then the other
    dtypes `attnscore test --dtype` accepts), then runs every catalogue mistake the spec targets in
    each of those dtypes and prints a mutation table (mistakes x specs). Exits 0 only when the
    reference passes everything and every targeted mistake fails some case in every dtype, and is
    diagnosed as itself in the spec's own dtypes. Specs are verified in parallel (--jobs); the
    tables are the same, in the same order, whatever the number of processes.
    """
    from rich.table import Table

    from attnscore.check.verify import verify_all
    from attnscore.spec.assignment import load_assignment_specs

    loaded = load_assignment_specs(_spec_paths(specs), allow_outside_reference=allow_outside_reference)
    found = verify_all(loaded, mutations=not no_mutations, jobs=jobs or _cores())
    table = Table(title="attnscore verify: reference against specs", header_style="bold")
    for column in ("spec", "dtype", "cases passed", "points", "failing cases"):
        table.add_column(column)
    mutations: dict[str, dict[str, str]] = {}
    for verification in found:
        for result in verification.references:
            passed = sum(c.passed for c in result.cases)
            failing = ", ".join(f"{c.id} ({c.verdict.label})" for c in result.cases if not c.passed)
            style = "green" if result.all_passed else "red"
            table.add_row(
                verification.spec_id,
                result.dtype,
                f"[{style}]{passed}/{len(result.cases)}[/]",
                f"{result.score}/{result.max_score}",
                failing or "-",
            )
        if not no_mutations:
            mutations[verification.spec_id] = _mutation_cells(list(verification.mutations))
    ok = all(v.ok for v in found)
    console = stdout_console()
    console.print(table)
    if mutations:
        for mtable in mutation_tables(mutations, console.width):
            console.print(mtable)
        console.print(
            "✓ = caught in every dtype and diagnosed as itself in the spec's dtypes (null_implementation: every "
            "form scores 0 in every dtype); caught (dtypes) = some case fails but the diagnosis differs there; "
            "MISSED (dtypes) = every case passes in those dtypes; SCORES p/m (dtypes) = a null implementation "
            "earns points there; · = the spec does not target it"
        )
    if ok:
        console.print("[green]all specs verified[/]")
    else:
        console.print("[red]not verified:[/]")
        for line in problems(found):
            console.print(f"  {line}", markup=False, highlight=False)
    finish(ok)


def _failure_words(failure: Any) -> str:
    """A failing case of the reference in one line: which entry, what value, what was allowed (the
    comparison's own text, :func:`attnscore.report.feedback.mismatch_text`), else the property's
    check text or the call's detail."""
    from attnscore.report.feedback import mismatch_text

    parts = []
    mismatch = failure.mismatch
    if mismatch is not None:  # the worst entry only: the count says how many more
        entries = getattr(mismatch, "entries", ())
        parts.append(mismatch_text(dataclasses.replace(mismatch, entries=entries[:1]) if entries else mismatch))
    if failure.check:
        parts.append(failure.check)
    if failure.detail:
        parts.append(failure.detail)
    text = "; ".join(parts) or failure.verdict.label
    where = f" (example {failure.example} of {failure.examples})" if failure.kind == "property" else ""
    head, *rest = [line.strip() for line in text.splitlines()]
    return " ".join([head, "; ".join(rest)]).strip() + where


def problems(found: list[Any]) -> list[str]:
    """What keeps each spec of ``found`` (:class:`attnscore.check.verify.SpecVerification`) from
    being verified, one line each, with what to do about it: the reference's failing cases (the
    spec's own worked example or tolerance is wrong), then each targeted mistake no case catches,
    then each one caught but diagnosed as something else in the spec's own dtypes."""
    from attnscore.catalogue.mistakes import MISTAKES

    lines: list[str] = []
    for verification in found:
        spec_id = verification.spec_id
        for result in verification.references:
            failing = [c.id for c in result.cases if not (c.passed or c.advises)]
            if failing:
                lines.append(
                    f"{spec_id} ({result.dtype}): the reference fails {', '.join(failing)}: check the expected "
                    "values and the tolerance of those cases"
                )
                lines += [
                    f"{spec_id} ({result.dtype}) {c.id}: {_failure_words(c.failure)}"
                    for c in result.cases
                    if c.id in failing and c.failure is not None
                ]
        missed: dict[str, list[str]] = {}
        undiagnosed: dict[str, list[str]] = {}
        for m in verification.mutations:
            if not m.caught:
                missed.setdefault(m.mistake_id, []).append(m.dtype)
            elif not m.ok:
                undiagnosed.setdefault(m.mistake_id, []).append(m.dtype)
        lines += list(verification.cross_check)
        for mistake, dtypes in missed.items():
            lines.append(
                f"{spec_id}: mistake {mistake} is MISSED ({', '.join(dtypes)}): no case fails for it; add a worked "
                "example or property that it gets wrong, or list the mistakes the spec targets without it "
                "(the spec's mistakes: list; docs/catalogue.md lists them all)"
                if mistake in MISTAKES
                else f"{spec_id}: mistake {mistake} (registered by the spec's reference file) is MISSED "
                f"({', '.join(dtypes)}): no case loses points for it; add a worked example or property that it gets "
                "wrong, or remove it from the reference file"
            )
        for mistake, dtypes in undiagnosed.items():
            lines.append(
                f"{spec_id}: mistake {mistake} is caught but not named as itself ({', '.join(dtypes)}): the cases "
                "it fails look like another mistake there; add a case where it alone is wrong, or leave it out "
                "of the spec's mistakes: list"
            )
    return lines


def _cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def mutation_tables(mutations: dict[str, dict[str, str]], width: int) -> list[Any]:
    """The mutation table (mistakes x specs) as rich tables that each fit in ``width`` columns.

    Specs are taken in order, as many per table as fit; each table has the rows of the mistakes its
    specs target (in catalogue order) and a last "caught" row. A single spec wider than ``width``
    gets a table of its own (wrapped by rich).

    Args:
        mutations: spec id -> {mistake id -> cell text} (:func:`_mutation_cells`).
        width: the console's width in characters.
    """
    from rich.console import Console
    from rich.table import Table

    from attnscore.catalogue.mistakes import MISTAKES

    measure = Console(width=10_000, color_system=None)

    def build(spec_ids: list[str], part: str = "") -> Any:
        title = f"mutation score: known mistakes against specs (every dtype){part}"
        table = Table(title=title, header_style="bold")
        table.add_column("mistake", no_wrap=True)
        for spec_id in spec_ids:
            table.add_column(spec_id.replace("_", "_\n"), justify="center")
        own = [m for s in spec_ids for m in mutations[s] if m not in MISTAKES]  # a spec's own reference file's
        for mistake_id in [*MISTAKES, *dict.fromkeys(own)]:
            if any(mistake_id in mutations[s] for s in spec_ids):
                table.add_row(mistake_id, *[mutations[s].get(mistake_id, "·") for s in spec_ids])
        scores = [
            f"{sum('MISSED' not in v and 'SCORES' not in v for v in mutations[s].values())}/{len(mutations[s])}"
            for s in spec_ids
        ]
        table.add_row("[bold]caught[/]", *scores)
        return table

    def fits(spec_ids: list[str]) -> bool:
        return measure.measure(build(spec_ids)).maximum <= width

    groups: list[list[str]] = []
    for spec_id in mutations:
        if groups and fits([*groups[-1], spec_id]):
            groups[-1].append(spec_id)
        else:
            groups.append([spec_id])
    if len(groups) == 1:
        return [build(groups[0])]
    return [build(group, f", part {i} of {len(groups)}") for i, group in enumerate(groups, 1)]


def _mutation_cells(results: list[Any]) -> dict[str, str]:
    """One table cell per mistake from its results in every dtype: ✓, ``caught (dtypes)``, ``MISSED (dtypes)``
    or, for a null implementation that earns points, ``SCORES p/m (dtypes)``."""
    by_mistake: dict[str, list[Any]] = {}
    for r in results:
        by_mistake.setdefault(r.mistake_id, []).append(r)
    cells = {}
    for mistake_id, rs in by_mistake.items():
        scored = [r for r in rs if r.score is not None and not r.ok]
        if scored:  # a null implementation that earned points: the spec rewards not computing
            worst = max(scored, key=lambda r: r.score)
            cells[mistake_id] = f"[red]SCORES {worst.score}/{worst.max_score}[/] ({', '.join(r.dtype for r in scored)})"
            continue
        missed = [r.dtype for r in rs if not r.caught]
        undiagnosed = [r.dtype for r in rs if r.caught and not r.ok]
        if missed:
            cells[mistake_id] = f"[red]MISSED[/] ({', '.join(missed)})"
        elif undiagnosed:
            cells[mistake_id] = f"[yellow]caught[/] ({', '.join(undiagnosed)})"
        else:
            cells[mistake_id] = "[green]✓[/]"
    return cells
