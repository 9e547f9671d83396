"""Tests for spec loading and validation (attnscore.spec.load, attnscore.spec.located)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import jsonschema
import pytest
import yaml

from attnscore.spec.load import load_spec, load_specs, spec_schema
from attnscore.spec.located import SpecError

ROOT = Path(__file__).resolve().parents[2]

VALID = """\
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
worked_examples:
  - id: first
    inputs:
      q: [1, 0]
      keys: [[1, 0], [0, 1]]
    expected: [1, 0]
    explanation: aligned then perpendicular
    points: 1
properties:
  - name: equals_qk_entries
    points: 0.5
    statement: scores equal Q Kᵀ
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text))
    return [str(p) for p in info.value.problems]


def test_valid_spec_loads(tmp_path):
    """A valid spec loads with exact points and the contract's parameters."""
    spec = load_spec(write(tmp_path, VALID))
    assert spec.id == "tiny" and spec.function == "scores"
    assert spec.parameter_names == ("q", "keys")
    assert spec.worked_examples[0].points == Fraction(1)
    assert spec.properties[0].points == Fraction(1, 2)
    assert spec.properties[0].examples == 25
    assert spec.dtypes == ("float32",)


@pytest.mark.parametrize("name", ["dot_product_scores.yaml", "score_matrix.yaml"])
def test_bundled_specs_load(name):
    """The bundled specs are valid."""
    spec = load_spec(ROOT / "specs" / name)
    assert spec.worked_examples and spec.properties


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "title: tiny spec\n",
            "title: 1e3\n",
            "spec.yaml:4:8: title: expected string, found number 1000.0",
            id="1e3 is a number, as in YAML 1.2 and in editors",
        ),
        pytest.param(
            "title: tiny spec\n",
            "title: no\n",
            "spec.yaml:4:8: title: expected string, found boolean False (YAML 1.1 reads yes/no/on/off "
            "as booleans: quote the text)",
            id="no is a boolean",
        ),
        pytest.param(
            "version: 1\n",
            "version: 010\n",
            "spec.yaml:3:10: version: expected a decimal number, found '010', which YAML 1.1 reads as octal 8",
            id="010 is octal",
        ),
        pytest.param(
            "points: 1\n",
            "points: 1:30\n",
            "spec.yaml:19:13: worked_examples[0].points: expected a plain decimal number, found '1:30', "
            "which YAML 1.1 reads as 90",
            id="1:30 is sexagesimal",
        ),
        pytest.param(
            "points: 1\n",
            "points: 0x10\n",
            "worked_examples[0].points: expected a plain decimal number, found '0x10'",
            id="hex",
        ),
        pytest.param(
            "points: 1\n",
            "points: !!int abc\n",
            "worked_examples[0].points: expected a plain YAML value, found 'abc' tagged tag:yaml.org,2002:int",
            id="bad explicit tag",
        ),
        pytest.param(
            "version: 1\n",
            "version: 1\n<<: {extra: 1}\n",
            "spec.yaml:4:1: (top level): expected plain fields, found a merge key (<<)",
            id="merge key",
        ),
        pytest.param(
            "title: tiny spec",
            'title: "tiny\x00spec"',
            "spec.yaml:4:13: (yaml): expected printable text, found the character U+0000",
            id="NUL character",
        ),
        pytest.param(
            "format: attnscore-spec/1\n",
            "format: attnscore-spec/2\n",
            "spec.yaml:1:9: format: expected a known format, found 'attnscore-spec/2', an unknown format version",
            id="wrong format",
        ),
        pytest.param(
            "id: tiny\n",
            "id: Tiny Spec\n",
            "spec.yaml:2:5: id: expected text matching ^[a-z][a-z0-9_]*$, found string 'Tiny Spec'",
            id="bad id",
        ),
        pytest.param(
            "    points: 1\n",
            "    points: 1\n    pionts: 2\n",
            "spec.yaml:20:5: worked_examples[0].pionts: expected only known fields, found unknown field 'pionts'",
            id="misspelt field",
        ),
        pytest.param(
            "  contract: scores\n",
            "  contract: softmax\n",
            "spec.yaml:7:13: function.contract: expected one of ",
            id="unknown contract",
        ),
        pytest.param(
            "keys: [[1, 0], [0, 1]]",
            "keys: [[1, 0, 0], [0, 1, 0]]",
            "spec.yaml:16:13: worked_examples[0].inputs.keys: expected d_k=2 as in q, found d_k=3",
            id="d_k differs between inputs",
        ),
        pytest.param(
            "keys: [[1, 0], [0, 1]]",
            "keys: [1, 0]",
            "spec.yaml:16:13: worked_examples[0].inputs.keys: expected shape (n_k, d_k) (2-D), found shape (2,)",
            id="keys has wrong rank",
        ),
        pytest.param(
            "keys: [[1, 0], [0, 1]]",
            "keys: [[1, 0], [0]]",
            "spec.yaml:16:13: worked_examples[0].inputs.keys: expected a rectangular array of numbers, found ragged",
            id="ragged keys",
        ),
        pytest.param(
            "expected: [1, 0]",
            "expected: [1, 0.5]",
            "spec.yaml:17:15: worked_examples[0].expected: expected the value the inputs give, [1.0, 0.0], "
            "found [1.0, 0.5]",
            id="expected disagrees with the inputs",
        ),
        pytest.param(
            "expected: [1, 0]",
            "expected: [1, 0, 0]",
            "spec.yaml:17:15: worked_examples[0].expected: expected shape (2,) (from the inputs), found shape (3,)",
            id="expected has the wrong shape",
        ),
        pytest.param(
            "      q: [1, 0]\n",
            "      query: [1, 0]\n",
            "spec.yaml:15:7: worked_examples[0].inputs: expected an input named 'q', found it missing",
            id="input missing",
        ),
        pytest.param(
            "  - name: equals_qk_entries",
            "  - name: sums_to_one",
            "spec.yaml:21:11: properties[0].name: expected a registered property",
            id="unknown property",
        ),
        pytest.param(
            "    points: 0.5\n",
            "    points: -1\n",
            "spec.yaml:22:13: properties[0].points: expected a number >= 0, found -1",
            id="negative points",
        ),
        pytest.param(
            "    explanation: aligned then perpendicular\n",
            "",
            "spec.yaml:13:5: worked_examples[0]: expected field 'explanation', found it missing",
            id="explanation missing",
        ),
        pytest.param(
            "title: tiny spec\n",
            "title: tiny spec\ntitle: again\n",
            "spec.yaml:5:1: title: expected each key once, found a duplicate key",
            id="duplicate key",
        ),
        pytest.param(
            "properties:\n",
            "  - id: first\n    inputs: {q: [1], keys: [[1]]}\n"
            "    expected: [1]\n    explanation: x\n    points: 1\nproperties:\n",
            "worked_examples[1].id: expected a unique id, found 'first' again",
            id="duplicate example id",
        ),
        pytest.param(
            "returns: {shape: [n_k]}",
            "returns: {shape: [n_q]}",
            "spec.yaml:11:20: function.returns.shape: expected (n_k,) for contract scores, found (n_q,)",
            id="returns shape disagrees with the contract",
        ),
    ],
)
def test_malformed_specs_give_located_errors(tmp_path, old, new, expected):
    """Each malformed spec is reported as file:line:col: field: expected ..., found ..."""
    assert old in VALID
    found = problems(tmp_path, VALID.replace(old, new, 1))
    assert any(expected in p for p in found), found


def test_every_problem_reported_at_once(tmp_path):
    """Several problems in one file are all reported, in line order."""
    text = VALID.replace("version: 1", "version: zero").replace("points: 1\n", "points: many\n")
    found = problems(tmp_path, text)
    assert len(found) == 2
    assert found[0].startswith(f"{tmp_path / 'spec.yaml'}:3:10: version: expected integer")
    assert "worked_examples[0].points: expected number, found string 'many'" in found[1]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", "(top level): expected a mapping of spec fields, found an empty file", id="empty file"),
        pytest.param("- a\n- b\n", "(top level): expected a mapping of spec fields, found list", id="a list"),
        pytest.param(
            "id: [unclosed\n", ":2:1: (yaml): expected valid YAML, found a syntax error", id="YAML syntax error"
        ),
        pytest.param(
            "id: " + "[" * 3000 + "]" * 3000 + "\n",
            "(yaml): expected valid YAML, found nesting too deep",
            id="nesting too deep",
        ),
    ],
)
def test_unparseable_files(tmp_path, text, expected):
    """Files that are not a YAML mapping get one located problem."""
    found = problems(tmp_path, text)
    assert len(found) == 1 and expected in found[0]


def test_missing_file_is_a_spec_error(tmp_path):
    """A missing file is reported as a spec problem, not an OSError."""
    with pytest.raises(
        SpecError, match=r"no-such.yaml:1:1: \(file\): expected a spec file or a bundled spec id \(additive_scores, "
    ):
        load_spec(tmp_path / "no-such.yaml")


def test_load_specs_collects_problems_of_all_files(tmp_path):
    """load_specs reports the problems of every file together."""
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(VALID.replace("id: tiny", "id: 1"), encoding="utf-8")
    b.write_text(VALID.replace("version: 1", "version: -1"), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_specs([a, b])
    assert [p.file for p in info.value.problems] == [str(a), str(b)]


def test_published_schema_is_valid_and_accepts_bundled_specs():
    """The JSON Schema is a valid draft 2020-12 schema and accepts every bundled spec."""
    schema = spec_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    on_disk = json.loads((ROOT / "specs" / "spec-v1.schema.json").read_text(encoding="utf-8"))
    assert on_disk == schema
    for path in (ROOT / "specs").glob("*.yaml"):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert list(jsonschema.Draft202012Validator(schema).iter_errors(data)) == [], path


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "    points: 1\n",
            "    points: .inf\n",
            "spec.yaml:19:13: worked_examples[0].points: expected a finite number, found inf",
            id="infinite points",
        ),
        pytest.param(
            "version: 1\n",
            "version: 1\ntolerance: {mode: dot_bound, factor: .nan}\n",
            "spec.yaml:4:38: tolerance.factor: expected a finite number, found nan",
            id="NaN factor",
        ),
        pytest.param(
            "      q: [1, 0]\n",
            "      q: [1" + "0" * 400 + ", 0]\n",
            "worked_examples[0].inputs.q: expected numbers within float64 range, found an integer too large",
            id="integer beyond float64",
        ),
        pytest.param(
            "    statement: scores equal Q Kᵀ\n",
            "    statement: scores equal Q Kᵀ\n    max_value: 1.0e-50\n",
            "properties[0].max_value: expected a number >= 0.01, found 1e-50",
            id="max_value too small",
        ),
        pytest.param(
            "title: tiny spec",
            "title: yes",
            "title: expected string, found boolean True (YAML 1.1 reads yes/no/on/off as booleans: quote the text)",
            id="yes is a boolean",
        ),
        pytest.param(
            "    explanation: aligned then perpendicular\n",
            "    explanation: ''\n",
            "worked_examples[0].explanation: expected non-empty text, found string ''",
            id="empty explanation",
        ),
    ],
)
def test_non_finite_and_out_of_range_numbers(tmp_path, old, new, expected):
    """NaN, infinities and out-of-range numbers outside example values are located problems."""
    assert old in VALID
    found = problems(tmp_path, VALID.replace(old, new, 1))
    assert any(expected in p for p in found), found


def test_non_finite_values_allowed_in_example_values(tmp_path):
    """-inf is allowed where example values live (masked scores use it); the loader compares it exactly."""
    text = VALID.replace("q: [1, 0]", "q: [1, .inf]").replace("expected: [1, 0]", "expected: [1, .inf]")
    found = problems(tmp_path, text)
    assert not any("expected a finite number" in p for p in found)


def test_exponent_floats_are_numbers_as_in_yaml_1_2(tmp_path):
    """Editors read specs as YAML 1.2 through the schema line, where 1e-3 is a number;
    attnscore reads it the same way (PyYAML's YAML 1.1 would make it the text '1e-3')."""
    spec = load_spec(write(tmp_path, VALID.replace("points: 1\n", "points: 1e-3\n")))
    assert spec.worked_examples[0].points == Fraction(1, 1000)
    quoted = load_spec(write(tmp_path, VALID.replace("title: tiny spec\n", "title: '1e3'\n")))
    assert quoted.title == "1e3"


def test_every_bundled_spec_names_a_schema_that_exists_next_to_it():
    """The schema line works in a checkout and in the installed package (bundled_specs/)."""
    from importlib import resources

    for folder in (ROOT / "specs", Path(str(resources.files("attnscore").joinpath("bundled_specs")))):
        for path in folder.glob("*.yaml"):
            first = path.read_text(encoding="utf-8").splitlines()[0]
            assert first == "# yaml-language-server: $schema=spec-v1.schema.json", path
            assert (path.parent / "spec-v1.schema.json").is_file(), path
