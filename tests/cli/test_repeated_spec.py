"""A second ``--spec`` is a usage error on every command that grades, checks or exports one spec
(click would keep the last one without a word); ``attnscore test``, which runs several specs by
design, takes it repeated."""

from __future__ import annotations

import importlib
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from attnscore.cli import COMMANDS, main
from attnscore.cli.options import one_spec
from attnscore.spec.bundled import resolve_spec

ROOT = Path(__file__).resolve().parents[2]
SUB = str(ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py")
FIRST, SECOND = str(resolve_spec("dot_product_scores")), str(resolve_spec("score_matrix"))
TWICE = ["--spec", "dot_product_scores", "--spec", "score_matrix"]
MULTIPLE_BY_DESIGN = {("test",)}  # attnscore test --spec A --spec B runs both


def _commands() -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command of the command line, by its path of names (groups walked)."""
    found = []

    def walk(path: tuple[str, ...], command: click.Command) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(click.Context(command)):
                sub = command.get_command(click.Context(command), name)
                assert sub is not None, name
                walk((*path, name), sub)
        else:
            found.append((path, command))

    for name, target in COMMANDS.items():
        module, attribute = target.split(":")
        walk((name,), getattr(importlib.import_module(module), attribute))
    return found


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["export", "gradescope", *TWICE, "-o", "{tmp}/a.zip"], id="export gradescope"),
        pytest.param(["export", "prairielearn", *TWICE, "-o", "{tmp}/pl"], id="export prairielearn"),
        pytest.param(["export", "student-spec", *TWICE, "-o", "{tmp}/student.yaml"], id="export student-spec"),
        pytest.param(["grade", *TWICE, SUB], id="grade"),
        pytest.param(["check", *TWICE, SUB], id="check"),
        pytest.param(["bench", *TWICE, "--impl", "examples.impl.my_attention:scores"], id="bench"),
    ],
)
def test_a_second_spec_is_a_usage_error(argv, tmp_path):
    """--spec twice exits 2 with click's usage lines and one error naming both specs;
    nothing is written."""
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    result = CliRunner().invoke(main, argv, prog_name="attnscore")
    assert result.exit_code == 2, result.output
    command = " ".join(argv[: 2 if argv[0] == "export" else 1])
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"Usage: attnscore {command} [OPTIONS]")
    assert lines[1] == f"Try 'attnscore {command} --help' for help."
    assert lines[-1] == (
        f"Error: Invalid value for '--spec': expected one spec, found 2: {FIRST!r}, {SECOND!r}; give --spec "
        "once (grading several questions together, as an assignment, is not supported yet: export or grade "
        "each spec on its own)"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_same_spec_twice_is_refused_too(tmp_path):
    """Even the same spec twice: one --spec per command."""
    result = CliRunner().invoke(
        main, ["export", "gradescope", "--spec", "dot_product_scores", "--spec", FIRST, "-o", str(tmp_path / "a.zip")]
    )
    assert result.exit_code == 2 and "expected one spec, found 2" in result.stderr


def test_one_spec_still_works_and_none_is_still_missing(tmp_path):
    """One --spec exports as before; none is click's missing-option error."""
    once = CliRunner().invoke(
        main, ["export", "student-spec", "--spec", "dot_product_scores", "-o", str(tmp_path / "s.yaml")]
    )
    assert once.exit_code == 0, once.output
    missing = CliRunner().invoke(main, ["export", "student-spec", "-o", str(tmp_path / "t.yaml")])
    assert missing.exit_code == 2 and missing.stderr.splitlines()[-1] == "Error: Missing option '--spec'."


def test_no_command_lets_a_repeated_spec_win_silently():
    """Every --spec option of every command refuses a repeat (one_spec), but attnscore test's,
    which runs each spec given."""
    seen = set()
    for path, command in _commands():
        for option in command.params:
            if isinstance(option, click.Option) and "--spec" in option.opts:
                seen.add(path)
                assert option.multiple, path  # a single-valued option keeps the last one given
                assert (option.callback is one_spec) != (path in MULTIPLE_BY_DESIGN), path
    assert seen == {
        ("bench",),
        ("check",),
        ("grade",),
        ("test",),
        ("export", "gradescope"),
        ("export", "prairielearn"),
        ("export", "student-spec"),
    }
