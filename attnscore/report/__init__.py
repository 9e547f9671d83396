"""Reporters: pure functions from results to text, JSON data or platform result files."""

from attnscore.report.gradescope import gradescope_results
from attnscore.report.json_report import batch_to_json, submission_to_json
from attnscore.report.text import batch_table, submission_text

__all__ = ["batch_table", "batch_to_json", "gradescope_results", "submission_text", "submission_to_json"]
