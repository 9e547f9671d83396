"""A bundled spec's id is taken wherever a spec is: every command, the Python API, the self-check."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import attnscore
from attnscore.cli import main
from attnscore.selfcheck import check, check_path
from attnscore.spec.bundled import SpecNotFound, bundled_spec_ids, resolve_spec
from attnscore.spec.located import SpecError

ROOT = Path(__file__).resolve().parents[2]
SUBS = ROOT / "examples" / "submissions" / "scores"
IDS = (
    "additive_scores, alibi, alibi_causal, attention, attention_weights, bilinear_scores, causal_attention, "
    "dot_product_scores, flash_attention_2, flash_attention_2_causal, gqa, key_padding, kv_cache, masked_scores, "
    "multihead_self_attention, multihead_self_attention_module, multihead_self_attention_rope, rope, "
    "scaled_score_matrix, score_matrix, sdpa, sdpa_causal, sdpa_float_mask, sliding_window, sliding_window_causal, "
    "softcap, softcap_gqa, varlen"
)
UNKNOWN = f"no such file 'scaled_scores', and no bundled spec has that id: expected a spec file or one of {IDS}"


def test_ids_are_the_bundled_file_names():
    """The ids are the bundled files' names without .yaml, each the spec's own id."""
    assert ", ".join(bundled_spec_ids()) == IDS
    assert all(attnscore.load_spec(i).id == i for i in bundled_spec_ids())


def test_resolve_prefers_a_file_and_refuses_paths_that_are_not_ids(tmp_path, monkeypatch):
    """A file of that name in the current folder wins; an id with a folder in it is no id."""
    monkeypatch.chdir(tmp_path)
    assert resolve_spec("score_matrix").resolve() == (ROOT / "specs" / "score_matrix.yaml").resolve()
    assert resolve_spec("score_matrix.yaml").resolve() == (ROOT / "specs" / "score_matrix.yaml").resolve()
    (tmp_path / "score_matrix").write_text("not a spec", encoding="utf-8")
    assert resolve_spec("score_matrix") == Path("score_matrix")
    with pytest.raises(SpecNotFound, match="no such file 'elsewhere/attention', and no bundled spec has that id"):
        resolve_spec("elsewhere/attention")


@pytest.mark.slow
def test_cli_test_takes_an_id_and_names_the_ids_when_neither_matches():
    """attnscore test --spec scaled_score_matrix runs the bundled spec; a wrong name lists the ids."""
    ok = CliRunner().invoke(
        main,
        ["test", "--impl", "examples.impl.my_attention:scaled_score_matrix", "--spec", "scaled_score_matrix"],
        catch_exceptions=False,
    )
    assert ok.exit_code == 0, ok.output
    assert "scaled_score_matrix (scaled_score_matrix.yaml) in float32 on cpu" in ok.output
    bad = CliRunner().invoke(main, ["test", "--impl", "examples.impl.my_attention:scores", "--spec", "scaled_scores"])
    assert bad.exit_code == 2
    assert bad.output.splitlines()[-1] == f"Error: Invalid value for '--spec': {UNKNOWN}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, shown",
    [
        pytest.param(
            ["check", str(SUBS / "correct_matmul.py"), "--spec", "dot_product_scores"], "Score: 9/9", id="check"
        ),
        pytest.param(["verify", "--no-mutations", "dot_product_scores"], "all specs verified", id="verify"),
        pytest.param(
            ["bench", "--impl", "examples.impl.my_attention:scores", "--spec", "dot_product_scores"]
            + ["--size", "n_k=8", "--size", "d_k=4", "--repeats", "1", "--warmup", "0", "--no-flush"],
            "1 timed calls after 0 warm-up calls",
            id="bench",
        ),
    ],
)
def test_every_command_takes_an_id(args, shown):
    """check, verify and bench run the bundled spec named by its id."""
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert shown in result.output


@pytest.mark.parametrize("command", ["check", "grade", "bench", "verify", "export-student-spec"])
def test_every_command_lists_the_ids_for_an_unknown_spec(command, tmp_path):
    """The same usage error, exit 2, before anything runs."""
    args = {
        "check": ["check", str(SUBS / "correct_matmul.py"), "--spec", "scaled_scores"],
        "grade": ["grade", str(SUBS / "correct_matmul.py"), "--spec", "scaled_scores"],
        "bench": ["bench", "--impl", "examples.impl.my_attention:scores", "--spec", "scaled_scores"],
        "verify": ["verify", "scaled_scores"],
        "export-student-spec": ["export", "student-spec", "--spec", "scaled_scores", "-o", str(tmp_path / "s.yaml")],
    }[command]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    name = "'[SPECS]...'" if command == "verify" else "'--spec'"
    assert result.output.splitlines()[-1] == f"Error: Invalid value for {name}: {UNKNOWN}"


def test_export_student_spec_takes_an_id(tmp_path):
    """export student-spec --spec score_matrix writes the student copy of the bundled spec."""
    out = tmp_path / "student.yaml"
    result = CliRunner().invoke(main, ["export", "student-spec", "--spec", "score_matrix", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert attnscore.load_spec(out).id == "score_matrix"


def test_the_python_api_and_the_self_check_take_an_id():
    """load_spec, check_path and check (a notebook's call) take an id; an unknown one lists the ids."""
    assert attnscore.load_spec("dot_product_scores").path.endswith("dot_product_scores.yaml")
    assert check_path(SUBS / "correct_matmul.py", "dot_product_scores").passed
    assert check(lambda q, keys: keys @ q, spec="dot_product_scores").passed
    with pytest.raises(SpecError) as err:
        attnscore.load_spec("scaled_scores")
    assert str(err.value).splitlines()[0] == (
        f"scaled_scores:1:1: (file): expected a spec file or a bundled spec id ({IDS}), found no such file"
    )
