"""Plot helpers shared by the experiments (matplotlib, no LaTeX)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from attnlab.engine.store import atomic_write_bytes  # noqa: E402

plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 150, "font.size": 9, "axes.titlesize": 10})


def edges(values: np.ndarray, log: bool = False) -> np.ndarray:
    """Cell edges around sorted grid values (midpoints; geometric midpoints on a log axis), so
    ``pcolormesh`` draws each cell on its real coordinates."""
    v = np.log(values) if log else np.asarray(values, float)
    if len(v) == 1:
        e = np.array([v[0] - 0.5, v[0] + 0.5]) if not log else np.array([v[0] - 0.1, v[0] + 0.1])
    else:
        mid = (v[1:] + v[:-1]) / 2
        e = np.concatenate([[v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]])
    return np.exp(e) if log else e


def grid_mean(x: np.ndarray, y: np.ndarray, z: np.ndarray):
    """Mean of z over repeats on the (x, y) grid: returns xs, ys, Z[len(ys), len(xs)] (NaN where
    a grid point has no finite value)."""
    xs, ys = np.unique(x), np.unique(y)
    Z = np.full((len(ys), len(xs)), np.nan)
    for j, yv in enumerate(ys):
        for i, xv in enumerate(xs):
            sel = (x == xv) & (y == yv) & np.isfinite(z)
            if sel.any():
                Z[j, i] = z[sel].mean()
    return xs, ys, Z


def log_x(ax):
    """Log x-scale with plain-number labels at 1, 2, 5 × 10^k and no minor labels."""
    ax.set_xscale("log")
    axis = ax.xaxis
    axis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}"))
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def save(fig, out: Path, name: str) -> list[Path]:
    """Write ``name``.png and ``name``.pdf atomically; returns both paths."""
    import io

    paths = []
    for ext in ("png", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, bbox_inches="tight")
        path = Path(out) / f"{name}.{ext}"
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    plt.close(fig)
    return paths


def band(ax, t, runs: np.ndarray, label: str, color=None):
    """Mean ± std over runs (rows) against t."""
    m, s = np.nanmean(runs, 0), np.nanstd(runs, 0)
    (line,) = ax.plot(t, m, label=label, color=color, lw=1.4)
    ax.fill_between(t, m - s, m + s, color=line.get_color(), alpha=0.2, lw=0)
