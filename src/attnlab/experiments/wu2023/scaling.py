"""wu2023-scaling: τ₀ = d_m^−1/2 converges faster than τ₀ = d_m^−1 at the same width (Wu et al.
2023, Sec. 4 and 5.2), paired on common draws, on the sheet's synthetic data and on MNIST.

Why it should. Under τ₀ = d_m^−1 the softmax logits shrink like d_m^−1/2, the attention tends to
uniform and the query/key blocks' share of the NTK vanishes (the model tends to a two-layer ReLU net
on the mean token, :mod:`.limit`); under d_m^−1/2 the attention stays non-trivial and its blocks add
to K₀. A larger K₀ (λ_min(K₀) in particular) means a faster linear rate at the same step,
L_t ≲ (1 − γ_eff λ_min(K₀)/N)^{2t} L_0 (:mod:`.dynamics`). The sheet measured λ_max(K₀) under
d_m^−1 at about half that under d_m^−1/2 on the synthetic data.

Design. Both scalings at each width, LeCun init, full-batch GD on ½·mean (f − y)² for 400 epochs at
the width-normalised step of :mod:`.dynamics` (γ_eff = γ·16/d_m, the same for both scalings at a
width): γ = 1 on the synthetic data (N = 100, d_s = 8, d = 16, ‖x‖² ≈ d, y ~ N(0, 1)) and γ = 0.5
on MNIST 3 vs 8 (``mnist_gamma``; 7×7 patches, standardised pixels so that mean ‖x_t‖²/d = 1, N =
100, labels ±1: the wu2023-encoder-mnist data and step, :mod:`.encoder_mnist`). ``train.draws = common``: τ₀ is
a model field, so the two cells of a (data set, d_m, block, rep) share their data and their initial
parameters exactly; they differ only in τ₀.

Claims (rules fixed before the cpu run; thresholds are Spec fields):
  faster-synthetic, faster-mnist
      per matched pair (d_m, block, rep) of the data set: D = log(L_T/L_0)(τ₀ = d_m^−1) −
      log(L_T/L_0)(τ₀ = d_m^−1/2), > 0 when d_m^−1/2 converges faster (a run that diverged gives a
      NaN, counted against). pass: a one-sided sign test over the pairs that D > 0, p < ``level``
      (0.01: the sign test's size then stays below 0.01, inside the audit's 0.05 ceiling with its
      Clopper–Pearson slack; 9 pairs pass only at 9/9, 12 at ≥ 11/12); fail: at most half of the
      pairs have D > 0; else inconclusive. H1: the kernel under d_m^−1 half that under d_m^−1/2
      (λ_min and λ_max, the sheet's λ_max measurement; the size is assumed); H0: the same kernel
      under both scalings (τ₀ without effect on the speed).
Reported beside them: per (data set, τ₀, d_m), L_T/L_0, γ_eff·λ_max(K₀)/N, λ_min(K₀), λ_max(K₀) and
the query/key share of K₀ (ntk_share of W_Q and W_K at step 0), and the median D per width.

Measured at cpu scale (synthetic d_m = 16, 64, 256, 1024; MNIST 16, 64, 256; 3 repeats;
``results/wu2023-scaling-cpu``, 3.3 min on 2 cores):
  synthetic  D = 2.7, 3.0, 0.70, −0.003 (medians) at d_m = 16 … 1024: d_m^−1/2 faster in 9 of 9 pairs
             up to 256 and in 1 of 3 at 1024, where both scalings end at L_T/L_0 = 0.31: 10 of 12,
             p = 0.019 ≥ 0.01, inconclusive. Under LeCun the W_V and w_O blocks of K₀ grow ∝ d_m while
             the query/key blocks do not: their share of tr K₀ under d_m^−1/2 is 0.13, 0.053, 0.017,
             0.004 (and ≤ 0.011 under d_m^−1), so the scalings' kernels, and speeds, meet as d_m grows
             (λ_min(K₀) at 1024: 0.95 under d_m^−1/2, 1.26 under d_m^−1).
  MNIST      D = 2.1, 1.8, 0.98 at d_m = 16, 64, 256: 9 of 9 pairs, p = 0.002, pass; the query/key
             share of tr K₀ under d_m^−1/2 is 0.25, 0.13, 0.050 (heterogeneous patches keep the
             attention's part of the kernel larger than on i.i.d. tokens).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import matplotlib.pyplot as plt
import numpy as np
from pydantic import Field, PositiveFloat, PositiveInt

from attnlab import plots, rules
from attnlab.experiments import wu2023 as common
from attnlab.experiments.base import Analysis, Claim, Experiment, rounded
from attnlab.experiments.config import merge
from attnlab.experiments.wu2023 import dynamics, encoder_mnist
from attnlab.experiments.wu2023.analysis import TRAIN, add_run_columns, colors, logband, med, paired, per_run, trace
from attnlab.experiments.wu2023.audit.scaling import scaling_design
from attnlab.parts import register

DATASETS = ("synthetic", "mnist")
DATA_NAME = {"synthetic": "wu2023", "mnist": "images"}


class Spec(dynamics.Spec):
    level: float = Field(0.01, gt=0, lt=1, description="level of the paired sign tests")
    mnist_gamma: PositiveFloat = Field(0.5, description="step γ on MNIST (γ_eff = γ·16/d_m), wu2023-encoder-mnist's")
    mnist: dict[str, Any] = Field(default_factory=lambda: dict(encoder_mnist.DATA), description="the MNIST data fields")
    mnist_d_m: list[PositiveInt] | None = Field(None, description="widths on MNIST (None: the synthetic ones)")
    datasets: list[Literal["synthetic", "mnist"]] = Field(list(DATASETS), description="the data sets compared")


SMOKE = dict(
    data={"N": 8, "n_test": 8},
    mnist={"N": 8, "n_test": 8},
    model={"d_m": [8, 16]},
    train={"max_steps": 20, "log_every": 5, "log_dense_until": 5},
    reps=2,
    mnist_gamma=0.1,
    mnist_d_m=[8],  # one MNIST width: a compiled program less
)
CPU = dict(model={"d_m": [16, 64, 256, 1024]}, mnist_d_m=[16, 64, 256], reps=3)
PAPER = dict(model={"d_m": [16, 64, 256, 1024, 4096]}, mnist={"N": 200}, mnist_d_m=[16, 64, 256, 1024], reps=5)


def dataset_of(cols) -> np.ndarray:
    return np.where(np.asarray(cols["data.name"]) == DATA_NAME["mnist"], "mnist", "synthetic")


def log_q(r: dict) -> np.ndarray:
    """log(L_T/L_0) per run; NaN for a run that diverged or ended at or above L_0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.log(r["loss_T"] / r["loss_0"])
    return np.where(r["diverged"] | r["worse"], np.nan, q)


class Scaling(Experiment):
    id = "wu2023-scaling"
    title = "Wu et al. 2023: τ₀ = d_m^−1/2 against d_m^−1 at the same width, paired draws (synthetic and MNIST)"
    description = __doc__
    Spec = Spec
    scales = {"smoke": SMOKE, "cpu": CPU, "paper": PAPER}
    audit = scaling_design()
    assumptions = (
        "Both scalings at every width share their data and init draws (train.draws = common; τ₀ is a model field).",
        "Step γ_eff = γ·16/d_m, the same for both scalings at a width: γ = 1 (synthetic), 0.5 (MNIST, "
        "wu2023-encoder-mnist's); ½·mean (f − y)², full-batch GD, 400 epochs, LeCun, float64.",
        "MNIST 3 vs 8, 7×7 patches (16 tokens of d = 49), pixels standardised over the pair's training images.",
    ) + common.ASSUMPTIONS[:1]

    def defaults(self):
        return merge(
            common.DEFAULTS,
            {"model": {"alpha": [0.5, 1.0]}, "train": TRAIN | {"draws": "common"}, "mnist": dict(encoder_mnist.DATA)},
        )

    def cells(self, spec: Spec) -> list[dict]:
        out = []
        if "synthetic" in spec.datasets:
            out += common.stepped_cells(spec)
        if "mnist" in spec.datasets:
            model = spec.model | ({"d_m": spec.mnist_d_m} if spec.mnist_d_m else {})
            out += common.stepped_cells(
                spec.model_copy(update={"data": spec.mnist, "model": model, "gamma": spec.mnist_gamma})
            )
        return out

    def derive(self, table, spec: Spec):
        return add_run_columns(table, spec.unstable_at)

    def analyse(self, cols, spec: Spec) -> Analysis:
        r = per_run(cols, spec.unstable_at)
        ds, alpha, width = dataset_of(cols), cols["model.alpha"].astype(float), cols["model.d_m"].astype(int)
        lq = log_q(r)
        share0 = sum(trace(cols, f"ntk_share_{b}")[:, 0] for b in ("W_Q", "W_K") if f"trace_ntk_share_{b}" in cols)
        claims, summary, rows = [], {}, []
        for name in DATASETS:
            s = ds == name
            if not s.any():
                continue
            keys = ("model.d_m", "block", "rep")
            D = paired(cols, lq, 0.5, 1.0, keys, where=s, by="model.alpha")  # lq(α = 1) − lq(α = ½)
            v = rules.sign_test(D, alpha=spec.level, name="log(L_T/L_0)(d_m^−1) − log(L_T/L_0)(d_m^−1/2)")
            per_width = {}
            for w in np.unique(width[s]):
                Dw = paired(cols, lq, 0.5, 1.0, keys, where=s & (width == w), by="model.alpha")
                per_width[int(w)] = {"median D": med(Dw), "pairs with D > 0": f"{int(np.sum(Dw > 0))}/{len(Dw)}"}
            measured = v.measured | {"median D": med(D), "per width": per_width}
            data = "the sheet's synthetic data" if name == "synthetic" else "MNIST 3 vs 8 patches"
            claims.append(
                Claim.of(
                    f"faster-{name}",
                    f"on {data}, τ₀ = d_m^−1/2 converges faster than d_m^−1 at the "
                    "same width and step (paired on common data and init draws)",
                    rules.Verdict(v.outcome, measured, v.rule, v.detail),
                    "paired over (d_m, block, rep); a run not training counts against",
                )
            )
            table = {}
            for a in (0.5, 1.0):
                for w in np.unique(width[s]):
                    g = s & (alpha == a) & (width == w)
                    if g.any():
                        d = {
                            "lr": rounded(float(cols["train.lr"][g][0]), 6),
                            "γ_eff·λ_max(K₀)/N": med(r["step_ratio"][g]),
                            "λ_min(K₀)": med(r["lambda_min_0"][g]),
                            "λ_max(K₀)": med(r["lambda_max_0"][g]),
                            "L_T/L_0": med(np.exp(lq[g])),
                            "W_Q + W_K share of tr K₀": med(share0[g]) if np.ndim(share0) else None,
                            "not trained": int(np.sum(~np.isfinite(lq[g]))),
                        }
                        table.setdefault(f"d_m^-{a:g}", {})[int(w)] = d
                        rows.append(
                            [
                                name,
                                f"d_m^-{a:g}",
                                int(w),
                                d["lr"],
                                d["γ_eff·λ_max(K₀)/N"],
                                d["λ_min(K₀)"],
                                d["L_T/L_0"],
                                d["W_Q + W_K share of tr K₀"],
                                per_width[int(w)]["median D"],
                            ]
                        )
            summary[name] = table
        tab = (
            "per data set, τ₀ and width (medians over repeats); D = log(L_T/L_0)(d_m^−1) − log(L_T/L_0)(d_m^−1/2)",
            [
                "data",
                "τ₀",
                "d_m",
                "lr",
                "γ_eff·λ_max(K₀)/N",
                "λ_min(K₀)",
                "L_T/L_0",
                "W_Q + W_K share of K₀",
                "median D",
            ],
            rows,
        )
        return Analysis(claims=claims, summary=summary, tables=[tab])

    def figures(self, cols, spec: Spec, analysis: Analysis, out: Path) -> list[Path]:
        r = per_run(cols, spec.unstable_at)
        t = np.asarray(cols["trace_step"][0], float)
        L = trace(cols, "train_loss")
        ds, alpha, width = dataset_of(cols), cols["model.alpha"].astype(float), cols["model.d_m"].astype(int)
        lq = log_q(r)
        names = [n for n in DATASETS if (ds == n).any()]
        fig, axes = plt.subplots(
            1, 2 * len(names), figsize=(5 * 2 * len(names), 4), squeeze=False, constrained_layout=True
        )
        for k, name in enumerate(names):
            ax = axes[0, 2 * k]
            widths = np.unique(width[ds == name])
            for w, color in zip(widths, colors(len(widths)), strict=True):
                for a, ls in ((0.5, "-"), (1.0, "--")):
                    s = (ds == name) & (alpha == a) & (width == w)
                    logband(ax, t, L[s], f"d_m = {w}, τ₀ = d_m^−{a:g}", color, ls)
            ax.set_yscale("log")
            ax.set_xlabel("epoch")
            ax.set_title(f"{name}: training loss (solid d_m^−1/2, dashed d_m^−1)", fontsize=9)
            ax.legend(fontsize=6)
            ax = axes[0, 2 * k + 1]
            s = ds == name
            D = {
                int(w): paired(
                    cols, lq, 0.5, 1.0, ("model.d_m", "block", "rep"), where=s & (width == w), by="model.alpha"
                )
                for w in widths
            }
            for w, d in D.items():
                ax.plot(np.full(len(d), w), d, "o", color="tab:blue", alpha=0.6)
            ax.axhline(0, color="grey", ls=":", lw=1)
            ax.set_xscale("log")
            ax.set_xticks(widths, [str(w) for w in widths])
            ax.minorticks_off()
            ax.set_xlabel("width d_m")
            ax.set_title(
                f"{name}: D = log(L_T/L₀)(d_m^−1) − log(L_T/L₀)(d_m^−1/2) per pair (> 0: d_m^−1/2 faster)", fontsize=8
            )
        fig.suptitle(
            f"{self.id}: LeCun, step γ·16/d_m (γ = {spec.gamma:g} synthetic, {spec.mnist_gamma:g} MNIST), "
            f"{spec.reps * spec.seeds} repeats, common draws",
            fontsize=9,
        )
        return plots.save(fig, out, "scaling")


EXPERIMENT = register(Scaling())
