"""Loader rules added for the new contracts: bool masks, mistakes lists, nonfinite policy."""

from __future__ import annotations

import pytest

from attnscore.check.verify import bundled_spec_paths
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

MASKED = open("specs/masked_scores.yaml", encoding="utf-8").read()


def problems(tmp_path, text: str) -> list[str]:
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return [str(p) for p in info.value.problems]


@pytest.mark.parametrize(
    "old, new, expected",
    [
        pytest.param(
            "mask: [[true, false], [true, true]]",
            "mask: [[1, 0], [1, 1]]",
            "worked_examples[0].inputs.mask: expected a bool mask of true/false (true = keep), found number 1",
            id="numbers in a mask",
        ),
        pytest.param(
            "S: [[1, 2], [3, 4]]",
            "S: [[true, 2], [3, 4]]",
            "worked_examples[0].inputs.S: expected numbers, found true/false",
            id="boolean in scores",
        ),
        pytest.param(
            "expected: [[1, -.inf], [3, 4]]",
            "expected: [[1, 2], [3, 4]]",
            "worked_examples[0].expected: expected the value the inputs give, [[1.0, -inf], [3.0, 4.0]]",
            id="masked entry must be -inf",
        ),
        pytest.param(
            "nonfinite: match",
            "nonfinite: ignore",
            "nonfinite: expected one of match, found string 'ignore'",
            id="unknown nonfinite policy",
        ),
        pytest.param(
            "nonfinite: match\n",
            "nonfinite: match\nmistakes: [softmax_applied]\n",
            "mistakes[0]: expected a mistake that applies to contract masked_scores, found 'softmax_applied'",
            id="mistake for another contract",
        ),
        pytest.param(
            "nonfinite: match\n",
            "nonfinite: match\nmistakes: [typo]\n",
            "mistakes[0]: expected a catalogue mistake, found 'typo'",
            id="unknown mistake",
        ),
    ],
)
def test_located_problems(tmp_path, old, new, expected):
    """Each problem is reported with file:line:col and field path."""
    assert old in MASKED
    found = problems(tmp_path, MASKED.replace(old, new, 1))
    assert any(expected in p for p in found), found
    assert all(p.startswith(str(tmp_path / "spec.yaml") + ":") for p in found)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in bundled_spec_paths()])
def test_bundled_specs_load_with_explicit_nonfinite_policy(path):
    """Every bundled spec loads and states its NaN/inf policy."""
    assert "nonfinite: match" in path.read_text(encoding="utf-8")
    spec = load_spec(path)
    assert spec.nonfinite == "match" and spec.worked_examples


def test_bool_mask_is_loaded_as_bool():
    """A mask written as true/false becomes a bool array."""
    spec = load_spec("specs/masked_scores.yaml")
    mask = spec.worked_examples[0].inputs["mask"]
    assert mask.dtype == bool and mask.tolist() == [[True, False], [True, True]]
