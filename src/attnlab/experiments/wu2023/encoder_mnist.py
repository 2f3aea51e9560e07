"""wu2023-encoder-mnist: training-loss curves of the encoder-only shallow transformer on MNIST patches
(Wu et al. 2023, Sec. 5.2), τ₀ = d_m^(−1/2) against d_m^(−1) and LeCun / He against NTK init: the
real-data counterpart of ``wu2023-fig1``, ``-fig9`` and ``-init`` (:mod:`.dynamics`), with their
probes (``wu2023``), analysis (:mod:`.analysis`) and step normalisation.

Data (``data.name = "images"``, :mod:`attnlab.data.images`). MNIST digits 3 and 8, labels ±1
(3 → +1), regression on ½·mean (f − y)² with full-batch GD (the paper's recipe). 7×7 patches:
d_s = 16 tokens of d = 49 pixels. ``norm = "standardise"``: pixels in [0, 1], minus their mean,
over their std, both over the training images of the pair, so the mean of ‖x_t‖²/d over every
token of the pool is exactly 1 — the sheet's ‖x‖² ≈ d, under which the two scalings separate
(with unit-norm tokens they behave alike, the sheet's pitfall; ``--set norm=token`` runs it).
The tokens are far from i.i.d.: ‖x_t‖²/d ranges 0.18 (blank background, −0.42 per pixel) … 7
(stroke patches). A cell trains on N = 100 images of the pair drawn with its own key,
alternating the two classes.

Step. γ_eff = γ·16/d_m (``step_norm = width``, :func:`attnlab.experiments.wu2023.step`), one raw
step for every init at a width, as in the synthetic experiments. *Said openly:* γ = 0.5 (not the
synthetic 1) was set after a pilot of K₀ spectra (2 draws per point, no training, widths 16, 64,
256): at γ = 1 LeCun at τ₀ = d_m^−1/2 reaches γ_eff·λ_max(K₀)/N ≈ 2.5 at d_m = 16 (the W_Q, W_K
blocks, O(1) in d_m, dominate the kernel of tokens this heterogeneous, so λ_max(K₀) grows slower
than d_m) and He 2.4 … 10.6; γ = 0.5 keeps LeCun at ≲ 1.3. He at τ₀ = d_m^−1/2 stays above 2 at
most points (pilot: 1.2 … 5.3) and is flagged there: the same raw step cannot be stable for He
and still train LeCun at τ₀ = d_m^−1 (pilot ratio ≈ 0.07 at d_m = 256 under γ = 0.5).

Recorded per run (probe set ``wu2023`` every 10 epochs, every epoch before 10; float64): the
training loss, λ_min(K_t), λ_max(K_t), ‖K_t − K₀‖_F/‖K₀‖_F, ‖θ_t − θ₀‖/‖θ₀‖, logit std and
attention TV distance from uniform. From the step-0 probes, γ_eff·λ_max(K₀)/N; a run is
*flagged* (:func:`.analysis.per_run`) when that ratio exceeds ``unstable_at`` (2), when it
diverged or when L_T ≥ L_0; *predicted stable* means ratio < ``unstable_at``.

Claims (statistic, estimate, pass rule; fixed before the cpu-scale run, thresholds are Spec
fields; the margins are the synthetic experiments', not tuned):
  converge     LeCun/He, every (init, τ₀, d_m): the geometric mean over the predicted-stable runs
               of L_T/L_0 ≤ ``target`` (0.1) → pass; any above (or not finite) → fail. The theory
               guarantees global convergence for widths far beyond the grid (≳ N²); the synthetic
               runs converge at every width, so the claim is checked at every width.
  linear       unflagged LeCun/He runs, as wu2023-fig1 (:func:`.analysis.linear_verdict`): per run
               on the window from epoch ``fit_from``·T to the last new low, log L on t against log
               L on log t by likelihood (log LR ≥ log 32) and a decay ≥ ``rate_share`` (½) of the
               linearised rate of the run's slowest kernel; a one-sided sign test over runs that
               more than half are linear, p < ``level`` → pass, at most half → fail. (Before:
               every ρ < 1 and median R² ≥ 0.9, which 1/(1 + t/10) passed; changed after the cpu
               run, whose verdict under the new rule is not re-measured here.)
  stability    every predicted-stable run neither diverged nor ended above L_0 (share ≥
               ``stable_share``, 1.0) → pass, any → fail; a pass is descriptive when fewer than 3
               of those runs lie at a ratio ≥ unstable_at/2 (a bound half as large predicts the
               same runs there).
  drift-kernel, drift-weight
               per τ₀, unflagged LeCun/He runs: log–log slope of ‖K_T − K₀‖_F/‖K₀‖_F (resp.
               ‖θ_T − θ₀‖/‖θ₀‖) against d_m, one slope per repeat (init, block, rep), 95 % t
               interval below 0 → pass, above → fail; both scalings must pass.
  drift-alpha  the NTK moves less under τ₀ = d_m^−1 than under d_m^−1/2: paired one-sided sign test
               of ‖K_T − K₀‖/‖K₀‖ (α = 1/2) − (α = 1) > 0 over matched (init ∈ lecun/he, d_m,
               block, rep) unflagged runs, p < ``level`` (0.05); fail when at most half agree.
  logits       unflagged runs, every init: the log–log slope of the logit std at θ_T against d_m
               (one per repeat, 95 % t interval) lies in ``slope_a1`` [−0.7, −0.3] under
               τ₀ = d_m^−1 (∝ d_m^−1/2) and in ``slope_half`` [−0.15, 0.15] under d_m^−1/2 (flat);
               equivalence verdicts, both must pass.
  uniform      at the largest width, θ_T, unflagged runs: Welch 95 % interval of attn_tv(α = 1/2) −
               attn_tv(α = 1) lies above ``tv_gap`` (0.1) → pass (τ₀ = d_m^−1 attention near
               uniform, d_m^−1/2 not); below it → fail; else inconclusive.
  speed-gamma  LeCun and He converge faster than NTK init at the same raw step: paired one-sided
               sign tests of log(L_T/L_0)_ntk − log(L_T/L_0)_init > 0 over matched (τ₀, d_m, block,
               rep) cells whose LeCun/He run is predicted stable, p < ``level``; both must pass.
  lmin-lecun, lmin-he, lmin-ntk
               log–log slope of λ_min(K₀^{w_O}) (the output weights' block) against d_m over the
               widths ≥ ``slope_from`` (default 10N, where the block's λ_min/d_m settles; below N
               its rank ≤ d_m makes it 0): the 0-step cells at ``kernel_widths`` (1024 … 4096 at
               cpu scale), both scalings, one slope per repeat (α, block, rep): inside [0.7, 1.3]
               (lecun, he) or [−0.5, 0.5] (ntk; ±0.3 before its audit). Descriptive with fewer
               than 2 such widths. *Said openly:* the pilot spectra above were seen before this
               rule was written (then fitted from d_m = 16: 0.66, 0.50, 0.33 below N, now reported).

Measured at cpu scale (d_m = 16, 64, 256; 3 repeats; 400 epochs; ``/tmp/wu2023-encoder-mnist-cpu``):
  Every LeCun/He run trained (train error 0 … 0.09 at T) and none diverged, the 8 flagged He runs
  at τ₀ = d_m^−1/2 (ratio 2.1 … 5.6) included: stability pass. L_T/L_0 (geometric mean) at d_m =
  16, 64, 256: LeCun 0.0019, 0.017, 0.12 (α = 1/2) and 0.012, 0.10, 0.32 (α = 1); He (α = 1) 0.0046,
  0.056, 0.22 — the wide nets are slower at the width-normalised step (under LeCun λ_max(K₀) grows
  6.6 … 7.9× and λ_min(K₀) 4.4 … 10× over the 16× range, not ∝ d_m), so converge fails at the
  widest points; the curves are log-linear after the first epochs (median R² 0.986, max ρ 0.998:
  linear pass).
  Kernel drift (LeCun) 2.9, 3.2, 1.3 (α = 1/2) and 11, 3.7, 0.37 (α = 1): the narrow nets are far
  from lazy on MNIST; drift-kernel inconclusive (α = 1/2 slope −0.37 [−1.09, 0.36], 3 LeCun repeats,
  He flagged there; α = 1 −1.16 [−1.32, −1.01]); weight drift slopes −0.79 and −0.85 (pass);
  drift-alpha fail (5 of 10 pairs). Logit std at θ_T: flat under α = 1/2 (−0.07 [−0.15, 0.01]) and
  −0.72 [−0.91, −0.53] under α = 1 (inconclusive: the d_m = 16 logits grew 0.22 → 0.68 in
  training; at θ₀ they scale as d_m^−0.47); uniform pass (attn TV 0.42 vs 0.019 at d_m = 256).
  NTK init barely trains at the same step (L_T/L_0 0.29 … 0.97): speed-gamma pass (18/18, 10/10).
  λ_min(K₀) slopes 0.66 [0.44, 0.88] (lecun, inconclusive), 0.50 [0.39, 0.61] (he, fail), 0.33
  [0.16, 0.50] (ntk, inconclusive): on MNIST patches λ_min(K₀) grows sub-linearly under LeCun/He
  and is not flat under NTK init at these widths (all below or near N = 100).
  With the kernel cells (d_m = 1024, 2048, 4096, ``results/wu2023-encoder-mnist-cpu``): λ_min of the
  w_O block is 0 at d_m = 16, 64, 0.042 at 256 and 0.48, 0.98, 1.97 at 1024 … 4096 (LeCun); slopes
  from 10N 0.98 [0.87, 1.10] (lecun), 0.98 [0.80, 1.16] (he), 0.09 [0.00, 0.19] (ntk): all pass.
  One LeCun run at d_m = 16 (τ₀ = d_m^−1/2, ratio 1.52) diverged: stability fails, 49/50.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
from pydantic import Field, PositiveFloat, PositiveInt

from attnlab import plots, rules
from attnlab.experiments import wu2023 as common
from attnlab.experiments.base import Analysis, Claim, Experiment, rounded
from attnlab.experiments.config import merge
from attnlab.experiments.pipeline import trained_cells
from attnlab.experiments.wu2023 import dynamics
from attnlab.experiments.wu2023.analysis import (
    INITS,
    TRAIN,
    add_run_columns,
    all_of,
    below_zero,
    colors,
    linear_claim,
    lmin_claims,
    logband,
    med,
    paired,
    per_run,
    rate_fits,
    repeat_ids,
    select_runs,
    slope_estimate,
    slope_measured,
    speed_verdict,
    stability_claim,
    trace,
    trained,
    width_key,
    width_of,
)
from attnlab.experiments.wu2023.audit import mnist_design
from attnlab.experiments.wu2023.limit import welch
from attnlab.parts import register

ALPHAS = (0.5, 1.0)
LEARNERS = ("lecun", "he")  # the inits of the convergence theorem


class Spec(dynamics.Spec):
    gamma: PositiveFloat = Field(0.5, description="step γ (γ_eff = γ·16/d_m under step_norm = width)")
    target: float = Field(0.1, gt=0, lt=1, description="converge: geometric mean of L_T/L_0 must be ≤ target")
    slope_a1: tuple[float, float] = Field((-0.7, -0.3), description="margin of the logit-std slope under τ₀ = d_m^−1")
    slope_half: tuple[float, float] = Field((-0.15, 0.15), description="margin of the logit-std slope, d_m^−1/2")
    tv_gap: PositiveFloat = Field(0.1, description="attn_tv(α = 1/2) − attn_tv(α = 1) required at the largest width")
    slope_from: PositiveInt | None = Field(
        None, description="smallest width of the λ_min(K₀^{w_O}) slope fit (None: 10·N)"
    )
    kernel_widths: list[PositiveInt] = Field(
        [], description="widths of 0-step cells that only measure K₀, for the lmin claims (fitted from 10·N on)"
    )
    lmin_margin: tuple[float, float] = Field((0.7, 1.3), description="margin of the λ_min slope under lecun and he")
    flat_margin: tuple[float, float] = Field(
        (-0.5, 0.5),
        description="margin of the λ_min slope under ntk: midway to the contrast ∝ d_m (±0.3 had audit "
        "power 0.79 at wu2023-init's cpu design)",
    )


DATA = {
    "name": "images",
    "dataset": "mnist",
    "classes": "3,8",
    "patch": 7,
    "norm": "standardise",
    "N": 100,
    "n_test": 100,
}
GRID = {"alpha": list(ALPHAS), "init": list(INITS)}
# smoke: one init (a bucket per (d_m, α, init) is one compile; the init comparison runs from cpu on),
# and a smaller step: at N = 8 the narrow τ₀ = d_m^−1/2 nets diverge at γ = 0.5
SMOKE = dict(
    data={"N": 8, "n_test": 8},
    model={"d_m": [8, 16], "alpha": list(ALPHAS), "init": "lecun"},
    train={"max_steps": 20, "log_every": 5, "log_dense_until": 5},
    reps=2,
    gamma=0.1,
)
# the trained grid, and K₀ alone (0-step cells) at widths ≥ 10N, where λ_min(K₀^{w_O}) ∝ d_m can show
CPU = dict(model={"d_m": [16, 64, 256]} | GRID, kernel_widths=[1024, 2048, 4096], reps=3)
PAPER = dict(data={"N": 200}, model={"d_m": [16, 64, 256, 1024]} | GRID, kernel_widths=[2048, 4096, 8192], reps=5)


# ---------------------------------------------------------------- verdicts of this experiment


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


def sign_errors(apply, params, data):
    """(training error over the real samples (``mask``), test error) of 1{sign f(X) ≠ y}."""
    wrong = lambda X, y: (jnp.sign(jax.vmap(lambda x: apply(params, x)[0])(X)) != y).astype(y.dtype)
    train = jnp.sum(jnp.where(data["mask"], wrong(data["X"], data["y"]), 0)) / jnp.sum(data["mask"])
    return train, jnp.mean(wrong(data["X_test"], data["y_test"]))


def _label(a: float) -> str:
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


# ---------------------------------------------------------------- the experiment


class EncoderMnist(Experiment):
    id = "wu2023-encoder-mnist"
    title = "Wu et al. 2023, Sec. 5.2's data: the shallow encoder (not a ViT) on MNIST patches across widths, scalings and inits"
    description = __doc__
    Spec = Spec
    audit = mnist_design()
    scales = {"smoke": SMOKE, "cpu": CPU, "paper": PAPER}
    assumptions = (
        "MNIST 3 vs 8 (labels ±1), 7×7 patches: 16 tokens of d = 49; pixels standardised over the pair's training "
        "images (mean ‖x_t‖²/d = 1 exactly over the pool: the sheet's ‖x‖² ≈ d, under which the scalings separate).",
        "N = 100 training images per cell (cpu), drawn with the cell's key, classes alternating; ½·mean (f − y)², "
        "full-batch GD, 400 epochs, float64.",
        "Step γ_eff = γ·16/d_m with γ = 0.5, one raw step for every init at a width; γ set after a pilot of K₀ "
        "spectra (no training) so that LeCun stays below γ_eff·λ_max(K₀)/N ≈ 1.3 (He at τ₀ = d_m^−1/2 is flagged).",
        "Flagged runs (ratio > 2, diverged, or L_T ≥ L_0) are left out of the rate, drift, logit and attention "
        "claims; the converge and speed claims use the predicted-stable runs (ratio < 2).",
        "Every cell's data order, init and probes come from separate streams of a key derived from the hash of its "
        "config.",
    )

    def defaults(self):
        return merge(common.DEFAULTS, {"train": TRAIN | {"save_params": True}}) | {
            "data": DATA
        }  # the synthetic data's fields replaced

    width = "d_m"  # the model's width field

    def cells(self, spec: Spec) -> list[dict]:
        """The trained grid, then 0-step cells at ``kernel_widths`` (K₀ only)."""
        cells = common.stepped_cells(spec)
        if spec.kernel_widths:
            k = spec.model_copy(
                update={"model": spec.model | {self.width: spec.kernel_widths}, "train": spec.train | {"max_steps": 0}}
            )
            cells += common.stepped_cells(k)
        return cells

    def derive(self, table, spec: Spec):
        """Per run: the quantities of :func:`.analysis.per_run`, and the sign errors of θ_T on the
        cell's N training images and on the test images (labels ±1: mean of 1{sign f ≠ y}; the
        squared loss itself reports none). The saved parameters are dropped."""
        compiled, errors = {}, []
        for t in trained_cells(table):
            if id(t.problem) not in compiled:
                compiled[id(t.problem)] = jax.jit(lambda p, d, pr=t.problem: sign_errors(pr.apply, p, d))
            with jax.enable_x64(t.static.get("train.dtype") == "float64"):
                errors.append([float(e) for e in compiled[id(t.problem)](t.params, t.data)])
        errors = np.array(errors, float).reshape(-1, 2)
        table = table.drop_columns(["params_npz"])
        table = table.append_column("train_error", pa.array(errors[:, 0])).append_column(
            "test_error", pa.array(errors[:, 1])
        )
        return add_run_columns(table, spec.unstable_at)

    def analyse(self, cols, spec: Spec) -> Analysis:
        full, cols = cols, select_runs(cols, trained(cols))  # the 0-step kernel cells serve the lmin claims only
        r = per_run(cols, spec.unstable_at)
        t = np.asarray(cols["trace_step"][0], float)
        T = t[-1]
        L = trace(cols, "train_loss")
        width, alpha, init = width_of(cols), cols["model.alpha"].astype(float), cols["model.init"]
        learner = np.isin(init, LEARNERS)
        ok = ~r["unstable"]
        with np.errstate(invalid="ignore"):
            stable = r["step_ratio"] < spec.unstable_at
        with np.errstate(divide="ignore", invalid="ignore"):
            q = r["loss_T"] / r["loss_0"]
        rho, r2, npts, whole = rate_fits(t, L, ok & learner, spec.floor, spec.fit_from * T)
        K_T, W_T = trace(cols, "kernel_drift")[:, -1], trace(cols, "weight_drift")[:, -1]
        logit_T, tv_T = trace(cols, "logit_std")[:, -1], trace(cols, "attn_tv")[:, -1]
        alphas = [a for a in ALPHAS if (alpha == a).any()]

        groups = {}
        for name in LEARNERS:
            for a in alphas:
                for w in np.unique(width):
                    s = (init == name) & (alpha == a) & (width == w) & stable
                    if s.any():
                        groups[f"{name}, {_label(a)}, d_m = {w}"] = geo_mean(q[s])
        rep_init = repeat_ids(cols, ("model.init", "block", "rep"))
        drift, logits = {}, {}
        for a in alphas:
            s = ok & learner & (alpha == a)
            drift[a] = {n: slope_estimate(width[s], v[s], rep_init[s]) for n, v in (("kernel", K_T), ("weight", W_T))}
            s = ok & (alpha == a)
            logits[a] = slope_estimate(width[s], logit_T[s], rep_init[s])
        drift_v = {
            n: all_of({_label(a): below_zero(drift[a][n], f"{n} drift at T", spec.drift_bound) for a in alphas})
            for n in ("kernel", "weight")
        }
        logit_v = all_of(
            {
                _label(a): rules.equivalence(
                    logits[a]["slope"],
                    logits[a]["lo"],
                    logits[a]["hi"],
                    spec.slope_a1 if a == 1 else spec.slope_half,
                    "slope",
                )
                for a in alphas
            }
        )
        top = int(width.max())
        gap = welch(tv_T[ok & (width == top) & (alpha == 0.5)], tv_T[ok & (width == top) & (alpha == 1.0)])
        diffs = paired(
            cols, K_T, 1.0, 0.5, ("model.init", width_key(cols), "block", "rep"), ok & learner, by="model.alpha"
        )
        alpha_v = rules.sign_test(diffs, alpha=spec.level, name="kernel drift(α = 1/2) − kernel drift(α = 1)")
        # a pair counts when its LeCun/He run is predicted stable (NTK init runs are far below the bound)
        speed_where = stable | (init == "ntk")
        with np.errstate(divide="ignore", invalid="ignore"):
            speed = np.log(q)
        speed_v = speed_verdict(cols, speed, spec.level, ("model.alpha", width_key(cols), "block", "rep"), speed_where)
        w_min = spec.slope_from or 10 * int(np.max(cols["data.N"]))
        rep_alpha = repeat_ids(full, ("model.alpha", "block", "rep"))
        lam_w_O = per_run(full, spec.unstable_at)["lambda_min_w_O_0"]
        lmin, lmin_slopes = lmin_claims(
            width_of(full), full["model.init"], lam_w_O, rep_alpha, w_min, spec.lmin_margin, spec.flat_margin
        )

        claims = [
            Claim.of(
                "converge",
                f"LeCun/He: the training loss falls to ≤ {spec.target:g}·L_0 within {T:g} epochs at "
                "every width and both scalings",
                converge_verdict(groups, spec.target).reported(CONVERGE_WHY),
            ),
            linear_claim(
                "LeCun/He: the training loss converges at a linear (geometric) rate", cols, L, ok & learner, spec, T
            )[0],
            stability_claim(r, spec),
            Claim.of(
                "drift-kernel",
                "LeCun/He: the NTK moves less during training as the width grows (both τ₀)",
                drift_v["kernel"].reported(DRIFT_KERNEL_WHY),
            ),
            Claim.of(
                "drift-weight",
                "LeCun/He: the weights move less (relative to θ₀) as the width grows (both τ₀)",
                drift_v["weight"],
            ),
            Claim.of(
                "drift-alpha",
                "LeCun/He: the NTK moves less under τ₀ = d_m^−1 than under d_m^−1/2",
                alpha_v.reported(DRIFT_ALPHA_WHY),
            ),
            Claim.of(
                "logits",
                "the logit std at θ_T shrinks like d_m^−1/2 under τ₀ = d_m^−1 and stays flat under d_m^−1/2",
                logit_v.reported(LOGITS_WHY),
            ),
            Claim.of(
                "uniform",
                "at the largest width the attention of τ₀ = d_m^−1 is near uniform and that of d_m^−1/2 is not",
                gap_verdict(gap, spec.tv_gap, top),
            ),
            Claim.of(
                "speed-gamma",
                "LeCun and He init converge faster than NTK init at the same step γ_eff",
                speed_v.reported(
                    dynamics.SPEED_GAMMA_WHY + "; pairs over (τ₀, d_m, block, rep) whose LeCun/He "
                    "run is predicted stable"
                ),
            ),
            *lmin,
        ]

        per_point, rows = {}, []
        for a in alphas:
            for name in INITS:
                for w in np.unique(width):
                    s = (alpha == a) & (init == name) & (width == w)
                    if not s.any():
                        continue
                    d = {
                        "lr": rounded(float(cols["train.lr"][s][0]), 6),
                        "γ_eff·λ_max(K₀)/N per run": [rounded(x) for x in r["step_ratio"][s]],
                        "flagged": int(r["unstable"][s].sum()),
                        "diverged": int(r["diverged"][s].sum()),
                        "λ_min(K₀)": med(r["lambda_min_0"][s]),
                        "λ_max(K₀)": med(r["lambda_max_0"][s]),
                        "L_0": med(r["loss_0"][s]),
                        "L_T/L_0 (geometric mean)": rounded(geo_mean(q[s]), 6),
                        "ρ (median)": med(rho[s]),
                        "R² (median)": med(r2[s]),
                        "R² from epoch 0 (median)": med(whole[s]),
                        "fit points (median)": med(npts[s]),
                        "kernel drift at T": med(K_T[s]),
                        "weight drift at T": med(W_T[s]),
                        "logit std (0 → T)": [med(trace(cols, "logit_std")[s, 0]), med(logit_T[s])],
                        "attention TV from uniform (0 → T)": [med(trace(cols, "attn_tv")[s, 0]), med(tv_T[s])],
                        "training error at T (median)": med(cols["train_error"][s].astype(float)),
                        "test error at T (median)": med(cols["test_error"][s].astype(float)),
                    }
                    per_point.setdefault(_label(a), {}).setdefault(name, {})[int(w)] = d
                    rows.append(
                        [
                            _label(a),
                            name,
                            int(w),
                            d["lr"],
                            med(r["step_ratio"][s]),
                            d["flagged"],
                            d["L_T/L_0 (geometric mean)"],
                            d["ρ (median)"],
                            d["kernel drift at T"],
                            d["logit std (0 → T)"][1],
                            d["attention TV from uniform (0 → T)"][1],
                            d["test error at T (median)"],
                        ]
                    )
        summary = {
            "step": f"{spec.step_norm}, γ = {spec.gamma:g}",
            "T": int(T),
            "N": int(np.max(cols["data.N"])),
            "per scaling, init and width": per_point,
            "drift slopes (log–log vs d_m, LeCun/He)": {
                _label(a): {n: slope_measured(e) for n, e in drift[a].items()} for a in alphas
            },
            "logit std slopes at θ_T": {_label(a): slope_measured(logits[a]) for a in alphas},
            f"λ_min(K₀^w_O) slopes (width ≥ {w_min})": {k: slope_measured(e) for k, e in lmin_slopes.items()},
            "λ_min(K₀^w_O) per init and width (median, step 0)": {
                str(i): {
                    int(w): med(lam_w_O[(full["model.init"] == i) & (width_of(full) == w)])
                    for w in np.unique(width_of(full))
                }
                for i in INITS
                if (full["model.init"] == i).any()
            },
            "flagged runs": [
                {
                    "τ₀": _label(alpha[i]),
                    "init": str(init[i]),
                    "d_m": int(width[i]),
                    "block": int(cols["block"][i]),
                    "rep": int(cols["rep"][i]),
                    "ratio": rounded(r["step_ratio"][i]),
                    "status": str(cols["status"][i]),
                    "L_T/L_0": rounded(q[i], 6),
                }
                for i in np.flatnonzero(r["unstable"])
            ],
        }
        table = (
            "per scaling, init and width (medians over repeats)",
            [
                "τ₀",
                "init",
                "d_m",
                "lr",
                "γ_eff·λ_max(K₀)/N",
                "flagged",
                "L_T/L_0 (geo. mean)",
                "ρ",
                "kernel drift at T",
                "logit std at T",
                "attn TV at T",
                "test error",
            ],
            rows,
        )
        return Analysis(claims=claims, summary=summary, tables=[table])

    def figures(self, cols, spec: Spec, analysis: Analysis, out: Path) -> list[Path]:
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
                ax.set_title(f"{_label(a)}, {name} init", fontsize=9)
                ax.legend(fontsize=7)
            row[0].set_ylabel("training loss")
        for ax in axes[-1]:
            ax.set_xlabel("epoch")
        fig.suptitle(
            f"{self.id}: MNIST {cols['data.classes'][0].replace(',', ' vs ')}, N = {cols['data.N'][0]}, "
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
                lab = f"{_label(a)}, {name}"
                axes[0].plot(
                    widths, [geo_mean(q[s & (width == w)]) for w in widths], styles[name], color=color, label=lab
                )
                axes[4].plot(
                    widths,
                    [np.nanmedian(r["step_ratio"][s & (width == w)]) for w in widths],
                    styles[name],
                    color=color,
                    label=lab,
                )
                for ax, v, _ in measures:
                    med_w = [
                        np.nanmedian(v[s & ok & (width == w)]) if (s & ok & (width == w)).any() else np.nan
                        for w in widths
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
        fig.suptitle(f"{self.id}: against width (medians over unflagged runs in b–d)", fontsize=9)
        return paths + plots.save(fig, out, "mnist_width")


EXPERIMENT = register(EncoderMnist())
