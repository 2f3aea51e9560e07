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

Every cell shares its data and init draw with the cells that differ from it only in τ₀, the
reduction or the width (``train.draws = common``: the draw is keyed by the data fields, block and
rep; the token norm is a data field, so it draws its own).

Design decision: the unit of replication is the *unit* (block, rep), not the (τ₀, block, rep)
repeat. The two τ₀ of a unit share their data and init, and with unit-norm tokens the logits are
O(‖x‖²/d) = O(1/d) under either scaling, so τ₀ = d_m^−1/2 and d_m^−1 are nearly the same model:
counting them as two repeats doubles the count without doubling the evidence (pseudo-replication;
the first rule's 6 of 6 ordered repeats, p = 0.016, were 3 of 3 units, p = 0.125). The ordering is
therefore judged per unit, the τ₀ of a unit paired (the unit is ordered when each of its τ₀ is),
and the sign test counts units; the cpu scale runs 6 of them. Independent draws per τ₀ would also
do, at the price of the pairing's lower noise.

Linearised dynamics (:mod:`.dynamics`): with K₀ the empirical NTK of the N training samples, the
residual follows r_{t+1} = (I − g K₀) r_t with g = γ/N under mean and g = γ under sum, so a run is
predicted stable while its *stability ratio* g·λ_max(K₀) < 2 (γ·λ_max(K₀)/N under mean,
γ·λ_max(K₀) under sum: N = 100 times larger) and converges at the rate set by g·λ_min(K₀). Under
LeCun init K₀ grows ∝ d_m, so at a fixed γ the ratio grows ∝ d_m: the step is stable only up to
some width, and below it wider nets converge faster (panel (a)'s ordering) when λ_min(K₀) grows
with d_m. The ratio of every run is recorded (from the step-0 probe of λ_max(K₀)).

Claims (thresholds are Spec fields; the first rules were fixed before the cpu run, the ordering
and protocol rules below changed after it: pairing and the width range, dated in the ledger):
  stability   as wu2023-fig1 (:func:`.analysis.stability_verdict`): every run with ratio < 2 neither
              diverged nor ended above L_0 (pass), any such run not training → fail; descriptive
              when fewer than 3 runs lie at ratios in [1, 2) (a bound half as large predicts the
              same runs). H1: bound 2 (catapults to 6); H0: bound 1.
  ordering-<reduction>-<token_norm>  (one per candidate normalisation)
              the paper's width ordering at a fixed γ, stated for the widths where it can hold: W,
              the widths at which every run of the candidate (both τ₀) is predicted stable (ratio
              < ``unstable_at``), named in the claim with the width d_lim at which the ratio,
              fitted ∝ d_m^b, reaches ``unstable_at`` (½·mean with unit tokens: W = 16 … 1024 at
              cpu scale, d_lim ≈ 1.5·10³); the cells past the limit are reported, not pooled. Per
              unit (block, rep) and τ₀ over W: Kendall's τ_b between d_m and the speed v =
              −log(L_T/L_0) (a diverged run or one ending at or above L_0 ranks slowest); the unit
              is *ordered* when τ_b ≥ ``tau_min`` (2/3: with 4 widths, at most one pair out of
              order; with 3, none) for each of its τ₀. pass: a one-sided sign test over the units
              that more than half are ordered, p < ``level`` (0.05; 6 of 6 units: p = 0.016); fail:
              at most half are; else inconclusive. *Descriptive* when W has fewer than
              ``min_widths`` (3) widths (the step alone then decides the ordering: the wide nets
              cannot train). H1: λ_min(K₀) ∝ d_m (the theorem's LeCun kernel), so the rate
              g·λ_min(K₀) grows with the width; H0: λ_min(K₀) flat in d_m, the width without effect
              on the rate at a fixed γ (a random order per unit).
  protocol    descriptive, "protocol (normalisation assumed)": which candidates reproduce the
              published setting over the widths W of their ordering claim — every run there trains
              (not diverged, L_T < L_0) and the ordering claim passes — each named with W and its
              stability limit (the conclusion depends on the width grid: past d_lim γ = 1 diverges,
              so at paper scale, widths to 4096, the widest cells of ½·mean with unit tokens lie
              past it and are reported beside the claim, not pooled into it). The paper does
              not state its normalisation, so this is a measurement conditional on the candidates
              assumed, not a test of the theorem.

Measured at cpu scale (d_m = 16, 64, 256, 1024; 3 units, before they were 6; ``results/wu2023-fig1-protocol-cpu``,
5.0 min on 2 cores): the stability ratio at d_m = 16 → 1024 (medians)
  ½·mean, ‖x‖² ≈ d   0.74, 2.8, 10.2, 41 (τ₀ = d_m^−1/2); 0.42, 1.46, 5.3, 21 (d_m^−1): trains at
                     d_m = 16 and 64 (the three d_m^−1/2 runs at 2.8 catapult and recover), diverges
                     from 256 on; ordering descriptive (one or two predicted-stable widths)
  ½·mean, ‖x‖ = 1    0.024, 0.086, 0.34, 1.33 under either τ₀ (unit tokens erase the scalings'
                     difference, the sheet's pitfall): every run trains, L_T/L_0 = 0.095, 0.040,
                     0.011, 0.0030 — ordering pass under the first rule (Kendall τ_b = 1 in 6 of
                     6 (τ₀, block, rep) repeats, p = 0.016; as units, 3 of 3, p = 0.125: see the
                     design decision above, the reason the cpu scale now runs 6 units)
  ½·sum, ‖x‖² ≈ d    74 … 4.2·10³: every run diverges; ordering descriptive
  ½·sum, ‖x‖ = 1     2.4 … 1.3·10² (N = 100 times the mean's): every run diverges; descriptive
Stability: 33 of 33 runs below ratio 2 train, 9 of them in [1, 2): pass. Protocol: only ½·mean
with unit-norm tokens reproduces the published setting, at d_m ≤ 1024 (γ = 1 stable to d_m ≈ 1.5·10³,
wider nets faster); its λ_min(K₀) grows ∝ d_m^0.99 and its loss decays faster than λ_min(K₀) alone allows (the
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
CPU = dict(model={"d_m": [16, 64, 256, 1024]}, reps=6)  # 6 independent units: 6 of 6 ordered has p = 0.016
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


def stability_limit(width, ratio, unstable_at: float) -> float | None:
    """The width at which the ratio, fitted as ∝ d_m^b over the runs given (log–log least squares),
    reaches ``unstable_at`` (None without a rising fit)."""
    width, ratio = np.asarray(width, float), np.asarray(ratio, float)
    s = np.isfinite(ratio) & (ratio > 0)
    if len(np.unique(width[s])) < 2:
        return None
    b, a = np.polyfit(np.log(width[s]), np.log(ratio[s]), 1)
    return float(np.exp((np.log(unstable_at) - a) / b)) if b > 0 else None


def ordering_verdict(
    width, v, alpha, unit, eligible, tau_min: float, min_widths: int, level: float, why_none: str
) -> rules.Verdict:
    """The width ordering over *independent units*. A unit is one (block, rep): the cells that
    differ only in τ₀ share their data and init draws (``train.draws = common``), so the two τ₀ of
    a unit are a pair, not two repeats. Per unit and τ₀ (among the ``eligible`` runs, ≥
    ``min_widths`` widths), Kendall's τ_b between d_m and v; the unit is *ordered* when every τ₀ in
    it is (τ_b ≥ ``tau_min``). A one-sided sign test over the units that more than half are
    ordered, p < level (pass), at most half (fail); descriptive without such a unit."""
    rule = (
        f"per unit (block, rep: the τ₀ of a unit share their draws, a pair) and τ₀, over the widths at which every "
        f"run is predicted stable (≥ {min_widths}), Kendall's τ_b(d_m, −log(L_T/L_0)) ≥ {tau_min:.3g} (a run not "
        "training ranks slowest); a unit is ordered when each of its τ₀ is; one-sided sign test over units that "
        f"more than half are ordered, p < {level:g}; fail if at most half are"
    )
    taus: dict[str, dict[str, float]] = {}
    for u in np.unique(unit[eligible]):
        for a in np.unique(alpha[eligible & (unit == u)]):
            s = eligible & (unit == u) & (alpha == a)
            if len(np.unique(width[s])) >= min_widths:
                taus.setdefault(str(u), {})[f"d_m^-{a:g}"] = kendall(width[s], v[s])
    ordered = {u: all(np.isfinite(t) and t >= tau_min for t in ts.values()) for u, ts in taus.items()}
    measured = {
        "units": len(taus),
        "ordered": int(sum(ordered.values())),
        "kendall_tau": {u: {a: rounded(t, 3) for a, t in ts.items()} for u, ts in taus.items()},
    }
    if not taus:
        return rules.Verdict(rules.DESCRIPTIVE, measured, rule, why_none)
    st = rules.sign_test([1.0 if o else -1.0 for o in ordered.values()], alpha=level, name="ordered unit")
    return rules.Verdict(st.outcome, measured | {"p_value": st.measured["p_value"]}, rule, st.detail)


def width_range(widths: list[int]) -> str:
    return f"d_m = {widths[0]} … {widths[-1]}" if len(widths) > 1 else f"d_m = {widths[0]}" if widths else "no width"


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
        unit = np.array([f"{b}/{p}" for b, p in zip(cols["block"], cols["rep"], strict=True)])
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
            # the widths judged: those at which every run of the candidate (both τ₀) is predicted stable
            with np.errstate(invalid="ignore"):
                W = [
                    int(w) for w in np.unique(width[s]) if np.all(r["step_ratio"][s & (width == w)] < spec.unstable_at)
                ]
                top = float(np.nanmax(r["step_ratio"][s]))
            # the smallest over τ₀ of the width at which the ratio, fitted ∝ d_m^b, reaches the bound
            limits = [
                stability_limit(width[g], r["step_ratio"][g], spec.unstable_at)
                for g in (s & (alpha == x) for x in ALPHAS)
            ]
            limit = min((x for x in limits if x), default=None)
            judged = len(W) >= spec.min_widths
            eligible = s & np.isin(width, W) if judged else np.zeros(len(s), bool)
            beyond = [int(w) for w in np.unique(width[s]) if w not in W]
            why = (
                f"under {label} the step ratio reaches {spec.unstable_at:g} from d_m = {min(beyond) if beyond else '—'} "
                f"on (max {top:.3g}): fewer than {spec.min_widths} widths at which every run is predicted stable, so "
                "the step alone decides the ordering (the wide nets cannot train)"
            )
            ver = ordering_verdict(width, v, alpha, unit, eligible, spec.tau_min, spec.min_widths, spec.level, why)
            past = {}
            for w in beyond:  # cells past the stability limit: reported, not pooled
                g = s & (width == w)
                with np.errstate(divide="ignore", invalid="ignore"):
                    q = r["loss_T"][g] / r["loss_0"][g]
                past[w] = {
                    "ratio (median)": med(r["step_ratio"][g]),
                    "trained": f"{int(trained[g].sum())}/{int(g.sum())}",
                }
                past[w]["L_T/L_0 (median)"] = med(q)
            lim = f"{limit:.3g}" if limit else "—"
            ver = rules.Verdict(
                ver.outcome,
                ver.measured
                | {"widths": W, "stable to d_m ≈": rounded(limit) if limit else None}
                | {"past the stability limit (reported, not pooled)": past},
                ver.rule,
                ver.detail,
            )
            where = (
                f"over {width_range(W)} (the widths at which every run is predicted stable; γ = {spec.gamma:g} is "
                f"stable to d_m ≈ {lim} here)"
                if judged
                else f"(fewer than {spec.min_widths} widths stable at γ = {spec.gamma:g} here)"
            )
            claims.append(
                Claim.of(
                    f"ordering-{c}",
                    f"{label}: at γ = {spec.gamma:g} wider nets converge faster {where} (the loss curves ordered by "
                    "width, panel (a))",
                    ver,
                )
            )
            per_cand[c] = {
                "label": label,
                "max ratio": rounded(top),
                "trains at every width": bool(trained[s].all()),
                "predicted stable at every width": bool(np.all(r["step_ratio"][s] < spec.unstable_at)),
                "predicted-stable widths per τ₀": {f"d_m^-{a:g}": ok_w[(c, a)] for a in ALPHAS if (c, a) in ok_w},
                "widths judged": W,
                "stable to d_m ≈": rounded(limit) if limit else None,
                "trains at every judged width": bool(judged and trained[eligible].all()),
                "past the stability limit (reported, not pooled)": past,
                "ordering": ver.outcome,
            }
            per_cand[c]["reproduces"] = per_cand[c]["trains at every judged width"] and ver.outcome == rules.PASS
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
        good = [c for c in per_cand if per_cand[c]["reproduces"]]
        verdict = rules.Verdict(
            rules.DESCRIPTIVE,
            {"reproduced by": [per_cand[c]["label"] for c in good], "candidates": per_cand},
            "a candidate reproduces the published setting over the widths at which every one of its runs is predicted "
            "stable (≥ min_widths) when every run there trains and its ordering claim passes; the widths past its "
            "stability limit are reported, not pooled",
            NOT_STATED,
        )
        said = [
            f"{per_cand[c]['label']} (over {width_range(per_cand[c]['widths judged'])}; γ = {spec.gamma:g} stable to "
            f"d_m ≈ {per_cand[c]['stable to d_m ≈'] or '—'})"
            for c in good
        ]
        claims.append(
            Claim.of(
                "protocol",
                f"protocol (normalisation assumed): the published setting (γ = {spec.gamma:g} at several widths, every "
                f"width trains, wider nets faster) is reproduced by the candidate(s) {', '.join(said) or 'none'}",
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
