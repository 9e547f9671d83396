"""examples/courses/cs336: the specs state CS336's interface, and each submission there gets, graded
in the sandbox, exactly the score its README states (correct course code full marks, each wrong file
losing points to its named mistake)."""

from __future__ import annotations

import importlib.util
import re
from fractions import Fraction
from pathlib import Path

import pytest

from attnscore.grade.grading import grade_many
from attnscore.report.results import SubmissionResult, Verdict
from attnscore.sandbox import checks
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "examples" / "courses" / "cs336"
SDPA_3D = COURSE / "scaled_dot_product_attention.yaml"
SDPA_4D = COURSE / "scaled_dot_product_attention_4d.yaml"
FLASH = COURSE / "flash_attention_2.yaml"
SDPA_SUBMISSIONS = COURSE / "submissions" / "scaled_dot_product_attention"
FLASH_SUBMISSIONS = COURSE / "submissions" / "flash_attention_2"
LIMITS = Limits(call_timeout_s=30.0)
COURSE_PACKAGES = ("einops", "jaxtyping")
MISSING = [name for name in COURSE_PACKAGES if importlib.util.find_spec(name) is None]
needs_course_packages = pytest.mark.skipif(
    bool(MISSING), reason=f"the course's packages are not installed here: pip install {' '.join(MISSING)}"
)
_ROW = re.compile(r"^\| `(?P<name>[a-z_0-9]+\.py)` \| (?P<scores>(?:\d+/\d+ \| )+)")


def readme_scores() -> dict[str, tuple[tuple[int, int], ...]]:
    """The README's score tables: submission file name -> (score, max) per column, in table order."""
    scores: dict[str, tuple[tuple[int, int], ...]] = {}
    for line in (COURSE / "README.md").read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match:
            cells = [cell.strip() for cell in match["scores"].split("|") if cell.strip()]
            scores[match["name"]] = tuple((int(a), int(b)) for a, b in (cell.split("/") for cell in cells))
    return scores


def scored(results: list[SubmissionResult]) -> dict[str, tuple[int, int]]:
    """File name -> (score, max score) of each result; every score is a whole number here."""
    out = {}
    for r in results:
        assert Fraction(r.score).denominator == 1, (r.submission, r.score)
        out[Path(r.submission).name] = (int(r.score), int(r.max_score))
    return out


def test_readme_lists_every_submission_with_its_scores():
    """The README's tables name every submission file once, with one score per spec it is graded on."""
    scores = readme_scores()
    files = {p.name for p in SDPA_SUBMISSIONS.glob("*.py")} | {p.name for p in FLASH_SUBMISSIONS.glob("*.py")}
    assert set(scores) == files
    assert {len(v) for name, v in scores.items() if (SDPA_SUBMISSIONS / name).exists()} == {2}
    assert {len(v) for name, v in scores.items() if (FLASH_SUBMISSIONS / name).exists()} == {1}


@pytest.mark.parametrize(
    ("path", "leading"),
    [
        pytest.param(SDPA_3D, ("batch",), id="third-order inputs"),
        pytest.param(SDPA_4D, ("batch", "heads"), id="fourth-order inputs"),
    ],
)
def test_attention_specs_state_the_course_interface(path, leading):
    """Each attention spec: one exact rank, an optional full-shape mask, the corners not asked, einops and jaxtyping."""
    spec = load_spec(path)
    assert spec.function == "scaled_dot_product_attention"
    assert spec.parameter_names == ("Q", "K", "V", "mask")
    assert spec.contract.leading == leading
    assert spec.contract.declared_shape("mask") == (*leading, "n_q", "n_k")
    assert spec.contract.full_masks == frozenset({"mask"})
    assert spec.contract.omittable == frozenset({"mask"})
    assert spec.not_asked == ("fully_masked_row", "nonfinite_masked_key")
    assert spec.set_aside == ()
    assert spec.environment.packages == COURSE_PACKAGES
    assert spec.environment.torch_compile is False
    assert spec.dtypes[0] == "float32"
    dedicated = [w.id for w in spec.worked_examples if w.convention]
    assert dedicated == ["fully_masked_row"]
    for w in spec.worked_examples:
        assert w.inputs["Q"].ndim == len(leading) + 2, w.id
        if w.inputs.get("mask") is not None:
            assert w.inputs["mask"].shape == w.inputs["Q"].shape[:-1] + w.inputs["K"].shape[-2:-1], w.id


def test_flash_spec_states_the_course_interface():
    """The FlashAttention-2 spec: the course's factory, (batch, n, d), L saved, torch.compile allowed."""
    spec = load_spec(FLASH)
    assert (spec.function, spec.factory) == ("get_flashattention_autograd_function_pytorch", True)
    assert spec.contract.leading == ("batch",)
    assert spec.logsumexp == ("saved_tensors", None)
    assert spec.environment.torch_compile is True
    assert spec.environment.packages == COURSE_PACKAGES
    assert spec.parameter_names == ("Q", "K", "V")
    assert not spec.contract.options  # no keyword fixed: every call is apply(Q, K, V), is_causal its default False


@pytest.mark.slow
@needs_course_packages
@pytest.mark.parametrize(("spec_path", "column"), [(SDPA_3D, 0), (SDPA_4D, 1)], ids=["third-order", "fourth-order"])
def test_attention_submissions_get_the_readme_scores(spec_path, column):
    """Sandboxed: correct files full marks (NaN or mean-of-V rows only advised), wrong ones the README's scores."""
    spec = load_spec(spec_path)
    paths = sorted(SDPA_SUBMISSIONS.glob("*.py"))
    results = {Path(r.submission).name: r for r in grade_many(paths, spec, limits=LIMITS, shrink_steps=0)}
    expected = {name: v[column] for name, v in readme_scores().items() if (SDPA_SUBMISSIONS / name).exists()}
    assert scored(list(results.values())) == expected
    for name in ("correct_einops_masked_fill.py", "correct_shape_unpacking.py"):
        (corner,) = [c for c in results[name].cases if c.id == "example:fully_masked_row"]
        assert (corner.passed, corner.points, corner.max_points) == (False, 0, 0), name
        assert "Advice only (no points)" in corner.message
        verdict = Verdict.NON_FINITE if name == "correct_einops_masked_fill.py" else Verdict.WRONG_VALUE
        assert corner.verdict is verdict, name  # NaN from -inf; the mean of V from -1e9
    no_scale = results["missing_scale.py"]
    assert {c.diagnosis["id"] for c in no_scale.cases if c.diagnosis and c.max_points} == {"not_scaled"}
    three_dims = results["unpacks_three_dims.py"]
    if column == 1:
        assert {c.verdict for c in three_dims.cases} == {Verdict.EXCEPTION}
        assert "ValueError: too many values to unpack" in three_dims.cases[0].message


@pytest.mark.slow
@needs_course_packages
def test_flash_logsumexp_running_max_loses_its_named_cases():
    """The running max saved as L: O right, L and the gradients wrong, named logsumexp_is_running_max."""
    (result,) = grade_many(
        [FLASH_SUBMISSIONS / "logsumexp_is_running_max.py"], load_spec(FLASH), limits=LIMITS, shrink_steps=0
    )
    assert scored([result]) == {"logsumexp_is_running_max.py": readme_scores()["logsumexp_is_running_max.py"][0]}
    failed = {c.id for c in result.cases if not c.passed}
    assert failed == {
        "example:two_equal_keys",
        "example:scale_in_every_gradient",
        "property:logsumexp_matches_golden",
        "property:gradients_match_golden",
    }
    assert {c.diagnosis["id"] for c in result.cases if c.diagnosis} == {"logsumexp_is_running_max"}


COMPILE_PROBLEM = checks.compile_problem(Limits())


@pytest.mark.slow
@needs_course_packages
@pytest.mark.skipif(COMPILE_PROBLEM is not None, reason=f"cannot compile here: {COMPILE_PROBLEM}")
def test_flash_compiled_backward_gets_full_marks():
    """A backward wrapped in torch.compile, as the handout suggests, gets full marks in the sandbox."""
    (result,) = grade_many(
        [FLASH_SUBMISSIONS / "correct_compiled_backward.py"], load_spec(FLASH), limits=LIMITS, shrink_steps=0
    )
    expected = readme_scores()["correct_compiled_backward.py"][0]
    assert expected[0] == expected[1]
    assert scored([result]) == {"correct_compiled_backward.py": expected}, [
        (c.id, c.message) for c in result.cases if c.message
    ]
