"""examples/courses/cs336_assignment1: CS336 assignment 1's attention questions as one assignment.

The quick tests run the example's files in process, in plain torch (trusted files of this repository):
every worked example holds for the instructor's reference and for the correct submission, each
wrong submission fails exactly the worked examples of the question it breaks, and each registered
instructor mistake computes what the wrong file computes. The slow tests grade the example end to
end in the sandbox: the README's per-question scores, the mistake named, a class of 50."""

from __future__ import annotations

import csv
import importlib.util
import math
import re
import subprocess
import sys
import zipfile
from fractions import Fraction
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
import yaml

from attnscore.grade.assignment_grading import grade_assignment_many
from attnscore.report.results import Verdict
from attnscore.spec.assignment import load_assignment
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "examples" / "courses" / "cs336_assignment1"
ASSIGNMENT = COURSE / "assignment.yaml"
SUBMISSIONS = COURSE / "submissions"
QUESTIONS = {  # question id -> its spec file
    "softmax": COURSE / "softmax.yaml",
    "sdpa": COURSE / "scaled_dot_product_attention.yaml",
    "mha": COURSE / "multihead_self_attention.yaml",
    "mha_module": COURSE / "multihead_self_attention_module.yaml",
    "rope": COURSE / "rope.yaml",
    "mha_rope": COURSE / "multihead_self_attention_rope.yaml",
}
# Per submission, the worked examples each question loses (question id -> example ids), "*" = all.
FAILED_EXAMPLES: dict[str, dict[str, set[str]]] = {
    "correct_einops.py": {},
    "correct_complex_rope.py": {},
    "softmax_no_max_subtraction.py": {"softmax": {"logits_around_1000", "logits_around_minus_1000"}},
    "sdpa_mask_inverted.py": {"sdpa": {"mask_per_batch_item", "causal_mask", "scale_by_sqrt_d_k"}},
    "heads_split_without_transpose.py": {"mha": {"two_tokens_two_heads_causal"}},
    "module_misnamed_output_proj.py": {"mha_module": {"*"}, "mha_rope": {"*"}},
    "missing_multihead_function.py": {"mha": {"*"}},
    "causal_mask_ignored.py": {
        "mha": {"two_tokens_two_heads_causal"},
        "mha_module": {"two_tokens_two_heads_causal"},
        "mha_rope": {"*"},  # every worked example has two tokens or more
    },
    "rope_rotate_half.py": {
        "rope": {"position_zero_is_the_identity", "frequency_of_pair_one"},
        "mha_rope": {"pairs_are_adjacent"},
    },
    "rope_positions_ignored.py": {
        "rope": {"frequency_of_pair_one", "positions_not_indices"},
        "mha_rope": {"positions_not_indices", "each_head_rotated_at_its_own_width", "pairs_are_adjacent"},
    },
}
# Per submission, the mistake each question it loses is diagnosed as (cases worth points only).
NAMED: dict[str, dict[str, str]] = {
    "softmax_no_max_subtraction.py": {"softmax": "no_max_subtraction"},
    "sdpa_mask_inverted.py": {"sdpa": "mask_inverted"},
    "heads_split_without_transpose.py": {"mha": "heads_split_without_transpose"},
    "causal_mask_ignored.py": {
        "mha": "causal_mask_ignored",
        "mha_module": "causal_mask_ignored",
        "mha_rope": "causal_mask_missing",
    },
    # the catalogue's RoPE mistakes apply inside multi-head attention with RoPE too, per head
    "rope_rotate_half.py": {"rope": "rope_pairing_swapped", "mha_rope": "rope_pairing_swapped"},
    "rope_positions_ignored.py": {"rope": "rope_positions_ignored", "mha_rope": "rope_positions_ignored"},
}
# The RoPE questions in float64 hold a float32 cosine table built in the constructor (the course's
# constructor takes no dtype), correct to float32 rounding: compared at 1e-6, every other at 1e-12.
FLOAT32_TABLES = {"rope": 1e-6, "mha_rope": 1e-6}
_ROW = re.compile(r"^\| `(?P<name>[a-z_0-9]+\.py)` \| (?P<scores>(?:\d+/\d+ \| )+)")
COURSE_PACKAGES = ("einops", "jaxtyping")
MISSING = [name for name in COURSE_PACKAGES if importlib.util.find_spec(name) is None]
needs_course_packages = pytest.mark.skipif(
    bool(MISSING), reason=f"the course's packages are not installed here: pip install {' '.join(MISSING)}"
)


def load_file(path: Path) -> ModuleType:
    """Import one of the example's Python files by path, under a private module name."""
    name = f"_cs336_assignment1_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def readme_scores() -> dict[str, tuple[tuple[int, int], ...]]:
    """The README's score table: submission -> (points, max) per question in order, then the total."""
    scores: dict[str, tuple[tuple[int, int], ...]] = {}
    for line in (COURSE / "README.md").read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match:
            cells = [cell.strip() for cell in match["scores"].split("|") if cell.strip()]
            scores[match["name"]] = tuple((int(a), int(b)) for a, b in (cell.split("/") for cell in cells))
    return scores


def spec_yaml(question: str) -> dict[str, Any]:
    return yaml.safe_load(QUESTIONS[question].read_text(encoding="utf-8"))


def example_inputs(spec: dict[str, Any], example: dict[str, Any]) -> dict[str, Any]:
    """A worked example's inputs as float64 tensors (bool masks bool), in parameter order; as the
    grader passes them, a whole number of shape [] (num_heads, theta) is a Python int and RoPE's
    token_positions an int32 tensor."""
    out: dict[str, Any] = {}
    for parameter in spec["function"]["parameters"]:
        name = parameter["name"]
        if name not in example["inputs"]:
            continue
        value = example["inputs"][name]
        if value is None:
            out[name] = None
            continue
        if parameter["shape"] == []:
            out[name] = int(value)
            continue
        if name == "token_positions":
            out[name] = torch.tensor(value, dtype=torch.int32)
            continue
        is_mask = torch.tensor(value).dtype == torch.bool
        out[name] = torch.tensor(value, dtype=torch.bool if is_mask else torch.float64)
    return out


def call(spec: dict[str, Any], namespace: Any, inputs: dict[str, Any]) -> torch.Tensor:
    """Call the spec's function (or build and call its module) the way the grader does: the
    parameters in order, the keywords by name; a module built from `module.init` (`{size: SYMBOL}`
    a size of the inputs, `{value: PARAMETER}` a whole-number input) with the drawn weights loaded
    under `module.weights`, forward called on `module.forward`."""
    function = spec["function"]
    target = getattr(namespace, function["name"])
    module = function.get("module")
    if module is None:
        return target(*inputs.values(), **function.get("keywords", {}))
    sizes = {}
    for parameter in function["parameters"]:
        if parameter["shape"]:
            for symbol, size in zip(parameter["shape"], inputs[parameter["name"]].shape, strict=True):
                sizes[symbol] = size

    def init_value(v: Any) -> Any:
        if isinstance(v, dict):
            return sizes[v["size"]] if "size" in v else inputs[v["value"]]
        return v

    init = {k: init_value(v) for k, v in module["init"].items()}
    instance = target(**init).to(torch.float64)
    weights = {module["weights"][p]: inputs[p] for p in module["weights"]}
    found = {name for name, _ in instance.named_parameters()}
    if found != set(weights):  # the grader's check: exactly the stated parameters; buffers are the module's own
        raise ValueError(f"expected the parameters {sorted(weights)}, found {sorted(found)}")
    return torch.func.functional_call(instance, weights, tuple(inputs[p] for p in module["forward"]))


def failing_examples(question: str, namespace: Any) -> set[str]:
    """The worked examples of `question` whose output (or exception) is not the expected value;
    the examples dedicated to a convention corner the course does not ask about are left out."""
    spec = spec_yaml(question)
    failed = set()
    for example in spec["worked_examples"]:
        if example.get("convention"):
            continue
        try:
            got = call(spec, namespace, example_inputs(spec, example))
        except Exception:  # noqa: BLE001 - a missing function or a mis-named weight fails the example
            failed.add(example["id"])
            continue
        expected = torch.tensor(example["expected"], dtype=torch.float64)
        tol = FLOAT32_TABLES.get(question, 1e-12)
        if got.shape != expected.shape or not torch.allclose(got.to(torch.float64), expected, rtol=tol, atol=tol):
            failed.add(example["id"])
    return failed


class ReferenceNamespace:
    """The instructor's reference functions under the names the specs grade, for `call`."""

    def __init__(self, question: str) -> None:
        function = spec_yaml(question)["function"]
        file, _, name = function["reference"].partition(":")
        self.module = load_file(COURSE / file)
        setattr(self, function["name"], getattr(self.module, name or function["name"]))


def test_every_submission_is_listed():
    """The tables of expected failures and README scores name every submission file, and nothing else."""
    files = {p.name for p in SUBMISSIONS.glob("*.py")}
    assert set(FAILED_EXAMPLES) == files
    scores = readme_scores()
    assert set(scores) == files
    assert {len(v) for v in scores.values()} == {len(QUESTIONS) + 1}
    for name, cells in scores.items():  # the total is the sum of the questions, out of 160
        assert cells[-1] == (sum(p for p, _ in cells[:-1]), 160), name


def test_readme_scores_follow_the_failed_examples():
    """A submission loses points on exactly the questions whose worked examples it fails (README vs table)."""
    for name, cells in readme_scores().items():
        losing = {q for q, (points, most) in zip(QUESTIONS, cells, strict=False) if points < most}
        assert losing == set(FAILED_EXAMPLES[name]), name


@pytest.mark.parametrize("question", ["softmax", "mha"])
def test_instructor_reference_gives_every_worked_example(question):
    """The instructor's reference, run in float64, gives each worked example's expected value."""
    assert failing_examples(question, ReferenceNamespace(question)) == set()


@pytest.mark.parametrize("question", ["rope", "mha_rope"])
def test_bundled_reference_gives_every_worked_example_of_the_rope_questions(question):
    """The RoPE questions are graded against bundled contracts (rope, multihead_self_attention_rope):
    their reference, called in float64 with the contract's parameters in order, gives each worked
    example's expected value."""
    spec = spec_yaml(question)
    contract = load_spec(QUESTIONS[question]).contract
    assert contract.name == spec["function"]["contract"]
    for example in spec["worked_examples"]:
        got = contract.reference(*example_inputs(spec, example).values())
        expected = torch.tensor(example["expected"], dtype=torch.float64)
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12, msg=example["id"])


def test_reference_matches_torch_multihead_attention():
    """The instructor's multi-head reference is torch's own MultiheadAttention (no bias, causal mask)."""
    reference = load_file(COURSE / "multihead_self_attention_reference.py")
    g = torch.Generator().manual_seed(3)
    weights = [torch.randn(8, 8, generator=g, dtype=torch.float64) for _ in range(4)]
    x = torch.randn(3, 5, 8, generator=g, dtype=torch.float64)
    mha = torch.nn.MultiheadAttention(8, 4, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat(weights[:3]))
        mha.out_proj.weight.copy_(weights[3])
    future = torch.ones(5, 5, dtype=torch.bool).triu(diagonal=1)  # torch: True = not allowed to attend
    expected, _ = mha(x, x, x, attn_mask=future, need_weights=False)
    got = reference.multihead_self_attention(*weights, x, d_model=8, num_heads=4)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


@needs_course_packages
@pytest.mark.parametrize("submission", sorted(FAILED_EXAMPLES))
def test_submission_fails_exactly_the_worked_examples_of_its_question(submission):
    """In process: the correct file passes every worked example; a wrong one fails only its question's."""
    namespace = load_file(SUBMISSIONS / submission)
    expected = FAILED_EXAMPLES[submission]
    for question in QUESTIONS:
        failed = failing_examples(question, namespace)
        want = expected.get(question, set())
        if want == {"*"}:
            want = {e["id"] for e in spec_yaml(question)["worked_examples"] if not e.get("convention")}
        assert failed == want, (submission, question)


@needs_course_packages
@pytest.mark.parametrize(
    ("mistake", "submission"),
    [
        pytest.param("causal_mask_ignored", "causal_mask_ignored.py", id="causal mask ignored"),
        pytest.param("heads_split_without_transpose", "heads_split_without_transpose.py", id="heads split"),
    ],
)
def test_registered_mistake_computes_what_the_wrong_file_computes(mistake, submission):
    """Each wrong multi-head file is, on random inputs, exactly the instructor's registered mistake."""
    reference = load_file(COURSE / "multihead_self_attention_reference.py")
    wrong = load_file(SUBMISSIONS / submission)
    g = torch.Generator().manual_seed(5)
    args = [torch.randn(4, 4, generator=g, dtype=torch.float64) for _ in range(4)]
    x = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
    mistaken = getattr(reference, mistake)(*args, x, d_model=4, num_heads=2)
    right = reference.multihead_self_attention(*args, x, d_model=4, num_heads=2)
    got = wrong.multihead_self_attention(*args, x, d_model=4, num_heads=2)
    torch.testing.assert_close(got, mistaken, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(got, right)


def test_softmax_mistakes_are_nan_or_wrong_where_the_reference_is_right():
    """The softmax mistakes give NaN on logits around ±1000 and the wrong axis on a batch, the reference not."""
    reference = load_file(COURSE / "softmax_reference.py")
    big = torch.tensor([[1000.0, 1000.0], [999.0, 1000.0]])
    assert torch.isnan(reference.no_max_subtraction(big, dim=-1)).all()
    row = torch.tensor([1 / (1 + math.e), math.e / (1 + math.e)])
    torch.testing.assert_close(reference.softmax(big, dim=-1)[1], row)
    batch = torch.tensor([[[0.0, 0.0]], [[1.0, 1.0]]])
    assert not torch.allclose(reference.normalised_over_first_axis(batch, dim=-1), reference.softmax(batch, dim=-1))


def test_assignment_states_six_questions_two_references_three_modules():
    """The assignment: six questions in order, 160 points, two instructor references, three modules
    (the RoPE module built per case with the case's theta, the multi-head class with RoPE)."""
    assignment = load_assignment(ASSIGNMENT)
    assert [q.id for q in assignment.questions] == list(QUESTIONS)
    assert [q.points for q in assignment.questions] == [10, 30, 30, 30, 30, 30]
    assert [q.scale for q in assignment.questions] == [1, 2, 2, 2, 2, 2]
    assert [q.function for q in assignment.questions] == [
        "softmax",
        "scaled_dot_product_attention",
        "multihead_self_attention",
        "MultiHeadSelfAttention",
        "RotaryPositionalEmbedding",
        "MultiHeadSelfAttention",
    ]
    specs = {q.id: q.spec for q in assignment.questions}
    assert [q for q, s in specs.items() if s.module is not None] == ["mha_module", "rope", "mha_rope"]
    assert [s.contract.name for q, s in specs.items() if q in ("rope", "mha_rope")] == [
        "rope",
        "multihead_self_attention_rope",
    ]
    assert [bool(q.spec.reference_files) for q in assignment.questions] == [True, False, True, True, False, False]
    files = {Path(f).name for f in assignment.files()}
    assert {"assignment.yaml", "softmax_reference.py", "multihead_self_attention_reference.py"} <= files
    assert {Path(q.spec.path).name for q in assignment.questions} <= files


def _question_scores(result: Any) -> tuple[tuple[int, int], ...]:
    """Per question (in order) then the total, as whole (points, max): every score is whole here."""
    cells = [result.question_score(q) for q in QUESTIONS] + [(result.score, result.max_score)]
    assert all(Fraction(p).denominator == 1 and Fraction(m).denominator == 1 for p, m in cells), cells
    return tuple((int(p), int(m)) for p, m in cells)


def test_make_class_writes_distinct_copies_and_refuses_an_empty_class(tmp_path, capsys):
    """make_class.py: 50 files, all different bytes, each its source's code with the docstring left out;
    a size below 1 is one error line and exit 2, writing nothing."""
    make_class = load_file(COURSE / "make_class.py")
    made = make_class.build_class(tmp_path / "class", 50)
    texts = {name: (tmp_path / "class" / name).read_text(encoding="utf-8") for name in made}
    assert sorted(texts) == [f"student_{i:03d}.py" for i in range(1, 51)]
    assert len(set(texts.values())) == 50
    for name, source in made.items():
        original = (SUBMISSIONS / source).read_text(encoding="utf-8")
        code = original[original.index('"""', 3) + 3 :].lstrip("\n")
        assert code in texts[name] and texts[name].startswith('"""CS336 assignment 1'), name
    assert make_class.main([str(tmp_path / "empty"), "--size", "0"]) == 2
    assert capsys.readouterr().err == "Error: size: expected a class of at least 1 submission, found 0\n"
    assert not (tmp_path / "empty").exists()
    with pytest.raises(ValueError, match="at least 1 submission, found -3"):
        make_class.build_class(tmp_path / "negative", -3)


@pytest.mark.slow
@needs_course_packages
def test_submissions_get_the_readme_scores_with_the_mistake_named():
    """Sandboxed: full marks for the correct file; each wrong one loses its question(s), the mistake named."""
    assignment = load_assignment(ASSIGNMENT)
    paths = sorted(SUBMISSIONS.glob("*.py"))
    results = {
        Path(r.submission).name: r for r in grade_assignment_many(paths, assignment, timeout=30.0, shrink_steps=0)
    }
    assert {name: _question_scores(r) for name, r in results.items()} == readme_scores()
    for name, result in results.items():
        named: dict[str, set[str]] = {}
        for c in result.cases:
            if c.diagnosis and c.max_points:
                named.setdefault(c.question, set()).add(c.diagnosis["id"])
        assert named == {q: {m} for q, m in NAMED.get(name, {}).items()}, name
    misnamed = [c for c in results["module_misnamed_output_proj.py"].cases if c.question == "mha_module"]
    assert {c.verdict for c in misnamed} == {Verdict.WRONG_PARAMETERS}
    assert "output_proj.weight is missing" in misnamed[0].message
    missing = results["missing_multihead_function.py"]
    (question,) = [q for q in missing.questions if q.id == "mha"]
    assert (
        "defines: Linear, MultiHeadSelfAttention, RotaryPositionalEmbedding, scaled_dot_product_attention, softmax"
        in (question.error)
    )
    assert {c.verdict for c in missing.cases if c.question == question.id} == {Verdict.FUNCTION_MISSING}


@pytest.mark.slow
@needs_course_packages
def test_a_class_of_fifty_gets_per_question_columns(tmp_path):
    """A class of 50 copies (make_class.py), graded with --out: each student's per-question CSV cells
    are the README's scores of the file it copies."""
    make_class = load_file(COURSE / "make_class.py")
    made = make_class.build_class(tmp_path / "class", 50)
    assert len(made) == 50 and set(made.values()) == set(FAILED_EXAMPLES)
    out = tmp_path / "grading"
    run = subprocess.run(
        [sys.executable, "-m", "attnscore", "grade", str(tmp_path / "class"), "--spec", str(ASSIGNMENT)]
        + ["--out", str(out), "--shrink-steps", "0", "--jobs", "2"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 1, run.stderr  # some cases failed (the wrong files)
    with open(out / "grades.csv", newline="", encoding="utf-8-sig") as f:  # the CSV starts with a BOM
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert set(rows) == set(made)
    scores = readme_scores()
    for student, source in made.items():
        want = scores[source]
        got = tuple(Fraction(rows[student][q]) for q in QUESTIONS) + (Fraction(rows[student]["score"]),)
        assert got == tuple(Fraction(p) for p, _ in want), (student, source)
    assert (out / "report.html").stat().st_size > 0


@pytest.mark.slow
@needs_course_packages
def test_gradescope_bundle_grades_the_example_as_gradescope_runs_it(tmp_path):
    """The assignment's Gradescope zip carries both reference files; its run_autograder gives the
    correct file 160 and the heads-split file 136, with a line per question."""
    from attnscore.export.gradescope import build_gradescope_bundle
    from tests.export.test_gradescope import autograder, check_format

    bundle = tmp_path / "autograder.zip"
    build_gradescope_bundle(ASSIGNMENT, bundle)
    with zipfile.ZipFile(bundle) as archive:
        names = {Path(n).name for n in archive.namelist()}
        requirements = archive.read("course-requirements.txt").decode().split()
    assert {"assignment.yaml", "softmax_reference.py", "multihead_self_attention_reference.py"} <= names
    assert {"einops", "jaxtyping"} <= set(requirements)
    right = autograder(tmp_path / "right", bundle, {"solution.py": (SUBMISSIONS / "correct_einops.py").read_bytes()})
    check_format(right)
    assert right["score"] == 160
    wrong_file = (SUBMISSIONS / "heads_split_without_transpose.py").read_bytes()
    wrong = autograder(tmp_path / "wrong", bundle, {"solution.py": wrong_file})
    check_format(wrong)
    assert wrong["score"] == 136
    assert "mha: 6/30 points" in wrong["output"].splitlines()
    assert {t["name"].split(": ")[0] for t in wrong["tests"]} == set(QUESTIONS)


@pytest.mark.slow
@needs_course_packages
def test_prairielearn_grader_grades_the_example_as_prairielearn_runs_it(tmp_path):
    """The PrairieLearn question's grader on /grade laid out as PrairieLearn does: 100 % for the
    correct file, 62.5 % (100/160) for the misnamed module weight, a message line per question."""
    from attnscore.export.prairielearn import export_prairielearn
    from tests.export.test_assignment_export import pl_grade

    out = tmp_path / "pl"
    export_prairielearn(ASSIGNMENT, out)
    right = pl_grade(tmp_path / "right", out, {"solution.py": (SUBMISSIONS / "correct_einops.py").read_bytes()})
    assert right["gradable"] is True and right["score"] == 1
    misnamed = (SUBMISSIONS / "module_misnamed_output_proj.py").read_bytes()
    wrong = pl_grade(tmp_path / "wrong", out, {"solution.py": misnamed})
    assert wrong["gradable"] is True and wrong["score"] == pytest.approx(100 / 160)
    assert "mha_module: 0/30 points" in wrong["message"].splitlines()
