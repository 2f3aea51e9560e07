"""A user grid's figures: metrics against a grid axis (lines, or heatmaps over two axes) and the
recorded probes over time, one panel per grid point."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnlab.experiments.sweep_spec import MAX_LEGEND, Layout, Spec
from attnlab.experiments.sweep_tables import axis_values, grid_points, mean_std, plain

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
        values = axis_values(col)
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


def axis_label(cols, key: str, width: int = 38) -> str:
    """A grid axis as a reader names it: the field's meaning (its config's description, up to the
    first clause) and the field, e.g. "learning rate (train.lr)"; the key alone where the part
    gives no description."""
    from attnlab import problem as P

    kind, _, field = key.partition(".")
    if kind not in P.PART_KINDS or not field:
        return key
    try:
        name = None if kind == "train" else str(cols[f"{kind}.name"][0])
        rows = {r["field"]: r["description"] for r in P.part_config(kind, name).describe()}
    except Exception:  # an unknown part or a field it does not describe: the key says enough
        return key
    meaning = rows.get(field.split(".")[0], "")
    for stop in (";", " ("):
        meaning = meaning.split(stop)[0]
    meaning = meaning.strip()
    if not meaning:
        return key
    if len(meaning) > width:
        meaning = meaning[: width - 1].rsplit(" ", 1)[0] + "…"
    return f"{meaning} ({key})"


def _legend_outside(fig, ax, title: str | None = None) -> None:
    """One legend for the figure, right of every panel, never over the data."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside right upper", fontsize=7, title=title, title_fontsize=7)


def _panel_rows(cols, lay: Layout) -> list[tuple]:
    return list(grid_points(cols, lay.panels)) if lay.panels else [()]


def _label(names, key) -> str:
    return ", ".join(f"{n} = {plain(v)}" for n, v in zip(names, key, strict=True))


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


def line_plots(cols, spec: Spec, lay: Layout, metrics: list[str], out: Path) -> list[Path]:
    """Each metric against x: one line per hue value (mean ± std over seeds × reps), one row of
    panels per combination of the remaining axes."""
    from attnlab import plots

    xs = _Coords.of(cols[lay.x])
    hues = axis_values(cols[lay.hue]) if lay.hue else [None]
    rows = _panel_rows(cols, lay)
    fig, axs = _subplots(len(rows), len(metrics))
    for r, panel in enumerate(rows):
        in_panel = _select(cols, lay.panels, panel)
        for c, m in enumerate(metrics):
            ax = axs[r][c]
            for h in hues:
                sel = in_panel & (_select(cols, [lay.hue], [h]) if lay.hue else True)
                stats = [
                    mean_std(cols[m][sel & _select(cols, [lay.x], [xv]) & (cols["status"] != "diverged")])
                    for xv in xs.values
                ]
                mean, std = np.asarray(stats).T
                (line,) = ax.plot(xs.pos, mean, marker="o", lw=1.4, label=None if h is None else f"{h}")
                ax.fill_between(xs.pos, mean - std, mean + std, color=line.get_color(), alpha=0.2, lw=0)
            xs.style(ax, "x", axis_label(cols, lay.x))
            ax.set_title(m + (f"\n{_label(lay.panels, panel)}" if panel else ""), fontsize=9)
    if lay.hue:
        _legend_outside(fig, axs[0][0], axis_label(cols, lay.hue))
    fig.suptitle(f"{spec.title}: mean ± std over {_n_runs(cols, lay)} seeds × reps per point", fontsize=10)
    return plots.save(fig, out, "sweep_metrics")


def heatmaps(cols, spec: Spec, lay: Layout, metrics: list[str], out: Path) -> list[Path]:
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
                    Z[j, i] = mean_std(cols[m][sel])[0]
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
            xs.style(ax, "x", axis_label(cols, lay.x))
            ys.style(ax, "y", axis_label(cols, lay.y))
            ax.set_title(m + (f"\n{_label(lay.panels, panel)}" if panel else ""), fontsize=9)
    fig.suptitle(
        f"{spec.title}: mean over {_n_runs(cols, lay)} seeds × reps per point (blank: no finite value)", fontsize=10
    )
    return plots.save(fig, out, "sweep_metrics")


def probe_plots(cols, spec: Spec, lay: Layout, probes: list[str], out: Path) -> list[Path]:
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
        _legend_outside(fig, axs.flat[0])
    shown = "" if len(points) <= MAX_LEGEND else f"; {len(points)} grid points, dark to light in spec order"
    fig.suptitle(f"{spec.title}: probes over training, mean ± std over seeds × reps{shown}", fontsize=10)
    return plots.save(fig, out, "sweep_probes")
