"""The public API an instructor's own reference file uses (``function.reference`` in a spec).

A spec may give its own reference function instead of a bundled contract; its file may also
register the course's own properties and known mistakes::

    import torch
    from attnscore import instructor

    def softmax(x, dim):
        e = torch.exp(x - x.amax(dim=dim, keepdim=True))
        return e / e.sum(dim=dim, keepdim=True)

    @instructor.mistake("no_max_subtraction", feedback="subtract the max over dim before exp")
    def softmax_without_max(x, dim):                 # the reference's signature, a wrong answer
        e = torch.exp(x)
        return e / e.sum(dim=dim, keepdim=True)

    @instructor.property("shift_invariant", statement="Adding 3 to every score changes nothing.")
    def shift_invariant(inputs, call):               # drawn inputs, and a way to call the graded function
        x = inputs["x"]
        if not torch.allclose(call(x), call(x + 3.0), atol=1e-4):
            return "softmax(x + 3) differs from softmax(x)"   # a failure message for the student
        return None                                           # the property holds

- :func:`property` registers ``check(inputs, call) -> str | None``: ``inputs`` are the drawn
  arguments (float64 CPU tensors by parameter name); ``call(*args, **kwargs)`` calls the graded
  function (the spec's keywords added) and returns its output as a float64 CPU tensor. The calls a
  check makes must depend on its inputs only: they are recorded when the cases are built (with the
  reference answering) and made by the sandboxed worker. A spec lists the property by name.
- :func:`mistake` registers a wrong implementation with the reference's signature and the feedback
  a student whose output matches it reads; diagnosis names it, and ``attnscore verify`` requires
  each to lose points and be named.

Outside a spec load the decorators register nothing and return the function unchanged. See
``docs/specs.md`` ("Your own reference function") for the spec's side and the rules of trust.
"""

from attnscore.catalogue.instructor import mistake, property

__all__ = ["mistake", "property"]
