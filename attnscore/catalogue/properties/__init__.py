"""The property registry: named, documented checks with their input strategies.

A spec lists properties by name (``properties: - name: perpendicular_keys_score_zero``) with
points and a student-facing statement; the behaviour lives here, in Python, never in YAML.

A property draws *examples* from a hypothesis strategy (see :mod:`attnscore.maths.strategies`). Each
example becomes one or more *calls* of the implementation (``calls``): a relational property
such as "permuting keys permutes scores" calls ``f(Q, K)`` and ``f(Q, P K)``. Every call is
compared with the float64 golden value under the spec's tolerance (unless ``golden`` is False),
and then ``check`` looks at all the example's outputs together and returns a failure message or
None. On failure ``hint`` may add a sentence in the property's own terms.

Properties that look at the call itself (inputs mutated, output aliasing an input) need a runner
that reports ``last_inspection`` (the in-process runner and the sandboxed worker do); with any
other runner they check values only.

The registry is :mod:`attnscore.catalogue.properties.registry`; the properties themselves are grouped by the
contracts they apply to: :mod:`~attnscore.catalogue.properties.general` (every contract),
:mod:`~attnscore.catalogue.properties.scores` (the Q Kᵀ views) and :mod:`~attnscore.catalogue.properties.weights`
(masks, weights, attention), :mod:`~attnscore.catalogue.properties.causal` (attention with a causal flag),
:mod:`~attnscore.catalogue.properties.heads` (multi-head attention with its projections)
and :mod:`~attnscore.catalogue.properties.gradients` (the backward pass of every differentiable contract),
:mod:`~attnscore.catalogue.properties.gradcheck` (the backward against finite differences of the forward),
:mod:`~attnscore.catalogue.properties.rotary` (rotary position embeddings: norms, scores by offset).
"""

from attnscore.catalogue.properties import general, scores, weights  # noqa: F401  (registers the properties, in this order)

# isort: split
from attnscore.catalogue.properties import causal, sequences, variants  # noqa: F401  (after the forward ones: causal, the flash_attn masks, the kernel variants)

# isort: split
from attnscore.catalogue.properties import packed  # noqa: F401  (packed varlen batches and key padding)

# isort: split
from attnscore.catalogue.properties import (
    heads,  # noqa: F401  (multi-head attention: heads independent, causal tokens)
    rotary,  # noqa: F401  (rotary position embeddings: norms, offsets)
)

# isort: split
from attnscore.catalogue.properties import gradients  # noqa: F401  (the backward pass, registered last)

# isort: split
from attnscore.catalogue.properties import gradcheck  # noqa: F401  (finite differences of the forward, float64)

# isort: split
from attnscore.catalogue.properties import flash_attention  # noqa: F401  (FlashAttention-2's logsumexp and long rows)
from attnscore.catalogue.properties.registry import (
    PROPERTIES,
    CheckContext,
    Property,
    applicable_properties,
    get_property,
    register,
)

__all__ = ["Property", "CheckContext", "PROPERTIES", "get_property", "register", "applicable_properties"]
