"""The catalogues as Markdown tables: bundled specs, registered properties, known mistakes.

``attnscore specs --markdown`` prints them; ``docs/catalogue.md`` holds the same tables and a test
(``tests/report/test_catalogue_markdown.py``) fails when they differ, so the documentation cannot drift
from the code. A ``|`` inside a cell (``|q|·|k|``) is written ``\\|``, as GitHub-flavoured Markdown
needs, so every row keeps its columns.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path

from attnscore.catalogue.mistakes import MISTAKES
from attnscore.catalogue.properties import PROPERTIES
from attnscore.maths.contracts import CONTRACTS
from attnscore.spec.model import Spec

__all__ = ["spec_table", "property_table", "mistake_table", "cell"]


def _points(points: Fraction) -> str:
    return str(points.numerator) if points.denominator == 1 else f"{float(points):g}"


def cell(text: str) -> str:
    r"""``text`` made safe for one table cell: pipes escaped, line breaks joined by spaces.

    >>> print(cell("No score exceeds |q|·|k| in magnitude"))
    No score exceeds \|q\|·\|k\| in magnitude
    >>> print(cell("two" + chr(10) + "lines"))
    two lines
    """
    return " ".join(text.splitlines()).replace("|", "\\|")


def spec_table(specs: Iterable[Spec]) -> str:
    """One row per spec: file, signature, worked examples, properties, points."""
    rows = ["| spec | function | worked examples | properties | points |", "|---|---|---|---|---|"]
    for spec in sorted(specs, key=lambda s: Path(s.path).name):
        rows.append(
            f"| `specs/{Path(spec.path).name}` | `{spec.function}({', '.join(spec.parameter_names)})` "
            f"| {', '.join(e.id for e in spec.worked_examples)} | {', '.join(u.name for u in spec.properties)} "
            f"| {_points(spec.max_points)} |"
        )
    return "\n".join(rows)


def property_table() -> str:
    """One row per registered property: name, the contracts it applies to (in some sample configuration
    of their keywords, as the mistake table), what it checks."""
    rows = ["| property | applies to | what it checks |", "|---|---|---|"]
    for prop in PROPERTIES.values():
        applies = ", ".join(
            name for name, c in CONTRACTS.items() if any(prop.applies(s) for s in c.sample_configurations())
        )
        applies = applies or "a spec's own reference function (`function.reference`)"  # no bundled contract
        relational = " (relational: several calls per example)" if prop.calls.__name__ != "<lambda>" else ""
        rows.append(f"| `{prop.name}` | {applies} | {cell(prop.summary)}{relational} |")
    return "\n".join(rows)


def mistake_table() -> str:
    """One row per catalogue mistake: id and title, contracts, the feedback a student gets."""
    rows = ["| mistake | contracts | feedback |", "|---|---|---|"]
    for m in MISTAKES.values():
        contracts = ", ".join(name for name in CONTRACTS if name in m.contracts)
        rows.append(f"| `{m.id}` ({cell(m.title)}) | {contracts} | {cell(m.message)} |")
    return "\n".join(rows)
