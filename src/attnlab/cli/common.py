"""What the commands share: the Typer app, the two consoles, the options of reproduce and sweep, and
how an error is reported (one line on stderr, a non-zero exit)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True, help="attnlab: experiments on shallow transformers.")
err = Console(stderr=True)
out = Console()
EXECUTOR_HELP = (
    "local (this process) or ray (one task per chunk of cells on Ray workers: a local Ray instance, or the "
    "cluster at RAY_ADDRESS; needs the ray extra)"
)
# options shared by reproduce and sweep
SetsOption = Annotated[
    list[str] | None, typer.Option("--set", help="override a field or grid axis: name=v1,v2,... (repeatable)")
]
ExecutorOption = Annotated[str, typer.Option(help=EXECUTOR_HELP)]
QuietOption = Annotated[bool, typer.Option(help="no progress bar")]
MAX_ROWS = 50  # rows of a terminal table before the rest is only counted
WIDE = 140  # terminal columns from which a claims table reads well; narrower: one claim per block
DryRunOption = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="print the resolved spec and the cells, buckets, memory "
        "and (--estimate) wall time a run would use; write nothing",
    ),
]
EstimateOption = Annotated[
    bool,
    typer.Option(
        help="with --dry-run: estimate the wall time from a short calibration "
        "(a few cells trained a few steps, thrown away)"
    ),
]
LogOption = Annotated[
    list[str] | None,
    typer.Option(
        "--log",
        help="export the finished run to a tracker: tensorboard (DIR/tb/) or wandb (offline run under DIR/wandb/) "
        "(repeatable; needs the track extra)",
    ),
]
ForceOption = Annotated[
    bool, typer.Option(help="resume a results directory written under another schema or JAX version")
]


def fail(e: Exception | str, code: int = 2) -> typer.Exit:
    """Print ``error: e`` on stderr; returns the exit to raise (``raise fail(e) from None``)."""
    err.print(f"error: {e}", highlight=False, soft_wrap=True, markup=False)
    return typer.Exit(code)
