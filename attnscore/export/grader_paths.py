"""Text for a student without the grading machine's paths.

A message about a submission names it by the path it was read from (``/autograder/submission:
expected a .py or .ipynb file ...``); on a course platform that folder is the grader's, not
anything the student knows. Feedback names the submission by its own files instead (see
:attr:`attnscore.submission.files.Submission.name` and ``docs/feedback.md``, "Locations").
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["without_grader_path"]


def without_grader_path(text: str, folder: str | Path) -> str:
    """``text`` with the submission folder ``folder`` taken out of it.

    ``FOLDER: why`` becomes ``why``, ``FOLDER/hw3/solution.py`` becomes ``hw3/solution.py`` (a path
    inside the upload, as the student named it), and any other mention of ``FOLDER`` becomes
    ``your submission``.

    Example:
        >>> without_grader_path("/grade/student: expected a .py file, found none", "/grade/student")
        'expected a .py file, found none'
        >>> without_grader_path("/grade/student/hw3/a.py: too large", "/grade/student/")
        'hw3/a.py: too large'
    """
    where = str(folder).rstrip("/") or "/"
    return text.replace(f"{where}: ", "").replace(f"{where}/", "").replace(where, "your submission")
