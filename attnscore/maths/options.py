"""The options a spec fixes for every call of a contract: one frozen :class:`Options` value per
family, one field per keyword (:class:`Keyword`), passed whole to the family's reference, golden
twin, error bounds and gradients (:attr:`attnscore.maths.contract.Contract.options`).

A family declares its options as a frozen dataclass whose fields are made by :func:`keyword`
(the field's name is the keyword's name, its default what the implementation's default means)::

    @dataclass(frozen=True)
    class SoftcapOptions(Options):
        softcap: float | None = keyword("positive_or_null", None, "cap > 0: cap · tanh(s / cap)")

The value remembers which keywords the spec fixed (:attr:`Options.given`): only those are passed by
name to the implementation under test, and iterating it gives them as ``(name, value)`` pairs. A
*convention* (:func:`convention`, e.g. RoPE's pairing of coordinates) is fixed by a spec the same
way but never passed: the reference follows it, the implementation under test is written for it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

__all__ = [
    "Keyword",
    "Options",
    "causal_keyword",
    "convention",
    "dropout_keyword",
    "keyword",
    "scale_keyword",
    "window_keyword",
]


@dataclass(frozen=True)
class Keyword:
    """A keyword argument a spec may fix for every call (``function.keywords``), passed by name.

    Attributes:
        name: the keyword's name, as the implementation takes it (``is_causal``, ``scale``).
        kind: ``"bool"``, ``"number"`` (an int or float), ``"positive_or_null"`` (a number > 0 or
            null for the default), ``"zero"`` (the number 0, e.g. ``dropout_p``), ``"window"`` (two
            integers ``[left, right]``, each >= 0 or -1 for unbounded: FlashAttention's ``window_size``)
            or ``"choice"`` (one of the texts :attr:`choices`).
        default: the value the implementation's default means (what the reference uses unset).
        description: one line for the docs and error messages.
        passed: whether the implementation under test takes it by name (a keyword); False for a
            convention the spec states and only the reference follows (:func:`convention`).
        choices: the values a ``"choice"`` keyword takes.
    """

    name: str
    kind: str
    default: Any
    description: str
    passed: bool = True
    choices: tuple[str, ...] = ()

    def expected(self) -> str:
        """What a value must be, in words (for located errors)."""
        return {
            "bool": "true or false",
            "number": "a number",
            "positive_or_null": "a number > 0, or null for the default",
            "zero": "0 (the reference is deterministic)",
            "window": "[left, right], two integers each >= 0 or -1 (unbounded)",
            "choice": "one of " + ", ".join(repr(c) for c in self.choices),
        }[self.kind]

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` (as YAML loads it) is a value of this keyword."""
        is_number = isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value)
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "number":
            return bool(is_number)
        if self.kind == "positive_or_null":
            return value is None or (bool(is_number) and value > 0)
        if self.kind == "window":
            return (
                isinstance(value, list | tuple)
                and len(value) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) and x >= -1 for x in value)
            )
        if self.kind == "choice":
            return isinstance(value, str) and value in self.choices
        return bool(is_number) and value == 0

    def normalised(self, value: Any) -> Any:
        """``value`` as the options hold it: a window as a tuple of two ints, anything else as given."""
        return tuple(int(x) for x in value) if self.kind == "window" else value


def keyword(kind: str, default: Any, description: str) -> Any:
    """A field of an :class:`Options` subclass that is a keyword of kind ``kind`` (see :class:`Keyword`)."""
    return field(default=default, metadata={"kind": kind, "description": description})


def convention(default: Any, description: str, choices: tuple[str, ...] = (), kind: str = "choice") -> Any:
    """A field of an :class:`Options` subclass that is a convention: fixed by a spec's
    ``function.keywords`` like a keyword and followed by the reference, but never passed to the
    implementation under test (:attr:`Keyword.passed` False), e.g. RoPE's pairing of coordinates.

    Raises:
        ValueError: a ``"choice"`` convention without choices, or a default that is not one of them.
    """
    if kind == "choice" and default not in choices:
        raise ValueError(f"expected a default among {choices!r}, found {default!r}")
    metadata = {"kind": kind, "description": description, "passed": False, "choices": tuple(choices)}
    return field(default=default, metadata=metadata)


# The keywords several families take, each declared once: the same name in two families may differ
# (``scale`` and ``softmax_scale``), the rule and its description do not.

_CAUSAL_RULES = {"top_left": "j <= i", "bottom_right": "j <= i + n_k - n_q"}


def scale_keyword() -> Any:
    """The factor of ``Q Kᵀ`` (SDPA's ``scale``, FlashAttention's ``softmax_scale``): a number > 0,
    or null for ``1/√d_k``."""
    return keyword("positive_or_null", None, "the factor of Q Kᵀ; null means 1/√d_k")


def dropout_keyword() -> Any:
    """``dropout_p``, always 0: the reference is deterministic."""
    return keyword("zero", 0.0, "dropout probability; 0 (a deterministic reference)")


def causal_keyword(alignment: str, note: str, per_sequence: bool = False) -> Any:
    """A causal flag (``is_causal``, ``causal``), default false: query ``i`` keeps key ``j`` only when
    ``j <= i`` (``alignment`` ``"top_left"``) or ``j <= i + n_k - n_q`` (``"bottom_right"``), in
    each packed sequence when ``per_sequence``; ``note`` (the alignment and whose convention it is)
    ends the description in parentheses.

    Raises:
        KeyError: an alignment other than ``"top_left"`` and ``"bottom_right"``.
    """
    rule = _CAUSAL_RULES[alignment] + (" of that sequence" if per_sequence else "")
    where = "per sequence, " if per_sequence else ""
    return keyword("bool", False, f"{where}keep key j for query i only when {rule} ({note})")


def window_keyword(per_sequence: bool = False) -> Any:
    """FlashAttention's ``window_size``, ``(left, right)`` aligned bottom-right, default ``(-1, -1)``
    (unbounded both ways); in each packed sequence when ``per_sequence``."""
    where = " per sequence" if per_sequence else ""
    return keyword(
        "window",
        (-1, -1),
        f"(left, right){where}: query i keeps keys j in [i + n_k - n_q - left, i + n_k - n_q + right]; -1 = unbounded",
    )


@dataclass(frozen=True)
class Options:
    """The options of a contract without keywords, and the base of every family's options.

    Attributes:
        given: the keywords the spec fixed, sorted: passed by name to the implementation under test
            (:meth:`attnscore.maths.contract.Contract.binding`); the others keep its default.

    Example:
        >>> from attnscore.maths.contracts import get_contract
        >>> options = get_contract("sdpa").configured({"scale": 0.5}).options
        >>> options.scale, options.is_causal, dict(options)
        (0.5, False, {'scale': 0.5})
    """

    given: tuple[str, ...] = ()

    @classmethod
    def keywords(cls) -> tuple[Keyword, ...]:
        """The keywords these options hold, in declaration order (every field made by :func:`keyword`)."""
        return tuple(
            Keyword(
                f.name,
                f.metadata["kind"],
                f.default,
                f.metadata["description"],
                f.metadata.get("passed", True),
                f.metadata.get("choices", ()),
            )
            for f in fields(cls)
            if "kind" in f.metadata
        )

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Options:
        """These options with ``values`` fixed (keyword name -> value, each already accepted by its
        :meth:`Keyword.accepts`), the others at their defaults.

        Raises:
            ValueError: a name that is not one of :meth:`keywords`.
        """
        known = {k.name: k for k in cls.keywords()}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"expected one of the keywords {', '.join(known) or 'none'}, found {unknown[0]!r}")
        fixed = {name: known[name].normalised(value) for name, value in values.items()}
        return cls(given=tuple(sorted(fixed)), **fixed)

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        """The fixed keywords passed to the implementation as ``(name, value)`` pairs, sorted by
        name (``dict(options)``); conventions (:func:`convention`) are not among them."""
        unpassed = {k.name for k in self.keywords() if not k.passed}
        return iter([(name, getattr(self, name)) for name in self.given if name not in unpassed])

    def stated(self) -> dict[str, Any]:
        """Every value the spec fixed, conventions included, by name (for reports and digests)."""
        return {name: getattr(self, name) for name in self.given}

    def __bool__(self) -> bool:
        """Whether the spec fixed any keyword."""
        return bool(self.given)
