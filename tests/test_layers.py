"""The package's folders are layers: every import goes down (``docs/architecture.md``).

The walk reads every module's imports (function-level ones too) with :mod:`ast`, so a lazy import
cannot hide an upward arrow; the worker's boundary package imports nothing of attnscore outside
itself, because the sandbox copies that folder, and only that folder, into the worker's world.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "attnscore"

# Bottom to top. Folders on one floor never import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("atomic",),
    ("boundary",),
    ("maths",),
    ("catalogue",),
    ("spec",),
    ("report",),
    ("check",),
    ("submission",),
    ("sandbox",),
    ("grade", "timing"),
    ("export", "practice"),
    ("selfcheck", "pytest_plugin", "instructor"),
    ("cli",),
    ("__init__", "__main__"),
)
FLOOR = {part: floor for floor, parts in enumerate(LAYERS) for part in parts}


def _part(module: str) -> str:
    """The layer a dotted ``attnscore.x.y`` name belongs to (its first component below attnscore)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1] if len(parts) > 1 else [parts[0], "__init__"]
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every ``attnscore`` module ``path`` imports, with its line (relative imports resolved)."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            found.append((node.lineno, base))
            # `from attnscore import maths` names a folder too
            if base == "attnscore":
                found += [(node.lineno, f"attnscore.{alias.name}") for alias in node.names]
    return [(line, module) for line, module in found if module == "attnscore" or module.startswith("attnscore.")]


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_part_of_the_package_has_a_floor() -> None:
    parts = {_part(_module_name(p)) for p in MODULES}
    assert parts - set(FLOOR) == set(), "add the new folder to LAYERS (and to docs/architecture.md)"
    assert len(MODULES) > 100  # the walk really read the package


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_imports_only_go_down(path: Path) -> None:
    here = _part(_module_name(path))
    upward = []
    for line, module in _imports(path):
        there = _part(module) if module != "attnscore" else "__init__"
        if there == here:
            continue
        if FLOOR[there] >= FLOOR[here]:
            upward.append(f"line {line}: {module} ({there}, floor {FLOOR[there]} >= {here}, floor {FLOOR[here]})")
    assert upward == []


@pytest.mark.parametrize("path", sorted((PACKAGE / "boundary").rglob("*.py")), ids=lambda p: p.name)
def test_the_boundary_imports_nothing_outside_itself(path: Path) -> None:
    outside = [
        f"line {line}: {module}" for line, module in _imports(path) if not module.startswith("attnscore.boundary")
    ]
    assert outside == []


def test_the_walk_sees_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a lazy import of a higher floor inside a function is found."""
    module = PACKAGE / "maths" / "reference.py"
    lines = _imports(module)
    assert all(_part(m) in {"boundary", "maths"} for _, m in lines)
    source = "def f():\n    from attnscore.grade.grading import grade_submission\n"
    tree = ast.parse(source)
    names = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert names == ["attnscore.grade.grading"] and FLOOR[_part(names[0])] > FLOOR["maths"]


def test_docs_architecture_names_every_module() -> None:
    """docs/architecture.md stays true: it names every module of the package, and its layer table
    names every floor of LAYERS."""
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = sorted(str(p.relative_to(PACKAGE)) for p in MODULES if p.name != "__init__.py" and p.name not in text)
    assert missing == []
    floors = [f"`{part}/`" if (PACKAGE / part).is_dir() else f"`{part}.py`" for parts in LAYERS for part in parts]
    assert [f for f in floors if f not in text] == []


def _entry(folder: str, module: str) -> str | None:
    """``module``'s entry directly in ``folder`` (the module itself, or the subfolder that holds it)."""
    prefix = folder + "."
    return prefix + module[len(prefix) :].split(".")[0] if module.startswith(prefix) else None


def _import_edges() -> dict[str, set[str]]:
    """Module -> the attnscore modules it imports (``from attnscore.maths import bounds`` names the module)."""
    names = {_module_name(p).removesuffix(".__init__") for p in MODULES}
    edges: dict[str, set[str]] = {}
    for path in MODULES:
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attnscore"):
                found |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in names}
        found |= {m for _, m in _imports(path)}
        edges[_module_name(path).removesuffix(".__init__")] = found
    return edges


def circles_inside_folders(edges: dict[str, set[str]]) -> list[list[str]]:
    """Each import circle among the entries (modules and subfolders) of one folder, sorted."""
    folders = {m.rsplit(".", 1)[0] for m in edges} | {m for m in edges if m != "attnscore"}
    circles = []
    for folder in sorted(folders):
        graph: dict[str, set[str]] = {}
        for source, targets in edges.items():
            a = _entry(folder, source)
            if a is not None:
                graph.setdefault(a, set()).update(b for t in targets if (b := _entry(folder, t)) not in (None, a))

        def reaches(start: str, graph: dict[str, set[str]] = graph) -> set[str]:
            seen, todo = set(), [start]
            while todo:
                for nxt in graph.get(todo.pop(), ()):
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
            return seen

        reach = {node: reaches(node) for node in graph}
        done: set[str] = set()
        for node in sorted(graph):
            circle = sorted({node} | {other for other in reach[node] if node in reach.get(other, set())})
            if len(circle) > 1 and node not in done:
                circles.append(circle)
                done.update(circle)
    return circles


def test_no_import_circle_inside_a_folder() -> None:
    """No two modules (or a module and a subfolder) of one folder import each other, even through
    others, lazily or for annotations only (``docs/architecture.md``: imports go downwards in a folder too)."""
    assert circles_inside_folders(_import_edges()) == []


def test_the_circle_walk_sees_a_circle() -> None:
    """The checker itself: a -> b -> a inside one folder is one circle, a subfolder counts as one entry."""
    edges = {
        "attnscore.maths.a": {"attnscore.maths.b"},
        "attnscore.maths.b": {"attnscore.maths.kinds.c"},
        "attnscore.maths.kinds.c": {"attnscore.maths.a", "attnscore.boundary.x"},
        "attnscore.maths.d": {"attnscore.maths.a"},
    }
    assert circles_inside_folders(edges) == [["attnscore.maths.a", "attnscore.maths.b", "attnscore.maths.kinds"]]
    edges["attnscore.maths.kinds.c"] = {"attnscore.boundary.x"}
    assert circles_inside_folders(edges) == []
