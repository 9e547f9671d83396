"""Tests for the attnscore command line: exact lines and exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from attnscore.cli import main
from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "dot_product_scores.yaml")
SUBS = ROOT / "examples" / "submissions" / "scores"


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.mark.slow
def test_verify_without_specs_checks_the_bundled_ones(monkeypatch):
    """verify with no arguments checks the bundled specs (here two of them, as the listing returns)
    and exits 0. That every bundled spec verifies, mutation table included, is `make test`'s first
    step, `attnscore verify`; tests/check/test_verify.py checks its machinery."""
    from attnscore.check import verify as verify_module

    bundled = verify_module.bundled_spec_paths()
    by_id = {p.stem: p for p in bundled}
    assert {"dot_product_scores", "score_matrix", "attention"} <= set(by_id)
    monkeypatch.setattr(
        verify_module, "bundled_spec_paths", lambda: [by_id["dot_product_scores"], by_id["score_matrix"]]
    )
    result = run("verify", "--no-mutations", "--jobs", "1")
    assert result.exit_code == 0, result.output
    assert "dot_product_scores" in result.output and "score_matrix" in result.output
    assert "attention" not in result.output  # the listing decides: no other bundled spec is verified
    assert result.output.rstrip().endswith("all specs verified")


def test_verify_invalid_spec_exits_2_with_located_problems(tmp_path):
    """An invalid spec gives located problems on stderr and exit code 2, no traceback."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(SPEC).read_text(encoding="utf-8").replace("version: 1", "version: one"), encoding="utf-8")
    result = CliRunner().invoke(main, ["verify", str(bad)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == [f"{bad}:4:10: version: expected integer, found string 'one'", "Error: invalid spec (1 problem)"]


def test_grade_correct_submission_exits_0():
    """A correct submission gets full marks and exit code 0."""
    result = run("grade", str(SUBS / "correct_matmul.py"), "--spec", SPEC)
    assert result.exit_code == 0, result.output
    assert "Score: 11/11" in result.output


def test_grade_json_prints_exactly_one_object():
    """--format json prints one JSON object with score, max_score and cases; exit 1 on failures."""
    result = run("grade", str(SUBS / "softmax_applied.py"), "--spec", SPEC, "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert (data["score"], data["max_score"]) == (0, 11)
    assert [c["id"] for c in data["cases"]][:2] == ["example:aligned_perpendicular_partial", "example:anti_aligned"]
    assert {c["verdict"] for c in data["cases"]} == {"wrong_value"}


def test_grade_gradescope_writes_results_file(tmp_path):
    """--format gradescope --output writes a valid results.json and nothing else."""
    out = tmp_path / "results.json"
    result = run(
        "grade", str(SUBS / "absolute_value.py"), "--spec", SPEC, "--format", "gradescope", "--output", str(out)
    )
    assert result.exit_code == 1 and result.output == ""
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["score"] == 4 and len(data["tests"]) == 7
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
    assert out.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_grade_several_submissions_prints_a_table():
    """Several submissions give one table row each and a legend."""
    result = run("grade", str(SUBS / "correct_matmul.py"), str(SUBS / "cosine_similarity.py"), "--spec", SPEC)
    assert result.exit_code == 1
    assert "correct_matmul.py" in result.output and "11/11" in result.output
    assert "cosine_similarity.py" in result.output and "2/11" in result.output
    assert "E1: example:aligned_perpendicular_partial" in result.output


@pytest.mark.parametrize(
    ("args", "line"),
    [
        pytest.param(["grade", "nope.py", "--spec", SPEC], "Error: nope.py: no such file", id="missing submission"),
        pytest.param(
            ["grade", str(SUBS / "correct_matmul.py"), "--spec", "nope.yaml"],
            "Error: Invalid value for '--spec': no such file 'nope.yaml', and no bundled spec has that id: expected a "
            "spec file or one of additive_scores, alibi, alibi_causal, attention, attention_weights, bilinear_scores, "
            "causal_attention, dot_product_scores, flash_attention_2, flash_attention_2_causal, gqa, key_padding, "
            "kv_cache, masked_scores, multihead_self_attention, multihead_self_attention_module, "
            "multihead_self_attention_rope, rope, scaled_score_matrix, score_matrix, sdpa, sdpa_causal, "
            "sdpa_float_mask, sliding_window, sliding_window_causal, softcap, softcap_gqa, varlen",
            id="missing spec",
        ),
        pytest.param(
            [
                "grade",
                str(SUBS / "correct_matmul.py"),
                str(SUBS / "correct_loops.py"),
                "--spec",
                SPEC,
                "--format",
                "gradescope",
            ],
            "Error: --format gradescope grades exactly one submission (a file, or one folder), found 2",
            id="gradescope needs one submission",
        ),
        pytest.param(
            ["grade", str(SUBS / "correct_matmul.py"), "--spec", SPEC, "--format", "xml"],
            "Error: Invalid value for '--format': 'xml' is not one of 'text', 'json', 'gradescope', 'junit'.",
            id="unknown format",
        ),
        pytest.param(
            ["grade", str(SUBS / "correct_matmul.py"), "--spec", SPEC, "--output", "/no/such/dir/r.json"],
            "Error: cannot write /no/such/dir/r.json: the directory /no/such/dir does not exist",
            id="output directory missing",
        ),
        pytest.param(
            ["grade", str(SUBS / "correct_matmul.py"), "--spec", SPEC, "--timeout", "nan"],
            "Error: Invalid value for '--timeout': expected a finite number of seconds, found nan",
            id="NaN timeout",
        ),
        pytest.param(
            ["grade", str(SUBS / "correct_matmul.py"), "--spec", SPEC, "--seed", "-1"],
            "Error: Invalid value for '--seed': -1 is not in the range x>=0.",
            id="negative seed",
        ),
        pytest.param(
            ["grade", str(SUBS / "correct_matmul.py"), "--spec", SPEC, "--dtype", "float16"],
            "Error: --dtype float16 is not one of this spec's dtypes: float32, float64",
            id="dtype not in spec",
        ),
    ],
)
def test_usage_errors_exit_2_with_one_line(args, line):
    """User mistakes exit 2 with a clear line and no traceback."""
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert line in result.output.splitlines()
    assert "Traceback" not in result.output


def _boom(*args, **kwargs):
    raise RuntimeError("disk\non fire")


def test_internal_error_exits_3_and_keeps_the_traceback_in_a_private_log(monkeypatch, tmp_path):
    """An unexpected failure exits 3 with one line naming a 0600 log that holds the whole traceback."""
    import stat

    import attnscore.grade.grading

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(attnscore.grade.grading, "grade_many", _boom)
    result = CliRunner().invoke(main, ["grade", str(SUBS / "correct_matmul.py"), "--spec", SPEC])
    assert result.exit_code == 3
    [line] = result.output.strip().splitlines()
    [log] = (tmp_path / "cache" / "attnscore" / "errors").iterdir()
    assert line == (
        f"Error: internal error: RuntimeError: disk on fire (please report this and attach {log}; nothing was written)"
    )
    assert "Traceback" not in result.output
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    text = log.read_text(encoding="utf-8")
    assert text.startswith("attnscore ") and "command: " in text
    assert 'in _boom\n    raise RuntimeError("disk\\non fire")\nRuntimeError: disk\non fire\n' in text


def test_internal_error_log_falls_back_to_the_temp_folder(monkeypatch, tmp_path):
    """A cache folder that cannot be made sends the log to the temp folder; the line names it."""
    import tempfile

    import attnscore.grade.grading

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(attnscore.grade.grading, "grade_many", _boom)
    result = CliRunner().invoke(main, ["grade", str(SUBS / "correct_matmul.py"), "--spec", SPEC])
    assert result.exit_code == 3
    [log] = (tmp_path / "tmp").iterdir()
    assert log.name.startswith("internal-error-") and log.suffix == ".log"
    assert f"(please report this and attach {log}; nothing was written)" in result.output
    assert "RuntimeError: disk\non fire" in log.read_text(encoding="utf-8")


def test_internal_error_without_any_writable_folder_still_says_one_line(monkeypatch, tmp_path):
    """When no log can be written, the one line still says what happened (and no path)."""
    import attnscore.cli
    import attnscore.grade.grading

    monkeypatch.setattr(attnscore.cli, "write_error_log", lambda exc: None)
    monkeypatch.setattr(attnscore.grade.grading, "grade_many", _boom)
    result = CliRunner().invoke(main, ["grade", str(SUBS / "correct_matmul.py"), "--spec", SPEC])
    assert result.exit_code == 3
    assert result.output.strip() == (
        "Error: internal error: RuntimeError: disk on fire (please report this; nothing was written)"
    )


def test_schema_prints_the_published_schema():
    """schema prints the JSON Schema of spec format v1."""
    result = run("schema")
    assert result.exit_code == 0
    assert json.loads(result.output)["properties"]["format"] == {
        "const": "attnscore-spec/1",
        "description": "Format marker; must be attnscore-spec/1.",
    }


def test_the_command_freezes_the_imports_objects_before_it_runs(monkeypatch):
    """`attnscore` (the console script and `python -m attnscore`) is `run`: gc.freeze, then main."""
    import gc

    from attnscore import cli

    seen = {}
    monkeypatch.setattr(cli, "main", lambda **kw: seen.update(frozen=gc.get_freeze_count(), **kw))
    try:
        cli.run()
    finally:
        gc.unfreeze()
    assert seen["frozen"] > 10_000  # torch's objects, at least
    assert seen["prog_name"] == "attnscore"
    text = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert 'attnscore = "attnscore.cli:run"' in text


@pytest.mark.slow
def test_check_does_not_import_the_other_commands():
    """A lazy subcommand (practice) is imported only when named or listed."""
    import subprocess
    import sys

    root = Path(__file__).parents[2]
    code = (
        "import sys\n"
        "from attnscore.cli import main\n"
        "try:\n"
        "    main(['check', 'examples/submissions/scores/correct_matmul.py', '--spec',"
        " 'specs/dot_product_scores.yaml'], prog_name='attnscore')\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 0, exit.code\n"
        "print(sorted(m for m in sys.modules if m.startswith('attnscore.practice') or m == 'rich.progress'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    listed = CliRunner().invoke(main, ["--help"])
    assert "practice  Generate practice problems" in listed.output
    assert CliRunner().invoke(main, ["practice", "--help"]).exit_code == 0
    assert CliRunner().invoke(main, ["no-such-command"]).exit_code == 2


def test_mutation_table_is_split_to_fit_the_console():
    """verify's mutation table (mistakes x specs) for the 21 bundled specs is split into tables that
    each fit the console's width; every spec is in exactly one, in order, and each table has only
    the mistakes its specs target, with its own "caught" row."""
    from rich.console import Console

    from attnscore.catalogue.mistakes import MISTAKES
    from attnscore.cli.verify import mutation_tables

    ids = list(MISTAKES)
    specs = [f"spec_number_{n}" for n in range(21)]
    mutations = {s: {ids[n]: "✓", ids[n + 1]: "MISSED (float16)"} for n, s in enumerate(specs)}
    tables = mutation_tables(mutations, 100)
    assert len(tables) > 1
    wide = Console(width=10_000, color_system=None)
    seen = []
    for number, table in enumerate(tables, 1):
        assert wide.measure(table).maximum <= 100
        assert table.title.endswith(f", part {number} of {len(tables)}")
        columns = [str(c.header).replace("_\n", "_") for c in table.columns[1:]]
        seen += columns
        rows = [str(cells._cells[i]) for cells in [table.columns[0]] for i in range(table.row_count)]
        targeted = [m for m in ids if any(m in mutations[s] for s in columns)]
        assert rows == [*targeted, "[bold]caught[/]"]
        assert [str(c._cells[-1]) for c in table.columns[1:]] == ["1/2"] * len(columns)
    assert seen == specs
    (whole,) = mutation_tables(mutations, 10_000)
    assert whole.title == "mutation score: known mistakes against specs (every dtype)"
