"""Command line: ``attnlab list``, ``attnlab reproduce ID [--scale] [--out] [--set]``, ``attnlab report DIR...``,
``attnlab sweep SPEC.toml``, ``attnlab query DIR SQL``, ``attnlab audit ID``, ``attnlab bench``."""

from __future__ import annotations

import csv
import json
import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from attnlab.errors import AttnlabError
from attnlab.experiments import get, registry
from attnlab.experiments.base import SCALES
from attnlab.experiments.pipeline import reproduce

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
ForceOption = Annotated[
    bool, typer.Option(help="resume a results directory written under another schema or JAX version")
]


@app.command("list")
def list_() -> None:
    """Print every experiment id, the regime of its claims and its title."""
    for exp_id, exp in registry().items():
        out.print(f"{exp_id}\t{exp.regime}\t{exp.title}", highlight=False, soft_wrap=True, markup=False)


@app.command("reproduce")
def reproduce_cmd(
    exp_id: Annotated[str, typer.Argument(metavar="ID", help="experiment id (see `attnlab list`), or all")],
    scale: Annotated[str, typer.Option(help=f"one of {', '.join(SCALES)}")] = "cpu",
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="results directory (default results/ID-SCALE; with all: OUT/ID-SCALE)")
    ] = None,
    sets: SetsOption = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="TOML file of field values (applied before --set)")
    ] = None,
    executor: ExecutorOption = "local",
    quiet: QuietOption = False,
    force: ForceOption = False,
    dry_run: DryRunOption = False,
    estimate: EstimateOption = True,
) -> None:
    """Run (or resume) an experiment; write results.parquet, figures, verdict.json, report.html.
    ``all``: every experiment in turn (each resumable), then an index page of every claim."""
    from attnlab.report import fmt_text

    if exp_id == "all":
        return _reproduce_all(scale, out_dir, sets or [], executor, quiet, force, dry_run, estimate)
    try:
        exp = get(exp_id)
        if dry_run:
            return _print_plan(exp, exp.spec(scale, sets or [], config), estimate)
        target = out_dir or Path("results") / f"{exp_id}-{scale}"
        verdict = reproduce(
            exp, scale, target, sets=sets or [], executor=executor, progress=not quiet, config=config, force=force
        )
    except AttnlabError as e:
        err.print(f"error: {e}", highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(2) from None
    title = f"{exp_id} ({scale}): {verdict['cells']} cells, {verdict['runtime_s']:.1f} s"
    styles = {"pass": "[green]PASS", "fail": "[red]FAIL", "descriptive": "[blue]DESCRIPTIVE"}
    if out.width < WIDE:  # a narrow terminal: one claim per block, lines wrapped at spaces, never mid-word
        out.print(f"[bold]{title}[/bold]")
        for c in verdict["claims"]:
            out.print(f"\n{styles.get(c['outcome'], '[yellow]INCONCLUSIVE')}[/] [bold]{c['id']}[/bold]")
            out.print(f"  measured: {fmt_text(c['measured'])}", markup=False, highlight=False)
            out.print(f"  rule: {c['expected']}", markup=False, highlight=False)
        out.print()
    else:
        table = Table(title=title)
        for col in ("claim", "measured", "expected", "verdict"):
            table.add_column(col, overflow="fold")
        for c in verdict["claims"]:
            table.add_row(
                c["id"], fmt_text(c["measured"]), c["expected"], styles.get(c["outcome"], "[yellow]INCONCLUSIVE")
            )
        out.print(table)
    if scale == "smoke":
        out.print(
            "smoke scale is a pipeline check: these verdicts say nothing about the paper's claims", highlight=False
        )
    out.print(f"report: {(target / 'report.html').resolve()}", highlight=False, soft_wrap=True, markup=False)


def _reproduce_all(scale, out_dir, sets, executor, quiet, force, dry_run, estimate) -> None:
    """Every experiment at ``scale`` into ``out_dir``/ID-SCALE, one after another (a rerun resumes
    where it stopped), then one index of every claim; a summary line per id, exit 1 if one failed
    to run."""
    import time

    from attnlab import report

    root = out_dir or Path("results")
    if sets:
        err.print("error: --set: applies to one experiment's fields; give an id, not all", highlight=False)
        raise typer.Exit(2)
    done, failed, t0 = [], [], time.perf_counter()
    for exp_id, exp in registry().items():
        try:
            if dry_run:
                _print_plan(exp, exp.spec(scale), estimate)
                continue
            target = root / f"{exp_id}-{scale}"
            v = reproduce(exp, scale, target, executor=executor, progress=not quiet, force=force)
            tally = {
                o: sum(c["outcome"] == o for c in v["claims"]) for o in ("pass", "fail", "inconclusive", "descriptive")
            }
            out.print(
                f"{exp_id}: {v['cells']} cells, {v['runtime_s']:.0f} s — "
                + ", ".join(f"{n} {o}" for o, n in tally.items() if n),
                highlight=False,
            )
            done.append((target / "report.html", v))
        except AttnlabError as e:
            err.print(f"error: {exp_id}: {e}", highlight=False, soft_wrap=True, markup=False)
            failed.append(exp_id)
    if done:
        index = report.write_index(root / f"index-{scale}.html", done)
        out.print(
            f"all ({scale}): {len(done)} experiments in {time.perf_counter() - t0:.0f} s; index: {index.resolve()}",
            highlight=False,
            soft_wrap=True,
        )
    if failed:
        err.print(f"error: {len(failed)} experiment(s) did not run: {', '.join(failed)}", highlight=False)
        raise typer.Exit(1)


def _print_plan(exp, spec, estimate: bool = False) -> None:
    from attnlab.experiments.pipeline import dry_run
    from attnlab.report import fmt_text

    plan = dry_run(exp, spec, estimate)
    for kind in ("data", "model", "train"):
        values = " ".join(f"{k}={fmt_text(v)}" for k, v in getattr(spec, kind).items())
        out.print(f"[{kind}] {values}", highlight=False, soft_wrap=True, markup=False)
    table = Table(
        title=f"{exp.id}: {plan['cells']:,} cells in {len(plan['buckets'])} buckets (dry run: nothing "
        f"trained or written)"
    )
    for col in ("data", "model", "cells", "sizes", "memory per cell", "chunks"):
        table.add_column(col, overflow="fold")
    for b in plan["buckets"]:
        sizes = "; ".join(f"{k.split('.', 1)[1]} = {', '.join(map(str, v))}" for k, v in b["sizes"].items())
        table.add_row(
            b["data"], b["model"], f"{b['cells']:,}", sizes, f"{b['cell_bytes'] / 1e6:.3g} MB", str(b["chunks"])
        )
    out.print(table)
    out.print(
        f"memory budget per chunk: {plan['memory_budget_gb']:g} GB" + (f"; {plan['note']}" if plan["note"] else ""),
        highlight=False,
        soft_wrap=True,
    )
    if "estimate" in plan:
        e = plan["estimate"]
        steps = (
            " at max_steps: a stop rule may end cells earlier"
            if e["upper_bound"]
            else f" at a mean stop step of {e['stop_fraction']:.2g} × max_steps ({e['stop_sample']} cells run to it)"
            if e["stop_sample"]
            else ""
        )
        out.print(
            f"estimated wall time: {'≤ ' if e['upper_bound'] else '≈ '}{e['seconds']:.3g} s (compile ≈ "
            f"{e['compile_seconds']:.3g} s for {e['programs']} programs on a cold compile cache, training ≈ "
            f"{e['train_seconds']:.3g} s{steps}; calibrated on {e['calibrated']} of the programs; figures and "
            f"report not counted)",
            highlight=False,
            soft_wrap=True,
        )


@app.command("fields")
def fields_cmd(
    name: Annotated[
        str,
        typer.Argument(
            metavar="ID|KIND.PART",
            help="an experiment id, or a part: model.jiang2024, "
            "data.li2023, model.my_parts:LINEAR (an outside one), train",
        ),
    ],
    scale: Annotated[
        str, typer.Option(help=f"the experiment's scale whose values are shown: {', '.join(SCALES)}")
    ] = "cpu",
) -> None:
    """Every field of an experiment (its values at a scale, grid axes marked) or of a part (type,
    default, allowed values, role and meaning): what --set and TOML accept."""
    from attnlab import problem as P
    from attnlab.report import fmt_text, spec_rows

    kind, _, part_name = name.partition(".")
    try:
        if name == "train" or kind in P.PART_KINDS and part_name:
            config = P.part_config(kind, part_name or None)
            table = Table(title=f"{name}: {len(config.fields())} fields")
            for col in ("field", "type", "default", "allowed", "role", "description"):
                table.add_column(col, overflow="fold", no_wrap=col in ("field", "type", "role"))
            for r in config.describe():
                table.add_row(
                    f"{kind}.{r['field']}", r["type"], fmt_text(r["default"]), r["allowed"], r["role"], r["description"]
                )
            out.print(table)
            return
        exp = get(name)
        rows = spec_rows(exp.spec(scale))
    except AttnlabError as e:
        err.print(f"error: {e}", highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(2) from None
    table = Table(title=f"{exp.id} ({scale}, {exp.regime}): {exp.title}")
    for col in ("field", "value", "", "description"):
        table.add_column(col, overflow="fold")
    for field, value, axis, doc in rows:
        table.add_row(field, fmt_text(value), "axis" if axis else "", doc)
    out.print(table)


@app.command("check-part")
def check_part_cmd(
    name: Annotated[
        str, typer.Argument(metavar="MODEL", help="a model: a registered name or package.module:ATTRIBUTE")
    ],
    data: Annotated[str, typer.Option(help="the data model whose samples it is checked on")] = "jiang2024",
    sets: Annotated[
        list[str] | None, typer.Option("--set", help="a field of the checked cell: model.d_h=8, data.M=4 (repeatable)")
    ] = None,
) -> None:
    """Check a model's declared fast paths (fast_apply, dual) against its plain apply: values and
    gradients on a few parameter draws and real samples, in float64. Exit 1 on a mismatch."""
    import tomllib

    from attnlab import fastcheck

    fields = {}
    for item in sets or []:
        key, eq, text = item.partition("=")
        if not eq:
            err.print(f"error: --set {item}: expected FIELD=VALUE", highlight=False, markup=False)
            raise typer.Exit(2)
        try:
            fields[key.strip()] = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            fields[key.strip()] = text
    try:
        errors = fastcheck.check_part(name, data, fields)
    except AttnlabError as e:
        err.print(f"error: {e}", highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(1 if "differs from its apply" in str(e) else 2) from None
    for path, e in errors.items():
        out.print(
            f"{name}: {path} = apply (largest relative error {e:.2g}, tolerance {fastcheck.RTOL:g})", highlight=False
        )


@app.command("audit")
def audit_cmd(
    exp_id: Annotated[str, typer.Argument(metavar="ID", help="experiment id (see `attnlab list`), or all")],
    scale: Annotated[str, typer.Option(help=f"the design audited: one of {', '.join(SCALES)}")] = "cpu",
    sims: Annotated[int, typer.Option(help="simulated data sets per hypothesis")] = 200,
    seed: Annotated[int, typer.Option(help="seed of the simulations")] = 0,
    from_dir: Annotated[
        Path | None,
        typer.Option("--from", help="a results directory: its spec is the design, its noise levels plugged in"),
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out", help="where audit.json goes (default: --from, else results/ID-SCALE-audit; with all: OUT/ID)"
        ),
    ] = None,
    controls: Annotated[
        bool,
        typer.Option(
            "--controls",
            help="also run the experiment's positive and negative controls (real runs, "
            "into OUT/controls/NAME); exit 1 if one does not hold",
        ),
    ] = False,
    quiet: QuietOption = False,
) -> None:
    """Power and false-pass rate of every claim's rule under the experiment's own design, on
    simulated data under each claim's H1 and H0 (nothing is trained); writes audit.json. With
    --controls, the experiment's controls are run and judged too (audit.json: "controls")."""
    try:
        if exp_id == "all":
            if from_dir is not None:
                raise AttnlabError("--from: audits one stored run; give its experiment id, not all")
            results = [
                _audit_one(i, scale, sims, seed, None, out_dir and out_dir / i, controls and bool(e.controls), quiet)
                for i, e in registry().items()
            ]
        else:
            results = [_audit_one(exp_id, scale, sims, seed, from_dir, out_dir, controls, quiet)]
    except AttnlabError as e:
        err.print(f"error: {e}", highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(2) from None
    if not all(c["held"] for r in results for c in r.get("controls", ())):
        raise typer.Exit(1)


def _audit_one(exp_id, scale, sims, seed, from_dir, out_dir, controls, quiet) -> dict:
    from attnlab import audit
    from attnlab.experiments.pipeline import load_results, rebuild, table_columns

    stored = None
    if from_dir is not None:
        import pyarrow.parquet as pq

        found = load_results(from_dir)
        if found.exp.id != exp_id:
            raise AttnlabError(f"--from {from_dir}: holds {found.exp.id}, not {exp_id}")
        exp, spec, scale = found.exp, found.spec, found.verdict["scale"]
        stored = table_columns(pq.read_table(found.out / "results.parquet"))
    else:
        exp = get(exp_id)
        spec = exp.spec(scale)
    target = out_dir or from_dir or Path("results") / f"{exp_id}-{scale}-audit"
    if target.exists() and not target.is_dir():
        raise AttnlabError(f"--out {target}: exists and is not a directory")
    say = None if quiet else (lambda m: err.print(m, highlight=False, markup=False))
    if controls and not exp.controls:
        raise AttnlabError(f"--controls: {exp_id} declares no controls")
    result = audit.audit(exp, spec, scale, sims=sims, seed=seed, stored=stored, progress=say)
    if controls:
        result["controls"] = [
            audit.run_control(exp, c, target / "controls" / c.name, progress=not quiet) for c in exp.controls
        ]
    path = audit.write(target / "audit.json", result)
    if from_dir is not None:  # the run's report shows its audit
        rebuild(found)
    table = Table(title=f"{exp_id} ({scale}): audit of {len(result['claims'])} rules, {sims} simulations each")
    for col in ("claim", "regime", "power", "false pass", "false fail", "flag"):
        table.add_column(col, overflow="fold")
    pct = lambda r: f"{r['rate']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]" if r["n"] else "—"
    for c in result["claims"]:
        flag = (
            "[blue]descriptive"
            if c["descriptive"]
            else f"[red]FLAGGED[/red] {c['reason']}"
            if c["flagged"]
            else "[green]ok"
        )
        table.add_row(c["id"], c["regime"], pct(c["power"]), pct(c["false_pass"]), pct(c["false_fail"]), flag)
    out.print(table)
    for c in result.get("controls", ()):
        got = ", ".join(f"{k} {v} (expected {c['expect'][k]})" for k, v in c["got"].items())
        mark = "[green]held[/green]" if c["held"] else "[red]DID NOT HOLD[/red]"
        out.print(f"{c['kind']} control {c['name']}: {got} — {mark}", highlight=False, soft_wrap=True)
    out.print(f"audit: {path.resolve()}", highlight=False, soft_wrap=True, markup=False)
    return result


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
            own = {"report.html", "verdict.json", "spec.json", "results.parquet", "store.json"}
            if index.name in own and any(index.resolve().parent == s.out.resolve() for s in stored):
                raise AttnlabError(f"--index {index}: would overwrite a results file; use e.g. index.html")
        verdicts = [rebuild(s) for s in stored]
        if index is not None:
            try:
                index.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise AttnlabError(f"--index {index}: cannot create its directory ({e.strerror})") from None
            report.write_index(index, [(s.out / "report.html", v) for s, v in zip(stored, verdicts, strict=True)])
    except AttnlabError as e:
        err.print(f"error: {e}", highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(2) from None
    for s, v in zip(stored, verdicts, strict=True):
        tally = ", ".join(f"{sum(c['outcome'] == o for c in v['claims'])} {o}" for o in report.OUTCOMES)
        line = f"report: {(s.out / 'report.html').resolve()} ({v['experiment']}, {v['scale']}: "
        line += f"{tally if v['claims'] else 'no claims'})"
        out.print(line, highlight=False, soft_wrap=True, markup=False)
    if index is not None:
        out.print(f"index: {index.resolve()}", highlight=False, soft_wrap=True, markup=False)


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

    try:
        report = runner.run_suite(
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
        err.print(f"error: {e}", highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(2) from None
    report.render(report, out)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2))
        out.print(f"json: {json_path.resolve()}", highlight=False, soft_wrap=True, markup=False)


MAX_ROWS = 50  # rows of a terminal table before the rest is only counted


@app.command("sweep")
def sweep_cmd(
    spec_path: Annotated[
        Path, typer.Argument(metavar="SPEC.toml", help="the grid: title, seeds, [data], [model], [train], [report]")
    ],
    out_dir: Annotated[Path | None, typer.Option("--out", help="results directory (default results/SPEC-name)")] = None,
    sets: SetsOption = None,
    executor: ExecutorOption = "local",
    quiet: QuietOption = False,
    force: ForceOption = False,
    dry_run: DryRunOption = False,
    estimate: EstimateOption = True,
) -> None:
    """Run (or resume) your own grid over any data model × model × training recipe; write
    results.parquet, figures, verdict.json, report.html."""
    from attnlab.experiments.sweep import SCALE, UserGrid, sweep, table_of
    from attnlab.report import fmt_text

    target = out_dir or Path("results") / spec_path.stem
    try:
        if dry_run:
            grid = UserGrid.of(spec_path)
            return _print_plan(grid, grid.spec(SCALE, sets or []), estimate)
        verdict = sweep(spec_path, target, sets=sets or [], executor=executor, progress=not quiet, force=force)
        title, columns, rows, paired = table_of(target)
    except AttnlabError as e:
        err.print(f"error: {e}", highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(2) from None
    table = Table(
        title=f"{title}: {verdict['cells']} cells ({verdict['cells_trained_now']} trained now), "
        f"{verdict['runtime_s']:.1f} s"
    )
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows[:MAX_ROWS]:
        table.add_row(*(fmt_text(v) for v in row))
    out.print(table)
    if len(rows) > MAX_ROWS:
        out.print(f"... {len(rows) - MAX_ROWS} more grid points in the report", highlight=False)
    if paired:
        table = Table(title=paired[0])
        for col in paired[1]:
            table.add_column(col, overflow="fold")
        for row in paired[2][:MAX_ROWS]:
            table.add_row(*(fmt_text(v) for v in row))
        out.print(table)
    out.print(f"report: {(target / 'report.html').resolve()}", highlight=False, soft_wrap=True, markup=False)
    out.print(
        f'query:  attnlab query {shlex.quote(str(target))} "SELECT * FROM results LIMIT 5"',
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


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
        err.print(f"error: {e}", highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(2) from None
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
    from attnlab.report import fmt_text

    if isinstance(v, bytes):
        return f"<{len(v)} bytes>"
    if isinstance(v, list) and len(v) > 6:
        return fmt_text(v[:3])[:-1] + ", …, " + fmt_text(v[-1:])[1:] + f" ({len(v)})"
    return fmt_text(v)


if __name__ == "__main__":
    app()
