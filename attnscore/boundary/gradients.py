"""The backward pass of one call: inputs that require grad, ``backward(dO)``, gradients as plain data.

Shared by the in-process runner (:mod:`attnscore.check.runner`) and the sandboxed worker
(:mod:`attnscore.boundary.worker`). The float inputs of a call are made leaves that require grad
(bool masks never: the gradient with respect to a mask is never asked for), the function is
called, and ``torch.autograd.backward(output, dO)`` runs with the case's upstream gradient ``dO``
(the output's shape, in the tested dtype). What comes back is plain data, never an autograd
object: the output (:class:`attnscore.boundary.outputs.Received`) and each input's ``.grad`` copied
into a fresh numpy array (:class:`WithGradients`); an input whose ``.grad`` stayed ``None`` is
listed in ``missing``.

A submission that cannot be differentiated gets one clear failure (:class:`NoBackward`): an output
that is not a tensor, or one detached from the graph (``.detach()``, ``torch.tensor(out)``, a
round trip through numpy), an output of the wrong shape for ``dO``, a ``.grad`` already set by the
call itself, or a backward that raises.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnscore.boundary.outputs import BadReturn, Received, to_received

__all__ = ["WithGradients", "NoBackward", "backward_call", "differentiable", "as_callable"]


@dataclass(frozen=True)
class WithGradients(Received):
    """A returned value and the gradients its backward pass gave each differentiable input.

    Attributes:
        gradients: ``{input name: gradient}``, plain C-contiguous numpy arrays of the gradient's
            own dtype (``bfloat16`` travels as float32 with ``gradient_dtypes`` saying so).
        gradient_dtypes: ``{input name: dtype name}`` of each gradient as the submission made it.
        missing: the differentiable inputs whose ``.grad`` stayed None after backward.
    """

    gradients: Mapping[str, np.ndarray] = field(default_factory=dict)
    gradient_dtypes: Mapping[str, str] = field(default_factory=dict)
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class NoBackward:
    """The call's backward pass could not be run; ``message`` says why, ``exception`` names a raised type."""

    message: str
    exception: str = ""


def as_callable(obj: object) -> Any:
    """What a call of ``obj`` means: ``obj.apply`` for a ``torch.autograd.Function`` subclass (a
    FlashAttention-style assignment hands in the class, and the grader calls ``.apply(...)``), else ``obj``.

    >>> import torch
    >>> class Double(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         return 2 * x
    ...     @staticmethod
    ...     def backward(ctx, d):
    ...         return 2 * d
    >>> as_callable(Double) == Double.apply, as_callable(len) is len
    (True, True)
    """
    import torch

    if isinstance(obj, type) and issubclass(obj, torch.autograd.Function):
        return obj.apply
    return obj


def differentiable(names: list[str], tensors: list[object]) -> list[str]:
    """The inputs a gradient is asked for: the floating-point tensors (bool masks never)."""
    import torch

    return [n for n, t in zip(names, tensors, strict=True) if isinstance(t, torch.Tensor) and t.dtype.is_floating_point]


def _plain(grad: object) -> tuple[np.ndarray, str] | None:
    received = to_received(grad)
    if isinstance(received, BadReturn):
        return None
    return received.array, received.dtype


def backward_call(
    function: Callable[..., object],
    names: list[str],
    tensors: list[object],
    upstream: object,
    call: Callable[[Callable[..., object], list[object]], object] | None = None,
) -> tuple[object, WithGradients | NoBackward | BadReturn]:
    """Call ``function(*tensors)`` with the float inputs requiring grad and run its backward with ``upstream``.

    Args:
        function: the implementation.
        names: the inputs' names, in order.
        tensors: fresh input tensors (leaves; they are set to require grad here).
        upstream: ``dO``, a tensor of the output's shape and the inputs' dtype and device.
        call: how to call the function (``call(function, tensors) -> value``); default a plain call.
            The worker passes its inspector here; whatever it raises is raised.

    Returns:
        ``(value, result)``: the returned object (for the caller's own inspection) and
        :class:`WithGradients`, :class:`NoBackward` or the output's :class:`BadReturn`.

    Example:
        >>> import torch
        >>> q, k = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
        >>> _, got = backward_call(lambda q, k: q @ k, ["q", "k"], [q, k], torch.tensor(2.0))
        >>> got.array.tolist(), got.gradients["q"].tolist(), got.gradients["k"].tolist()
        (11.0, [6.0, 8.0], [2.0, 4.0])
    """
    import torch

    wanted = differentiable(names, tensors)
    leaves = {n: t for n, t in zip(names, tensors, strict=True) if n in wanted and isinstance(t, torch.Tensor)}
    for t in leaves.values():
        torch.Tensor.requires_grad_(t, True)
    with torch.enable_grad():
        value = call(function, tensors) if call is not None else function(*tensors)
    received = to_received(value)
    if isinstance(received, BadReturn):
        return value, received
    if not isinstance(value, torch.Tensor):
        return value, NoBackward(
            f"returned a {received.kind}, not a tensor: a backward pass needs the output as a torch tensor "
            "computed from the inputs (keep the computation in torch)"
        )
    base = torch._C.TensorBase  # the base class's own descriptors: a subclass cannot answer for them
    if not base.__dict__["requires_grad"].__get__(value):
        return value, NoBackward(
            "the output does not require grad: it is detached from the inputs (.detach(), torch.tensor(...) "
            "of a result, .numpy() or .item() on the way), so no gradient can reach them; compute the output "
            "with torch operations on the inputs"
        )
    early = [n for n, t in leaves.items() if t.grad is not None]
    if early:
        return value, NoBackward(
            f"the call itself set .grad of {', '.join(early)}; leave .grad to autograd (return the output, "
            "do not write gradients into the inputs)"
        )
    up = upstream if isinstance(upstream, torch.Tensor) else torch.as_tensor(upstream)
    if tuple(torch.Tensor.size(value)) != tuple(up.shape):
        return value, NoBackward(
            f"the output has shape {tuple(torch.Tensor.size(value))}, but the upstream gradient dO has shape "
            f"{tuple(up.shape)} (the expected output shape): backward cannot run"
        )
    try:
        torch.autograd.backward(value, grad_tensors=up.to(dtype=base.__dict__["dtype"].__get__(value)))
    except Exception as exc:  # noqa: BLE001 - the submission's backward raising is its verdict
        from attnscore.boundary.calls import describe_exception, type_name

        return value, NoBackward(f"the backward pass {describe_exception(exc)}", type_name(exc))
    grads: dict[str, np.ndarray] = {}
    dtypes: dict[str, str] = {}
    missing: list[str] = []
    for n, t in leaves.items():
        g = t.grad
        plain = None if g is None else _plain(g)
        if plain is None:
            missing.append(n)
            continue
        grads[n], dtypes[n] = plain
    return value, WithGradients(
        received.kind, received.dtype, received.device, received.array, grads, dtypes, tuple(missing)
    )
