"""Figures of ``wu2023-encoder-mnist`` and ``-vit-mnist``: the training-loss curves per (τ₀, init),
one band per width, and the final loss, drifts, logit std, attention TV and step ratio against width."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from attnlab import plots
from attnlab.experiments.wu2023.analysis import (
    INITS,
    colors,
    logband,
    per_run,
    select_runs,
    trace,
    trained,
    width_key,
    width_of,
)
from attnlab.experiments.wu2023.mnist_claims import ALPHAS, geo_mean, tau_label


def figures(exp_id: str, cols, spec, out: Path) -> list[Path]:
    """The two figures of the trained runs (the 0-step kernel cells left out), as ``Experiment.figures``."""
    cols = select_runs(cols, trained(cols))
    r = per_run(cols, spec.unstable_at)
    t = np.asarray(cols["trace_step"][0], float)
    L = trace(cols, "train_loss")
    width, alpha, init = width_of(cols), cols["model.alpha"].astype(float), cols["model.init"]
    widths = np.unique(width)
    alphas = [a for a in ALPHAS if (alpha == a).any()]
    inits = [i for i in INITS if (init == i).any()]
    fig, axes = plt.subplots(
        len(alphas),
        len(inits),
        figsize=(4.6 * len(inits), 3.6 * len(alphas)),
        sharex=True,
        sharey=True,
        squeeze=False,
        constrained_layout=True,
    )
    for row, a in zip(axes, alphas, strict=True):
        for ax, name in zip(row, inits, strict=True):
            for w, color in zip(widths, colors(len(widths)), strict=True):
                s = (alpha == a) & (init == name) & (width == w)
                if s.any():
                    flagged = int(r["unstable"][s].sum())
                    logband(ax, t, L[s], f"d_m = {w}" + (f" ({flagged} flagged)" if flagged else ""), color)
            s = (alpha == a) & (init == name)
            ax.axhline(spec.target * np.nanmedian(r["loss_0"][s]), color="grey", ls=":", lw=1)
            ax.set_yscale("log")
            ax.set_title(f"{tau_label(a)}, {name} init", fontsize=9)
            ax.legend(fontsize=7)
        row[0].set_ylabel("training loss")
    for ax in axes[-1]:
        ax.set_xlabel("epoch")
    fig.suptitle(
        f"{exp_id}: MNIST {cols['data.classes'][0].replace(',', ' vs ')}, N = {cols['data.N'][0]}, "
        f"{spec.reps * spec.seeds} repeats (geometric mean ×/÷ geometric sd); step γ·16/d_m, "
        f"γ = {spec.gamma:g}; dotted: {spec.target:g}·L_0",
        fontsize=9,
    )
    paths = plots.save(fig, out, "mnist_loss")

    fig, axes = plt.subplots(1, 5, figsize=(22, 3.9), constrained_layout=True)
    ok = ~r["unstable"]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = r["loss_T"] / r["loss_0"]
    measures = (
        (axes[1], trace(cols, "kernel_drift")[:, -1], "(b) NTK drift ‖K_T − K₀‖_F/‖K₀‖_F"),
        (axes[2], trace(cols, "logit_std")[:, -1], "(c) logit std at θ_T"),
        (axes[3], trace(cols, "attn_tv")[:, -1], "(d) attention TV from uniform at θ_T"),
    )
    styles = {"lecun": "o-", "he": "s--", "ntk": "^:"}
    for a, color in zip(alphas, ("tab:blue", "tab:red"), strict=False):
        for name in inits:
            s = (alpha == a) & (init == name)
            lab = f"{tau_label(a)}, {name}"
            axes[0].plot(widths, [geo_mean(q[s & (width == w)]) for w in widths], styles[name], color=color, label=lab)
            axes[4].plot(
                widths,
                [np.nanmedian(r["step_ratio"][s & (width == w)]) for w in widths],
                styles[name],
                color=color,
                label=lab,
            )
            for ax, v, _ in measures:
                med_w = [
                    np.nanmedian(v[s & ok & (width == w)]) if (s & ok & (width == w)).any() else np.nan for w in widths
                ]
                ax.plot(widths, med_w, styles[name], color=color, label=lab)
    axes[0].set_title("(a) L_T/L_0 (geometric mean over repeats)")
    for ax, _, title in measures:
        ax.set_title(title)
    axes[4].axhline(spec.unstable_at, color="grey", ls=":", lw=1)
    axes[4].set_title("(e) γ_eff·λ_max(K₀)/N (median); flagged above the dotted line")
    for ax in axes:
        ax.set_xscale("log")
        drawn = np.concatenate([np.asarray(line.get_ydata(), float) for line in ax.get_lines()] or [[]])
        if np.any(np.isfinite(drawn) & (drawn > 0)):  # no log axis for a panel whose every run is flagged
            ax.set_yscale("log")
        ax.set_xlabel(f"width {width_key(cols).removeprefix('model.')}")
        ax.set_xticks(widths, [str(w) for w in widths])
        ax.minorticks_off()
    axes[0].legend(fontsize=6)
    fig.suptitle(f"{exp_id}: against width (medians over unflagged runs in b–d)", fontsize=9)
    return paths + plots.save(fig, out, "mnist_width")
