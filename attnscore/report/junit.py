"""JUnit XML of graded results, for CI dashboards and test-report viewers.

``<testsuites>`` holds one ``<testsuite>`` per submission and question: an assignment's result
(one with questions) gives one suite per question, named ``SUBMISSION: QUESTION`` (the question's
points, maximum, function and spec as ``<property>`` elements), a single spec's result one suite
named ``SUBMISSION: SPEC``. Each case is a ``<testcase>`` (``classname`` the submission's file name
and the question or spec id joined by a dot, ``name`` the case's label): a passed case (or one that
only advises) is empty, a failed one holds ``<failure>`` (``type`` its verdict, ``message`` the
one-line summary, the full feedback as text) or, when the grading machine failed, ``<error>``.
A question that could not be graded (its function missing) says so in its suite's
``<system-err>``, as a submission-wide error does in every suite of that submission.

This is the instructor's report: cases keep their ids and titles, and failures are rendered by
:mod:`attnscore.report.feedback` (hidden cases redacted there, as in every report). Text is XML
escaped, and characters XML 1.0 cannot hold are dropped. Points are rounded once, from the exact
sums (:func:`attnscore.report.results.points_out`).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from attnscore.report.feedback import failure_text, summary_line
from attnscore.report.questions import question_scores
from attnscore.report.results import CaseResult, SubmissionResult, Verdict, points_out

__all__ = ["junit_xml"]

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold (control characters, lone surrogates)."""
    return _NOT_XML.sub("", text)


def _case(parent: ET.Element, case: CaseResult, classname: str) -> tuple[int, int]:
    """Add ``case`` as a testcase; returns (failures, errors) it adds."""
    element = ET.SubElement(parent, "testcase", classname=_xml_text(classname), name=_xml_text(case.label))
    if case.passed or case.advises or case.failure is None:
        return 0, 0
    kind = "error" if case.verdict is Verdict.GRADER_ERROR else "failure"
    problem = ET.SubElement(
        element, kind, type=case.verdict.value, message=_xml_text(summary_line(case.failure).splitlines()[0])
    )
    problem.text = _xml_text(failure_text(case.failure))
    return (kind == "failure"), (kind == "error")


def _suite(
    parent: ET.Element,
    name: str,
    classname: str,
    cases: Sequence[CaseResult],
    properties: dict[str, str],
    errors: Sequence[str],
) -> tuple[int, int, int]:
    suite = ET.SubElement(parent, "testsuite", name=_xml_text(name))
    listed = ET.SubElement(suite, "properties")
    for key, value in properties.items():
        ET.SubElement(listed, "property", name=key, value=_xml_text(value))
    failures = problems = 0
    for case in cases:
        failed, error = _case(suite, case, classname)
        failures += failed
        problems += error
    if errors:
        ET.SubElement(suite, "system-err").text = _xml_text("\n".join(errors))
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(failures))
    suite.set("errors", str(problems))
    suite.set("skipped", "0")
    return len(cases), failures, problems


def junit_xml(results: Sequence[SubmissionResult]) -> str:
    """The JUnit XML document of ``results`` (see the module docstring), as text with its declaration.

    Example (a 10-point question of three cases, one failing: 20/3 of 10 points):
        >>> from fractions import Fraction
        >>> from attnscore.report.results import Question
        >>> q = Question("softmax", "Softmax", "softmax", 1, "softmax")
        >>> ok = CaseResult("example:a", "example", "a", Verdict.PASSED, Fraction(10, 3), Fraction(10, 3),
        ...                 "visible", "softmax.yaml:9", question="softmax")
        >>> r = SubmissionResult("alice.py", "a1", 1, "a1.yaml", "", (ok, ok), "float32", "cpu", 0, 0.5,
        ...                      questions=(q,))
        >>> text = junit_xml([r])
        >>> '<testsuite name="alice.py: softmax"' in text, '<property name="points" value="20/3" />' in text
        (True, True)
    """
    root = ET.Element("testsuites", name="attnscore")
    tests = failures = errors = 0
    for result in results:
        student = Path(result.submission).name or result.submission
        shared = [result.error] if result.error else []
        scores = question_scores(result)
        if scores:
            for score in scores:
                question = score.question
                properties = {
                    "points": str(score.points),
                    "max_points": str(score.max_points),
                    "score": f"{points_out(score.points)}/{points_out(score.max_points)}",
                    "function": question.function,
                    "spec": f"{question.spec_id} v{question.spec_version}",
                    "visibility": question.visibility,
                }
                counts = _suite(
                    root,
                    f"{student}: {question.id}",
                    f"{student}.{question.id}",
                    score.cases,
                    properties,
                    [*shared, *([question.error] if question.error else [])],
                )
                tests, failures, errors = tests + counts[0], failures + counts[1], errors + counts[2]
        else:
            properties = {
                "points": str(result.score),
                "max_points": str(result.max_score),
                "score": f"{points_out(result.score)}/{points_out(result.max_score)}",
                "function": result.function,
                "spec": f"{result.spec_id} v{result.spec_version}",
            }
            counts = _suite(
                root, f"{student}: {result.spec_id}", f"{student}.{result.spec_id}", result.cases, properties, shared
            )
            tests, failures, errors = tests + counts[0], failures + counts[1], errors + counts[2]
    root.set("tests", str(tests))
    root.set("failures", str(failures))
    root.set("errors", str(errors))
    root.set("time", f"{sum((r.duration_s for r in results), 0.0):.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
