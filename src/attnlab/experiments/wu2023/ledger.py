"""Wu et al. 2023: the theorem map (each result and the claims that test it) and every claim's
rule history (:mod:`attnlab.ledger`).

The paper sheet numbers no theorem; "Thm 1" is the global-convergence theorem as the experiments
cite it. Its width condition (d_m ≳ N², cubic with d ≥ N in a follow-up's reading for τ₀ = d_m^−1/2)
is *sufficient*: a smaller measured width, or linear convergence below it, cannot refute it, and
no trained run here is in its regime (N = 100 needs d_m ≥ 10⁴). Such proxies do not ``refute``.
"""

from __future__ import annotations

from attnlab.ledger import CHECK, DIRECT, MEASUREMENT, PREDICTION, PROXY, Paper, Result, Test, rule
from attnlab.parts import register

BELOW = "widths below N² (outside the theorem's regime): consistent with a sufficient condition, cannot test it"
STEP = "with a step normalised per width (γ·16/d_m)"

# --------------------------------------------------------------------------- rule histories
# (date, what the rule became, why, whether results of the id had been seen, commit)

FIG1 = {
    "linear": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: per unflagged run ρ of log L_t = a + b·t on epochs ≥ fit_from (0.1)·T up to the last new low above floor·L_0; pass if every ρ < 1 and median R² ≥ 0.9",
            "first committed rule",
            True,
            "13d3988",
        ),
        (
            "2026-12-04",
            "per run: log LR of ρ^t over t^−q ≥ log 32 and −log ρ ≥ rate_share (½)·(−log ρ_lin of the slowest K_t); one-sided sign test that > half are linear (p < 0.05); fail if ≤ half",
            "audit: R² rule false pass 1.0 (1/(1 + t/10) passed)",
            True,
            "da32148",
        ),
    ),
    "stability": rule(
        CHECK,
        (
            "2026-12-03",
            "introduced: share of runs with γ_eff·λ_max(K₀)/N < 2 that neither diverged nor ended above L_0 ≥ 1.0",
            "first rule",
            False,
            "13d3988",
        ),
        (
            "2026-12-04",
            "a pass is descriptive when fewer than 3 runs lie at ratio ≥ unstable_at/2 (cpu: descriptive)",
            "audit false pass 1.0 (a bound of 1 predicts the same runs)",
            True,
            "da32148",
        ),
    ),
    "drift-kernel": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: t CI over repeats of the log–log slope of ‖K_T − K_0‖_F/‖K_0‖_F vs d_m below 0; fail above",
            "first rule",
            False,
            "13d3988",
        ),
        (
            "2026-12-04",
            "CI must lie below drift_bound −0.15",
            "sign-only rule passed H0 (slope −0.1) 19–39%; −0.15 picked by the audit",
            True,
            "da32148",
        ),
    ),
    "drift-weight": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: t CI over repeats of the log–log slope of ‖θ_T − θ₀‖/‖θ₀‖ vs d_m below 0; fail above",
            "first rule",
            False,
            "13d3988",
        ),
        (
            "2026-12-04",
            "CI must lie below drift_bound −0.15",
            "sign-only rule passed H0 (slope −0.1) 19–39%; −0.15 picked by the audit",
            True,
            "da32148",
        ),
    ),
}

FIG9 = {
    "linear": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: per unflagged run ρ of log L_t = a + b·t on epochs ≥ fit_from (0.1)·T up to the last new low above floor·L_0; pass if every ρ < 1 and median R² ≥ 0.9",
            "first committed rule",
            True,
            "13d3988",
        ),
        (
            "2026-12-04",
            "per run: log LR of ρ^t over t^−q ≥ log 32 and −log ρ ≥ rate_share (½)·(−log ρ_lin of the slowest K_t); one-sided sign test that > half are linear (p < 0.05); fail if ≤ half",
            "audit: R² rule false pass 1.0 (1/(1 + t/10) passed)",
            True,
            "da32148",
        ),
    ),
    "stability": rule(
        CHECK,
        (
            "2026-12-03",
            "introduced: share of runs with γ_eff·λ_max(K₀)/N < 2 that neither diverged nor ended above L_0 ≥ 1.0",
            "first rule",
            False,
            "13d3988",
        ),
        (
            "2026-12-04",
            "a pass is descriptive when fewer than 3 runs lie at ratio ≥ unstable_at/2 (cpu: descriptive)",
            "audit false pass 1.0 (a bound of 1 predicts the same runs)",
            True,
            "da32148",
        ),
    ),
    "drift-kernel": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: t CI over repeats of the log–log slope of ‖K_T − K_0‖_F/‖K_0‖_F vs d_m below 0; fail above",
            "first rule",
            False,
            "13d3988",
        ),
        (
            "2026-12-04",
            "CI must lie below drift_bound −0.15",
            "sign-only rule passed H0 (slope −0.1) 19–39%; −0.15 picked by the audit",
            True,
            "da32148",
        ),
    ),
    "drift-weight": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: t CI over repeats of the log–log slope of ‖θ_T − θ₀‖/‖θ₀‖ vs d_m below 0; fail above",
            "first rule",
            False,
            "13d3988",
        ),
        (
            "2026-12-04",
            "CI must lie below drift_bound −0.15",
            "sign-only rule passed H0 (slope −0.1) 19–39%; −0.15 picked by the audit",
            True,
            "da32148",
        ),
    ),
}

INIT = {
    "lmin-lecun": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: log–log slope of λ_min(K₀) (whole kernel) vs d_m over widths ≥ slope_from = N, t CI inside lmin_margin [0.7, 1.3]",
            "first rule",
            False,
            "13d3988",
        ),
        (
            "2026-12-05",
            "statistic moved to λ_min of the w_O block K₀^{w_O}, fitted from widths ≥ 10N (cpu widths to 4096); descriptive with < 2 such widths; whole-kernel slope only reported",
            "the whole kernel's slope was pre-asymptotic (width-independent QKV part)",
            True,
            "48155e0",
        ),
    ),
    "lmin-he": rule(
        CHECK,
        (
            "2026-12-03",
            "introduced: log–log slope of λ_min(K₀) (whole kernel) vs d_m over widths ≥ slope_from = N, t CI inside lmin_margin [0.7, 1.3]",
            "first rule",
            False,
            "13d3988",
        ),
        (
            "2026-12-05",
            "statistic moved to λ_min of the w_O block K₀^{w_O}, fitted from widths ≥ 10N (cpu widths to 4096); descriptive with < 2 such widths; whole-kernel slope only reported",
            "the whole kernel's slope was pre-asymptotic (width-independent QKV part)",
            True,
            "48155e0",
        ),
    ),
    "lmin-ntk": rule(
        CHECK,
        (
            "2026-12-03",
            "introduced: λ_min(K₀) slope from N inside flat_margin [−0.3, 0.3]",
            "first rule",
            False,
            "13d3988",
        ),
        ("2026-12-05", "w_O block from 10N (as lmin-lecun)", "pre-asymptotic whole-kernel slope", True, "48155e0"),
        (
            "2026-12-05",
            "flat_margin ±0.3 → ±0.5 ('midway to ∝ d_m')",
            "audit power 0.79 with ±0.3 at the init cpu design",
            True,
            "a296cba",
        ),
    ),
    "speed-gamma": rule(
        CHECK,
        (
            "2026-12-03",
            "introduced: paired one-sided sign tests ntk − lecun/he of log(L_T/L_0) > 0 at one γ, both must pass",
            "first rule",
            False,
            "13d3988",
        ),
        (
            "2026-12-04",
            "descriptive (sign-test outcome reported)",
            "audit: a constant kernel factor alone passes it (false pass 1.0)",
            True,
            "da32148",
        ),
    ),
    "speed-ratio": rule(
        MEASUREMENT,
        ("2026-12-03", "introduced: the same sign tests at equal γ·λ_max(K₀)/N = c", "first rule", False, "13d3988"),
        (
            "2026-12-05",
            "descriptive",
            "no prediction of the theory at one step ratio; audit power 0.005",
            True,
            "48155e0",
        ),
    ),
    "stability": rule(
        CHECK,
        ("2026-12-03", "introduced: as wu2023-fig1's over both comparisons", "first rule", False, "13d3988"),
        (
            "2026-12-04",
            "descriptive cut-off (< 3 runs in [1, 2)) added by the shared stability_verdict (init stays judged: 21 runs in [1, 2))",
            "shared repair",
            True,
            "da32148",
        ),
    ),
}

WIDTH = {
    "quadratic-a0.5": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: smallest width reaching 10⁻³ of L_0, crossing fit d_c ∝ N^k over crossed columns; CI of k below 2 passes, above fails",
            "first rule",
            False,
            "26625bc",
        ),
        (
            "2026-12-05",
            "redesigned: lazy width (peak relative kernel drift ≤ 0.1) per repeat, interval-censored line fit (profile-likelihood CI); CI of k below 2.5 (k + k_split) passes, above fails",
            "audit false pass 1.0; issue 17: old design undecidable",
            True,
            "c5ea879",
        ),
        (
            "2026-12-05",
            "descriptive (rule outcome kept) unless judge_bounds=true",
            "audit with the cpu run's noise: power 0.27–0.34",
            True,
            "425e1d9",
        ),
    ),
    "cubic-a0.5": rule(
        MEASUREMENT,
        (
            "2026-12-03",
            "introduced: smallest width reaching 10⁻³ of L_0, crossing fit d_c ∝ N^k over crossed columns; CI of k below 3 passes, above fails",
            "first rule",
            False,
            "26625bc",
        ),
        (
            "2026-12-05",
            "redesigned: lazy width (peak relative kernel drift ≤ 0.1) per repeat, interval-censored line fit (profile-likelihood CI); CI of k below 3.5 (k + k_split) passes, above fails",
            "audit false pass 1.0; issue 17: old design undecidable",
            True,
            "c5ea879",
        ),
        (
            "2026-12-05",
            "descriptive (rule outcome kept) unless judge_bounds=true",
            "audit with the cpu run's noise: power 0.27–0.34",
            True,
            "425e1d9",
        ),
    ),
    "quadratic-a1": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: smallest width reaching 10⁻³ of L_0, crossing fit d_c ∝ N^k over crossed columns; CI of k below 2 passes, above fails",
            "first rule",
            False,
            "26625bc",
        ),
        (
            "2026-12-05",
            "redesigned: lazy width (peak relative kernel drift ≤ 0.1) per repeat, interval-censored line fit (profile-likelihood CI); CI of k below 2.5 (k + k_split) passes, above fails",
            "audit false pass 1.0; issue 17: old design undecidable",
            True,
            "c5ea879",
        ),
        (
            "2026-12-05",
            "descriptive (rule outcome kept) unless judge_bounds=true",
            "audit with the cpu run's noise: power 0.27–0.34",
            True,
            "425e1d9",
        ),
    ),
    "exponent-a0.5": rule(
        MEASUREMENT,
        (
            "2026-12-05",
            "introduced (descriptive): k of the lazy width with its CI and the laws it excludes",
            "redesign of issue 17",
            True,
            "c5ea879",
        ),
    ),
    "exponent-a1": rule(
        MEASUREMENT,
        (
            "2026-12-05",
            "introduced (descriptive): k of the lazy width with its CI and the laws it excludes",
            "redesign of issue 17",
            True,
            "c5ea879",
        ),
    ),
    "target-width-a0.5": rule(
        MEASUREMENT,
        (
            "2026-12-05",
            "introduced (descriptive): exponent of the loss-target width in the epoch budget",
            "redesign of issue 17",
            True,
            "c5ea879",
        ),
    ),
    "target-width-a1": rule(
        MEASUREMENT,
        (
            "2026-12-05",
            "introduced (descriptive): exponent of the loss-target width in the epoch budget",
            "redesign of issue 17",
            True,
            "c5ea879",
        ),
    ),
}

NTK_LIMIT = {
    "limit": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced (unchanged since): α = 1: bootstrap CI of the error's log–log slope < 0 and the error's t CI at the largest width < tol 0.05",
            "first rule",
            False,
            "26625bc",
        ),
    ),
    "logits-a1": rule(
        CHECK,
        (
            "2026-12-03",
            "introduced (unchanged since): slope of log logit_std vs log d_m inside [−0.7, −0.3]",
            "first rule",
            False,
            "26625bc",
        ),
    ),
    "logits-a0.5": rule(
        CHECK,
        ("2026-12-03", "introduced (unchanged since): slope inside [−0.15, 0.15]", "first rule", False, "26625bc"),
    ),
    "pitfall": rule(
        CHECK,
        (
            "2026-12-03",
            "introduced (unchanged since): unit tokens: attn_tv(α = ½) CI < 0.05; ‖x‖² ≈ d: Welch CI of the TV gap > 0.1",
            "first rule",
            False,
            "26625bc",
        ),
    ),
    "alpha-half": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: α = ½: at the largest width the error's CI above tol 0.05 passes, below fails",
            "first rule",
            False,
            "26625bc",
        ),
        (
            "2026-12-04",
            "also requires the slope of log error vs log d_m inside ±flat_band 0.15 (no_effect); slope outside the band fails",
            "audit: the old rule could not fail (an error of 0.94 still decaying passed)",
            True,
            "d3f84b0",
        ),
    ),
}

DATA_GRAM = {
    "floor-input": rule(
        MEASUREMENT,
        (
            "2026-12-03",
            "introduced: at the largest N, t CI of ρ = λ_min/λ̄ above floor 10⁻³ for every d",
            "first rule",
            False,
            "b1d65f8",
        ),
        (
            "2026-12-04",
            "against i.i.d. Gaussian tokens of the same shape: t CI of log(ρ/ρ_gauss) above log gauss_margin (1.5) passes; below 0 (or singular) fails; ρ_gauss = geometric mean of 4 seeded draws",
            "audit: the fixed floor passed Gaussian tokens (false pass 1.0)",
            True,
            "da32148",
        ),
    ),
    "trend-input": rule(
        MEASUREMENT,
        (
            "2026-12-03",
            "introduced: slope of log ρ vs log N above −slope_tol (−0.1) for every d",
            "first rule",
            False,
            "b1d65f8",
        ),
        (
            "2026-12-04",
            "descriptive (slope reported)",
            "any i.i.d. sample's ρ falls with N (audit false fail 1.0)",
            True,
            "da32148",
        ),
    ),
    "floor-relu": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: at the largest N, t CI of ρ = λ_min/λ̄ above floor 10⁻³ for every d",
            "first rule",
            False,
            "b1d65f8",
        ),
        (
            "2026-12-04",
            "against i.i.d. Gaussian tokens of the same shape: t CI of log(ρ/ρ_gauss) above log gauss_margin (1.5) passes; below 0 (or singular) fails; ρ_gauss = geometric mean of 4 seeded draws",
            "audit: the fixed floor passed Gaussian tokens (false pass 1.0)",
            True,
            "da32148",
        ),
    ),
    "trend-relu": rule(
        MEASUREMENT,
        (
            "2026-12-03",
            "introduced: slope of log ρ vs log N above −slope_tol (−0.1) for every d",
            "first rule",
            False,
            "b1d65f8",
        ),
        (
            "2026-12-04",
            "descriptive (slope reported)",
            "any i.i.d. sample's ρ falls with N (audit false fail 1.0)",
            True,
            "da32148",
        ),
    ),
}

FIG1_PROTOCOL = {
    "stability": rule(
        CHECK,
        (
            "2026-12-04",
            "introduced (unchanged since): shared stability_verdict (share stable among ratio < 2, descriptive with < 3 runs in [1, 2))",
            "first rule",
            False,
            "ee407a1",
        ),
    ),
    "ordering-mean-d": rule(
        MEASUREMENT,
        (
            "2026-12-04",
            "introduced (unchanged since): per repeat Kendall τ_b(d_m, −log L_T/L_0) ≥ 2/3 over ≥ 3 stable widths; sign test > half ordered, p < 0.05; descriptive with < 3 stable widths",
            "first rule",
            False,
            "ee407a1",
        ),
    ),
    "ordering-mean-unit": rule(
        PREDICTION,
        (
            "2026-12-04",
            "introduced (unchanged since): per repeat Kendall τ_b(d_m, −log L_T/L_0) ≥ 2/3 over ≥ 3 stable widths; sign test > half ordered, p < 0.05; descriptive with < 3 stable widths",
            "first rule",
            False,
            "ee407a1",
        ),
    ),
    "ordering-sum-d": rule(
        MEASUREMENT,
        (
            "2026-12-04",
            "introduced (unchanged since): per repeat Kendall τ_b(d_m, −log L_T/L_0) ≥ 2/3 over ≥ 3 stable widths; sign test > half ordered, p < 0.05; descriptive with < 3 stable widths",
            "first rule",
            False,
            "ee407a1",
        ),
    ),
    "ordering-sum-unit": rule(
        MEASUREMENT,
        (
            "2026-12-04",
            "introduced (unchanged since): per repeat Kendall τ_b(d_m, −log L_T/L_0) ≥ 2/3 over ≥ 3 stable widths; sign test > half ordered, p < 0.05; descriptive with < 3 stable widths",
            "first rule",
            False,
            "ee407a1",
        ),
    ),
    "protocol": rule(
        MEASUREMENT,
        (
            "2026-12-04",
            "introduced (unchanged since): descriptive: which normalisation candidates train at every width and pass their ordering claim",
            "first rule",
            False,
            "ee407a1",
        ),
    ),
}

SCALING = {
    "faster-synthetic": rule(
        PREDICTION,
        (
            "2026-12-04",
            "introduced (unchanged since): paired D = log(L_T/L_0)(d_m^−1) − log(L_T/L_0)(d_m^−1/2) > 0, one-sided sign test p < level 0.01; fail if ≤ half",
            "first rule",
            False,
            "ee407a1",
        ),
    ),
    "faster-mnist": rule(
        PREDICTION,
        (
            "2026-12-04",
            "introduced (unchanged since): paired D = log(L_T/L_0)(d_m^−1) − log(L_T/L_0)(d_m^−1/2) > 0, one-sided sign test p < level 0.01; fail if ≤ half",
            "first rule",
            False,
            "ee407a1",
        ),
    ),
}

ENCODER_MNIST = {
    "converge": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: geometric mean of L_T/L_0 over predicted-stable LeCun/He runs ≤ target 0.1 at every (init, τ₀, d_m)",
            "first rule",
            False,
            "b1d65f8",
        ),
        ("2026-12-05", "descriptive (rule outcome kept)", "audit power 0.00", True, "48155e0"),
    ),
    "linear": rule(
        PREDICTION,
        ("2026-12-03", "introduced: as wu2023-fig1 v1 (every ρ < 1, median R² ≥ 0.9)", "first rule", False, "b1d65f8"),
        (
            "2026-12-04",
            "as wu2023-fig1 v2 (likelihood + rate_share ½ + sign test)",
            "shared repair (audit)",
            True,
            "da32148",
        ),
    ),
    "stability": rule(
        CHECK,
        (
            "2026-12-03",
            "introduced: share of predicted-stable runs that train stably ≥ 1.0",
            "first rule",
            False,
            "b1d65f8",
        ),
        (
            "2026-12-04",
            "descriptive cut-off (< 3 runs in [1, 2)) via the shared stability_verdict",
            "shared repair",
            True,
            "da32148",
        ),
    ),
    "drift-kernel": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: per τ₀ t CI of the drift slope vs d_m below 0, both τ₀ must pass",
            "first rule",
            False,
            "b1d65f8",
        ),
        (
            "2026-12-05",
            "bound 0 → spec.drift_bound −0.15 and descriptive (rule outcome kept)",
            "audit power 0.60 (3 LeCun repeats, not lazy at d_m ≤ 64)",
            True,
            "48155e0",
        ),
    ),
    "drift-weight": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: per τ₀ t CI of the weight-drift slope vs d_m below 0",
            "first rule",
            False,
            "b1d65f8",
        ),
        (
            "2026-12-05",
            "bound 0 → drift_bound −0.15 (inherited from dynamics.Spec, now passed to below_zero)",
            "align with fig1's repaired drift rule",
            True,
            "48155e0",
        ),
    ),
    "drift-alpha": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: paired sign test drift(α = ½) − drift(α = 1) > 0, p < 0.05",
            "first rule",
            False,
            "b1d65f8",
        ),
        ("2026-12-05", "descriptive", "audit power 0.76, false pass up to 0.06", True, "48155e0"),
    ),
    "logits": rule(
        CHECK,
        (
            "2026-12-03",
            "introduced: logit-std slope inside [−0.7, −0.3] (α = 1) and [−0.15, 0.15] (α = ½), both must pass",
            "first rule",
            False,
            "b1d65f8",
        ),
        ("2026-12-05", "descriptive", "audit power 0.13 (pre-asymptotic θ_T slope)", True, "48155e0"),
    ),
    "uniform": rule(
        CHECK,
        (
            "2026-12-03",
            "introduced: Welch CI of attn_tv(α = ½) − attn_tv(α = 1) at the largest width above tv_gap 0.1",
            "first rule",
            False,
            "b1d65f8",
        ),
    ),
    "speed-gamma": rule(
        CHECK,
        (
            "2026-12-03",
            "introduced: paired sign tests ntk − lecun/he at one raw step, both must pass",
            "first rule",
            False,
            "b1d65f8",
        ),
        ("2026-12-05", "descriptive", "a constant kernel factor alone passes it (as wu2023-init)", True, "48155e0"),
    ),
    "lmin-lecun": rule(
        PREDICTION,
        (
            "2026-12-03",
            "introduced: slope of λ_min(K₀) (whole kernel) vs d_m over every width, both scalings, inside [0.7, 1.3]",
            "first rule",
            True,
            "b1d65f8",
        ),
        (
            "2026-12-05",
            "λ_min of the w_O block fitted from widths ≥ 10N (0-step kernel cells at 1024–4096 from 09ef6db); descriptive with < 2 such widths",
            "below N the block's λ_min is exactly 0; slopes from d_m = 16 were biased low",
            True,
            "48155e0",
        ),
    ),
    "lmin-he": rule(
        CHECK,
        (
            "2026-12-03",
            "introduced: slope of λ_min(K₀) (whole kernel) vs d_m over every width, both scalings, inside [0.7, 1.3]",
            "first rule",
            True,
            "b1d65f8",
        ),
        (
            "2026-12-05",
            "λ_min of the w_O block fitted from widths ≥ 10N (0-step kernel cells at 1024–4096 from 09ef6db); descriptive with < 2 such widths",
            "below N the block's λ_min is exactly 0; slopes from d_m = 16 were biased low",
            True,
            "48155e0",
        ),
    ),
    "lmin-ntk": rule(
        CHECK,
        (
            "2026-12-03",
            "introduced: slope of λ_min(K₀) (whole kernel) vs d_m over every width, both scalings, inside [−0.3, 0.3]",
            "first rule",
            True,
            "b1d65f8",
        ),
        (
            "2026-12-05",
            "λ_min of the w_O block fitted from widths ≥ 10N (0-step kernel cells at 1024–4096 from 09ef6db); descriptive with < 2 such widths",
            "below N the block's λ_min is exactly 0; slopes from d_m = 16 were biased low",
            True,
            "48155e0",
        ),
        ("2026-12-05", "flat_margin ±0.3 → ±0.5", "init audit power 0.79 with ±0.3", True, "a296cba"),
    ),
}

VIT_MNIST = {
    "converge": rule(
        PREDICTION,
        (
            "2026-12-05",
            "introduced: the encoder's rule as of 48155e0 with D for d_m (descriptive, reason strings quote the encoder's audit)",
            "new experiment on the encoder's rules",
            True,
            "fe72ce8",
        ),
    ),
    "linear": rule(
        PREDICTION,
        (
            "2026-12-05",
            "introduced: the encoder's rule as of 48155e0 with D for d_m",
            "new experiment on the encoder's rules",
            True,
            "fe72ce8",
        ),
    ),
    "stability": rule(
        CHECK,
        (
            "2026-12-05",
            "introduced: the encoder's rule as of 48155e0 with D for d_m",
            "new experiment on the encoder's rules",
            True,
            "fe72ce8",
        ),
    ),
    "drift-kernel": rule(
        PREDICTION,
        (
            "2026-12-05",
            "introduced: the encoder's rule as of 48155e0 with D for d_m (descriptive, reason strings quote the encoder's audit)",
            "new experiment on the encoder's rules",
            True,
            "fe72ce8",
        ),
    ),
    "drift-weight": rule(
        PREDICTION,
        (
            "2026-12-05",
            "introduced: the encoder's rule as of 48155e0 with D for d_m",
            "new experiment on the encoder's rules",
            True,
            "fe72ce8",
        ),
    ),
    "drift-alpha": rule(
        PREDICTION,
        (
            "2026-12-05",
            "introduced: the encoder's rule as of 48155e0 with D for d_m (descriptive, reason strings quote the encoder's audit)",
            "new experiment on the encoder's rules",
            True,
            "fe72ce8",
        ),
    ),
    "logits": rule(
        CHECK,
        (
            "2026-12-05",
            "introduced: the encoder's rule as of 48155e0 with D for d_m (descriptive, reason strings quote the encoder's audit)",
            "new experiment on the encoder's rules",
            True,
            "fe72ce8",
        ),
    ),
    "uniform": rule(
        CHECK,
        (
            "2026-12-05",
            "introduced: the encoder's rule as of 48155e0 with D for d_m",
            "new experiment on the encoder's rules",
            True,
            "fe72ce8",
        ),
    ),
    "speed-gamma": rule(
        CHECK,
        (
            "2026-12-05",
            "introduced: the encoder's rule as of 48155e0 with D for d_m (descriptive, reason strings quote the encoder's audit)",
            "new experiment on the encoder's rules",
            True,
            "fe72ce8",
        ),
    ),
    "lmin-lecun": rule(
        MEASUREMENT,
        (
            "2026-12-05",
            "introduced: the encoder's rule as of 48155e0 with D for d_m (λ_min of the head block w_head from D ≥ 10N; descriptive at cpu scale)",
            "new experiment on the encoder's rules",
            True,
            "fe72ce8",
        ),
    ),
    "lmin-he": rule(
        MEASUREMENT,
        (
            "2026-12-05",
            "introduced: the encoder's rule as of 48155e0 with D for d_m (λ_min of the head block w_head from D ≥ 10N; descriptive at cpu scale)",
            "new experiment on the encoder's rules",
            True,
            "fe72ce8",
        ),
    ),
    "lmin-ntk": rule(
        MEASUREMENT,
        (
            "2026-12-05",
            "introduced: the encoder's rule as of 48155e0 with D for d_m (λ_min of the head block w_head from D ≥ 10N; descriptive at cpu scale)",
            "new experiment on the encoder's rules",
            True,
            "fe72ce8",
        ),
        ("2026-12-05", "flat_margin ±0.3 → ±0.5 (inherited encoder Spec)", "init audit power 0.79", True, "a296cba"),
    ),
}

RULES = {
    "wu2023-fig1": FIG1,
    "wu2023-fig9": FIG9,
    "wu2023-init": INIT,
    "wu2023-width": WIDTH,
    "wu2023-ntk-limit": NTK_LIMIT,
    "wu2023-data-gram": DATA_GRAM,
    "wu2023-fig1-protocol": FIG1_PROTOCOL,
    "wu2023-scaling": SCALING,
    "wu2023-encoder-mnist": ENCODER_MNIST,
    "wu2023-vit-mnist": VIT_MNIST,
}


# --------------------------------------------------------------------------- the theorem map

PAPER = register(
    Paper(
        name="wu2023",
        title="Wu et al. 2023: convergence and the NTK of an encoder-only shallow transformer",
        results=(
            Result(
                "Thm 1, global convergence",
                "with LeCun/He init and width d_m ≳ N², GD drives the training loss to 0 at a linear rate, "
                "L_t ≤ (1 − γλ_min(K₀)/N)^{2t}·L₀",
                (
                    Test("wu2023-fig1", "linear", PROXY, f"{BELOW}; d = 16 < N; {STEP}", refutes=False),
                    Test("wu2023-fig9", "linear", PROXY, f"τ₀ = d_m^−1; {BELOW}", refutes=False),
                    Test("wu2023-encoder-mnist", "linear", PROXY, f"MNIST patches; {BELOW}", refutes=False),
                    Test(
                        "wu2023-vit-mnist",
                        "linear",
                        PROXY,
                        "a ViT with LayerNorm and an MLP: outside the model",
                        refutes=False,
                    ),
                ),
                "in the theorem's own regime: widths d_m ≥ N² at small N (e.g. N = 32, d = 32, d_m ≥ 1024)",
            ),
            Result(
                "Thm 1, width",
                "a width quadratic in N suffices (cubic, with d ≥ N, in a follow-up's reading for τ₀ = d_m^−1/2)",
                (
                    Test(
                        "wu2023-width",
                        "quadratic-a0.5",
                        PROXY,
                        "the width at which training becomes lazy (a fixed kernel-drift tolerance), not the proof's "
                        "criterion; a smaller width cannot refute a sufficient one",
                        refutes=False,
                    ),
                    Test("wu2023-width", "quadratic-a1", PROXY, "as quadratic-a0.5, τ₀ = d_m^−1", refutes=False),
                ),
            ),
            Result(
                "λ_min(K₀) and the init (sheet claim 2)",
                "under LeCun/He init the NTK's smallest eigenvalue at init grows ∝ d_m; under NTK init it stays O(1)",
                (
                    Test(
                        "wu2023-init", "lmin-lecun", DIRECT, "the w_O block from d_m ≥ 10N (the whole kernel reported)"
                    ),
                    Test("wu2023-encoder-mnist", "lmin-lecun", DIRECT, "on MNIST patches"),
                ),
                "that LeCun/He then train faster than NTK init at one step follows from the kernel's scale (a check, "
                "wu2023-init:speed-gamma); a speed gap growing with d_m is not judged",
            ),
            Result(
                "Sec. 4, the τ₀ = d_m^−1 limit (sheet claim 3)",
                "the logits shrink like d_m^−1/2, attention tends to uniform and the NTK to the two-layer ReLU NTK of "
                "the mean tokens (closed form)",
                (Test("wu2023-ntk-limit", "limit", DIRECT, "the NTK at init, N = 32, widths to 8192 ≥ N²"),),
            ),
            Result(
                "Sec. 4, τ₀ = d_m^−1/2 (sheet claim 3)",
                "attention stays non-trivial at every width: the NTK does not reach the τ₀ = d_m^−1 closed form",
                (Test("wu2023-ntk-limit", "alpha-half", DIRECT, "the NTK at init"),),
            ),
            Result(
                "Fig. 1 (Sec. 5.1, τ₀ = d_m^−1/2)",
                "linear convergence at every width; the weights barely move after ~epoch 50; the NTK changes early, "
                "then stays, more so as the width grows",
                (
                    Test("wu2023-fig1", "drift-kernel", PROXY, f"the width trend of the drift at the end only; {STEP}"),
                    Test("wu2023-fig1", "drift-weight", PROXY, f"the width trend of the drift at the end only; {STEP}"),
                    Test(
                        "wu2023-fig1-protocol",
                        "ordering-mean-unit",
                        PROXY,
                        "γ = 1 at every width, with an assumed normalisation (½·mean, unit-norm tokens)",
                    ),
                ),
            ),
            Result(
                "Fig. 9 (τ₀ = d_m^−1)",
                "the same three panels under τ₀ = d_m^−1",
                (
                    Test("wu2023-fig9", "drift-kernel", PROXY, f"the width trend only; {STEP}"),
                    Test("wu2023-fig9", "drift-weight", PROXY, f"the width trend only; {STEP}"),
                ),
            ),
            Result(
                "Sec. 5.2, the scalings (ViT on MNIST)",
                "τ₀ = d_m^−1/2 trains faster than τ₀ = d_m^−1, whose NTK moves less",
                (
                    Test("wu2023-scaling", "faster-mnist", PROXY, "the shallow encoder on MNIST patches, not a ViT"),
                    Test("wu2023-scaling", "faster-synthetic", PROXY, "the shallow encoder on the synthetic data"),
                    Test("wu2023-encoder-mnist", "drift-alpha", PROXY, "the shallow encoder on MNIST patches"),
                    Test("wu2023-vit-mnist", "drift-alpha", PROXY, "a ViT with LayerNorm and an MLP", refutes=False),
                ),
                "the scalings on the ViT itself are not compared in a claim",
            ),
            Result(
                "Data assumption (IMDB)",
                "an eigenvalue of the data's Gram matrix is bounded away from 0 on real embeddings",
                (
                    Test(
                        "wu2023-data-gram",
                        "floor-relu",
                        PROXY,
                        "MNIST patches stand in for IMDB; the rule asks for 1.5× an i.i.d. Gaussian reference, more "
                        "than the assumption's λ_min > 0",
                        refutes=False,
                    ),
                ),
                "IMDB itself (no loader here)",
            ),
            Result(
                "NTK-init analysis",
                "the convergence analysis under NTK init (its width and rate)",
                (),
                "no claim trains under NTK init to test its convergence condition",
            ),
        ),
        rules=RULES,
    )
)
