"""Feedback: a :class:`~attnscore.report.failure.Failure` rendered once, late, for every output.

Every reporter goes through here: the terminal report (:mod:`attnscore.report.text`), JSON
(:mod:`attnscore.report.json_report`), Gradescope (:mod:`attnscore.report.gradescope`) and the
pytest plugin's failure text. The hidden-case rules live here and nowhere else: for a hidden
case no input, no expected value, no returned value and no text the submission wrote (exception
messages, its own class names, a property check's quotation of values) is rendered, in any
format; a builtin exception's type name and the grader's own words (time limits) are.

Repeated feedback is collapsed by :func:`cause_groups`: failing cases with the same cause (the
same diagnosed mistake, or the same failure text) form one group, shown in full once, for its
smallest visible counterexample, and as one line per other case.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnscore.boundary.layouts import effective_layout, expand_axis
from attnscore.boundary.verdict import Verdict
from attnscore.maths.display import format_array, format_index, format_number, shape_text
from attnscore.report.failure import Failure, Mismatch, array_of

__all__ = [
    "format_number",
    "format_index",
    "format_array",
    "shape_text",
    "mismatch_text",
    "hidden_mismatch_text",
    "reproduction",
    "summary_line",
    "failure_text",
    "failure_data",
    "pytest_text",
    "CauseGroup",
    "cause_groups",
    "cause_key",
    "convention_text",
    "second_cause_text",
]


_BUILTIN_EXCEPTIONS = frozenset(
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
)
_HIDDEN_TEXT = {
    Verdict.BAD_RETURN_TYPE: "returned something that is not one numeric result",
    Verdict.MEMORY_LIMIT: "ran out of memory",
    Verdict.FUNCTION_MISSING: "the graded function was not found",
    Verdict.GRADER_ERROR: "the grading machine failed on this case (not your code)",
}


def _hidden_detail(failure: Failure) -> str:
    """What a hidden case may say about a failed call: nothing the submission wrote (messages, its
    own class names, text it returned), since it could carry the hidden inputs; a builtin
    exception's type only."""
    if failure.disclosed:
        return failure.detail  # said before any hidden input ran
    if failure.verdict is Verdict.EXCEPTION:
        if failure.exception in _BUILTIN_EXCEPTIONS:
            return f"raised {failure.exception} (its message is not shown for a hidden case)"
        if failure.exception:
            return "raised an exception of its own class (its type and message are not shown for a hidden case)"
        return "your code raised an exception (details are not shown for a hidden case)"
    if failure.verdict in _HIDDEN_TEXT:
        return f"{_HIDDEN_TEXT[failure.verdict]} (details are not shown for a hidden case)"
    return failure.detail  # timeouts and crashes: the grader's own words


_HIDDEN_NOTE = "hidden case: its inputs and expected values, shape and dtype are not shown"
_HIDDEN_MISMATCH = {
    Verdict.WRONG_VALUE: "{name} has wrong values",
    Verdict.WRONG_SHAPE: "{name} has the wrong shape",
    Verdict.WRONG_DTYPE: "{name} has the wrong dtype: scores are real numbers, so return a floating result",
    Verdict.NON_FINITE: (
        "{name} has NaN or infinite entries where it should not; look for a division by zero, an overflow or "
        "a log/sqrt of a bad value"
    ),
    Verdict.BAD_RETURN_TYPE: "returned something that is not one numeric result",
}


def hidden_mismatch_text(m: Mismatch) -> str:
    """What a hidden case may say about a comparison: its verdict in generic words, nothing more.

    A hidden case's feedback never holds its inputs, expected values, expected shape or dtype,
    nor anything derived from them (entry counts and indices give the shape away, the returned
    shape follows from the inputs): only the output's name and the kind of mismatch.

    >>> hidden_mismatch_text(Mismatch(Verdict.WRONG_SHAPE, detail="out has shape (2,), expected shape (3,)"))
    'out has the wrong shape (hidden case: its inputs and expected values, shape and dtype are not shown)'
    """
    text = _HIDDEN_MISMATCH.get(m.verdict, "{name} does not match")
    return f"{text.format(name=m.name)} ({_HIDDEN_NOTE})"


def _head(m: Mismatch) -> str:
    if m.verdict is Verdict.NON_FINITE:
        return f"{m.wrong} of {m.total} entries of {m.name} are non-finite where they should not be"
    return f"{m.wrong} of {m.total} entries of {m.name} are wrong" if m.total > 1 else f"{m.name} is wrong"


def mismatch_text(m: Mismatch, *, hidden: bool = False, cause: str = "") -> str:
    """A comparison's findings in words: the reason, or a count and the worst entries.

    >>> from attnscore.report.failure import EntryMismatch
    >>> print(mismatch_text(Mismatch(Verdict.WRONG_VALUE, wrong=1, total=3, tolerance="exact comparison",
    ...     entries=(EntryMismatch((1,), 0.5, 0.0, 0.5, 0.0, exact=True),), got_dtype="float32", dtype="float32")))
    1 of 3 entries of out are wrong (exact comparison):
      out[1] = 0.5, expected 0 (|error| 0.5 > allowed 0 (exact here))

    ``cause``: a specific cause of non-finite entries (a masked row), said instead of the generic hint.
    """
    if hidden:
        return hidden_mismatch_text(m)
    if m.detail:
        return m.detail
    if m.verdict is Verdict.NON_FINITE:
        first = m.entries[0]
        text = f"{format_index(m.name, first.index)} is {format_number(first.got)}"
        text += f", expected {format_number(first.expected, m.dtype)}"
        if m.wrong > 1:
            text += f" ({m.wrong} non-finite entries in all)"
        return text + "; " + (cause or "look for a division by zero, an overflow or a log/sqrt of a bad value")
    head = _head(m)
    lines = [head + (f" ({m.tolerance})" if m.tolerance else "") + ":"]
    for e in m.entries:
        line = (
            f"  {format_index(m.name, e.index)} = {format_number(e.got, m.got_dtype)}, "
            f"expected {format_number(e.expected, m.dtype)}"
        )
        if e.error is not None and e.allowed is not None:
            limit = "0 (exact here)" if e.exact else f"{e.allowed:.3g}"
            line += f" (|error| {e.error:.3g} > allowed {limit})"
        lines.append(line)
    if m.wrong > len(m.entries):
        lines.append(f"  ... and {m.wrong - len(m.entries)} more")
    if m.lower_precision:
        lines.append(
            f"Note: {m.name} has dtype {m.got_dtype}, less precise than the inputs' {m.dtype}; "
            f"compute and return in {m.dtype}"
        )
    return "\n".join(lines)


def _py_values(arr: np.ndarray, dtype: str) -> str:
    if arr.ndim == 0:
        x = float(arr)
        if np.isnan(x):
            return "float('nan')"
        if np.isinf(x):
            return "float('inf')" if x > 0 else "-float('inf')"
        return format_number(x, dtype)
    return "[" + ", ".join(_py_values(v, dtype) for v in arr) + "]"


def reproduction(failure: Failure) -> str:
    """A one-line call the student can paste (after importing torch and their function); an
    argument handed over as a view (``layouts``) is built as such a view. "" without arguments."""
    if failure.args is None:
        return ""
    parts = []
    for name, value in failure.args.items():
        full = array_of(value)
        arr = full
        layout = (
            effective_layout(failure.layouts[name], arr.shape) if failure.layouts and name in failure.layouts else None
        )
        if layout == "transposed":
            arr = np.swapaxes(arr, -1, -2)
        elif layout == "expanded":
            arr = np.take(arr, [0], axis=expand_axis(arr.shape))
        if arr.dtype == np.bool_:
            text = f"torch.tensor({arr.tolist()}, dtype=torch.bool)"
        else:
            text = f"torch.tensor({_py_values(arr, failure.dtype)}, dtype=torch.{failure.dtype})"
        if layout == "transposed":
            text += ".mT"
        elif layout == "expanded":
            text += f".expand{tuple(int(n) for n in full.shape)}"
        elif layout == "sliced" and arr.ndim:
            text += ".repeat_interleave(2, dim=-1)[..., ::2]"
        parts.append(text)
    parts.extend(f"{key}={value!r}" for key, value in (failure.keywords or {}).items())
    return f"{failure.function}({', '.join(parts)})"


def _reason(failure: Failure) -> str:
    """Why the failing call failed, in words, under the hidden-case rules."""
    if failure.mismatch is not None:
        cause = failure.hint if failure.mismatch.verdict is Verdict.NON_FINITE and not failure.hidden else ""
        return mismatch_text(failure.mismatch, hidden=failure.hidden, cause=cause)
    if failure.check:
        if failure.hidden:
            return "the property does not hold on this input (details are not shown for a hidden case)"
        return failure.check
    return _hidden_detail(failure) if failure.hidden else failure.detail


def summary_line(failure: Failure) -> str:
    """The first line of the reason: ``"6 of 8 entries of out are wrong"``, ``"raised ValueError: ..."``."""
    if failure.mismatch is not None and failure.hidden:
        return _reason(failure).split(" (hidden case:", 1)[0]
    if failure.mismatch is not None and not failure.mismatch.detail:
        if failure.mismatch.verdict is Verdict.NON_FINITE:
            return _reason(failure).split(";", 1)[0]
        return _head(failure.mismatch)
    return _reason(failure).splitlines()[0] if _reason(failure) else failure.verdict.label


def _where(failure: Failure) -> str:
    position = f"generated input {failure.example} of {failure.examples}"
    if failure.shrunk_from is None:
        return position
    s = failure.shrunk_from
    return (
        f"shrunk by hypothesis from generated input {s.example} of {s.examples} "
        f"({s.size} entries) to {failure.size} entries"
    )


def failure_text(failure: Failure) -> str:
    """The full feedback for one failing case, as lines of text.

    Visible case: what the case checks and where (spec ``file:line``), where the counterexample
    came from, the memory layouts, the reason (worst entries with expected values and tolerance),
    likely cause, known mistake, the worked example's explanation and a paste-ready reproduction
    (the only place the inputs are printed). Hidden case: what it checks and the reason without
    inputs, expected values or submission text. A submission-wide failure (an import error) is
    its reason alone, the same for every case.
    """
    if failure.scope == "submission":
        return _reason(failure)
    hidden = failure.hidden
    lines = []
    if failure.beside:
        lines.append(f"Second cause, outside {failure.beside} (set aside to find it):")
    if failure.kind == "property":
        if failure.property_held:  # the values are the cause, not the property: say so first
            lines.append(
                f"Wrong values on an input drawn for the property: {failure.statement} ({failure.location}) "
                "(the property itself holds on this output; the values differ from the reference)"
            )
        else:
            lines.append(f"Property: {failure.statement} ({failure.location})")
        lines.append(
            f"Failed on a hidden generated input {failure.example} of {failure.examples}."
            if hidden
            else f"Counterexample: {_where(failure)}."
        )
    else:
        lines.append(f"{'Hidden worked' if hidden else 'Worked'} example: {failure.title} ({failure.location})")
    if failure.layout_text and not hidden:
        lines.append(f"Layout: {failure.layout_text}.")
    reason = _reason(failure)
    if reason:
        lines.append(reason)
    if failure.hint and not hidden and failure.verdict is Verdict.WRONG_VALUE:
        lines.append(f"Likely cause: {failure.hint}.")
    if failure.diagnosis is not None:
        lines.append(f"Known mistake ({failure.diagnosis['id']}): {failure.diagnosis['message']}")
    if failure.corner:
        lines.append(convention_text(failure.corner))
    if not hidden:
        if failure.explanation:
            lines.append(f"Why: {' '.join(failure.explanation.split())}")
        if failure.args is not None:
            lines.append(f"Reproduce: {reproduction(failure)}")
    for other in failure.other_causes:
        lines.extend(second_cause_text(other).splitlines())
    return "\n".join(lines)


def convention_text(corner: str) -> str:
    """The line that says a failure lies in a convention corner, and how to set the corner aside.

    >>> print(convention_text("fully_masked_row"))  # doctest: +NORMALIZE_WHITESPACE
    Convention (fully_masked_row): out is wrong in rows whose every key is masked (no key to attend
    to), where this spec states weights 0, so the output row is 0; if another convention there is
    deliberate, set the corner aside (spec: conventions: {fully_masked_row: any}; attnscore test
    --allow fully_masked_row; pytest xfail file: allow:fully_masked_row)
    """
    from attnscore.catalogue.conventions import get_corner

    c = get_corner(corner)
    return (
        f"Convention ({corner}): out is wrong in {c.summary}, where this spec states {c.stated}; if another "
        f"convention there is deliberate, set the corner aside (spec: conventions: {{{corner}: any}}; "
        f"attnscore test --allow {corner}; pytest xfail file: allow:{corner})"
    )


def second_cause_text(failure: Failure) -> str:
    """A second cause (found with the first failure's corner set aside), as indented lines under a
    heading: the case's feedback for it without repeating the case's title line."""
    lines = failure_text(failure).splitlines()
    if failure.scope == "submission" or not failure.beside or len(lines) < 2:
        return "\n".join(lines)
    return "\n".join([lines[0], *(f"  {line}" for line in lines[2:])])  # no second title line


def pytest_text(failure: Failure) -> str:
    """A failing pytest item's report: the verdict, then the case's full feedback."""
    return f"{failure.verdict.label}: {failure_text(failure)}"


def _entry_data(failure: Failure) -> dict[str, Any] | None:
    m = failure.mismatch
    if m is None:
        return None
    if failure.hidden:  # the verdict and the output's name only (hidden_mismatch_text)
        return {"verdict": m.verdict.value, "name": m.name, "detail": hidden_mismatch_text(m)}
    return {
        "verdict": m.verdict.value,
        "name": m.name,
        "detail": m.detail or None,
        "wrong": m.wrong,
        "total": m.total,
        "tolerance": m.tolerance,
        "got_dtype": m.got_dtype,
        "dtype": m.dtype,
        "lower_precision": m.lower_precision,
        "entries": [
            {
                "index": list(e.index),
                "got": _json_number(e.got),
                "expected": _json_number(e.expected),
                "error": _json_number(e.error),
                "allowed": _json_number(e.allowed),
                "exact": bool(e.exact),
            }
            for e in m.entries
        ],
    }


def _json_number(x: float | None) -> float | str | None:
    if x is None:
        return None
    return x if np.isfinite(x) else format_number(x)


def failure_data(failure: Failure) -> dict[str, Any]:
    """The failure's fields as JSON data, under the hidden-case rules (no inputs, expected or
    returned values, explanation, hint or submission text for a hidden case)."""
    hidden = failure.hidden
    shrunk = failure.shrunk_from
    return {
        "verdict": failure.verdict.value,
        "case": failure.case_id,
        "location": failure.location,
        "hidden": hidden,
        "function": failure.function,
        "dtype": None if hidden else failure.dtype,
        "example": failure.example,
        "examples": failure.examples,
        "scope": failure.scope,
        "reason": summary_line(failure),
        "args": None if hidden else failure.args,
        "layouts": None if hidden else failure.layouts,
        "keywords": dict(failure.keywords or {}),
        "mismatch": _entry_data(failure),
        "check": None if hidden else failure.check or None,
        "detail": _hidden_detail(failure) if hidden else failure.detail or None,
        "exception": failure.exception if not hidden or failure.exception in _BUILTIN_EXCEPTIONS else None,
        "hint": None if hidden else failure.hint or None,
        "diagnosis": dict(failure.diagnosis) if failure.diagnosis else None,
        "explanation": None if hidden else failure.explanation or None,
        "shrunk_from": None
        if shrunk is None or hidden
        else {"example": shrunk.example, "examples": shrunk.examples, "size": shrunk.size},
        "size": None if hidden else failure.size,
        "reproduce": None if hidden or failure.args is None else reproduction(failure),
        "corner": failure.corner or None,
        "set_aside": list(failure.set_aside),
        "beside": failure.beside or None,
        "other_causes": [failure_data(o) for o in failure.other_causes],
    }


@dataclass(frozen=True)
class CauseGroup:
    """Failing cases with one cause: ``lead`` is shown in full, ``others`` one line each.

    ``cause`` says what the cases share: ``"known mistake <id>"``, ``"raised <type>"`` or a
    verdict (``"wrong shape"``, ``"timeout"``).
    """

    cause: str
    lead: Failure
    others: tuple[Failure, ...]


_BY_VERDICT = (Verdict.WRONG_SHAPE, Verdict.WRONG_DTYPE, Verdict.BAD_RETURN_TYPE, Verdict.NON_FINITE)


def cause_key(failure: Failure) -> tuple[str, ...] | None:
    """What makes two failures one cause: the same diagnosed mistake, the same exception type, or
    the same verdict of a kind that names its cause (shape, dtype, return type, non-finite, time
    limit, crash); None for an undiagnosed wrong value or a property's own check, which stand alone."""
    if failure.diagnosis is not None:
        return ("mistake", failure.diagnosis["id"])
    if failure.corner:
        return ("corner", failure.corner)
    if failure.verdict is Verdict.EXCEPTION and failure.exception:
        return ("exception", failure.exception)
    if (failure.mismatch is None and not failure.check) or failure.verdict in _BY_VERDICT:
        return ("verdict", failure.verdict.value)
    return None


def cause_groups(failures: Sequence[Failure]) -> list[CauseGroup]:
    """Group failing cases by cause, in the order causes first appear.

    The lead of a group is its visible case with the smallest counterexample (fewest input
    entries; the first such case on ties), or its first case when all are hidden. Submission-wide
    failures (an import error) are left out: a report shows that error once. A failure's second
    causes (``other_causes``, found with a convention corner set aside) are causes of their own:
    each joins its own group, and a failure leads without them (its group says the first cause).
    """
    flat = [
        member
        for failure in failures
        for member in (dataclasses.replace(failure, other_causes=()), *failure.other_causes)
    ]
    keyed: dict[tuple[str, ...] | int, list[Failure]] = {}
    for i, failure in enumerate(flat):
        if failure.scope == "submission":
            continue
        key = cause_key(failure)
        keyed.setdefault(i if key is None else key, []).append(failure)
    groups = []
    for group_key, members in keyed.items():
        visible = [f for f in members if not f.hidden]
        lead = min(visible, key=lambda f: f.size) if visible else members[0]
        cause = members[0].verdict.label
        if isinstance(group_key, tuple) and group_key[0] == "mistake":
            cause = f"known mistake {group_key[1]}"
        elif isinstance(group_key, tuple) and group_key[0] == "corner":
            cause = f"convention corner {group_key[1]}"
        elif isinstance(group_key, tuple) and group_key[0] == "exception":
            cause = (
                f"raised {lead.exception}"
                if not lead.hidden or lead.exception in _BUILTIN_EXCEPTIONS
                else "an exception"
            )
        groups.append(CauseGroup(cause, lead, tuple(f for f in members if f is not lead)))
    return groups
