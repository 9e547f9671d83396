"""Small inputs for shrinking in grading: a property's own strategy, drawn at the smallest sizes.

Grading shows a failing property's counterexample as the smallest input that fails the same way
(:func:`attnscore.check.shrink.smallest_drawn_failure`). The graded inputs alone are often all
larger than needed (a property that wants a negative score and rows that do not sum to one draws
nothing under 12 entries, where one query against one key shows it), and running hypothesis's
shrinker per submission costs a few hundred calls. So each property case also gets a fixed set of
:data:`SMALL_COUNT` inputs drawn from the same strategy with every size at most
:data:`attnscore.maths.strategies.SMALL_SIZE` (:func:`attnscore.maths.strategies.small_sizes`),
and :data:`WIDE_COUNT` more at each shape the cap leaves out that the contract has
(:func:`attnscore.maths.strategies.wide_shapes`): ``n_q = n_k + 2`` (a bug that needs two fully
masked first queries under bottom-right causal) and grouped-query heads ``h_q = 4`` over
``h_kv = 2``. Tried smallest first, each costs one call.

They are never graded: a small input is only ever shown in place of a failing one, and only when
it fails the same way (same verdict, same diagnosed mistake, same convention corner). They depend
only on the spec, the property, the dtype and the base seed (derived with their own stream,
``"small"``), never on the submission, so every submission is shown the same counterexample for
the same fault, run after run. Built once per process and built case (the very :class:`Case`
object: a spec loaded again, even unchanged, builds its own), on first need.
"""

from __future__ import annotations

import dataclasses

from attnscore.check.cases import Case, property_calls
from attnscore.maths.lazy_hypothesis import hypothesis_exceptions
from attnscore.maths.strategies import derive_seed, draw_examples, small_sizes, wide_shapes
from attnscore.spec.model import Spec

__all__ = ["SMALL_COUNT", "WIDE_COUNT", "small_case"]

SMALL_COUNT = 12
"""Small inputs drawn per property case, every size capped."""
WIDE_COUNT = 4
"""Small inputs drawn per property case at each wide shape (``n_q = n_k + 2``, grouped heads)."""

_BUILT: dict[tuple[int, str, int], tuple[Case, Case | None]] = {}
_BUILT_MAX = 1024


def small_case(spec: Spec, case: Case, dtype: str, seed: int | None = None) -> Case | None:
    """``case`` with its calls made from :data:`SMALL_COUNT` small inputs of its property (drawn
    with ``seed``, default the spec's; see the module doc), or None for a worked example, a case
    whose property draws no inputs at these sizes, or one whose strategy cannot be drawn from.

    Example:
        >>> from attnscore.check.cases import build_cases
        >>> from attnscore.check.verify import bundled_spec_path
        >>> from attnscore.spec.load import load_spec
        >>> spec = load_spec(bundled_spec_path("dot_product_scores"))
        >>> case = next(c for c in build_cases(spec, "float32") if c.id == "property:equals_qk_entries")
        >>> small = small_case(spec, case, "float32")
        >>> max(call.args["keys"].size for call in small.calls) <= 4
        True
    """
    if case.kind != "property" or not case.property_name:
        return None
    base = spec.seed if seed is None else seed
    key = (id(case), dtype, base)  # the entry keeps ``case`` alive: its id is not reused meanwhile
    hit = _BUILT.get(key)
    if hit is not None and hit[0] is case:
        return hit[1]
    if len(_BUILT) >= _BUILT_MAX:
        _BUILT.clear()
    small = _build(spec, case, dtype, base)
    _BUILT[key] = (case, small)
    return small


def _build(spec: Spec, case: Case, dtype: str, base: int) -> Case | None:
    use = next((u for u in spec.properties if u.name == case.property_name), None)
    if use is None:
        return None
    prop = spec.find_property(use.name)
    examples: list[object] = []
    groups = [("", SMALL_COUNT), *((wide, WIDE_COUNT) for wide in wide_shapes(spec.contract))]
    for wide, count in groups:
        stream = derive_seed(spec.id, spec.version, base, use.name, dtype, f"small-{wide}" if wide else "small")
        try:
            with small_sizes(wide=wide):
                examples += draw_examples(prop.examples(spec.contract, use.max_value), count, stream)
        except hypothesis_exceptions():  # no input this small (or this wide) satisfies the property's strategy
            continue
    if not examples:
        return None
    return dataclasses.replace(case, calls=property_calls(spec, use.name, examples, dtype, case.tolerance))
