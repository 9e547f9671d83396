"""Problem families: YAML files in ``specs/practice/``, validated on load.

A family file holds one family (a mapping) or several (``families: [...]``). Every problem in a
file is reported at once, each as ``file:line:col: field.path: expected ..., found ...``; types
are read from the YAML node tags (YAML 1.1: ``1e-3`` is a string, ``no`` a boolean, ``010`` an
octal integer), never guessed.

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
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "KINDS",
    "MC_TEMPLATES",
    "Family",
    "FamilyFileError",
    "parse_family_text",
    "load_family_file",
    "load_families",
]

KINDS = ("one_score", "score_vector", "score_matrix", "scaled_score", "softmax", "multiple_choice")
MC_TEMPLATES = ("highest_key", "true_statement", "scaled_value")
SCALED_WIDTHS = (1, 4, 16, 64)

_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


class FamilyFileError(ValueError):
    """A family file is invalid.

    Attributes:
        problems: every problem found, each ``file:line:col: field.path: expected ..., found ...``.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        more = f" (and {len(problems) - 1} more: {'; '.join(problems[1:])})" if len(problems) > 1 else ""
        super().__init__(f"{problems[0]}{more}")


@dataclass(frozen=True)
class Family:
    """One validated problem family (see the module docstring for the fields)."""

    id: str
    version: int
    kind: str
    title: str
    path: str
    intro: str = ""
    values: tuple[Fraction, Fraction, Fraction] = (Fraction(-4), Fraction(4), Fraction(1))
    d_k: tuple[int, ...] = (2,)
    n_k: tuple[int, ...] = (3,)
    shapes: tuple[tuple[int, int, int], ...] = ((2, 2, 2),)
    places: int = 3
    max_attempts: int = 200
    max_duplicate_rate: float = 0.05
    mode: str = "exact"
    multipliers: tuple[int, ...] = (1, 2, 3, 4)
    templates: tuple[str, ...] = MC_TEMPLATES
    featured: tuple[dict[str, Any], ...] = field(default=())

    def grid(self) -> tuple[Fraction, ...]:
        """The entries students see: ``min, min + step, ..., max`` (exact)."""
        lo, hi, step = self.values
        count = int((hi - lo) / step)
        return tuple(lo + i * step for i in range(count + 1))


class _Checker:
    """Collects problems while reading one file's nodes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[str] = []

    def fail(self, node: yaml.Node | None, where: str, expected: str, found: str) -> None:
        if node is not None:
            pos = f"{node.start_mark.line + 1}:{node.start_mark.column + 1}"
        else:
            pos = "1:1"
        self.problems.append(f"{self.path}:{pos}: {where}: expected {expected}, found {found}")

    @staticmethod
    def describe(node: yaml.Node) -> str:
        if isinstance(node, yaml.MappingNode):
            return "a mapping"
        if isinstance(node, yaml.SequenceNode):
            return "a list"
        kind = node.tag.rsplit(":", 1)[-1]
        names = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "null": "null"}
        return f"{names.get(kind, kind)} {node.value!r}"

    def string(self, node: yaml.Node, where: str) -> str | None:
        if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":str") and node.value.strip():
            return node.value
        self.fail(node, where, "a non-empty string", self.describe(node))
        return None

    def integer(self, node: yaml.Node, where: str, lo: int, hi: int) -> int | None:
        if not (isinstance(node, yaml.ScalarNode) and node.tag.endswith(":int")):
            self.fail(node, where, f"an integer from {lo} to {hi}", self.describe(node))
            return None
        raw = node.value.lstrip("+-")
        if not re.fullmatch(r"0|[1-9][0-9]*", raw):
            self.fail(
                node,
                where,
                f"a plain decimal integer from {lo} to {hi} (YAML 1.1 reads leading zeros as octal and 0x as hex)",
                repr(node.value),
            )
            return None
        value = int(node.value)
        if not lo <= value <= hi:
            self.fail(node, where, f"an integer from {lo} to {hi}", str(value))
            return None
        return value

    def number(self, node: yaml.Node, where: str) -> Fraction | None:
        ok = isinstance(node, yaml.ScalarNode) and (node.tag.endswith(":int") or node.tag.endswith(":float"))
        if ok:
            try:
                value = Decimal(node.value.replace("_", ""))
            except InvalidOperation:
                ok = False
            else:
                if node.tag.endswith(":int") and not re.fullmatch(r"[-+]?(0|[1-9][0-9]*)", node.value):
                    ok = False
                elif not value.is_finite():
                    ok = False
        if not ok:
            hint = " (YAML 1.1 reads 1e-3 as a string: write 0.001)" if isinstance(node, yaml.ScalarNode) else ""
            self.fail(node, where, f"a finite decimal number{hint}", self.describe(node))
            return None
        return Fraction(value)

    def seq(self, node: yaml.Node, where: str, min_len: int = 1) -> list[yaml.Node] | None:
        if isinstance(node, yaml.SequenceNode) and len(node.value) >= min_len:
            return list(node.value)
        self.fail(node, where, f"a list of at least {min_len} item(s)", self.describe(node))
        return None

    def mapping(self, node: yaml.Node, where: str, allowed: tuple[str, ...]) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, where, "a mapping", self.describe(node))
            return {}
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            sub = f"{where}.{key}" if where else str(key)
            if key not in allowed:
                self.fail(key_node, sub, f"one of the fields {', '.join(allowed)}", f"unknown field {key!r}")
            elif key in out:
                self.fail(key_node, sub, "each field once", "a repeated field")
            else:
                out[key] = (key_node, value_node)
        return out

    def vector(self, node: yaml.Node, where: str) -> tuple[Fraction, ...] | None:
        items = self.seq(node, where)
        if items is None:
            return None
        values = [self.number(item, f"{where}[{i}]") for i, item in enumerate(items)]
        exact = [v for v in values if v is not None]
        return tuple(exact) if len(exact) == len(values) else None

    def matrix(self, node: yaml.Node, where: str) -> tuple[tuple[Fraction, ...], ...] | None:
        rows = self.seq(node, where)
        if rows is None:
            return None
        out = [self.vector(row, f"{where}[{i}]") for i, row in enumerate(rows)]
        if any(r is None for r in out):
            return None
        widths = {len(r) for r in out}  # type: ignore[arg-type]
        if len(widths) != 1:
            self.fail(node, where, "rows of one width", f"widths {sorted(widths)}")
            return None
        return tuple(out)  # type: ignore[arg-type]


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
_FEATURED_FIELDS = {
    "one_score": ("q", "k"),
    "score_vector": ("q", "keys"),
    "score_matrix": ("Q", "K"),
    "scaled_score": ("q", "k"),
    "softmax": ("base", "multipliers", "scores"),
    "multiple_choice": (),
}


def _int_list(
    c: _Checker, node: yaml.Node, where: str, allowed: tuple[int, ...], why: str = ""
) -> tuple[int, ...] | None:
    items = c.seq(node, where)
    if items is None:
        return None
    out = []
    for i, item in enumerate(items):
        value = c.integer(item, f"{where}[{i}]", min(allowed), max(allowed))
        if value is not None and value not in allowed:
            c.fail(item, f"{where}[{i}]", f"one of {list(allowed)}{why}", str(value))
            value = None
        if value is None:
            return None
        out.append(value)
    return tuple(out)


def _featured(c: _Checker, node: yaml.Node, where: str, kind: str, mode: str) -> dict[str, Any] | None:
    fields = _FEATURED_FIELDS[kind]
    m = c.mapping(node, where, fields)
    if not isinstance(node, yaml.MappingNode):
        return None
    out: dict[str, Any] = {}
    need: tuple[str, ...]
    if kind == "softmax":
        need = ("base", "multipliers") if mode == "exact" else ("scores",)
    else:
        need = fields
    for name in need:
        if name not in m:
            c.fail(
                node,
                f"{where}.{name}",
                f"a value for {name!r} ({kind}, mode {mode})" if kind == "softmax" else f"a value for {name!r}",
                "nothing",
            )
    for name, (_, value_node) in m.items():
        sub = f"{where}.{name}"
        if name in ("q", "k", "scores"):
            out[name] = c.vector(value_node, sub)
        elif name in ("keys", "Q", "K"):
            out[name] = c.matrix(value_node, sub)
        elif name == "base":
            out[name] = c.integer(value_node, sub, -9, 9)
        elif name == "multipliers":
            out[name] = _int_list(c, value_node, sub, tuple(range(1, 21)))
        if out[name] is None:
            return None
    if kind == "softmax" and mode == "exact" and "scores" in out:
        c.fail(node, f"{where}.scores", "base and multipliers in mode exact", "scores")
        return None
    if kind == "softmax" and mode == "ranking" and ("base" in out or "multipliers" in out):
        c.fail(node, f"{where}.base", "scores in mode ranking", "base/multipliers")
        return None
    if any(name not in out for name in need):
        return None
    if kind in ("one_score", "scaled_score") and len(out["q"]) != len(out["k"]):
        c.fail(node, f"{where}.k", f"{len(out['q'])} entries (the width of q)", f"{len(out['k'])}")
        return None
    if kind == "scaled_score" and len(out["q"]) not in SCALED_WIDTHS:
        c.fail(
            node,
            f"{where}.q",
            f"d_k in {list(SCALED_WIDTHS)} (so that sqrt(d_k) is an integer)",
            f"d_k={len(out['q'])}",
        )
        return None
    if kind == "score_vector" and len(out["keys"][0]) != len(out["q"]):
        c.fail(
            node,
            f"{where}.keys",
            f"keys of width {len(out['q'])} (the width of q)",
            f"width {len(out['keys'][0])}",
        )
        return None
    if kind == "score_matrix" and len(out["Q"][0]) != len(out["K"][0]):
        c.fail(
            node,
            f"{where}.K",
            f"rows of width d_k={len(out['Q'][0])} (the width of Q)",
            f"width {len(out['K'][0])}",
        )
        return None
    return out


def _family(c: _Checker, node: yaml.Node, where: str) -> Family | None:
    m = c.mapping(node, where, _FIELDS)
    if not isinstance(node, yaml.MappingNode):
        return None
    before = len(c.problems)
    prefix = f"{where}." if where else ""
    kw: dict[str, Any] = {}
    for name in ("id", "version", "kind", "title"):
        if name not in m:
            c.fail(node, prefix + name, f"a value for the required field {name!r}", "nothing")
    if "id" in m:
        value = c.string(m["id"][1], prefix + "id")
        if value is not None and not _ID.fullmatch(value):
            c.fail(m["id"][1], prefix + "id", "a slug of lowercase letters, digits and '-'", repr(value))
        kw["id"] = value
    if "version" in m:
        kw["version"] = c.integer(m["version"][1], prefix + "version", 1, 10**6)
    kind = None
    if "kind" in m:
        kind = c.string(m["kind"][1], prefix + "kind")
        if kind is not None and kind not in KINDS:
            c.fail(m["kind"][1], prefix + "kind", f"one of {', '.join(KINDS)}", repr(kind))
            kind = None
        kw["kind"] = kind
    for name in ("title", "intro"):
        if name in m:
            kw[name] = c.string(m[name][1], prefix + name)
    if "values" in m:
        v = c.mapping(m["values"][1], prefix + "values", ("min", "max", "step"))
        nums = {k: c.number(v[k][1], f"{prefix}values.{k}") for k in v}
        if set(nums) != {"min", "max", "step"}:
            c.fail(m["values"][1], prefix + "values", "min, max and step", ", ".join(sorted(nums)) or "nothing")
        elif (
            (lo_ := nums["min"]) is not None
            and (hi_ := nums["max"]) is not None
            and (step_ := nums["step"]) is not None
        ):
            lo, hi, step = lo_, hi_, step_
            if step <= 0 or (step * 10).denominator != 1:
                c.fail(
                    v["step"][1],
                    prefix + "values.step",
                    "a positive step with at most one decimal (1, 0.5)",
                    str(float(step)),
                )
            elif lo >= hi or ((hi - lo) / step).denominator != 1:
                c.fail(
                    m["values"][1],
                    prefix + "values",
                    "min < max with max - min a multiple of step",
                    f"min={float(lo)}, max={float(hi)}, step={float(step)}",
                )
            elif (lo * 10).denominator != 1 or max(abs(lo), abs(hi)) > 20:
                c.fail(
                    m["values"][1],
                    prefix + "values",
                    "hand-friendly bounds: one decimal, |value| <= 20",
                    f"min={float(lo)}, max={float(hi)}",
                )
            else:
                kw["values"] = (lo, hi, step)
    widths = (
        SCALED_WIDTHS if kind == "scaled_score" else (1, 2, 3, 4) if kind != "multiple_choice" else (1, 2, 3, 4, 16, 64)
    )
    if "d_k" in m:
        why = " (perfect squares, so that sqrt(d_k) is an integer)" if kind == "scaled_score" else ""
        kw["d_k"] = _int_list(c, m["d_k"][1], prefix + "d_k", widths, why)
    elif kind == "scaled_score":
        kw["d_k"] = SCALED_WIDTHS
    if "n_k" in m:
        kw["n_k"] = _int_list(c, m["n_k"][1], prefix + "n_k", (2, 3, 4))
    if "shapes" in m:
        items = c.seq(m["shapes"][1], prefix + "shapes")
        shapes = []
        for i, item in enumerate(items or []):
            sm = c.mapping(item, f"{prefix}shapes[{i}]", ("n_q", "d_k", "n_k"))
            dims = [
                c.integer(sm[k][1], f"{prefix}shapes[{i}].{k}", 1, 3) if k in sm else None
                for k in ("n_q", "d_k", "n_k")
            ]
            if len(sm) != 3 and isinstance(item, yaml.MappingNode):
                c.fail(item, f"{prefix}shapes[{i}]", "n_q, d_k and n_k", ", ".join(sorted(sm)) or "nothing")
            if None not in dims:
                shapes.append(tuple(dims))
        kw["shapes"] = tuple(shapes)
    if "places" in m:
        kw["places"] = c.integer(m["places"][1], prefix + "places", 0, 6)
    if "max_attempts" in m:
        kw["max_attempts"] = c.integer(m["max_attempts"][1], prefix + "max_attempts", 1, 100_000)
    if "max_duplicate_rate" in m:
        rate = c.number(m["max_duplicate_rate"][1], prefix + "max_duplicate_rate")
        if rate is not None and not 0 <= rate <= 1:
            c.fail(
                m["max_duplicate_rate"][1],
                prefix + "max_duplicate_rate",
                "a rate from 0 to 1",
                str(float(rate)),
            )
        elif rate is not None:
            kw["max_duplicate_rate"] = float(rate)
    if "mode" in m:
        mode = c.string(m["mode"][1], prefix + "mode")
        if kind != "softmax":
            c.fail(m["mode"][1], prefix + "mode", "no mode (only kind softmax has one)", repr(mode))
        elif mode not in ("exact", "ranking"):
            c.fail(m["mode"][1], prefix + "mode", "exact or ranking", repr(mode))
        kw["mode"] = mode
    if "multipliers" in m:
        kw["multipliers"] = _int_list(c, m["multipliers"][1], prefix + "multipliers", tuple(range(1, 21)))
    if "templates" in m:
        items = c.seq(m["templates"][1], prefix + "templates")
        names = tuple(c.string(item, f"{prefix}templates[{i}]") for i, item in enumerate(items or []))
        for i, (template, item) in enumerate(zip(names, items or [], strict=True)):
            if template is not None and template not in MC_TEMPLATES:
                c.fail(item, f"{prefix}templates[{i}]", f"one of {', '.join(MC_TEMPLATES)}", repr(template))
        kw["templates"] = names
    if "featured" in m and kind is not None:
        items = c.seq(m["featured"][1], prefix + "featured")
        if items and kind == "multiple_choice":
            c.fail(
                m["featured"][1],
                prefix + "featured",
                "no featured examples for kind multiple_choice",
                f"{len(items)} item(s)",
            )
        else:
            mode = kw.get("mode") or "exact"
            kw["featured"] = tuple(
                _featured(c, item, f"{prefix}featured[{i}]", kind, mode) for i, item in enumerate(items or [])
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
        FamilyFileError: the YAML is malformed or any field is invalid (all problems at once).
    """
    c = _Checker(path)
    try:
        root = yaml.compose(source, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        pos = f"{mark.line + 1}:{mark.column + 1}" if mark else "1:1"
        raise FamilyFileError([f"{path}:{pos}: (YAML syntax): expected valid YAML, found {exc.problem}"]) from None
    except yaml.YAMLError as exc:
        raise FamilyFileError([f"{path}:1:1: (YAML syntax): expected valid YAML, found {exc}"]) from None
    if root is None:
        raise FamilyFileError([f"{path}:1:1: (file): expected a family mapping, found an empty document"])
    families: list[Family | None]
    if isinstance(root, yaml.MappingNode) and any(k.value == "families" for k, _ in root.value):
        m = c.mapping(root, "", ("families",))
        items = c.seq(m["families"][1], "families") or []
        families = [_family(c, item, f"families[{i}]") for i, item in enumerate(items)]
    else:
        families = [_family(c, root, "")]
    if c.problems:
        raise FamilyFileError(sorted(c.problems, key=_position))
    return [f for f in families if f is not None]


def _position(problem: str) -> tuple[int, int]:
    """(line, column) of a ``file:line:col: ...`` problem, for sorting."""
    match = re.search(r":(\d+):(\d+): ", problem)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


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
