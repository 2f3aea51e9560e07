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

Before anything is written, each bucket's composition is traced abstractly (``jax.eval_shape``
of data, model, loss and probes): a data model whose samples do not fit the model, or a probe
set that does not fit either, is one clear error instead of a failure mid-run.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from attnlab import problem as P
from attnlab.engine import fit
from attnlab.errors import AttnlabError
from attnlab.experiments.base import Analysis, Experiment
from attnlab.experiments.config import ExperimentSpec, check_loaded, check_size, check_values, expand, read_toml
from attnlab.experiments.pipeline import check_executor, run_spec

SCALE = "user"  # a user grid has one scale: its own spec
DEFAULT_METRICS = ("test_loss", "test_error")
EXTRA_METRICS = ("stop_step", "seconds")  # per-cell numbers every run records besides the loss's metrics
MAX_LEGEND = 12  # grid points named in a probe panel's legend


class ReportSpec(BaseModel):
    """How a user grid's results are plotted (``[report]``)."""

    model_config = ConfigDict(extra="forbid")

    x: str | None = Field(None, description="grid axis on the x axis of the metric plots (default: the first axis)")
    y: str | None = Field(None, description="a second grid axis: heatmaps over (x, y) instead of lines")
    hue: str | None = Field(None, description="lines: one per value of this grid axis (default: the next axis)")
    metrics: list[str] | None = Field(None, description="result columns to plot (default: test loss and error)")
    probes: list[str] | None = Field(None, description="probes to plot over time (default: every recorded one)")


class Spec(ExperimentSpec):
    title: str = Field("user grid", min_length=1, description="the grid's name, shown in the report")
    seeds: PositiveInt | list[int] = Field(
        1, description="independent seed blocks of the whole grid, or a list of seed values"
    )
    report: ReportSpec = Field(default_factory=ReportSpec, description="plots: x, y, hue, metrics, probes")

    @field_validator("seeds", mode="plain")
    @classmethod
    def _seeds(cls, v):
        def integer(x):
            if isinstance(x, bool) or not isinstance(x, int | str):
                raise ValueError(f"must be an integer or a list of integers, got {x!r}")
            try:
                return int(x)
            except ValueError:
                raise ValueError(f"must be an integer or a list of integers, got {x!r}") from None

        if isinstance(v, list | tuple):
            seeds = [integer(x) for x in v]
            if not seeds or min(seeds) < 0 or len(set(seeds)) < len(seeds):
                raise ValueError(f"a list of seeds must hold distinct values ≥ 0, got {seeds}")
            return seeds
        n = integer(v)
        if n < 1:
            raise ValueError(f"the number of seed blocks must be ≥ 1, got {n}")
        return n

    @field_validator("data", "model")
    @classmethod
    def _names(cls, v, info):
        names = v.get("name")
        if names is not None and not (
            isinstance(names, str) or (isinstance(names, list) and names and all(isinstance(n, str) for n in names))
        ):
            raise ValueError(f"{info.field_name}.name: a part's name, or a list of names, got {names!r}")
        return v

    @model_validator(mode="after")
    def _seed(self):
        if isinstance(self.seeds, list) and self.seed:
            raise ValueError("seed: a list of seeds gives the seed values itself; leave seed out")
        return self


def grid_axes(spec: Spec) -> list[str]:
    """The grid axes (part fields given a list of values), namespaced, in spec order."""
    return [
        f"{kind}.{k}" for kind in P.PART_KINDS for k, v in getattr(spec, kind).items() if isinstance(v, list | tuple)
    ]


@dataclass(frozen=True)
class Layout:
    """Where each axis goes on the plots; ``panels`` are the axes left over (a row each)."""

    axes: tuple[str, ...]
    x: str | None
    y: str | None
    hue: str | None
    panels: tuple[str, ...]


def layout(spec: Spec) -> Layout:
    """The plot layout of ``[report]``; an axis name may be short (``lr``) where unambiguous."""
    axes = grid_axes(spec)
    r = spec.report

    def axis(field: str, name: str | None) -> str | None:
        if name is None:
            return None
        found = [a for a in axes if name in (a, a.split(".", 1)[1])]
        if len(found) != 1:
            valid = ", ".join(axes) if axes else "none (give a part field a list of values)"
            what = "is ambiguous" if found else "is not a grid axis"
            raise AttnlabError(f"report.{field}: {name!r} {what}; grid axes: {valid}")
        return found[0]

    x, y, hue = axis("x", r.x), axis("y", r.y), axis("hue", r.hue)
    if y is not None and hue is not None:
        raise AttnlabError("report.hue: heatmaps (report.y) have no lines; give either y or hue")
    if x is None:
        x = next((a for a in axes if a != y), None)
    if y is not None and (x is None or y == x):
        raise AttnlabError(f"report.y: needs another grid axis than report.x = {x!r}")
    if hue is not None and hue == x:
        raise AttnlabError(f"report.hue: must differ from report.x = {x!r}")
    if y is None and hue is None:
        hue = next((a for a in axes if a != x), None)
    placed = (x, y, hue)
    return Layout(tuple(axes), x, y, hue, tuple(a for a in axes if a not in placed))


def metrics_of(spec: Spec, available) -> list[str]:
    """The metrics to plot and tabulate: ``report.metrics`` (each must be available) or the
    default ones that are."""
    if spec.report.metrics is None:
        return [m for m in DEFAULT_METRICS if m in available]
    unknown = [m for m in spec.report.metrics if m not in available]
    if unknown:
        raise AttnlabError(f"report.metrics: unknown {', '.join(map(repr, unknown))}; valid: {', '.join(available)}")
    return list(spec.report.metrics)


def probes_of(spec: Spec, available) -> list[str]:
    """The probes to plot over time: ``report.probes`` (each must be recorded) or all."""
    if spec.report.probes is None:
        return list(available)
    if spec.report.probes and not available:
        raise AttnlabError("report.probes: nothing is recorded over time (set train.log_every > 0)")
    unknown = [p for p in spec.report.probes if p not in available]
    if unknown:
        raise AttnlabError(f"report.probes: unknown {', '.join(map(repr, unknown))}; recorded: {', '.join(available)}")
    return list(spec.report.probes)


def metric_names(cells: list[dict]) -> list[str]:
    """The per-cell metrics every cell will have: the loss and its metrics on both splits (for
    every loss in the grid), stop step and seconds."""
    import jax.numpy as jnp

    from attnlab.train import LOSSES

    per_loss = []
    for loss in dict.fromkeys(c["train.loss"] for c in cells):
        own = LOSSES[loss].metrics(jnp.zeros(1), jnp.ones(1))
        per_loss.append([f"{s}_{m}" for m in ("loss", *own) for s in ("train", "test")])
    common = [m for m in per_loss[0] if all(m in names for names in per_loss)]
    return common + list(EXTRA_METRICS)


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
        metrics = metrics_of(spec, _numeric(cols))
        points = grid_points(cols, lay.axes)
        table = grid_table(cols, spec)
        status = {s: int(np.sum(cols["status"] == s)) for s in STATUS_NAMES.values()}
        summary: dict[str, Any] = {
            "cells": len(cols["id"]),
            "grid points": len(points),
            "axes": {a: _values(cols[a]) for a in lay.axes},
            "status": status,
        }
        lowest = {}
        for m in metrics:
            means = {k: _mean_std(cols[m][_ok(cols, idx)])[0] for k, idx in points.items()}
            finite = {k: v for k, v in means.items() if np.isfinite(v)}
            if finite:
                k = min(finite, key=finite.get)
                lowest[m] = {"mean": finite[k], "at": dict(zip(lay.axes, map(_plain, k), strict=True))}
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
        metrics = metrics_of(spec, _numeric(cols))
        paths = []
        if lay.x is not None and metrics:
            paths += (_heatmaps if lay.y else _lines)(cols, spec, lay, metrics, out)
        probes = probes_of(
            spec, [c.removeprefix("trace_") for c in cols if c.startswith("trace_") and c != "trace_step"]
        )
        if probes:
            paths += _probe_plots(cols, spec, lay, probes, out)
        return paths


def sweep(
    source: Path | str | dict,
    out: Path | str,
    sets: list[str] | None = None,
    executor: str = "local",
    progress: bool = True,
    force: bool = False,
) -> dict:
    """Run (or resume) a user grid into ``out``; write results.parquet, figures, verdict.json and
    report.html as ``reproduce`` does. Returns the verdict."""
    check_executor(executor)
    exp = UserGrid.of(source)
    spec = exp.spec(SCALE, sets)
    if exp.path is not None:
        args = ["attnlab", "sweep", str(exp.path), *(a for s in sets or [] for a in ("--set", s))]
        args += ["--executor", executor] if executor != "local" else []
        command = shlex.join([*args, "--out", str(out)])
    else:
        command = f"attnlab.sweep(<spec: see spec.json>, out={str(out)!r}, sets={list(sets or [])!r})"
    return run_spec(exp, spec, SCALE, Path(out), sets or [], command, executor=executor, progress=progress, force=force)


# ---------------------------------------------------------------- tables


def _plain(x):
    return x.item() if isinstance(x, np.generic) else x


def _values(col) -> list:
    """An axis's values in order of first appearance (the spec's order)."""
    return list(dict.fromkeys(_plain(v) for v in col))


def _numeric(cols) -> list[str]:
    """Result columns that are per-cell numbers (metrics), not config or key fields."""
    config = tuple(f"{k}." for k in P.PART_KINDS)
    return [c for c, v in cols.items() if not c.startswith(config) and c not in P.KEY_ONLY and v.dtype.kind in "fiu"]


def grid_points(cols, axes) -> dict[tuple, np.ndarray]:
    """Row indices of each grid point (a combination of axis values), in spec order."""
    keys = list(zip(*(map(_plain, cols[a]) for a in axes), strict=True)) if axes else [()] * len(cols["id"])
    out: dict[tuple, list[int]] = {}
    for i, k in enumerate(keys):
        out.setdefault(k, []).append(i)
    return {k: np.asarray(v) for k, v in out.items()}


def _ok(cols, idx) -> np.ndarray:
    """The rows of ``idx`` that did not diverge."""
    return idx[cols["status"][idx] != "diverged"]


def _mean_std(values) -> tuple[float, float]:
    """Mean and sample std (ddof 1) of the finite values; NaN where undefined."""
    x = np.asarray(values, float)
    x = x[np.isfinite(x)]
    if not len(x):
        return math.nan, math.nan
    return float(x.mean()), float(x.std(ddof=1)) if len(x) > 1 else math.nan


def grid_table(cols, spec: Spec) -> tuple[str, list[str], list[list]]:
    """(title, columns, rows): one row per grid point, its cells, each metric's mean and std
    over the cells that did not diverge, and the count of each stop status."""
    from attnlab.train import STATUS_NAMES

    lay = layout(spec)
    metrics = metrics_of(spec, _numeric(cols))
    statuses = list(STATUS_NAMES.values())
    columns = [*lay.axes, "cells", *(f"{m} {s}" for m in metrics for s in ("mean", "std")), *statuses]
    rows = []
    for key, idx in grid_points(cols, lay.axes).items():
        ok = _ok(cols, idx)
        stats = [v for m in metrics for v in _mean_std(cols[m][ok])]
        rows.append(
            [
                *key,
                len(idx),
                *(None if math.isnan(v) else v for v in stats),
                *(int(np.sum(cols["status"][idx] == s)) for s in statuses),
            ]
        )
    return "Results per grid point (mean and std over seeds × reps)", columns, rows


PART_AXES = ("model.name", "data.name")


def paired_table(cols, spec: Spec) -> tuple[str, list[str], list[list]] | None:
    """Parts compared cell by cell: with a part name as a grid axis (model.name; else data.name),
    each other name against the first on the cells that share every other axis value, block and
    rep — on common draws (train.draws = "common") the same data, initial parameters (where the
    shapes agree) and batches, so each difference is paired. Per grid point of the other axes and
    metric: the mean difference, its 95 % t interval over the pairs, and in how many pairs the
    name is lower. None without a part axis."""
    from attnlab.rules import t_interval

    lay = layout(spec)
    axis = next((a for a in PART_AXES if a in lay.axes), None)
    if axis is None:
        return None
    names, others = _values(cols[axis]), [a for a in lay.axes if a != axis]
    ref, metrics = names[0], metrics_of(spec, _numeric(cols))
    key = lambda i: (*(_plain(cols[a][i]) for a in others), int(cols["block"][i]), int(cols["rep"][i]))
    ok = cols["status"] != "diverged"
    at = {(_plain(cols[axis][i]), key(i)): i for i in range(len(cols["id"])) if ok[i]}
    columns = [*others, axis, "pairs", *(f"Δ{m} [95 % interval]" for m in metrics), *(f"{m} lower" for m in metrics)]
    rows = []
    for point, idx in grid_points(cols, others).items():
        keys = list(dict.fromkeys(key(i) for i in idx))
        for name in names[1:]:
            pairs = [(at[name, k], at[ref, k]) for k in keys if (name, k) in at and (ref, k) in at]
            a, b = (np.asarray([p[j] for p in pairs], int) for j in (0, 1))
            cells = []
            for m in metrics:
                mean, lo, hi, _ = t_interval(cols[m][a] - cols[m][b]) if pairs else (math.nan,) * 4
                cells.append(
                    None
                    if math.isnan(mean)
                    else f"{mean:+.4g} [{lo:+.3g}, {hi:+.3g}]"
                    if np.isfinite(lo)
                    else f"{mean:+.4g}"
                )
            lower = [f"{int(np.sum(cols[m][a] < cols[m][b]))}/{len(pairs)}" for m in metrics]
            rows.append([*point, name, len(pairs), *cells, *lower])
    common = set(_values(cols["train.draws"])) == {"common"} if "train.draws" in cols else False
    how = "paired on common draws" if common else 'on independent draws (train.draws = "common" pairs them)'
    return f"Each {axis.split('.')[0]} against {ref}, cell by cell ({how}): difference = it − {ref}", columns, rows


def table_of(out: Path) -> tuple[str, list[str], list[list], tuple | None]:
    """(the grid's title, columns, rows, paired table or None) of a user grid's results directory:
    its per-grid-point table and :func:`paired_table`, from spec.json and results.parquet."""
    import pyarrow.parquet as pq

    from attnlab.experiments.pipeline import table_columns

    spec = Spec.model_validate_json(Path(out, "spec.json").read_text())
    cols = table_columns(pq.read_table(Path(out, "results.parquet")))
    _, columns, rows = grid_table(cols, spec)
    return spec.title, columns, rows, paired_table(cols, spec)


# ---------------------------------------------------------------- figures


def _log_spaced(v: np.ndarray) -> bool:
    """Positive values spaced more evenly in log than linearly (two values: a factor ≥ 10)."""
    if len(v) < 2 or v.min() <= 0:
        return False
    if len(v) == 2:
        return bool(v[1] / v[0] >= 10)
    spread = lambda d: np.std(d) / np.mean(d)
    return bool(spread(np.diff(np.log(v))) < spread(np.diff(v)))


@dataclass(frozen=True)
class _Coords:
    """Plot coordinates of an axis: numeric values in ascending order (on a log scale when they
    are log-spaced), anything else as categories in spec order."""

    values: list
    pos: np.ndarray
    log: bool
    numeric: bool

    @classmethod
    def of(cls, col) -> _Coords:
        values = _values(col)
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        if numeric:
            values = sorted(values)
            pos = np.asarray(values, float)
            return cls(values, pos, _log_spaced(pos), True)
        return cls(values, np.arange(len(values), dtype=float), False, False)

    def edges(self) -> np.ndarray:
        from attnlab import plots

        return plots.edges(self.pos, log=self.log) if self.numeric else np.arange(len(self.pos) + 1) - 0.5

    def style(self, ax, which: str, label: str) -> None:
        from attnlab import plots

        getattr(ax, f"set_{which}label")(label)
        if self.log and which == "x":
            plots.log_x(ax)  # plain-number tick labels
        elif self.log:
            ax.set_yscale("log")
        if not self.numeric:
            getattr(ax, f"set_{which}ticks")(self.pos, [str(v) for v in self.values])


def _panel_rows(cols, lay: Layout) -> list[tuple]:
    return list(grid_points(cols, lay.panels)) if lay.panels else [()]


def _label(names, key) -> str:
    return ", ".join(f"{n} = {_plain(v)}" for n, v in zip(names, key, strict=True))


def _select(cols, names, key) -> np.ndarray:
    """Rows whose axes ``names`` hold the values ``key``."""
    sel = np.ones(len(cols["id"]), bool)
    for n, v in zip(names, key, strict=True):
        sel &= np.asarray(cols[n] == v, bool)
    return sel


def _subplots(nrow: int, ncol: int, w: float = 4.3, h: float = 3.2):
    import matplotlib.pyplot as plt

    return plt.subplots(nrow, ncol, figsize=(w * ncol, h * nrow), squeeze=False, constrained_layout=True)


def _n_runs(cols, lay: Layout) -> str:
    per = [len(i) for i in grid_points(cols, lay.axes).values()]
    return f"{min(per)}" if min(per) == max(per) else f"{min(per)}–{max(per)}"


def _lines(cols, spec: Spec, lay: Layout, metrics: list[str], out: Path) -> list[Path]:
    """Each metric against x: one line per hue value (mean ± std over seeds × reps), one row of
    panels per combination of the remaining axes."""
    from attnlab import plots

    xs = _Coords.of(cols[lay.x])
    hues = _values(cols[lay.hue]) if lay.hue else [None]
    rows = _panel_rows(cols, lay)
    fig, axs = _subplots(len(rows), len(metrics))
    for r, panel in enumerate(rows):
        in_panel = _select(cols, lay.panels, panel)
        for c, m in enumerate(metrics):
            ax = axs[r][c]
            for h in hues:
                sel = in_panel & (_select(cols, [lay.hue], [h]) if lay.hue else True)
                stats = [
                    _mean_std(cols[m][sel & _select(cols, [lay.x], [xv]) & (cols["status"] != "diverged")])
                    for xv in xs.values
                ]
                mean, std = np.asarray(stats).T
                (line,) = ax.plot(xs.pos, mean, marker="o", lw=1.4, label=None if h is None else f"{lay.hue} = {h}")
                ax.fill_between(xs.pos, mean - std, mean + std, color=line.get_color(), alpha=0.2, lw=0)
            xs.style(ax, "x", lay.x)
            ax.set_title(m + (f"\n{_label(lay.panels, panel)}" if panel else ""), fontsize=9)
            if lay.hue:
                ax.legend(fontsize=7)
    fig.suptitle(f"{spec.title}: mean ± std over {_n_runs(cols, lay)} seeds × reps per point", fontsize=10)
    return plots.save(fig, out, "sweep_metrics")


def _heatmaps(cols, spec: Spec, lay: Layout, metrics: list[str], out: Path) -> list[Path]:
    """Each metric's mean over seeds × reps on the (x, y) grid, one row of panels per
    combination of the remaining axes."""
    from attnlab import plots

    xs, ys = _Coords.of(cols[lay.x]), _Coords.of(cols[lay.y])
    rows = _panel_rows(cols, lay)
    fig, axs = _subplots(len(rows), len(metrics), w=4.8, h=3.8)
    for r, panel in enumerate(rows):
        in_panel = _select(cols, lay.panels, panel) & (cols["status"] != "diverged")
        for c, m in enumerate(metrics):
            ax = axs[r][c]
            Z = np.full((len(ys.values), len(xs.values)), np.nan)
            for j, yv in enumerate(ys.values):
                for i, xv in enumerate(xs.values):
                    sel = in_panel & _select(cols, [lay.x, lay.y], [xv, yv])
                    Z[j, i] = _mean_std(cols[m][sel])[0]
            mesh = ax.pcolormesh(xs.edges(), ys.edges(), np.ma.masked_invalid(Z), shading="flat", cmap="viridis")
            fig.colorbar(mesh, ax=ax, label=m)
            if Z.size <= 100:
                for j, i in zip(*np.nonzero(np.isfinite(Z)), strict=True):
                    light = mesh.norm(Z[j, i]) > 0.5  # viridis is light at the top: dark text there
                    ax.text(
                        xs.pos[i],
                        ys.pos[j],
                        f"{Z[j, i]:.3g}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="k" if light else "w",
                    )
            xs.style(ax, "x", lay.x)
            ys.style(ax, "y", lay.y)
            ax.set_title(m + (f"\n{_label(lay.panels, panel)}" if panel else ""), fontsize=9)
    fig.suptitle(
        f"{spec.title}: mean over {_n_runs(cols, lay)} seeds × reps per point (blank: no finite value)", fontsize=10
    )
    return plots.save(fig, out, "sweep_metrics")


def _probe_plots(cols, spec: Spec, lay: Layout, probes: list[str], out: Path) -> list[Path]:
    """Each probe over training steps: one line per grid point, mean ± std over seeds × reps."""
    import matplotlib.pyplot as plt

    from attnlab import plots

    points = grid_points(cols, lay.axes)
    ncol = min(4, len(probes))
    fig, axs = _subplots(math.ceil(len(probes) / ncol), ncol, w=4.2, h=3.0)
    cmap = plt.get_cmap("tab10" if len(points) <= 10 else "viridis")
    colors = [cmap(i if len(points) <= 10 else i / max(1, len(points) - 1)) for i in range(len(points))]
    for ax, name in zip(axs.flat, probes, strict=False):
        col = cols.get(f"trace_{name}")
        for color, (key, idx) in zip(colors, points.items(), strict=True):
            runs = [np.asarray(col[i], float) for i in idx if col is not None and col[i] is not None]
            if runs:
                t = np.asarray(cols["trace_step"][idx[0]], float)
                plots.band(ax, t, np.stack(runs), _label(lay.axes, key) or "all cells", color=color)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("step")
    for ax in axs.flat[len(probes) :]:
        ax.set_visible(False)
    if len(points) <= MAX_LEGEND:
        axs.flat[0].legend(fontsize=6)
    shown = "" if len(points) <= MAX_LEGEND else f"; {len(points)} grid points, dark to light in spec order"
    fig.suptitle(f"{spec.title}: probes over training, mean ± std over seeds × reps{shown}", fontsize=10)
    return plots.save(fig, out, "sweep_probes")
