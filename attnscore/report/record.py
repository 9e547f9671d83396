"""Records: a :class:`SubmissionResult` as lossless plain data, and back.

The JSON report (:mod:`attnscore.report.json_report`) rounds points for people; a record keeps
them exact (``"7/3"``), so a result stored in the gradebook or sent back from a cluster worker
comes back equal to the one that was graded. Records hold only ``dict``, ``list``, ``str``,
``int``, ``float``, ``bool`` and ``None``: reading one never runs code.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from attnscore.report.failure import EntryMismatch, Failure, Mismatch, ShrunkFrom
from attnscore.report.results import CaseResult, SubmissionResult, Verdict

__all__ = ["RECORD_FORMAT", "RecordError", "result_to_record", "result_from_record"]

RECORD_FORMAT = "attnscore-record/2"
"""Version 2: a failed case carries its whole failure record (:class:`~attnscore.report.failure.Failure`)."""

_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class RecordError(ValueError):
    """A record is not a well-formed ``attnscore-record/1`` object (field path and what was found)."""


def _number(x: float | None) -> float | str | None:
    """A float as strict-JSON data: NaN and ±inf become "nan", "inf", "-inf"."""
    if x is None or math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _failure_record(f: Failure) -> dict[str, Any]:
    m = f.mismatch
    return {
        "verdict": f.verdict.value,
        "case_id": f.case_id,
        "kind": f.kind,
        "title": f.title,
        "location": f.location,
        "hidden": f.hidden,
        "function": f.function,
        "dtype": f.dtype,
        "statement": f.statement,
        "call": f.call,
        "example": f.example,
        "examples": f.examples,
        "args": f.args,
        "layouts": f.layouts,
        "layout_text": f.layout_text,
        "keywords": f.keywords,
        "mismatch": None
        if m is None
        else {
            "verdict": m.verdict.value,
            "name": m.name,
            "detail": m.detail,
            "wrong": m.wrong,
            "total": m.total,
            "entries": [
                {
                    "index": list(e.index),
                    "got": _number(e.got),
                    "expected": _number(e.expected),
                    "error": _number(e.error),
                    "allowed": _number(e.allowed),
                    "exact": e.exact,
                }
                for e in m.entries
            ],
            "tolerance": m.tolerance,
            "got_dtype": m.got_dtype,
            "dtype": m.dtype,
            "lower_precision": m.lower_precision,
        },
        "check": f.check,
        "detail": f.detail,
        "exception": f.exception,
        "scope": f.scope,
        "disclosed": f.disclosed,
        "hint": f.hint,
        "diagnosis": dict(f.diagnosis) if f.diagnosis else None,
        "explanation": f.explanation,
        "shrunk_from": None
        if f.shrunk_from is None
        else {"example": f.shrunk_from.example, "examples": f.shrunk_from.examples, "size": f.shrunk_from.size},
        "corner": f.corner,
        "set_aside": list(f.set_aside),
        "beside": f.beside,
        "other_causes": [_failure_record(o) for o in f.other_causes],
        "property_held": f.property_held,
    }


def _case_record(case: CaseResult) -> dict[str, Any]:
    return {
        "id": case.id,
        "kind": case.kind,
        "title": case.title,
        "verdict": case.verdict.value,
        "points": str(case.points),
        "max_points": str(case.max_points),
        "visibility": case.visibility,
        "location": case.location,
        "failure": None if case.failure is None else _failure_record(case.failure),
        "calls": case.calls,
    }


def result_to_record(result: SubmissionResult) -> dict[str, Any]:
    """``result`` as plain data with exact points (fraction strings such as ``"7/3"``)."""
    return {
        "format": RECORD_FORMAT,
        "submission": result.submission,
        "spec_id": result.spec_id,
        "spec_version": result.spec_version,
        "spec_path": result.spec_path,
        "function": result.function,
        "dtype": result.dtype,
        "device": result.device,
        "seed": result.seed,
        "duration_s": result.duration_s,
        "error": result.error,
        "output": result.output,
        "environment": dict(result.environment),
        "cases": [_case_record(c) for c in result.cases],
    }


def _get(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise RecordError(f"{where}.{key}: expected a value, found none")
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RecordError(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}, found {type(value).__name__}")
    return value


def _optional(data: dict[str, Any], key: str, kind: type, default: Any, where: str) -> Any:
    """``data[key]`` checked like :func:`_get`, or ``default`` when the key is absent."""
    return _get(data, key, kind, where) if key in data else default


def _fraction(data: dict[str, Any], key: str, where: str) -> Fraction:
    text = _get(data, key, str, where)
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise RecordError(f"{where}.{key}: expected exact points such as '7/3', found {text!r}") from None


def _verdict(data: dict[str, Any], where: str) -> Verdict:
    verdict = _get(data, "verdict", str, where)
    try:
        return Verdict(verdict)
    except ValueError:
        raise RecordError(f"{where}.verdict: expected one of the verdicts, found {verdict!r}") from None


def _float(data: dict[str, Any], key: str, where: str, optional: bool = False) -> Any:
    kinds: tuple[type, ...] = (int, float, str, type(None)) if optional else (int, float, str)
    value = _get(data, key, kinds, where)
    if isinstance(value, str):
        if value not in _NON_FINITE:
            raise RecordError(f"{where}.{key}: expected a number, 'nan', 'inf' or '-inf', found {value!r}")
        return _NON_FINITE[value]
    return None if value is None else float(value)


def _object(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise RecordError(f"{where}: expected an object, found {type(data).__name__}")
    return data


def _mismatch_from(data: Any, where: str) -> Mismatch:
    data = _object(data, where)
    entries = []
    for i, raw in enumerate(_get(data, "entries", list, where)):
        at = f"{where}.entries[{i}]"
        e = _object(raw, at)
        index = _get(e, "index", list, at)
        if not all(isinstance(k, int) and not isinstance(k, bool) for k in index):
            raise RecordError(f"{at}.index: expected a list of integers, found {index!r}")
        entries.append(
            EntryMismatch(
                index=tuple(index),
                got=_float(e, "got", at),
                expected=_float(e, "expected", at),
                error=_float(e, "error", at, optional=True),
                allowed=_float(e, "allowed", at, optional=True),
                exact=_get(e, "exact", bool, at),
            )
        )
    return Mismatch(
        verdict=_verdict(data, where),
        name=_get(data, "name", str, where),
        detail=_get(data, "detail", str, where),
        wrong=_get(data, "wrong", int, where),
        total=_get(data, "total", int, where),
        entries=tuple(entries),
        tolerance=_get(data, "tolerance", str, where),
        got_dtype=_get(data, "got_dtype", str, where),
        dtype=_get(data, "dtype", str, where),
        lower_precision=_get(data, "lower_precision", bool, where),
    )


def _failure_from(data: Any, where: str) -> Failure:
    data = _object(data, where)
    optional_dict = (dict, type(None))
    shrunk = _get(data, "shrunk_from", optional_dict, where)
    mismatch = _get(data, "mismatch", optional_dict, where)
    return Failure(
        verdict=_verdict(data, where),
        case_id=_get(data, "case_id", str, where),
        kind=_get(data, "kind", str, where),
        title=_get(data, "title", str, where),
        location=_get(data, "location", str, where),
        hidden=_get(data, "hidden", bool, where),
        function=_get(data, "function", str, where),
        dtype=_get(data, "dtype", str, where),
        statement=_get(data, "statement", str, where),
        call=_get(data, "call", int, where),
        example=_get(data, "example", int, where),
        examples=_get(data, "examples", int, where),
        args=_get(data, "args", optional_dict, where),
        layouts=_get(data, "layouts", optional_dict, where),
        layout_text=_get(data, "layout_text", str, where),
        keywords=_get(data, "keywords", optional_dict, where),
        mismatch=None if mismatch is None else _mismatch_from(mismatch, f"{where}.mismatch"),
        check=_get(data, "check", str, where),
        detail=_get(data, "detail", str, where),
        exception=_get(data, "exception", str, where),
        scope=_get(data, "scope", str, where),
        disclosed=_get(data, "disclosed", bool, where),
        hint=_get(data, "hint", str, where),
        diagnosis=_get(data, "diagnosis", optional_dict, where),
        explanation=_get(data, "explanation", str, where),
        shrunk_from=None
        if shrunk is None
        else ShrunkFrom(
            example=_get(shrunk, "example", int, f"{where}.shrunk_from"),
            examples=_get(shrunk, "examples", int, f"{where}.shrunk_from"),
            size=_get(shrunk, "size", int, f"{where}.shrunk_from"),
        ),
        # convention corners (absent from records written before them: the defaults)
        corner=_optional(data, "corner", str, "", where),
        set_aside=tuple(_optional(data, "set_aside", list, [], where)),
        beside=_optional(data, "beside", str, "", where),
        other_causes=tuple(
            _failure_from(o, f"{where}.other_causes[{i}]")
            for i, o in enumerate(_optional(data, "other_causes", list, [], where))
        ),
        property_held=bool(data.get("property_held", False)),
    )


def _case_from(data: Any, where: str) -> CaseResult:
    data = _object(data, where)
    parsed = _verdict(data, where)
    failure = _get(data, "failure", (dict, type(None)), where)
    return CaseResult(
        id=_get(data, "id", str, where),
        kind=_get(data, "kind", str, where),
        title=_get(data, "title", str, where),
        verdict=parsed,
        points=_fraction(data, "points", where),
        max_points=_fraction(data, "max_points", where),
        visibility=_get(data, "visibility", str, where),
        location=_get(data, "location", str, where),
        failure=None if failure is None else _failure_from(failure, f"{where}.failure"),
        calls=_get(data, "calls", int, where),
    )


def result_from_record(data: Any) -> SubmissionResult:
    """The :class:`SubmissionResult` that :func:`result_to_record` turned into ``data``.

    Raises:
        RecordError: ``data`` is not a record of this format (the message names the field).
    """
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise RecordError(f"record.format: expected {RECORD_FORMAT!r}, found {found!r}")
    cases = _get(data, "cases", list, "record")
    return SubmissionResult(
        submission=_get(data, "submission", str, "record"),
        spec_id=_get(data, "spec_id", str, "record"),
        spec_version=_get(data, "spec_version", int, "record"),
        spec_path=_get(data, "spec_path", str, "record"),
        function=_get(data, "function", str, "record"),
        cases=tuple(_case_from(c, f"record.cases[{i}]") for i, c in enumerate(cases)),
        dtype=_get(data, "dtype", str, "record"),
        device=_get(data, "device", str, "record"),
        seed=_get(data, "seed", int, "record"),
        duration_s=float(_get(data, "duration_s", (int, float), "record")),
        error=_get(data, "error", str, "record"),
        output=_get(data, "output", str, "record"),
        environment=dict(_get(data, "environment", dict, "record")),
    )
