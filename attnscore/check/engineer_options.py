"""The options of an engineer's run, parsed and applied once for ``attnscore test`` and the pytest plugin.

``--tie SYMBOL=SAME_AS`` gives two shape symbols one size (``d_v=d_k``), ``--where BOUND`` bounds
the shapes (``n_q<=n_k``), ``--allow CORNER`` sets a convention corner aside
(:mod:`attnscore.catalogue.conventions`), ``--ratio K`` switches to the low-precision rule and
``--keyword NAME=VALUE`` passes a constant keyword argument to every call. The command line spells
them ``--tie``, the plugin ``--attnscore-tie``: :meth:`EngineerOptions.parse` takes the spelling
for its messages, and both read the same texts into the same :class:`EngineerOptions`, and apply it
to a spec the same way (:meth:`EngineerOptions.reshape`).

Example:
    >>> options = EngineerOptions.parse(ties=("d_v=d_k",), wheres=("n_q<=n_k",), keywords=("is_causal=true",))
    >>> options.ties, [str(b) for b in options.bounds], options.keywords
    ({'d_v': 'd_k'}, ['n_q <= n_k'], {'is_causal': True})
    >>> EngineerOptions.parse(ratio=0.5, prefix="--attnscore-")
    Traceback (most recent call last):
    ...
    attnscore.check.engineer_options.OptionError: --attnscore-ratio: expected a finite number >= 1, found 0.5
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from attnscore.maths.bounds import Bound, parse_bound
from attnscore.maths.display import counted
from attnscore.spec.model import Spec

__all__ = ["OptionError", "EngineerOptions", "Reshaped", "pair", "yaml_scalar", "keyword_arguments"]


class OptionError(ValueError):
    """An option's text cannot be used; the message names the option (as spelled) and the text found."""


def pair(text: str, option: str) -> tuple[str, str]:
    """``NAME=VALUE`` split in two (spaces around each stripped).

    >>> pair("d_v = d_k", "--tie")
    ('d_v', 'd_k')

    Raises:
        OptionError: ``text`` has no ``=``, or an empty name or value.
    """
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise OptionError(f"{option}: expected NAME=VALUE, found {text!r}")
    return name.strip(), value.strip()


def yaml_scalar(value: str, name: str, option: str = "--keyword") -> object:
    """A keyword's value read as a YAML scalar (``true``, ``3``, ``0.5``, text).

    >>> yaml_scalar("0.5", "scale"), yaml_scalar("true", "is_causal"), yaml_scalar("left", "side")
    (0.5, True, 'left')

    Raises:
        OptionError: the value is a YAML list, mapping or null.
    """
    import yaml

    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        parsed = value
    if not isinstance(parsed, (bool, int, float, str)) or parsed is None:
        raise OptionError(f"{option}: expected a scalar value for {name}, found {value!r}")
    return parsed


def keyword_arguments(keywords: Sequence[str], option: str = "--keyword") -> dict[str, object]:
    """``NAME=VALUE`` texts as keyword arguments, each value a YAML scalar.

    Raises:
        OptionError: a text is not ``NAME=VALUE``, a name is not a Python identifier, or a
            value is not a scalar.
    """
    found: dict[str, object] = {}
    for text in keywords:
        name, value = pair(text, option)
        if not name.isidentifier():
            raise OptionError(f"{option}: expected a keyword argument name, found {name!r} in {text!r}")
        found[name] = yaml_scalar(value, name, option)
    return found


@dataclass(frozen=True)
class Reshaped:
    """What :meth:`EngineerOptions.reshape` changed or left out of one spec.

    Attributes:
        adapted: ids of the worked examples rebuilt to fit a tie (expected values recomputed).
        dropped: ids of the worked examples left out because their shapes break a tie.
        skipped: ``"<case id> (<reason>)"`` for each case skipped by a ``--where`` bound.
        tie_text: the ties as written, ``"d_v=d_k"``.
        bound_text: the bounds as written, ``"n_q <= n_k"``.
    """

    adapted: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    tie_text: str = ""
    bound_text: str = ""

    def notes(self, spec_id: str) -> list[str]:
        """One line per change, for a person: what was adapted, left out, skipped."""
        lines = []
        if self.adapted:
            lines.append(
                f"{spec_id}: adapted {counted(len(self.adapted), 'worked example')} to {self.tie_text} "
                f"(expected values recomputed): {', '.join(self.adapted)}"
            )
        if self.dropped:
            lines.append(
                f"{spec_id}: left out {counted(len(self.dropped), 'worked example')} whose shapes break "
                f"{self.tie_text}: {', '.join(self.dropped)}"
            )
        if self.skipped:
            lines.append(f"{spec_id}: skipped by constraint {self.bound_text}: {'; '.join(self.skipped)}")
        return lines

    def left_out(self) -> dict[str, str]:
        """Case id -> why it does not run: dropped by a tie, or skipped by a bound."""
        reasons = {case_id: f"left out: its shapes break {self.tie_text}" for case_id in self.dropped}
        for text in self.skipped:
            case_id, _, reason = text.partition(" ")
            reasons[case_id] = f"skipped by constraint: {reason.strip('()')}"
        return reasons


@dataclass(frozen=True)
class EngineerOptions:
    """The parsed options (see the module docstring); the empty default changes nothing.

    Attributes:
        ties: symbol -> the symbol it takes its size from.
        bounds: shape bounds (:class:`attnscore.maths.bounds.Bound`).
        allows: convention corners to set aside (names with ``_``).
        ratio: the low-precision rule's factor K (``>= 1``), or None for the spec's tolerance.
        keywords: constant keyword arguments for every call.
        prefix: how the options are spelled in messages (``--`` or ``--attnscore-``).
    """

    ties: dict[str, str] = field(default_factory=dict)
    bounds: tuple[Bound, ...] = ()
    allows: tuple[str, ...] = ()
    ratio: float | None = None
    keywords: dict[str, object] = field(default_factory=dict)
    prefix: str = "--"

    @classmethod
    def parse(
        cls,
        *,
        ties: Sequence[str] = (),
        wheres: Sequence[str] = (),
        allows: Sequence[str] = (),
        ratio: float | str | None = None,
        keywords: Sequence[str] = (),
        prefix: str = "--",
    ) -> EngineerOptions:
        """Read the options' texts (each repeatable option a sequence of texts).

        Raises:
            OptionError: the first text that cannot be used, named by its option as
                ``prefix`` spells it (``--tie: expected NAME=VALUE, found 'd_v'``).
        """
        tie_map = dict(pair(text, f"{prefix}tie") for text in ties)
        try:
            bounds = tuple(parse_bound(text) for text in wheres)
        except ValueError as exc:
            raise OptionError(f"{prefix}where: {exc}") from None
        factor: float | None = None
        if ratio is not None:
            try:
                factor = float(ratio)
            except ValueError:
                raise OptionError(f"{prefix}ratio: expected a finite number >= 1, found {ratio!r}") from None
            if not math.isfinite(factor) or factor < 1:
                raise OptionError(f"{prefix}ratio: expected a finite number >= 1, found {ratio}")
        return cls(
            ties=tie_map,
            bounds=bounds,
            allows=tuple(a.replace("-", "_") for a in allows),
            ratio=factor,
            keywords=keyword_arguments(keywords, f"{prefix}keyword"),
            prefix=prefix,
        )

    def reshape(self, spec: Spec) -> tuple[Spec, Reshaped]:
        """``spec`` with the ties, bounds, corners and ratio applied, in that order, and what changed.

        Raises:
            OptionError: a tie, bound or corner the spec's contract does not have (named by option).
        """
        adapted: list[str] = []
        dropped: list[str] = []
        skipped: list[str] = []
        if self.ties:
            try:
                spec, dropped = spec.tied(self.ties)
            except ValueError as exc:
                raise OptionError(f"{self.prefix}tie: {exc}") from None
            adapted = spec.adapted_examples()
        if self.bounds:
            try:
                spec, skipped = spec.bounded(self.bounds)
            except ValueError as exc:
                raise OptionError(f"{self.prefix}where: {exc}") from None
        if self.allows:
            try:
                spec = spec.allowing(self.allows)
            except ValueError as exc:
                raise OptionError(f"{self.prefix}allow: {exc}") from None
        if self.ratio is not None:
            from attnscore.maths.tolerance import Tolerance

            spec = dataclasses.replace(spec, tolerance=Tolerance(mode="ratio", factor=self.ratio))
        return spec, Reshaped(
            adapted=tuple(adapted),
            dropped=tuple(dropped),
            skipped=tuple(skipped),
            tie_text=", ".join(f"{a}={b}" for a, b in self.ties.items()),
            bound_text=", ".join(map(str, self.bounds)),
        )

    def bind(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function`` with the constant keyword arguments bound (itself when there are none)."""
        return functools.partial(function, **self.keywords) if self.keywords else function
