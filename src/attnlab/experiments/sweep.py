"""User-defined grids (``attnlab sweep SPEC.toml``): any registered data model × model × training
recipe, any of their fields as grid axes, run through the same pipeline as a paper figure.

A user grid is an :class:`~attnlab.experiments.base.Experiment` whose spec is the researcher's
own TOML file (or dict), so it is expanded into cells, trained, stored, resumed and
compatibility-checked exactly as ``attnlab reproduce`` does (:func:`~attnlab.experiments.pipeline.run_spec`).
It lives beside the paper packages, not in :mod:`attnlab.engine`, because it is an experiment: the
engine (grid, store, executors) knows no experiment.

The spec::

    title = "lr × init scale"            # shown in the report
    seeds = 3                            # independent seed blocks; or a list of seed values [0, 7, 9]
    reps = 1                             # runs per grid point within a block
    [data]                               # the data model: name + its fields (a list = a grid axis)
    name = "jiang2024"
    N = [4, 8]
    [model]                              # the model: name + its fields
    name = "li2023-vit"
    [train]                              # the training recipe (attnlab.problem.Recipe)
    lr = [0.03, 0.1, 0.3]
    [report]                             # optional: how the results are plotted
    x = "train.lr"                       # x axis of the metric plots (default: the first axis)
    y = "data.N"                         # with y: heatmaps over (x, y) instead of lines
    hue = "model.init_scale"             # lines: one per value of this axis (default: the next axis)
    metrics = ["test_loss", "test_error"]
    probes = ["train_loss"]              # probes to plot over time (default: every recorded one)

Every axis not placed on x, y or hue gives its own row of panels, so no axis is averaged away;
only seeds × reps are. A grid states no theory claims: its verdict has none, and its report
shows the measurements (a table per grid point, line plots or heatmaps, probes over time).

Its tables are :mod:`.sweep_tables`, its figures :mod:`.sweep_plots`, its spec :mod:`.sweep_spec`.
The fit check every run has (:mod:`attnlab.engine.fit`) also gives the probes ``[report]`` may name.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnlab.engine import fit
from attnlab.experiments.base import Analysis, Experiment
from attnlab.experiments.config import check_loaded, check_size, check_values, expand, read_toml
from attnlab.experiments.pipeline import check_executor, run_spec
from attnlab.experiments.sweep_plots import heatmaps, line_plots, probe_plots
from attnlab.experiments.sweep_spec import SCALE, Spec, layout, metric_names, metrics_of, probes_of
from attnlab.experiments.sweep_tables import (
    axis_values,
    grid_points,
    grid_table,
    mean_std,
    not_diverged,
    numeric_columns,
    paired_table,
    plain,
)

# ---------------------------------------------------------------- the experiment


class UserGrid(Experiment):
    id = "sweep"
    title = "user grid"
    description = (
        "A user-defined grid (attnlab sweep): every combination of the part fields given several values, "
        "× seeds × reps, trained by the same engine as the paper figures. Each grid point's numbers are the "
        "mean ± sample standard deviation over its seeds × reps; diverged cells are counted, not averaged."
    )
    Spec = Spec
    scales = {SCALE: {}}

    def __init__(self, values: dict | None = None, path: Path | None = None):
        self.values, self.path = dict(values or {}), path  # the spec's tables, and its file if any
        if isinstance(self.values.get("title"), str) and self.values["title"]:
            self.title = self.values["title"]

    @classmethod
    def of(cls, source: Path | str | dict) -> UserGrid:
        """From a TOML file, TOML text (a string that is no file and holds a newline or "=") or a
        dict of the same tables."""
        if isinstance(source, dict):
            return cls(check_loaded(Spec, dict(source), "spec"))
        if isinstance(source, str) and not Path(source).is_file() and ("\n" in source or "=" in source):
            return cls(check_loaded(Spec, read_toml(source, "spec", text=True), "spec"))
        path = Path(source)
        return cls(check_loaded(Spec, read_toml(path, str(path)), str(path)), path=path)

    def defaults(self) -> dict[str, Any]:
        return self.values

    def spec(self, scale: str = SCALE, sets: list[str] | None = None, config: Path | None = None) -> Spec:
        spec = super().spec(scale, sets, config)
        check_values(spec)  # a value's own error first, then [report]'s
        layout(spec)  # [report] names grid axes
        self.title = spec.title
        return spec

    def owner(self, spec: Spec, scale: str):
        from attnlab.engine.guard import Owner

        return Owner(self.id, scale, self.path.name if self.path is not None else spec.title)

    def cells(self, spec: Spec) -> list[dict]:
        if isinstance(spec.seeds, list):
            points = math.prod(
                len(v)
                for kind in ("data", "model", "train")
                for v in getattr(spec, kind).values()
                if isinstance(v, list | tuple)
            )
            check_size(spec, points, seed_blocks=len(spec.seeds))
            cells = [c for s in spec.seeds for c in expand(spec.model_copy(update={"seed": s, "seeds": 1}))]
        else:
            cells = expand(spec)
        probes = fit.check(cells)
        metrics_of(spec, metric_names(cells))
        probes_of(spec, probes)
        return cells

    def analyse(self, cols: dict[str, np.ndarray], spec: Spec) -> Analysis:
        from attnlab.train import STATUS_NAMES

        self.title = spec.title  # a rebuilt report (from spec.json) gets the grid's own title too
        lay = layout(spec)
        metrics = metrics_of(spec, numeric_columns(cols))
        points = grid_points(cols, lay.axes)
        table = grid_table(cols, spec)
        status = {s: int(np.sum(cols["status"] == s)) for s in STATUS_NAMES.values()}
        summary: dict[str, Any] = {
            "cells": len(cols["id"]),
            "grid points": len(points),
            "axes": {a: axis_values(cols[a]) for a in lay.axes},
            "status": status,
        }
        lowest = {}
        for m in metrics:
            means = {k: mean_std(cols[m][not_diverged(cols, idx)])[0] for k, idx in points.items()}
            finite = {k: v for k, v in means.items() if np.isfinite(v)}
            if finite:
                k = min(finite, key=finite.get)
                lowest[m] = {"mean": finite[k], "at": dict(zip(lay.axes, map(plain, k), strict=True))}
        if lowest:
            summary["lowest mean per metric"] = lowest
        notes = []
        if status.get("diverged"):
            notes.append(
                f"{status['diverged']} of {len(cols['id'])} cells diverged (non-finite loss); they are "
                "counted per grid point and left out of the means."
            )
        if status.get("cap"):
            notes.append(
                f"{status['cap']} cells ran to the step cap (train.max_steps) without meeting the stop rule "
                "(train.loss_threshold)."
            )
        paired = paired_table(cols, spec)
        return Analysis(claims=[], summary=summary, notes=notes, tables=[table, *([paired] if paired else [])])

    def figures(self, cols: dict[str, np.ndarray], spec: Spec, analysis: Analysis, out: Path) -> list[Path]:
        lay = layout(spec)
        metrics = metrics_of(spec, numeric_columns(cols))
        paths = []
        if lay.x is not None and metrics:
            paths += (heatmaps if lay.y else line_plots)(cols, spec, lay, metrics, out)
        probes = probes_of(
            spec, [c.removeprefix("trace_") for c in cols if c.startswith("trace_") and c != "trace_step"]
        )
        if probes:
            paths += probe_plots(cols, spec, lay, probes, out)
        return paths


def sweep(
    source: Path | str | dict,
    out: Path | str,
    sets: list[str] | None = None,
    executor: str = "local",
    progress: bool = True,
    force: bool = False,
    log: Sequence[str] = (),
) -> dict:
    """Run (or resume) a user grid into ``out``; write results.parquet, figures, verdict.json and
    report.html as ``reproduce`` does, and export them to the trackers in ``log``. Returns the
    verdict."""
    check_executor(executor)
    exp = UserGrid.of(source)
    spec = exp.spec(SCALE, sets)
    if exp.path is not None:
        args = ["attnlab", "sweep", str(exp.path), *(a for s in sets or [] for a in ("--set", s))]
        args += ["--executor", executor] if executor != "local" else []
        command = shlex.join([*args, "--out", str(out)])
    else:
        command = f"attnlab.sweep(<spec: see spec.json>, out={str(out)!r}, sets={list(sets or [])!r})"
    return run_spec(
        exp, spec, SCALE, Path(out), sets or [], command, executor=executor, progress=progress, force=force, log=log
    )
