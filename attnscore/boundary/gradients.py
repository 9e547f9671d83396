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

__all__ = [
    "WithGradients",
    "NoBackward",
    "backward_call",
    "differentiable",
    "NOT_DIFFERENTIATED",
    "as_callable",
    "LOGSUMEXP_PLACES",
    "resolve_factory",
    "first_output",
    "find_logsumexp",
    "saved_tensors_shapes",
]

NOT_DIFFERENTIATED = frozenset({"mask", "attn_mask", "alibi_slopes"})
"""Float parameters whose gradient is never asked for, whatever their dtype: a mask (bool, or a float
mask added to the scores, whose gradient would be ``dS``) and the ALiBi slopes (fixed per head). They
are passed as plain tensors (no ``requires_grad``), so a submission may read them with ``.numpy()``."""

LOGSUMEXP_PLACES = ("saved_tensors", "returned")
"""Where a submission's logsumexp ``L`` is read (a spec's ``function.logsumexp.in``): among the
tensors its ``torch.autograd.Function`` saved (``ctx.save_for_backward``, read as the output's
``grad_fn.saved_tensors``), or as the second item of a returned ``(O, L)`` tuple."""


@dataclass(frozen=True)
class WithGradients(Received):
    """A returned value and the gradients its backward pass gave each differentiable input.

    Attributes:
        gradients: ``{input name: gradient}``, plain C-contiguous numpy arrays of the gradient's
            own dtype (``bfloat16`` travels as float32 with ``gradient_dtypes`` saying so).
        gradient_dtypes: ``{input name: dtype name}`` of each gradient as the submission made it.
        missing: the differentiable inputs whose ``.grad`` stayed None after backward.
        logsumexp: the logsumexp ``L`` ``(..., n_q)`` the forward kept (float64 copy), when the
            call asked for it (:func:`find_logsumexp`) and it was found; else None.
        logsumexp_problem: why ``L`` was not found (what was expected, what was found), or "".
    """

    gradients: Mapping[str, np.ndarray] = field(default_factory=dict)
    gradient_dtypes: Mapping[str, str] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    logsumexp: np.ndarray | None = None
    logsumexp_problem: str = ""


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


def resolve_factory(obj: object) -> Any:
    """The ``torch.autograd.Function`` subclass a factory returns (a course handout's
    ``get_flashattention_autograd_function_pytorch()``): ``obj()`` called with no arguments.

    Raises:
        TypeError: ``obj`` is not callable, or what it returns is not a ``torch.autograd.Function``
            subclass (the message says what was found); whatever ``obj()`` raises is raised.

    >>> import torch
    >>> class Identity(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         return x.clone()
    >>> resolve_factory(lambda: Identity) is Identity
    True
    """
    import torch

    if not callable(obj):
        raise TypeError(f"expected a function returning a torch.autograd.Function subclass, found {type(obj).__name__}")
    made = obj()
    if not (isinstance(made, type) and issubclass(made, torch.autograd.Function)):
        what = f"the class {made.__name__}" if isinstance(made, type) else f"a {type(made).__name__}"
        raise TypeError(
            f"expected the function to return a torch.autograd.Function subclass (the class itself, not an "
            f"instance or its .apply), found {what}"
        )
    return made


def first_output(value: object, place: str | None) -> tuple[object, object]:
    """``(O, L)`` of a call's returned value: for ``place == "returned"`` a tuple or list ``(O, L)``
    is split (anything else is kept as ``O``, with ``L`` None); otherwise ``(value, None)``."""
    if place == "returned" and isinstance(value, tuple | list) and len(value) == 2:
        return value[0], value[1]
    return value, None


def find_logsumexp(
    value: object, extra: object, place: str, index: int | None, rows: tuple[int, ...]
) -> tuple[np.ndarray | None, str]:
    """The logsumexp ``L`` of shape ``rows`` (``(..., n_q)``) a call kept, as a float64 array, or why not.

    Args:
        value: the returned output ``O`` (a tensor whose ``grad_fn`` is the Function's node).
        extra: the second item of a returned ``(O, L)`` tuple (:func:`first_output`), or None.
        place: ``"saved_tensors"`` (the output's ``grad_fn.saved_tensors``: the tensors of
            ``ctx.save_for_backward``) or ``"returned"`` (``extra``).
        index: for ``saved_tensors``, the position of ``L`` among them; None means the one saved
            tensor of shape ``rows`` (CS336's rule: exactly one may have it).
        rows: the expected shape of ``L``, the output's shape without its last axis.

    Returns:
        ``(L, "")`` or ``(None, problem)``, the problem saying what was expected and what was found.
    """
    import torch

    want = "(" + ", ".join(str(n) for n in rows) + ("," if len(rows) == 1 else "") + ")"
    if place == "returned":
        if extra is None:
            return None, (
                f"expected the forward to return a tuple (O, L) with the logsumexp L of shape {want}, "
                f"found a single {type(value).__name__}"
            )
        if not isinstance(extra, torch.Tensor):
            return (
                None,
                f"expected L, the second item returned, as a tensor of shape {want}, found a {type(extra).__name__}",
            )
        found = extra
    else:
        grad_fn = torch._C.TensorBase.__dict__["grad_fn"]  # the base's descriptor: a subclass cannot answer
        node = grad_fn.__get__(value) if isinstance(value, torch.Tensor) else None
        if node is None:
            return None, (
                f"expected the output of a torch.autograd.Function whose forward saves the logsumexp L of "
                f"shape {want} with ctx.save_for_backward, found an output with no autograd graph"
            )
        try:
            saved = tuple(node.saved_tensors)
        except AttributeError:
            return None, (
                f"expected the output of a torch.autograd.Function whose forward saves the logsumexp L of shape "
                f"{want} with ctx.save_for_backward, found an output computed by {type(node).__name__} (return the "
                "Function's output itself)"
            )
        except RuntimeError as exc:
            return None, (
                f"expected the logsumexp L of shape {want} among the tensors the forward saved "
                f"(ctx.save_for_backward), found they could not be read ({str(exc)[:120]})"
            )
        shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in saved]
        listed = saved_tensors_shapes(shapes)
        if index is not None:
            if not 0 <= index < len(saved) or shapes[index] != tuple(rows):
                return None, (
                    f"expected the logsumexp L of shape {want} as saved tensor {index} (ctx.save_for_backward), "
                    f"found {listed}"
                )
            found = saved[index]
        else:
            at = [i for i, s in enumerate(shapes) if s == tuple(rows)]
            if len(at) != 1:
                where = ""
                if len(at) > 1:
                    from attnscore.boundary.untrusted import shown_list

                    where = f" (saved tensors {shown_list([str(i) for i in at], most=8)} have that shape)"
                return None, (
                    f"expected exactly one saved tensor of shape {want}, the logsumexp L "
                    f"(ctx.save_for_backward), found {len(at)} among {listed}{where}"
                )
            found = saved[at[0]]
    if tuple(found.shape) != tuple(rows):
        return None, f"expected L of shape {want}, found shape {tuple(found.shape)}"
    if not found.dtype.is_floating_point:
        return None, f"expected L as floating-point numbers, found dtype {str(found.dtype).replace('torch.', '')}"
    return np.array(torch.Tensor.detach(found).to("cpu", torch.float64).numpy(), order="C"), ""


def saved_tensors_shapes(shapes: list[tuple[int, ...] | None]) -> str:
    """How the shapes of a Function's saved tensors read in a message, bounded however many were
    saved: each shape in order while there are at most 12 (``the saved tensors' shapes: (2, 3, 4),
    None``), else how many there are and each distinct shape with its count, at most 8 of them
    (``the 305 saved tensors' shapes: (2, 3) ×301, (2, 3, 4) ×2, (2, 5, 4) ×2``).

    >>> saved_tensors_shapes([(2, 3), None])
    "the saved tensors' shapes: (2, 3), None"
    >>> saved_tensors_shapes([(2,)] * 300 + [(2, 4)] * 2)
    "the 302 saved tensors' shapes: (2,) ×300, (2, 4) ×2"
    """
    from attnscore.boundary.untrusted import shown_list

    def text(shape: tuple[int, ...] | None) -> str:
        if shape is None:
            return "None"
        return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"

    if not shapes:
        return "no saved tensors"
    if len(shapes) <= 12:
        return "the saved tensors' shapes: " + ", ".join(text(s) for s in shapes)
    counts: dict[tuple[int, ...] | None, int] = {}
    for shape in shapes:
        counts[shape] = counts.get(shape, 0) + 1
    grouped = [f"{text(shape)} ×{n}" for shape, n in counts.items()]
    return f"the {len(shapes)} saved tensors' shapes: {shown_list(grouped, most=8)}"


def differentiable(names: list[str], tensors: list[object]) -> list[str]:
    """The inputs a gradient is asked for: the floating-point tensors, but never a mask (bool or
    float) or the ALiBi slopes (:data:`NOT_DIFFERENTIATED`, by the contract's parameter name)."""
    import torch

    return [
        n
        for n, t in zip(names, tensors, strict=True)
        if isinstance(t, torch.Tensor) and t.dtype.is_floating_point and n not in NOT_DIFFERENTIATED
    ]


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
    logsumexp: tuple[str, int | None] | None = None,
    *,
    forward_done: Callable[[], object] | None = None,
    settled: Callable[[], object] | None = None,
    run_backward: Callable[..., object] | None = None,
) -> tuple[object, WithGradients | NoBackward | BadReturn]:
    """Call ``function(*tensors)`` with the float inputs requiring grad and run its backward with ``upstream``.

    Args:
        function: the implementation.
        names: the inputs' names, in order.
        tensors: fresh input tensors (leaves; they are set to require grad here).
        upstream: ``dO``, a tensor of the output's shape and the inputs' dtype and device.
        call: how to call the function (``call(function, tensors) -> value``); default a plain call.
            The worker passes its inspector here; whatever it raises is raised.
        logsumexp: ``(place, index)`` when the logsumexp ``L`` is under test (:func:`find_logsumexp`):
            a ``"returned"`` ``(O, L)`` tuple is split first, backward runs on ``O`` only.
        forward_done: called once the forward has returned, before anything else runs (the worker
            lets the grader read the inputs there; the in-process runner inspects them).
        settled: called last, once the backward has run (or could not run) and the output's and
            the gradients' bytes have been read (the worker lets the grader read the inputs and
            ``dO`` there and write its canaries into them, then reads the output again). Not called
            when the call gives no value (:class:`NoBackward`, :class:`~attnscore.boundary.outputs.BadReturn`).
        run_backward: ``torch.autograd.backward`` as bound before a submission could replace it
            (the worker's; default the module's own).

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
    if forward_done is not None:
        forward_done()
    value, extra = first_output(value, logsumexp[0] if logsumexp else None)
    checked = to_received(value)  # what came back, validated; its bytes are read again once settled
    if isinstance(checked, BadReturn):
        return value, checked
    if not isinstance(value, torch.Tensor):
        return value, NoBackward(
            f"returned a {checked.kind}, not a tensor: a backward pass needs the output as a torch tensor "
            "computed from the inputs (keep the computation in torch)"
        )
    base = torch._C.TensorBase  # the base class's own descriptors: a subclass cannot answer for them
    lse, lse_problem = (None, "")
    problem: NoBackward | None = None
    ran = False
    if not base.__dict__["dtype"].__get__(value).is_floating_point:
        pass  # an integer output has no gradient at all: it is judged as it is (the wrong-dtype verdict)
    elif not base.__dict__["requires_grad"].__get__(value):
        return value, NoBackward(
            "the output does not require grad: it is detached from the inputs (.detach(), torch.tensor(...) "
            "of a result, .numpy() or .item() on the way), so no gradient can reach them; compute the output "
            "with torch operations on the inputs"
        )
    else:
        early = [n for n, t in leaves.items() if t.grad is not None]
        if early:
            return value, NoBackward(
                f"the call itself set .grad of {', '.join(early)}; leave .grad to autograd (return the output, "
                "do not write gradients into the inputs)"
            )
        if logsumexp is not None:  # before backward: a Function's saved tensors are freed by it
            lse, lse_problem = find_logsumexp(
                value, extra, logsumexp[0], logsumexp[1], tuple(torch.Tensor.size(value))[:-1]
            )
        up = upstream if isinstance(upstream, torch.Tensor) else torch.as_tensor(upstream)
        # dO has the expected output's shape: when the output's differs, backward cannot run and the
        # output itself is judged (a wrong shape is that verdict, with both shapes), its gradients missing
        if tuple(torch.Tensor.size(value)) == tuple(up.shape):
            dtype = base.__dict__["dtype"].__get__(value)
            given = up if up.dtype == dtype else up.to(dtype=dtype)  # dO itself when the dtypes agree
            try:
                (run_backward or torch.autograd.backward)(value, grad_tensors=given)
            except Exception as exc:  # noqa: BLE001 - the submission's backward raising is its verdict
                from attnscore.boundary.calls import describe_exception, type_name

                problem = NoBackward(f"the backward pass {describe_exception(exc)}", type_name(exc))
            ran = True
    if problem is not None:
        return value, problem
    received = to_received(value)  # the output's bytes as they are now, after the backward
    if isinstance(received, BadReturn):
        return value, received
    grads: dict[str, np.ndarray] = {}
    dtypes: dict[str, str] = {}
    missing: list[str] = []
    for n, t in leaves.items():
        g = t.grad if ran else None
        plain = None if g is None else _plain(g)
        if plain is None:
            missing.append(n)
            continue
        grads[n], dtypes[n] = plain
    if settled is not None:
        settled()
    return value, WithGradients(
        received.kind, received.dtype, received.device, received.array, grads, dtypes, tuple(missing), lse, lse_problem
    )
