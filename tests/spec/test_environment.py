"""A spec's environment (attnscore.spec.environment): the packages a submission may import and
torch.compile, read, validated with located problems, and compared with this machine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnscore.spec.environment import Environment
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

ROOT = Path(__file__).resolve().parents[2]
ABSENT = "attnscore-course-package-that-is-not-installed"

SPEC = """\
format: attnscore-spec/1
id: tiny
version: 1
title: tiny spec
function:
  name: scores
  contract: scores
  parameters:
    - {name: q, shape: [d_k]}
    - {name: keys, shape: [n_k, d_k]}
  returns: {shape: [n_k]}
ENVIRONMENT
worked_examples:
  - id: first
    inputs:
      q: [1, 0]
      keys: [[1, 0], [0, 1]]
    expected: [1, 0]
    explanation: aligned then perpendicular
    points: 1
"""


def _load(tmp_path: Path, environment: str):
    path = tmp_path / "tiny.yaml"
    path.write_text(SPEC.replace("ENVIRONMENT", environment))
    return load_spec(path)


def _problems(tmp_path: Path, environment: str) -> list[str]:
    with pytest.raises(SpecError) as raised:
        _load(tmp_path, environment)
    return [str(p).removeprefix(f"{tmp_path}/") for p in raised.value.problems]


def test_the_environment_is_read(tmp_path):
    """Packages as written, in order, and torch_compile."""
    spec = _load(tmp_path, 'environment:\n  packages: [einops, "jaxtyping>=0.2", einx]\n  torch_compile: true')
    assert spec.environment == Environment(("einops", "jaxtyping>=0.2", "einx"), True)


def test_a_spec_without_one_lists_nothing():
    """No environment: no packages, no torch.compile (the bundled score specs)."""
    assert load_spec(ROOT / "specs" / "dot_product_scores.yaml").environment == Environment((), False)


def test_the_bundled_flash_attention_specs_allow_torch_compile():
    """CS336's handout suggests torch.compile for the backward: the FlashAttention-2 specs say so."""
    for name in ("flash_attention_2", "flash_attention_2_causal"):
        assert load_spec(ROOT / "specs" / f"{name}.yaml").environment.torch_compile is True


@pytest.mark.parametrize(
    "environment, expected",
    [
        pytest.param(
            'environment: {packages: [einops, "bad name=="]}',
            "tiny.yaml:12:34: environment.packages[1]: expected a package as pip names it, with an optional version "
            "(einops, jaxtyping>=0.2), found 'bad name==' (",
            id="not a requirement",
        ),
        pytest.param(
            'environment: {packages: ["torch>=2"]}',
            "tiny.yaml:12:26: environment.packages[0]: expected a package the course adds, found 'torch>=2': the "
            "grader brings its own torch (exported graders pin it); leave it out",
            id="torch",
        ),
        pytest.param(
            'environment: {packages: ["x @ https://example.org/x-1.0-py3-none-any.whl"]}',
            "tiny.yaml:12:26: environment.packages[0]: expected a package from the package index with an optional "
            "version (einops, jaxtyping>=0.2), found a direct reference 'x @ https://example.org/x-1.0-py3-none-any.whl'"
            ": graders install from the index",
            id="a direct reference",
        ),
        pytest.param(
            "environment: {packages: [einops, Einops]}",
            "tiny.yaml:12:34: environment.packages[1]: expected each package once, found 'Einops' after 'einops' "
            "(environment.packages[0]); give one requirement per package",
            id="a package twice",
        ),
        pytest.param(
            "environment: {packages: [einops, 3]}",
            "tiny.yaml:12:34: environment.packages[1]: expected string, found number 3",
            id="a number",
        ),
        pytest.param(
            "environment: {torch_compile: maybe}",
            "tiny.yaml:12:30: environment.torch_compile: expected boolean, found string 'maybe'",
            id="torch_compile not a boolean",
        ),
        pytest.param(
            "environment: {package: [einops]}",
            "tiny.yaml:12:15: environment.package: expected only known fields, found unknown field 'package'; "
            "allowed: packages, torch_compile",
            id="a misspelt field",
        ),
    ],
)
def test_bad_environments_are_located(tmp_path, environment, expected):
    """Each problem is one located line: what was expected, what was found, and how to fix it."""
    problems = _problems(tmp_path, environment)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_the_student_copy_keeps_the_environment(tmp_path):
    """Students see what they may import: the student copy carries the environment unchanged."""
    from attnscore.export.student_spec import write_student_spec

    full = tmp_path / "tiny.yaml"
    full.write_text(SPEC.replace("ENVIRONMENT", "environment: {packages: [einops], torch_compile: true}"))
    copy = tmp_path / "student.yaml"
    write_student_spec(full, copy)
    assert load_spec(copy).environment == Environment(("einops",), True)


@pytest.mark.parametrize(
    "packages, lacking",
    [
        pytest.param(("numpy",), [], id="installed"),
        pytest.param((f"{ABSENT}>=1",), [f"{ABSENT}>=1 (not installed)"], id="not installed"),
        pytest.param(("numpy<1",), [f"numpy<1 ({np.__version__} installed)"], id="another version"),
        pytest.param((f"{ABSENT}; python_version < '3'",), [], id="a marker that does not hold here"),
    ],
)
def test_missing_compares_with_this_interpreter(packages, lacking):
    """What this machine lacks, each with why; a requirement for another Python is not needed."""
    assert Environment(packages).missing() == lacking


def test_the_install_command_quotes_what_a_shell_would_misread():
    """A version with > is quoted for the shell; the reason in parentheses is not part of it."""
    command = Environment.install_command(["einops (not installed)", "jaxtyping>=0.2 (0.1.5 installed)"])
    assert command == "pip install einops 'jaxtyping>=0.2'"
