"""wu2023-fig1-protocol: the stated protocol of Wu et al. 2023, Sec. 5.1 (Fig. 1 and 9) in one
command, with each normalisation the paper may have used as a grid axis.

Setting: the sheet's synthetic data (N = 100, d_s = 8, d = 16, y ~ N(0, 1)), LeCun init, full-batch
GD for 400 epochs at the literal step γ = 1 at every width (``step_norm = none``, no width
normalisation), τ₀ = d_m^−1/2 and d_m^−1 (``model.alpha``), float64. The paper states γ = 1 for
several widths but not its loss normalisation nor its token norm, so both are grid axes:

  train.reduction  mean: the objective ½·mean_n (f(X_n) − y_n)² (``train.loss = squared`` is
                   ℓ = ½(f − y)², averaged); sum: ½·Σ_n (f(X_n) − y_n)², whose gradient is N times
                   the mean's (the recorded losses are the ½·mean either way, so curves compare)
  data.token_norm  d: tokens with N(0, 1) entries, ‖x‖² ≈ d; unit: tokens of norm 1

Every cell shares its data and init draw with the cells that differ from it only in τ₀ or the
reduction (``train.draws = common``; the token norm is a data field, so it draws its own).

Linearised dynamics (:mod:`.dynamics`): with K₀ the empirical NTK of the N training samples, the
residual follows r_{t+1} = (I − g K₀) r_t with g = γ/N under mean and g = γ under sum, so a run is
predicted stable while its *stability ratio* g·λ_max(K₀) < 2 (γ·λ_max(K₀)/N under mean,
γ·λ_max(K₀) under sum: N = 100 times larger) and converges at the rate set by g·λ_min(K₀). Under
LeCun init K₀ grows ∝ d_m, so at a fixed γ the ratio grows ∝ d_m: the step is stable only up to
some width, and below it wider nets converge faster (panel (a)'s ordering) when λ_min(K₀) grows
with d_m. The ratio of every run is recorded (from the step-0 probe of λ_max(K₀)).

Claims (rules fixed before the cpu run; thresholds are Spec fields):
  stability   as wu2023-fig1 (:func:`.analysis.stability_verdict`): every run with ratio < 2 neither
              diverged nor ended above L_0 (pass), any such run not training → fail; descriptive
              when fewer than 3 runs lie at ratios in [1, 2) (a bound half as large predicts the
              same runs). H1: bound 2 (catapults to 6); H0: bound 1.
  ordering-<reduction>-<token_norm>  (one per candidate normalisation)
              the paper's width ordering at a fixed γ: per (candidate, τ₀), the widths W at which
              every run is predicted stable (ratio < ``unstable_at``); a τ₀ with fewer than
              ``min_widths`` (3) such widths is left out. Per repeat (τ₀, block, rep) over W:
              Kendall's τ_b between d_m and the speed v = −log(L_T/L_0) (a diverged run or one
              ending at or above L_0 ranks slowest); the repeat is *ordered* when τ_b ≥ ``tau_min``
              (2/3: with 4 widths, at most one pair out of order; with 3, none). pass: a one-sided
              sign test over the repeats that more than half are ordered, p < ``level`` (0.05);
              fail: at most half are; else inconclusive. *Descriptive* when no τ₀ has
              ``min_widths`` predicted-stable widths (the step alone then decides the ordering:
              the wide nets cannot train). H1: λ_min(K₀) ∝ d_m (the theorem's LeCun kernel), so
              the rate grows with the width; H0: λ_min(K₀) flat in d_m, the width without effect
              on the rate at a fixed γ (a random order per repeat: an ordered repeat has
              probability 1/6, so 6 of 6 has 2·10⁻⁵).
  protocol    descriptive, "protocol (normalisation assumed)": which candidates reproduce the
              published setting — every run trains at every width (not diverged, L_T < L_0) and
              its ordering claim passes. The paper does not state its normalisation, so this is a
              measurement conditional on the candidates assumed, not a test of the theorem.

Measured at cpu scale (d_m = 16, 64, 256, 1024; 3 repeats; ``results/wu2023-fig1-protocol-cpu``,
5.0 min on 2 cores): the stability ratio at d_m = 16 → 1024 (medians)
  ½·mean, ‖x‖² ≈ d   0.74, 2.8, 10.2, 41 (τ₀ = d_m^−1/2); 0.42, 1.46, 5.3, 21 (d_m^−1): trains at
                     d_m = 16 and 64 (the three d_m^−1/2 runs at 2.8 catapult and recover), diverges
                     from 256 on; ordering descriptive (one or two predicted-stable widths)
  ½·mean, ‖x‖ = 1    0.024, 0.086, 0.34, 1.33 under either τ₀ (unit tokens erase the scalings'
                     difference, the sheet's pitfall): every run trains, L_T/L_0 = 0.095, 0.040,
                     0.011, 0.0030 — ordering pass (Kendall τ_b = 1 in 6 of 6 repeats, p = 0.016)
  ½·sum, ‖x‖² ≈ d    74 … 4.2·10³: every run diverges; ordering descriptive
  ½·sum, ‖x‖ = 1     2.4 … 1.3·10² (N = 100 times the mean's): every run diverges; descriptive
Stability: 33 of 33 runs below ratio 2 train, 9 of them in [1, 2): pass. Protocol: only ½·mean
with unit-norm tokens reproduces the published setting (γ = 1 stable at every width, wider nets
faster); its λ_min(K₀) grows ∝ d_m^0.99 and its loss decays faster than λ_min(K₀) alone allows (the
kernel grows during training).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Literal

import matplotlib.pyplot as plt
import numpy as np
from pydantic import Field, PositiveInt
from scipy import stats

from attnlab import plots, rules
from attnlab.data.wu2023 import TOKEN_NORMS
from attnlab.experiments import wu2023 as common
from attnlab.experiments.base import Analysis, Claim, rounded
from attnlab.experiments.config import merge
from attnlab.experiments.wu2023 import dynamics
from attnlab.experiments.wu2023.analysis import TRAIN, colors, logband, med, per_run, stability_verdict, trace
from attnlab.experiments.wu2023.audit.protocol import protocol_design
from attnlab.parts import register
from attnlab.train import REDUCTIONS

ALPHAS = (0.5, 1.0)
CANDIDATE_LABEL = {
    ("mean", "d"): "½·mean, ‖x‖² ≈ d",
    ("mean", "unit"): "½·mean, ‖x‖ = 1",
    ("sum", "d"): "½·sum, ‖x‖² ≈ d",
    ("sum", "unit"): "½·sum, ‖x‖ = 1",
}
NOT_STATED = (
    "the paper states γ = 1 at several widths but not its loss normalisation nor its token norm: the conclusion is "
    "conditional on the candidates assumed (mean vs ½·sum loss, ‖x‖² ≈ d vs unit-norm tokens), a measurement of "
    "which of them is consistent with the published figure, not a test of the theorem"
)


class Spec(dynamics.Spec):
    step_norm: Literal["width", "none"] = Field(
        "none", description="none: γ at every width (the stated protocol); width: γ·16/d_m"
    )
    tau_min: float = Field(
        2 / 3,
        gt=0,
        le=1,
        description="ordering: a repeat is ordered when Kendall's τ_b between d_m and −log(L_T/L_0) reaches this",
    )
    min_widths: PositiveInt = Field(3, description="ordering: predicted-stable widths a τ₀ needs to be judged")


GRID = {
    "data": {"token_norm": list(TOKEN_NORMS)},
    "model": {"alpha": list(ALPHAS)},
    "train": {"reduction": list(REDUCTIONS), "draws": "common"},
}
SMOKE = dict(
    data={"N": 8, "n_test": 8},
    model={"d_m": [8, 16], "alpha": 0.5},
    train={"max_steps": 20, "log_every": 5, "log_dense_until": 5},
    reps=2,
)
CPU = dict(model={"d_m": [16, 64, 256, 1024]}, reps=3)
PAPER = dict(model={"d_m": [16, 64, 256, 1024, 4096]}, reps=5)


def candidates(cols) -> np.ndarray:
    """Per run, (reduction, token_norm) as 'mean-d', 'sum-unit', … (reduction absent at its default, mean)."""
    red = cols.get("train.reduction")
    red = np.array(["mean"] * len(cols["data.N"]) if red is None else [r if r == "sum" else "mean" for r in red])
    return np.array([f"{r}-{n}" for r, n in zip(red, cols["data.token_norm"], strict=True)])


def speed(r: dict) -> np.ndarray:
    """v = −log(L_T/L_0) per run; −inf for a run that diverged or ended at or above L_0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        v = -np.log(r["loss_T"] / r["loss_0"])
    return np.where(r["diverged"] | r["worse"] | ~np.isfinite(v), -np.inf, v)


def kendall(x, v) -> float:
    """Kendall's τ_b between x and v (−inf ranks lowest, ties allowed); NaN when either is constant."""
    v = np.where(np.isfinite(v), v, -1e300)
    if len(np.unique(x)) < 2 or len(np.unique(v)) < 2:
        return np.nan
    return float(stats.kendalltau(x, v).statistic)


def stable_widths(width, alpha, cand, ratio, unstable_at: float) -> dict[tuple[str, float], list[int]]:
    """(candidate, α) -> the widths at which every run is predicted stable (ratio < unstable_at)."""
    out = {}
    for c in np.unique(cand):
        for a in np.unique(alpha):
            s = (cand == c) & (alpha == a)
            with np.errstate(invalid="ignore"):
                out[(str(c), float(a))] = [
                    int(w) for w in np.unique(width[s]) if np.all(ratio[s & (width == w)] < unstable_at)
                ]
    return out


def ordering_verdict(
    width, v, repeat, eligible, tau_min: float, min_widths: int, level: float, why_none: str
) -> rules.Verdict:
    """Per repeat (among the ``eligible`` runs), Kendall's τ_b between d_m and v; ordered when ≥
    ``tau_min``; a one-sided sign test over the repeats with ≥ ``min_widths`` widths that more than
    half are ordered, p < level (pass), at most half (fail); descriptive without such a repeat."""
    rule = (
        f"per repeat over the predicted-stable widths (≥ {min_widths}), Kendall's τ_b(d_m, −log(L_T/L_0)) ≥ "
        f"{tau_min:.3g} (a run not training ranks slowest); one-sided sign test over repeats that more than half "
        f"are ordered, p < {level:g}; fail if at most half are"
    )
    taus = {}
    for r in np.unique(repeat[eligible]):
        s = eligible & (repeat == r)
        if len(np.unique(width[s])) >= min_widths:
            taus[str(r)] = kendall(width[s], v[s])
    measured = {
        "repeats": len(taus),
        "ordered": int(sum(t >= tau_min for t in taus.values() if np.isfinite(t))),
        "kendall_tau": {k: rounded(t, 3) for k, t in taus.items()},
    }
    if not taus:
        return rules.Verdict(rules.DESCRIPTIVE, measured, rule, why_none)
    ordered = np.array([1.0 if np.isfinite(t) and t >= tau_min else -1.0 for t in taus.values()])
    st = rules.sign_test(ordered, alpha=level, name="ordered repeat")
    return rules.Verdict(st.outcome, measured | {"p_value": st.measured["p_value"]}, rule, st.detail)


class Protocol(dynamics.Dynamics):
    """The stated protocol (γ = 1 at every width) under each candidate normalisation."""

    Spec = Spec
    description = __doc__
    regime = "protocol"
    scales = {"smoke": SMOKE, "cpu": CPU, "paper": PAPER}
    assumptions = (
        (
            "The stated protocol: N = 100, 400 epochs, γ = 1 at every width (step_norm = none), LeCun, τ₀ = d_m^−1/2 and "
            "d_m^−1; the loss normalisation (½·mean vs ½·sum) and the token norm (‖x‖² ≈ d vs 1) are not stated by the "
            "paper: both are grid axes (normalisation assumed).",
            "Cells that differ only in τ₀ or the reduction share their data and init draws (train.draws = common).",
        )
        + dynamics.Dynamics.assumptions[:1]
        + common.ASSUMPTIONS[:1]
    )

    def __init__(self):
        super().__init__(
            "wu2023-fig1-protocol",
            0.5,
            "Wu et al. 2023, Fig. 1 / 9 as stated: γ = 1 at every width, "
            "each candidate normalisation (½·mean vs ½·sum, ‖x‖² ≈ d vs 1)",
            protocol_design(),
        )

    def defaults(self):
        return merge(merge(common.DEFAULTS, {"train": TRAIN}), GRID)

    def analyse(self, cols, spec: Spec) -> Analysis:
        r = per_run(cols, spec.unstable_at)
        width, alpha = cols["model.d_m"].astype(int), cols["model.alpha"].astype(float)
        cand = candidates(cols)
        v = speed(r)
        ok_w = stable_widths(width, alpha, cand, r["step_ratio"], spec.unstable_at)
        repeat = np.array([f"{a:g}/{b}/{p}" for a, b, p in zip(alpha, cols["block"], cols["rep"], strict=True)])
        trained = ~(r["diverged"] | r["worse"])
        stab = Claim.of(
            "stability",
            f"every run with stability ratio < {spec.unstable_at:g} trains stably (the ratio "
            "γ·λ_max(K₀)/N under ½·mean, γ·λ_max(K₀) under ½·sum)",
            stability_verdict(r, spec.unstable_at, spec.stable_share),
        )
        claims, per_cand, rows = [stab], {}, []
        for key, label in CANDIDATE_LABEL.items():
            c = f"{key[0]}-{key[1]}"
            s = cand == c
            if not s.any():
                continue
            judged = {a: w for (cc, a), w in ok_w.items() if cc == c and len(w) >= spec.min_widths}
            eligible = s & np.array([a in judged and w in judged[a] for a, w in zip(alpha, width, strict=True)])
            with np.errstate(invalid="ignore"):
                top = float(np.nanmax(r["step_ratio"][s]))
                first = [
                    int(w) for w in np.unique(width[s]) if np.any(r["step_ratio"][s & (width == w)] >= spec.unstable_at)
                ]
            why = (
                f"under {label} the step ratio reaches {spec.unstable_at:g} from d_m = {min(first) if first else '—'} "
                f"on (max {top:.3g}): fewer than {spec.min_widths} predicted-stable widths for either τ₀, so the "
                "step alone decides the ordering (the wide nets cannot train)"
            )
            ver = ordering_verdict(width, v, repeat, eligible, spec.tau_min, spec.min_widths, spec.level, why)
            claims.append(
                Claim.of(
                    f"ordering-{c}",
                    f"{label}: at γ = {spec.gamma:g} wider nets converge faster (the "
                    "loss curves ordered by width, panel (a))",
                    ver,
                )
            )
            per_cand[c] = {
                "label": label,
                "max ratio": rounded(top),
                "trains at every width": bool(trained[s].all()),
                "predicted stable at every width": bool(np.all(r["step_ratio"][s] < spec.unstable_at)),
                "predicted-stable widths per τ₀": {f"d_m^-{a:g}": ok_w[(c, a)] for a in ALPHAS if (c, a) in ok_w},
                "ordering": ver.outcome,
            }
            per_cand[c]["reproduces"] = per_cand[c]["trains at every width"] and ver.outcome == rules.PASS
            for a in ALPHAS:
                for w in np.unique(width[s]):
                    g = s & (alpha == a) & (width == w)
                    if g.any():
                        with np.errstate(divide="ignore", invalid="ignore"):
                            q = r["loss_T"][g] / r["loss_0"][g]
                        rows.append(
                            [
                                label,
                                f"d_m^-{a:g}",
                                int(w),
                                med(r["step_ratio"][g]),
                                f"{int(trained[g].sum())}/{int(g.sum())}",
                                int(r["diverged"][g].sum()),
                                med(q),
                                med(r["lambda_min_0"][g]),
                                med(r["lambda_max_0"][g]),
                            ]
                        )
        good = [per_cand[c]["label"] for c in per_cand if per_cand[c]["reproduces"]]
        verdict = rules.Verdict(
            rules.DESCRIPTIVE,
            {"reproduced by": good, "candidates": per_cand},
            "a candidate reproduces the published setting when every run trains at every width "
            "and its ordering claim passes",
            NOT_STATED,
        )
        claims.append(
            Claim.of(
                "protocol",
                "protocol (normalisation assumed): the published setting (γ = 1 at every "
                "width, every width trains, wider nets faster) is reproduced by the candidate(s) "
                f"{', '.join(good) if good else 'none'}",
                verdict,
            )
        )
        per_run_ratio = {
            f"{c}/{a:g}/{w}/{b}/{p}": rounded(x)
            for c, a, w, b, p, x in zip(cand, alpha, width, cols["block"], cols["rep"], r["step_ratio"], strict=True)
        }
        summary = {
            "step": f"{spec.step_norm}, γ = {spec.gamma:g}",
            "T": int(np.asarray(cols["trace_step"][0])[-1]),
            "candidates": per_cand,
            "stability ratio per run (candidate/α/d_m/block/rep)": per_run_ratio,
        }
        table = (
            "per candidate, τ₀ and width (medians over repeats)",
            ["candidate", "τ₀", "d_m", "stability ratio", "trained", "diverged", "L_T/L_0", "λ_min(K₀)", "λ_max(K₀)"],
            rows,
        )
        return Analysis(claims=claims, summary=summary, tables=[table])

    def figures(self, cols, spec: Spec, analysis: Analysis, out: Path) -> list[Path]:
        r = per_run(cols, spec.unstable_at)
        t = np.asarray(cols["trace_step"][0], float)
        L = trace(cols, "train_loss")
        width, alpha = cols["model.d_m"].astype(int), cols["model.alpha"].astype(float)
        cand = candidates(cols)
        cands = [c for c in (f"{a}-{b}" for a, b in CANDIDATE_LABEL) if (cand == c).any()]
        widths = np.unique(width)
        alphas = [a for a in ALPHAS if (alpha == a).any()]
        fig, axes = plt.subplots(
            len(alphas),
            len(cands) + 1,
            figsize=(4.2 * (len(cands) + 1), 3.6 * len(alphas)),
            squeeze=False,
            constrained_layout=True,
        )
        for row, a in zip(axes, alphas, strict=True):
            for ax, c in zip(row, cands, strict=False):
                for w, color in zip(widths, colors(len(widths)), strict=True):
                    s = (cand == c) & (alpha == a) & (width == w)
                    if s.any():
                        bad = int((r["diverged"] | r["worse"])[s].sum())
                        with np.errstate(over="ignore"), warnings.catch_warnings():
                            warnings.simplefilter("ignore", RuntimeWarning)
                            logband(
                                ax,
                                t,
                                np.where(L[s] < 1e6 * np.nanmax(r["loss_0"][s]), L[s], np.nan),
                                f"d_m = {w}" + (f" ({bad} not trained)" if bad else ""),
                                color,
                            )
                ax.set_yscale("log")
                ax.set_title(f"{CANDIDATE_LABEL[tuple(c.split('-'))]}, τ₀ = d_m^−{a:g}", fontsize=9)
                ax.set_xlabel("epoch")
                ax.legend(fontsize=6)
            ax = row[-1]
            for c, color in zip(cands, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=False):
                s = (cand == c) & (alpha == a)
                ax.plot(
                    widths,
                    [np.nanmedian(r["step_ratio"][s & (width == w)]) for w in widths],
                    "o-",
                    color=color,
                    label=CANDIDATE_LABEL[tuple(c.split("-"))],
                )
            ax.axhline(spec.unstable_at, color="grey", ls=":", lw=1)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("width d_m")
            ax.set_title(f"stability ratio g·λ_max(K₀), τ₀ = d_m^−{a:g} (stable below the dotted line)", fontsize=8)
            ax.legend(fontsize=6)
        fig.suptitle(
            f"{self.id}: γ = {spec.gamma:g} (step_norm = {spec.step_norm}), LeCun, "
            f"N = {cols['data.N'][0]}, {spec.reps * spec.seeds} repeats (geometric mean ×/÷ sd; runs that "
            "blow up are cut)",
            fontsize=9,
        )
        return plots.save(fig, out, "protocol")


EXPERIMENT = register(Protocol())
