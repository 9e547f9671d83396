"""Tests for every report of an assignment's result (several questions, one submission): the
spreadsheet, Gradescope, PrairieLearn, JSON and its record, JUnit XML, the terminal text and the
class page show each question's exact points and the exact total."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import xml.etree.ElementTree as ET
from fractions import Fraction

import pytest
from rich.console import Console

from attnscore.report.class_html import class_report_html, question_summaries, ranked_mistakes
from attnscore.report.gradescope import gradescope_results
from attnscore.report.json_report import batch_to_json, submission_to_json
from attnscore.report.junit import junit_xml
from attnscore.report.prairielearn import prairielearn_json, prairielearn_results
from attnscore.report.questions import case_key, class_questions, question_scores
from attnscore.report.record import result_from_record, result_to_record
from attnscore.report.redact import for_students
from attnscore.report.results import Verdict
from attnscore.report.spreadsheet import grades_csv
from attnscore.report.text import batch_table, submission_text
from tests.assignmentdata import MAX_POINTS, SECRET, assignment_result
from tests.classdata import result as single_spec_result

WRONG_B = {("softmax", "example:b"): "softmax_wrong_dim"}  # 20/3 of softmax's 10 points


def rendered(renderable) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None, soft_wrap=True)
    console.print(renderable)
    return console.file.getvalue()


def test_question_scores_are_exact():
    """Three cases of 10/3 make exactly 10; one failed leaves exactly 20/3; the total is exact too."""
    full = assignment_result("ada.py")
    assert [(s.question.id, s.points, s.max_points) for s in question_scores(full)] == [
        ("softmax", 10, 10),
        ("sdpa", 4, 4),
        ("rope", 3, 3),
        ("warmup", 0, 0),
    ]
    assert full.score == full.max_score == MAX_POINTS
    wrong = assignment_result("bob.py", WRONG_B)
    assert question_scores(wrong)[0].points == Fraction(20, 3)
    assert wrong.score == Fraction(41, 3)


def test_case_key_keeps_two_questions_cases_apart():
    """softmax and sdpa both have example:a: named softmax/example:a and sdpa/example:a."""
    keys = [case_key(c) for c in assignment_result("ada.py").cases]
    assert keys[:4] == ["softmax/example:a", "softmax/example:b", "softmax/property:rows_sum_to_one", "sdpa/example:a"]
    assert len(set(keys)) == len(keys) == 8
    assert case_key(single_spec_result("x.py", {}).cases[0]) == "example:aligned"


def test_class_questions_keep_order_and_add_later_ones():
    """The first result's order, then a question only a later result has; none for single specs."""
    first = assignment_result("ada.py")
    fewer = dataclasses.replace(first, questions=first.questions[1:])
    assert [q.id for q in class_questions([fewer, first])] == ["sdpa", "rope", "warmup", "softmax"]
    assert class_questions([single_spec_result("x.py", {})]) == ()


def read_csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_spreadsheet_has_a_column_per_question_and_the_exact_total():
    """student,score,max,error, one column per question in order, then question/case columns; the
    total is the exact 41/3 rounded once (13.6667), not a sum of rounded cells; 0-point warmup is 0."""
    rows = [
        ("ada.py", assignment_result("ada.py")),
        ("bob.py", assignment_result("bob.py", WRONG_B)),
        ("cy.py", assignment_result("cy.py", missing=("rope",))),
    ]
    table = read_csv(grades_csv(rows))
    assert table[0][:8] == ["student", "score", "max", "error", "softmax", "sdpa", "rope", "warmup"]
    assert table[0][8:11] == ["softmax/example:a", "softmax/example:b", "softmax/property:rows_sum_to_one"]
    assert table[0][11:] == [
        "sdpa/example:a",
        "sdpa/property:masked",
        "rope/example:a",
        "rope/property:norm",
        "warmup/example:a",
    ]
    assert table[1] == [
        "ada.py",
        "17",
        "17",
        "",
        "10",
        "4",
        "3",
        "0",
        "3.3333",
        "3.3333",
        "3.3333",
        "2",
        "2",
        "1.5",
        "1.5",
        "0",
    ]
    assert table[2][:8] == ["bob.py", "13.6667", "17", "", "6.6667", "4", "3", "0"]
    assert table[2][9] == "0"  # the failed case: 0, not blank
    assert table[3][:8] == [
        "cy.py",
        "14",
        "17",
        "rope: the submission defines no function rope (it defines: helper, softmax)",
        "10",
        "4",
        "0",
        "0",
    ]


def test_spreadsheet_leaves_blank_only_what_a_result_lacks():
    """A result graded before a question existed: that question's cells are empty, the others filled."""
    full = assignment_result("ada.py")
    old = dataclasses.replace(
        full, questions=full.questions[:3], cases=tuple(c for c in full.cases if c.question != "warmup")
    )
    table = read_csv(grades_csv([("new.py", full), ("old.py", old)]))
    assert table[0][7] == "warmup" and table[0][-1] == "warmup/example:a"
    assert (table[1][7], table[1][-1]) == ("0", "0")
    assert (table[2][7], table[2][-1]) == ("", "")


def test_single_spec_spreadsheet_is_unchanged():
    """A result of one spec has no question columns and plain case ids."""
    table = read_csv(grades_csv([("x.py", single_spec_result("x.py", {}))]))
    assert table[0] == ["student", "score", "max", "error", "example:aligned", "example:anti_aligned",
                        "property:equals_qk_entries"]  # fmt: skip


def test_gradescope_names_tests_by_question_and_numbers_hidden_cases_per_question():
    """Tests are "question: case"; hidden ones are "question: hidden case N", N counted in its question;
    every case of the hidden question rope is hidden; the score is the exact total."""
    data = gradescope_results(assignment_result("bob.py", WRONG_B))
    assert [t["name"] for t in data["tests"]] == [
        "softmax: example:a: one row",
        "softmax: example:b: two rows",
        "softmax: property:rows_sum_to_one: rows sum to one",
        "sdpa: example:a: a bool mask",
        "sdpa: hidden case 1",
        "rope: hidden case 1",
        "rope: hidden case 2",
        "warmup: example:a: nothing to it",
    ]
    assert [t["score"] for t in data["tests"]] == [3.3333, 0, 3.3333, 2, 2, 1.5, 1.5, 0]
    assert [t["max_score"] for t in data["tests"]] == [3.3333, 3.3333, 3.3333, 2, 2, 1.5, 1.5, 0]
    assert data["tests"][7]["status"] == "passed"  # a 0-point case passes with 0 of 0
    assert data["score"] == 13.6667
    assert data["tests"][0]["tags"] == ["example", "passed", "softmax"]
    assert data["output"].splitlines() == [
        "cs_a1 v2: 13.6667/17 points",
        "softmax: 6.6667/10 points",
        "sdpa: 4/4 points",
        "rope: 3/3 points",
        "warmup: 0/0 points",
    ]
    json.dumps(data, allow_nan=False)


@pytest.mark.parametrize("when", ["after_due_date", "after_published", "hidden"])
def test_gradescope_shows_a_hidden_questions_cases_later(when):
    """A hidden question's cases carry the chosen visibility; its line in the output says when."""
    data = gradescope_results(assignment_result("ada.py"), when)
    visibility = {t["name"]: t["visibility"] for t in data["tests"]}
    assert visibility["rope: hidden case 1"] == visibility["rope: hidden case 2"] == when
    assert visibility["sdpa: hidden case 1"] == when
    assert visibility["softmax: example:a: one row"] == "visible"
    lines = data["output"].splitlines()
    later = {"after_due_date": "after the due date", "after_published": "once grades are published",
             "hidden": "to your instructor only"}[when]  # fmt: skip
    assert lines[0] == f"cs_a1 v2: 12/12 points on the visible cases; 3 hidden cases (5 points) shown {later}"
    assert lines[2] == f"sdpa: 2/2 points on the visible cases; 1 hidden case (2 points) shown {later}"
    assert lines[3] == f"rope: 2 hidden cases (3 points) shown {later}"
    assert data["score"] == 17


def test_gradescope_summary_is_one_hidden_test_per_question():
    """summary: each question's hidden cases fold into "question: hidden cases", shown at once."""
    data = gradescope_results(assignment_result("bob.py", {("rope", "property:norm"): None}), "summary")
    folded = [t for t in data["tests"] if t["name"].endswith("hidden cases")]
    assert [(t["name"], t["score"], t["max_score"], t["status"]) for t in folded] == [
        ("sdpa: hidden cases", 2, 2, "passed"),
        ("rope: hidden cases", 1.5, 3, "failed"),
    ]
    assert folded[1]["tags"] == ["hidden", "rope"] and data["score"] == 15.5


def test_a_hidden_questions_case_is_hidden_even_when_marked_visible():
    """A case of the hidden question rope marked visible is still anonymised and its inputs withheld."""
    res = assignment_result("eve.py", {("rope", "example:a"): None}, case_visibility={("rope", "example:a"): "visible"})
    shown = for_students(res)
    rope = [c for c in shown.cases if c.question == "rope"]
    assert [(c.id, c.visibility, c.title) for c in rope] == [
        ("hidden case 1", "hidden", ""),
        ("hidden case 2", "hidden", ""),
    ]
    assert rope[0].failure is not None and rope[0].failure.hidden and rope[0].counterexample is None
    text = json.dumps(gradescope_results(res)) + prairielearn_json(prairielearn_results(res))
    assert str(SECRET[0]) not in text and "two positions" not in text and "example:a: two positions" not in text


def test_hidden_case_inputs_never_reach_students():
    """A failed hidden case of a visible question: no input, title or id in Gradescope or PrairieLearn."""
    res = assignment_result("eve.py", {("sdpa", "property:masked"): None})
    text = json.dumps(gradescope_results(res)) + prairielearn_json(prairielearn_results(res))
    assert str(SECRET[0]) not in text and "masked keys get no weight" not in text and "property:masked" not in text


def test_prairielearn_has_per_question_tests_and_message():
    """Tests "question: kind id"; message has a line per question; score is 41/3 over 17 exactly."""
    data = prairielearn_results(assignment_result("bob.py", WRONG_B))
    assert [t["name"] for t in data["tests"]] == [
        "softmax: example a",
        "softmax: example b",
        "softmax: property rows_sum_to_one",
        "sdpa: example a",
        "sdpa: hidden case 1",
        "rope: hidden case 1",
        "rope: hidden case 2",
        "warmup: example a",
    ]
    assert [t["points"] for t in data["tests"]] == [3.3333, 0, 3.3333, 2, 2, 1.5, 1.5, 0]
    assert data["score"] == float(Fraction(41, 3) / 17)
    assert data["message"].splitlines() == [
        "cs_a1 v2: 13.6667/17 points",
        "softmax: 6.6667/10 points",
        "sdpa: 4/4 points",
        "rope: 3/3 points",
        "warmup: 0/0 points",
    ]


def test_json_report_lists_questions_and_each_cases_question():
    """questions[] with exact-then-rounded points, each case's question; none of it for one spec."""
    data = submission_to_json(assignment_result("cy.py", WRONG_B, missing=("rope",)))
    assert data["score"] == 10.6667 and data["max_score"] == 17
    assert data["questions"][0] == {
        "id": "softmax",
        "title": "Softmax over the last dim",
        "spec": {"id": "softmax", "version": 1},
        "function": "softmax",
        "visibility": "visible",
        "score": 6.6667,
        "max_score": 10,
        "all_passed": False,
        "error": None,
    }
    assert [(q["id"], q["score"], q["max_score"]) for q in data["questions"][1:]] == [
        ("sdpa", 4, 4),
        ("rope", 0, 3),
        ("warmup", 0, 0),
    ]
    assert data["questions"][2]["error"].startswith("the submission defines no function rope")
    assert [c["question"] for c in data["cases"]] == ["softmax"] * 3 + ["sdpa"] * 2 + ["rope"] * 2 + ["warmup"]
    json.dumps(batch_to_json([assignment_result("a.py")]), allow_nan=False)
    single = submission_to_json(single_spec_result("x.py", {}))
    assert "questions" not in single and "question" not in single["cases"][0]


def test_record_round_trip_keeps_questions_exact():
    """An assignment's record (through JSON text) reads back equal: questions, each case's question, 10/3."""
    res = assignment_result("bob.py", WRONG_B, missing=("rope",))
    record = json.loads(json.dumps(result_to_record(res), allow_nan=False))
    assert record["cases"][0]["points"] == "10/3" and record["cases"][0]["question"] == "softmax"
    assert record["questions"][2]["error"].startswith("the submission defines no function rope")
    back = result_from_record(record)
    assert back == res
    assert back.question_score("softmax") == (Fraction(20, 3), Fraction(10))


def test_record_written_before_questions_existed_reads_as_one_spec():
    """A record without the questions and question keys (older attnscore) reads with their defaults."""
    res = single_spec_result("x.py", {"example:aligned": "softmax_applied"})
    record = json.loads(json.dumps(result_to_record(res)))
    del record["questions"]
    for case in record["cases"]:
        del case["question"]
    back = result_from_record(record)
    assert back == res and back.questions == () and {c.question for c in back.cases} == {""}


def test_junit_has_one_testsuite_per_question():
    """Four suites (softmax, sdpa, rope, warmup) with their tests, failures and exact points."""
    text = junit_xml([assignment_result("bob.py", WRONG_B, missing=("rope",))])
    root = ET.fromstring(text.encode("utf-8"))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["bob.py: softmax", "bob.py: sdpa", "bob.py: rope", "bob.py: warmup"]
    assert [(s.get("tests"), s.get("failures"), s.get("errors")) for s in suites] == [
        ("3", "1", "0"),
        ("2", "0", "0"),
        ("2", "2", "0"),
        ("1", "0", "0"),
    ]
    assert (root.get("tests"), root.get("failures")) == ("8", "3")
    properties = {p.get("name"): p.get("value") for p in suites[0].find("properties")}
    assert properties["points"] == "20/3" and properties["score"] == "6.6667/10"
    assert properties["function"] == "softmax" and properties["spec"] == "softmax v1"
    failed = suites[0].findall("testcase")[1]
    assert failed.get("classname") == "bob.py.softmax" and failed.get("name") == "example:b: two rows"
    assert failed.find("failure").get("type") == "wrong_value"
    assert suites[2].find("system-err").text.startswith("the submission defines no function rope")
    assert suites[3].findall("testcase")[0].find("failure") is None  # 0 of 0 points, passed


def test_junit_of_one_spec_and_unsafe_text():
    """One suite per single-spec result; control characters in a name are dropped, markup escaped."""
    res = dataclasses.replace(single_spec_result("x.py", {"example:aligned": None}), submission="cls/<a>\x01b.py")
    root = ET.fromstring(junit_xml([res]).encode("utf-8"))
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "<a>b.py: dot_product_scores"
    assert (suite.get("tests"), suite.get("failures")) == ("3", "1")


def test_text_report_shows_questions_then_their_cases():
    """Each question's line with its points before its cases; a missing function's message once."""
    text = rendered(submission_text(assignment_result("cy.py", WRONG_B, missing=("rope",))))
    lines = [line.rstrip() for line in text.splitlines()]
    assert "assignment cs_a1 v2, 4 questions, float32 on cpu, seed 11" in lines[0]
    softmax = next(line for line in lines if line.startswith("softmax: "))
    assert softmax.startswith("softmax: Softmax over the last dim (softmax, softmax v1)")
    assert softmax.endswith("6.6667/10")
    rope = next(line for line in lines if line.startswith("rope: Rotary"))
    assert "rope: Rotary position embedding (rope, rope v1, hidden)" in rope and "could not be graded" in rope
    assert "rope: the submission defines no function rope (it defines: helper, softmax)" in lines
    assert any(line.startswith("softmax/example:b (wrong value)") for line in lines)
    assert lines[-1].startswith("Score: 10.6667/17")


def test_batch_table_has_a_column_per_question():
    """One row per student, each question's points; the legend names each question's function and spec."""
    text = rendered(batch_table([assignment_result("ada.py"), assignment_result("bob.py", WRONG_B)]))
    assert "softmax" in text and "6.6667/10" in text and "0/0" in text
    assert "rope: rope (rope v1)" in text and "sdpa: scaled_dot_product_attention (sdpa v1)" in text


def test_class_page_shows_each_questions_scores_and_mistakes():
    """The question table (mean, median, full, zero, missing), a histogram per question, mistakes by
    question (the same mistake in two questions is two rows), students' per-question points."""
    same = "softmax_wrong_dim"
    rows = [
        ("ada.py", assignment_result("ada.py")),
        ("bob.py", assignment_result("bob.py", {("softmax", "example:b"): same, ("sdpa", "example:a"): same})),
        ("cy.py", assignment_result("cy.py", {("softmax", "example:a"): same}, missing=("rope",))),
    ]
    summaries = question_summaries(rows)
    assert [(s.question.id, s.max_points, s.mean, s.full, s.zero, s.missing) for s in summaries] == [
        ("softmax", 10, Fraction(70, 9), 1, 0, 0),
        ("sdpa", 4, Fraction(10, 3), 2, 0, 0),
        ("rope", 3, 2, 2, 1, 1),
        ("warmup", 0, 0, 3, 0, 0),
    ]
    mistakes = ranked_mistakes(rows)
    assert [(m.question, m.id, m.students, m.cases) for m in mistakes] == [
        ("softmax", same, 2, 2),
        ("sdpa", same, 1, 1),
    ]
    page = class_report_html(rows, "cs_a1 v2")
    assert '<table id="question-table">' in page and 'id="question-histograms"' in page
    assert '<td class="id">softmax</td><td class="title">Softmax over the last dim</td>' in page
    assert "<th>question</th><th>mistake</th>" in page
    assert "<th>student</th><th>score</th><th>max</th><th>softmax</th><th>sdpa</th><th>rope</th><th>warmup</th>" in page
    assert '<td class="num question">6.6667</td>' in page and '<td class="num question">0</td>' in page
    assert "softmax/example:b" in page  # failed cases are named with their question


def test_single_spec_class_page_has_no_question_section():
    """A single spec's class page keeps its tables: no question table, no question column."""
    page = class_report_html([("x.py", single_spec_result("x.py", {"example:aligned": "softmax_applied"}))], "s")
    assert "question-table" not in page and "<th>question</th>" not in page
    assert "<th>student</th><th>score</th><th>max</th><th>failed cases</th>" in page


def test_function_missing_costs_only_its_question():
    """cy's rope is missing: 0 of 3 on rope, full marks elsewhere, 14 of 17 in all."""
    res = assignment_result("cy.py", missing=("rope",))
    assert res.question_score("rope") == (0, 3) and res.score == 14
    assert {c.verdict for c in res.question_cases("rope")} == {Verdict.FUNCTION_MISSING}
