"""A module handed in, built and called per call (attnscore.boundary.modules): its config on the wire,
the parameter check's one message, and the call itself (lazy modules, buffers, gradients, failures)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnscore.boundary.failure_texts import describe_failure, failure_verdict, raised_name
from attnscore.boundary.modules import (
    ModuleConfig,
    ModuleFailure,
    SizeOf,
    class_problem,
    module_call,
    parameter_problem,
)
from attnscore.boundary.verdict import Verdict
from attnscore.boundary.wire import CallRequest, decode_call, encode_message

CONFIG = ModuleConfig(
    (("d_q", SizeOf("W", -2, "d_q")), ("d_k", SizeOf("W", -1, "d_k")), ("bias", False)),
    (("W", "weight"),),
    ("Q", "K"),
)
NAMES = ["Q", "K", "W"]
Q = torch.tensor([[1.0, 0.0, 2.0]])
K = torch.tensor([[1.0, 2.0], [-1.0, 0.0]])
W = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
EXPECTED = [[7.0, -3.0]]  # q W = [3, 2]; [3, 2]·[1, 2] = 7, [3, 2]·[-1, 0] = -3


class BilinearScore(nn.Module):
    def __init__(self, d_q, d_k, bias=False):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_q, d_k))

    def forward(self, Q, K):
        return Q @ self.weight @ K.transpose(-2, -1)


def _call(cls: object, *args: torch.Tensor, config: ModuleConfig = CONFIG) -> object:
    return module_call(cls, config, NAMES, getattr(cls, "__name__", "BilinearScore"))(*args)


def _failure(cls: object, config: ModuleConfig = CONFIG) -> ModuleFailure:
    with pytest.raises(ModuleFailure) as caught:
        _call(cls, Q, K, W, config=config)
    return caught.value


def test_correct_module_uses_the_drawn_weight():
    """The module's own (uninitialised) weight is replaced by the call's W: Q W Kᵀ with W's values."""
    assert _call(BilinearScore, Q, K, W).tolist() == EXPECTED


def test_constructor_gets_the_sizes_of_the_call():
    """init's {size: SYMBOL} is the call's size: (d_q, d_k) = (3, 2) here, (2, 4) with batch dims on Q and K."""
    seen = []

    class Recording(BilinearScore):
        def __init__(self, d_q, d_k, bias=False):
            seen.append((d_q, d_k, bias))
            super().__init__(d_q, d_k, bias)

    _call(Recording, Q, K, W)
    _call(Recording, torch.ones(5, 3, 2), torch.ones(5, 7, 4), torch.ones(2, 4))
    assert seen == [(3, 2, False), (2, 4, False)]


def test_gradients_reach_the_weight_as_any_input():
    """Backward through functional_call: W.grad = Qᵀ (dO K) = [[0, 2], [0, 0], [0, 4]] for dO = [1, 1]."""
    q, k, w = (t.clone().requires_grad_(True) for t in (Q, K, W))
    _call(BilinearScore, q, k, w).backward(torch.ones(1, 2))
    assert w.grad.tolist() == [[0.0, 2.0], [0.0, 0.0], [0.0, 4.0]]
    assert q.grad.tolist() == [[0.0, 2.0, 2.0]] and k.grad.tolist() == [[3.0, 2.0], [3.0, 2.0]]


def test_weight_data_gives_the_weight_no_gradient():
    """A forward that reads self.weight.data computes the right value but leaves W.grad None."""

    class Detached(BilinearScore):
        def forward(self, Q, K):
            return Q @ self.weight.data @ K.transpose(-2, -1)

    w = W.clone().requires_grad_(True)
    out = _call(Detached, Q, K, w)
    assert out.tolist() == EXPECTED and not out.requires_grad and w.grad is None


def test_lazy_module_creates_its_weight_then_gets_the_drawn_one():
    """nn.LazyLinear-style: the weight's shape comes from a first forward on copies; then W is used."""

    class Lazy(nn.modules.lazy.LazyModuleMixin, nn.Module):
        def __init__(self, d_q=None, d_k=None, bias=False):
            super().__init__()
            self.weight = nn.UninitializedParameter()

        def initialize_parameters(self, Q, K):
            self.weight.materialize((Q.shape[-1], K.shape[-1]))

        def forward(self, Q, K):
            return Q @ self.weight @ K.transpose(-2, -1)

    assert _call(Lazy, Q, K, W).tolist() == EXPECTED


def test_lazy_linear_is_a_module_handed_in_too():
    """torch's own nn.LazyLinear (weight (out, in) drawn by the grader): x Wᵀ with W's values."""
    config = ModuleConfig((("out_features", SizeOf("W", -2)), ("bias", False)), (("W", "weight"),))
    x, w = torch.tensor([[1.0, 2.0]]), torch.tensor([[1.0, 1.0], [0.0, 3.0], [2.0, 0.0]])
    out = module_call(nn.LazyLinear, config, ["x", "W"])(x, w)
    assert out.tolist() == [[3.0, 6.0, 2.0]]


def test_lazy_parameter_never_created_is_wrong_parameters():
    """An uninitialised parameter that no lazy hook creates: wrong parameters after the first forward, named."""

    class NeverMaterialised(nn.Module):
        def __init__(self, **kwargs):
            super().__init__()
            self.weight = nn.UninitializedParameter()

        def forward(self, Q, K):
            return Q.sum(-1, keepdim=True) * K.sum(-1)

    failure = _failure(NeverMaterialised)
    assert failure.verdict is Verdict.WRONG_PARAMETERS
    assert failure.message == (
        "NeverMaterialised(d_q=3, d_k=2, bias=False) still has uninitialized lazy parameters after a forward "
        "call: weight"
    )


def test_lazy_hook_that_creates_nothing_is_torchs_exception():
    """A LazyModuleMixin whose initialize_parameters creates nothing: torch's own error, the step named."""

    class Idle(nn.modules.lazy.LazyModuleMixin, nn.Module):
        def __init__(self, **kwargs):
            super().__init__()
            self.weight = nn.UninitializedParameter()

        def initialize_parameters(self, Q, K):
            return None

        def forward(self, Q, K):
            return Q @ K.transpose(-2, -1)

    failure = _failure(Idle)
    assert failure.verdict is Verdict.EXCEPTION and failure.exception == "RuntimeError"
    assert failure.message == (
        "Idle(d_q=3, d_k=2, bias=False)'s first forward call, creating its lazy parameters raised RuntimeError: "
        "module Idle has not been fully initialized"
    )


def test_buffers_stay_the_modules_own_and_follow_the_dtype():
    """A registered buffer is used as the module made it, cast to the inputs' dtype like the parameters."""

    class Scaled(BilinearScore):
        def __init__(self, d_q, d_k, bias=False):
            super().__init__(d_q, d_k, bias)
            self.register_buffer("two", torch.tensor(2.0))

        def forward(self, Q, K):
            return self.two * (Q @ self.weight @ K.transpose(-2, -1))

    out = _call(Scaled, Q.double(), K.double(), W.double())
    assert out.dtype == torch.float64 and out.tolist() == [[14.0, -6.0]]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            "self.weight = nn.Parameter(torch.empty(d_k, d_q))",
            "expected the parameters weight (3, 2) (the spec's W), found weight (2, 3): weight has shape (2, 3), "
            "not (3, 2)",
            id="weight transposed",
        ),
        pytest.param(
            "self.weight = nn.Parameter(torch.empty(d_q, d_k)); self.bias = nn.Parameter(torch.zeros(d_k))",
            "expected the parameters weight (3, 2) (the spec's W), found weight (3, 2), bias (2,): bias is not one "
            "of the spec's (remove it, or make it a buffer)",
            id="extra bias",
        ),
        pytest.param(
            "self.W = nn.Parameter(torch.empty(d_q, d_k))",
            "expected the parameters weight (3, 2) (the spec's W), found W (3, 2): weight is missing; W is not one "
            "of the spec's: name it weight (the name the spec states)",
            id="misnamed",
        ),
        pytest.param(
            "self.register_buffer('weight', torch.empty(d_q, d_k))",
            "expected the parameters weight (3, 2) (the spec's W), found none: weight is missing (it is a buffer: "
            "register it as an nn.Parameter)",
            id="weight registered as a buffer",
        ),
        pytest.param(
            "self.proj = nn.Linear(d_k, d_q, bias=False)",
            "expected the parameters weight (3, 2) (the spec's W), found proj.weight (3, 2): weight is missing; "
            "proj.weight is not one of the spec's: name it weight (the name the spec states)",
            id="nested name",
        ),
    ],
)
def test_parameters_not_the_specs_are_one_verdict_listing_expected_and_found(body, message):
    """Missing, extra, mis-shaped or misnamed parameters: one wrong_parameters failure, no traceback."""
    namespace: dict[str, object] = {"nn": nn, "torch": torch}
    source = (
        "class Student(nn.Module):\n"
        "    def __init__(self, d_q, d_k, bias=False):\n"
        f"        super().__init__(); {body}\n"
        "    def forward(self, Q, K):\n"
        "        return Q @ K.transpose(-2, -1)\n"
    )
    exec(source, namespace)
    failure = _failure(namespace["Student"])
    assert failure.verdict is Verdict.WRONG_PARAMETERS and failure.exception == ""
    assert failure.message == f"Student(d_q=3, d_k=2, bias=False): {message}"
    assert "Traceback" not in failure.message


def test_many_extra_parameters_are_named_boundedly():
    """A module with 40 extra parameters: the message names at most 12 and says how many more."""
    problem = parameter_problem({"weight": (2,)}, {"weight": (2,), **{f"p{i}": (1,) for i in range(40)}})
    assert problem is not None and len(problem) < 800
    assert "p0 (1,)" in problem and "p39" not in problem and "more" in problem


@pytest.mark.parametrize(
    ("obj", "found"),
    [
        pytest.param(lambda Q, K, W: Q, "a function", id="a function"),
        pytest.param(
            BilinearScore(3, 2),
            "an instance of BilinearScore (the spec builds the module itself: bind the class)",
            id="an instance",
        ),
        pytest.param(
            type("Plain", (), {}),
            "a class that is not a torch.nn.Module subclass (its bases: object)",
            id="a plain class",
        ),
        pytest.param(3, "a int", id="a number"),
    ],
)
def test_not_a_module_class_is_function_missing(obj, found):
    """The named object must be an nn.Module subclass: function missing, saying what it is."""
    failure = _failure(obj, CONFIG)
    assert failure.verdict is Verdict.FUNCTION_MISSING
    name = getattr(obj, "__name__", "BilinearScore")
    assert failure.message.startswith(f"the spec grades a torch.nn.Module subclass named {name!r}, found {found}; ")
    assert class_problem(BilinearScore, "BilinearScore") is None


def test_constructor_raising_is_its_exception_with_the_call_named():
    """The constructor's own exception: an exception verdict, its type kept, the constructor call named."""

    class Strict(BilinearScore):
        def __init__(self, d_q, d_k, bias=False):
            raise ValueError("d_q must equal d_k")

    failure = _failure(Strict)
    assert failure.verdict is Verdict.EXCEPTION and failure.exception == "ValueError"
    assert failure.message == "the constructor Strict(d_q=3, d_k=2, bias=False) raised ValueError: d_q must equal d_k"
    # the worker's words for it: the same verdict, message and exception name
    assert failure_verdict(failure) is Verdict.EXCEPTION and describe_failure(failure) == failure.message
    assert raised_name(failure) == "ValueError"


def test_constructor_exiting_or_running_out_of_memory_is_caught():
    """SystemExit in the constructor is its exception; a MemoryError reads as the memory limit."""

    class Exits(BilinearScore):
        def __init__(self, **kwargs):
            raise SystemExit(0)

    class Greedy(BilinearScore):
        def __init__(self, **kwargs):
            raise MemoryError

    assert _failure(Exits).exception == "SystemExit"
    assert failure_verdict(_failure(Greedy)) is Verdict.MEMORY_LIMIT


def test_constructor_returning_no_module_is_a_bad_return():
    """A __new__ that returns something else: bad return type, naming what came back."""

    class Odd(BilinearScore):
        def __new__(cls, **kwargs):
            return 42

    failure = _failure(Odd)
    assert failure.verdict is Verdict.BAD_RETURN_TYPE
    assert failure.message == "the constructor Odd(d_q=3, d_k=2, bias=False) gave a int, not a module"


def test_forward_raising_is_raised_unchanged():
    """What forward raises reaches the runner as raised (an ordinary exception verdict there)."""

    class Broken(BilinearScore):
        def forward(self, Q, K):
            raise RuntimeError("shapes do not match")

    with pytest.raises(RuntimeError, match="shapes do not match"):
        _call(Broken, Q, K, W)


def test_config_round_trips_through_the_wire():
    """The config travels in a call request as JSON and reads back equal (sizes without their symbol)."""
    request = CallRequest(1, "float32", "cpu", ("Q", "K", "W"), (), module=CONFIG.to_json())
    back = decode_call(encode_message(request))
    assert back.module == CONFIG.to_json()
    assert ModuleConfig.from_json(back.module) == ModuleConfig(
        (("d_q", SizeOf("W", -2)), ("d_k", SizeOf("W", -1)), ("bias", False)), (("W", "weight"),), ("Q", "K")
    )
    assert decode_call(encode_message(CallRequest(1, "float32", "cpu", (), ()))).module is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param([], "expected a module config of init, weights and forward", id="not a mapping"),
        pytest.param({"init": {}, "extra": 1}, "expected a module config of init, weights and forward", id="extra key"),
        pytest.param(
            {"init": {"d": {"size": ["W", 0]}}},
            "expected init d as a value, {size: [input, axis]} or {value: input}",
            id="axis 0",
        ),
        pytest.param({"init": {"d": {"size": ["W", True]}}}, "expected init d as a value, {size:", id="bool axis"),
        pytest.param({"init": {"1x": 2}}, "expected an init keyword as an identifier", id="bad keyword"),
        pytest.param(
            {"weights": {"W": "a..b"}}, "expected a module parameter name such as q_proj.weight", id="bad name"
        ),
        pytest.param({"weights": {"W": 3}}, "expected weights as parameter -> module name", id="name not text"),
        pytest.param({"forward": "Q"}, "expected forward as a list of parameter names", id="forward text"),
    ],
)
def test_config_from_the_wire_is_validated(raw, message):
    """A malformed module config is one ValueError saying what was expected (the worker's decode_call)."""
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("{", r"\{")):
        ModuleConfig.from_json(raw)


def test_init_size_of_a_missing_input_is_a_clear_error():
    """A size asked of an input the call lacks (never from a loaded spec) says which."""
    with pytest.raises(ValueError, match=r"expected input W with an axis -2 for d_q, found no such input"):
        CONFIG.init_kwargs({"Q": (1, 3)})
