"""Options shared by several commands, built once: the spec, the dtype, the format, the device...

Each builder returns a click decorator with the option's name, type, default and help; commands
pass only what differs between them (mostly the help line). The ``--dtype`` choice is the dtype
table, :data:`attnscore.boundary.dtypes.DTYPES`. The small parsers below turn repeatable
``NAME=VALUE`` options into dicts, with usage errors that name the option and the text found.

Example:
    >>> pair("d_v=d_k", "--tie"), yaml_scalar("0.5", "scale")
    (('d_v', 'd_k'), 0.5)
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import click

from attnscore.boundary.dtypes import DTYPES
from attnscore.cli.errors import BadUsage

__all__ = [
    "dtype_option",
    "spec_option",
    "one_spec",
    "SpecParam",
    "function_option",
    "entry_option",
    "format_option",
    "device_option",
    "impl_option",
    "keyword_option",
    "shrink_steps_option",
    "finite_seconds",
    "seconds_option",
    "pair",
    "yaml_scalar",
    "keyword_arguments",
    "usage_errors",
    "check_spec_dtype",
    "load_implementation",
]

F = TypeVar("F", bound=Callable[..., Any])
Decorator = Callable[[F], F]


def dtype_option(help: str, *, multiple: bool = False) -> Decorator[Any]:
    """``--dtype``, one of :data:`~attnscore.boundary.dtypes.DTYPES` (parameter ``dtype``, None by
    default; repeatable into ``dtypes`` with ``multiple``)."""
    if multiple:
        return click.option("--dtype", "dtypes", multiple=True, type=click.Choice(DTYPES), help=help)
    return click.option("--dtype", type=click.Choice(DTYPES), default=None, help=help)


class SpecParam(click.ParamType):
    """A spec: a file, or the id of a bundled spec (:func:`attnscore.spec.bundled.resolve_spec`),
    converted to the file's path as text. ``regular_file`` also refuses, before the command runs,
    a path that is not a regular file (a command that hands the path on unread)."""

    name = "spec"

    def __init__(self, *, regular_file: bool = False) -> None:
        self.regular_file = regular_file

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from attnscore.spec.bundled import SpecNotFound, resolve_spec

        try:
            path = resolve_spec(str(value))
        except SpecNotFound as exc:
            self.fail(str(exc), param, ctx)
        if path.is_dir():
            self.fail(f"{str(value)!r} is a folder: expected a spec file or a bundled spec id", param, ctx)
        if self.regular_file and not path.is_file():
            self.fail(f"{str(value)!r} is not a regular file: expected a spec file or a bundled spec id", param, ctx)
        return str(path)


SPEC_HELP = " SPEC is a spec file or a bundled spec's id (e.g. score_matrix; `attnscore specs` lists them)."


def one_spec(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> str | None:
    """A click callback: the one ``--spec`` given, or a usage error when it was given more than once
    (click would otherwise keep the last one and drop the others without a word).

    Raises:
        click.BadParameter: ``--spec`` was given more than once.
    """
    if len(value) > 1:
        given = ", ".join(repr(v) for v in value)
        raise click.BadParameter(
            f"expected one spec, found {len(value)}: {given}; give --spec once (grading several questions "
            "together, as an assignment, is not supported yet: export or grade each spec on its own)",
            ctx=ctx,
            param=param,
        )
    return value[0] if value else None


def spec_option(help: str, *, exists: bool = False) -> Decorator[Any]:
    """``--spec SPEC`` (required, parameter ``spec_path``): a spec file or a bundled spec's id,
    given to the command as the file's path; ``exists`` also requires a regular file (see :class:`SpecParam`).
    Given twice, it is a usage error (:func:`one_spec`), never the last one silently."""
    return click.option(
        "--spec",
        "spec_path",
        required=True,
        multiple=True,  # collected, so that a second --spec is seen (one_spec refuses it)
        callback=one_spec,
        metavar="SPEC",
        type=SpecParam(regular_file=exists),
        help=help + SPEC_HELP,
    )


def outside_reference_option() -> Decorator[Any]:
    """``--allow-outside-reference`` (parameter ``allow_outside_reference``): trust a spec's own
    reference file (``function.reference``) that lies outside the spec's folder."""
    return click.option(
        "--allow-outside-reference",
        "allow_outside_reference",
        is_flag=True,
        help="Trust a spec's own reference file (function.reference) outside the spec's folder; without it such "
        "a spec is refused, so that a spec file cannot make the grader run any file of the machine.",
    )


def function_option() -> Decorator[Any]:
    """``--function NAME``, the graded function's name (default: the spec's)."""
    return click.option(
        "--function", "function", default=None, help="Name of the graded function (default: the spec's)."
    )


def entry_option(help: str) -> Decorator[Any]:
    """``--entry FILE``, the entry file of a folder submission."""
    return click.option("--entry", "entry", default=None, metavar="FILE", help=help)


def format_option(*formats: str, help: str | None = None) -> Decorator[Any]:
    """``--format``, one of ``formats`` (parameter ``fmt``, default the first)."""
    return click.option(
        "--format", "fmt", type=click.Choice(list(formats)), default=formats[0], show_default=True, help=help
    )


def device_option(help: str) -> Decorator[Any]:
    """``--device``: cpu (the default), cuda or cuda:N."""
    return click.option("--device", default="cpu", show_default=True, help=help)


def impl_option(help: str) -> Decorator[Any]:
    """``--impl MODULE:FUNCTION`` (required), an importable implementation (trusted code)."""
    return click.option("--impl", "impl", required=True, metavar="MODULE:FUNCTION", help=help)


def keyword_option(help: str) -> Decorator[Any]:
    """``--keyword NAME=VALUE`` (repeatable, parameter ``keywords``): see :func:`keyword_arguments`."""
    return click.option("--keyword", "keywords", multiple=True, metavar="NAME=VALUE", help=help)


def shrink_steps_option() -> Decorator[Any]:
    """``--shrink-steps N`` (0 to 1000, default 50): examples tried to shrink a failing property."""
    return click.option(
        "--shrink-steps",
        "shrink_steps",
        type=click.IntRange(min=0, max=1000),
        default=50,
        show_default=True,
        help="Examples tried per failing property to find a minimal counterexample (0: off).",
    )


def seconds_option(flag: str, name: str, most: float, **extra: Any) -> Decorator[Any]:
    """``flag`` (stored as ``name``): an optional number of seconds from 0.1 to ``most``, finite
    (:func:`finite_seconds`); ``extra`` (``help``, ``metavar``) as :func:`click.option` takes it."""
    return click.option(
        flag, name, type=click.FloatRange(min=0.1, max=most), default=None, callback=finite_seconds, **extra
    )


def time_budget_option() -> Decorator[Any]:
    """``--time-budget SECONDS``: the own time all of one submission's calls may take together."""
    return seconds_option(
        "--time-budget",
        "time_budget",
        86400,
        metavar="SECONDS",
        help="Time budget of each submission: the time all its calls may take together, over every case; the "
        "cases not run once it is spent get the verdict 'budget spent' and no points (at least the per-call "
        "limit; default: the spec's time_budget_s, else 10 times its timeout_s).",
    )


def finite_seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A click callback: ``value`` unless it is NaN or infinite (click's FloatRange lets NaN through)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"expected a finite number of seconds, found {value}")
    return value


def pair(text: str, option: str) -> tuple[str, str]:
    """``NAME=VALUE`` split in two, or a usage error naming the option
    (:func:`attnscore.check.engineer_options.pair`).

    Raises:
        BadUsage: ``text`` has no ``=``, or an empty name or value.
    """
    from attnscore.check import engineer_options

    with usage_errors():
        return engineer_options.pair(text, option)


def yaml_scalar(value: str, name: str) -> object:
    """A keyword's value read as a YAML scalar (``true``, ``3``, ``0.5``, text).

    Raises:
        BadUsage: the value is a YAML list, mapping or null.
    """
    from attnscore.check import engineer_options

    with usage_errors():
        return engineer_options.yaml_scalar(value, name)


def keyword_arguments(keywords: tuple[str, ...]) -> dict[str, object]:
    """The ``--keyword NAME=VALUE`` options as keyword arguments, each value a YAML scalar.

    Raises:
        BadUsage: a text is not ``NAME=VALUE`` with an identifier for a name and a scalar value.
    """
    from attnscore.check import engineer_options

    with usage_errors():
        return engineer_options.keyword_arguments(keywords)


@contextlib.contextmanager
def usage_errors() -> Iterator[None]:
    """Turn an :class:`attnscore.check.engineer_options.OptionError` (its message names the
    option) into a :class:`BadUsage`."""
    from attnscore.check.engineer_options import OptionError

    try:
        yield
    except OptionError as exc:
        raise BadUsage(str(exc)) from None


def check_spec_dtype(dtype: str | None, spec: Any) -> None:
    """Fail when ``--dtype`` names a dtype the spec does not grade in.

    Raises:
        BadUsage: ``dtype`` is given and not in ``spec.dtypes``.
    """
    if dtype is not None and dtype not in spec.dtypes:
        raise BadUsage(f"--dtype {dtype} is not one of this spec's dtypes: {', '.join(spec.dtypes)}")


def load_implementation(impl: str, device: str) -> Callable[..., Any]:
    """The function ``--impl MODULE:FUNCTION`` names, once ``--device`` is known to be usable here.

    Raises:
        BadUsage: the module or function cannot be imported, or the device is not available
            (the message of :class:`attnscore.check.implementation.ImplError`).
    """
    from attnscore.check.implementation import ImplError, check_device, load_impl

    try:
        function = load_impl(impl)
        check_device(device)
    except ImplError as exc:
        raise BadUsage(str(exc)) from None
    return function
