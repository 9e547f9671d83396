"""The verdict of a module whose parameters are not the spec's (wrong parameters) in every reporter: its
code, its label, its message on visible cases and its own sentence on hidden ones.

Judged for real, in process: the example spec examples/specs/bilinear_scores_module.yaml with its
batched worked example made hidden, and a BilinearScore that makes a bias parameter as well.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import torch
from torch import nn

from attnscore.check.cases import build_cases
from attnscore.check.runner import InProcessRunner
from attnscore.check.session import Session
from attnscore.grade.class_run import feedback_text
from attnscore.grade.policy import grading_budget
from attnscore.report.feedback import reproduction
from attnscore.report.gradescope import gradescope_results
from attnscore.report.json_report import submission_to_json
from attnscore.report.prairielearn import prairielearn_results
from attnscore.report.record import result_from_record, result_to_record
from attnscore.report.results import SubmissionResult, Verdict
from attnscore.report.spreadsheet import CSV_ENCODING, grades_csv
from attnscore.report.text import batch_table, submission_text
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "specs" / "bilinear_scores_module.yaml"
MESSAGE = (
    "BilinearScore(d_q=2, d_k=2, bias=False): expected the parameters weight (2, 2) (the spec's W), found "
    "weight (2, 2), bias (1,): bias is not one of the spec's (remove it, or make it a buffer)"
)
HIDDEN = "your module's parameters are not the ones the spec states (names and shapes)"


class BilinearScore(nn.Module):
    def __init__(self, d_q, d_k, bias=False):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_q, d_k))
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, Q, K):
        return Q @ self.weight @ K.transpose(-2, -1) + self.bias


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> SubmissionResult:
    """Every case of the spec, judged with the module in process: all wrong parameters."""
    text = EXAMPLE.read_text(encoding="utf-8").replace(
        "    points: 1\nproperties:", "    points: 1\n    visibility: hidden\nproperties:"
    )
    path = tmp_path_factory.mktemp("spec") / "bilinear_scores_module.yaml"
    path.write_text(text, encoding="utf-8")
    spec = load_spec(path)
    assert [e.visibility for e in spec.worked_examples][-1] == "hidden"
    cases = tuple(build_cases(spec, "float32"))
    session = Session(
        spec, cases, "float32", "cpu", "extra_bias.py", spec.seed, budget=grading_budget(0), hidden_last=True
    )
    return session.run(InProcessRunner(BilinearScore, module=spec.module))


def test_every_case_is_wrong_parameters_with_no_points(result):
    """One verdict for every case; the worked example's message lists expected and found names and shapes."""
    assert {c.verdict for c in result.cases} == {Verdict.WRONG_PARAMETERS} and result.score == 0
    first = result.cases[0]
    assert first.id == "example:w_picks_a_pair" and first.failure is not None and first.failure.detail == MESSAGE
    assert Verdict.WRONG_PARAMETERS.value == "wrong_parameters" and Verdict.WRONG_PARAMETERS.label == "wrong parameters"


def test_text_report_and_reproduction_build_the_module(result):
    """The text report: the verdict's label per case, the message, and a reproduction through functional_call."""
    text = _plain(submission_text(result))
    assert "example:w_picks_a_pair               wrong parameters     0/2" in text
    assert MESSAGE in " ".join(text.split())
    assert reproduction(result.cases[0].failure) == (
        "torch.func.functional_call(BilinearScore(d_q=2, d_k=2, bias=False), "
        "{'weight': torch.tensor([[0, 2], [0, 0]], dtype=torch.float32)}, "
        "(torch.tensor([[1, 3]], dtype=torch.float32), torch.tensor([[0, 1], [1, 0]], dtype=torch.float32)))"
    )


def test_score_matrix_has_its_own_code_and_legend(result):
    """The class table's code ``param`` and the legend's ``param = wrong parameters``."""
    text = _plain(batch_table([result]))
    row = next(line for line in text.splitlines() if "extra_bias.py" in line).split()
    assert row[3:] == ["param"] * len(result.cases)
    assert "param = wrong parameters" in " ".join(text.split())


def test_json_and_gradescope_and_prairielearn(result):
    """JSON gives the word and message; Gradescope tags it and says the hidden sentence; PrairieLearn its label."""
    data = json.loads(json.dumps(submission_to_json(result), allow_nan=False))
    assert {c["verdict"] for c in data["cases"]} == {"wrong_parameters"}
    assert MESSAGE in data["cases"][0]["message"]
    tests = gradescope_results(result)["tests"]
    assert all("wrong_parameters" in t["tags"] for t in tests if "hidden" not in t["tags"])
    hidden = next(t for t in tests if t["name"] == "hidden case 1")
    assert hidden["output"].splitlines()[0] == f"wrong parameters: {HIDDEN} (details are not shown for a hidden case)"
    assert "bias" not in hidden["output"]
    messages = [t["message"] for t in prairielearn_results(result)["tests"]]
    assert all(m.startswith("wrong parameters: ") for m in messages)


def test_student_feedback_hides_the_hidden_cases_names_and_shapes(result):
    """The student's feedback file: visible cases say the message; the hidden one only its sentence."""
    text = feedback_text(result)
    assert MESSAGE in text and "batched_two_items" not in text
    hidden = text.split("hidden case 1", 1)[1]
    assert HIDDEN in hidden


def test_spreadsheet_and_gradebook_record(result):
    """The CSV's zeros, and the gradebook record reading back the verdicts, messages and module config."""
    data = grades_csv([("extra_bias.py", result)]).encode(CSV_ENCODING).decode(CSV_ENCODING)
    header, row = list(csv.reader(io.StringIO(data, newline="")))
    cells = dict(zip(header, row, strict=True))
    assert cells["score"] == "0" and cells["example:w_picks_a_pair"] == "0"
    back = result_from_record(json.loads(json.dumps(result_to_record(result))))
    assert [c.verdict for c in back.cases] == [c.verdict for c in result.cases]
    assert back.cases[0].failure is not None and back.cases[0].failure.module == result.cases[0].failure.module
    assert back.cases[0].failure.module["weights"] == {"W": "weight"}


def _plain(renderable: object) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), record=True, width=200, color_system=None, force_jupyter=False)
    console.print(renderable)
    return console.export_text()
