"""Reporters: pure functions from results to text, JSON data or platform result files."""

from graders.reporters.gradescope import gradescope_results
from graders.reporters.json_report import batch_to_json, submission_to_json
from graders.reporters.text import batch_table, submission_text

__all__ = ["batch_table", "batch_to_json", "gradescope_results", "submission_text", "submission_to_json"]
