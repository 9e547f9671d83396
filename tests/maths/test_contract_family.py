"""Contract families: every contract has a :class:`ContractFamily`, and no code compares a contract's
family (or a ``kind``) with a family's name written as a string: a typo would be a silent ``False``,
a member is checked (``ContractFamily.SPDA`` fails at once)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from attnscore.maths.contracts import CONTRACTS
from attnscore.maths.family import KEYWORD_FAMILIES, ContractFamily

PACKAGE = Path(__file__).resolve().parents[2] / "attnscore"
NAMES = frozenset(f.value for f in ContractFamily)


def _is_family(node: ast.AST) -> bool:
    """``x.family`` or ``x.kind`` (a contract's family under either name)."""
    return isinstance(node, ast.Attribute) and node.attr in ("family", "kind")


def _family_names(node: ast.AST) -> bool:
    """A string literal that is a family's name, or a tuple/list/set holding one."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value in NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_family_names(e) for e in node.elts)
    return False


def family_name_comparisons(source: str) -> list[int]:
    """Lines where a ``.family`` or ``.kind`` is compared with a family's name as a string."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_is_family(o) for o in operands) and any(_family_names(o) for o in operands):
                lines.append(node.lineno)
    return lines


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "practice" not in p.relative_to(PACKAGE).parts)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_family_is_named_by_a_string(path: Path) -> None:
    """Code asks ``contract.family is ContractFamily.SDPA``, never ``contract.kind == "sdpa"``."""
    assert family_name_comparisons(path.read_text(encoding="utf-8")) == []


def test_the_check_sees_a_family_named_by_a_string() -> None:
    """The checker itself: ``==``, ``in`` a tuple and ``!=`` against a family's name are found; a
    member, or a string that names no family (a case's kind), is not."""
    source = (
        'if contract.kind == "sdpa":\n    pass\n'
        'ok = c.family in ("mask", "weights")\n'
        'bad = ctx.contract.family != "flash"\n'
        "fine = contract.family is ContractFamily.SDPA\n"
        'case = c.kind == "rule"\n'
    )
    assert family_name_comparisons(source) == [1, 3, 4]


def test_every_contract_has_a_family() -> None:
    """Each bundled contract's family is a member, every member is some contract's family, and a
    member reads as its name (what the catalogue tables print)."""
    families = {c.family for c in CONTRACTS.values()}
    assert all(isinstance(f, ContractFamily) for f in families)
    assert families == set(ContractFamily) - {ContractFamily.INSTRUCTOR}  # built per spec, never bundled
    assert set(KEYWORD_FAMILIES) <= families
    assert str(ContractFamily.SDPA) == f"{ContractFamily.SDPA}" == "sdpa" == ContractFamily.SDPA


def test_only_the_score_views_carry_the_qk_geometry() -> None:
    """The views of Q Kᵀ keep their geometry in one QKView (no other contract has those fields);
    only scaled_score_matrix is scaled."""
    views = {name: c for name, c in CONTRACTS.items() if c.qk is not None}
    assert set(views) == {"score", "scores", "score_matrix", "scaled_score_matrix"}
    assert {c.family for c in views.values()} == {ContractFamily.SCORES}
    assert [name for name, c in views.items() if c.qk is not None and c.qk.scaled] == ["scaled_score_matrix"]
    q, keys = np.array([1.0, 0.0]), np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])
    scores = views["scores"]
    assert scores.qk is not None
    Q, K = scores.qk.to_qk({"q": q, "keys": keys})
    assert Q.shape == (1, 2) and K.shape == (3, 2)
    assert scores.qk.from_scores(Q @ K.T).tolist() == [1.0, 0.0, 0.7]


def family_members_named(source: str) -> list[int]:
    """Lines that name a family member (``ContractFamily.SDPA``)."""
    return sorted(
        {
            node.lineno
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "ContractFamily"
        }
    )


FAMILY_HOMES = ("maths", "catalogue/families.py")
"""Where a family may be named: the contracts and their maths (``maths/``), and the catalogue's
selectors (``catalogue/families.py``), which every property, mistake, spec rule and check asks."""


@pytest.mark.parametrize(
    "path",
    [p for p in MODULES if not str(p.relative_to(PACKAGE)).startswith(FAMILY_HOMES)],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_families_are_branched_on_only_at_home(path: Path) -> None:
    """Outside maths/ and catalogue/families.py, code asks a selector (``sdpa(c)``,
    ``flash_attention_2(contract)``), never ``contract.family is ContractFamily.X``."""
    assert family_members_named(path.read_text(encoding="utf-8")) == []


def test_the_check_sees_a_family_member() -> None:
    """The checker itself: a member in a comparison or a tuple is found; the class alone is not."""
    source = "a = c.family is ContractFamily.SDPA\nb = (ContractFamily.MASK,)\nc = ContractFamily\n"
    assert family_members_named(source) == [1, 2]
