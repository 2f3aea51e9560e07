"""The pipeline from a spec to a verdict: plan, train (through the engine), derive, analyse,
figures, report; resuming, dry runs, and reading a results directory back."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import ValidationError

from attnlab import problem as P
from attnlab import rules
from attnlab.engine.grid import cell_parts
from attnlab.errors import AttnlabError
from attnlab.experiments.base import Experiment, staged
from attnlab.experiments.config import ExperimentSpec, format_validation_error

# ---------------------------------------------------------------- pipeline


@dataclass
class Trained:
    """A trained cell rebuilt from its results row: the row (without its parameters), the cell's
    fields, its bucket's static fields and Problem, its per-cell inputs ``v`` (key, batched
    fields), its data as it was trained on (drawn again from the cell's key) and its saved final
    parameters; ``problem.apply`` takes ``params | inputs`` (its batched model fields)."""

    row: dict
    cell: dict
    static: dict
    problem: Any
    v: dict
    data: dict
    params: dict

    @property
    def inputs(self) -> dict:
        return {k: self.v[k] for k in self.problem.inputs}


def trained_cells(table: pa.Table, tags: tuple[str, ...] = ()):
    """Yield a :class:`Trained` per row of a results table written with ``train.save_params``
    (a ``derive`` evaluates the trained models with it). One Problem and one compiled data
    generator per bucket and padded size."""
    import jax

    from attnlab.engine import rows

    built: dict = {}
    for i, row in enumerate(table.drop_columns([rows.PARAMS]).to_pylist()):
        cell = rows.cell_of(row, tags)
        comp, static, pads, v = cell_parts(cell, tags)
        sig = (tuple(sorted(static.items())), tuple(sorted(pads.items())))
        if sig not in built:
            problem = comp.problem(static, pads)
            built[sig] = (problem, jax.jit(problem.make_data), comp.shared(static))
        problem, make, shared = built[sig]
        with jax.enable_x64(static.get("train.dtype") == "float64"):
            data = make(v["key"], v, shared)
        params = rows.params_of(table.column(rows.PARAMS)[i].as_py())
        yield Trained(row, cell, static, problem, v, data, params)


def table_columns(table: pa.Table) -> dict[str, np.ndarray]:
    return {n: table.column(n).to_numpy(zero_copy_only=False) for n in table.column_names}


def describe(cell: dict, spec: ExperimentSpec) -> str:
    """A short label of a cell: its grid coordinates, tags, block and rep."""
    axes = [f"{k}.{n}" for k in P.PART_KINDS for n, v in getattr(spec, k).items() if isinstance(v, list | tuple)]
    keys = [*axes, *(k for k in cell if "." not in k and k != "seed")]
    return ", ".join(f"{k}={cell[k]}" for k in keys if k in cell)


def check_unique(cells: list[dict], spec) -> list[str]:
    """The cells' ids, each once: a grid that gives one cell twice (a repeated axis value, two values
    that validate to the same, a variant equal to another) would train it once and count it twice in
    every table, so it is refused, naming the cell."""
    from attnlab.engine import grid

    ids, seen = [grid.cell_id(c) for c in cells], {}
    for i, cid in enumerate(ids):
        if cid in seen:
            raise AttnlabError(
                f"the grid gives one cell twice ({describe(cells[i], spec)}): a grid axis repeats a value, or two "
                "of its values mean the same; give each value once"
            )
        seen[cid] = i
    return ids


def reproduce(
    exp: Experiment,
    scale: str,
    out: Path,
    sets: list[str] | None = None,
    executor: str = "local",
    progress: bool = True,
    config: Path | None = None,
    force: bool = False,
    log: Sequence[str] = (),
) -> dict:
    """Run (or resume) the experiment into ``out``; write results.parquet, figures,
    verdict.json and report.html, and export them to the trackers in ``log``
    (:mod:`attnlab.trackers`). Returns the verdict."""
    from attnlab import report

    check_executor(executor)
    spec = exp.spec(scale, sets, config)
    command = report.command_line(exp.id, scale, sets or [], config, out, executor)
    return run_spec(
        exp, spec, scale, out, sets or [], command, executor=executor, progress=progress, force=force, log=log
    )


def dry_run(exp: Experiment, spec, estimate: bool = False) -> dict:
    """What a run of ``spec`` would do, without writing anything: its cells (the first stage's
    where later stages depend on earlier results), their buckets (one compiled program each) with
    their sizes and the estimated memory of their largest cell, all checked as a run checks them
    (sizes, classification, memory); with ``estimate``, its wall time from a short calibration
    (:mod:`attnlab.estimate`: a few cells trained for a few steps, results thrown away)."""
    from attnlab.engine.executors import LocalExecutor
    from attnlab.engine.plan import Plan

    cells = exp.cells(spec)
    check_unique(cells, spec)
    plan = Plan.of(cells, exp.tags, spec.memory_budget_gb * 1e9)
    buckets = []
    for b in plan.buckets:
        static = dict(b.static)
        buckets.append(
            {
                "data": static.get("data.name"),
                "model": static.get("model.name"),
                "cells": len(b.cells),
                "sizes": {f: sorted({c[f] for c in b.cells}) for f in b.comp.size_fields()},
                "cell_bytes": b.cell_bytes,
                "chunks": len(b.chunks),
            }
        )
    staged = "stage" in exp.tags
    out = {
        "experiment": exp.id,
        "cells": len(cells),
        "buckets": buckets,
        "memory_budget_gb": spec.memory_budget_gb,
        "workers": LocalExecutor().within(spec.memory_budget_gb * 1e9).workers,  # as the run will fit them
        "note": "later stages depend on earlier results: their cells are planned when those have run" if staged else "",
    }
    if estimate:
        from attnlab.estimate import estimate as measure

        out["estimate"] = measure(plan)
    return out


def check_executor(executor: str) -> None:
    from attnlab.engine import executors

    if executor not in executors.EXECUTORS:
        raise AttnlabError(f"--executor: unknown {executor!r}; available: {', '.join(executors.EXECUTORS)}")
    if executor == "ray":
        executors.import_ray()  # a missing optional extra is reported before anything is written


def check_target(exp: Experiment, spec, scale: str, out: Path, log: Sequence[str] = ()) -> None:
    """Everything about where a run writes, checked before anything is trained or written (a dry run
    checks the same): ``out`` takes this run's results (:func:`attnlab.engine.guard.check_run_dir`)
    and the trackers in ``log`` can write there (:func:`attnlab.trackers.check`)."""
    from attnlab import trackers
    from attnlab.engine.guard import check_run_dir

    check_run_dir(Path(out), exp.owner(spec, scale))
    trackers.check(log, Path(out))


def run_spec(
    exp: Experiment,
    spec: ExperimentSpec,
    scale: str,
    out: Path,
    sets: Sequence[str],
    command: str,
    executor: str = "local",
    progress: bool = True,
    force: bool = False,
    log: Sequence[str] = (),
) -> dict:
    """Train (or resume) a validated spec's cells into ``out`` and finish (analysis, figures,
    verdict, report, the trackers in ``log``): the pipeline behind both ``reproduce`` and user-defined grids
    (:mod:`attnlab.experiments.sweep`), so both share one store, resume and compatibility check.
    ``command`` is the command line recorded in the verdict."""
    from attnlab import trackers
    from attnlab.engine import executors, grid
    from attnlab.engine.plan import Plan
    from attnlab.engine.store import Store, atomic_write_bytes
    from attnlab.provenance import provenance, versions  # heavy imports only when a run happens
    from attnlab.train import COMPILE_TIME, default_strategy, enable_compile_cache

    out = Path(out)
    check_target(exp, spec, scale, out, log)  # before anything trains
    trackers.warm(log)  # imported while the run trains
    enable_compile_cache()  # reruns and resumes skip compilation (off where $ATTNLAB_COMPILE_CACHE=off)
    t0 = time.perf_counter()
    compiles = dict(COMPILE_TIME)
    store, trained = None, 0
    # the local executor made once, its workers fitted to the memory now; Ray's is made per stage
    ex = executors.LocalExecutor().within(spec.memory_budget_gb * 1e9) if executor == "local" else executor

    def run(cells: list[dict]) -> dict[str, np.ndarray]:
        """Plan (and check) a stage's cells, train what is not done, return their columns."""
        nonlocal store, trained
        if not cells:
            raise AttnlabError("spec: the grid is empty")
        ids = check_unique(cells, spec)
        plan = Plan.of(cells, exp.tags, spec.memory_budget_gb * 1e9)  # errors before anything is written
        if store is None:
            try:
                out.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise AttnlabError(f"--out {out}: cannot create ({e.strerror})") from None
            store = Store(out)
            store.check_compatible({"schema": plan.schema, **versions()}, force=force)
            store.claim(exp.owner(spec, scale).as_json())
        trained += executors.run_cells(plan, store, executor=ex, progress=progress)
        by_id = dict(zip(ids, cells, strict=True))
        return table_columns(store.assemble(ids, describe=lambda i: describe(by_id[i], spec), write=False))

    cells = staged(exp.stages(spec), run)
    run(cells)  # the last cells (every stage's are done by now)
    ids = [grid.cell_id(c) for c in cells]
    trained_table = store.assemble(ids, write=False)
    table = exp.derive(trained_table, spec)
    store.write_results(table)
    atomic_write_bytes(out / "spec.json", json.dumps(spec.model_dump(), indent=2).encode())
    dtype = str(cells[0].get("train.dtype", "float32"))
    verdict = {
        "experiment": exp.id,
        "scale": scale,
        "cells": len(cells),
        "cells_trained_now": trained,
        "runtime_s": None,  # set once the figures are drawn
        # each cell's share of its chunk's wall time: with several workers chunks overlap, so this sum
        # exceeds the run's wall time
        "train_seconds_total": float(np.sum(trained_table.column("seconds").to_numpy())),
        "workers": ex.workers if executor == "local" else None,  # chunks trained at once
        # this process's compiles (the local executor's CPU strategy; Ray's workers compile their own)
        "compile": {k: round(COMPILE_TIME[k] - compiles[k], 3) for k in compiles}
        if executor == "local" and default_strategy() == "sequential"
        else None,
        "provenance": provenance(default_strategy(), dtype),
        "command": command,
        "store_warnings": list(store.notes),  # e.g. damaged parts moved aside and trained again
        "claims": [],
    }
    verdict = finish(exp, spec, out, table_columns(table), verdict, sets, started=t0)
    trackers.export(out, log)
    return verdict


def finish(
    exp: Experiment,
    spec,
    out: Path,
    cols: dict[str, np.ndarray],
    verdict: dict,
    sets: Sequence[str] = (),
    started: float | None = None,
) -> dict:
    """Analysis, figures, verdict.json and report.html from a results table: the tail of
    :func:`reproduce` and the whole of :func:`rebuild`, so a rebuilt report is the one a run
    writes. ``verdict`` is the run's record (cells, runtime, provenance, command); its claims
    are replaced by the analysis's, and its runtime is measured up to now if ``started`` is
    given."""
    from attnlab import ledger, report
    from attnlab.engine.store import atomic_write_bytes

    analysis = exp.analyse(cols, spec)
    for c in analysis.claims:
        c.regime = c.regime or exp.regime
        if c.regime not in rules.REGIMES:
            raise ValueError(f"{exp.id}: claim {c.id!r} has regime {c.regime!r}, not one of {rules.REGIMES}")
    figures = exp.figures(cols, spec, analysis, out)
    changed = modified(exp, spec, verdict["scale"])
    claims = [ledger.stamp(c.to_json(), ledger.rule_of(exp, c.id), changed) for c in analysis.claims]
    verdict = dict(verdict, modified=changed, claims=claims)
    if started is not None:
        verdict["runtime_s"] = round(time.perf_counter() - started, 3)
        verdict["finished_at"] = report.utc_now()
    atomic_write_bytes(out / "verdict.json", json.dumps(verdict, indent=2, default=_json_default).encode())
    # the fitted numbers behind the claims (per-column N_c, z, intervals), for docs and citations
    summary = {"experiment": exp.id, "scale": verdict["scale"], "summary": analysis.summary}
    atomic_write_bytes(out / "summary.json", json.dumps(summary, indent=2, default=_json_default).encode())
    report.write(out / "report.html", exp, spec, verdict, analysis, figures, list(sets))
    return verdict


# how a run computes, not what: a run that sets them is the same design
HOW_FIELDS = ("memory_budget_gb", "max_cells", "train.fast", "train.compile")


def flat(d: dict, prefix: str = "") -> dict:
    """A spec's values as ``{"data.N": …, "reps": …}`` (the part tables flattened one level per dict)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out |= flat(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


def modified(exp: Experiment, spec, scale: str) -> list[str]:
    """The fields in which ``spec`` differs from the design the experiment declares at ``scale``
    (another part, another knob, or a design that changed since the run): its claims are labelled
    ``modified`` with them. Empty for a user grid (its spec is its design)."""
    if exp.id == "sweep":
        return []
    return spec_changes(json.loads(json.dumps(spec.model_dump(), default=str)), exp, scale)


def spec_changes(ran: dict, exp: Experiment, scale: str) -> list[str]:
    """The fields (dotted) in which a run's spec (as stored in spec.json) differs from the code's
    spec of ``scale``, the fields of how it computed aside. A field the code added after the run is
    not counted (its default is taken to keep the earlier behaviour); one it dropped is."""
    if scale not in getattr(exp, "scales", {}):
        return []
    now = flat(json.loads(json.dumps(exp.spec(scale).model_dump(), default=str)))
    ran = flat(ran)
    return sorted(k for k in ran if k not in HOW_FIELDS and (k not in now or now[k] != ran[k]))


@dataclass
class Stored:
    """A results directory as read back: its experiment, spec, verdict and results table."""

    out: Path
    exp: Experiment
    spec: ExperimentSpec
    verdict: dict
    table: pa.Table


def load_results(out: Path) -> Stored:
    """Read and check a results directory (verdict.json, spec.json, results.parquet) without
    writing anything, so that a bad directory among several stops a rebuild before any write."""
    from attnlab.experiments import get

    out = Path(out)
    if not (out / "verdict.json").is_file():
        what = "does not exist" if not out.exists() else "has no verdict.json" if out.is_dir() else "is not a directory"
        writers = "`attnlab reproduce` or `attnlab sweep` writes one"
        raise AttnlabError(f"{out}: not a results directory ({what}; {writers})")
    verdict = _read_json(out / "verdict.json")
    missing = [k for k in ("experiment", "scale", "claims") if k not in verdict] if isinstance(verdict, dict) else []
    if not isinstance(verdict, dict) or missing:
        raise AttnlabError(f"{out / 'verdict.json'}: not a verdict (missing {', '.join(missing) or 'an object'})")
    try:
        exp = get(verdict["experiment"])
    except AttnlabError as e:
        raise AttnlabError(f"{out / 'verdict.json'}: {e}") from None
    if not (out / "spec.json").is_file():
        raise AttnlabError(f"{out}: no spec.json beside verdict.json (rerunning the command that wrote it restores it)")
    try:
        spec = exp.Spec.model_validate(_read_json(out / "spec.json"))
    except ValidationError as e:
        raise AttnlabError(f"{out / 'spec.json'}: {format_validation_error(e)}") from None
    return Stored(out, exp, spec, verdict, results_table(out, verdict))


def results_table(out: Path, verdict: dict | None = None) -> pa.Table:
    """A results directory's results.parquet, verified; a damaged one is an error that says how
    the store mends it: its parts rebuild it, by rerunning the command that wrote it."""
    from attnlab.engine.store import read_table

    command = (verdict or {}).get("command")
    rerun = f"`{command}`" if command else "the command that wrote it (`attnlab reproduce ID --out DIR`)"
    return read_table(
        Path(out) / "results.parquet",
        f". Its parts rebuild it without training: rerun {rerun} (a damaged part is moved aside and trained again)",
    )


def _read_json(path: Path):
    try:
        return json.loads(path.read_bytes())
    except OSError as e:
        raise AttnlabError(f"{path}: cannot read ({e.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise AttnlabError(f"{path}: malformed JSON: {e}") from None


def rebuild(out: Path | Stored) -> dict:
    """Redraw the figures and rewrite verdict.json and report.html of a results directory from
    its stored results, without training: claims come from the analysis of results.parquet by
    the current code, the run's record (cells, runtime, provenance, command) is kept, and the
    rebuild itself is recorded under ``rebuilt``."""
    from attnlab import report
    from attnlab.provenance import git_sha

    stored = out if isinstance(out, Stored) else load_results(out)
    cols = table_columns(stored.table)
    rebuilt = {"at": report.utc_now(), "attnlab_version": report.attnlab_version(), "git_sha": git_sha()}
    verdict = dict(stored.verdict, rebuilt=rebuilt)
    return finish(stored.exp, stored.spec, stored.out, cols, verdict)


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON serialisable: {type(x)}")
