"""``attnscore bench``: an implementation timed against attnscore's reference and torch's own op."""

from __future__ import annotations

import json
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
    outside_reference_option,
    pair,
    spec_option,
)
from attnscore.cli.output import finish, stdout_console

__all__ = ["bench_impl"]


@click.command("bench")
@impl_option("The implementation to time.")
@spec_option("The spec whose contract it has.")
@outside_reference_option()
@dtype_option("Dtype of the inputs (default: the spec's first).")
@device_option("cpu (wall time) or cuda[:N] (CUDA events).")
@click.option(
    "--size",
    "sizes",
    multiple=True,
    metavar="SYMBOL=N",
    help="An input size: n_q, n_k, d_k, d_v, d_q, d_a, or batch=B,H for the batch dims "
    "(repeatable; default batch=4,8 n_q=n_k=1024, widths 64).",
)
@keyword_option("A constant keyword argument for the implementation (e.g. is_causal=true) (repeatable).")
@click.option(
    "--warmup", type=click.IntRange(min=0, max=1000), default=3, show_default=True, help="Untimed calls first."
)
@click.option("--repeats", type=click.IntRange(min=1, max=10000), default=20, show_default=True, help="Timed calls.")
@click.option("--no-flush", is_flag=True, help="Do not overwrite a 256 MB buffer before each call (warm caches).")
@format_option("text", "json")
def bench_impl(
    impl: str,
    spec_path: str,
    allow_outside_reference: bool,
    dtype: str | None,
    device: str,
    sizes: tuple[str, ...],
    keywords: tuple[str, ...],
    warmup: int,
    repeats: int,
    no_flush: bool,
    fmt: str,
) -> None:
    """Time an implementation against attnscore's reference and torch's own op, in one run.

    Median and interquartile range in milliseconds over --repeats calls; CUDA events on a GPU, wall
    time on the CPU; the cache is flushed before each call. Exit code 0 when the implementation ran
    and agrees with the reference, 1 when it raised or its result differs, 2 for a usage error.
    """
    from attnscore.spec.load import load_spec
    from attnscore.timing.benchmark import bench, parse_sizes
    from attnscore.timing.kernel_timer import FLUSH_BYTES

    function = load_implementation(impl, device)
    try:
        size_map = parse_sizes(dict(pair(text, "--size") for text in sizes))
    except ValueError as exc:
        raise BadUsage(str(exc)) from None
    keyword_map = keyword_arguments(keywords)
    spec = load_spec(spec_path, allow_outside_reference=allow_outside_reference)
    result = bench(
        spec.contract,
        function,
        impl,
        sizes=size_map,
        dtype=dtype or spec.dtypes[0],
        device=device,
        warmup=warmup,
        repeats=repeats,
        flush_bytes=0 if no_flush else FLUSH_BYTES,
        keywords=keyword_map,
    )
    reference = result.candidates[1].timing
    rows: list[dict[str, Any]] = []
    for c in result.candidates:
        t = c.timing
        rows.append(
            {
                "label": c.label,
                "median_ms": None if t is None else t.median_ms,
                "iqr_ms": None if t is None else t.iqr_ms,
                "min_ms": None if t is None else t.min_ms,
                "vs_reference": None if t is None or reference is None else reference.median_ms / t.median_ms,
                "clock": None if t is None else t.clock,
                "error": c.error,
            }
        )
    failed = bool(result.disagreement) or result.candidates[0].timing is None
    if fmt == "json":
        data = {
            "contract": result.contract,
            "sizes": {k: list(v) for k, v in result.sizes.items()},
            "dtype": result.dtype,
            "device": result.device,
            "repeats": repeats,
            "warmup": warmup,
            "flushed": not no_flush,
            "candidates": rows,
            "max_abs_diff": result.max_abs_diff,
            "disagreement": result.disagreement,
        }
        sys.stdout.write(json.dumps(data, indent=2, allow_nan=False) + "\n")
    else:
        _print_table(result, rows, repeats=repeats, warmup=warmup, no_flush=no_flush)
    finish(not failed)


def _print_table(result: Any, rows: list[dict[str, Any]], *, repeats: int, warmup: int, no_flush: bool) -> None:
    """The text report: one row per candidate, then how it was timed, then any disagreement."""
    from rich.table import Table

    shape = ", ".join(f"{k}={','.join(map(str, v)) or '-'}" for k, v in result.sizes.items())
    table = Table(title=f"{result.contract} in {result.dtype} on {result.device} ({shape})", title_justify="left")
    for column in ("", "median ms", "IQR ms", "min ms", "speed-up vs reference"):
        table.add_column(column, justify="left" if not column else "right")
    for row in rows:
        if row["median_ms"] is None:
            table.add_row(row["label"], "failed", "", "", row["error"])
            continue
        table.add_row(
            row["label"],
            f"{row['median_ms']:.4g}",
            f"{row['iqr_ms']:.2g}",
            f"{row['min_ms']:.4g}",
            "" if row["vs_reference"] is None else f"{row['vs_reference']:.2f}x",
        )
    console = stdout_console()
    console.print(table)
    clock = next((r["clock"] for r in rows if r["clock"]), "wall")
    console.print(
        f"{repeats} timed calls after {warmup} warm-up calls, {clock}; caches "
        f"{'warm' if no_flush else 'flushed before each call'}"
    )
    if result.disagreement:
        console.print(f"[bold red]Warning:[/] {result.disagreement}")
