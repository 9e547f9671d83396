"""A failure as a value: everything judging found out about one failing case, as plain data.

Judging (:mod:`attnscore.check.judge`) produces a :class:`Failure`; shrinking
(:mod:`attnscore.check.shrink`) replaces its call with a smaller one; the feedback module
(:mod:`attnscore.report.feedback`) renders it, once and late, for every output (terminal, JSON,
Gradescope, pytest). Nothing here is text meant to be patched or parsed: the record holds the
call's arguments, the worst entries, counts, the tolerance, hint, diagnosis and explanation as
fields.

What failed is one of a small union of kinds, each told apart by data, never by prose:

- a call failed (``mismatch`` None, ``check`` ""): ``verdict`` is exception, timeout, crash, ...,
  ``detail`` the runner's words and ``exception`` the type's name;
- wrong value, wrong shape, wrong dtype (and the non-finite and bad-return-kind verdicts of a
  comparison): ``mismatch`` is a :class:`Mismatch`;
- a property's check failed (``check``: the property's own words): ``verdict`` wrong value.

A hidden case's record holds its inputs and expected values too (they are needed to shrink or
diagnose). The hidden-case rules (never show inputs, expected values or text the submission
wrote) are applied once, by :func:`attnscore.report.redact.redact`, which every renderer calls
first; a redacted comparison is a :class:`Withheld`. Records and the JSON report are written by
one codec derived from these fields (:mod:`attnscore.report.codec`).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import numpy as np

from attnscore.boundary.layouts import describe_layout
from attnscore.boundary.verdict import Verdict
from attnscore.report.codec import ADDED, finite_or_word, number_from_word

__all__ = ["EntryMismatch", "Mismatch", "Withheld", "ShrunkFrom", "Failure", "json_array", "array_of", "size_of"]


@dataclass(frozen=True)
class EntryMismatch:
    """One wrong entry of the output.

    Attributes:
        index: the entry's index into the output (``()`` for a scalar).
        got: the returned value (float64; NaN/±inf kept).
        expected: the golden value (float64).
        error: ``|got - expected|``, or None when the entry is a non-finite placement mismatch.
        allowed: the allowed absolute error there, or None (non-finite placement).
        exact: the allowed error is below the dtype's smallest normal number: exact there.
    """

    index: tuple[int, ...]
    got: float
    expected: float
    error: float | None = None
    allowed: float | None = None
    exact: bool = False


@dataclass(frozen=True)
class Mismatch:
    """Why a returned value does not match its golden value (:func:`attnscore.check.compare.compare`).

    Attributes:
        verdict: wrong value, wrong shape, wrong dtype, non-finite or bad return type.
        entries: the worst wrong entries, worst first (at most three).
        name: what the output is called in feedback (``"out"``).
        detail: the one-sentence reason for return-kind, shape and dtype mismatches ("" otherwise).
        wrong, total: how many entries are wrong, of how many.
        tolerance: the tolerance in words (``"exact comparison"``, ``"close: rtol=..."``).
        got_dtype: the returned dtype; dtype: the dtype the inputs were cast to.
        lower_precision: the result's dtype is less precise than the inputs'.
    """

    verdict: Verdict
    _: KW_ONLY  # the rest by name: a record reads its fields in this order, entries first
    entries: tuple[EntryMismatch, ...] = ()
    name: str = "out"
    detail: str = ""
    wrong: int = 0
    total: int = 0
    tolerance: str = ""
    got_dtype: str = ""
    dtype: str = ""
    lower_precision: bool = False


@dataclass(frozen=True)
class Withheld:
    """A hidden case's comparison as it may be shown: the kind of mismatch and the output's name.

    :func:`attnscore.report.redact.redact` puts it in place of a hidden case's :class:`Mismatch`:
    counts and indices would give the shape away, the returned shape follows from the inputs.
    """

    verdict: Verdict
    name: str = "out"


@dataclass(frozen=True)
class ShrunkFrom:
    """Where a shrunk counterexample came from: the original generated input and its size.

    Attributes:
        example, examples: the original failing input was generated input ``example`` of ``examples``.
        size: how many entries the original input's arguments held together.
        how: ``"drawn"`` when the counterexample is the smallest failing input among the generated
            ones (tried after the first failure, smallest first), ``"small"`` when it is one of the
            property's small inputs drawn for shrinking (:mod:`attnscore.check.small_inputs`; not
            graded, so it has no number among the generated inputs), ``"hypothesis"`` when
            hypothesis shrank it (no drawn input smaller than the first failing one fails the same way).
    """

    example: int
    examples: int
    size: int
    how: str = "hypothesis"


@dataclass(frozen=True)
class Failure:
    """Everything known about one failing case, as data.

    Attributes:
        verdict: the case's verdict (never ``passed``).
        case_id, kind, title, statement: the case (``statement``: a property's student-facing text).
        location: ``file:line`` of the case in its spec.
        hidden: a hidden case (the renderer shows no inputs, expected values or submission text).
        function: the graded function's name as shown in feedback.
        dtype: the dtype the inputs were cast to.
        call: the failing call's number in the case (1-based).
        example, examples: the failing call's position among the case's examples (generated
            inputs of a property, usually 1 of 1 for a worked example).
        args: the failing call's arguments by name, as nested lists (bools stay bools; NaN and
            ±inf are the strings ``"nan"``, ``"inf"``, ``"-inf"``); None for a submission-wide failure.
        layouts: the memory layout each argument was handed over in (``{"K": "transposed"}``), or None
            (:attr:`layout_text` says them in words).
        keywords: keyword arguments fixed on the function (``attnscore test --keyword``, a spec's
            ``function.keywords``).
        by_name: the arguments (of ``args``) passed by name, not by position (``attn_mask=``).
        module: for a module handed in (a spec's ``function.module``), its config as JSON data
            (:meth:`attnscore.boundary.modules.ModuleConfig.to_json`): the reproduction builds the
            module and passes the weights by name; None for a function.
        mismatch: the comparison's findings (:class:`Mismatch`; :class:`Withheld` once redacted), or None.
        check: a property check's own failure text (it may quote values), or "".
        detail: a failed call's text ("raised ValueError: ...", "exceeded the time limit ...") or "".
        exception: the exception's type name for an exception verdict, else "".
        scope: ``"call"``, or ``"submission"`` when every call fails the same way (import error).
        disclosed: the detail was already shown before any hidden input ran (a load failure), so a
            hidden case may repeat it.
        hint: a likely cause named by the property (visible cases), or "".
        diagnosis: the known mistake the output matches, ``{"id", "message"}``, or None.
        explanation: a worked example's explanation ("Why: ..."), or "".
        shrunk_from: for a shrunk counterexample, the original input's position and size, or None.
        corner: a convention corner (:mod:`attnscore.catalogue.conventions`, ``"fully_masked_row"``)
            where the failing output is wrong, or "".
        set_aside: the convention corners taken as right when this failure was found.
        other_causes: failures of the same case found with ``corner`` set aside: a second cause,
            never hidden behind the first (each with its own diagnosis and counterexample).
        beside: on a second cause, the corner of the first failure that was set aside to find it.
        property_held: a property case whose values differ from the reference while the property's
            own check holds on the same output (the header then says so: the property is not the cause).
        corner_found: with ``corner``, what the output came out as there (``"NaN"``, ``"inf"``,
            ``"NaN and inf"``, ``"other values"``), for the corner's sentence.
        advice: the case only advises: the spec does not ask about its corner (no points).
        for_students: shown to a student (:func:`attnscore.report.redact.for_students`): what only an
            instructor or engineer can act on (how a spec or a command line sets a corner aside) is
            left out of the feedback.
    """

    verdict: Verdict
    case_id: str
    kind: str
    title: str
    location: str
    hidden: bool
    function: str
    dtype: str
    statement: str = ""
    call: int = 1
    example: int = 1
    examples: int = 1
    args: dict[str, Any] | None = None
    layouts: dict[str, str] | None = None
    keywords: dict[str, Any] | None = None
    mismatch: Mismatch | Withheld | None = None
    check: str = ""
    detail: str = ""
    exception: str = ""
    scope: str = "call"
    disclosed: bool = False
    hint: str = ""
    diagnosis: dict[str, str] | None = None
    explanation: str = ""
    shrunk_from: ShrunkFrom | None = None
    # added after the first records of this format were written: absent keys read as the default
    corner: str = field(default="", metadata=ADDED)
    set_aside: tuple[str, ...] = field(default=(), metadata=ADDED)
    other_causes: tuple[Failure, ...] = field(default=(), metadata=ADDED)
    beside: str = field(default="", metadata=ADDED)
    property_held: bool = field(default=False, metadata=ADDED)
    by_name: tuple[str, ...] = field(default=(), metadata=ADDED)
    corner_found: str = field(default="", metadata=ADDED)
    advice: bool = field(default=False, metadata=ADDED)
    for_students: bool = field(default=False, metadata=ADDED)
    module: dict[str, Any] | None = field(default=None, metadata=ADDED)

    @property
    def size(self) -> int:
        """How many entries the failing call's arguments hold together (0 without arguments)."""
        return size_of(self.args)

    @property
    def layout_text(self) -> str:
        """The arguments' memory layouts in words ("K was a transposed view ..."), or "" (none, or
        no arguments: a redacted hidden case)."""
        if not self.layouts or self.args is None:
            return ""
        return "; ".join(
            describe_layout(name, layout, np.shape(np.asarray(self.args[name], dtype=object)))
            for name, layout in self.layouts.items()
        )


def json_array(a: Any) -> Any:
    """Nested lists for JSON: bools stay bools, integers (an int32 parameter) stay ints, non-finite
    floats become "nan", "inf", "-inf"."""
    arr = np.asarray(a)
    if arr.dtype == np.bool_ or arr.dtype.kind in "iu":
        return arr.tolist()
    arr = arr.astype(np.float64)
    finite = np.isfinite(arr)
    if finite.all():
        return arr.tolist()
    obj = arr.astype(object)
    obj[~finite] = [finite_or_word(x) for x in arr[~finite]]  # the one non-finite encoder
    return obj.tolist()


def array_of(value: Any) -> np.ndarray:
    """The array behind :func:`json_array`'s nested lists (bool; int32 when every entry is an int, as
    an integer parameter's are; else float64 with NaN/±inf back)."""
    arr = np.asarray(value, dtype=object)
    if arr.size and all(isinstance(v, bool | np.bool_) for v in arr.flat):
        return arr.astype(bool)
    if arr.size and all(isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_) for v in arr.flat):
        return arr.astype(np.int32)
    return np.vectorize(number_from_word, otypes=[np.float64])(arr) if arr.size else np.zeros(arr.shape)


def size_of(args: dict[str, Any] | None) -> int:
    """How many entries the arguments hold together: ``{"q": [1, 0], "keys": [[1, 0]]}`` → 4."""
    if not args:
        return 0
    return sum(int(np.asarray(v, dtype=object).size) for v in args.values())
