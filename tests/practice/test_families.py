"""Family files: the shipped families load; bad files give file:line:col messages, all at once."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from attnscore.practice.families import FamilyFileError, load_families, parse_family_text
from attnscore.spec.located import MAX_VALUES

SPECS = Path(__file__).resolve().parents[2] / "specs" / "practice"
HEAD = "id: demo\nversion: 1\nkind: one_score\ntitle: Demo\n"


def test_shipped_families_load():
    """Every family in specs/practice loads, one per kind at least."""
    families = load_families(SPECS)
    assert {f.id for f in families} == {
        "one-score",
        "score-vector",
        "score-matrix",
        "scaled-score",
        "softmax-exact",
        "softmax-ranking",
        "multiple-choice",
    }
    kinds = {f.kind for f in families}
    assert kinds == {
        "one_score",
        "score_vector",
        "score_matrix",
        "scaled_score",
        "softmax",
        "multiple_choice",
    }


def test_defaults_and_grid():
    """A minimal family gets the documented defaults and an exact grid."""
    fam = parse_family_text(HEAD + "values: {min: -1, max: 1, step: 0.5}\n", "demo.yaml")[0]
    assert (fam.places, fam.d_k, fam.max_attempts) == (3, (2,), 200)
    assert [str(x) for x in fam.grid()] == ["-1", "-1/2", "0", "1/2", "1"]


def test_numbers_read_exactly_from_the_source_text():
    """0.7 is 7/10 (not the float nearest it), 5e-2 is a number as in YAML 1.2; positions are located.py's."""
    fam = parse_family_text(HEAD + "values: {min: -0.7, max: 0.7, step: 0.7}\nmax_duplicate_rate: 5e-2\n", "d.yaml")[0]
    assert fam.values == (Fraction(-7, 10), Fraction(7, 10), Fraction(7, 10))
    assert fam.grid() == (Fraction(-7, 10), Fraction(0), Fraction(7, 10))
    assert fam.max_duplicate_rate == 0.05


def test_a_problem_both_readers_find_is_reported_once():
    """An octal-looking integer is refused by located.py and by the family check: one message, the family's."""
    with pytest.raises(FamilyFileError) as info:
        parse_family_text(HEAD.replace("version: 1", "version: 010"), "x.yaml")
    assert info.value.problems == [
        "x.yaml:2:10: version: expected a plain decimal integer from 1 to 1000000 "
        "(YAML 1.1 reads leading zeros as octal and 0x as hex), found '010'"
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("&a [*a]\n", "x.yaml:1:1: [0]: expected an anchor (&name) that does not contain", id="cycle"),
        pytest.param(
            "!!set {a, b}\n", "x.yaml:1:1: (top level): expected a plain mapping or list, found the tag", id="tag"
        ),
        pytest.param(
            HEAD.replace("id: demo", "id: !!python/name:os.system x"),
            "x.yaml:1:5: id: expected a plain YAML value",
            id="python tag",
        ),
    ],
)
def test_located_problems_are_kept(text, message):
    """located.py's own problems (cycles, tags) reach the user beside the family's."""
    with pytest.raises(FamilyFileError) as info:
        parse_family_text(text, "x.yaml")
    assert any(p.startswith(message) for p in info.value.problems), info.value.problems


def test_alias_bomb_is_refused_located():
    """Aliases expanding past located.py's value limit give one located problem, not a hang or a traceback."""
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 9)]
    with pytest.raises(FamilyFileError) as info:
        parse_family_text("\n".join(lines) + "\n", "bomb.yaml")
    assert info.value.problems == [
        f"bomb.yaml:1:1: (YAML syntax): expected at most {MAX_VALUES} values once aliases (*name) are expanded, "
        "found more (an alias bomb?)"
    ]


def test_families_list_form():
    """One file may list several families under `families:`."""
    text = (
        "families:\n  - {id: a, version: 1, kind: one_score, title: A}\n"
        "  - {id: b, version: 2, kind: score_vector, title: B}\n"
    )
    assert [f.id for f in parse_family_text(text, "list.yaml")] == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "x.yaml:1:1: (file): expected a family mapping, found an empty document", id="empty file"),
        pytest.param("id: [1,\n", "x.yaml:2:1: (YAML syntax): expected valid YAML", id="YAML syntax error"),
        pytest.param(
            "version: 1\nkind: one_score\ntitle: T\n",
            "x.yaml:1:1: id: expected a value for the required field 'id', found nothing",
            id="missing id",
        ),
        pytest.param(
            HEAD.replace("version: 1", "version: 010"),
            "x.yaml:2:10: version: expected a plain decimal integer",
            id="octal-looking version",
        ),
        pytest.param(
            HEAD.replace("one_score", "one_scores"),
            "x.yaml:3:7: kind: expected one of one_score",
            id="unknown kind",
        ),
        pytest.param(
            HEAD + "values: {min: 1e-3, max: 4, step: 1}\n",
            "x.yaml:5:9: values: expected min < max with max - min a multiple of step, found min=0.001",
            id="1e-3 is a number (YAML 1.2, as in specs)",
        ),
        pytest.param(
            HEAD + "values: {min: '-1', max: 4, step: 1}\n",
            "x.yaml:5:15: values.min: expected a finite decimal number, found string '-1'",
            id="quoted number is a string",
        ),
        pytest.param(
            HEAD + "values: {min: .inf, max: 4, step: 1}\n",
            "x.yaml:5:15: values.min: expected a finite decimal number, found number '.inf'",
            id="infinity",
        ),
        pytest.param(
            HEAD + "title: Again\n",
            "x.yaml:5:1: title: expected each key once, found a duplicate key",
            id="duplicate field",
        ),
        pytest.param(
            "base: &b {id: demo, version: 1}\n<<: *b\nkind: one_score\ntitle: T\n",
            "x.yaml:2:1: (top level): expected plain fields, found a merge key (<<)",
            id="merge key",
        ),
        pytest.param(
            HEAD + "places: 0x3\n",
            "x.yaml:5:9: places: expected a plain decimal integer from 0 to 6",
            id="hex integer",
        ),
        pytest.param(
            "- 1\n- 2\n",
            "x.yaml:1:1: (top level): expected a mapping, found a list",
            id="top level list",
        ),
        pytest.param("id: [1,\n", "x.yaml:2:1: (YAML syntax): expected valid YAML", id="located syntax field name"),
        pytest.param(
            HEAD + "values: {min: -4, max: 4, step: 0.25}\n",
            "values.step: expected a positive step with at most one decimal",
            id="step with two decimals",
        ),
        pytest.param(
            HEAD + "d_k: [2, 7]\n",
            "x.yaml:5:10: d_k[1]: expected an integer from 1 to 4, found 7",
            id="d_k out of range",
        ),
        pytest.param(
            HEAD + "places: no\n",
            "x.yaml:5:9: places: expected an integer from 0 to 6, found boolean 'no'",
            id="no is a boolean",
        ),
        pytest.param(HEAD + "colour: red\n", "x.yaml:5:1: colour: expected one of the fields", id="unknown field"),
        pytest.param(
            HEAD + "featured:\n  - {q: [0, 1], k: [0]}\n",
            "featured[0].k: expected 2 entries (the width of q), found 1",
            id="featured widths differ",
        ),
        pytest.param(
            HEAD.replace("one_score", "scaled_score") + "d_k: [2]\n",
            "x.yaml:5:7: d_k[0]: expected one of [1, 4, 16, 64] "
            "(perfect squares, so that sqrt(d_k) is an integer), found 2",
            id="scaled d_k must be a perfect square",
        ),
        pytest.param(
            HEAD + "mode: exact\n",
            "mode: expected no mode (only kind softmax has one)",
            id="mode on wrong kind",
        ),
    ],
)
def test_bad_family_files(text, message):
    """Each bad file is refused with a file:line:col: field: expected ..., found ... message."""
    with pytest.raises(FamilyFileError) as info:
        parse_family_text(text, "x.yaml")
    assert any(message in p for p in info.value.problems), info.value.problems


def test_all_problems_reported_at_once_in_line_order():
    """Several problems come back together, sorted by line."""
    text = "id: Bad_ID\nversion: 0\nkind: nope\ntitle: 5\n"
    with pytest.raises(FamilyFileError) as info:
        parse_family_text(text, "x.yaml")
    lines = [p.split(":")[1] for p in info.value.problems]
    assert lines == ["1", "2", "3", "4"]
    assert str(info.value).startswith("x.yaml:1:5: id: expected a slug")


def test_duplicate_ids_across_files(tmp_path):
    """Two files declaring the same id are refused."""
    (tmp_path / "a.yaml").write_text(HEAD)
    (tmp_path / "b.yaml").write_text(HEAD)
    with pytest.raises(FamilyFileError, match="expected a unique family id, found 'demo'"):
        load_families(tmp_path)


def test_empty_folder(tmp_path):
    """A folder without family files is an error, not an empty worksheet."""
    with pytest.raises(FamilyFileError, match="expected at least one family file"):
        load_families(tmp_path)
