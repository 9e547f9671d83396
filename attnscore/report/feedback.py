"""Feedback: a :class:`~attnscore.report.failure.Failure` rendered once, late, for every output.

Every reporter goes through here: the terminal report (:mod:`attnscore.report.text`), JSON
(:mod:`attnscore.report.json_report`), Gradescope (:mod:`attnscore.report.gradescope`) and the
pytest plugin's failure text. Each public function here first applies
:func:`attnscore.report.redact.redact`, the one place that holds the hidden-case rules (for a
hidden case no input, no expected value, no returned value and no text the submission wrote is
rendered, in any format), and then renders what is left; nothing here decides again what a hidden
case may say.

Repeated feedback is collapsed by :func:`cause_groups`: failing cases with the same cause (the
same diagnosed mistake, or the same failure text) form one group, shown in full once, for its
smallest visible counterexample, and as one line per other case.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnscore.boundary.layouts import OMIT, PASS_NONE, effective_layout, expand_axis
from attnscore.boundary.verdict import Verdict
from attnscore.maths.display import counted, format_array, format_index, format_number, shape_text
from attnscore.report.codec import encode
from attnscore.report.failure import Failure, Mismatch, Withheld, array_of
from attnscore.report.redact import HIDDEN_NOTE, redact, withhold

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
    "at",
]


_WITHHELD = {
    Verdict.WRONG_VALUE: "{name} has wrong values",
    Verdict.WRONG_SHAPE: "{name} has the wrong shape",
    Verdict.WRONG_DTYPE: "{name} has the wrong dtype: scores are real numbers, so return a floating result",
    Verdict.NON_FINITE: (
        "{name} has NaN or infinite entries where it should not; look for a division by zero, an overflow or "
        "a log/sqrt of a bad value"
    ),
    Verdict.BAD_RETURN_TYPE: "returned something that is not one numeric result",
}


def _withheld_words(m: Withheld) -> str:
    return _WITHHELD.get(m.verdict, "{name} does not match").format(name=m.name)


def hidden_mismatch_text(m: Mismatch | Withheld) -> str:
    """What a hidden case may say about a comparison: its verdict in generic words, nothing more.

    A hidden case's feedback never holds its inputs, expected values, expected shape or dtype,
    nor anything derived from them (entry counts and indices give the shape away, the returned
    shape follows from the inputs): only the output's name and the kind of mismatch.

    >>> hidden_mismatch_text(Mismatch(Verdict.WRONG_SHAPE, detail="out has shape (2,), expected shape (3,)"))
    'out has the wrong shape (hidden case: its inputs and expected values, shape and dtype are not shown)'
    """
    return f"{_withheld_words(withhold(m))} ({HIDDEN_NOTE})"


def _head(m: Mismatch) -> str:
    if m.verdict is Verdict.NON_FINITE:
        return f"{m.wrong} of {m.total} entries of {m.name} are non-finite where they should not be"
    return f"{m.wrong} of {m.total} entries of {m.name} are wrong" if m.total > 1 else f"{m.name} is wrong"


def mismatch_text(m: Mismatch | Withheld, *, hidden: bool = False, cause: str = "") -> str:
    """A comparison's findings in words: the reason, or a count and the worst entries.

    >>> from attnscore.report.failure import EntryMismatch
    >>> print(mismatch_text(Mismatch(Verdict.WRONG_VALUE, wrong=1, total=3, tolerance="exact comparison",
    ...     entries=(EntryMismatch((1,), 0.5, 0.0, 0.5, 0.0, exact=True),), got_dtype="float32", dtype="float32")))
    1 of 3 entries of out are wrong (exact comparison):
      out[1] = 0.5, expected 0 (|error| 0.5 > allowed 0 (exact here))

    ``cause``: a specific cause of non-finite entries (a masked row), said instead of the generic hint.
    A :class:`~attnscore.report.failure.Withheld` comparison (``hidden``: ``m`` withheld first)
    says only its kind: :func:`hidden_mismatch_text`.
    """
    if hidden or isinstance(m, Withheld):
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
    argument handed over as a view (``layouts``) is built as such a view, an optional one the call
    left out is left out, one passed as None is ``None``. "" without arguments (a submission-wide
    failure, a hidden case)."""
    failure = redact(failure)
    if failure.args is None:
        return ""
    parts = []
    texts: dict[str, str] = {}  # each argument's text, for a module's reproduction
    for name, value in failure.args.items():
        handover = (failure.layouts or {}).get(name)
        if handover == OMIT:
            continue
        if handover == PASS_NONE:
            parts.append(f"{name}=None" if name in failure.by_name else "None")
            texts[name] = "None"
            continue
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
        elif arr.dtype == np.int32 and arr.ndim == 0:
            text = str(int(arr))  # an integer parameter of shape () is passed as a Python int
        elif arr.dtype == np.int32:
            text = f"torch.tensor({arr.tolist()}, dtype=torch.int32)"
        else:
            text = f"torch.tensor({_py_values(arr, failure.dtype)}, dtype=torch.{failure.dtype})"
        if layout == "transposed":
            text += ".mT"
        elif layout == "expanded":
            text += f".expand{tuple(int(n) for n in full.shape)}"
        elif layout == "sliced" and arr.ndim:
            text += ".repeat_interleave(2, dim=-1)[..., ::2]"
        parts.append(f"{name}={text}" if name in failure.by_name else text)
        texts[name] = text
    parts.extend(f"{key}={value!r}" for key, value in (failure.keywords or {}).items())
    if failure.module is not None:
        return _module_reproduction(failure, texts)
    return f"{failure.function}({', '.join(parts)})"


def _module_reproduction(failure: Failure, texts: dict[str, str]) -> str:
    """A module handed in, built and called as the grader does (:mod:`attnscore.boundary.modules`):
    ``torch.func.functional_call(Class(init...), {"weight": W}, (Q, K))``, the spec's keywords last."""
    from attnscore.boundary.modules import ModuleConfig

    config = ModuleConfig.from_json(failure.module)
    values = {n: array_of(v) for n, v in (failure.args or {}).items()}
    try:
        init = config.init_kwargs({n: np.shape(v) for n, v in values.items()}, values)
    except ValueError:
        init = {}
    built = f"{failure.function}({', '.join(f'{k}={v!r}' for k, v in init.items())})"
    held = {**config.weight_names, **{n: "" for n in config.init_inputs}}  # neither goes to forward
    weights = ", ".join(f"{module_name!r}: {texts[p]}" for p, module_name in config.weights if p in texts)
    order = [n for n in (config.forward or tuple(texts)) if n in texts and n not in held]
    order += [n for n in texts if n not in held and n not in order]
    inputs = [texts[n] for n in order]
    forward = f"({', '.join(inputs)}{',' if len(inputs) == 1 else ''})"
    if failure.keywords:
        shown = ", ".join(f"{k!r}: {v!r}" for k, v in failure.keywords.items())
        return f"torch.func.functional_call({built}, {{{weights}}}, {forward}, {{{shown}}})"
    return f"torch.func.functional_call({built}, {{{weights}}}, {forward})"


def _reason(failure: Failure) -> str:
    """Why the failing call of a redacted failure failed, in words."""
    m = failure.mismatch
    if m is not None:
        cause = failure.hint if m.verdict is Verdict.NON_FINITE else ""
        return mismatch_text(m, cause=cause)
    return failure.check or failure.detail


def summary_line(failure: Failure) -> str:
    """The first line of the reason: ``"6 of 8 entries of out are wrong"``, ``"raised ValueError: ..."``."""
    failure = redact(failure)
    m = failure.mismatch
    if isinstance(m, Withheld):
        return _withheld_words(m)
    if m is not None and not m.detail:
        if m.verdict is Verdict.NON_FINITE:
            return _reason(failure).split(";", 1)[0]
        return _head(m)
    reason = _reason(failure)
    return reason.splitlines()[0] if reason else failure.verdict.label


def _where(failure: Failure) -> str:
    position = f"generated input {failure.example} of {failure.examples}"
    if failure.shrunk_from is None:
        return position
    s = failure.shrunk_from
    if s.how == "drawn":
        return (
            f"generated input {failure.example} of {failure.examples} ({counted(failure.size, 'entry', 'entries')}), "
            f"the smallest that fails this way; the first to fail was input {s.example} "
            f"({counted(s.size, 'entry', 'entries')})"
        )
    if s.how == "small":
        return (
            f"a small input drawn to show this failure ({counted(failure.size, 'entry', 'entries')}), the smallest "
            f"that fails this way; the first to fail was generated input {s.example} of {s.examples} "
            f"({counted(s.size, 'entry', 'entries')})"
        )
    return (
        f"shrunk by hypothesis from generated input {s.example} of {s.examples} "
        f"({counted(s.size, 'entry', 'entries')}) to {counted(failure.size, 'entry', 'entries')}"
    )


def at(location: str) -> str:
    """`` (score_matrix.yaml:35)`` after a case's name, or "" for a case shown without its spec line
    (a hidden case as students see it, :func:`attnscore.report.redact.for_students`).

    >>> at("score_matrix.yaml:35"), at("")
    (' (score_matrix.yaml:35)', '')
    """
    return f" ({location})" if location else ""


def failure_text(failure: Failure) -> str:
    """The full feedback for one failing case, as lines of text.

    Visible case: what the case checks and where (spec ``file:line``), where the counterexample
    came from, the memory layouts, the reason (worst entries with expected values and tolerance),
    likely cause, known mistake, the worked example's explanation and a paste-ready reproduction
    (the only place the inputs are printed). Hidden case: what it checks and the reason without
    inputs, expected values or submission text. A submission-wide failure (an import error) is
    its reason alone, the same for every case.
    """
    failure = redact(failure)
    if failure.scope == "submission":
        return _reason(failure)
    hidden = failure.hidden  # only to say so: what may be shown is already decided
    if failure.verdict is Verdict.BUDGET_SPENT:
        return _not_run_text(failure, hidden)
    lines = []
    if failure.beside:
        lines.append(f"Second cause, outside {failure.beside} (set aside to find it):")
    if failure.kind == "property":
        if failure.property_held:  # the values are the cause, not the property: say so first
            lines.append(
                f"Wrong values on an input drawn for the property: {failure.statement}{at(failure.location)} "
                "(the property itself holds on this output; the values differ from the reference)"
            )
        else:
            lines.append(f"Property: {failure.statement}{at(failure.location)}")
        lines.append(
            f"Failed on a hidden generated input {failure.example} of {failure.examples}."
            if hidden
            else f"Counterexample: {_where(failure)}."
        )
    elif failure.kind == "rule":
        lines.append(f"Rule: {failure.statement}{at(failure.location)}")
    else:
        lines.append(f"{'Hidden worked' if hidden else 'Worked'} example: {failure.title}{at(failure.location)}")
    if failure.advice:
        lines.append(
            "Advice only (no points): this spec does not ask about this convention; the case says what your code "
            "does there."
        )
    if failure.layout_text:
        lines.append(f"Layout: {failure.layout_text}.")
    reason = _reason(failure)
    if reason:
        lines.append(reason)
    if failure.hint and failure.verdict is Verdict.WRONG_VALUE:
        lines.append(f"Likely cause: {failure.hint}.")
    if failure.diagnosis is not None:
        lines.append(f"Known mistake ({failure.diagnosis['id']}): {failure.diagnosis['message']}")
    if failure.corner:
        lines.append(
            convention_text(failure.corner, failure.corner_found, advice=failure.advice, student=failure.for_students)
        )
    if failure.explanation:
        lines.append(f"Why: {' '.join(failure.explanation.split())}")
    if failure.args is not None:
        lines.append(f"Reproduce: {reproduction(failure)}")
    for other in failure.other_causes:
        lines.extend(second_cause_text(other).splitlines())
    return "\n".join(lines)


def _not_run_text(failure: Failure, hidden: bool) -> str:
    """A case the time budget left unrun (:attr:`Verdict.BUDGET_SPENT`): what it checks, where it
    stopped when some of its calls ran, and the budget's sentence; no counterexample (nothing ran)."""
    if failure.kind == "property":
        lines = [f"Property: {failure.statement}{at(failure.location)}"]
    else:
        lines = [f"{'Hidden worked' if hidden else 'Worked'} example: {failure.title}{at(failure.location)}"]
    if failure.example > 1:
        lines.append(f"Stopped before generated input {failure.example} of {failure.examples} (the earlier ones ran).")
    lines.append(failure.detail)
    return "\n".join(lines)


def convention_text(corner: str, found: str = "", advice: bool = False, student: bool = False) -> str:
    """The line that says a failure lies in a convention corner, what the output came out as there
    (``found``, e.g. ``"NaN"``; :attr:`Failure.corner_found`), what the spec states, and how a
    course or an engineer says that another convention is deliberate (not on an ``advice`` case:
    its spec already says the corner is not asked about; not to a ``student``, who cannot).

    >>> print(convention_text("fully_masked_row", "NaN"))  # doctest: +NORMALIZE_WHITESPACE
    Convention (fully_masked_row): your rows with every key masked come out NaN; this spec states
    weights 0, so the output row is 0. Only the cases that test this convention count it; if another
    convention there is deliberate, say so (spec: conventions: {fully_masked_row: not_asked} or
    {fully_masked_row: any}; attnscore test --allow fully_masked_row; pytest xfail file:
    allow:fully_masked_row)
    >>> print(convention_text("fully_masked_row", "NaN", student=True))  # doctest: +NORMALIZE_WHITESPACE
    Convention (fully_masked_row): your rows with every key masked come out NaN; this spec states
    weights 0, so the output row is 0. Only the cases that test it count it.
    """
    from attnscore.catalogue.conventions import get_corner

    c = get_corner(corner)
    came = f"{c.rows} come out {found}" if found and found != "other values" else f"out is wrong in {c.summary}"
    if advice:
        return f"Convention ({corner}): {came}; the spec's own convention is: {c.stated}."
    if student:
        return f"Convention ({corner}): {came}; this spec states {c.stated}. Only the cases that test it count it."
    return (
        f"Convention ({corner}): {came}; this spec states {c.stated}. Only the cases that test this convention "
        f"count it; if another convention there is deliberate, say so (spec: conventions: {{{corner}: not_asked}} "
        f"or {{{corner}: any}}; attnscore test --allow {corner}; pytest xfail file: allow:{corner})"
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


def _mismatch_data(m: Mismatch | Withheld | None) -> dict[str, Any] | None:
    """A (redacted) comparison as the JSON report shows it: the record's fields (:func:`encode`),
    an empty detail as null; a withheld one with its generic words as the detail."""
    if m is None:
        return None
    if isinstance(m, Withheld):
        return {**encode(m), "detail": hidden_mismatch_text(m)}
    return {**encode(m), "detail": m.detail or None}


def failure_data(failure: Failure) -> dict[str, Any]:
    """The failure's fields as JSON data, redacted (:func:`attnscore.report.redact.redact`: no
    inputs, expected or returned values, explanation, hint or submission text for a hidden case).

    The values are the record's (:func:`attnscore.report.codec.encode`: NaN and ±inf as words),
    under the JSON report's key names, with empty texts as null, plus the rendered ``reason``,
    ``reproduce`` and ``size`` (null without arguments).
    """
    failure = redact(failure)
    data = encode(failure)
    return {
        "verdict": data["verdict"],
        "case": data["case_id"],
        "location": data["location"],
        "hidden": data["hidden"],
        "function": data["function"],
        "dtype": data["dtype"] or None,
        "example": data["example"],
        "examples": data["examples"],
        "scope": data["scope"],
        "reason": summary_line(failure),
        "args": data["args"],
        "layouts": data["layouts"],
        "keywords": data["keywords"] or {},
        "mismatch": _mismatch_data(failure.mismatch),
        "check": data["check"] or None,
        "detail": data["detail"] or None,
        "exception": data["exception"],
        "hint": data["hint"] or None,
        "diagnosis": data["diagnosis"],
        "explanation": data["explanation"] or None,
        "shrunk_from": data["shrunk_from"],
        "size": None if failure.args is None else failure.size,
        "reproduce": reproduction(failure) or None,
        "corner": data["corner"] or None,
        "set_aside": data["set_aside"],
        "beside": data["beside"] or None,
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
    for group_key, raw in keyed.items():
        members = [redact(f) for f in raw]  # grouped by the whole record, shown redacted
        visible = [f for f in members if not f.hidden]
        lead = min(visible, key=lambda f: f.size) if visible else members[0]
        cause = members[0].verdict.label
        if isinstance(group_key, tuple) and group_key[0] == "mistake":
            cause = f"known mistake {group_key[1]}"
        elif isinstance(group_key, tuple) and group_key[0] == "corner":
            cause = f"convention corner {group_key[1]}"
        elif isinstance(group_key, tuple) and group_key[0] == "exception":
            cause = f"raised {lead.exception}" if lead.exception else "an exception"
        groups.append(CauseGroup(cause, lead, tuple(f for f in members if f is not lead)))
    return groups
