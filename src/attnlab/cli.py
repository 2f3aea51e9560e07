"""Command line: ``attnlab list``, ``attnlab reproduce ID [--scale] [--out] [--set]``."""

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


if __name__ == "__main__":
    app()
