"""The ``attnscore`` command line: one entry point, subcommands along the users' jobs.

Each command lives in a module of its own (``attnscore/cli/<command>.py``) and is imported only
when it is named or listed by ``--help`` (:class:`LazyGroup`). Shared options are built in
:mod:`attnscore.cli.options`; the errors a command stops on, with their exit codes, are
:mod:`attnscore.cli.errors`.

Exit codes: 0 all passed, 1 some case failed, 2 usage error or invalid spec, 3 internal error.
Errors are one clear line (or one line per spec problem) on stderr, never a traceback.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from attnscore.cli.collector import freeze_after_imports, freeze_at_exit
from attnscore.cli.errors import CommandError, command_error, error_log_folder, write_error_log

__all__ = ["main", "run", "LazyGroup", "COMMANDS", "error_log_folder", "write_error_log"]

COMMANDS = {
    "bench": "attnscore.cli.bench:bench_impl",
    "check": "attnscore.cli.check:check_solution",
    "export": "attnscore.cli.export:export",
    "grade": "attnscore.cli.grade:grade",
    "practice": "attnscore.practice.command:practice",
    "schema": "attnscore.cli.catalogue:schema",
    "specs": "attnscore.cli.catalogue:list_specs",
    "test": "attnscore.cli.testing:test_impl",
    "verify": "attnscore.cli.verify:verify",
}
"""Every subcommand: its name and ``module:attribute``, imported when named or listed."""


class LazyGroup(click.Group):
    """A command group whose ``lazy`` subcommands are imported only when named (or listed by
    ``--help``), so that a command does not pay for the imports of the others.

    It is also the one place errors are handled: a :class:`~attnscore.cli.errors.CommandError`
    (a click exception) is shown by click, which exits with its code; any other exception a
    command raises becomes one (:func:`~attnscore.cli.errors.command_error`: an invalid spec or
    a missing submission exit 2, a surprise exits 3 with its traceback in a private log).
    """

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            module, _, name = self.lazy[cmd_name].partition(":")
            command: click.Command = getattr(importlib.import_module(module), name)
            return command
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # CommandError included: click shows it and exits with its code
        except Exception as exc:  # noqa: BLE001 - the one place errors are handled
            # write_error_log is looked up here, in attnscore.cli, at the moment of the error
            error: CommandError = command_error(exc, write_error_log)
            raise error from exc


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="attnscore")
def main() -> None:
    """Verify, grade and practise attention scores against YAML specs."""


def run() -> None:
    """The ``attnscore`` console script: :func:`main` in a process of its own.

    Before parsing, it moves every object the imports made into the collector's permanent
    generation, and does again once torch has been imported (torch's objects alone are over a
    million: :func:`attnscore.cli.collector.freeze_after_imports`), so that no full collection in
    this short-lived process scans them again; each would cost about 0.1 s. As the command ends
    (with any exit code), it freezes once more (:func:`attnscore.cli.collector.freeze_at_exit`),
    so that the interpreter's shutdown scans nothing either. Code that calls
    :func:`main` inside a longer-lived process (tests, notebooks) leaves its collector as it is.
    """
    freeze_after_imports()
    try:
        main(prog_name="attnscore")
    finally:
        freeze_at_exit()
