"""A module's constructor argument taken from a whole-number input (``{value: num_heads}``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscore.boundary.modules import ModuleConfig, SizeOf, ValueOf, module_call


class _Heads(torch.nn.Module):
    """Splits the last dim into ``num_heads`` heads and sums each head: forward takes x only."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.proj = torch.nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x)
        return y.reshape(*y.shape[:-1], self.num_heads, -1).sum(-1)


CONFIG = ModuleConfig(
    (("d_model", SizeOf("x", -1, "d_model")), ("num_heads", ValueOf("num_heads"))),
    (("W", "proj.weight"),),
    ("x",),
)


def test_the_constructor_takes_the_inputs_value_and_forward_does_not() -> None:
    f = module_call(_Heads, CONFIG, ["x", "W", "num_heads"])
    x = torch.arange(4.0).reshape(1, 4)
    out = f(x, torch.eye(4), 2)
    assert out.tolist() == [[1.0, 5.0]]  # heads [0, 1] and [2, 3]
    assert f(x, torch.eye(4), 4).tolist() == [[0.0, 1.0, 2.0, 3.0]]  # the next call, another head count
    assert f(x, torch.eye(4), torch.tensor(1, dtype=torch.int32)).tolist() == [[6.0]]


def test_init_inputs_are_the_value_ones() -> None:
    assert CONFIG.init_inputs == frozenset({"num_heads"})
    assert CONFIG.init_kwargs({"x": (3, 4)}, {"num_heads": np.int32(2)}) == {"d_model": 4, "num_heads": 2}


def test_a_value_round_trips_through_the_wire() -> None:
    assert CONFIG.to_json()["init"]["num_heads"] == {"value": "num_heads"}
    assert ModuleConfig.from_json(CONFIG.to_json()) == ModuleConfig(
        (("d_model", SizeOf("x", -1)), ("num_heads", ValueOf("num_heads"))), (("W", "proj.weight"),), ("x",)
    )


@pytest.mark.parametrize(
    ("value", "found"),
    [(None, "no such input"), (2.5, "float"), (torch.tensor(2.0), "Tensor"), (True, "bool")],
)
def test_a_value_that_is_no_whole_number_is_a_clear_error(value: object, found: str) -> None:
    values = {} if value is None else {"num_heads": value}
    with pytest.raises(ValueError, match=f"expected input num_heads as a whole number for num_heads, found {found}"):
        CONFIG.init_kwargs({"x": (3, 4)}, values)


@pytest.mark.parametrize("raw", [{"value": 3}, {"value": "not an identifier"}, {"value": "a", "size": ["x", -1]}])
def test_a_malformed_value_from_the_wire_is_refused(raw: object) -> None:
    with pytest.raises(ValueError, match="expected"):
        ModuleConfig.from_json({"init": {"num_heads": raw}, "weights": {}, "forward": []})
