"""examples/courses/cs336_assignment1: CS336 assignment 1's attention questions as one assignment.

The quick tests run the example's files in process, in plain torch (trusted files of this repository):
every worked example holds for the instructor's reference and for the correct submission, each
wrong submission fails exactly the worked examples of the question it breaks, and each registered
instructor mistake computes what the wrong file computes. The slow tests grade the example end to
end in the sandbox: the README's per-question scores, the mistake named, a class of 50."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "examples" / "courses" / "cs336_assignment1"
ASSIGNMENT = COURSE / "assignment.yaml"
SUBMISSIONS = COURSE / "submissions"
QUESTIONS = {  # question id -> its spec file
    "softmax": COURSE / "softmax.yaml",
    "scaled_dot_product_attention": COURSE / "scaled_dot_product_attention.yaml",
    "multihead_self_attention": COURSE / "multihead_self_attention.yaml",
    "multihead_self_attention_module": COURSE / "multihead_self_attention_module.yaml",
}
# Per submission, the worked examples each question loses (question id -> example ids), "*" = all.
FAILED_EXAMPLES: dict[str, dict[str, set[str]]] = {
    "correct_einops.py": {},
    "softmax_no_max_subtraction.py": {"softmax": {"logits_around_1000", "logits_around_minus_1000"}},
    "sdpa_mask_inverted.py": {
        "scaled_dot_product_attention": {"mask_per_batch_item", "causal_mask", "scale_by_sqrt_d_k"}
    },
    "heads_split_without_transpose.py": {"multihead_self_attention": {"two_tokens_two_heads_causal"}},
    "module_misnamed_output_proj.py": {"multihead_self_attention_module": {"*"}},
    "missing_multihead_function.py": {"multihead_self_attention": {"*"}},
    "causal_mask_ignored.py": {
        "multihead_self_attention": {"two_tokens_two_heads_causal"},
        "multihead_self_attention_module": {"two_tokens_two_heads_causal"},
    },
}
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


def spec_yaml(question: str) -> dict[str, Any]:
    return yaml.safe_load(QUESTIONS[question].read_text(encoding="utf-8"))


def example_inputs(spec: dict[str, Any], example: dict[str, Any]) -> dict[str, Any]:
    """A worked example's inputs as float64 tensors (bool masks bool), in parameter order."""
    out: dict[str, Any] = {}
    for parameter in spec["function"]["parameters"]:
        name = parameter["name"]
        if name not in example["inputs"]:
            continue
        value = example["inputs"][name]
        if value is None:
            out[name] = None
            continue
        is_mask = torch.tensor(value).dtype == torch.bool
        out[name] = torch.tensor(value, dtype=torch.bool if is_mask else torch.float64)
    return out


def call(spec: dict[str, Any], namespace: Any, inputs: dict[str, Any]) -> torch.Tensor:
    """Call the spec's function (or build and call its module) the way the grader does: the
    parameters in order, the keywords by name; a module built from `module.init` with the drawn
    weights loaded under `module.weights`, forward called on `module.forward`."""
    function = spec["function"]
    target = getattr(namespace, function["name"])
    module = function.get("module")
    if module is None:
        return target(*inputs.values(), **function.get("keywords", {}))
    sizes = {}
    for parameter in function["parameters"]:
        for symbol, size in zip(parameter["shape"], inputs[parameter["name"]].shape, strict=True):
            sizes[symbol] = size
    init = {k: sizes[v["size"]] if isinstance(v, dict) else v for k, v in module["init"].items()}
    instance = target(**init).to(torch.float64)
    weights = {module["weights"][p]: inputs[p] for p in module["weights"]}
    return torch.func.functional_call(instance, weights, tuple(inputs[p] for p in module["forward"]), strict=True)


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
        if got.shape != expected.shape or not torch.allclose(got.to(torch.float64), expected, rtol=1e-12, atol=1e-12):
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
    """The table of expected failures names every submission file, and nothing else."""
    assert set(FAILED_EXAMPLES) == {p.name for p in SUBMISSIONS.glob("*.py")}


@pytest.mark.parametrize("question", ["softmax", "multihead_self_attention"])
def test_instructor_reference_gives_every_worked_example(question):
    """The instructor's reference, run in float64, gives each worked example's expected value."""
    assert failing_examples(question, ReferenceNamespace(question)) == set()


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
