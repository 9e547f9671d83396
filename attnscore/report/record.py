"""Records: a :class:`SubmissionResult` as lossless plain data, and back.

The JSON report (:mod:`attnscore.report.json_report`) rounds points for people; a record keeps
them exact (``"7/3"``), so a result stored in the gradebook or sent back from a cluster worker
comes back equal to the one that was graded. A record is the result's fields as the one codec
writes them (:mod:`attnscore.report.codec`: one key per dataclass field, NaN and ±inf as words),
with a ``format`` key first. Records hold only ``dict``, ``list``, ``str``, ``int``, ``float``,
``bool`` and ``None``: reading one never runs code.
"""

from __future__ import annotations

from typing import Any

from attnscore.report.codec import CodecError, decode, encode
from attnscore.report.results import SubmissionResult

__all__ = ["RECORD_FORMAT", "RecordError", "result_to_record", "result_from_record"]

RECORD_FORMAT = "attnscore-record/2"
"""Version 2: a failed case carries its whole failure record (:class:`~attnscore.report.failure.Failure`)."""


class RecordError(ValueError):
    """A record is not a well-formed ``attnscore-record/2`` object (field path and what was found)."""


def result_to_record(result: SubmissionResult) -> dict[str, Any]:
    """``result`` as plain data with exact points (fraction strings such as ``"7/3"``)."""
    return {"format": RECORD_FORMAT, **encode(result)}


def result_from_record(data: Any) -> SubmissionResult:
    """The :class:`SubmissionResult` that :func:`result_to_record` turned into ``data``.

    Raises:
        RecordError: ``data`` is not a record of this format (the message names the field).
    """
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise RecordError(f"record.format: expected {RECORD_FORMAT!r}, found {found!r}")
    try:
        return decode(SubmissionResult, data, "record")
    except CodecError as exc:
        raise RecordError(str(exc)) from None
