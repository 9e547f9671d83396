"""specs/rope.yaml: it loads with its pairing stated, and a bad pairing or a bad worked example is a
located problem (file:line:col: field: expected, found)."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

SPEC = Path("specs/rope.yaml")
ADJACENT = (
    "      x: [[1, 0, 0, 0]]\n      token_positions: [1]\n      theta: 100\n"
    "    expected: [[0.5403023058681398, 0.8414709848078965, 0, 0]]"
)


def test_the_bundled_spec_states_interleaved_pairs() -> None:
    """The spec's contract follows the pairing it states; pairing is never passed to the function."""
    spec = load_spec(SPEC)
    assert spec.contract.option("pairing") == "interleaved"
    assert spec.contract.options.stated() == {"pairing": "interleaved"} and dict(spec.contract.options) == {}
    assert [ex.id for ex in spec.worked_examples][:2] == ["position_zero_is_identity", "quarter_turn"]


def _problems(tmp_path: Path, old: str, new: str) -> list[str]:
    text = SPEC.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "rope.yaml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    lines = [str(p) for p in info.value.problems]
    assert all(line.startswith(f"{path}:") for line in lines)  # located: file:line:col first
    return [line.split(": ", 1)[1] for line in lines]


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        pytest.param(
            "{pairing: interleaved}",
            "{pairing: neox}",
            "function.keywords.pairing: keyword pairing: expected one of 'interleaved', 'rotate_half', "
            "found string 'neox'",
            id="unknown pairing",
        ),
        pytest.param(
            ADJACENT,
            ADJACENT.replace("[[1, 0, 0, 0]]", "[[1, 0, 0]]").replace(
                "0.8414709848078965, 0, 0]]", "0.8414709848078965, 0]]"
            ),
            "worked_examples[2].inputs.x: expected x of shape (..., seq, d_k) with d_k even, found shape (1, 3)",
            id="odd d_k",
        ),
        pytest.param(
            ADJACENT,
            ADJACENT.replace("theta: 100", "theta: 0"),
            "worked_examples[2].inputs.theta: expected one frequency base > 0 (shape ()), found 0",
            id="theta 0",
        ),
        pytest.param(
            ADJACENT,
            ADJACENT.replace("theta: 100", "theta: 1.5"),
            "worked_examples[2].inputs.theta: expected integers (an int32 parameter, e.g. [0, 2, 5]), found number 1.5",
            id="theta not whole",
        ),
        pytest.param(
            ADJACENT,
            ADJACENT.replace("0.8414709848078965, 0, 0]]", "0, 0.8414709848078965, 0]]"),
            "worked_examples[2].expected: expected the value the inputs give, [[0.540302306, 0.841470985, 0.0, 0.0]], "
            "found [[0.5403023058681398, 0.0, 0.8414709848078965, 0.0]]",
            id="rotate-half answer for interleaved pairs",
        ),
    ],
)
def test_bad_spec_is_one_located_problem(tmp_path: Path, old: str, new: str, problem: str) -> None:
    """Each mistake in the spec file is one problem, located at its line and column."""
    found = _problems(tmp_path, old, new)
    assert len(found) == 1
    assert found[0] == problem
