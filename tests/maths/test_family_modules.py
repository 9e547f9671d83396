"""One module per contract family: every :class:`ContractFamily` member has its module in
``attnscore/maths/families/`` (named after the member), the module satisfies the ``Family`` protocol,
and no code outside it names or compares a family's member, as ``tests/practice/test_kinds.py`` does
for the practice problem kinds."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from attnscore.maths.contracts import CONTRACTS, get_contract
from attnscore.maths.families import base
from attnscore.maths.families.base import options_of
from attnscore.maths.families.registry import FAMILIES, family_of
from attnscore.maths.families.sdpa import SDPAOptions
from attnscore.maths.family import ContractFamily
from attnscore.maths.options import Options

PACKAGE = Path(__file__).resolve().parents[2] / "attnscore"
FAMILIES_DIR = PACKAGE / "maths" / "families"

EXCEPTIONS = {
    "maths/family.py": "the enum itself, and KEYWORD_FAMILIES, the members that are general attention's variants",
    "catalogue/families.py": "the catalogue's selectors (sdpa(c), masked(c), ...): what every property, mistake, "
    "spec rule and check asks instead of a member",
}
"""Where a member may be named outside its own module, and why (the registry needs none: each module
says its own ``MEMBER``)."""


def members_named(source: str) -> list[tuple[int, str]]:
    """``(line, member)`` for each ``ContractFamily.X`` in ``source``, and each comparison of a
    ``.family`` attribute (``c.family is ...``, ``c.family in ...``) as ``(line, "compared")``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ContractFamily":
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Attribute) and o.attr == "family" for o in operands):
                found.append((node.lineno, "compared"))
    return sorted(found)


def _module_paths() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "practice" not in p.relative_to(PACKAGE).parts)


@pytest.mark.parametrize("path", _module_paths(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_family_is_named_only_in_its_module(path: Path) -> None:
    """A family module names only its own member (its ``MEMBER``) and compares no family; any other
    module names or compares none, except the listed :data:`EXCEPTIONS`."""
    relative = str(path.relative_to(PACKAGE))
    named = members_named(path.read_text(encoding="utf-8"))
    if relative in EXCEPTIONS:
        return
    if path.parent == FAMILIES_DIR and path.stem not in ("base", "registry", "__init__"):
        own = ContractFamily(path.stem).name
        assert [m for _, m in named if m != own] == [], f"{relative} names another family"
        return
    assert named == []


def test_the_exceptions_still_need_their_exception() -> None:
    """Each listed exception does name a member (else it is no longer needed and leaves the list)."""
    for relative in EXCEPTIONS:
        assert members_named((PACKAGE / relative).read_text(encoding="utf-8")), relative


def test_the_check_sees_a_member_and_a_comparison() -> None:
    """The checker itself: a member anywhere, and a ``.family`` compared with anything, are found;
    reading ``contract.family`` to look a module up is not."""
    source = (
        "a = c.family is ContractFamily.SDPA\n"
        "b = (ContractFamily.MASK,)\n"
        "c = contract.family in KEYWORD_FAMILIES\n"
        "d = FAMILIES[contract.family]\n"
        "e = ContractFamily\n"
    )
    assert members_named(source) == [(1, "SDPA"), (1, "compared"), (2, "MASK"), (3, "compared")]


def test_every_member_has_its_module() -> None:
    """The registry holds one module per member, in the enum's order, each in
    ``maths/families/<member>.py`` and saying it is that member's."""
    assert list(FAMILIES) == list(ContractFamily)
    for member, module in FAMILIES.items():
        assert module.MEMBER is member
        assert Path(getattr(module, "__file__", "")) == FAMILIES_DIR / f"{member.value}.py"


@pytest.mark.parametrize("member", list(ContractFamily), ids=str)
def test_each_module_is_a_family(member: ContractFamily) -> None:
    """Each module has what the ``Family`` protocol asks (every protocol member), its contracts are
    its own family's, and their options are a frozen :class:`Options` value."""
    module = FAMILIES[member]
    wanted = [n for n in dir(base.Family) if not n.startswith("_")]
    assert wanted and [n for n in wanted if not hasattr(module, n)] == []
    assert isinstance(module.SHARED_MASKS, bool)
    built_per_spec = member is ContractFamily.INSTRUCTOR  # an instructor's contract comes from the spec
    assert (module.CONTRACTS or built_per_spec) and {c.family for c in module.CONTRACTS} <= {member}
    for contract in module.CONTRACTS:
        assert CONTRACTS[contract.name] is contract
        assert isinstance(contract.options, Options) and not contract.options
        assert dataclasses.is_dataclass(contract.options)
        with pytest.raises(dataclasses.FrozenInstanceError):
            contract.options.given = ("x",)  # type: ignore[misc]


def test_every_contract_is_gathered_from_the_families() -> None:
    """``CONTRACTS`` is exactly the families' contracts, in the registry's order."""
    gathered = [c.name for module in FAMILIES.values() for c in module.CONTRACTS]
    assert list(CONTRACTS) == gathered
    assert family_of(get_contract("key_padding_attention")) is FAMILIES[ContractFamily.KEY_PADDING]


def test_options_are_one_frozen_value_per_family() -> None:
    """A spec's keywords become the family's options, whole: typed fields, defaults for the rest,
    the fixed ones remembered (and only those passed by name)."""
    c = get_contract("sdpa").configured({"scale": 0.5, "enable_gqa": True})
    options = options_of(c, SDPAOptions)
    assert (options.scale, options.enable_gqa, options.is_causal, options.dropout_p) == (0.5, True, False, 0.0)
    assert dict(options) == {"enable_gqa": True, "scale": 0.5}
    assert [k.name for k in c.keywords] == ["dropout_p", "is_causal", "scale", "enable_gqa"]
    window = get_contract("flash_attn").configured({"window_size": [2, 1]}).options
    assert dict(window) == {"window_size": (2, 1)}


def test_options_of_another_family_are_refused() -> None:
    """A contract whose options are another family's gets one clear error."""
    c = get_contract("kernel_attention")
    with pytest.raises(TypeError, match="contract 'kernel_attention': expected SDPAOptions, found KernelOptions"):
        options_of(c, SDPAOptions)
    with pytest.raises(ValueError, match="expected one of the keywords dropout_p, is_causal, scale, enable_gqa"):
        SDPAOptions.of({"softcap": 2.0})


def test_a_contract_of_no_family_is_refused() -> None:
    """family_of names the contract and the known families when a contract's family has no module."""
    odd = dataclasses.replace(get_contract("attention"), name="odd", family="other")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="contract 'odd': expected a family of scores, mask, .*found 'other'"):
        family_of(odd)


def test_only_attention_draws_shared_masks() -> None:
    """Only attention with a mask argument takes a mask shared by the batch or broadcast."""
    assert [m for m, module in FAMILIES.items() if module.SHARED_MASKS] == [ContractFamily.ATTENTION]


def test_general_attention_options_come_from_the_family() -> None:
    """A variant of general attention answers its options for a call; the others answer None."""
    args = {"key_lengths": np.array([2], dtype=np.int32)}
    padding = get_contract("key_padding_attention").configured({"scale": 0.25})
    got = family_of(padding).attention_options(padding, args)
    assert got is not None and got.scale == 0.25 and got.key_lengths.dtype == np.int64
    assert family_of(get_contract("attention")).attention_options(get_contract("attention"), {}) is None
