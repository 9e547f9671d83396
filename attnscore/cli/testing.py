"""``attnscore test``: specs against an importable implementation, in this process (trusted code).

The spec is reshaped by the options before it runs: ``--tie`` gives two shape symbols one size,
``--where`` bounds the shapes, ``--allow`` sets a convention corner aside, ``--ratio`` switches to
the low-precision rule.
"""

from __future__ import annotations

import json
import sys

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

__all__ = ["test_impl"]


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
    "Pass a constant keyword argument to every call (e.g. is_causal=true for a causal flag; "
    "VALUE is a YAML scalar: true, 0.5, 3, text) (repeatable)."
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
    allow_outside_reference: bool,
    fmt: str,
) -> None:
    """Run specs against an importable implementation, in this process (trusted code).

    Exit code 0 when every case passed in every dtype, 1 when some case failed, 2 for a usage error.
    """
    from attnscore.check.engineer_options import EngineerOptions
    from attnscore.check.implementation import run_impl
    from attnscore.report import submission_text, submission_to_json
    from attnscore.spec.load import load_specs

    function = load_implementation(impl, device)
    with usage_errors():
        options = EngineerOptions.parse(ties=ties, wheres=wheres, allows=allows, ratio=ratio, keywords=keywords)
    function = options.bind(function)
    results = []
    for spec in load_specs(list(spec_paths), allow_outside_reference=allow_outside_reference):
        with usage_errors():
            spec, reshaped = options.reshape(spec)
        for line in reshaped.notes(spec.id):
            click.echo(line, err=True)
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
