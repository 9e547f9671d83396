"""The diagnosis's own inputs: drawn once per configuration of a spec; the implementation's outcomes
on them made once per runner (:func:`attnscore.check.diagnosis.outcomes_on`)."""

from __future__ import annotations

import numpy as np
import pytest

from attnscore.boundary.outputs import Outcome
from attnscore.check import diagnosis_inputs
from attnscore.check.cases import build_cases, spec_call
from attnscore.check.diagnosis import outcomes_on
from attnscore.check.diagnosis_inputs import backward_calls, diagnosis_calls, sized_call, sized_kind
from attnscore.check.judge import for_case
from attnscore.check.runner import InProcessRunner
from attnscore.spec.load import load_spec
from attnscore.spec.reconfigure import reconfigured


@pytest.fixture(scope="module")
def causal_pair():
    """sdpa_causal.yaml as loaded (is_causal true) and reconfigured to is_causal false: one id and
    version, two contracts."""
    spec = load_spec("specs/sdpa_causal.yaml")
    return spec, reconfigured(spec, {"is_causal": False}).spec


class _Counting(InProcessRunner):
    """The reference, counting the calls made."""

    def __init__(self, spec):
        super().__init__(spec.contract.reference)
        self.made = 0

    def call(self, args, dtype, layouts=None, upstream=None) -> Outcome:
        self.made += 1
        return super().call(args, dtype, layouts, upstream)


@pytest.mark.parametrize("which", ["confirm", "probe"])
def test_two_configurations_of_one_spec_get_their_own_goldens(causal_pair, which):
    """Both configurations share the spec's id and version; each one's calls carry its own golden
    values (a reconfigured spec once got the first configuration's goldens)."""
    causal, plain = causal_pair
    first = diagnosis_calls(causal, "float32", which)
    second = diagnosis_calls(plain, "float32", which)
    for spec, calls in ((causal, first), (plain, second)):
        for call in calls:
            fresh = spec_call(spec, dict(call.args), "float32", spec.tolerance)
            np.testing.assert_array_equal(call.golden, fresh.golden)
    if which == "confirm":  # the same inputs (one seed); the causal mask changes every output
        for a, b in zip(first, second, strict=True):
            assert all(np.array_equal(a.args[n], b.args[n]) for n in a.args)
            assert not np.allclose(a.golden, b.golden, equal_nan=True)


def test_every_case_of_a_spec_shares_one_draw(causal_pair):
    """A case judged with other corners set aside (:func:`for_case`) reads the same calls: the
    draw is made once per spec and dtype, not once per case."""
    spec = causal_pair[0]
    cases = build_cases(spec, "float32")
    drawn = diagnosis_calls(spec, "float32", "confirm")
    assert all(diagnosis_calls(for_case(spec, c), "float32", "confirm") is drawn for c in cases)
    assert sized_call(spec, "float32", {"n_q": 7}) is sized_call(for_case(spec, cases[0]), "float32", {"n_q": 7})


def test_a_runner_makes_each_configurations_calls_once(causal_pair):
    causal, plain = causal_pair
    runner = _Counting(causal)
    confirm = len(diagnosis_calls(causal, "float32", "confirm"))
    for _ in range(2):
        outcomes_on(causal, runner, "float32", "confirm", diagnosis_calls(causal, "float32", "confirm"))
    assert runner.made == confirm
    outcomes_on(plain, runner, "float32", "confirm", diagnosis_calls(plain, "float32", "confirm"))
    assert runner.made == 2 * confirm  # other goldens, other outcomes
    call = sized_call(causal, "float32", {"n_q": 7})
    first = outcomes_on(causal, runner, "float32", sized_kind({"n_q": 7}), [call])[0][1]
    assert outcomes_on(causal, runner, "float32", sized_kind({"n_q": 7}), [call])[0][1] is first
    assert runner.made == 2 * confirm + 1
    backward = backward_calls(load_spec("specs/flash_attention_2.yaml"), "float32")
    assert all(c.upstream is not None for c in backward)


def test_backward_calls_follow_the_configuration():
    spec = load_spec("specs/flash_attention_2.yaml")
    other = reconfigured(spec, {"is_causal": True}).spec
    one, two = backward_calls(spec, "float32"), backward_calls(other, "float32")
    assert one is not two
    assert any(not np.allclose(a.golden, b.golden) for a, b in zip(one, two, strict=True))


def test_the_draws_kept_are_bounded(causal_pair, monkeypatch):
    """Only the last ``_KEPT`` draws stay; an older one is drawn again (equal) when asked."""
    causal = causal_pair[0]
    monkeypatch.setattr(diagnosis_inputs, "_KEPT", 2)
    monkeypatch.setattr(diagnosis_inputs, "_INPUTS", type(diagnosis_inputs._INPUTS)())
    first = diagnosis_calls(causal, "float32", "confirm")
    diagnosis_calls(causal, "float32", "probe")
    diagnosis_calls(causal, "float64", "confirm")
    assert len(diagnosis_inputs._INPUTS) == 2
    again = diagnosis_calls(causal, "float32", "confirm")
    assert again is not first
    assert all(np.array_equal(a.golden, b.golden) for a, b in zip(first, again, strict=True))
