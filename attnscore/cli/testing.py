"""``attnscore test``: specs against an importable implementation, in this process (trusted code).

The spec is reshaped by the options before it runs: ``--tie`` gives two shape symbols one size,
``--where`` bounds the shapes, ``--allow`` sets a convention corner aside, ``--ratio`` switches to
the low-precision rule.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import click

from attnscore.cli.errors import BadUsage
from attnscore.cli.options import (
    device_option,
    dtype_option,
    format_option,
    impl_option,
    keyword_arguments,
    keyword_option,
    load_implementation,
    pair,
)
from attnscore.cli.output import finish, stdout_console

__all__ = ["test_impl"]


@click.command("test")
@impl_option("The implementation to test, e.g. examples.impl.my_attention:scaled_score_matrix.")
@click.option(
    "--spec",
    "spec_paths",
    required=True,
    multiple=True,
    type=click.Path(dir_okay=False),
    help="Spec file(s) to run (repeat for several).",
)
@dtype_option("Dtype(s) to test (repeatable; default: the spec's dtypes).", multiple=True)
@device_option("cpu, cuda or cuda:N.")
@click.option("--seed", type=int, default=None, help="Base seed for generated inputs (default: the spec's).")
@click.option(
    "--ratio",
    type=click.FloatRange(min=1.0),
    default=None,
    metavar="K",
    help="Use the low-precision rule: error at most K x the reference's own error in the same dtype.",
)
@click.option(
    "--tie",
    "ties",
    multiple=True,
    metavar="SYMBOL=SAME_AS",
    help="Give two shape symbols one size, as a kernel requires (e.g. d_v=d_k); worked examples "
    "that break it are adapted (V padded with zero columns or cut, expected values recomputed) "
    "where that keeps what they check, else left out and listed (repeatable).",
)
@click.option(
    "--where",
    "wheres",
    multiple=True,
    metavar="BOUND",
    help="Bound the shapes to the kernel's domain, e.g. 'n_q<=n_k' or 'd_k<=128' (SYMBOL OP SYMBOL "
    "or SYMBOL OP INTEGER; OP one of <=, <, >=, >, ==, !=): generated inputs are drawn inside it, "
    "worked examples outside it are skipped by constraint and listed (repeatable).",
)
@click.option(
    "--allow",
    "allows",
    multiple=True,
    metavar="CORNER",
    help="Set a convention corner aside, e.g. fully_masked_row (rows whose every key is masked: "
    "NaN or the mean of V accepted there); every other entry is still compared (repeatable).",
)
@keyword_option(
    "Pass a constant keyword argument to every call (e.g. is_causal=true for a causal flag; "
    "VALUE is a YAML scalar: true, 0.5, 3, text) (repeatable)."
)
@format_option("text", "json")
def test_impl(
    impl: str,
    spec_paths: tuple[str, ...],
    dtypes: tuple[str, ...],
    device: str,
    seed: int | None,
    ratio: float | None,
    ties: tuple[str, ...],
    wheres: tuple[str, ...],
    allows: tuple[str, ...],
    keywords: tuple[str, ...],
    fmt: str,
) -> None:
    """Run specs against an importable implementation, in this process (trusted code).

    Exit code 0 when every case passed in every dtype, 1 when some case failed, 2 for a usage error.
    """
    import functools

    from attnscore.check.implementation import run_impl
    from attnscore.maths.bounds import parse_bound
    from attnscore.report import submission_text, submission_to_json
    from attnscore.spec.load import load_specs

    function = load_implementation(impl, device)
    if ratio is not None and not math.isfinite(ratio):
        raise BadUsage(f"--ratio: expected a finite number >= 1, found {ratio}")
    tie_map = dict(pair(text, "--tie") for text in ties)
    try:
        bounds = tuple(parse_bound(text) for text in wheres)
    except ValueError as exc:
        raise BadUsage(f"--where: {exc}") from None
    keyword_map = keyword_arguments(keywords)
    if keyword_map:
        function = functools.partial(function, **keyword_map)
    results = []
    for spec in load_specs(list(spec_paths)):
        spec = _reshaped(spec, tie_map, bounds, allows, ratio)
        for dtype in dtypes or spec.dtypes:
            results.append(run_impl(spec, function, dtype=dtype, device=device, seed=seed, name=impl))
    if fmt == "json":
        data = [submission_to_json(r) for r in results]
        sys.stdout.write(
            json.dumps(data if len(data) > 1 else data[0], indent=2, allow_nan=False, ensure_ascii=False) + "\n"
        )
    else:
        console = stdout_console()
        for r in results:
            console.print(f"[bold]{r.spec_id}[/] ({r.spec_path}) in {r.dtype} on {r.device}")
            console.print(submission_text(r))
    finish(all(r.all_passed for r in results))


def _reshaped(
    spec: Any, tie_map: dict[str, str], bounds: tuple[Any, ...], allows: tuple[str, ...], ratio: float | None
) -> Any:
    """``spec`` with ``--tie``, ``--where``, ``--allow`` and ``--ratio`` applied, in that order;
    what each changed or left out is said on stderr."""
    if tie_map:
        try:
            spec, dropped = spec.tied(tie_map)
        except ValueError as exc:
            raise BadUsage(f"--tie: {exc}") from None
        tie_text = ", ".join(f"{a}={b}" for a, b in tie_map.items())
        adapted = spec.adapted_examples()
        if adapted:
            click.echo(
                f"{spec.id}: adapted {len(adapted)} worked example(s) to {tie_text} "
                f"(expected values recomputed): {', '.join(adapted)}",
                err=True,
            )
        if dropped:
            click.echo(
                f"{spec.id}: left out {len(dropped)} worked example(s) whose shapes break "
                f"{tie_text}: {', '.join(dropped)}",
                err=True,
            )
    if bounds:
        try:
            spec, skipped = spec.bounded(bounds)
        except ValueError as exc:
            raise BadUsage(f"--where: {exc}") from None
        if skipped:
            click.echo(
                f"{spec.id}: skipped by constraint {', '.join(map(str, bounds))}: {'; '.join(skipped)}", err=True
            )
    if allows:
        try:
            spec = spec.allowing(tuple(a.replace("-", "_") for a in allows))
        except ValueError as exc:
            raise BadUsage(f"--allow: {exc}") from None
    if ratio is not None:
        import dataclasses

        from attnscore.maths.tolerance import Tolerance

        spec = dataclasses.replace(spec, tolerance=Tolerance(mode="ratio", factor=ratio))
    return spec
