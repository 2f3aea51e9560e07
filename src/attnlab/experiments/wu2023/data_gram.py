"""wu2023-data-gram: is the smallest eigenvalue of the data's Gram matrices bounded away from 0 on
MNIST patches, as N and the token dimension d vary?

The paper checks a data assumption (an eigenvalue of a data Gram matrix bounded away from 0) on
text embeddings; the sheet does not name the matrix. Two are measured, each on a cell's N
samples X_n ∈ R^{d_s×d} (float64):

  input   G = Φ Φᵀ, Φ_n = vec(X_n): the Gram of the flattened inputs. Patching only permutes a
          sample's pixels, so G is the same for every patch size. rank G ≤ d_s·d (= 784), and on
          MNIST far less: standardisation maps a pixel that is blank in every image of the subset
          to one constant, so rank G ≤ 1 + the number of pixels that vary across the subset
          (measured: 521 in a subset of 512 threes and eights, rank 507): G is singular before
          N reaches 784.
  relu    K = E_w[ReLU(wᵀx̄_n) ReLU(wᵀx̄_m)] = κ₁(x̄_n, x̄_m), w ~ N(0, I_d), x̄ = (1/d_s) Σ_t x_t the
          mean token (:func:`attnlab.ntk.arccos_kernels`): the limiting NTK of the model under
          τ₀ = d_m^−1 (:func:`attnlab.ntk.limit_ntk` is κ₁/d under LeCun init, the same matrix up
          to scale), whose λ_min is the constant of NTK-style convergence proofs. κ₁ is strictly
          positive definite on pairwise non-parallel inputs, so λ_min(K) > 0 for every N, but x̄
          lives in d dimensions: a smaller d (more, smaller patches) averages more.

Scale-free statistic: ρ = λ_min / λ̄, λ̄ = tr/N the mean eigenvalue (λ_min of the Gram of the
samples rescaled to unit mean squared norm). A Gram matrix is *singular* when its numerical rank
(numpy's ``matrix_rank``: of Φ for G, of K itself for K) is below N; its ρ is then 0 up to
rounding.

Protocol. No training: a cell is a subset of N training images drawn with its own key (the
``images`` data model, class-alternating order), paired with a placeholder wu2023 model of width
1 that takes 0 steps (``train.max_steps = 0``); ``derive`` rebuilds each cell's inputs from its
key and writes its eigenvalues into results.parquet, one row per cell, so a rerun resumes like
any grid. Grid: N (``data.N``) × patch p (``data.patch``: d = p², d_s = (28/p)²) × ``reps``
independent subsets. MNIST 3 vs 8, pixels standardised over the pair's training images (the
data of ``wu2023-vit-mnist``).

Claims (fixed before any run; thresholds are Spec fields; intervals 95 %):
  floor-relu   at the largest N, for every d, the t interval (over subsets) of ρ_relu lies above
               ``floor`` (10⁻³) → pass; any d whose interval lies below → fail; else inconclusive
  trend-relu   for every d, the least-squares slope b of log ρ_relu vs log N (all subsets; t
               interval from its standard error) lies above −``slope_tol`` (−0.1): no power-law
               decay with N → pass; any d whose interval lies below → fail; else inconclusive
  floor-input, trend-input
               the same for ρ_input, all patch sizes pooled (G does not depend on p)
A singular cell enters the floor rule as ρ = 0 and is left out of the slope fit (log 0); the
summary counts them.
"""

from __future__ import annotations

from pathlib import Path

import jax
import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
from pydantic import Field, PositiveFloat
from scipy import stats

from attnlab import ntk, plots, rules
from attnlab.experiments.base import Analysis, Claim, Experiment, ExperimentSpec, rounded, t_summary, trained_cells
from attnlab.experiments.wu2023.audit import gram_design

KERNELS = ("input", "relu")


class Spec(ExperimentSpec):
    floor: PositiveFloat = Field(1e-3, description="ρ = λ_min/λ̄ counted as bounded away from 0")
    slope_tol: PositiveFloat = Field(0.1, description="a slope of log ρ vs log N above −slope_tol counts as no decay")


DATA = {"name": "images", "dataset": "mnist", "classes": "3,8", "norm": "standardise", "pool": 0, "n_test": 2}
PAPER = dict(data={"N": [16, 32, 64, 128, 256, 512, 1024, 2048], "patch": [2, 4, 7, 14, 28]}, reps=10)
CPU = dict(data={"N": [16, 32, 64, 128, 256, 512], "patch": [4, 7, 14, 28]}, reps=5)
SMOKE = dict(data={"N": [8, 16], "patch": [7, 28], "pool": 200}, reps=2)


def grams(X: np.ndarray) -> dict[str, np.ndarray]:
    """The two Gram matrices of the module docstring for token arrays X (N, d_s, d), in float64
    (λ_min/λ̄ reaches 10⁻⁶ here, below float32's resolution of λ_max)."""
    X = np.asarray(X, np.float64)
    Phi = X.reshape(len(X), -1)
    xbar = X.mean(axis=1)
    with jax.enable_x64(True):
        _, k1 = ntk.arccos_kernels(xbar, xbar)
    return {"input": Phi @ Phi.T, "relu": np.asarray(k1, np.float64)}


def spectrum_stats(K: np.ndarray) -> dict[str, float]:
    """λ_min, λ_max, λ̄ = tr/N and ρ = λ_min/λ̄ of a symmetric matrix."""
    ev = np.linalg.eigvalsh((K + K.T) / 2)
    mean = float(np.trace(K)) / len(K)
    return {"lambda_min": float(ev[0]), "lambda_max": float(ev[-1]), "lambda_mean": mean, "rho": float(ev[0]) / mean}


def cell_measures(X: np.ndarray) -> dict:
    """d, d_s and, per kernel, λ_min, λ_max, λ̄, ρ and the numerical rank (of Φ for G, of K
    for K) on the token arrays X (N, d_s, d) of one cell."""
    X = np.asarray(X, np.float64)
    res = {"d": int(X.shape[2]), "d_s": int(X.shape[1])}
    for k, K in grams(X).items():
        res |= {f"{k}_{m}": v for m, v in spectrum_stats(K).items()}
        res[f"{k}_rank"] = int(np.linalg.matrix_rank(X.reshape(len(X), -1) if k == "input" else K, hermitian=k != "input"))
    return res


def slope_interval(N: np.ndarray, rho: np.ndarray) -> dict:
    """Least-squares slope of log ρ vs log N with its 95 % t interval (standard error, n − 2 df)."""
    x, y = np.log(np.asarray(N, float)), np.log(np.asarray(rho, float))
    out = {"slope": None, "ci95": [None, None], "n": int(len(x))}
    if len(x) < 3 or len(np.unique(x)) < 2:
        return out
    fit = stats.linregress(x, y)
    half = stats.t.ppf(0.975, len(x) - 2) * fit.stderr
    return out | {"slope": rounded(fit.slope), "ci95": [rounded(fit.slope - half), rounded(fit.slope + half)]}


def floor_verdict(groups: dict[str, dict], floor: float) -> rules.Verdict:
    """Every group's t interval above ``floor`` → pass; any below → fail; else inconclusive."""
    rule = f"at the largest N, the 95% t interval of ρ = λ_min/λ̄ lies above {floor:g} for every d; fail if one lies below"
    measured = {g: {"mean": s["mean"], "ci95": s["ci95"]} for g, s in groups.items()}
    los = [np.nan if s["ci95"][0] is None else s["ci95"][0] for s in groups.values()]
    his = [np.nan if s["ci95"][1] is None else s["ci95"][1] for s in groups.values()]
    if not groups or not np.all(np.isfinite(los + his)):
        return rules.Verdict(rules.INCONCLUSIVE, measured, rule, "no interval (needs ≥ 2 subsets per d)")
    below = [g for g, hi in zip(groups, his, strict=True) if hi < floor]
    if below:
        return rules.Verdict(rules.FAIL, measured, rule, f"below {floor:g} at {', '.join(below)}")
    if all(lo > floor for lo in los):
        return rules.Verdict(rules.PASS, measured, rule)
    return rules.Verdict(rules.INCONCLUSIVE, measured, rule, "an interval straddles the floor")


def trend_verdict(groups: dict[str, dict], tol: float) -> rules.Verdict:
    """Every group's slope interval above −tol → pass; any below → fail; else inconclusive."""
    rule = f"for every d, the 95% interval of the slope of log ρ vs log N lies above −{tol:g}; fail if one lies below"
    measured = {g: {"slope": s["slope"], "ci95": s["ci95"]} for g, s in groups.items()}
    if not groups or any(s["ci95"][0] is None for s in groups.values()):
        return rules.Verdict(rules.INCONCLUSIVE, measured, rule, "no slope interval (needs ≥ 3 cells over ≥ 2 N)")
    below = [g for g, s in groups.items() if s["ci95"][1] < -tol]
    if below:
        return rules.Verdict(rules.FAIL, measured, rule, f"ρ decays with N at {', '.join(below)}")
    if all(s["ci95"][0] > -tol for s in groups.values()):
        return rules.Verdict(rules.PASS, measured, rule)
    return rules.Verdict(rules.INCONCLUSIVE, measured, rule, "an interval straddles −tol")


class DataGram(Experiment):
    id = "wu2023-data-gram"
    regime = "protocol"  # the paper's stated protocol (reduced grids below paper scale)
    title = "Wu et al. 2023: the data assumption — λ_min of the data Gram matrices of MNIST patches vs N and d"
    description = __doc__
    Spec = Spec
    audit = gram_design()
    scales = {"smoke": SMOKE, "cpu": CPU, "paper": PAPER}
    assumptions = (
        "The sheet does not name the Gram matrix of the paper's data assumption: two are measured, the flattened "
        "inputs' Φ Φᵀ and the ReLU (arc-cosine κ₁) kernel of the mean tokens, the limiting NTK under τ₀ = d_m^−1.",
        "MNIST 3 vs 8 (the wu2023-vit-mnist data), pixels standardised with the pair's training mean and std; each "
        "cell is an independent subset of N training images (classes alternating), drawn with its key.",
        "ρ = λ_min/λ̄ (λ̄ = tr/N) makes the check scale-free; the floor 10⁻³ and the slope tolerance 0.1 are "
        "choices stated before the run, not values from the paper.",
        "The wu2023 model of width 1 paired with the data takes 0 steps: it only lets the engine draw, store and "
        "resume the subsets; nothing is trained.",
    )

    def defaults(self):
        return {
            "data": DATA,
            "model": {"name": "wu2023", "d_m": 1},
            "train": {"loss": "logistic", "optimizer": "gd", "max_steps": 0, "save_params": True, "dtype": "float64"},
        }

    def derive(self, table: pa.Table, spec: Spec) -> pa.Table:
        """One row per cell: its columns (without its parameters), d, d_s, and per kernel
        λ_min, λ_max, λ̄ and ρ on its N samples."""
        rows = []
        for t in trained_cells(table):
            n = int(t.cell["data.N"])
            X = np.asarray(t.data["X"][:n], np.float64)
            rows.append(t.row | cell_measures(X))
        return pa.Table.from_pylist(rows)

    def analyse(self, cols, spec: Spec) -> Analysis:
        N, d = cols["data.N"].astype(int), cols["d"].astype(int)
        top = int(N.max())
        summary: dict = {"cells": len(N), "largest N": top, "rank bound of Φ Φᵀ (d_s·d)": int(cols["d_s"][0] * d[0])}
        claims = []
        for kernel in KERNELS:
            rho = cols[f"{kernel}_rho"].astype(float)
            singular = cols[f"{kernel}_rank"].astype(int) < N
            if kernel == "input":
                sel = {"all d": np.ones(len(N), bool)}  # the same matrix at every patch size
            else:
                sel = {f"d = {v}": d == v for v in np.unique(d)}
            floors = {g: t_summary(np.where(singular, 0.0, rho)[s & (N == top)], 6) for g, s in sel.items()}
            trends = {g: slope_interval(N[s & ~singular], rho[s & ~singular]) for g, s in sel.items()}
            summary[f"{kernel}: ρ = λ_min/λ̄ (mean over subsets)"] = {
                g: {int(n): rounded(float(np.mean(rho[s & (N == n)])), 8) for n in np.unique(N[s])} for g, s in sel.items()
            }  # fmt: skip
            summary[f"{kernel}: ρ at the largest N"] = floors
            summary[f"{kernel}: slope of log ρ vs log N"] = trends
            summary[f"{kernel}: singular cells (rank < N, left out of the slope)"] = {
                int(n): int(np.sum(singular & (N == n))) for n in np.unique(N[singular])}  # fmt: skip
            summary[f"{kernel}: smallest rank at the largest N"] = int(np.min(cols[f"{kernel}_rank"][N == top]))
            what = "flattened inputs Φ Φᵀ" if kernel == "input" else "ReLU kernel of the mean tokens (τ₀ = d_m^−1 NTK)"
            claims.append(Claim.of(
                f"floor-{kernel}", f"λ_min of the {what} stays above {spec.floor:g}·λ̄ at the largest N",
                floor_verdict(floors, spec.floor)))  # fmt: skip
            claims.append(Claim.of(
                f"trend-{kernel}", f"λ_min/λ̄ of the {what} does not decay with N (bounded away from 0 as N grows)",
                trend_verdict(trends, spec.slope_tol)))  # fmt: skip
        return Analysis(claims=claims, summary=summary)

    def figures(self, cols, spec: Spec, analysis: Analysis, out: Path) -> list[Path]:
        N, d = cols["data.N"].astype(float), cols["d"].astype(int)
        Ns, ds = np.unique(N), np.unique(d)
        fig, axes = plt.subplots(1, 3, figsize=(15, 4), constrained_layout=True)
        colors = plt.cm.viridis(np.linspace(0, 0.9, len(ds)))
        for ax, kernel in zip(axes[:2], KERNELS, strict=True):
            singular = cols[f"{kernel}_rank"].astype(int) < N
            rho = np.where(singular, np.nan, cols[f"{kernel}_rho"].astype(float))  # singular cells: not drawn
            for c, dv in zip(colors, ds, strict=True):
                s = d == dv
                stat = lambda f, s=s, rho=rho: np.array([f(rho[s & (N == n)]) if np.isfinite(rho[s & (N == n)]).any()
                                                else np.nan for n in Ns])  # fmt: skip
                m, lo, hi = stat(np.nanmean), stat(np.nanmin), stat(np.nanmax)
                ax.errorbar(Ns, m, yerr=[m - lo, hi - m], fmt="o-", ms=3, capsize=2, color=c,
                            label=f"d = {dv} (p = {int(round(dv**0.5))}, d_s = {int(cols['d_s'][s][0])})")  # fmt: skip
            ax.axhline(spec.floor, color="k", ls="--", lw=0.8, label=f"floor {spec.floor:g}")
            bound = int(cols["d_s"][0] * d[0])
            if kernel == "input" and bound <= 2 * Ns[-1]:
                ax.axvline(bound, color="r", ls=":", lw=1, label=f"N = d_s·d = {bound} (rank bound)")
            plots.log_x(ax)
            ax.set_yscale("log")
            ax.set_xlabel("N (samples)")
            ax.set_ylabel("ρ = λ_min / λ̄")
            title = "flattened inputs Φ Φᵀ" if kernel == "input" else "ReLU kernel κ₁ of the mean tokens"
            ax.set_title(title + (f" ({int(singular.sum())} singular cells not drawn)" if singular.any() else ""))
            ax.legend(fontsize=6)
        ax = axes[2]
        rho = cols["relu_rho"].astype(float)
        for c, n in zip(plt.cm.plasma(np.linspace(0, 0.9, len(Ns))), Ns, strict=True):
            ax.plot(ds, [np.mean(rho[(N == n) & (d == dv)]) for dv in ds], "o-", ms=3, color=c, label=f"N = {int(n)}")
        plots.log_x(ax)
        ax.set_yscale("log")
        ax.set_xlabel("token dimension d = p²")
        ax.set_ylabel("ρ of the ReLU kernel")
        ax.set_title("ReLU kernel: ρ against d (mean over subsets)")
        ax.legend(fontsize=6)
        fig.suptitle(f"{self.id}: MNIST {cols['data.classes'][0].replace(',', ' vs ')}, {spec.reps} subsets per point "
                     "(bars: min … max)", fontsize=9)  # fmt: skip
        return plots.save(fig, out, "data_gram")


DATA_GRAM = DataGram()
EXPERIMENTS = (DATA_GRAM,)
