"""wu2023-width: the smallest width d_m that trains to a loss-ratio target, as a function of N.

The paper's Theorem (LeCun/He init): a width d_m quadratic in N suffices for GD to converge
linearly to zero training loss; a follow-up reads the bound for τ₀ = d_m^−1/2 as cubic. Both are
*sufficient* widths, so the measurement is a check against them, not a test of their form.

Protocol. Grid N (data.N) × d_m (model.d_m) × α (model.alpha: τ₀ = d_m^−α, the paper's 1/2 and
1) × reps; full-batch GD on ½·mean (f − y)² with the width-normalised step
γ_eff = step(γ, d_m, step_norm) (:func:`attnlab.experiments.wu2023.step`, why in that package)
capped at ``step_cap``, for ``train.max_steps`` (800) epochs from the LeCun init. A run
*reaches the target* when its training loss after the last epoch is ≤ ``target`` (10⁻³) × its
training loss at step 0 (trace step 0); a diverged run does not.

The step, and why it is capped. γ_eff = γ·16/d_m keeps γ_eff·λ_max(K₀)/N ≈ 0.7 where λ_max(K₀)
∝ d_m, i.e. from d_m ≈ 8 on at N = 64; below, and at small N, the kernel of a few units
fluctuates: measured medians (max) of (16/d_m)·λ_max(K₀)/N over 8 draws, α = 1/2, N = 64: 3.8
(15) at d_m = 1, 2.3 (5.9) at 2, 1.4 (2.7) at 4, 0.9 (1.05) at 8; N = 4: 2.6 (3.4) at d_m = 8, 1.3
(1.9) at 16. Uncapped, 26 of the 32 runs at d_m ∈ {2, 4} of a first grid diverged (γ_eff = 8, 4
there), so the lower edge measured the step, not the width; capped at 2, 25 of the 600 runs of
the cpu grid still diverged, at N ≤ 8. The step is therefore capped at ``step_cap`` = 1 (γ at
d_ref = 16, the published step): 1 of the 600 diverges (``--set step_cap=100`` lifts the cap).

The grid, and why it stops at d_m = 64 and N = 64. Under the width-normalised step the lazy
(large-width) rate γ_eff·λ_min(K)/N does not depend on the width, and it falls with N: the
widest nets are not faster, and at a fixed budget they fail first as N grows (300 epochs,
N = 64: median final/initial loss 1.2·10⁻² at d_m = 128 against 3·10⁻⁴ at d_m = 8; at N = 128 no
width reached 10⁻³ in 600 epochs). The success region is then a band whose upper edge is the
budget's. The cpu grid (N ≤ 64, d_m ≤ 64, 800 epochs) keeps that edge outside, so each column
crosses once, from failing small widths to succeeding ones.

Critical width. Per (α, N): P(reach | d_m) = σ(β₀ + β₁ log d_m) fitted to the column's runs,
d_c = exp(−β₀/β₁) where it crosses ½, percentile-bootstrap interval over the column's runs
(:func:`attnlab.experiments.li2023.phase.columns` with x = N and d_m in place of N). A column
whose runs all reach the target, or whose crossing falls below the grid's smallest width, is
censored "below grid"; none reaching it, or a crossing beyond the largest width, "above grid";
censored columns are shown, never fitted.

Law of d_c. Per α: log d_c = c + k·log N by least squares over the crossed N values (at least
``min_columns``); the interval of k is the 2.5–97.5 % range of the same fit applied to the
columns' bootstrap replicates. Reported beside it: the global logistic fit
σ(β₀ + β_d log d_m + β_N log N) over every run, whose boundary d_m ∝ N^(−β_N/β_d) uses the
censored columns too.

Claims, fixed before any run (per α):
  quadratic-a<α>   the measured requirement is within the quadratic sufficient bound: the 95 %
                   interval of k lies below ``k_quadratic`` (2) → pass; above it → fail (the
                   requirement grows faster than the bound allows); else inconclusive
  cubic-a0.5       (τ₀ = d_m^−1/2 only) the same against ``k_cubic`` (3)
Fewer than ``min_columns`` crossed N values: inconclusive (no law to fit).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import matplotlib.pyplot as plt
import numpy as np
from pydantic import Field, PositiveFloat

from attnlab import plots, rules, theory
from attnlab.experiments import wu2023 as common
from attnlab.experiments.base import Analysis, Claim, Experiment, ExperimentSpec, expand, merge, rounded
from attnlab.experiments.li2023 import phase
from attnlab.experiments.li2023.phase import CROSSED
from attnlab.experiments.wu2023.audit import width_design


class Spec(ExperimentSpec):
    gamma: PositiveFloat = Field(1.0, description="step γ; the step used is step(γ, d_m, step_norm)")
    step_norm: Literal["width", "none"] = Field("width", description="width: γ·16/d_m; none: γ at every width")
    step_cap: PositiveFloat | None = Field(
        1.0,
        description="largest step used (None: no cap): the width-normalised step assumes λ_max(K₀) ∝ d_m, "
        "which fails below d_m ≈ 8 and at small N (see the module docstring)",
    )
    target: float = Field(1e-3, gt=0, lt=1, description="reach: final training loss ≤ target × initial training loss")
    n_boot: int = Field(300, ge=20, description="bootstrap resamples for intervals")
    min_columns: int = Field(3, ge=2, description="crossed N values needed to fit d_c ∝ N^k")
    k_quadratic: PositiveFloat = Field(2.0, description="exponent of the quadratic sufficient width d_m ∝ N²")
    k_cubic: PositiveFloat = Field(3.0, description="exponent of the cubic reading for τ₀ = d_m^−1/2")


# ---------------------------------------------------------------- analysis helpers


def lr(spec: Spec, d_m: int) -> float:
    """step(γ, d_m, step_norm), capped at ``step_cap``."""
    g = common.step(spec.gamma, d_m, spec.step_norm)
    return g if spec.step_cap is None else min(g, spec.step_cap)


def reached(cols: dict, target: float) -> np.ndarray:
    """Per run: the final training loss is finite and ≤ target × the training loss at step 0
    (the first entry of the train_loss trace); diverged runs never reach it."""
    final = cols["train_loss"].astype(float)
    initial = np.array([float(t[0]) for t in cols["trace_train_loss"]])
    ok = np.isfinite(final) & np.isfinite(initial) & (cols["status"] != "diverged")
    return ok & (final <= target * initial)


def power_law(cs: list[phase.Column], min_columns: int) -> dict:
    """k and c of log d_c = c + k·log N over the crossed columns (x = N); interval of k from the
    columns' bootstrap replicates (rows where every crossed column has a finite replicate)."""
    use = [c for c in cs if c.status == CROSSED]
    out = {"n_columns": len(use), "N": [int(c.x) for c in use], "k": None, "c": None, "ci95": [None, None],
           "n_boot_used": 0}  # fmt: skip
    if len(use) < max(min_columns, 2):
        return out
    logN = np.log([c.x for c in use])
    k, c = np.polyfit(logN, np.log([c.value for c in use]), 1)
    B = np.stack([c_.boots for c_ in use], 1)
    B = B[np.all(np.isfinite(B) & (B > 0), 1)]
    ks = np.array([np.polyfit(logN, np.log(row), 1)[0] for row in B]) if len(B) >= 20 else np.array([])
    lo, hi = np.percentile(ks, [2.5, 97.5]) if len(ks) else (np.nan, np.nan)
    return out | {"k": rounded(k), "c": rounded(c), "ci95": [rounded(lo), rounded(hi)], "n_boot_used": int(len(ks))}


def global_exponent(N: np.ndarray, d_m: np.ndarray, success: np.ndarray, n_boot: int, seed: int) -> dict | None:
    """k of the boundary of σ(β₀ + β_d log d_m + β_N log N) over every run: d_m ∝ N^k,
    k = −β_N/β_d, with a bootstrap interval over runs (None without both outcomes)."""
    s = success.astype(float)
    if s.all() or not s.any() or len(np.unique(N)) < 2:
        return None
    fit = theory.free_exponent(np.log(d_m.astype(float)), np.log(N.astype(float)), s, n_boot=n_boot, seed=seed,
                               restricted=(-2.0, -3.0))  # fmt: skip
    p = fit.p  # p of d_m·N^p = C, so k = −p
    return {"k": rounded(-p.value), "ci95": [rounded(-p.hi), rounded(-p.lo)],
            "p_value_k2": fit.as_dict()["p_value"]["p=-2"], "p_value_k3": fit.as_dict()["p_value"]["p=-3"]}  # fmt: skip


def bound_verdict(law: dict, bound: float, name: str) -> rules.Verdict:
    """Measured requirement within the sufficient bound d_m ∝ N^bound: the interval of k lies
    below ``bound`` (pass); above it (fail); else inconclusive."""
    rule = f"95 % interval of k (d_c ∝ N^k) lies below {bound:g} ({name} bound); fail if it lies above {bound:g}"
    m = {"k": law.get("k"), "ci95": law.get("ci95"), "crossed_N": law.get("N"), "bound": bound}
    if law.get("k") is None:
        return rules.Verdict(
            rules.INCONCLUSIVE, m, rule, f"{law.get('n_columns', 0)} crossed N value(s): no law fitted"
        )
    lo, hi = (np.nan if v is None else v for v in law["ci95"])
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return rules.Verdict(rules.INCONCLUSIVE, m, rule, "no bootstrap interval")
    outcome = rules.PASS if hi < bound else rules.FAIL if lo > bound else rules.INCONCLUSIVE
    return rules.Verdict(outcome, m, rule, "" if outcome != rules.INCONCLUSIVE else f"interval straddles {bound:g}")


def _alpha_label(a: float) -> str:
    return "a1" if a == 1 else f"a{a:g}"


# ---------------------------------------------------------------- the experiment


N_CPU = [4, 8, 16, 32, 64]
D_M_CPU = [1, 2, 3, 4, 6, 8, 12, 16, 32, 64]


class Width(Experiment):
    id = "wu2023-width"
    title = "Wu et al. 2023: the smallest width that trains to zero loss, as a function of N"
    description = __doc__
    Spec = Spec
    audit = width_design()
    scales = {
        "smoke": dict(
            data={"N": [4, 8], "n_test": 4},
            model={"d_m": [2, 8], "alpha": [0.5, 1.0]},
            train={"max_steps": 30, "log_every": 10},
            reps=2,
            n_boot=20,
            min_columns=2,
        ),  # fmt: skip
        "cpu": dict(data={"N": N_CPU}, model={"d_m": D_M_CPU, "alpha": [0.5, 1.0]}, reps=6),
        # not run: N = 128 needs a budget of several thousand epochs at every width (see above)
        "paper": dict(
            data={"N": [4, 8, 16, 32, 64, 128]},
            model={"d_m": [*D_M_CPU, 128], "alpha": [0.5, 1.0]},
            train={"max_steps": 4000},
            reps=12,
        ),  # fmt: skip
    }
    assumptions = common.ASSUMPTIONS + (
        "Reaching the target: training loss after train.max_steps epochs ≤ target (10⁻³) × the loss at step 0; the "
        "epoch budget is part of the definition (the theorem is about linear convergence without a budget).",
        "Gaussian targets independent of X (the hardest to fit); the test set is not used.",
    )

    def defaults(self):
        return merge(common.DEFAULTS, {
            "data": {"n_test": 10},
            "model": {"init": "lecun"},
            "train": {"max_steps": 800, "log_every": 50},
        })  # fmt: skip

    def cells(self, spec, run=None) -> list[dict]:
        return [c | {"train.lr": lr(spec, c["model.d_m"])} for c in expand(spec)]

    def analyse(self, cols, spec: Spec) -> Analysis:
        success = reached(cols, spec.target)
        alpha = cols["model.alpha"].astype(float)
        N, d_m = cols["data.N"].astype(int), cols["model.d_m"].astype(int)
        summary: dict = {"runs": len(success), "reached target": rounded(success.mean(), 4),
                         "diverged runs": int(np.sum(cols["status"] == "diverged")),
                         "epochs": int(cols["train.max_steps"][0]), "target ratio": spec.target}  # fmt: skip
        claims = []
        for a in np.unique(alpha):
            s = alpha == a
            cs = phase.columns(N[s], d_m[s], success[s], spec.n_boot, spec.seed)
            law = power_law(cs, spec.min_columns)
            tag = _alpha_label(a)
            summary[f"α = {a:g}"] = {
                "columns (x = N, N_c = d_c)": [c.as_dict() for c in cs],
                "power law d_c ∝ N^k": law,
                "global logistic boundary": global_exponent(N[s], d_m[s], success[s], spec.n_boot, spec.seed),
                "median final/initial loss per (N, d_m)": _ratio_table(cols, s),
            }
            claims.append(
                Claim.of(
                    f"quadratic-{tag}",
                    f"τ₀ = d_m^−{a:g}: the width needed grows no faster than the quadratic sufficient "
                    f"width (d_c ∝ N^k with k < {spec.k_quadratic:g})",
                    bound_verdict(law, spec.k_quadratic, "quadratic"),
                )
            )
            if a == 0.5:
                claims.append(Claim.of(
                    f"cubic-{tag}", f"τ₀ = d_m^−1/2: the width needed grows no faster than the cubic reading "
                    f"(k < {spec.k_cubic:g})", bound_verdict(law, spec.k_cubic, "cubic")))  # fmt: skip
        return Analysis(claims=claims, summary=summary)

    def figures(self, cols, spec: Spec, analysis: Analysis, out: Path) -> list[Path]:
        success = reached(cols, spec.target).astype(float)
        alpha = cols["model.alpha"].astype(float)
        alphas = np.unique(alpha)
        fig, axes = plt.subplots(1, len(alphas), figsize=(5.2 * len(alphas), 4), constrained_layout=True, squeeze=False)
        for ax, a in zip(axes[0], alphas, strict=True):
            s = alpha == a
            xs, ys, Z = plots.grid_mean(cols["data.N"][s].astype(float), cols["model.d_m"][s].astype(float), success[s])
            m = ax.pcolormesh(plots.edges(xs, log=True), plots.edges(ys, log=True), Z, cmap="gray", vmin=0, vmax=1)
            info = analysis.summary[f"α = {a:g}"]
            crossed = [c for c in info["columns (x = N, N_c = d_c)"] if c["status"] == CROSSED]
            if crossed:
                n = np.array([c["x"] for c in crossed])
                dc = np.array([c["N_c"] for c in crossed])
                err = np.array([[v - (c["ci95"][0] or v), (c["ci95"][1] or v) - v] for c, v in zip(crossed, dc,
                                strict=True)]).T  # fmt: skip
                ax.errorbar(n, dc, yerr=err, fmt="o", color="tab:red", ms=4, capsize=2, label="d_c (reach ½), 95 % CI")
            law = info["power law d_c ∝ N^k"]
            nl = np.geomspace(xs[0], xs[-1], 50)
            if law["k"] is not None:
                lo, hi = law["ci95"]
                ci = f" [{lo:.2f}, {hi:.2f}]" if lo is not None else ""
                ax.plot(nl, np.exp(law["c"]) * nl ** law["k"], "-", color="orange", lw=1.5,
                        label=f"fit d_c ∝ N^{law['k']:.2f}{ci}")  # fmt: skip
                anchor = (n[0], dc[0])
                ax.plot(nl, anchor[1] * (nl / anchor[0]) ** spec.k_quadratic, ":", color="tab:cyan", lw=1.2,
                        label=f"N^{spec.k_quadratic:g} (quadratic bound's growth)")  # fmt: skip
            for f in (ax.set_xscale, ax.set_yscale):
                f("log")
            ax.set_xticks(xs, [f"{x:g}" for x in xs])
            ax.set_yticks(ys, [f"{y:g}" for y in ys])
            ax.minorticks_off()
            ax.set_ylim(plots.edges(ys, log=True)[[0, -1]])
            ax.set_xlabel("training samples N")
            ax.set_ylabel("width d_m")
            ax.set_title(f"τ₀ = d_m^−{a:g}: share reaching loss ≤ {spec.target:g}·initial (white = all)")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7, loc="lower right")
        fig.colorbar(m, ax=axes[0, -1], label="share of runs reaching the target")
        return plots.save(fig, out, "width_vs_N")


def _ratio_table(cols: dict, sel: np.ndarray) -> dict:
    """Median over reps of final / initial training loss, keyed "N=…, d_m=…"."""
    ratio = cols["train_loss"].astype(float) / np.array([float(t[0]) for t in cols["trace_train_loss"]])
    out = {}
    for n in np.unique(cols["data.N"][sel]):
        for d in np.unique(cols["model.d_m"][sel]):
            r = ratio[sel & (cols["data.N"] == n) & (cols["model.d_m"] == d)]
            out[f"N={int(n)}, d_m={int(d)}"] = float(f"{np.nanmedian(r):.3g}") if np.isfinite(r).any() else None
    return out


WIDTH = Width()
EXPERIMENTS = (WIDTH,)
