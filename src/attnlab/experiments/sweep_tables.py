"""A user grid's tables: one row per grid point (mean ± sd over its seeds × reps, diverged cells
counted apart), and the paired differences of grids run on common draws."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from attnlab import problem as P
from attnlab.experiments.sweep_spec import Spec, layout, metrics_of

# ---------------------------------------------------------------- tables


def plain(x):
    return x.item() if isinstance(x, np.generic) else x


def axis_values(col) -> list:
    """An axis's values in order of first appearance (the spec's order)."""
    return list(dict.fromkeys(plain(v) for v in col))


def numeric_columns(cols) -> list[str]:
    """Result columns that are per-cell numbers (metrics), not config or key fields."""
    config = tuple(f"{k}." for k in P.PART_KINDS)
    return [c for c, v in cols.items() if not c.startswith(config) and c not in P.KEY_ONLY and v.dtype.kind in "fiu"]


def grid_points(cols, axes) -> dict[tuple, np.ndarray]:
    """Row indices of each grid point (a combination of axis values), in spec order."""
    keys = list(zip(*(map(plain, cols[a]) for a in axes), strict=True)) if axes else [()] * len(cols["id"])
    out: dict[tuple, list[int]] = {}
    for i, k in enumerate(keys):
        out.setdefault(k, []).append(i)
    return {k: np.asarray(v) for k, v in out.items()}


def not_diverged(cols, idx) -> np.ndarray:
    """The rows of ``idx`` that did not diverge."""
    return idx[cols["status"][idx] != "diverged"]


def mean_std(values) -> tuple[float, float]:
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
    metrics = metrics_of(spec, numeric_columns(cols))
    statuses = list(STATUS_NAMES.values())
    columns = [*lay.axes, "cells", *(f"{m} {s}" for m in metrics for s in ("mean", "std")), *statuses]
    rows = []
    for key, idx in grid_points(cols, lay.axes).items():
        ok = not_diverged(cols, idx)
        stats = [v for m in metrics for v in mean_std(cols[m][ok])]
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
    names, others = axis_values(cols[axis]), [a for a in lay.axes if a != axis]
    ref, metrics = names[0], metrics_of(spec, numeric_columns(cols))
    key = lambda i: (*(plain(cols[a][i]) for a in others), int(cols["block"][i]), int(cols["rep"][i]))
    ok = cols["status"] != "diverged"
    at = {(plain(cols[axis][i]), key(i)): i for i in range(len(cols["id"])) if ok[i]}
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
    common = set(axis_values(cols["train.draws"])) == {"common"} if "train.draws" in cols else False
    how = "paired on common draws" if common else 'on independent draws (train.draws = "common" pairs them)'
    return f"Each {axis.split('.')[0]} against {ref}, cell by cell ({how}): difference = it − {ref}", columns, rows


def table_of(out: Path) -> tuple[str, list[str], list[list], tuple | None]:
    """(the grid's title, columns, rows, paired table or None) of a user grid's results directory:
    its per-grid-point table and :func:`paired_table`, from spec.json and results.parquet."""
    from attnlab.experiments.pipeline import results_table, table_columns

    spec = Spec.model_validate_json(Path(out, "spec.json").read_text())
    cols = table_columns(results_table(out))
    _, columns, rows = grid_table(cols, spec)
    return spec.title, columns, rows, paired_table(cols, spec)
