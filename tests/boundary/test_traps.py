"""The worker's traps for a spec's ruled calls (attnscore.boundary.traps): every holder of the
function replaced, calls noted with their phase, nothing noted outside one, originals restored."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnscore.boundary.traps import Traps, resolve

SDPA = "torch.nn.functional.scaled_dot_product_attention"


def test_a_trap_notes_calls_by_phase_and_answers_as_the_original():
    """SDPA through torch.nn.functional and through torch._C._nn (the same function) is noted once per
    phase it came in; a call outside any phase is not; the values are the original's."""
    original = F.scaled_dot_product_attention
    q = torch.ones(1, 2, 3)
    traps = Traps((SDPA, "torch.autograd.grad", "no.such.module_name"))
    try:
        assert traps.install() == [SDPA, "torch.autograd.grad"]
        assert F.scaled_dot_product_attention is not original
        assert torch._C._nn.scaled_dot_product_attention is F.scaled_dot_product_attention
        assert F.scaled_dot_product_attention.__name__ == original.__name__
        F.scaled_dot_product_attention(q, q, q)  # no phase: the worker's own or the import's
        assert traps.report() == []
        out = traps.during("forward", lambda: torch._C._nn.scaled_dot_product_attention(q, q, q))()
        assert torch.equal(out, original(q, q, q))
        traps.during("backward", lambda: F.scaled_dot_product_attention(q, q, q))()
        assert traps.report() == [f"{SDPA}@backward", f"{SDPA}@forward"]
    finally:
        traps.uninstall()
    assert F.scaled_dot_product_attention is original and torch._C._nn.scaled_dot_product_attention is original


def test_the_phase_is_restored_after_a_raise():
    """A function that raises leaves no phase behind: later calls are not noted."""
    traps = Traps(("math.sqrt",))
    import math

    try:
        traps.install()

        def boom() -> None:
            raise ValueError("no")

        try:
            traps.during("forward", boom)()
        except ValueError:
            pass
        math.sqrt(4.0)
        assert traps.report() == []
    finally:
        traps.uninstall()


def test_without_names_nothing_is_wrapped():
    """No rules: the function is handed back as it is and nothing is installed."""

    def f() -> int:
        return 1

    traps = Traps(())
    assert traps.during("forward", f) is f
    assert traps.install() == []


def test_resolve_names_modules_then_attributes():
    """A class attribute, a module function, and names that name nothing."""
    owner, attribute, found = resolve("torch.Tensor.backward")
    assert owner is torch.Tensor and attribute == "backward" and found is torch.Tensor.backward
    assert resolve("torch.autograd.grad")[2] is torch.autograd.grad
    assert resolve("torch.no_such_thing") is None
    assert resolve("nothing_like_this.at_all") is None
