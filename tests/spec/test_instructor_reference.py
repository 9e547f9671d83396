"""A spec's own reference function (``function.reference``): loading it, grading against it (full
marks for a correct softmax, lost points and a named instructor mistake for wrong ones), and every
way a spec or its reference file can be wrong, each a located problem."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from attnscore.check.implementation import run_impl
from attnscore.check.verify import cross_check, mutation_test, verify_spec
from attnscore.maths.family import ContractFamily
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

REFERENCE = """
import torch
from attnscore import instructor


def softmax(x, dim):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


@instructor.mistake("no_max_subtraction", feedback="subtract the max over dim before exp")
def softmax_without_max(x, dim):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


@instructor.mistake("softmax_over_first_dim", feedback="normalise over dim, not over the first dim")
def softmax_first_dim(x, dim):
    e = torch.exp(x - x.amax(dim=0, keepdim=True))
    return e / e.sum(dim=0, keepdim=True)


@instructor.property("shift_invariant", statement="Adding 3 changes nothing.")
def shift_invariant(inputs, call):
    x = inputs["x"]
    if not torch.allclose(call(x), call(x + 3.0), rtol=2e-2, atol=1e-2):
        return "softmax(x + 3) differs from softmax(x)"
    return None
"""

SPEC = """
format: attnscore-spec/1
id: own_softmax
version: 1
title: softmax against the instructor's own reference
function:
  name: softmax
  REFERENCE_LINE
  keywords: {dim: -1}
  parameters:
    - {name: x, shape: ["...", n]}
  returns: {shape: ["...", n]}
dtypes: [float32]
seed: 7
TOLERANCE_LINE
worked_examples:
  - id: two_rows
    inputs: {x: [[1, 3], [0, 0]]}
    expected: [[0.11920292202211755, 0.8807970779778823], [0.5, 0.5]]
    explanation: softmax over each row
    points: 2
  - id: large_scores
    inputs: {x: [[1000, 1000, 999]]}
    expected: [[0.4223187982515182, 0.4223187982515182, 0.15536240349696362]]
    explanation: subtract the max first
    points: 2
  - id: backward
    inputs: {x: [[0, 0]]}
    upstream: [[1, 0]]
    expected: [[0.5, 0.5]]
    expected_gradients: {x: [[0.25, -0.25]]}
    explanation: p (dO - sum(dO p))
    points: 1
properties:
  - {name: matches_reference, points: 1, examples: 10, statement: "matches the reference"}
  - {name: leading_dims_independent, points: 1, examples: 5, statement: "items on their own"}
  - {name: shift_invariant, points: 1, examples: 5, statement: "adding 3 changes nothing"}
  - {name: inputs_not_mutated, points: 1, examples: 3, statement: "x unchanged"}
"""


def write(
    folder: Path,
    reference: str = REFERENCE,
    line: str = "reference: softmax_reference.py",
    tolerance: str = "tolerance: {mode: close}",
    spec_text: str = SPEC,
) -> Path:
    """The spec and its reference file in ``folder``; the spec's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "softmax_reference.py").write_text(textwrap.dedent(reference), encoding="utf-8")
    spec = folder / "own_softmax.yaml"
    spec.write_text(spec_text.replace("REFERENCE_LINE", line).replace("TOLERANCE_LINE", tolerance), encoding="utf-8")
    return spec


def problems_of(path: Path, **kwargs: bool) -> list[str]:
    """The located problems of loading ``path`` (one ``field: message`` line each)."""
    with pytest.raises(SpecError) as info:
        load_spec(path, **kwargs)
    return [f"{p.field}: {p.message}" for p in info.value.problems]


def good(x: torch.Tensor, dim: int) -> torch.Tensor:
    m = x.max(dim=dim, keepdim=True).values
    e = torch.exp(x - m)
    return e / e.sum(dim=dim, keepdim=True)


def no_max(x: torch.Tensor, dim: int) -> torch.Tensor:
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def first_dim(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.softmax(x, dim=0)


def test_the_spec_loads_with_its_own_contract(tmp_path: Path) -> None:
    """The contract is the instructor family's, with the spec's keywords and shapes, and the file's
    properties and mistakes are the spec's own."""
    spec = load_spec(write(tmp_path))
    assert spec.contract.family is ContractFamily.INSTRUCTOR
    assert dict(spec.contract.options) == {"dim": -1}
    assert spec.contract.parameters == (("x", ("...", "n")),)
    assert [p.name for p in spec.own_properties] == ["shift_invariant"]
    assert [m.id for m in spec.own_mistakes] == ["no_max_subtraction", "softmax_over_first_dim"]
    assert spec.reference_files == (str((tmp_path / "softmax_reference.py").resolve()),)
    assert spec.tolerance.mode == "close"
    golden = spec.contract.golden({"x": np.array([[0.0, np.log(3.0)]])})
    np.testing.assert_allclose(golden, [[0.25, 0.75]], rtol=1e-12)


def test_a_correct_submission_gets_full_marks(tmp_path: Path) -> None:
    """A stable softmax over dim earns every point; the reference passes its own spec too."""
    spec = load_spec(write(tmp_path))
    result = run_impl(spec, good, dtype="float32", shrink=False)
    assert [c.id for c in result.cases if not c.passed] == []
    assert result.score == result.max_score == 9
    assert all(r.all_passed for r in verify_spec(spec, ("float32", "float64")))


def test_no_max_subtraction_loses_points_and_is_named(tmp_path: Path) -> None:
    """exp without the max overflows on scores around 1000: the worked example fails, and the
    diagnosis names the instructor's mistake with the instructor's feedback."""
    spec = load_spec(write(tmp_path))
    result = run_impl(spec, no_max, dtype="float32", shrink=False)
    failed = {c.id: c for c in result.cases if not c.passed}
    assert list(failed) == ["example:large_scores"]
    assert result.score == 7
    diagnosis = failed["example:large_scores"].failure.diagnosis
    assert diagnosis == {"id": "no_max_subtraction", "message": "subtract the max over dim before exp"}


def test_the_wrong_dim_loses_points_and_is_named(tmp_path: Path) -> None:
    """Softmax over the first dim fails the values and is named softmax_over_first_dim."""
    spec = load_spec(write(tmp_path))
    result = run_impl(spec, first_dim, dtype="float32", shrink=False)
    first = next(c for c in result.cases if not c.passed)
    assert first.id == "example:two_rows"
    assert first.failure.diagnosis["id"] == "softmax_over_first_dim"
    assert result.score < result.max_score


def test_an_own_property_judges_the_graded_function(tmp_path: Path) -> None:
    """The instructor's property calls the graded function: one that is not shift invariant fails it
    with the check's own message."""

    def shifted(x: torch.Tensor, dim: int) -> torch.Tensor:
        return torch.softmax(x * (1 + 0.1 * x.mean()), dim=dim)  # a scale that moves with a shift

    spec = load_spec(write(tmp_path))
    result = run_impl(spec, shifted, dtype="float32", shrink=False)
    case = next(c for c in result.cases if c.id == "property:shift_invariant")
    assert not case.passed
    assert "softmax(x + 3) differs from softmax(x)" in case.message


def test_items_of_a_batch_must_not_mix(tmp_path: Path) -> None:
    """leading_dims_independent fails a softmax normalised over the whole tensor's max (items mix)."""

    def global_max(x: torch.Tensor, dim: int) -> torch.Tensor:
        e = torch.exp(x - x.max())
        return e / (e.sum(dim=dim, keepdim=True) + 1e-3 * e.sum())

    spec = load_spec(write(tmp_path))
    result = run_impl(spec, global_max, dtype="float32", shrink=False)
    case = next(c for c in result.cases if c.id == "property:leading_dims_independent")
    assert not case.passed


def test_verify_proves_the_mistakes_caught_and_named(tmp_path: Path) -> None:
    """Each registered mistake fails a case and is diagnosed as itself in the spec's dtype."""
    spec = load_spec(write(tmp_path))
    found = {m.mistake_id: m for m in mutation_test(spec)}
    assert set(found) == {"no_max_subtraction", "softmax_over_first_dim"}
    assert all(m.ok for m in found.values())


def test_a_mistake_never_caught_fails_verify(tmp_path: Path) -> None:
    """A registered mistake that no case tells apart from the reference is MISSED."""
    harmless = REFERENCE + textwrap.dedent(
        """
        @instructor.mistake("plus_nothing", feedback="adds zero")
        def plus_nothing(x, dim):
            return softmax(x, dim) + 0.0
        """
    )
    spec = load_spec(write(tmp_path, reference=harmless))
    found = {m.mistake_id: m for m in mutation_test(spec)}
    assert not found["plus_nothing"].caught and not found["plus_nothing"].ok
    assert found["no_max_subtraction"].ok


def test_a_second_implementation_is_compared(tmp_path: Path) -> None:
    """function.reference_check: an agreeing second implementation gives no line, a wrong one says
    where the two differ."""
    checks = textwrap.dedent(
        """
        import torch
        def agree(x, dim):
            return torch.softmax(x, dim=dim)
        def wrong(x, dim):
            return torch.softmax(2 * x, dim=dim)
        """
    )
    path = write(tmp_path, line="reference: softmax_reference.py\n  reference_check: checks.py:agree")
    (tmp_path / "checks.py").write_text(checks, encoding="utf-8")
    assert cross_check(load_spec(path)) == ()
    path.write_text(path.read_text(encoding="utf-8").replace("checks.py:agree", "checks.py:wrong"), encoding="utf-8")
    lines = cross_check(load_spec(path))
    assert lines and "own_softmax: on worked example two_rows" in lines[0]
    assert "one of the two is wrong" in lines[0]


# ---------------------------------------------------------------------------------------------
# unhappy paths: each a located problem


def test_a_reference_outside_the_folder_is_refused_unless_allowed(tmp_path: Path) -> None:
    """../elsewhere/ref.py is refused with the flag's name; allowed, it loads."""
    write(tmp_path / "elsewhere")
    spec = write(tmp_path / "course", line="reference: ../elsewhere/softmax_reference.py")
    [problem] = problems_of(spec)
    assert problem.startswith("function.reference: expected a reference file inside the spec's folder")
    assert "--allow-outside-reference" in problem
    assert load_spec(spec, allow_outside_reference=True).own_mistakes


def test_a_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    """A link inside the folder to a file outside it resolves outside: refused."""
    write(tmp_path / "elsewhere")
    spec = write(tmp_path / "course", line="reference: linked.py")
    os.symlink(tmp_path / "elsewhere" / "softmax_reference.py", tmp_path / "course" / "linked.py")
    [problem] = problems_of(spec)
    assert "resolving to" in problem and "elsewhere" in problem
    assert load_spec(spec, allow_outside_reference=True).contract.family is ContractFamily.INSTRUCTOR


@pytest.mark.parametrize(
    ("reference", "line", "want"),
    [
        pytest.param(
            "import torch\nx = 1 / 0\n",
            "reference: softmax_reference.py",
            "function.reference: expected a reference file that imports, found that it raised ZeroDivisionError: "
            "division by zero (softmax_reference.py line 2)",
            id="raises on import",
        ),
        pytest.param(
            "raise SystemExit(3)\n",
            "reference: softmax_reference.py",
            "function.reference: expected a reference file that imports, found that it raised SystemExit: 3 "
            "(softmax_reference.py line 1)",
            id="exits on import",
        ),
        pytest.param(
            REFERENCE,
            "reference: softmax_reference.py:soft_max",
            "function.reference: expected a function soft_max in softmax_reference.py, found none (it defines: "
            "shift_invariant, softmax, softmax_first_dim, softmax_without_max)",
            id="missing function",
        ),
        pytest.param(
            "softmax = 3\n",
            "reference: softmax_reference.py",
            "function.reference: expected softmax in softmax_reference.py to be a function, found int",
            id="not a function",
        ),
        pytest.param(
            REFERENCE,
            "reference: nowhere.py",
            "function.reference: expected a reference file, found no such file",
            id="no such file",
        ),
    ],
)
def test_a_reference_file_that_cannot_be_used(tmp_path: Path, reference: str, line: str, want: str) -> None:
    """Import errors, a missing or odd function and a missing file are one located line each."""
    problems = problems_of(write(tmp_path, reference=reference, line=line))
    assert len(problems) == 1 and problems[0].startswith(want), problems


def test_a_reference_that_raises_on_a_worked_example(tmp_path: Path) -> None:
    """The reference raising on an example's inputs is that example's located problem."""
    raising = "import torch\ndef softmax(x, dim):\n    if x.abs().max() > 100:\n        raise ValueError('too big')\n"
    raising += "    return torch.softmax(x, dim=dim)\n"
    problems = problems_of(write(tmp_path, reference=raising))
    assert problems[0] == (
        "worked_examples[1].inputs: expected inputs the contract can score, found: the reference softmax "
        "(softmax_reference.py) raised ValueError: too big (on inputs x (1, 3))"
    )
    assert problems[1].startswith("properties[2].name: expected a registered property")  # the file has none


def test_dot_bound_is_refused_with_the_modes_that_work(tmp_path: Path) -> None:
    """dot_bound needs a bundled contract's error bound: the message names close, ratio and exact."""
    problems = problems_of(write(tmp_path, tolerance="tolerance: {mode: dot_bound, factor: 4}"))
    assert problems == [
        "tolerance.mode: expected tolerance mode close, ratio or exact for a spec with function.reference "
        "(dot_bound needs a bundled contract's error bound), found dot_bound"
    ]


def test_ratio_works(tmp_path: Path) -> None:
    """The ratio mode: k times the reference's own error in the tested dtype; a correct softmax passes."""
    spec = load_spec(write(tmp_path, tolerance="tolerance: {mode: ratio, factor: 3}"))
    result = run_impl(spec, good, dtype="float16", shrink=False)
    assert [c.id for c in result.cases if not c.passed] == []


@pytest.mark.parametrize(
    ("line", "want"),
    [
        pytest.param(
            "contract: attention_weights\n  reference: softmax_reference.py",
            "function: expected exactly one of function.contract and function.reference, found both",
            id="both",
        ),
        pytest.param(
            "contract: nowhere\n  reference: softmax_reference.py",
            "function: expected exactly one of function.contract and function.reference, found both",
            id="both, the contract unknown",
        ),
    ],
)
def test_contract_and_reference_exactly_one(tmp_path: Path, line: str, want: str) -> None:
    """A spec gives exactly one of function.contract and function.reference."""
    problems = problems_of(write(tmp_path, line=line))
    assert problems[0].startswith(want), problems


def test_neither_contract_nor_reference(tmp_path: Path) -> None:
    """Without either the spec says which two fields it expects."""
    spec = write(tmp_path, line="")
    assert problems_of(spec) == [
        "function: expected exactly one of function.contract and function.reference, found neither"
    ]


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(
            'shape: ["...", n]}\n  returns',
            'shape: ["...", 4]}\n  returns',
            "function.parameters[0].shape[1]: expected '...' (first only) or a snake_case size symbol",
            id="a number in a shape",
        ),
        pytest.param(
            "keywords: {dim: -1}",
            "keywords: {dim: -1}\n  sizes: {d_model: 4}",
            "function.sizes.d_model: expected a size symbol of the parameters' shapes (n), found 'd_model'",
            id="a size of no symbol",
        ),
        pytest.param(
            "keywords: {dim: -1}",
            "keywords: {x: 1}",
            "function.keywords.x: expected a keyword that is not a parameter, found 'x' (a parameter)",
            id="a keyword named like a parameter",
        ),
        pytest.param(
            'returns: {shape: ["...", n]}',
            'returns: {shape: ["...", m]}',
            "function.returns.shape[1]: expected a symbol of the parameters' shapes (..., n), found 'm'",
            id="a result symbol of no parameter",
        ),
    ],
)
def test_shapes_sizes_and_keywords(tmp_path: Path, old: str, new: str, want: str) -> None:
    """Shapes in snake_case symbols, sizes of the shapes' symbols, keywords other than the parameters."""
    text = SPEC.replace(old, new)
    problems = problems_of(write(tmp_path, spec_text=text))
    assert any(p.startswith(want) for p in problems), problems


def test_a_fixed_size_holds_in_every_drawn_case(tmp_path: Path) -> None:
    """function.sizes fixes a symbol's size in every drawn input (d_model divisible by the heads)."""
    reference = textwrap.dedent(
        """
        import torch
        def split_heads(x, n_heads):
            *lead, d = x.shape
            return x.reshape(*lead, n_heads, d // n_heads).flip(-1).reshape(*lead, d)
        """
    )
    text = (
        SPEC.replace("name: softmax", "name: split_heads")
        .replace("keywords: {dim: -1}", "keywords: {n_heads: 2}\n  sizes: {d_model: 4}")
        .replace(
            'shape: ["...", n]}\n  returns: {shape: ["...", n]}',
            'shape: ["...", d_model]}\n  returns: {shape: ["...", h]}',
        )
    )
    text = text[: text.index("worked_examples:")] + (
        "worked_examples:\n  - id: one\n    inputs: {x: [[1, 2, 3, 4]]}\n    expected: [[2, 1, 4, 3]]\n"
        "    explanation: each head reversed\n    points: 1\n"
        "properties:\n  - {name: matches_reference, points: 1, examples: 10, statement: matches}\n"
    )
    problems = problems_of(write(tmp_path, reference=reference, spec_text=text))
    assert problems == [
        "function.returns.shape[1]: expected a symbol of the parameters' shapes (..., d_model), found 'h'"
    ]
    spec = load_spec(write(tmp_path, reference=reference, spec_text=text.replace('["...", h]', '["...", d_model]')))
    from attnscore.check.cases import build_cases

    [case] = [c for c in build_cases(spec, "float32") if c.kind == "property"]
    assert {call.args["x"].shape[-1] for call in case.calls} == {4}


def test_a_reference_without_a_backward(tmp_path: Path) -> None:
    """A worked example with upstream on a reference that is not differentiable is located there."""
    detached = "import torch\ndef softmax(x, dim):\n    return torch.softmax(x, dim=dim).detach()\n"
    problems = problems_of(write(tmp_path, reference=detached))
    assert problems[0] == (
        "worked_examples[2].upstream: expected inputs the contract can differentiate, found: the reference softmax "
        "(softmax_reference.py) returned no differentiable tensor for a backward call"
    )


def test_a_named_leading_dim_is_independent_too(tmp_path: Path) -> None:
    """With shapes [batch, n] (no "..."), leading_dims_independent slices batch: a softmax over the
    whole batch fails it, the reference passes."""
    text = SPEC.replace(
        'shape: ["...", n]}\n  returns: {shape: ["...", n]}', "shape: [batch, n]}\n  returns: {shape: [batch, n]}"
    )
    text = text.replace("  - id: backward\n", "  - id: backward_unused\n")
    text = text[: text.index("  - id: backward_unused")] + text[text.index("properties:") :]
    spec = load_spec(write(tmp_path, spec_text=text))

    def whole_batch(x: torch.Tensor, dim: int) -> torch.Tensor:
        e = torch.exp(x - x.max())
        return e / e.sum()

    assert all(r.all_passed for r in verify_spec(spec))
    result = run_impl(spec, whole_batch, dtype="float32", shrink=False)
    case = next(c for c in result.cases if c.id == "property:leading_dims_independent")
    assert not case.passed


def test_a_mistakes_list_names_the_files_own(tmp_path: Path) -> None:
    """mistakes: may list the reference file's ids (verify then targets those only); a catalogue
    mistake does not apply to an instructor's function."""
    from attnscore.check.verify import targeted_mistakes

    listed = SPEC.replace("properties:\n", "mistakes: [no_max_subtraction]\nproperties:\n", 1)
    spec = load_spec(write(tmp_path, spec_text=listed))
    assert [m.id for m in targeted_mistakes(spec)] == ["no_max_subtraction"]
    wrong = SPEC.replace("properties:\n", "mistakes: [mask_ignored]\nproperties:\n", 1)
    problems = problems_of(write(tmp_path, spec_text=wrong))
    assert problems == ["mistakes[0]: expected a mistake that applies to contract softmax, found 'mask_ignored'"]
