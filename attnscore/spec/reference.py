"""A spec's own reference function: ``function.reference`` read, trusted and built into a contract.

A spec may give, instead of a bundled ``function.contract``, the instructor's own reference::

    function:
      name: softmax
      reference: softmax_reference.py        # or softmax_reference.py:my_softmax
      reference_check: softmax_check.py:softmax_loop   # optional: a second, independent implementation
      keywords: {dim: -1}                    # passed by name on every call (plain values)
      sizes: {d_model: 4}                    # optional: a symbol's size in every drawn case
      parameters:
        - {name: x, shape: ["...", n]}
      returns: {shape: ["...", n]}

The file is **trusted instructor code**: it is imported in the grading process (never in a
sandboxed worker, which gets only the submission's files and attnscore's worker modules), once per
process and content. A path that resolves (symbolic links followed) outside the spec's own folder is
refused unless the caller says otherwise (``load_spec(..., allow_outside_reference=True)``,
``--allow-outside-reference``): a spec file alone must not be able to make the grader run any file
of the machine. A file that fails to import, lacks the function, or registers something malformed
is one located problem at ``function.reference``, never a traceback.

What the file registers with :mod:`attnscore.instructor` (its properties and known mistakes,
:mod:`attnscore.catalogue.instructor`) becomes the spec's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import re
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from attnscore.catalogue.instructor import OwnProperty, Registered, as_mistake, as_property, collecting
from attnscore.catalogue.mistakes import MISTAKES, Mistake
from attnscore.catalogue.properties import PROPERTIES, Property
from attnscore.maths.contract import Contract
from attnscore.maths.families.instructor import instructor_contract
from attnscore.maths.strategies import derive_seed, draw_examples
from attnscore.spec.located import Positioned, SpecProblem
from attnscore.spec.schema import found_text

__all__ = ["OwnReference", "read_reference", "SYMBOL"]

_T = TypeVar("_T")

OUTSIDE_REFERENCE_HINT = "trust it with --allow-outside-reference, or load_spec(..., allow_outside_reference=True)"
"""What a reference outside its spec's folder is told to do where the loader can be told to trust it."""

SYMBOL = re.compile(r"^[a-z_][a-z0-9_]*$")
"""A size symbol of an instructor's shapes: snake_case (``n``, ``d_model``, ``n_heads``)."""

_LOADED: dict[str, tuple[ModuleType, Registered]] = {}
"""Reference files imported in this process, by module name (path and content digest)."""

_HELPERS: dict[str, tuple[str, ...]] = {}
"""The helper modules (files beside it, or below) each reference file imported when it loaded, by path."""


@dataclass(frozen=True)
class OwnReference:
    """What a spec's own reference gives it.

    Attributes:
        contract: the contract built from the spec and the instructor's function
            (:func:`attnscore.maths.families.instructor.instructor_contract`).
        properties: the properties the file registered, as catalogue properties.
        mistakes: the known mistakes the file registered, as catalogue mistakes.
        check_function: ``function.reference_check``'s function (the spec's keywords added), or None.
        files: the resolved paths of the reference file (and the check's, when another file), then
            the helper modules each imported from its folder (or below) while it loaded.
    """

    contract: Contract
    properties: tuple[Property, ...]
    mistakes: tuple[Mistake, ...]
    check_function: Callable[..., Any] | None
    files: tuple[str, ...]


def _split(text: str, default: str) -> tuple[str, str]:
    """``FILE.py`` or ``FILE.py:name`` as ``(file, name)``."""
    file, sep, name = text.rpartition(":")
    if sep and name.isidentifier() and file:
        return file, name
    return text, default


def _error_line(exc: BaseException, path: str) -> str:
    """`` (file.py line N)``: the last line of ``path`` in the exception's traceback, or ``""``."""
    lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__) if frame.filename == path]
    return f" ({os.path.basename(path)} line {lines[-1]})" if lines else ""


def _import(path: str) -> tuple[ModuleType, Registered]:
    """Import the file at ``path`` (once per process and content) while collecting what it
    registers. Raises ImportError with one line of what went wrong."""
    data = Path(path).read_bytes()
    name = "attnscore_reference_" + hashlib.sha256(path.encode() + b"\0" + data).hexdigest()[:16]
    if name in _LOADED:
        return _LOADED[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"expected a Python file, found {os.path.basename(path)} that Python cannot import")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look a module up by name
    folder = os.path.dirname(path)
    already = set(sys.modules)
    sys.path.insert(0, folder)  # the file's own helper modules beside it, while it loads
    try:
        with collecting() as found:
            # The bytes hashed above, compiled here: the module is what its name says. The
            # loader's own exec_module would read __pycache__'s bytecode wherever its recorded
            # mtime and size match the file, which an edit of the same size within the same second
            # leaves them doing: the old reference would then fill the new key's golden values.
            exec(compile(data, path, "exec", dont_inherit=True), module.__dict__)
    except BaseException as exc:  # noqa: BLE001 - SystemExit and friends from the file are its failure too
        sys.modules.pop(name, None)
        _HELPERS[path] = _forget_helpers(folder, already)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise ImportError(
            f"expected a reference file that imports, found that it raised {type(exc).__name__}: "
            f"{str(exc)[:300]}{_error_line(exc, path)}"
        ) from None
    _HELPERS[path] = _forget_helpers(folder, already)
    _LOADED[name] = (module, found)
    return module, found


def _forget_helpers(folder: str, already: set[str]) -> tuple[str, ...]:
    """Take ``folder`` off the import path again and forget the modules imported from it since
    ``already`` (the reference keeps them through its globals): another spec's reference with a
    helper of the same name imports its own. Returns the helper files, sorted.

    A helper is a module found through ``folder`` itself: ``folder/<name>.py``, or a module of the
    package ``folder/<name>/``. Anything else the reference imported for the first time stays
    imported, also where its files lie below ``folder`` (torch in a virtual environment kept in the
    course's folder: forgetting it would make the next ``import torch`` run torch's initialisation
    a second time, which crashes)."""
    with contextlib.suppress(ValueError):
        sys.path.remove(folder)
    root = os.path.realpath(folder)
    helpers = []
    for module_name in set(sys.modules) - already:
        file = getattr(sys.modules[module_name], "__file__", None)
        if not isinstance(file, str):
            continue
        top = module_name.partition(".")[0]
        where = os.path.realpath(file)
        if where == os.path.join(root, f"{top}.py") or where.startswith(os.path.join(root, top) + os.sep):
            del sys.modules[module_name]
            helpers.append(where)
    return tuple(sorted(helpers))


def _resolved(doc: Positioned, field: str, text: str, allow_outside: bool, problems: list[SpecProblem]) -> str | None:
    """The real path of reference file ``text`` (relative to the spec's folder), or None with a problem."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(doc.file)))
    path = os.path.realpath(os.path.join(folder, os.path.expanduser(text)))
    where = ("function", field)
    if not allow_outside and os.path.commonpath([folder, path]) != folder:
        problems.append(
            doc.problem(
                where,
                f"expected a reference file inside the spec's folder {folder}, found {text!r} resolving to {path} "
                f"outside it ({OUTSIDE_REFERENCE_HINT})",
            )
        )
        return None
    if not path.endswith(".py"):
        problems.append(doc.problem(where, f"expected a Python file (FILE.py or FILE.py:function), found {text!r}"))
        return None
    if not os.path.isfile(path):
        problems.append(doc.problem(where, f"expected a reference file, found no such file {path}"))
        return None
    return path


def _function(
    doc: Positioned, field: str, raw: str, default: str, allow_outside: bool, problems: list[SpecProblem]
) -> tuple[Callable[..., Any], str, Registered] | None:
    """The function ``raw`` names (``FILE.py`` or ``FILE.py:name``), its file and what the file registered."""
    text, name = _split(raw, default)
    path = _resolved(doc, field, text, allow_outside, problems)
    if path is None:
        return None
    where = ("function", field)
    try:
        module, found = _import(path)
    except (ImportError, OSError) as exc:
        problems.append(doc.problem(where, str(exc)))
        return None
    function = getattr(module, name, None)
    if function is None:
        defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        problems.append(
            doc.problem(
                where,
                f"expected a function {name} in {os.path.basename(path)}, found none "
                f"(it defines: {', '.join(defined) or 'no function'})",
            )
        )
        return None
    if not callable(function):
        problems.append(
            doc.problem(
                where,
                f"expected {name} in {os.path.basename(path)} to be a function, found {type(function).__name__}",
            )
        )
        return None
    return function, path, found


def _shape(
    doc: Positioned, path: tuple[Any, ...], shape: list[Any], problems: list[SpecProblem]
) -> tuple[str, ...] | None:
    """A declared shape of size symbols (``"..."`` first only), or None with a problem."""
    for k, sym in enumerate(shape):
        if sym == "..." and k == 0:
            continue
        if not isinstance(sym, str) or not SYMBOL.match(sym):
            problems.append(
                doc.problem(
                    path + (k,),
                    "expected '...' (first only) or a snake_case size symbol such as n or d_model (fix a size "
                    f"with function.sizes), found {found_text(sym)}",
                )
            )
            return None
    return tuple(shape)


def _properties(
    doc: Positioned, found: Registered, contract: Contract, problems: list[SpecProblem]
) -> tuple[Property, ...]:
    """The file's properties as catalogue properties; a name registered twice or already a
    catalogue property's, or a check that raises on the reference's own outputs, is a problem."""
    out: list[Property] = []
    for own in _own(doc, found.properties, [p.name for p in found.properties], PROPERTIES, "property name", problems):
        prop = as_property(own)
        if _tried(doc, prop, own, contract, problems):
            out.append(prop)
    return tuple(out)


def _tried(doc: Positioned, prop: Property, own: OwnProperty, contract: Contract, problems: list[SpecProblem]) -> bool:
    """Whether ``own``'s check runs on one drawn input with the reference's outputs; else a problem."""
    try:
        example = draw_examples(prop.examples(contract, own.max_value), 1, derive_seed(contract.name, own.name))
        for ex in example:
            prop.calls(contract, ex)
    except Exception as exc:  # noqa: BLE001 - the instructor's code, or inputs that cannot be drawn
        problems.append(doc.problem(("function", "reference"), f"expected property {own.name} to run, found: {exc}"))
        return False
    return True


def _mistakes(doc: Positioned, found: Registered, problems: list[SpecProblem]) -> tuple[Mistake, ...]:
    """The file's mistakes as catalogue mistakes; an id registered twice or a catalogue mistake's is a problem."""
    own = _own(doc, found.mistakes, [m.id for m in found.mistakes], MISTAKES, "mistake id", problems)
    return tuple(as_mistake(m) for m in own)


def _own(
    doc: Positioned,
    items: Sequence[_T],
    names: Sequence[str],
    catalogue: Mapping[str, object],
    what: str,
    problems: list[SpecProblem],
) -> list[_T]:
    """The ``items`` (a file's properties or mistakes, called ``names``) that are the file's own: one
    whose name is already a ``catalogue`` entry's or was registered before is a problem (``what``:
    ``"property name"``, ``"mistake id"``) and is left out."""
    kind = what.split()[0]
    kept: list[_T] = []
    seen: set[str] = set()
    for item, name in zip(items, names, strict=True):
        if name in catalogue or name in seen:
            where = f"a catalogue {kind}'s" if name in catalogue else "registered twice"
            problems.append(
                doc.problem(
                    ("function", "reference"),
                    f"expected a {what} of the reference file's own, found {name!r} ({where})",
                )
            )
            continue
        seen.add(name)
        kept.append(item)
    return kept


def _keywords(doc: Positioned, fn: dict[str, Any], names: set[str], problems: list[SpecProblem]) -> dict[str, Any]:
    """``function.keywords``: plain values (int, float, bool, str), no parameter's name."""
    keywords: dict[str, Any] = dict(fn.get("keywords") or {})
    for name, value in keywords.items():
        if name in names:
            problems.append(
                doc.problem(
                    ("function", "keywords", name),
                    f"expected a keyword that is not a parameter, found {name!r} (a parameter)",
                    key=True,
                )
            )
        elif not isinstance(value, int | float | str):  # bool is an int
            problems.append(
                doc.problem(
                    ("function", "keywords", name),
                    f"expected a plain value (a number, true/false or text), found {found_text(value)}",
                )
            )
    return keywords


def read_reference(
    doc: Positioned, fn: dict[str, Any], allow_outside: bool, problems: list[SpecProblem]
) -> OwnReference | None:
    """A spec's own reference (see the module docstring) from its ``function`` mapping ``fn``
    (already of the schema's form, with ``reference``); None when something is wrong, each
    problem added to ``problems``, located."""
    before = len(problems)
    parameters: list[tuple[str, tuple[str, ...]]] = []
    bools: set[str] = set()
    for i, raw in enumerate(fn["parameters"]):
        for flag in ("optional", "full_shape"):
            if flag in raw:
                problems.append(
                    doc.problem(
                        ("function", "parameters", i, flag),
                        f"expected no {flag} with function.reference (masks are the bundled contracts'), found it",
                        key=True,
                    )
                )
        shape = _shape(doc, ("function", "parameters", i, "shape"), list(raw["shape"]), problems)
        if shape is not None:
            parameters.append((raw["name"], shape))
        if raw.get("dtype") == "bool":
            bools.add(raw["name"])
    names = [n for n, _ in parameters]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        problems.append(doc.problem(("function", "parameters"), f"expected each parameter once, found {twice!r} again"))
    returns = _shape(doc, ("function", "returns", "shape"), list(fn["returns"]["shape"]), problems)
    used = {sym for _, shape in parameters for sym in shape}
    sizes: dict[str, int] = dict(fn.get("sizes") or {})
    for sym in sizes:
        if sym not in used:
            problems.append(
                doc.problem(
                    ("function", "sizes", sym),
                    f"expected a size symbol of the parameters' shapes ({', '.join(sorted(used - {'...'}))}), "
                    f"found {sym!r}",
                    key=True,
                )
            )
    for k, sym in enumerate(returns or ()):
        if sym not in used:
            problems.append(
                doc.problem(
                    ("function", "returns", "shape", k),
                    f"expected a symbol of the parameters' shapes ({', '.join(sorted(used))}), found {sym!r}",
                )
            )
    keywords = _keywords(doc, fn, set(names), problems)
    loaded = _function(doc, "reference", fn["reference"], fn["name"], allow_outside, problems)
    checked = None
    if "reference_check" in fn:
        checked = _function(doc, "reference_check", fn["reference_check"], fn["name"], allow_outside, problems)
    if loaded is None or returns is None or len(problems) > before:
        return None
    function, path, found = loaded
    label = f"{getattr(function, '__name__', fn['name'])} ({os.path.basename(path)})"
    contract = instructor_contract(
        fn["name"],
        function,
        tuple(parameters),
        returns,
        keywords=keywords,
        sizes=sizes,
        bool_parameters=frozenset(bools),
        label=label,
    )
    properties = _properties(doc, found, contract, problems)
    mistakes = _mistakes(doc, found, problems)
    check_function = None
    files: tuple[str, ...] = (path, *_HELPERS.get(path, ()))
    if checked is not None:
        check, check_path, _ = checked
        check_function = instructor_contract(
            fn["name"], check, tuple(parameters), returns, keywords=keywords, bool_parameters=frozenset(bools)
        ).reference
        files += tuple(f for f in (check_path, *_HELPERS.get(check_path, ())) if f not in files)
    if len(problems) > before:
        return None
    return OwnReference(contract, properties, mistakes, check_function, files)
