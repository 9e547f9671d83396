"""``attnscore verify``: the reference against specs, and the mutation table of known mistakes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from attnscore.cli.errors import BadUsage
from attnscore.cli.options import SpecParam
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
def verify(specs: tuple[str, ...], no_mutations: bool) -> None:
    """Prove SPECS sound (default: all bundled specs): the reference passes, known mistakes are caught.

    Each SPEC is a spec file or a bundled spec's id (e.g. score_matrix).

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
    console = stdout_console()
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
    finish(ok)


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
