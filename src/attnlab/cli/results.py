"""Reading results back: ``attnlab report DIR...`` (figures, verdict and report rebuilt without
training, an index page of several), ``attnlab query DIR SQL`` (DuckDB over results.parquet) and
``attnlab docs`` (the documentation pages from committed result files)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from attnlab.cli.common import MAX_ROWS, app, err, fail, out
from attnlab.errors import AttnlabError


@app.command("report")
def report_cmd(
    dirs: Annotated[list[Path], typer.Argument(metavar="DIR", help="results directories (reproduce or sweep)")],
    index: Annotated[
        Path | None,
        typer.Option(
            "--index",
            help="also write an index page of every claim here (default with several DIRs: "
            "index.html in their common parent directory; with one DIR: none)",
        ),
    ] = None,
) -> None:
    """Rebuild the figures, verdict.json and report.html of results directories from their stored
    results, without training; with several, also an index page of every claim."""
    import os

    from attnlab import report
    from attnlab.engine.guard import check_output_file
    from attnlab.experiments.pipeline import load_results, rebuild

    try:
        stored, seen = [], set()
        for d in dirs:  # every directory is checked before anything is written
            if d.resolve() not in seen:
                seen.add(d.resolve())
                stored.append(load_results(d))
        if index is None and len(stored) > 1:
            index = Path(os.path.commonpath([s.out.resolve() for s in stored])) / "index.html"
        if index is not None:
            if index.is_dir():
                raise AttnlabError(f"--index {index}: is a directory (give a file name, e.g. {index / 'index.html'})")
            if any(index.resolve() == (s.out / "report.html").resolve() for s in stored):
                raise AttnlabError(
                    f"--index {index}: would overwrite the report of a directory rebuilt here; use e.g. index.html"
                )
            check_output_file(index, "--index", marker=report.GENERATOR)
        verdicts = [rebuild(s) for s in stored]
        if index is not None:
            try:
                index.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise AttnlabError(f"--index {index}: cannot create its directory ({e.strerror})") from None
            report.write_index(index, [(s.out / "report.html", v) for s, v in zip(stored, verdicts, strict=True)])
    except AttnlabError as e:
        raise fail(e) from None
    for s, v in zip(stored, verdicts, strict=True):
        tally = ", ".join(f"{sum(c['outcome'] == o for c in v['claims'])} {o}" for o in report.OUTCOMES)
        line = f"report: {(s.out / 'report.html').resolve()} ({v['experiment']}, {v['scale']}: "
        line += f"{tally if v['claims'] else 'no claims'})"
        out.print(line, highlight=False, soft_wrap=True, markup=False)
    if index is not None:
        out.print(f"index: {index.resolve()}", highlight=False, soft_wrap=True, markup=False)


@app.command("query")
def query_cmd(
    results_dir: Annotated[Path, typer.Argument(metavar="DIR", help="a results directory")],
    sql: Annotated[str, typer.Argument(metavar="SQL", help="DuckDB SQL over the views `results` and `parts`")],
    csv_out: Annotated[bool, typer.Option("--csv", help="print CSV (every row) instead of a table")] = False,
    max_rows: Annotated[int, typer.Option(help="rows shown in the table (--csv prints all)", min=1)] = MAX_ROWS,
) -> None:
    """Query a results directory with SQL: `results` is DIR/results.parquet (one row per cell of the
    last run), `parts` every DIR/parts/*.parquet (every cell ever trained there)."""
    from attnlab.api import query

    try:
        result = query(results_dir, sql, format="arrow")
    except AttnlabError as e:
        raise fail(e) from None
    if result is None:
        return
    rows = result.to_pylist()
    if csv_out:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(result.column_names)
        writer.writerows([_csv_value(r[c]) for c in result.column_names] for r in rows)
        return
    table = Table(title=f"{len(rows)} row(s)")
    for col in result.column_names:
        table.add_column(col, overflow="fold")
    for r in rows[:max_rows]:
        table.add_row(*(_text_value(r[c]) for c in result.column_names))
    out.print(table)
    if len(rows) > max_rows:
        out.print(f"... {len(rows) - max_rows} more rows (--max-rows, LIMIT or --csv)", highlight=False)


def _csv_value(v):
    """A value as CSV text: lists and structs as JSON, bytes as hex, None as empty."""
    if v is None:
        return ""
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, list | dict):
        return json.dumps(v, default=str)
    return v


def _text_value(v) -> str:
    """A value for a terminal table: numbers to 3 significant digits, long lists shortened."""
    from attnlab.fmt import fmt_text

    if isinstance(v, bytes):
        return f"<{len(v)} bytes>"
    if isinstance(v, list) and len(v) > 6:
        return fmt_text(v[:3])[:-1] + ", …, " + fmt_text(v[-1:])[1:] + f" ({len(v)})"
    return fmt_text(v)


@app.command("docs")
def docs_cmd(
    collect: Annotated[
        Path | None,
        typer.Option(help="first copy each id's verdict.json and main figure from this `reproduce all` directory"),
    ] = None,
    docs_dir: Annotated[Path, typer.Option("--docs", help="the documentation directory")] = Path("docs"),
    check: Annotated[bool, typer.Option("--check", help="write nothing; exit 1 if a page is out of date")] = False,
) -> None:
    """Build the documentation pages (one per paper, and the field reference) from the code and the
    result files committed under DOCS/results/."""
    from attnlab import docs
    from attnlab.engine.guard import check_output_dir

    skipped: list[str] = []
    try:
        check_output_dir(docs_dir, "--docs")
        if check:
            old = docs.stale(docs_dir)
            if old:
                raise fail(f"{', '.join(old)} out of date under {docs_dir}: run `attnlab docs`", 1)
            out.print(f"{docs_dir}: every page up to date", highlight=False)
            return
        if collect is not None:
            ids, skipped = docs.collect(collect, docs_dir)
            out.print(f"collected {len(ids)} runs from {collect}", highlight=False)
            for why in skipped:
                err.print(f"error: {why}", highlight=False, soft_wrap=True, markup=False)
        for path in docs.write(docs_dir):
            out.print(f"wrote {path}", highlight=False, soft_wrap=True, markup=False)
    except AttnlabError as e:
        raise fail(e) from None
    if skipped:
        raise fail(f"{len(skipped)} run(s) not collected (above); the pages show their committed entries", 1)
