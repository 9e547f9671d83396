"""The problem kinds: one module each, one registry, and no branching on a kind's name outside them."""

from __future__ import annotations

import ast
import inspect
import random
import subprocess
import sys
from pathlib import Path

import pytest

from attnscore.practice import kinds
from attnscore.practice.families import FamilyFileError, parse_family_text
from attnscore.practice.family import Family
from attnscore.practice.float64 import FLOAT64
from attnscore.practice.generators import fixed_problem, generate_variant
from attnscore.practice.kinds import KINDS
from attnscore.practice.kinds.base import Kind
from attnscore.practice.solutions import build_problem
from attnscore.practice.vendor import vendor_package

PRACTICE = Path(kinds.__file__).resolve().parent.parent
KINDS_DIR = PRACTICE / "kinds"


def _outside_kinds() -> list[Path]:
    return sorted(p for p in PRACTICE.rglob("*.py") if KINDS_DIR not in p.parents)


def _is_kind(node: ast.AST) -> bool:
    """``kind``, ``x.kind`` (a name or attribute called kind)."""
    return (isinstance(node, ast.Name) and node.id == "kind") or (
        isinstance(node, ast.Attribute) and node.attr == "kind"
    )


def _is_text_literal(node: ast.AST) -> bool:
    """A string literal, or a tuple/list/set of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_text_literal(e) for e in node.elts)
    return False


def _kind_comparisons(source: str) -> list[int]:
    """Lines where a ``kind`` is compared with a string literal (``==``, ``!=``, ``in``, ``match``)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_is_kind(o) for o in operands) and any(_is_text_literal(o) for o in operands):
                lines.append(node.lineno)
        elif isinstance(node, ast.Match) and _is_kind(node.subject):
            lines.append(node.lineno)
    return lines


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _kind_names_spelled(source: str) -> list[tuple[int, str]]:
    """String literals (docstrings aside) that are exactly a kind's name."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in KINDS and id(node) not in docs
    ]


def test_the_checks_find_what_they_look_for():
    """The walkers are real: an if-chain on kind, a tuple membership and a dict keyed by kind names are found."""
    source = (
        "def f(fam, kind):\n"
        "    if fam.kind == 'softmax':\n"
        "        return 1\n"
        "    if kind in ('one_score', 'score_vector'):\n"
        "        return 2\n"
        "    return {'scaled_score': 3}.get(kind)\n"
    )
    assert _kind_comparisons(source) == [2, 4]
    assert [name for _, name in _kind_names_spelled(source)] == sorted(
        ["softmax", "one_score", "score_vector", "scaled_score"], key=source.index
    )
    assert _kind_comparisons("def f(p, wanted):\n    return p.kind == wanted\n") == []
    assert _kind_names_spelled('def f():\n    """one_score"""\n') == []


@pytest.mark.parametrize("path", _outside_kinds(), ids=lambda p: p.relative_to(PRACTICE).as_posix())
def test_no_module_outside_kinds_branches_on_a_kind(path):
    """Outside practice/kinds/ no module compares a kind with a string literal or spells a kind's name."""
    source = path.read_text(encoding="utf-8")
    assert _kind_comparisons(source) == [], f"{path.name}: compares a kind with a literal; ask the registry"
    assert _kind_names_spelled(source) == [], f"{path.name}: spells a kind's name; it belongs in practice/kinds/"


def test_the_registry_is_family_kinds():
    """The registry holds exactly family.KINDS, in that order, each under its own name."""
    assert tuple(kinds.REGISTRY) == KINDS == kinds.KINDS
    assert KINDS == ("one_score", "score_vector", "score_matrix", "scaled_score", "softmax", "multiple_choice")
    for name, kind in kinds.REGISTRY.items():
        assert isinstance(kind, Kind) and kind.name == name and kinds.get(name) is kind
        module = Path(inspect.getfile(type(kind)))
        assert module.parent == KINDS_DIR and module.stem == name, "one module per kind, named after it"


_OPERATIONS = [
    name
    for name, member in inspect.getmembers(Kind)
    if inspect.isfunction(member) and not name.startswith("_") and name != "has_required"
]
_ATTRIBUTES = {
    "name": str,
    "pl_elements": tuple,
    "zone_title": str,
    "d_k_widths": tuple,
    "d_k_why": str,
    "modes": tuple,
    "featured_fields": tuple,
    "ignored_givens": tuple,
}


@pytest.mark.parametrize("name", KINDS)
def test_every_kind_provides_every_operation(name):
    """Each kind implements every abstract operation and has every declared attribute, with its type."""
    kind = kinds.get(name)
    assert not getattr(type(kind), "__abstractmethods__", None)
    assert set(_OPERATIONS) >= {
        "setup",
        "draw",
        "capacity",
        "build",
        "independent",
        "option_features",
        "featured_givens",
        "featured_required",
        "missing_field",
        "check_featured",
        "pair_givens",
    }
    for op in _OPERATIONS:
        assert callable(getattr(kind, op)), op
    for attr, typ in _ATTRIBUTES.items():
        assert isinstance(getattr(kind, attr), typ), attr
    assert kind.pl_elements and set(kind.pl_elements) <= {"pl-number-input", "pl-multiple-choice"}
    assert kind.pair_keys is None or kind.pair_keys >= 0
    assert kind.d_k_default is None or set(kind.d_k_default) <= set(kind.d_k_widths)


@pytest.mark.parametrize("name", KINDS)
def test_each_kind_round_trips_through_its_operations(families, name):
    """A family of each kind: draw, build, re-solve; the float64 answers agree with the exact keys."""
    fam = next(f for f in families.values() if f.kind == name)
    kind = kinds.get(name)
    p = generate_variant(fam, 3, None, 0)
    assert p.kind == name and kind.capacity(fam) > 1000
    numbers, choices = kind.independent(p, FLOAT64)
    for q in p.questions:
        for a in q.numeric:
            assert numbers[a.name] == pytest.approx(float(a.exact), rel=1e-9, abs=1e-9)
        if q.choice is not None:
            assert choices[q.choice.name] == {q.choice.correct}
    again = kind.build(fam, p.givens)
    assert again["questions"] == p.questions and again["solution"] == p.solution


def test_kinds_are_frozen():
    """A kind cannot be changed at run time (every module shares it)."""
    with pytest.raises(AttributeError, match="kind 'softmax' is frozen: cannot set 'modes'"):
        kinds.get("softmax").modes = ()  # type: ignore[misc]


def test_an_unknown_kind_is_one_clear_error():
    """A Family built by hand with a kind no module provides fails naming the kind and the known ones."""
    with pytest.raises(kinds.UnknownKindError) as info:
        kinds.get("softmaxx")
    assert str(info.value) == (
        "unknown problem kind 'softmaxx'; expected one of one_score, score_vector, score_matrix, scaled_score, "
        "softmax, multiple_choice"
    )
    bad = Family(id="bad", version=1, kind="softmaxx", title="Bad", path="bad.yaml")
    with pytest.raises(kinds.UnknownKindError, match="'softmaxx'"):
        build_problem(bad, {})
    with pytest.raises(kinds.UnknownKindError, match="'softmaxx'"):
        generate_variant(bad, 0, None, 0)


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        pytest.param(1, "one_score", id="one key: one_score (before scaled_score in the registry)"),
        pytest.param(2, "score_vector", id="two keys: the kind that takes any number"),
        pytest.param(7, "score_vector", id="seven keys"),
    ],
)
def test_the_default_kind_for_q_and_k(count, expected):
    """``--q/--k`` without a family picks the kind by the number of keys."""
    assert kinds.for_key_count(count).name == expected


def test_pair_problems_follow_each_kinds_pair_keys(families):
    """A kind with no --q/--k names the kinds that take one; a one-key kind refuses two keys."""
    with pytest.raises(ValueError) as info:
        fixed_problem(families["softmax-exact"], (1, 0), [(1, 0)])
    assert str(info.value) == (
        "family softmax-exact has kind softmax; --q/--k work with one_score, score_vector and scaled_score families"
    )
    with pytest.raises(ValueError, match=r"family scaled-score \(scaled_score\) takes exactly one --k, found 2"):
        fixed_problem(families["scaled-score"], (1, 1, 1, 1), [(1, 1, 1, 1), (1, 0, 0, 0)])


def test_draws_come_only_from_the_streams_given(families):
    """A kind's setup and draw read only the generators they are handed: the same seeds give the same givens."""
    fam = families["multiple-choice"]
    kind = kinds.get(fam.kind)
    outs = []
    for _ in range(2):
        rng, crng = random.Random(5), random.Random(6)
        setup = kind.setup(fam, rng)
        for _attempt in range(500):
            try:
                outs.append(kind.draw(fam, setup, rng, crng))
                break
            except ValueError:
                continue
    assert len(outs) == 2 and outs[0] == outs[1]


def test_the_kinds_vendor_as_a_subpackage(tmp_path):
    """vendor copies kinds/ as a folder with imports relative to the vendored root; it runs without attnscore."""
    files = vendor_package(["kinds"], "9.9")
    package = next(iter(files)).split("/")[0]
    texts = {name.split("/", 1)[1]: data.decode() for name, data in files.items()}
    assert "from ..worked import" in texts["kinds/one_score.py"]
    assert "from ..kinds import scaled_value" in texts["kinds/multiple_choice.py"]
    assert "from ..kinds.base import Kind" in texts["kinds/__init__.py"]
    assert "from ..family import MC_TEMPLATES" in texts["kinds/multiple_choice.py"]
    assert "kinds" not in texts["family.py"].split('"""')[2]  # the record imports no kind: no circle
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        f"from {package} import kinds\n"
        "try:\n    import attnscore\nexcept ImportError:\n    pass\n"
        "else:\n    raise SystemExit('attnscore importable')\n"
        "print(','.join(kinds.KINDS))\n"
    )
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ",".join(KINDS)


_HEAD = "id: demo\nversion: 1\ntitle: Demo\n"


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        pytest.param(
            "kind: softmax\nfeatured:\n  - {scores: [1, 2]}\n",
            [
                "demo.yaml:6:5: featured[0].base: expected a value for 'base' (softmax, mode exact), found nothing",
                "demo.yaml:6:5: featured[0].multipliers: expected a value for 'multipliers' (softmax, mode exact), "
                "found nothing",
                "demo.yaml:6:14: featured[0].scores: expected base and multipliers in mode exact, found scores",
            ],
            id="softmax: the mode decides the fields",
        ),
        pytest.param(
            "kind: softmax\nmode: ranking\nfeatured:\n  - {base: 1, scores: [1, 2]}\n",
            ["demo.yaml:7:12: featured[0].base: expected scores in mode ranking, found base/multipliers"],
            id="softmax ranking refuses base",
        ),
        pytest.param(
            "kind: softmax\nmode: other\n",
            ["demo.yaml:5:7: mode: expected exact or ranking, found 'other'"],
            id="softmax: its modes",
        ),
        pytest.param(
            "kind: one_score\nmode: exact\n",
            ["demo.yaml:5:7: mode: expected no mode (only kind softmax has one), found 'exact'"],
            id="a kind without modes",
        ),
        pytest.param(
            "kind: scaled_score\nfeatured:\n  - {q: [1, 2], k: [1, 2]}\n",
            [
                "demo.yaml:6:9: featured[0].q: expected d_k in [1, 4, 16, 64] (so that sqrt(d_k) is an integer), "
                "found d_k=2"
            ],
            id="scaled_score: perfect-square widths",
        ),
        pytest.param(
            "kind: scaled_score\nd_k: [2]\n",
            [
                "demo.yaml:5:7: d_k[0]: expected one of [1, 4, 16, 64] (perfect squares, so that sqrt(d_k) is an "
                "integer), found 2"
            ],
            id="scaled_score: d_k list",
        ),
        pytest.param(
            "kind: one_score\nfeatured:\n  - {q: [1, 2], k: [1]}\n",
            ["demo.yaml:6:20: featured[0].k: expected 2 entries (the width of q), found 1"],
            id="one_score: q and k of one width",
        ),
        pytest.param(
            "kind: score_vector\nfeatured:\n  - {q: [1, 2], keys: [[1, 2, 3], [3, 4, 5]]}\n",
            ["demo.yaml:6:23: featured[0].keys: expected keys of width 2 (the width of q), found width 3"],
            id="score_vector: key width",
        ),
        pytest.param(
            "kind: score_matrix\nfeatured:\n  - {Q: [[1, 2]], K: [[1, 2, 3]]}\n",
            ["demo.yaml:6:22: featured[0].K: expected rows of width d_k=2 (the width of Q), found width 3"],
            id="score_matrix: row width",
        ),
        pytest.param(
            "kind: multiple_choice\nfeatured:\n  - {q: [1, 2], k: [1, 2]}\n",
            ["demo.yaml:6:3: featured: expected no featured examples for kind multiple_choice, found 1 item(s)"],
            id="multiple_choice: no featured examples",
        ),
        pytest.param(
            "kind: score_matrix\nfeatured:\n  - {q: [1, 2]}\n",
            [
                "demo.yaml:6:5: featured[0].Q: expected a value for 'Q', found nothing",
                "demo.yaml:6:5: featured[0].K: expected a value for 'K', found nothing",
                "demo.yaml:6:6: featured[0].q: expected one of the fields Q, K, found unknown field 'q'",
            ],
            id="score_matrix: its featured fields",
        ),
    ],
)
def test_kind_owned_family_checks(text, problems):
    """The family-file checks each kind owns report where, what was expected and what was found."""
    with pytest.raises(FamilyFileError) as info:
        parse_family_text(_HEAD + text, "demo.yaml")
    assert info.value.problems == problems


@pytest.mark.parametrize(
    ("text", "d_k"),
    [
        pytest.param("kind: scaled_score\n", (1, 4, 16, 64), id="scaled_score default widths"),
        pytest.param("kind: one_score\n", (2,), id="the Family default"),
        pytest.param("kind: multiple_choice\nd_k: [2, 16]\n", (2, 16), id="multiple_choice takes 16"),
    ],
)
def test_kind_owned_family_defaults(text, d_k):
    """A kind's default and allowed widths reach the Family record."""
    assert parse_family_text(_HEAD + text, "demo.yaml")[0].d_k == d_k
