"""``attnscore schema`` and ``attnscore specs``: what the package knows, printed."""

from __future__ import annotations

import json
import sys

import click

from attnscore.cli.output import stdout_console

__all__ = ["schema", "list_specs"]


@click.command("schema")
@click.option("--assignment", is_flag=True, help="The assignment format's schema instead (assignment-v1.schema.json).")
def schema(assignment: bool) -> None:
    """Print the JSON Schema of the spec format (for editors that complete and check specs)."""
    from attnscore.spec.schema import assignment_schema, spec_schema

    click.echo(json.dumps(assignment_schema() if assignment else spec_schema(), indent=2, ensure_ascii=False))


@click.command("specs")
@click.option("--markdown", is_flag=True, help="Print the spec, property and mistake catalogues as Markdown tables.")
def list_specs(markdown: bool) -> None:
    """List the bundled specs and the registered properties."""
    from attnscore.catalogue.properties import PROPERTIES
    from attnscore.check.verify import bundled_spec_paths
    from attnscore.maths.display import counted
    from attnscore.spec.load import load_specs

    if markdown:
        from attnscore.report.catalogue_markdown import mistake_table, property_table, spec_table

        tables = (spec_table(load_specs(list(bundled_spec_paths()))), property_table(), mistake_table())
        sys.stdout.write("\n\n".join(tables) + "\n")
        return
    console = stdout_console()
    for spec in load_specs(list(bundled_spec_paths())):
        console.print(
            f"[bold]{spec.path}[/]  {spec.id} v{spec.version}: {spec.title} "
            f"({counted(len(spec.worked_examples), 'worked example')}, "
            f"{counted(len(spec.properties), 'property', 'properties')}, {counted(spec.max_points, 'point')})",
            soft_wrap=True,  # one line per spec, its path never broken (a pipe reads it whole)
        )
    console.print("\n[bold]Registered properties[/]")
    for prop in PROPERTIES.values():
        console.print(f"  {prop.name}: {prop.summary}")
