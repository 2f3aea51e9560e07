"""The parts of the claims that only ``wu2023-encoder-mnist`` and ``-vit-mnist`` make: the two scalings
τ₀ = d_m^−1/2 and d_m^−1 and their labels, the geometric mean of L_T/L_0, the converge and uniform
verdicts, and why four of the rules are reported rather than judged."""

from __future__ import annotations

import numpy as np

from attnlab import rules
from attnlab.experiments.base import rounded

ALPHAS = (0.5, 1.0)


def geo_mean(x) -> float:
    """exp(mean log x): NaN if any value is not finite and positive."""
    x = np.asarray(x, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.exp(np.mean(np.log(x)))) if len(x) and np.all(np.isfinite(x) & (x > 0)) else np.nan


def converge_verdict(q: dict[str, float], target: float) -> rules.Verdict:
    """q: group label -> geometric mean of L_T/L_0 over its predicted-stable runs."""
    rule = (
        f"at every (init ∈ lecun/he, τ₀, d_m) the geometric mean over its predicted-stable runs of L_T/L_0 ≤ "
        f"{target:g}; fail if any is above it or not finite"
    )
    measured = {"L_T/L_0": {k: rounded(v, 6) for k, v in q.items()}, "target": target}
    if not q:
        return rules.Verdict(rules.INCONCLUSIVE, measured, rule, "no predicted-stable LeCun/He run")
    bad = [k for k, v in q.items() if not (np.isfinite(v) and v <= target)]
    if bad:
        return rules.Verdict(rules.FAIL, measured, rule, f"above the target: {', '.join(bad)}")
    return rules.Verdict(rules.PASS, measured, rule)


def gap_verdict(gap: tuple[float, float, float], tv_gap: float, width: int) -> rules.Verdict:
    diff, lo, hi = gap
    rule = (
        f"d_m = {width}: Welch 95 % interval of attn_tv(α = 1/2) − attn_tv(α = 1) at θ_T lies above {tv_gap:g}; "
        f"fail if it lies below"
    )
    m = {"difference": rounded(diff), "ci95": [rounded(lo), rounded(hi)], "d_m": width}
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return rules.Verdict(rules.INCONCLUSIVE, m, rule, "fewer than 2 unflagged runs per scaling")
    outcome = rules.PASS if lo > tv_gap else rules.FAIL if hi < tv_gap else rules.INCONCLUSIVE
    return rules.Verdict(outcome, m, rule)


def tau_label(a: float) -> str:
    return {1.0: "τ₀ = d_m^−1", 0.5: "τ₀ = d_m^−1/2"}.get(float(a), f"τ₀ = d_m^−{a:g}")


# Why a rule is reported, not judged: the audit of its cpu design (``attnlab audit wu2023-encoder-mnist``,
# 200 simulations at the levels of the cpu run, docs/audit.md) gives it no power or no size.
CONVERGE_WHY = (
    "at the width-normalised step the rate γ_eff·λ_min(K₀)/N falls with width, so the widest nets cannot reach the "
    "target in T epochs even under geometric decay at the theorem's rate (audit power 0.00); the theorem's widths "
    "(≳ N²) lie far beyond the grid, so L_T/L_0 per point is reported"
)
DRIFT_KERNEL_WHY = (
    "3 LeCun repeats at α = 1/2 (He is flagged there) and kernel drifts that are not lazy at d_m ≤ 64 (≈ 3): the "
    "audit gives the rule power 0.60 under a d_m^−1/2 law; the slope is reported"
)
DRIFT_ALPHA_WHY = (
    "the paired sign test over ≤ 18 pairs has power 0.76 against a 2× drift ratio and a false pass up to 0.06 "
    "(audit); the paired differences are reported"
)
LOGITS_WHY = (
    "the narrow nets' logits grow in training (0.22 → 0.68 at d_m = 16), so the θ_T slope under τ₀ = d_m^−1 is "
    "pre-asymptotic at d_m ≤ 256: the audit gives the equivalence rule power 0.13; the slopes are reported"
)
