"""Conventions (keywords a spec fixes that only the reference follows) and choice keywords."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from attnscore.maths.options import Options, convention, keyword


@dataclass(frozen=True)
class _Opts(Options):
    pairing: str = convention("interleaved", "how coordinates pair", ("interleaved", "rotate_half"))
    causal: bool = keyword("bool", False, "a flag passed by name")


def test_a_convention_is_stated_but_never_passed() -> None:
    options = _Opts.of({"pairing": "rotate_half", "causal": True})
    assert options.pairing == "rotate_half"
    assert dict(options) == {"causal": True}
    assert options.stated() == {"causal": True, "pairing": "rotate_half"}
    only = _Opts.of({"pairing": "rotate_half"})
    assert dict(only) == {} and only.stated() == {"pairing": "rotate_half"}


def test_a_choice_accepts_only_its_choices() -> None:
    pairing, causal = _Opts.keywords()
    assert (pairing.passed, causal.passed) == (False, True)
    assert pairing.accepts("rotate_half") and not pairing.accepts("half") and not pairing.accepts(1)
    assert pairing.expected() == "one of 'interleaved', 'rotate_half'"


def test_a_choice_convention_needs_its_default_among_its_choices() -> None:
    with pytest.raises(ValueError, match="expected a default among"):
        convention("diagonal", "x", ("interleaved", "rotate_half"))
