"""``attnscore test``: specs against an importable implementation, in this process (trusted code).

The spec is reshaped by the options before it runs: ``--keyword`` configures the contract's
keywords (the reference follows them) or passes any other name to the implementation, ``--tie``
gives two shape symbols one size, ``--where`` bounds the shapes, ``--allow`` sets a convention
corner aside, ``--ratio`` switches to the low-precision rule; ``--sweep`` runs every point of a grid
of keyword values (or shape bounds) and ends with the points that failed
(:mod:`attnscore.check.engineer_options`).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from attnscore.cli.options import (
    SPEC_HELP,
    SpecParam,
    device_option,
    dtype_option,
    format_option,
    impl_option,
    keyword_option,
    load_implementation,
    outside_reference_option,
    usage_errors,
)
from attnscore.cli.output import finish, stdout_console

__all__ = ["point_text", "sweep_summary", "test_impl"]


@click.command("test")
@impl_option("The implementation to test, e.g. examples.impl.my_attention:scaled_score_matrix.")
@click.option(
    "--spec",
    "spec_paths",
    required=True,
    multiple=True,
    metavar="SPEC",
    type=SpecParam(),
    help="Spec(s) to run (repeat for several)." + SPEC_HELP,
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
    "Pass a constant keyword argument to every call (repeatable). A keyword of the spec's contract "
    "(e.g. window_size=3,0, causal=true, softcap=30, softmax_scale=0.125) also configures the reference, "
    "merged over the spec's own keywords; worked examples whose expected values no longer hold are left "
    "out and listed. Any other name (e.g. is_causal=true for a flag the spec does not know) is only "
    "passed; its VALUE is a YAML scalar: true, 0.5, 3, text."
)
@click.option(
    "--sweep",
    "sweeps",
    multiple=True,
    metavar="NAME=V1;V2;...",
    help="Run the spec at every point of a grid (repeatable; the grid is the product): NAME a keyword of "
    "the spec's contract (e.g. 'causal=true;false', 'window_size=-1,-1;3,0'), or where with shape bounds "
    "('where=h_q==h_kv;h_q>h_kv'); the report ends with the points that failed.",
)
@outside_reference_option()
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
    sweeps: tuple[str, ...],
    allow_outside_reference: bool,
    fmt: str,
) -> None:
    """Run specs against an importable implementation, in this process (trusted code).

    Exit code 0 when every case passed in every dtype (at every grid point of a sweep), 1 when some
    case failed, 2 for a usage error.
    """
    from attnscore.check.engineer_options import EngineerOptions
    from attnscore.check.implementation import run_impl
    from attnscore.report import submission_text, submission_to_json
    from attnscore.spec.load import load_specs

    function = load_implementation(impl, device)
    with usage_errors():
        options = EngineerOptions.parse(
            ties=ties, wheres=wheres, allows=allows, ratio=ratio, keywords=keywords, sweeps=sweeps
        )
    runs: list[tuple[str, Any]] = []  # (grid point, result)
    for spec in load_specs(list(spec_paths), allow_outside_reference=allow_outside_reference):
        with usage_errors():
            options.check_sweeps(spec)
        for point in options.grid():
            label = point_text(point)
            at = options.at(point)
            with usage_errors():
                shaped, reshaped = at.reshape(spec)
                bound = at.bind(function, spec)
            for line in reshaped.notes(shaped.id):
                click.echo(f"{line} [at {label}]" if label else line, err=True)
            for dtype in dtypes or shaped.dtypes:
                runs.append((label, run_impl(shaped, bound, dtype=dtype, device=device, seed=seed, name=impl)))
    results = [r for _, r in runs]
    if fmt == "json":
        data = [{**submission_to_json(r), **({"grid_point": label} if label else {})} for label, r in runs]
        sys.stdout.write(
            json.dumps(data if len(data) > 1 else data[0], indent=2, allow_nan=False, ensure_ascii=False) + "\n"
        )
    else:
        console = stdout_console()
        for label, r in runs:
            at_text = f" at {label}" if label else ""
            console.print(f"[bold]{r.spec_id}[/] ({r.spec_path}) in {r.dtype} on {r.device}{at_text}")
            console.print(submission_text(r))
        if options.sweeps:
            console.file.flush()
            for line in sweep_summary(runs):  # whole lines, never wrapped: a reproduction is pasted back
                click.echo(line)
    finish(all(r.all_passed for r in results))


def point_text(point: tuple[tuple[str, str], ...]) -> str:
    """A grid point as the summary names it: ``causal=true, window_size=3,0`` (empty for no sweep)."""
    return ", ".join(f"{name}={value}" for name, value in point)


def sweep_summary(runs: list[tuple[str, Any]]) -> list[str]:
    """The end of a sweep's report: how many grid points failed, then one line per failing point and
    dtype with its failed cases (each case's smallest counterexample is in its report above)."""
    from attnscore.report.feedback import reproduction

    points = list(dict.fromkeys(label for label, _ in runs))
    failed = [(label, r) for label, r in runs if not r.all_passed]
    failing_points = list(dict.fromkeys(label for label, _ in failed))
    lines = [f"sweep: {len(failing_points)} of {len(points)} grid points failed"]
    for label, r in failed:
        cases = [c for c in r.cases if not c.passed]
        lines.append(f"  FAILED {r.spec_id} at {label} in {r.dtype}: {', '.join(c.id for c in cases)}")
        smallest = min(
            (c for c in cases if c.failure is not None and c.failure.args),
            key=lambda c: _size(c.failure.args),
            default=None,
        )
        if smallest is not None and smallest.failure is not None:
            lines.append(f"    smallest counterexample ({smallest.id}): {reproduction(smallest.failure)}")
    return lines


def _size(args: Any) -> int:
    """How many numbers a failing call's arguments hold (nested lists)."""
    if isinstance(args, dict):
        return sum(_size(v) for v in args.values())
    if isinstance(args, list):
        return sum(_size(v) for v in args)
    return 1
