"""Vendor: copy part of ``attnscore.practice`` into a standalone package (for PrairieLearn's ``server.py``).

PrairieLearn runs a question's ``server.py`` in its own Python, where attnscore is not
installed. :func:`vendor_package` copies the import closure of a few ``attnscore.practice``
modules, as they are installed now, into a package that needs only the standard library:

- ``from attnscore.practice.X import ...`` becomes ``from .X import ...`` (and X is copied too);
  a subpackage (``kinds/``) is copied as a folder, its modules' imports written ``from ..X import ...``;
- a module-level import of a third-party package is wrapped in ``try``/``except ImportError``
  binding the names to ``None``: the vendored code must never call it (the family is passed in as
  a :class:`~attnscore.practice.family.Family`, a standard-library record; the YAML reader,
  ``families.py``, is not copied), and PrairieLearn's tests for ``server.py`` would show at once if it did;
- importing anything else of attnscore (``attnscore.maths.reference``) is refused.

The package name carries a hash of the copied sources (``attnscore_practice_1a2b3c4d5e``): a
PrairieLearn worker that imports two questions exported by different attnscore versions never
mixes their modules.

Example:
    >>> files = vendor_package(["seeds"])
    >>> sorted(name.split("/", 1)[1] for name in files)
    ['__init__.py', 'seeds.py']
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["VendorError", "vendor_package", "PACKAGE_PREFIX"]

PACKAGE_PREFIX = "attnscore_practice_"
_SOURCE = "attnscore.practice"
_STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}


class VendorError(ValueError):
    """A module cannot be vendored (it imports attnscore outside ``attnscore.practice``, or is missing).

    Attributes:
        module: the module that could not be copied.
    """

    def __init__(self, module: str, why: str) -> None:
        super().__init__(f"cannot vendor attnscore.practice.{module} into a PrairieLearn question: {why}")
        self.module = module


def _source(module: str) -> tuple[str, bool]:
    """The module's source, and whether it is a package (its ``__init__.py``)."""
    try:
        spec = importlib.util.find_spec(f"{_SOURCE}.{module}")
    except ModuleNotFoundError:
        spec = None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise VendorError(module, "no such pure-Python module in attnscore.practice")
    return Path(spec.origin).read_text(encoding="utf-8"), spec.submodule_search_locations is not None


def _is_module(dotted: str) -> bool:
    """Whether ``attnscore.practice.<dotted>`` is a module (not a name defined in its package)."""
    try:
        return importlib.util.find_spec(f"{_SOURCE}.{dotted}") is not None
    except ModuleNotFoundError:
        return False


def _with_parents(dotted: str) -> set[str]:
    """``a.b.c`` -> ``{"a", "a.b", "a.b.c"}``: a module and the packages it lives in."""
    parts = dotted.split(".")
    return {".".join(parts[: i + 1]) for i in range(len(parts))}


def _bound_names(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    return [a.asname or a.name for a in node.names]


def _rewrite(module: str, source: str, package: bool = False) -> tuple[str, set[str]]:
    """The module's source with its imports rewritten, and the attnscore.practice modules it needs.

    ``package``: the source is ``module``'s ``__init__.py``. Imports become relative to the
    vendored root: ``.X`` from a top-level module, ``..X`` from ``kinds/`` and so on.
    """
    dots = "." * (1 + module.count(".") + (1 if package else 0))
    tree = ast.parse(source)
    top_level = {id(n) for n in tree.body}
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []  # (first line, last line, replacement), 1-based inclusive
    needed: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        assert node.end_lineno is not None
        indent = " " * node.col_offset
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("attnscore"):
            name = node.module or ""
            if name == _SOURCE:
                needed.update(a.name for a in node.names)
                new_from = f"from {dots} import "
            elif name.startswith(_SOURCE + "."):
                sub = name[len(_SOURCE) + 1 :]
                needed.update(_with_parents(sub))
                needed.update(f"{sub}.{a.name}" for a in node.names if _is_module(f"{sub}.{a.name}"))
                new_from = f"from {dots}{sub} import "
            else:
                raise VendorError(module, f"it imports {name}, which is not part of attnscore.practice")
            names = ", ".join(f"{a.name} as {a.asname}" if a.asname else a.name for a in node.names)
            edits.append((node.lineno, node.end_lineno, f"{indent}{new_from}{names}\n"))
            continue
        roots = (
            [a.name.split(".")[0] for a in node.names]
            if isinstance(node, ast.Import)
            else [(node.module or "").split(".")[0]]
        )
        if "attnscore" in roots:
            raise VendorError(module, "it imports attnscore by absolute module path; use 'from attnscore.practice.X'")
        relative = isinstance(node, ast.ImportFrom) and node.level > 0
        if relative or all(r in _STDLIB for r in roots) or id(node) not in top_level:
            continue  # stdlib, or a third-party import inside a function (only fails if called)
        original = "".join(lines[node.lineno - 1 : node.end_lineno]).strip()
        bind = "".join(f"{indent}    {n} = None  # type: ignore[assignment]\n" for n in _bound_names(node))
        edits.append(
            (
                node.lineno,
                node.end_lineno,
                f"{indent}try:\n{indent}    {original}\n{indent}except ImportError:"
                "  # vendored: generating variants never uses it\n" + bind,
            )
        )
    for first, last, text in sorted(edits, reverse=True):
        lines[first - 1 : last] = [text]
    return "".join(lines), needed


def vendor_package(roots: Sequence[str], version: str = "") -> dict[str, bytes]:
    """Copy ``attnscore.practice`` modules and their import closure into one standalone package.

    Args:
        roots: module names inside ``attnscore.practice`` (``["prairielearn_server"]``).
        version: the attnscore version written in each file's header.

    Returns:
        ``{"<package>/__init__.py": bytes, "<package>/<module>.py": bytes, "<package>/<sub>/__init__.py": bytes,
        ...}`` with ``<package>``
        = ``attnscore_practice_`` + the first 10 hex digits of the SHA-256 of the copied sources.

    Raises:
        VendorError: a module is missing or imports attnscore outside ``attnscore.practice``.
    """
    todo, done = list(roots), {}
    packages: set[str] = set()
    while todo:
        module = todo.pop()
        if module in done:
            continue
        source, is_package = _source(module)
        text, needed = _rewrite(module, source, is_package)
        done[module] = text
        if is_package:
            packages.add(module)
        todo.extend(sorted(needed - set(done)))
    digest = hashlib.sha256()
    for module in sorted(done):
        digest.update(f"{module}\0{done[module]}\0".encode())
    package = PACKAGE_PREFIX + digest.hexdigest()[:10]
    header = (
        f"# Vendored from attnscore.practice.{{module}} (attnscore {version or 'unknown version'}) by\n"
        "# 'attnscore practice --format prairielearn'. Do not edit: export again instead.\n"
    )
    files = {
        f"{package}/__init__.py": (
            f'"""attnscore.practice generator modules, vendored for PrairieLearn ({", ".join(sorted(done))})."""\n'
        ).encode()
    }
    for module in sorted(done):
        path = module.replace(".", "/") + ("/__init__.py" if module in packages else ".py")
        files[f"{package}/{path}"] = (header.format(module=module) + done[module]).encode("utf-8")
    return files
