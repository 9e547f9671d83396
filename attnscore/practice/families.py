"""Problem families: YAML files in ``specs/practice/``, validated on load.

A family file holds one family (a mapping) or several (``families: [...]``). Every problem in a
file is reported at once, each as ``file:line:col: field.path: expected ..., found ...``. Files
are read as spec files are (:mod:`attnscore.spec.located`: duplicate keys, merge keys, tags and
YAML 1.1 traps such as octal ``010`` are refused; ``no`` is a boolean; ``1e-3`` is a number, as
in YAML 1.2), and numbers are read exactly from their source text (``0.7`` is 7/10).

Fields (defaults in brackets):

- ``id`` (slug), ``version`` (int >= 1), ``kind`` (one of :data:`KINDS`), ``title``, ``intro`` [""];
- ``values``: the grid of entries shown to students, ``{min, max, step}`` [-4, 4, 1]; ``step``
  has at most one decimal (``0.5``) so hand calculation works;
- ``d_k``: widths to draw from; ``n_k``: numbers of keys; ``shapes``: for ``score_matrix``, a list
  of ``{n_q, d_k, n_k}``;
- ``places`` [3]: decimals of answers (rounded half away from zero); ``max_attempts`` [200];
  ``max_duplicate_rate`` [0.05] (duplicates among 1,000 variants, a class; checked by ``--verify``);
- ``mode`` (``softmax``: ``exact`` or ``ranking``), ``multipliers`` (``softmax`` exact, 1 to 20: the
  ``m`` in scores ``c + ln m``), ``templates`` (``multiple_choice``);
- ``featured``: fixed worked examples rendered with ``--featured`` (not for ``multiple_choice``).

Example:
    >>> fam = parse_family_text("id: demo\\nversion: 1\\nkind: one_score\\ntitle: Demo\\n", "demo.yaml")[0]
    >>> fam.id, fam.d_k, fam.places
    ('demo', (2,), 3)
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path
from typing import Any

from attnscore.practice.family import MC_TEMPLATES, Family
from attnscore.practice.kinds import KINDS, REGISTRY, Kind
from attnscore.practice.kinds.scaled_score import SCALED_WIDTHS
from attnscore.spec.located import Positioned, SpecProblem, read_yaml

__all__ = [
    "KINDS",
    "MC_TEMPLATES",
    "SCALED_WIDTHS",
    "Family",
    "FamilyFileError",
    "parse_family_text",
    "load_family_file",
    "load_families",
]

_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_PLAIN_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)")
# Field names of located.py's file-level problems, as family files name them.
_FILE_FIELDS = {"(yaml)": "(YAML syntax)"}
# How located.py's messages about a number's written form begin.
_NUMBER_FORM = ("expected a decimal number, found", "expected a plain decimal number, found")

P = tuple[Any, ...]


class FamilyFileError(ValueError):
    """A family file is invalid.

    Attributes:
        problems: every problem found, each ``file:line:col: field.path: expected ..., found ...``.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        more = f" (and {len(problems) - 1} more: {'; '.join(problems[1:])})" if len(problems) > 1 else ""
        super().__init__(f"{problems[0]}{more}")


class _Checker:
    """Collects located problems while checking one file's values (each given with its path)."""

    def __init__(self, positioned: Positioned) -> None:
        self.pos = positioned
        self.path = positioned.file
        self.problems: list[SpecProblem] = []

    def fail(self, path: P, expected: str, found: str, *, key: bool = False) -> None:
        self.problems.append(self.pos.problem(path, f"expected {expected}, found {found}", key=key))

    def describe(self, path: P, value: Any) -> str:
        if isinstance(value, dict):
            return "a mapping"
        if isinstance(value, list):
            return "a list"
        names = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}
        text = self.pos.text(path)
        return f"{names.get(type(value), type(value).__name__)} {text if text is not None else str(value)!r}"

    def string(self, path: P, value: Any) -> str | None:
        if isinstance(value, str) and value.strip():
            return value
        self.fail(path, "a non-empty string", self.describe(path, value))
        return None

    def integer(self, path: P, value: Any, lo: int, hi: int) -> int | None:
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(path, f"an integer from {lo} to {hi}", self.describe(path, value))
            return None
        text = self.pos.text(path) or ""
        if not _PLAIN_INT.fullmatch(text):
            self.fail(
                path,
                f"a plain decimal integer from {lo} to {hi} (YAML 1.1 reads leading zeros as octal and 0x as hex)",
                repr(text),
            )
            return None
        if not lo <= value <= hi:
            self.fail(path, f"an integer from {lo} to {hi}", str(value))
            return None
        return value

    def number(self, path: P, value: Any) -> Fraction | None:
        """The number at ``path``, exactly as written (``0.7`` is 7/10, not the float's value)."""
        exact: Decimal | None = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            text = self.pos.text(path) or ""
            try:
                exact = Decimal(text)
            except InvalidOperation:
                exact = None
            if exact is not None and (
                not exact.is_finite() or (isinstance(value, int) and not _PLAIN_INT.fullmatch(text))
            ):
                exact = None
        if exact is None:
            self.fail(path, "a finite decimal number", self.describe(path, value))
            return None
        return Fraction(exact)

    def seq(self, path: P, value: Any, min_len: int = 1) -> list[Any] | None:
        if isinstance(value, list) and len(value) >= min_len:
            return value
        self.fail(path, f"a list of at least {min_len} item(s)", self.describe(path, value))
        return None

    def mapping(self, path: P, value: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
        """The fields of the mapping at ``path``; an unknown field is a problem (duplicates are located.py's)."""
        if not isinstance(value, dict):
            self.fail(path, "a mapping", self.describe(path, value))
            return {}
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key not in allowed:
                self.fail(path + (key,), f"one of the fields {', '.join(allowed)}", f"unknown field {key!r}", key=True)
            else:
                out[key] = item
        return out

    def vector(self, path: P, value: Any) -> tuple[Fraction, ...] | None:
        items = self.seq(path, value)
        if items is None:
            return None
        values = [self.number(path + (i,), item) for i, item in enumerate(items)]
        exact = [v for v in values if v is not None]
        return tuple(exact) if len(exact) == len(values) else None

    def matrix(self, path: P, value: Any) -> tuple[tuple[Fraction, ...], ...] | None:
        rows = self.seq(path, value)
        if rows is None:
            return None
        out = [self.vector(path + (i,), row) for i, row in enumerate(rows)]
        exact = [r for r in out if r is not None]
        if len(exact) != len(out):
            return None
        widths = {len(r) for r in exact}
        if len(widths) != 1:
            self.fail(path, "rows of one width", f"widths {sorted(widths)}")
            return None
        return tuple(exact)


_FIELDS = (
    "id",
    "version",
    "kind",
    "title",
    "intro",
    "values",
    "d_k",
    "n_k",
    "shapes",
    "places",
    "max_attempts",
    "max_duplicate_rate",
    "mode",
    "multipliers",
    "templates",
    "featured",
)


def _int_list(c: _Checker, path: P, value: Any, allowed: tuple[int, ...], why: str = "") -> tuple[int, ...] | None:
    items = c.seq(path, value)
    if items is None:
        return None
    out = []
    for i, item in enumerate(items):
        number = c.integer(path + (i,), item, min(allowed), max(allowed))
        if number is not None and number not in allowed:
            c.fail(path + (i,), f"one of {list(allowed)}{why}", str(number))
            number = None
        if number is None:
            return None
        out.append(number)
    return tuple(out)


#: How each featured field is read (the kinds name which fields they take: ``Kind.featured_fields``).
_FEATURED_READERS: dict[str, Any] = {
    "q": _Checker.vector,
    "k": _Checker.vector,
    "scores": _Checker.vector,
    "keys": _Checker.matrix,
    "Q": _Checker.matrix,
    "K": _Checker.matrix,
    "base": lambda c, path, item: c.integer(path, item, -9, 9),
    "multipliers": lambda c, path, item: _int_list(c, path, item, tuple(range(1, 21))),
}


def _featured(c: _Checker, path: P, value: Any, kind: Kind, mode: str) -> dict[str, Any] | None:
    """One featured example: each field read by its reader, then the kind's own cross-checks."""
    m = c.mapping(path, value, kind.featured_fields)
    if not isinstance(value, dict):
        return None
    out: dict[str, Any] = {}
    for name in kind.featured_required(mode):
        if name not in m:
            c.fail(path + (name,), kind.missing_field(name, mode), "nothing")
    for name, item in m.items():
        out[name] = _FEATURED_READERS[name](c, path + (name,), item)
        if out[name] is None:
            return None
    return out if kind.check_featured(c, path, out, mode) else None


def _values(c: _Checker, path: P, value: Any) -> tuple[Fraction, Fraction, Fraction] | None:
    """The ``values`` grid ``(min, max, step)``, exact, or None after reporting what is wrong."""
    v = c.mapping(path, value, ("min", "max", "step"))
    nums = {k: c.number(path + (k,), v[k]) for k in v}
    if set(nums) != {"min", "max", "step"}:
        c.fail(path, "min, max and step", ", ".join(sorted(nums)) or "nothing")
        return None
    lo, hi, step = nums["min"], nums["max"], nums["step"]
    if lo is None or hi is None or step is None:
        return None
    if step <= 0 or (step * 10).denominator != 1:
        c.fail(path + ("step",), "a positive step with at most one decimal (1, 0.5)", str(float(step)))
    elif lo >= hi or ((hi - lo) / step).denominator != 1:
        c.fail(
            path,
            "min < max with max - min a multiple of step",
            f"min={float(lo)}, max={float(hi)}, step={float(step)}",
        )
    elif (lo * 10).denominator != 1 or max(abs(lo), abs(hi)) > 20:
        c.fail(path, "hand-friendly bounds: one decimal, |value| <= 20", f"min={float(lo)}, max={float(hi)}")
    else:
        return (lo, hi, step)
    return None


def _family(c: _Checker, path: P, value: Any) -> Family | None:
    m = c.mapping(path, value, _FIELDS)
    if not isinstance(value, dict):
        return None
    before = len(c.problems)
    kw: dict[str, Any] = {}
    for name in ("id", "version", "kind", "title"):
        if name not in m:
            c.fail(path + (name,), f"a value for the required field {name!r}", "nothing")
    if "id" in m:
        ident = c.string(path + ("id",), m["id"])
        if ident is not None and not _ID.fullmatch(ident):
            c.fail(path + ("id",), "a slug of lowercase letters, digits and '-'", repr(ident))
        kw["id"] = ident
    if "version" in m:
        kw["version"] = c.integer(path + ("version",), m["version"], 1, 10**6)
    kind: Kind | None = None
    if "kind" in m:
        kind_name = c.string(path + ("kind",), m["kind"])
        if kind_name is not None and kind_name not in KINDS:
            c.fail(path + ("kind",), f"one of {', '.join(KINDS)}", repr(kind_name))
            kind_name = None
        kw["kind"] = kind_name
        kind = REGISTRY[kind_name] if kind_name is not None else None
    for name in ("title", "intro"):
        if name in m:
            kw[name] = c.string(path + (name,), m[name])
    if "values" in m:
        kw["values"] = _values(c, path + ("values",), m["values"])
    if "d_k" in m:
        widths, why = (kind.d_k_widths, kind.d_k_why) if kind is not None else (Kind.d_k_widths, Kind.d_k_why)
        kw["d_k"] = _int_list(c, path + ("d_k",), m["d_k"], widths, why)
    elif kind is not None and kind.d_k_default is not None:
        kw["d_k"] = kind.d_k_default
    if "n_k" in m:
        kw["n_k"] = _int_list(c, path + ("n_k",), m["n_k"], (2, 3, 4))
    if "shapes" in m:
        items = c.seq(path + ("shapes",), m["shapes"])
        shapes = []
        for i, item in enumerate(items or []):
            where = path + ("shapes", i)
            sm = c.mapping(where, item, ("n_q", "d_k", "n_k"))
            dims = [c.integer(where + (k,), sm[k], 1, 3) if k in sm else None for k in ("n_q", "d_k", "n_k")]
            if len(sm) != 3 and isinstance(item, dict):
                c.fail(where, "n_q, d_k and n_k", ", ".join(sorted(sm)) or "nothing")
            if None not in dims:
                shapes.append(tuple(dims))
        kw["shapes"] = tuple(shapes)
    if "places" in m:
        kw["places"] = c.integer(path + ("places",), m["places"], 0, 6)
    if "max_attempts" in m:
        kw["max_attempts"] = c.integer(path + ("max_attempts",), m["max_attempts"], 1, 100_000)
    if "max_duplicate_rate" in m:
        rate = c.number(path + ("max_duplicate_rate",), m["max_duplicate_rate"])
        if rate is not None and not 0 <= rate <= 1:
            c.fail(path + ("max_duplicate_rate",), "a rate from 0 to 1", str(float(rate)))
        elif rate is not None:
            kw["max_duplicate_rate"] = float(rate)
    if "mode" in m:
        mode = c.string(path + ("mode",), m["mode"])
        if kind is None or not kind.modes:
            with_modes = " or ".join(k.name for k in REGISTRY.values() if k.modes)
            c.fail(path + ("mode",), f"no mode (only kind {with_modes} has one)", repr(mode))
        elif mode not in kind.modes:
            c.fail(path + ("mode",), " or ".join(kind.modes), repr(mode))
        kw["mode"] = mode
    if "multipliers" in m:
        kw["multipliers"] = _int_list(c, path + ("multipliers",), m["multipliers"], tuple(range(1, 21)))
    if "templates" in m:
        items = c.seq(path + ("templates",), m["templates"])
        names = tuple(c.string(path + ("templates", i), item) for i, item in enumerate(items or []))
        for i, template in enumerate(names):
            if template is not None and template not in MC_TEMPLATES:
                c.fail(path + ("templates", i), f"one of {', '.join(MC_TEMPLATES)}", repr(template))
        kw["templates"] = names
    if "featured" in m and kind is not None:
        items = c.seq(path + ("featured",), m["featured"])
        if items and not kind.featured_fields:
            c.fail(path + ("featured",), f"no featured examples for kind {kind.name}", f"{len(items)} item(s)")
        else:
            mode = kw.get("mode") or "exact"
            kw["featured"] = tuple(
                _featured(c, path + ("featured", i), item, kind, mode) for i, item in enumerate(items or [])
            )
    if len(c.problems) > before:
        return None
    kw = {k: v for k, v in kw.items() if v is not None}
    return Family(path=c.path, **kw)


def parse_family_text(source: str, path: str) -> list[Family]:
    """Parse and validate one family file's text.

    Args:
        source: the YAML text.
        path: the file name used in messages.

    Returns:
        The families it declares, in file order.

    Raises:
        FamilyFileError: the YAML is malformed or any field is invalid (all problems at once, in line order).
    """
    positioned, read_problems = read_yaml(source, path)
    if positioned is None:
        if any(p.field == "(top level)" for p in read_problems):  # located.py: nothing but comments or space
            raise FamilyFileError([f"{path}:1:1: (file): expected a family mapping, found an empty document"])
        raise FamilyFileError(
            [
                str(SpecProblem(p.file, p.line, p.col, _FILE_FIELDS.get(p.field, p.field), p.message))
                for p in read_problems
            ]
        )
    c = _Checker(positioned)
    root = positioned.data
    families: list[Family | None]
    if isinstance(root, dict) and "families" in root:
        m = c.mapping((), root, ("families",))
        items = c.seq(("families",), m["families"]) or []
        families = [_family(c, ("families", i), item) for i, item in enumerate(items)]
    else:
        families = [_family(c, (), root)]
    # A number form both readers refuse (octal 010, 0x10) is reported once, in the family's words
    # (which give the allowed range); located.py's other problems (tags, cycles) are all kept.
    checked = {(p.line, p.col) for p in c.problems}
    problems = c.problems + [
        p for p in read_problems if (p.line, p.col) not in checked or not p.message.startswith(_NUMBER_FORM)
    ]
    if problems:
        raise FamilyFileError([str(p) for p in sorted(problems, key=lambda p: (p.line, p.col))])
    return [f for f in families if f is not None]


def load_family_file(path: str | Path) -> list[Family]:
    """Read and validate one family file (see :func:`parse_family_text`).

    Raises:
        FamilyFileError: the file cannot be read, or is invalid.
    """
    p = Path(path)
    try:
        source = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FamilyFileError(
            [f"{p}:1:1: (file): expected a readable UTF-8 file, found {exc.__class__.__name__}"]
        ) from None
    return parse_family_text(source, str(p))


def load_families(directory: str | Path) -> list[Family]:
    """Load every ``*.yaml`` family file in ``directory`` (sorted by file name).

    Raises:
        FamilyFileError: a file is invalid, two families share an id, or there is no family.
    """
    d = Path(directory)
    families: list[Family] = []
    problems: list[str] = []
    for path in sorted(d.glob("*.yaml")):
        try:
            families.extend(load_family_file(path))
        except FamilyFileError as exc:
            problems.extend(exc.problems)
    seen: dict[str, str] = {}
    for fam in families:
        if fam.id in seen:
            problems.append(
                f"{fam.path}:1:1: id: expected a unique family id, found {fam.id!r} (also in {seen[fam.id]})"
            )
        seen[fam.id] = fam.path
    if not families and not problems:
        problems.append(f"{d}:1:1: (directory): expected at least one family file (*.yaml), found none")
    if problems:
        raise FamilyFileError(problems)
    return families
