"""function.module in a spec: read into a ModuleConfig, every bad field a located problem, the schema's form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnscore.boundary.modules import ModuleConfig, SizeOf
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "specs" / "bilinear_scores_module.yaml"

BILINEAR = """\
format: attnscore-spec/1
id: tiny_module
version: 1
title: tiny module spec
function:
  name: BilinearScore
  contract: bilinear_scores
MODULE
  parameters:
    - {name: Q, shape: ["...", n_q, d_q]}
    - {name: K, shape: ["...", n_k, d_k]}
    - {name: W, shape: [d_q, d_k]}
  returns: {shape: ["...", n_q, n_k]}
worked_examples:
  - id: first
    inputs:
      Q: [[1, 3]]
      K: [[0, 1], [1, 0]]
      W: [[0, 2], [0, 0]]
    expected: [[2, 0]]
    explanation: q W = [0, 2]
    points: 1
"""

MODULE = """\
  module:
    init: {d_q: {size: d_q}, d_k: {size: d_k}, bias: false}
    weights: {W: weight}
    forward: [Q, K]"""


def _write(tmp_path: Path, module: str, text: str = BILINEAR) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(text.replace("MODULE", module), encoding="utf-8")
    return path


def _problems(tmp_path: Path, module: str, text: str = BILINEAR) -> list[str]:
    with pytest.raises(SpecError) as raised:
        load_spec(_write(tmp_path, module, text))
    return [str(p).removeprefix(f"{tmp_path}/") for p in raised.value.problems]


def test_module_is_read_into_a_config(tmp_path):
    """init (sizes resolved to an input's axis from the last), weights and forward, in the spec's order."""
    spec = load_spec(_write(tmp_path, MODULE))
    assert spec.function == "BilinearScore"
    assert spec.module == ModuleConfig(
        (("d_q", SizeOf("Q", -1, "d_q")), ("d_k", SizeOf("K", -1, "d_k")), ("bias", False)),
        (("W", "weight"),),
        ("Q", "K"),
    )
    assert spec.module.init_kwargs({"Q": (4, 1, 3), "K": (4, 5, 2), "W": (3, 2)}) == {"d_q": 3, "d_k": 2, "bias": False}


def test_a_spec_without_module_grades_a_function(tmp_path):
    """No function.module: Spec.module is None (every bundled spec)."""
    assert load_spec(_write(tmp_path, "")).module is None
    assert load_spec("bilinear_scores").module is None


def test_plain_values_lists_and_default_forward(tmp_path):
    """Strings, numbers, null and lists pass as written (lists as tuples); forward may be left out."""
    spec = load_spec(
        _write(
            tmp_path,
            "  module:\n    init: {name: bilinear, heads: [1, 2], scale: 0.5, extra: null}\n    weights: {W: w}",
        )
    )
    assert spec.module == ModuleConfig(
        (("name", "bilinear"), ("heads", (1, 2)), ("scale", 0.5), ("extra", None)), (("W", "w"),), ()
    )
    assert spec.module.init_kwargs({}) == {"name": "bilinear", "heads": [1, 2], "scale": 0.5, "extra": None}


def test_the_example_spec_loads_with_its_module():
    """examples/specs/bilinear_scores_module.yaml: BilinearScore(d_q, d_k, bias=False), W as weight."""
    spec = load_spec(EXAMPLE)
    assert spec.function == "BilinearScore" and spec.contract.name == "bilinear_scores"
    assert spec.module is not None and spec.module.weight_names == {"W": "weight"}
    assert [name for name, _ in spec.module.init] == ["d_q", "d_k", "bias"]
    example = next(e for e in spec.worked_examples if e.id == "gradient_reaches_the_weight")
    assert example.expected_gradients["W"].tolist() == [[0, 2], [0, 0], [0, 4]]


@pytest.mark.parametrize(
    ("module", "problem"),
    [
        pytest.param(
            "  module:\n    weights: {X: weight}",
            "tiny.yaml:9:15: function.module.weights.X: expected a parameter of function.parameters (Q, K, W), "
            "found 'X'",
            id="unknown weight parameter",
        ),
        pytest.param(
            "  module:\n    weights: {Q: weight}",
            "tiny.yaml:9:15: function.module.weights.Q: expected a weight of one fixed shape (no leading dims '...', "
            "at least one axis), found Q with shape [..., n_q, d_q]",
            id="weight with batch dims",
        ),
        pytest.param(
            "  module:\n    weights: {W: weight}\n    forward: [Q]",
            "tiny.yaml:10:14: function.module.forward: expected every parameter that is not a weight once, in "
            "forward's order (Q, K in some order), found [Q]",
            id="forward misses a parameter",
        ),
        pytest.param(
            "  module:\n    weights: {W: weight}\n    forward: [Q, K, W]",
            "tiny.yaml:10:21: function.module.forward[2]: expected a parameter that is not a weight (Q, K), found "
            "the weight 'W' (the module holds it)",
            id="forward lists the weight",
        ),
        pytest.param(
            "  module:\n    weights: {W: weight}\n    forward: [Q, V]",
            "tiny.yaml:10:18: function.module.forward[1]: expected a parameter of function.parameters (Q, K, W), "
            "found 'V'",
            id="forward names an unknown parameter",
        ),
        pytest.param(
            "  module:\n    init: {d_model: {size: d_model}}\n    weights: {W: weight}",
            "tiny.yaml:9:28: function.module.init.d_model.size: expected a shape symbol of function.parameters "
            "(d_k, d_q, n_k, n_q), found string 'd_model'",
            id="size of an unknown symbol",
        ),
        pytest.param(
            "  factory: true\n  module:\n    weights: {W: weight}",
            "tiny.yaml:8:3: function.factory: expected function.module or function.factory, not both (a module is "
            "built from its class)",
            id="factory and module",
        ),
    ],
)
def test_bad_meaning_is_one_located_problem(tmp_path, module, problem):
    """Each meaning problem of function.module: file:line:col, the field, what was expected and found."""
    assert _problems(tmp_path, module) == [problem]


@pytest.mark.parametrize(
    ("module", "field", "words"),
    [
        pytest.param("  module:\n    init: {d: {sizes: d_q}}", "function.module.init.d", "", id="size misspelt"),
        pytest.param("  module:\n    weights: {W: 3}", "function.module.weights.W", "", id="name not text"),
        pytest.param("  module:\n    weights: {W: 'a..b'}", "function.module.weights.W", "", id="not a dotted name"),
        pytest.param("  module:\n    forward: [Q, Q]", "function.module.forward", "", id="forward repeats"),
        pytest.param(
            "  module:\n    weight: {W: weight}",
            "function.module.weight",
            "expected only known fields, found unknown field 'weight'; allowed: forward, init, weights",
            id="unknown key",
        ),
        pytest.param("  module: [W]", "function.module", "", id="not a mapping"),
    ],
)
def test_bad_form_is_a_located_schema_problem(tmp_path, module, field, words):
    """The schema's checks of function.module's form, each located at the field."""
    problems = _problems(tmp_path, module)
    assert any(f": {field}: " in p and words in p for p in problems), problems


ADDITIVE = """\
format: attnscore-spec/1
id: additive_module
version: 1
title: additive scores as a module
function:
  name: AdditiveScore
  contract: additive_scores
  module:
    init: {d_k: {size: d_k}, d_a: {size: d_a}}
    weights: {W_q: q_proj.weight, W_k: k_proj.weight, v: v}
  parameters:
    - {name: Q, shape: ["...", n_q, d_k]}
    - {name: K, shape: ["...", n_k, d_k]}
    - {name: W_q, shape: [d_a, d_k]}
    - {name: W_k, shape: [d_a, d_k]}
    - {name: v, shape: [d_a]}
  returns: {shape: ["...", n_q, n_k]}
tolerance: {mode: dot_bound, factor: 2}
worked_examples:
  - id: two_hidden_units
    inputs:
      Q: [[1, 0]]
      K: [[0, 1], [1, -1]]
      W_q: [[1, 0], [0, 2]]
      W_k: [[0, 1], [1, 0]]
      v: [1, -1]
    expected: [[0.9640275800758169, -0.7615941559557649]]
    explanation: W_q q = [1, 0]; key 0 sums to [2, 0], key 1 to [0, 1].
    points: 2
properties:
  - {name: matches_reference, points: 2, examples: 10, statement: "Every score equals vᵀ tanh(W_q q + W_k k)."}
  - {name: gradients_match_golden, points: 1, examples: 5, statement: "Every weight gets its exact gradient."}
"""

ADDITIVE_MODULE = """
import torch
from torch import nn


class AdditiveScore(nn.Module):
    def __init__(self, d_k, d_a):
        super().__init__()
        self.q_proj = nn.Linear(d_k, d_a, bias=False)
        self.k_proj = nn.Linear(d_k, d_a, bias=False)
        self.v = nn.Parameter(torch.empty(d_a))
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, Q, K):
        hidden = torch.tanh(self.q_proj(Q).unsqueeze(-2) + self.k_proj(K).unsqueeze(-3))
        return hidden @ self.v
"""


def test_nested_parameter_names_and_two_weights_are_checked_in_process(tmp_path):
    """Additive scores with q_proj.weight, k_proj.weight and v (a buffer beside them): every case passes in
    the self-check, gradients of all three weights included; the same module with a k_proj bias loses every
    case to wrong parameters."""
    from attnscore.selfcheck import check_path

    spec = load_spec(_write(tmp_path, "", ADDITIVE))
    assert spec.module is not None and spec.module.weight_names == {
        "W_q": "q_proj.weight",
        "W_k": "k_proj.weight",
        "v": "v",
    }
    good = tmp_path / "good.py"
    good.write_text(ADDITIVE_MODULE, encoding="utf-8")
    result = check_path(good, spec).result
    assert [(c.id, c.verdict.value) for c in result.cases] == [
        ("example:two_hidden_units", "passed"),
        ("property:matches_reference", "passed"),
        ("property:gradients_match_golden", "passed"),
    ]
    biased = tmp_path / "biased.py"
    biased.write_text(
        ADDITIVE_MODULE.replace("self.k_proj = nn.Linear(d_k, d_a, bias=False)", "self.k_proj = nn.Linear(d_k, d_a)")
    )
    result = check_path(biased, spec).result
    assert {c.verdict.value for c in result.cases} == {"wrong_parameters"} and result.score == 0
    first = result.cases[0].failure
    assert first is not None and first.detail == (
        "AdditiveScore(d_k=2, d_a=2): expected the parameters q_proj.weight (2, 2) (the spec's W_q), k_proj.weight "
        "(2, 2) (the spec's W_k), v (2,) (the spec's v), found v (2,), q_proj.weight (2, 2), k_proj.weight (2, 2), "
        "k_proj.bias (2,): k_proj.bias is not one of the spec's (remove it, or make it a buffer)"
    )


def test_weights_cannot_be_a_mask(tmp_path):
    """A bool mask is no weight: a located problem naming it."""
    text = BILINEAR.replace("contract: bilinear_scores", "contract: masked_scores").replace(
        """    - {name: Q, shape: ["...", n_q, d_q]}
    - {name: K, shape: ["...", n_k, d_k]}
    - {name: W, shape: [d_q, d_k]}
  returns: {shape: ["...", n_q, n_k]}""",
        """    - {name: S, shape: ["...", n_q, n_k]}
    - {name: mask, shape: ["...", n_q, n_k]}
  returns: {shape: ["...", n_q, n_k]}""",
    )
    text = text.replace(
        "      Q: [[1, 3]]\n      K: [[0, 1], [1, 0]]\n      W: [[0, 2], [0, 0]]\n    expected: [[2, 0]]",
        "      S: [[1, 2]]\n      mask: [[true, true]]\n    expected: [[1, 2]]",
    )
    problems = _problems(tmp_path, "  module:\n    weights: {mask: keep}", text)
    assert problems == [
        "tiny.yaml:9:15: function.module.weights.mask: expected a float parameter as a weight, found 'mask' "
        "(a mask or an integer)"
    ]


def test_duplicate_module_names_are_refused(tmp_path):
    """Two contract parameters under one module name: located at the second."""
    text = ADDITIVE.replace(
        "weights: {W_q: q_proj.weight, W_k: k_proj.weight, v: v}", "weights: {W_q: proj, W_k: proj, v: v}"
    )
    assert _problems(tmp_path, "", text) == [
        "tiny.yaml:10:31: function.module.weights.W_k: expected each module parameter name once, found 'proj' "
        "again (it already holds W_q)"
    ]


def test_the_published_schema_describes_module():
    """Both copies of the published schema (specs/, bundled_specs/) have function.module with its three fields."""
    for schema in (ROOT / "specs/spec-v1.schema.json", ROOT / "attnscore/bundled_specs/spec-v1.schema.json"):
        module = json.loads(schema.read_text(encoding="utf-8"))["properties"]["function"]["properties"]["module"]
        assert set(module["properties"]) == {"init", "weights", "forward"}
        assert module["additionalProperties"] is False
