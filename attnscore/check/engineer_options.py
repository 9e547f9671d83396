"""The options of an engineer's run, parsed and applied once for ``attnscore test`` and the pytest plugin.

``--tie SYMBOL=SAME_AS`` gives two shape symbols one size (``d_v=d_k``), ``--where BOUND`` bounds
the shapes (``n_q<=n_k``), ``--allow CORNER`` sets a convention corner aside
(:mod:`attnscore.catalogue.conventions`), ``--ratio K`` switches to the low-precision rule and
``--keyword NAME=VALUE`` passes a constant keyword argument to every call. A keyword of the spec's
contract (``window_size=3,0``, ``causal=true``, ``softcap=30``; :attr:`Contract.keywords`) also
configures the contract again, its value merged over the spec's own ``function.keywords``, so that
the reference, golden values, tolerances and properties follow it, and the worked examples whose
expected values no longer hold are left out (:mod:`attnscore.spec.reconfigure`); any other name is
only passed to the implementation, as it always was. ``--sweep NAME=V1;V2`` (repeatable) declares a
grid of keyword values, or of shape bounds with the name ``where``; :meth:`EngineerOptions.grid`
gives its points and :meth:`EngineerOptions.at` the options of one. The command line spells
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
from attnscore.maths.options import Keyword
from attnscore.spec.model import Spec

__all__ = [
    "OptionError",
    "EngineerOptions",
    "GridPoint",
    "Reshaped",
    "keyword_arguments",
    "keyword_value",
    "pair",
    "yaml_scalar",
]

GridPoint = tuple[tuple[str, str], ...]
"""One point of a ``--sweep`` grid: ``(name, value text)`` pairs in the order the sweeps were given."""


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
        OptionError: a text is not ``NAME=VALUE``, a name is not a Python identifier or is given
            twice, or a value is not a scalar.
    """
    found: dict[str, object] = {}
    for text in keywords:
        name, value = pair(text, option)
        if not name.isidentifier():
            raise OptionError(f"{option}: expected a keyword argument name, found {name!r} in {text!r}")
        if name in found:  # never the last one silently
            raise OptionError(f"{option} {name}: expected each name once, found it again in {text!r}")
        found[name] = yaml_scalar(value, name, option)
    return found


def _loaded(value: str) -> object:
    """``value`` read as YAML (``true``, ``0.5``, ``[3, 0]``), or the text itself when it is not YAML."""
    import yaml

    try:
        return yaml.safe_load(value)
    except yaml.YAMLError:
        return value


def keyword_value(kw: Keyword, text: str, option: str = "--keyword") -> object:
    """A keyword's value read from its text as its kind (:attr:`Keyword.kind`) says: a window as two
    integers (``3,0``, ``[3, 0]``, ``(3,0)``), a bool (``true``), a number (``30``, ``0.125``; ``null``
    where the keyword takes it), a choice as its text.

    >>> from attnscore.maths.contracts import get_contract
    >>> flash = get_contract("flash_attn")
    >>> keyword_value(flash.keyword("window_size"), "(3,0)"), keyword_value(flash.keyword("causal"), "true")
    ((3, 0), True)
    >>> keyword_value(flash.keyword("causal"), "maybe")
    Traceback (most recent call last):
    ...
    attnscore.check.engineer_options.OptionError: --keyword causal: expected true or false, found 'maybe'

    Raises:
        OptionError: a text that is not a value of the keyword (what was expected, what was found).
    """
    value: object
    if kw.kind == "window":
        inner = text.strip()
        if inner[:1] in ("[", "(") and inner[-1:] in ("]", ")"):
            inner = inner[1:-1]
        try:
            value = tuple(int(part) for part in inner.split(","))
        except ValueError:
            value = text
    elif kw.kind == "choice":
        value = text.strip()
    else:
        value = _loaded(text)
        if kw.kind == "positive_or_null" and isinstance(value, str) and value.lower() in ("none", "null"):
            value = None
    if not kw.accepts(value):
        example = ", e.g. window_size=3,0" if kw.kind == "window" else ""
        raise OptionError(f"{option} {kw.name}: expected {kw.expected()}{example}, found {text!r}")
    return kw.normalised(value)


@dataclass(frozen=True)
class Reshaped:
    """What :meth:`EngineerOptions.reshape` changed or left out of one spec.

    Attributes:
        adapted: ids of the worked examples rebuilt to fit a tie (expected values recomputed).
        dropped: ids of the worked examples left out because their shapes break a tie.
        skipped: ``"<case id> (<reason>)"`` for each case skipped by a ``--where`` bound.
        tie_text: the ties as written, ``"d_v=d_k"``.
        bound_text: the bounds as written, ``"n_q <= n_k"``.
        unheld: ids of the worked examples left out because their expected values assume the
            spec's own keyword values (:attr:`assumed`), not the chosen ones (:attr:`chosen`).
        unapplied: names of the properties left out because they do not apply under :attr:`chosen`.
        recomputed: ids of the worked examples testing a convention corner, kept with their expected
            values recomputed under :attr:`chosen` (:func:`attnscore.spec.reconfigure.recomputed_example`).
        assumed: the spec's values of the keywords ``--keyword`` changed, ``"window_size=(2, 1)"``.
        chosen: their chosen values, ``"window_size=(3, 0)"``; empty when no keyword changed.
        passed_only: ``--keyword`` names that are not keywords of the spec's contract, which takes some
            (:attr:`takes`): passed to the implementation only, the reference does not follow them.
        takes: the keywords the spec's contract takes, ``"dropout_p, softmax_scale, causal, window_size"``.
    """

    adapted: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    tie_text: str = ""
    bound_text: str = ""
    unheld: tuple[str, ...] = ()
    unapplied: tuple[str, ...] = ()
    assumed: str = ""
    chosen: str = ""
    passed_only: tuple[str, ...] = ()
    takes: str = ""
    recomputed: tuple[str, ...] = ()

    def notes(self, spec_id: str) -> list[str]:
        """One line per change, for a person: what was configured, adapted, left out, skipped."""
        lines = []
        if self.chosen:
            lines.append(f"{spec_id}: the reference follows {self.chosen} (the spec fixes {self.assumed})")
        if self.unheld:
            lines.append(
                f"{spec_id}: left out {counted(len(self.unheld), 'worked example')} whose expected values assume "
                f"{self.assumed}, not {self._chosen_values()}: {', '.join(self.unheld)}"
            )
        if self.recomputed:
            lines.append(
                f"{spec_id}: recomputed {counted(len(self.recomputed), 'worked example')} testing a convention "
                f"corner under {self.chosen} (expected values from the float64 reference): "
                f"{', '.join(self.recomputed)}"
            )
        if self.unapplied:
            lines.append(
                f"{spec_id}: left out {counted(len(self.unapplied), 'property', 'properties')} that "
                f"{'does' if len(self.unapplied) == 1 else 'do'} not apply "
                f"with {self.chosen}: {', '.join(self.unapplied)}"
            )
        if self.passed_only:
            names = ", ".join(self.passed_only)
            lines.append(
                f"{spec_id}: {names} passed to the implementation only (the reference does not follow "
                f"{'it' if len(self.passed_only) == 1 else 'them'}; the contract's keywords: {self.takes})"
                + self._did_you_mean()
            )
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

    def _did_you_mean(self) -> str:
        """``"; did you mean window_size?"`` for each passed-only name close to a keyword of the contract."""
        import difflib

        takes = [t.strip() for t in self.takes.split(",") if t.strip()]
        guesses = [g for name in self.passed_only for g in difflib.get_close_matches(name, takes, n=1, cutoff=0.75)]
        return "".join(f"; did you mean {g}?" for g in guesses)

    def _chosen_values(self) -> str:
        """:attr:`chosen`, each value alone when one keyword changed (``(3, 0)``)."""
        return self.chosen.partition("=")[2] if self.chosen.count("=") == 1 else self.chosen

    def left_out(self) -> dict[str, str]:
        """Case id -> why it does not run: dropped by a tie, its expected value assuming the spec's
        keywords, a property that does not apply under the chosen ones, or skipped by a bound."""
        reasons = {f"example:{case_id}": f"left out: its shapes break {self.tie_text}" for case_id in self.dropped}
        for case_id in self.unheld:
            reasons[f"example:{case_id}"] = f"left out: its expected value assumes {self.assumed}"
        for name in self.unapplied:
            reasons[f"property:{name}"] = f"left out: it does not apply with {self.chosen}"
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
        keywords: constant keyword arguments for every call, each value read as YAML (``true``,
            ``0.5``, ``[3, 0]``); a keyword of the spec's contract is read again as its kind says
            (:func:`keyword_value`) from :attr:`keyword_texts`.
        keyword_texts: each keyword's value as written (``"3,0"``).
        sweeps: ``(name, value texts)`` per ``--sweep``, in the order given: a keyword of the
            contract, or ``where`` (each value a shape bound).
        prefix: how the options are spelled in messages (``--`` or ``--attnscore-``).
    """

    ties: dict[str, str] = field(default_factory=dict)
    bounds: tuple[Bound, ...] = ()
    allows: tuple[str, ...] = ()
    ratio: float | None = None
    keywords: dict[str, object] = field(default_factory=dict)
    prefix: str = "--"
    keyword_texts: dict[str, str] = field(default_factory=dict)
    sweeps: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def parse(
        cls,
        *,
        ties: Sequence[str] = (),
        wheres: Sequence[str] = (),
        allows: Sequence[str] = (),
        ratio: float | str | None = None,
        keywords: Sequence[str] = (),
        sweeps: Sequence[str] = (),
        prefix: str = "--",
    ) -> EngineerOptions:
        """Read the options' texts (each repeatable option a sequence of texts).

        Raises:
            OptionError: the first text that cannot be used, named by its option as
                ``prefix`` spells it (``--tie: expected NAME=VALUE, found 'd_v'``).
        """
        tie_map = dict(pair(text, f"{prefix}tie") for text in ties)
        bounds = _bounds(wheres, f"{prefix}where")
        factor: float | None = None
        if ratio is not None:
            try:
                factor = float(ratio)
            except ValueError:
                raise OptionError(f"{prefix}ratio: expected a finite number >= 1, found {ratio!r}") from None
            if not math.isfinite(factor) or factor < 1:
                raise OptionError(f"{prefix}ratio: expected a finite number >= 1, found {ratio}")
        texts: dict[str, str] = {}
        for text in keywords:
            name, value = pair(text, f"{prefix}keyword")
            if not name.isidentifier():
                raise OptionError(f"{prefix}keyword: expected a keyword argument name, found {name!r} in {text!r}")
            if name in texts:  # never the last one silently
                raise OptionError(
                    f"{prefix}keyword {name}: expected each name once, found {name}={texts[name]} and {text.strip()}"
                )
            texts[name] = value
        grid: list[tuple[str, tuple[str, ...]]] = []
        for text in sweeps:
            name, values = pair(text, f"{prefix}sweep")
            parts = tuple(v.strip() for v in values.split(";"))
            if not name.isidentifier() or any(not v for v in parts):
                raise OptionError(f"{prefix}sweep: expected NAME=VALUE;VALUE;..., found {text!r}")
            if name in texts or name in dict(grid):
                raise OptionError(
                    f"{prefix}sweep {name}: expected each name once among --keyword and --sweep, found it again"
                )
            if name == "where":
                _bounds(parts, f"{prefix}sweep where")
            grid.append((name, parts))
        return cls(
            ties=tie_map,
            bounds=bounds,
            allows=tuple(a.replace("-", "_") for a in allows),
            ratio=factor,
            keywords={name: _loaded(value) for name, value in texts.items()},
            prefix=prefix,
            keyword_texts=texts,
            sweeps=tuple(grid),
        )

    def grid(self) -> list[GridPoint]:
        """Every point of the ``--sweep`` grid (the product of the sweeps, the first slowest), each as
        ``(name, value text)`` pairs; one empty point when there is no sweep.

        >>> EngineerOptions.parse(sweeps=("causal=true;false", "window_size=-1,-1;3,0")).grid()[1]
        (('causal', 'true'), ('window_size', '3,0'))
        """
        import itertools

        names = [name for name, _ in self.sweeps]
        return [tuple(zip(names, values, strict=True)) for values in itertools.product(*(v for _, v in self.sweeps))]

    def at(self, point: GridPoint) -> EngineerOptions:
        """These options at one grid point: its keywords added to ``--keyword``'s, its ``where``
        bound to ``--where``'s, and no sweep left."""
        texts = dict(self.keyword_texts)
        bounds = self.bounds
        for name, value in point:
            if name == "where":
                bounds = bounds + _bounds((value,), f"{self.prefix}sweep where")
            else:
                texts[name] = value
        return dataclasses.replace(
            self,
            keyword_texts=texts,
            keywords={name: _loaded(value) for name, value in texts.items()},
            bounds=bounds,
            sweeps=(),
        )

    def check_sweeps(self, spec: Spec) -> None:
        """Whether every ``--sweep`` name is a keyword of ``spec``'s contract (or ``where``) and every
        value one of its values (a ``where`` value a bound on the contract's own symbols).

        Raises:
            OptionError: a name the contract does not take (the keywords it takes are named), a
                value of the wrong kind, or a bound on a symbol the contract does not have.
        """
        contract = spec.contract
        for name, values in self.sweeps:
            if name == "where":
                try:  # a symbol the contract lacks is this option's fault, not --where's
                    spec.bounded(_bounds(values, f"{self.prefix}sweep where"))
                except ValueError as exc:
                    raise OptionError(f"{self.prefix}sweep where: {exc}") from None
                continue
            try:
                kw = contract.keyword(name)
            except KeyError:
                known = ", ".join(k.name for k in contract.keywords) or "none"
                raise OptionError(
                    f"{self.prefix}sweep {name}: expected a keyword of contract {contract.name} ({known}) "
                    f"or where, found {name!r}"
                ) from None
            for value in values:
                keyword_value(kw, value, f"{self.prefix}sweep")

    def _split(self, spec: Spec) -> tuple[dict[str, object], dict[str, object]]:
        """``--keyword`` values as ``(the contract's keywords, read as their kinds; the others)``.

        Raises:
            OptionError: a value of the wrong kind for a keyword of the contract; a value that is
                not a scalar for any other name.
        """
        names = {kw.name for kw in spec.contract.keywords}
        known: dict[str, object] = {}
        passed: dict[str, object] = {}
        for name, text in self.keyword_texts.items():
            if name in names:
                known[name] = keyword_value(spec.contract.keyword(name), text, f"{self.prefix}keyword")
            else:
                passed[name] = yaml_scalar(text, name, f"{self.prefix}keyword")
        return known, passed

    def reshape(self, spec: Spec) -> tuple[Spec, Reshaped]:
        """``spec`` with the contract's keywords, ties, bounds, corners and ratio applied, in that
        order, and what changed.

        Raises:
            OptionError: a keyword value of the wrong kind, or a tie, bound or corner the spec's
                contract does not have (named by option).
        """
        from attnscore.spec.reconfigure import reconfigured

        known, passed = self._split(spec)
        takes = ", ".join(kw.name for kw in spec.contract.keywords)
        done = None
        if known:
            try:
                done = reconfigured(spec, known)
            except ValueError as exc:
                raise OptionError(f"{self.prefix}keyword: {exc}") from None
            spec = done.spec
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
            unheld=done.unheld if done else (),
            recomputed=done.recomputed if done else (),
            unapplied=done.unapplied if done else (),
            assumed=done.assumed if done else "",
            chosen=done.chosen if done else "",
            passed_only=tuple(passed) if takes else (),
            takes=takes,
        )

    def bind(self, function: Callable[..., Any], spec: Spec | None = None) -> Callable[..., Any]:
        """``function`` with the constant keyword arguments bound (itself when there are none): for
        ``spec``, only the names its contract does not take (the contract's own keywords reach the
        implementation through its binding, :meth:`attnscore.maths.contract.Contract.binding`).

        Raises:
            OptionError: as :meth:`reshape`, for a value that cannot be passed.
        """
        if spec is None:
            passed = {n: yaml_scalar(t, n, f"{self.prefix}keyword") for n, t in self.keyword_texts.items()}
        else:
            passed = self._split(spec)[1]
        return functools.partial(function, **passed) if passed else function


def _bounds(texts: Sequence[str], option: str) -> tuple[Bound, ...]:
    """Shape bounds read from their texts (``n_q<=n_k``).

    Raises:
        OptionError: a text that is not a bound, named by ``option``.
    """
    try:
        return tuple(parse_bound(text) for text in texts)
    except ValueError as exc:
        raise OptionError(f"{option}: {exc}") from None
