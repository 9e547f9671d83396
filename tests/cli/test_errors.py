"""The CLI package: commands behind the lazy group, shared options, one error hierarchy handled once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from attnscore import cli as cli_package
from attnscore.boundary.dtypes import DTYPES
from attnscore.cli import COMMANDS, main
from attnscore.cli.errors import (
    EXIT_INTERNAL,
    EXIT_USAGE,
    BadInput,
    BadUsage,
    CommandError,
    InternalError,
    InvalidSpec,
    MachineFailure,
    command_error,
)
from attnscore.spec.located import SpecError, SpecProblem
from attnscore.submission.files import SubmissionError
from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "dot_product_scores.yaml")
SUB = str(ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py")
CLI = ROOT / "attnscore" / "cli"


@pytest.mark.parametrize(
    ("error", "code", "lines"),
    [
        pytest.param(BadInput("nope.py: no such file"), 2, ["Error: nope.py: no such file"], id="bad input"),
        pytest.param(MachineFailure("grader error while grading a.py"), 3, ["Error: grader error while grading a.py"]),
        pytest.param(
            InvalidSpec(["s.yaml:4:10: version: expected integer, found string 'one'"]),
            2,
            ["s.yaml:4:10: version: expected integer, found string 'one'", "Error: invalid spec (1 problem)"],
            id="invalid spec, one problem",
        ),
        pytest.param(InvalidSpec(["a", "b"]), 2, ["a", "b", "Error: invalid spec (2 problems)"], id="two problems"),
        pytest.param(
            InternalError(RuntimeError("disk\non fire"), Path("/x/y.log")),
            3,
            [
                "Error: internal error: RuntimeError: disk on fire "
                "(please report this and attach /x/y.log; nothing was written)"
            ],
            id="internal error with a log",
        ),
        pytest.param(
            InternalError(KeyError("k" * 400), None),
            3,
            [f"Error: internal error: KeyError: '{'k' * 296}... (please report this; nothing was written)"],
            id="internal error, long text cut, no log",
        ),
    ],
)
def test_each_error_carries_its_exit_code_and_lines(error, code, lines, capsys):
    """Every class says its exit code and the exact lines it shows on stderr."""
    assert isinstance(error, CommandError) and isinstance(error, click.ClickException)
    assert error.exit_code == code
    assert error.lines() == lines
    error.show()
    assert capsys.readouterr().err.splitlines() == lines


def test_bad_usage_is_shown_like_clicks_usage_errors():
    """BadUsage is a click UsageError: the usage line and the --help hint, then the message; exit 2."""

    @click.command("demo")
    def demo():
        raise BadUsage("--x: expected y, found z")

    result = CliRunner().invoke(demo, [])
    assert result.exit_code == EXIT_USAGE == BadUsage("m").exit_code
    assert result.output.splitlines() == [
        "Usage: demo [OPTIONS]",
        "Try 'demo --help' for help.",
        "",
        "Error: --x: expected y, found z",
    ]


def test_command_error_translates_what_the_lower_layers_raise():
    """A SpecError is an InvalidSpec, a SubmissionError a BadInput, anything else an InternalError."""
    problem = SpecProblem(
        file="s.yaml", line=1, col=1, field="(file)", message="expected a spec file, found no such file"
    )
    spec = command_error(SpecError([problem]), lambda exc: pytest.fail("no log for a user mistake"))
    assert isinstance(spec, InvalidSpec) and spec.lines() == [str(problem), "Error: invalid spec (1 problem)"]
    missing = command_error(SubmissionError("nope.py: no such file"), lambda exc: pytest.fail("no log"))
    assert type(missing) is BadInput and missing.lines() == ["Error: nope.py: no such file"]
    logged = []
    surprise = command_error(ZeroDivisionError("division by zero"), lambda exc: logged.append(exc) or Path("/l.log"))
    assert type(surprise) is InternalError and surprise.exit_code == EXIT_INTERNAL and surprise.log == Path("/l.log")
    assert [type(e) for e in logged] == [ZeroDivisionError]
    same = BadInput("x")
    assert command_error(same) is same


@pytest.mark.parametrize("command", ["verify", "specs", "schema"])
def test_an_unexpected_exception_in_any_command_exits_3_with_one_line(command, monkeypatch):
    """The group handles errors once for every command: a surprise anywhere is exit 3, one line, no traceback."""
    import attnscore.check.verify
    import attnscore.spec.load
    import attnscore.spec.schema

    def boom(*args, **kwargs):
        raise OSError("the disk is gone")

    monkeypatch.setattr(cli_package, "write_error_log", lambda exc: None)
    monkeypatch.setattr(attnscore.check.verify, "bundled_spec_paths", boom)
    monkeypatch.setattr(attnscore.spec.load, "spec_schema", boom)
    monkeypatch.setattr(attnscore.spec.schema, "spec_schema", boom)
    result = CliRunner().invoke(main, [command])
    assert result.exit_code == 3
    assert result.output.splitlines() == [
        "Error: internal error: OSError: the disk is gone (please report this; nothing was written)"
    ]


def test_errors_propagate_as_exceptions_outside_standalone_mode(tmp_path):
    """Called with standalone_mode=False, main raises the CommandError (with its code) instead of
    exiting; a spec that is neither a file nor a bundled id is click's usage error (exit 2)."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("format: attnscore-spec/1\n", encoding="utf-8")
    with pytest.raises(InvalidSpec) as raised:
        main(["verify", str(broken)], standalone_mode=False)
    assert raised.value.exit_code == 2 and len(raised.value.problems) >= 1
    with pytest.raises(click.BadParameter) as missing:
        main(["verify", str(ROOT / "nope.yaml")], standalone_mode=False)
    assert missing.value.exit_code == 2 and "no bundled spec has that id" in missing.value.message


def test_the_dtype_choice_is_the_dtype_table():
    """Every --dtype option offers exactly the dtypes of attnscore.boundary.dtypes, in the table's order."""
    ctx = click.Context(main)
    seen = 0
    for name in ["grade", "test", "check", "bench"]:
        command = main.get_command(ctx, name)
        [dtype] = [p for p in command.params if p.name in ("dtype", "dtypes")]
        assert tuple(dtype.type.choices) == DTYPES
        seen += 1
    assert seen == 4


def test_every_command_module_is_named_and_small():
    """Each lazy entry names a click command of that name; no module of attnscore/cli passes 300 lines."""
    ctx = click.Context(main)
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert isinstance(command, click.Command) and command.name == name
    assert main.list_commands(ctx) == sorted(COMMANDS)
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in CLI.glob("*.py")}
    assert len(sizes) >= 10 and max(sizes.values()) <= 300, sizes


def test_the_command_modules_import_no_command_work():
    """Listing the commands (`attnscore --help`) imports our command modules, and they import no spec
    loading, checking, grading or reporting, nor rich or yaml: each command imports its work when it runs."""
    modules = sorted({m.partition(":")[0] for m in COMMANDS.values() if m.startswith("attnscore.cli.")})
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "parts = ('spec', 'check', 'report', 'sandbox', 'grade', 'catalogue', 'export', 'timing', 'submission')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[:2] in [['attnscore', p] for p in parts]))\n"
        "print('rich.console' in sys.modules, 'yaml' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr
    assert len(modules) == 7
    assert done.stdout.strip().splitlines()[-2:] == ["[]", "False False"]


def test_a_surprise_in_the_practice_command_is_handled_by_the_group_too(monkeypatch):
    """The practice command (another folder's) gets the same handling: exit 3, one line, no traceback."""
    import attnscore.practice.command

    def boom(*args, **kwargs):
        raise RuntimeError("no families today")

    monkeypatch.setattr(cli_package, "write_error_log", lambda exc: None)
    monkeypatch.setattr(attnscore.practice.command, "load_families", boom)
    result = CliRunner().invoke(main, ["practice", "--list"])
    assert result.exit_code == 3
    assert result.output.splitlines() == [
        "Error: internal error: RuntimeError: no families today (please report this; nothing was written)"
    ]
