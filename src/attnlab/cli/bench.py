"""``attnlab bench``: the engine against a serial baseline on each paper's suite (see :mod:`attnlab.bench`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from attnlab.cli.common import app, err, fail, out
from attnlab.errors import AttnlabError


@app.command("bench")
def bench_cmd(
    suite: Annotated[
        str,
        typer.Option(
            help="the benchmark suite: jiang2024 (jiang2024-fig1), li2023 (li2023-fig1), wu2023 (wu2023-width)"
        ),
    ] = "jiang2024",
    cells: Annotated[int, typer.Option(help="cells drawn (seeded, spread over the grid)")] = 100,
    baseline_cells: Annotated[
        int | None,
        typer.Option(
            help="cells the serial PyTorch baseline runs (a seeded sub-subset, extrapolated; default all, 0 for none)"
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the cell selection")] = 0,
    scale: Annotated[
        str | None,
        typer.Option(
            help="the experiment's scale the cells come from (default: the suite's: jiang2024 paper, "
            "li2023 and wu2023 cpu)"
        ),
    ] = None,
    baseline_threads: Annotated[
        int | None,
        typer.Option(
            help="PyTorch threads of the baseline (default: every core for jiang2024, else the faster of 1 "
            "and every core on short runs)"
        ),
    ] = None,
    aot: Annotated[bool, typer.Option(help="also time the compilation alone, ahead of time")] = True,
    json_path: Annotated[Path | None, typer.Option("--json", help="write every number here")] = None,
    quiet: Annotated[bool, typer.Option(help="no progress bars")] = False,
) -> None:
    """Time the engine on a seeded subset of a paper grid against a paper-style serial PyTorch loop
    (needs the `bench` extra: `make bench` or `pip install torch==2.13.0`)."""
    import json

    from attnlab.bench import report, runner
    from attnlab.engine.guard import check_output_file
    from attnlab.engine.store import atomic_write_bytes

    try:
        if json_path is not None:  # checked before the benchmark runs, not after
            check_output_file(json_path, "--json", marker='"suite"')
        result = runner.run_suite(
            suite,
            cells,
            baseline_cells,
            seed,
            scale,
            aot=aot,
            progress=not quiet,
            console=err,
            baseline_threads=baseline_threads,
        )
    except AttnlabError as e:
        raise fail(e) from None
    report.render(result, out)
    if json_path is not None:
        atomic_write_bytes(json_path, json.dumps(result, indent=2).encode())
        out.print(f"json: {json_path.resolve()}", highlight=False, soft_wrap=True, markup=False)
