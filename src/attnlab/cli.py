"""Command line: ``attnlab list``, ``attnlab reproduce ID [--scale] [--out] [--set]``, ``attnlab bench``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from attnlab.errors import AttnlabError
from attnlab.experiments import get, registry
from attnlab.experiments.base import SCALES, reproduce

app = typer.Typer(add_completion=False, no_args_is_help=True, help="attnlab: experiments on shallow transformers.")
err = Console(stderr=True)
out = Console()


@app.command("list")
def list_() -> None:
    """Print every experiment id and its title."""
    for exp_id, exp in registry().items():
        out.print(f"{exp_id}\t{exp.title}", highlight=False, soft_wrap=True, markup=False)


@app.command("reproduce")
def reproduce_cmd(
    exp_id: Annotated[str, typer.Argument(metavar="ID", help="experiment id (see `attnlab list`)")],
    scale: Annotated[str, typer.Option(help=f"one of {', '.join(SCALES)}")] = "cpu",
    out_dir: Annotated[Path | None, typer.Option("--out", help="results directory (default results/ID-SCALE)")] = None,
    sets: Annotated[
        list[str] | None, typer.Option("--set", help="override a field or grid axis: name=v1,v2,... (repeatable)")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="TOML file of field values (applied before --set)")
    ] = None,
    executor: Annotated[str, typer.Option(help="local")] = "local",
    quiet: Annotated[bool, typer.Option(help="no progress bar")] = False,
    force: Annotated[
        bool, typer.Option(help="resume a results directory written under another schema or JAX version")
    ] = False,
) -> None:
    """Run (or resume) an experiment; write results.parquet, figures, verdict.json, report.html."""
    try:
        exp = get(exp_id)
        target = out_dir or Path("results") / f"{exp_id}-{scale}"
        verdict = reproduce(
            exp, scale, target, sets=sets or [], executor=executor, progress=not quiet, config=config, force=force
        )
    except AttnlabError as e:
        err.print(f"error: {e}", highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(2) from None
    table = Table(title=f"{exp_id} ({scale}): {verdict['cells']} cells, {verdict['runtime_s']:.1f} s")
    for col in ("claim", "measured", "expected", "verdict"):
        table.add_column(col, overflow="fold")
    for c in verdict["claims"]:
        style = {"pass": "[green]PASS", "fail": "[red]FAIL"}.get(c["outcome"], "[yellow]INCONCLUSIVE")
        table.add_row(c["id"], str(c["measured"]), c["expected"], style)
    out.print(table)
    out.print(f"report: {(target / 'report.html').resolve()}", highlight=False, soft_wrap=True, markup=False)


@app.command("bench")
def bench_cmd(
    suite: Annotated[str, typer.Option(help="the benchmark suite: jiang2024 (the jiang2024-fig1 grid)")] = "jiang2024",
    cells: Annotated[int, typer.Option(help="cells drawn (seeded, spread over the grid)")] = 100,
    baseline_cells: Annotated[
        int | None,
        typer.Option(help="cells the serial PyTorch baseline runs (a seeded sub-subset, extrapolated; default all, "
                     "0 for none)"),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the cell selection")] = 0,
    scale: Annotated[str, typer.Option(help="the experiment's scale the cells come from")] = "paper",
    aot: Annotated[bool, typer.Option(help="also time the compilation alone, ahead of time")] = True,
    json_path: Annotated[Path | None, typer.Option("--json", help="write every number here")] = None,
    quiet: Annotated[bool, typer.Option(help="no progress bars")] = False,
) -> None:
    """Time the engine on a seeded subset of a paper grid against a paper-style serial PyTorch loop
    (needs the `bench` extra: `make bench` or `pip install torch==2.13.0`)."""
    import json

    from attnlab import bench

    try:
        report = bench.run_suite(suite, cells, baseline_cells, seed, scale, aot=aot, progress=not quiet, console=err)
    except AttnlabError as e:
        err.print(f"error: {e}", highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(2) from None
    bench.render(report, out)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2))
        out.print(f"json: {json_path.resolve()}", highlight=False, soft_wrap=True, markup=False)


if __name__ == "__main__":
    app()
