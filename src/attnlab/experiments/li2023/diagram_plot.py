"""The figure of a li2023 phase diagram: the success rate over (x, N) with N_c per column, the
fitted laws and the columns where the mean-token floor binds; beside it the error floors per
column and, where the lr was tuned, its validation curve."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from attnlab import plots
from attnlab.experiments.base import Analysis
from attnlab.experiments.li2023.phase import CROSSED


def draw(exp, cols, spec, analysis: Analysis, out: Path) -> list[Path]:
    """The figure of the :class:`attnlab.experiments.li2023.diagram.Diagram` ``exp`` from its
    run's columns and analysis."""
    g = cols["stage"] == "grid"
    x, N = cols[exp.axis][g].astype(float), cols["data.N"][g].astype(float)
    u = exp.coordinate(x)
    xs, ys, Z = plots.grid_mean(u, N, (cols["test_error"][g] == 0).astype(float))
    tuned = "lr tuning (validation runs)" in analysis.summary
    fig, axes = plt.subplots(
        1,
        3 if tuned else 2,
        figsize=(14 if tuned else 10, 4),
        constrained_layout=True,
        gridspec_kw={"width_ratios": [2, 1, 1][: 3 if tuned else 2]},
    )
    ax = axes[0]
    log_n = len(ys) > 2 and ys[-1] / ys[0] > 10 and np.ptp(np.diff(np.log(ys))) < 1e-6  # a geometric N grid
    ye = plots.edges(ys, log=log_n)
    m = ax.pcolormesh(plots.edges(xs), ye, Z, cmap="gray", vmin=0, vmax=1, shading="flat")
    fig.colorbar(m, ax=ax, label="success rate (zero test error)")
    crossed = [c for c in analysis.summary["columns"] if c["status"] == CROSSED]
    if crossed:
        cu = exp.coordinate(np.array([c["x"] for c in crossed]))
        nc = np.array([c["N_c"] for c in crossed])
        err = np.array(
            [[c["N_c"] - (c["ci95"][0] or c["N_c"]), (c["ci95"][1] or c["N_c"]) - c["N_c"]] for c in crossed]
        ).T
        ax.errorbar(cu, nc, yerr=err, fmt="o", color="tab:red", ms=4, capsize=2, label="N_c (success ½), 95 % CI")
    line = analysis.summary.get("straight line")
    if line and line.get("b") is not None:
        xl = np.linspace(plots.edges(xs)[0], plots.edges(xs)[-1], 100)
        ax.plot(
            xl,
            line["a"] + line["b"] * xl,
            "-",
            color="orange",
            lw=1.5,
            label=f"fit N_c = {line['a']:.0f} + {line['b']:.3g}·{exp.xlabel()} (R² {line['r2']:.2f})",
        )
    law = analysis.summary.get("power law")
    if law and law["p"]["value"] is not None and crossed:
        p = law["p"]["value"]
        a_vals = np.linspace(x.min(), x.max(), 100)
        c0 = np.exp(np.mean(np.log(nc) + p * np.log([c["x"] for c in crossed])))
        ax.plot(
            exp.coordinate(a_vals),
            c0 * a_vals**-p,
            "--",
            color="tab:cyan",
            lw=1.3,
            label=f"power law N_c ∝ α_*^−{p:.2f}",
        )
    floor = analysis.summary["mean-token floor"]
    edges = plots.edges(xs)
    bound = [c for c in analysis.summary["columns"] if not c["free of the floor"]]
    for k, c in enumerate(bound):  # the floor binds: hatched, not fitted
        i = int(np.argmin(np.abs(xs - exp.coordinate(c["x"]))))
        ax.axvspan(
            edges[i],
            edges[i + 1],
            fill=False,
            hatch="//",
            edgecolor="tab:orange",
            lw=0,
            label=f"floor binds (z < {spec.free_z:g}): not fitted" if k == 0 else None,
        )
    lin = [c for c in floor.get("linear learner", {}).get("columns", []) if c["status"] == CROSSED]
    if lin and exp.axis.startswith("data."):
        ax.plot(
            exp.coordinate(np.array([c["x"] for c in lin])),
            [c["N_c"] for c in lin],
            "D",
            color="tab:green",
            ms=4,
            label="linear learner on the mean token: N_c",
        )
    ax.set_ylim(ye[0], ye[-1])
    if log_n:
        ax.set_yscale("log")
        ax.set_yticks(ys, [f"{y:g}" for y in ys])
    ax.set_xlabel(exp.xlabel())
    ax.set_ylabel("training samples N")
    ax.set_title(f"{exp.title.split(':')[0]}: success rate (white = always)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.15), ncol=2)
    ax = axes[1]
    cx = np.unique(x)
    orc = list(analysis.summary["oracle error per column"].values())
    lrn = list(analysis.summary["mean test error per column"].values())
    ax.plot(exp.coordinate(cx), np.maximum(lrn, 1e-5), "o-", label="learner: mean test error")
    ax.plot(exp.coordinate(cx), np.maximum(orc, 1e-5), "s--", color="k", label="oracle per-token rule")
    from scipy.stats import norm

    zs = np.array([c["z"] for c in floor["per column"]])
    ax.plot(
        exp.coordinate(cx),
        np.maximum(norm.sf(zs), 1e-5),
        "^:",
        color="tab:orange",
        label="best mean-token rule: Φ(−z)",
    )
    fl = cols["stage"] == "floor"
    if fl.any() and exp.axis.startswith("data."):
        xf = cols[exp.axis][fl].astype(float)
        err = [cols["test_error"][fl][xf == v].mean() for v in cx]
        ax.plot(
            exp.coordinate(cx),
            np.maximum(err, 1e-5),
            "D-",
            color="tab:green",
            ms=4,
            label="linear learner: mean test error",
        )
    ax.set_yscale("log")
    ax.set_ylim(5e-6, 1)
    ax.set_xlabel(exp.xlabel())
    ax.set_title("error floor (values < 10⁻⁵ drawn at 10⁻⁵)")
    ax.legend(fontsize=7)
    if tuned:
        t = analysis.summary["lr tuning (validation runs)"]
        ax = axes[2]
        lrs = [r["lr"] for r in t["table"]]
        ax.plot(lrs, [r["val_error"] for r in t["table"]], "o-", label="validation error")
        ax.axvline(t["chosen"], color="tab:red", lw=1, label=f"chosen lr = {t['chosen']:g}")
        plots.log_x(ax)
        ax.set_xlabel("learning rate")
        ax.set_title("lr tuned on validation runs")
        ax.legend(fontsize=7)
    return plots.save(fig, out, exp.id.replace("li2023-", "") + "_diagram")
