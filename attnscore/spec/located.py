"""Reading spec files: YAML with the position of every value, and located problems.

A spec problem is reported as ``file:line:col: field.path: what was expected, what was found``.
This module reads the YAML (PyYAML's safe loader, YAML 1.1; libyaml's parser where PyYAML has it,
see :func:`compose`), keeps a map from each value's
field path to its line and column, and refuses duplicate keys, which PyYAML would silently drop.
It also flags YAML 1.1 traps that would otherwise pass unnoticed (``010`` read as octal 8), and
reads ``1e-3`` as the number YAML 1.2 (and an editor checking the file against the schema) reads,
not as the text PyYAML's YAML 1.1 makes of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = [
    "SpecProblem",
    "SpecError",
    "Positioned",
    "read_yaml",
    "compose",
    "field_path",
    "line_col",
    "MAX_DEPTH",
    "MAX_VALUES",
]

Path = tuple[Any, ...]


@dataclass(frozen=True)
class SpecProblem:
    """One problem in a spec file, with where it is."""

    file: str
    line: int
    col: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.field}: {self.message}"


class SpecError(ValueError):
    """A spec file is invalid. ``problems`` lists every problem found, each located; ``kind`` is
    what the file given was read as: ``"spec"``, or ``"assignment"`` (its questions' specs' problems
    included), for the count line a command ends with."""

    def __init__(self, problems: list[SpecProblem], *, kind: str = "spec") -> None:
        self.problems = list(problems)
        self.kind = kind
        super().__init__("\n".join(str(p) for p in self.problems))


def _key_problem(file: str, key_node: yaml.Node, path: Path, text: str) -> SpecProblem:
    """A problem located at a mapping key (its line and column) under field ``path``."""
    return SpecProblem(file, key_node.start_mark.line + 1, key_node.start_mark.column + 1, field_path(path), text)


def field_path(path: Path) -> str:
    """The field path of a spec value, as problems name it.

    Example:
        >>> field_path(("worked_examples", 0, "inputs", "q"))
        'worked_examples[0].inputs.q'
        >>> field_path(())
        '(top level)'
    """
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


@dataclass
class Positioned:
    """Parsed YAML data plus the 1-based ``(line, col)`` of every value and mapping key.

    ``texts`` holds the source text of every scalar value as written (without quotes), so that a
    number can be read exactly: ``Fraction(Decimal(positioned.text(path)))`` is 7/10 for ``0.7``,
    where ``data`` holds the nearest float.
    """

    file: str
    data: Any
    values: dict[Path, tuple[int, int]]
    keys: dict[Path, tuple[int, int]]
    texts: dict[Path, str] = field(default_factory=dict)

    def text(self, path: Path) -> str | None:
        """Source text of the scalar at ``path`` (``'0.7'``, ``'1e-3'``, ``'no'``); None for a mapping or list.

        Example:
            >>> positioned, _ = read_yaml("step: 0.70\\nflag: no\\n", "f.yaml")
            >>> positioned.text(("step",)), positioned.data["step"], positioned.text(("flag",))
            ('0.70', 0.7, 'no')
        """
        return self.texts.get(tuple(path))

    def where(self, path: Path, *, key: bool = False) -> tuple[int, int]:
        """Position of the value (or key) at ``path``, else of its nearest located ancestor."""
        table = self.keys if key and path in self.keys else self.values
        p = tuple(path)
        while p not in table and p:
            p = p[:-1]
            table = self.values
        return table.get(p, (1, 1))

    def problem(self, path: Path, message: str, *, key: bool = False) -> SpecProblem:
        line, col = self.where(path, key=key)
        return SpecProblem(self.file, line, col, field_path(path), message)

    def repeated_id(self, seen: dict[str, int], entries: str, i: int, what: str = "id") -> SpecProblem | None:
        """The problem of entry ``i`` of the list ``entries`` (``"questions"``) when an earlier entry
        had its ``id`` (``seen``: each id's first index, which this adds to), else None; ``what``
        names the id in the message (``"question id"``)."""
        found = self.data[entries][i]["id"]
        first = seen.setdefault(found, i)
        if first == i:
            return None
        return self.problem(
            (entries, i, "id"), f"expected a unique {what}, found {found!r} again (first at {entries}[{first}])"
        )


MAX_DEPTH = 64
"""Deepest nesting of mappings and sequences a spec may have."""
MAX_VALUES = 200_000
"""Most values a spec may hold once aliases (``*name``) are expanded: bounds alias bombs."""
_PLAIN_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")

_OCTAL_LOOKING = re.compile(r"^[-+]?0[0-9_]+$")
# A float with an exponent and no dot (1e-3): text in YAML 1.1 (PyYAML), a number in YAML 1.2.
_EXPONENT_FLOAT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")
# Plain decimal numbers; YAML 1.1 also reads 0x10, 0o17, 1_000 and 1:30 (sexagesimal) as numbers.
_PLAIN_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$")


_LIBYAML: type[Any] | None = getattr(yaml, "CSafeLoader", None)
"""PyYAML's loader on libyaml's C parser, where PyYAML was built with it (its wheels are)."""


def compose(text: str) -> yaml.Node | None:
    """The node tree of the one YAML document ``text`` (``None`` for an empty one): libyaml's parse
    where PyYAML has libyaml and libyaml reads the text, else PyYAML's own parser.

    Both give the same nodes, tags, values and marks (line, column) for a document they both read
    (``tests/spec/test_located.py`` compares them on every YAML file of the repository and on
    generated documents), and libyaml's is about nine times faster: 0.5 s against 5 s for the
    repository's 84 files. A plain scalar's style is ``""`` from libyaml and ``None`` from PyYAML
    (read it as ``not node.style``), and an indentless block list's ``flow_style`` ``False`` and
    ``None`` (nothing here reads it). Whatever libyaml refuses, for any reason, is parsed again by
    PyYAML's own parser, so a file's problems and their wording are PyYAML's with or without libyaml.

    Raises:
        yaml.YAMLError, RecursionError: PyYAML's own, for text it cannot read.
    """
    if _LIBYAML is not None:
        try:
            return yaml.compose(text, Loader=_LIBYAML)
        except Exception:  # noqa: BLE001 - any refusal is PyYAML's to word
            pass
    return yaml.compose(text, Loader=yaml.SafeLoader)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def read_yaml(text: str, file: str) -> tuple[Positioned | None, list[SpecProblem]]:
    """Parse ``text`` as one YAML document; return the positioned data and any problems."""
    try:
        root = compose(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = _one_line(exc.problem or "invalid YAML")
        return None, [SpecProblem(file, line, col, "(yaml)", f"expected valid YAML, found a syntax error: {what}")]
    except yaml.reader.ReaderError as exc:
        code = ord(exc.character) if isinstance(exc.character, str) else int(exc.character)
        line, col = line_col(text, exc.position)
        return None, [
            SpecProblem(
                file,
                line,
                col,
                "(yaml)",
                f"expected printable text, found the character U+{code:04X} ({_one_line(exc.reason)})",
            )
        ]
    except (yaml.YAMLError, RecursionError) as exc:
        reason = "nesting too deep" if isinstance(exc, RecursionError) else f"an error: {_one_line(exc)}"
        return None, [SpecProblem(file, 1, 1, "(yaml)", f"expected valid YAML, found {reason}")]
    if root is None:
        return None, [SpecProblem(file, 1, 1, "(top level)", "expected a mapping of spec fields, found an empty file")]
    constructor = yaml.SafeLoader("")
    values: dict[Path, tuple[int, int]] = {}
    keys: dict[Path, tuple[int, int]] = {}
    texts: dict[Path, str] = {}
    problems: list[SpecProblem] = []
    active: set[int] = set()  # nodes being built on the current path: an alias back to one is a cycle

    class _TooMany(Exception):
        pass

    def build(node: yaml.Node, path: Path) -> Any:
        values[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if len(values) > MAX_VALUES:
            raise _TooMany
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            where = (file, node.start_mark.line + 1, node.start_mark.column + 1, field_path(path))
            if id(node) in active:
                problems.append(
                    SpecProblem(
                        *where, "expected an anchor (&name) that does not contain its own alias, found one that does"
                    )
                )
                return None
            if len(path) >= MAX_DEPTH:
                problems.append(SpecProblem(*where, f"expected at most {MAX_DEPTH} levels of nesting, found more"))
                return None
            if node.tag not in _PLAIN_TAGS:
                problems.append(SpecProblem(*where, f"expected a plain mapping or list, found the tag {node.tag}"))
            active.add(id(node))
            try:
                return build_collection(node, path)
            finally:
                active.discard(id(node))
        return build_scalar(node, path)

    def build_collection(node: yaml.Node, path: Path) -> Any:
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    problems.append(
                        _key_problem(
                            file, key_node, path, "expected plain fields, found a merge key (<<); write the fields out"
                        )
                    )
                    continue
                try:
                    key = constructor.construct_object(key_node, deep=True)
                except (yaml.YAMLError, ValueError, TypeError) as exc:
                    key = f"<unreadable key: {_one_line(exc)[:60]}>"
                if not isinstance(key, str):
                    problems.append(_key_problem(file, key_node, path, f"expected a text key, found {key!r}"))
                    key = str(key)
                if key in out:
                    problems.append(
                        _key_problem(file, key_node, path + (key,), "expected each key once, found a duplicate key")
                    )
                keys[path + (key,)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                out[key] = build(value_node, path + (key,))
            return out
        return [build(item, path + (i,)) for i, item in enumerate(node.value)]

    def build_scalar(node: yaml.Node, path: Path) -> Any:
        texts[path] = node.value
        if node.tag == "tag:yaml.org,2002:str" and not node.style and _EXPONENT_FLOAT.match(node.value):
            return float(node.value)  # 1e-3: a number in YAML 1.2 (and for editors using the schema), as here
        try:
            value = constructor.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
            problems.append(
                SpecProblem(
                    file,
                    *values[path],
                    field_path(path),
                    f"expected a plain YAML value, found {node.value!r} tagged {node.tag} "
                    f"({_one_line(getattr(exc, 'problem', None) or exc)})",
                )
            )
            return None
        if node.tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") and not node.style:
            if _OCTAL_LOOKING.match(node.value) and node.value.lstrip("+-") != "0":
                problems.append(
                    SpecProblem(
                        file,
                        *values[path],
                        field_path(path),
                        f"expected a decimal number, found {node.value!r}, which YAML 1.1 reads as "
                        f"octal {value}; drop the leading zero",
                    )
                )
            elif not _PLAIN_NUMBER.match(node.value):
                problems.append(
                    SpecProblem(
                        file,
                        *values[path],
                        field_path(path),
                        f"expected a plain decimal number, found {node.value!r}, which YAML 1.1 "
                        f"reads as {value}; write {value} (or quote it if it is text)",
                    )
                )
        return value

    try:
        data = build(root, ())
    except _TooMany:
        return None, [
            SpecProblem(
                file,
                1,
                1,
                "(yaml)",
                f"expected at most {MAX_VALUES} values once aliases (*name) are expanded, found more (an alias bomb?)",
            )
        ]
    except RecursionError:
        return None, [SpecProblem(file, 1, 1, "(yaml)", "expected valid YAML, found nesting too deep")]
    return Positioned(file, data, values, keys, texts), problems


def line_col(text: str, position: int) -> tuple[int, int]:
    """1-based ``(line, column)`` of character ``position`` in ``text``."""
    before = text[:position]
    return before.count("\n") + 1, position - (before.rfind("\n") + 1) + 1
