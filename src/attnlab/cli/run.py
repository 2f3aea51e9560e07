"""``attnlab list``, ``attnlab reproduce ID|all`` and ``attnlab sweep SPEC.toml``: run (or resume, or
plan with ``--dry-run``) experiments and user grids, and print their verdicts."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from attnlab.cli.common import (
    MAX_ROWS,
    WIDE,
    DryRunOption,
    EstimateOption,
    ExecutorOption,
    ForceOption,
    LogOption,
    QuietOption,
    SetsOption,
    app,
    err,
    fail,
    out,
)
from attnlab.errors import AttnlabError
from attnlab.experiments import get, registry
from attnlab.experiments.base import SCALES
from attnlab.experiments.pipeline import check_target, reproduce


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
        Path | None,
        typer.Option(
            "--out", help="results directory (default results/ID-SCALE; with all: results/all-SCALE, one folder per id)"
        ),
    ] = None,
    only: Annotated[
        str | None, typer.Option(help="with all: only this paper's experiments (jiang2024, li2023, wu2023)")
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
    log: LogOption = None,
    jobs: Annotated[
        int,
        typer.Option(
            help="with all: ids run this many at a time, each in its own process (with --executor ray, on the "
            "Ray cluster at RAY_ADDRESS)"
        ),
    ] = 1,
) -> None:
    """Run (or resume) an experiment; write results.parquet, figures, verdict.json, report.html.
    ``all``: every experiment in turn (each resumable), then an index page of every claim."""

    if exp_id == "all":
        return _reproduce_all(scale, out_dir, only, sets or [], executor, quiet, force, dry_run, estimate, jobs, log)
    if only is not None or jobs != 1:
        raise fail(f"{'--only' if only is not None else '--jobs'}: applies to `reproduce all`; give all as the id")
    try:
        exp = get(exp_id)
        target = out_dir or Path("results") / f"{exp_id}-{scale}"
        if dry_run:
            spec = exp.spec(scale, sets or [], config)
            check_target(exp, spec, scale, target, log or [])  # what the run would refuse, it refuses
            return _print_plan(exp, spec, estimate)
        verdict = reproduce(
            exp,
            scale,
            target,
            sets=sets or [],
            executor=executor,
            progress=not quiet,
            config=config,
            force=force,
            log=log or [],
        )
    except AttnlabError as e:
        raise fail(e) from None
    print_claims(f"{exp_id} ({scale}): {verdict['cells']} cells, {verdict['runtime_s']:.1f} s", verdict)
    if scale == "smoke":
        out.print(
            "smoke scale is a pipeline check: these verdicts say nothing about the paper's claims", highlight=False
        )
    out.print(f"report: {(target / 'report.html').resolve()}", highlight=False, soft_wrap=True, markup=False)


def print_claims(title: str, verdict: dict) -> None:
    """A run's claims in the terminal: outcome, kind, regime (modified where the run changed the
    declared design), rule version (post hoc where it was set after results were seen), measured
    value and rule; "k/n predictions pass" counts predictions only."""
    from rich.markup import escape

    from attnlab.fmt import fmt_text
    from attnlab.report import counted_claims

    counted = counted_claims(verdict["claims"])
    passed = sum(c["outcome"] == "pass" for c in counted)
    title += f" — {passed}/{len(counted)} predictions pass" if counted else ""
    styles = {"pass": "[green]PASS", "fail": "[red]FAIL", "descriptive": "[blue]DESCRIPTIVE"}

    def label(c: dict) -> str:
        bits = [c.get("kind", "prediction"), c.get("regime", "")]
        bits += ["modified"] if c.get("modified") else []
        if c.get("rule_version"):
            bits.append(f"rule v{c['rule_version']}" + (" post hoc" if c.get("post_hoc") else ""))
        return " · ".join(b for b in bits if b)

    if out.width < WIDE:  # a narrow terminal: one claim per block, lines wrapped at spaces, never mid-word
        out.print(f"[bold]{escape(title)}[/bold]")
        for c in verdict["claims"]:
            out.print(
                f"\n{styles.get(c['outcome'], '[yellow]INCONCLUSIVE')}[/] [bold]{escape(c['id'])}[/bold] ({escape(label(c))})"
            )
            out.print(f"  measured: {fmt_text(c['measured'])}", markup=False, highlight=False)
            out.print(f"  rule: {c['expected']}", markup=False, highlight=False)
        out.print()
    else:
        table = Table(title=escape(title))
        for col in ("claim", "kind · regime · rule", "measured", "expected", "verdict"):
            table.add_column(col, overflow="fold")
        for c in verdict["claims"]:
            table.add_row(
                escape(c["id"]),
                escape(label(c)),
                escape(fmt_text(c["measured"])),
                escape(c["expected"]),
                styles.get(c["outcome"], "[yellow]INCONCLUSIVE"),
            )
        out.print(table)
    if verdict.get("modified"):
        out.print(
            f"modified: this run changed the declared design in {', '.join(verdict['modified'])}; its claims do not "
            "stand for the declared regime",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def _reproduce_all(scale, out_dir, only, sets, executor, quiet, force, dry_run, estimate, jobs=1, log=None) -> None:
    """Every experiment of ``attnlab list`` (or of one paper, ``--only``) at ``scale``, each with its
    own spec, into ``out_dir``/ID (default results/all-SCALE), in the list's order (by paper, so ids
    that share buckets run close together and reuse compiled programs through the persistent
    compile cache). ``jobs`` > 1: that many ids at a time, each in a child process
    (``attnlab reproduce ID``, its output in ``out_dir``/logs/ID.log). A rerun resumes where it
    stopped. Then an index page of every claim (``index.html``) and a summary of wall time and
    verdicts per id (``summary.json``, and the terminal); exit 1 if one failed to run."""
    import json
    import os
    import time

    from attnlab import report
    from attnlab.engine.store import atomic_write_bytes

    root = out_dir or Path("results") / f"all-{scale}"
    if sets:
        raise fail("--set: applies to one experiment's fields; give an id, not all")
    if jobs < 1:
        raise fail(f"--jobs: must be at least 1, got {jobs}")
    if jobs > 1 and executor == "ray" and not os.environ.get("RAY_ADDRESS"):
        raise fail(
            "--jobs with --executor ray: the ids' processes share one Ray cluster, named by RAY_ADDRESS "
            "(`ray start --head` starts one on this machine); without --jobs the ids run one after another"
        )
    exps = {i: e for i, e in registry().items() if only is None or i.split("-", 1)[0] == only}
    if not exps:
        papers = sorted({i.split("-", 1)[0] for i in registry()})
        raise fail(f"--only: no experiment of {only!r}; papers: {', '.join(papers)}")
    log = list(log or [])
    try:  # where every id and the index would write, checked before any id runs
        _check_all_root(root)
        for exp_id, exp in exps.items():
            check_target(exp, exp.spec(scale), scale, root / exp_id, log)
    except AttnlabError as e:
        raise fail(e) from None
    for exp_id, exp in list(exps.items()):  # data only the user can give (e.g. IMDB): skipped, said so
        why = exp.missing(exp.spec(scale))
        if why:
            out.print(f"{exp_id}: skipped — {why}", highlight=False, soft_wrap=True, markup=False)
            del exps[exp_id]
    done, failed, rows, t0 = {}, [], {}, time.perf_counter()

    def landed(exp_id: str, v: dict) -> None:
        tally = {o: sum(c["outcome"] == o for c in v["claims"]) for o in report.OUTCOMES}
        rows[exp_id] = {
            "id": exp_id,
            "cells": v["cells"],
            "trained_now": v["cells_trained_now"],
            "seconds": v["runtime_s"],
            "compile_waited_s": (v.get("compile") or {}).get("waited_s"),  # compile time not hidden behind training
            **tally,
        }
        out.print(
            f"{exp_id}: {v['cells']} cells, {v['runtime_s']:.0f} s — "
            + ", ".join(f"{n} {o}" for o, n in tally.items() if n),
            highlight=False,
        )
        done[exp_id] = (root / exp_id / "report.html", v)

    def lost(exp_id: str, why: str) -> None:
        err.print(f"error: {exp_id}: {why}", highlight=False, soft_wrap=True, markup=False)
        failed.append(exp_id)

    if dry_run:
        for exp_id, exp in exps.items():
            try:
                _print_plan(exp, exp.spec(scale), estimate)
            except AttnlabError as e:
                lost(exp_id, str(e))
    elif jobs == 1:
        for exp_id, exp in exps.items():
            try:
                verdict = reproduce(
                    exp, scale, root / exp_id, executor=executor, progress=not quiet, force=force, log=log
                )
                landed(exp_id, verdict)
            except AttnlabError as e:
                lost(exp_id, str(e))
    else:
        _in_processes(list(exps), scale, root, executor, force, jobs, landed, lost, log)
    if done:
        order = [i for i in exps if i in done]
        index = report.write_index(root / "index.html", [done[i] for i in order])
        total = time.perf_counter() - t0
        summary = {
            "scale": scale,
            "only": only,
            "jobs": jobs,
            "seconds": round(total, 1),
            "failed": failed,
            "ids": [rows[i] for i in order],
        }
        atomic_write_bytes(root / "summary.json", json.dumps(summary, indent=2).encode())
        table = Table(title=f"all ({scale}): {len(done)} experiments in {total:.0f} s")
        for col in ("id", "cells", "wall time", "compile waited", *report.OUTCOMES):
            table.add_column(col, justify="left" if col == "id" else "right")
        for r in summary["ids"]:
            waited = "–" if r["compile_waited_s"] is None else f"{r['compile_waited_s']:.0f} s"
            table.add_row(
                r["id"], str(r["cells"]), f"{r['seconds']:.0f} s", waited, *(str(r[o]) for o in report.OUTCOMES)
            )
        out.print(table)
        out.print(f"index: {index.resolve()}", highlight=False, soft_wrap=True, markup=False)
    if failed:
        raise fail(f"{len(failed)} experiment(s) did not run: {', '.join(failed)}", 1)


def _check_all_root(root: Path) -> None:
    """``reproduce all``'s directory takes one results directory per id, its index page, summary and
    logs: it is not itself a run's, and its index, summary and logs are attnlab's or not there yet."""
    from attnlab.engine.guard import check_output_dir, check_output_file, inside_parts, is_results_dir, recorded_owner
    from attnlab.report import GENERATOR

    if inside_parts(root) is not None or is_results_dir(root):
        owner = recorded_owner(root)
        raise AttnlabError(
            f"--out {root}: "
            + (f"holds the results of {owner}" if owner else "is (or is inside) a run's results directory")
            + "; reproduce all writes one directory per id under --out: give another directory"
        )
    check_output_dir(root, "--out")
    check_output_dir(root / "logs", "--out")
    check_output_file(root / "index.html", "--out", marker=GENERATOR)
    check_output_file(root / "summary.json", "--out", marker='"ids"')


def _in_processes(ids, scale, root: Path, executor, force, jobs, landed, lost, trackers=()) -> None:
    """``attnlab reproduce ID`` for each id in a child process, ``jobs`` at a time, started in the
    order given; ``landed(id, verdict)`` or ``lost(id, why)`` as each ends. Interrupted (Ctrl-C,
    or SIGTERM as a batch system sends), the children are stopped: each resumes on a rerun."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from attnlab.engine.executors import default_workers

    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    waiting, running = list(ids), {}
    env = dict(os.environ)  # the cores are shared among the children: each trains fewer chunks at once
    env.setdefault("ATTNLAB_WORKERS", str(max(1, default_workers() // jobs)))

    def ended(exp_id: str, code: int) -> None:
        why = f"exit {code}"
        if code == 0:
            try:
                verdict = json.loads((root / exp_id / "verdict.json").read_text())
            except (OSError, ValueError) as e:
                why = f"exit 0 but its verdict.json is unreadable ({e})"
            else:
                return landed(exp_id, verdict)
        tail = (logs / f"{exp_id}.log").read_text(errors="replace").strip().splitlines()[-3:]
        lost(exp_id, f"{why}: " + " / ".join(tail) + f" (log: {logs / exp_id}.log)")

    term = signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                exp_id = waiting.pop(0)
                cmd = [sys.executable, "-m", "attnlab.cli", "reproduce", exp_id, "--scale", scale]
                cmd += ["--out", str(root / exp_id), "--executor", executor, "--quiet", *(["--force"] if force else [])]
                cmd += [a for name in trackers for a in ("--log", name)]
                with (logs / f"{exp_id}.log").open("w") as log:  # the child holds its own descriptor
                    running[exp_id] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
            time.sleep(0.2)
            for exp_id, proc in list(running.items()):
                if proc.poll() is not None:
                    del running[exp_id]
                    ended(exp_id, proc.returncode)
    finally:
        signal.signal(signal.SIGTERM, term)
        for proc in running.values():
            proc.terminate()
        for proc in running.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _print_plan(exp, spec, estimate: bool = False) -> None:
    from attnlab.experiments.pipeline import dry_run
    from attnlab.fmt import fmt_text

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
    w = plan["workers"]
    out.print(
        f"memory budget per chunk: {plan['memory_budget_gb']:g} GB"
        + (
            f" ({w} chunks train at once, ATTNLAB_WORKERS; up to {w * plan['memory_budget_gb']:g} GB in all)"
            if w > 1
            else ""
        )
        + (f"; {plan['note']}" if plan["note"] else ""),
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
            f"report not counted" + (f"; for one chunk at a time: {w} at once take less" if w > 1 else "") + ")",
            highlight=False,
            soft_wrap=True,
        )


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
    log: LogOption = None,
) -> None:
    """Run (or resume) your own grid over any data model × model × training recipe; write
    results.parquet, figures, verdict.json, report.html."""
    from attnlab.experiments.sweep import SCALE, UserGrid, sweep
    from attnlab.experiments.sweep_tables import table_of
    from attnlab.fmt import fmt_text

    target = out_dir or Path("results") / spec_path.stem
    try:
        if dry_run:
            grid = UserGrid.of(spec_path)
            spec = grid.spec(SCALE, sets or [])
            check_target(grid, spec, SCALE, target, log or [])
            return _print_plan(grid, spec, estimate)
        verdict = sweep(
            spec_path, target, sets=sets or [], executor=executor, progress=not quiet, force=force, log=log or []
        )
        title, columns, rows, paired = table_of(target)
    except AttnlabError as e:
        raise fail(e) from None
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
