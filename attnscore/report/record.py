"""Records: a :class:`SubmissionResult` as lossless plain data, and back.

The JSON report (:mod:`attnscore.report.json_report`) rounds points for people; a record keeps
them exact (``"7/3"``), so a result stored in the gradebook or sent back from a cluster worker
comes back equal to the one that was graded. Records hold only ``dict``, ``list``, ``str``,
``int``, ``float``, ``bool`` and ``None``: reading one never runs code.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from attnscore.report.results import CaseResult, SubmissionResult, Verdict

__all__ = ["RECORD_FORMAT", "RecordError", "result_to_record", "result_from_record"]

RECORD_FORMAT = "attnscore-record/1"


class RecordError(ValueError):
    """A record is not a well-formed ``attnscore-record/1`` object (field path and what was found)."""


def _case_record(case: CaseResult) -> dict[str, Any]:
    return {
        "id": case.id,
        "kind": case.kind,
        "title": case.title,
        "verdict": case.verdict.value,
        "points": str(case.points),
        "max_points": str(case.max_points),
        "message": case.message,
        "visibility": case.visibility,
        "location": case.location,
        "counterexample": case.counterexample,
        "calls": case.calls,
        "diagnosis": dict(case.diagnosis) if case.diagnosis else None,
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


def _fraction(data: dict[str, Any], key: str, where: str) -> Fraction:
    text = _get(data, key, str, where)
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise RecordError(f"{where}.{key}: expected exact points such as '7/3', found {text!r}") from None


def _case_from(data: Any, where: str) -> CaseResult:
    if not isinstance(data, dict):
        raise RecordError(f"{where}: expected an object, found {type(data).__name__}")
    verdict = _get(data, "verdict", str, where)
    try:
        parsed = Verdict(verdict)
    except ValueError:
        raise RecordError(f"{where}.verdict: expected one of the verdicts, found {verdict!r}") from None
    return CaseResult(
        id=_get(data, "id", str, where),
        kind=_get(data, "kind", str, where),
        title=_get(data, "title", str, where),
        verdict=parsed,
        points=_fraction(data, "points", where),
        max_points=_fraction(data, "max_points", where),
        message=_get(data, "message", str, where),
        visibility=_get(data, "visibility", str, where),
        location=_get(data, "location", str, where),
        counterexample=_get(data, "counterexample", (dict, type(None)), where),
        calls=_get(data, "calls", int, where),
        diagnosis=_get(data, "diagnosis", (dict, type(None)), where),
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
