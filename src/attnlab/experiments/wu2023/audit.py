"""Audit designs of the wu2023 claims (:mod:`attnlab.audit`): simulators of the columns each
experiment's ``analyse`` reads, at its real design, and H1 / H0 for each claim.

Every simulator starts from the cells of the design (grid points × seed blocks × reps, the
``compare`` variants and the calibration stage of ``wu2023-init``), keeps their columns, and adds
the measured ones. Effect sizes are the hypotheses'; the nuisance levels (kernel scales, rates,
scatter) are ``noise``: defaults measured on cpu-scale runs (fig1, init, width, ntk-limit,
data-gram) or read off the one a module docstring reports (fig9, encoder-mnist), said per design;
``plug_in`` reads them from a stored run where it can.

Trained runs (``wu2023-fig1``, ``-fig9``, ``-init``, ``-encoder-mnist``): the linearised GD dynamics
of the package docstring, r_{t+1} = (I − γ_eff K₀/N) r_t, the initial loss split between the top
eigen-direction of K₀ (share w, ratio r = γ_eff λ_max(K₀)/N) and the slowest (u = γ_eff
λ_min(K₀)/N); under a stability bound θ (2 for ½·mean (f − y)²) the step acts as 2/θ times it:

    L_t / L_0 = w·|1 − 2r/θ|^{2t} + (1 − w)·s_t,   s_t = (1 − 2u/θ)^{2t}   (geometric, H1)
                                                  s_t = 1/(1 + t/10)       (polynomial: H0 of linear)
                                                  s_t = 0.9 + 0.1·e^{−t/200}  (plateau: H0 of converge)

on the cells' own logged epochs; each decrement of log L_t between logged epochs is × a log-normal
factor (the wiggle about the law, keeping GD's descent monotone). A run with θ ≤ r < 3θ catapults
(the spike saturates, then the top mode is gone after 10 epochs: Lewkowycz et al. 2020; the He runs
at ratios 2.1 … 5.6 of wu2023-init and -encoder-mnist trained), r ≥ 3θ diverges (NaN, status
``diverged``). Drifts at T: D·(d_m/16)^slope × log-normal scatter, rising as 1 − e^{−t/50}; logit
std and attention TV constant in t. λ_min(K₀) under LeCun/He follows the theorem's ∝ d_m in its
regime d_m ≥ N and stays at the other blocks' O(1) level below N, where the w_O block (rank ≤ d_m)
adds nothing: λ_min ∝ max(d_m, N); under the NTK init it is flat.

H1 / H0 per claim (sources in the Hypothesis records):
  linear       geometric / the polynomial 1/(1 + t/10) (R² 0.93 over the fit window: the old R² rule passed it)
  stability    θ = 2 / θ = 1 (mean (f − y)² without the ½), no catapult: runs above it diverge
  drift-*      drift ∝ d_m^−1/2 (lazy training) / ∝ d_m^−0.1 (5× weaker; the rule's bound is −0.15)
  lmin-*       λ_min ∝ max(d_m, N) (LeCun/He), flat (NTK) / the other parameterisation's law
  speed-gamma  as lmin / λ_min flat under every init: LeCun/He's kernel larger by the
               parameterisations' constant factor only, which alone makes them faster at one step
  speed-ratio  NTK init's λ_min/λ_max half LeCun/He's (size assumed: the theory is silent) / equal
  converge     geometric at the theorem's rate / a plateau
  drift-alpha  kernel drift under τ₀ = d_m^−1 half that under d_m^−1/2 (size assumed) / equal
  logits, uniform  logit std ∝ d_m^(1/2 − α), TV following it / τ₀ without effect (both flat)

``wu2023-fig1-protocol``: the same GD runs at γ = 1 under each candidate normalisation: λ_max(K₀)/N ∝
d_m from its measured level at d_m = 16 per (τ₀, token norm), the ratio r = g·λ_max(K₀) with g = γ/N
under ½·mean and γ under ½·sum (N times larger), the slow rate ∝ d_m^slope from its level at d_m =
16. ordering-*: H1 slope 1 (λ_min(K₀) ∝ d_m, the theorem's LeCun kernel), H0 slope 0 (the width
without effect on the rate); stability as above; protocol descriptive.

``wu2023-scaling``: per data set the ratio and slow rate of τ₀ = d_m^−1/2 at their measured levels
and width slopes (the width-normalised step); under d_m^−1 both × a factor: H1 ½ (the sheet's λ_max
measurement; size assumed), H0 1 (no effect of τ₀). The two runs of a pair share a log-normal factor
and the top mode's share of L_0 (common draws), each has its own factor and loss wiggle.

``wu2023-width``: one lazy width per repeat (α, N, block, rep), log d* = level + k·(log N −
mean log N) + σ·ε; each run's peak relative kernel drift is lazy_drift·(d*/d_m)^s × log-normal
scatter, rising as 1 − e^{−t/50} over the logged epochs; lazy runs reach the loss target (that
width is descriptive). H1 k = 2 (the quadratic width as the requirement; k = 3 for the cubic
reading), H0 the next law up, k = 3 (resp. 4). Noise: the level, σ, s and the scatter.

``wu2023-ntk-limit``: per cell, ntk_error = e(α)·(d_m/64)^slope, logit std = ℓ·64^(1/2 − α)·
(d_m/64)^slope' (‖x‖²/d = 1/16 of it for unit tokens), attn_tv = a·tanh(logit std/b), each ×
log-normal scatter. H1 of limit: error ∝ d_m^−1/2 (α = 1), H0 a floor 0.1 under the same decay;
alpha-half: error flat / tending to the closed form at d_m^−1/4; logits: slope −1/2 resp. 0 /
swapped; pitfall: logits ∝ ‖x‖²/d / the token norm without effect.

``wu2023-data-gram``: ρ = λ_min/λ̄ per cell from the experiment's own :func:`.data_gram.grams` on
i.i.d. N(0, 1) tokens of the cell's N, d_s, d (data with no special structure; mean log ρ of 4
draws per point, computed once; the analysis's own reference ρ_gauss) × log-normal scatter. H0:
that Gram; H1: twice its ρ (the paper gives no size): better conditioned than unstructured data,
the sampling decay remaining. Both fall with N, as the Gram of any i.i.d. sample does, so the
trend-* claims are descriptive.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from attnlab.audit import ClaimAudit, Design, Hypothesis
from attnlab.train import log_schedule

INITS = ("lecun", "he", "ntk")
BLOCKS = ("W_Q", "W_K", "W_V", "w_O")
D_REF = 16  # the width the levels below refer to (the step normalisation's d_ref)
HE = 3.7  # He's λ_max(K₀) / LeCun's (measured on a cpu-scale run of wu2023-init: 3.4 … 4.0)

# ---------------------------------------------------------------- hypotheses shared by the trained experiments

S_LINEAR = "Wu et al. 2023, Thm. 1 (LeCun/He, d_m ≳ N²): GD converges linearly, L_t ≤ (1 − γλ_min(K₀)/N)^{2t} L_0"
S_LAZY = "Wu et al. 2023, Sec. 5.1 (b, c): the NTK regime, ‖K_t − K_0‖/‖K_0‖ = O(d_m^−1/2) (Jacot et al. 2018)"
S_STABLE = "the linearised dynamics of ½·mean (f − y)²: stable iff γ_eff·λ_max(K₀)/N < 2 (package docstring)"
S_LMIN = "Wu et al. 2023, Thm. 1 / Sec. 5.2: λ_min(K₀) ∝ d_m under LeCun/He, O(1) under NTK init"
GEOMETRIC = {"form": "geometric", "bound": 2.0, "catapult": True, "drift": -0.5}


def h_linear(world: dict) -> ClaimAudit:
    return ClaimAudit(
        "linear",
        Hypothesis("L_t ∝ ρ^t after the top mode's transient (linear convergence)", S_LINEAR, world),
        Hypothesis(
            "after the top mode, L_t ∝ 1/(1 + t/10) (a polynomial, sublinear decay)",
            "the O(1/t) rate of GD without strong convexity, which the theorem improves to linear",
            world | {"form": "polynomial"},
        ),
    )


def h_stability(world: dict) -> ClaimAudit:
    return ClaimAudit(
        "stability",
        Hypothesis("runs below γ_eff·λ_max(K₀)/N = 2 train; 2 … 6 catapult; above 6 diverge", S_STABLE, world),
        Hypothesis(
            "runs diverge from γ_eff·λ_max(K₀)/N = 1 on (a bound half as large)",
            "the bound of mean (f − y)² without the ½ (the sheet's loss convention, assumed)",
            world | {"bound": 1.0, "catapult": False},
        ),
    )


def h_drift(claim: str, world: dict) -> ClaimAudit:
    what = "‖K_T − K_0‖/‖K_0‖" if "kernel" in claim else "‖θ_T − θ₀‖/‖θ₀‖"
    return ClaimAudit(
        claim,
        Hypothesis(f"{what} ∝ d_m^−1/2 (lazy training)", S_LAZY, world),
        Hypothesis(
            f"{what} ∝ d_m^−0.1 (a width trend 5× weaker than the lazy regime's)",
            "no lazy regime (movement Θ(1) in width) but a weak trend, short of the rule's bound −0.15",
            world | {"drift": -0.1},
        ),
    )


def h_lmin(world: dict) -> list[ClaimAudit]:
    hinge, flat = "λ_min(K₀) ∝ max(d_m, N) (∝ d_m from N on)", "λ_min(K₀) flat in d_m"
    out = []
    for name in INITS:
        h1, h0 = (flat, hinge) if name == "ntk" else (hinge, flat)
        out.append(
            ClaimAudit(
                f"lmin-{name}",
                Hypothesis(f"{name}: {h1}", S_LMIN, world),
                Hypothesis(
                    f"{name}: {h0}",
                    "the other parameterisation's law (the contrast the paper draws)",
                    world | {"lmin": world["lmin"] | {name: 0.0 if name != "ntk" else 1.0}},
                ),
            )
        )
    return out


def h_speed_gamma(world: dict) -> ClaimAudit:
    return ClaimAudit(
        "speed-gamma",
        Hypothesis("λ_min(K₀) ∝ max(d_m, N) under LeCun/He, flat under NTK init", S_LMIN, world),
        Hypothesis(
            "λ_min(K₀) flat under every init: LeCun/He's kernel larger by a constant factor only",
            "no width effect: the parameterisations' constant kernel factor (the 1/√fan_in multipliers)",
            world | {"lmin": {"lecun": 0.0, "he": 0.0, "ntk": 0.0}},
        ),
    )


# ---------------------------------------------------------------- trained runs


def frame(cells: list[dict]) -> dict[str, np.ndarray]:
    """The cells' own columns (grid values, block, rep, tags, lr)."""
    return {k: np.array([c[k] for c in cells]) for k in cells[0]}


def epochs(cols: dict) -> np.ndarray:
    """The logged epochs of the cells (the trainer's log schedule)."""
    g = lambda k, default=0: int(cols[k][0]) if k in cols else default
    return np.array(
        log_schedule(g("train.max_steps"), every=g("train.log_every"), dense_until=g("train.log_dense_until")), float
    )


def lognormal(rng, sd: float, n: int) -> np.ndarray:
    return np.exp(sd * rng.standard_normal(n))


def runs(world: dict, noise: dict, cols: dict, r, u, drift_K, drift_W, logit, tv, rng, share=None) -> dict:
    """The probe traces and final columns of GD runs (see the module docstring): r = γ_eff
    λ_max(K₀)/N and u = γ_eff λ_min(K₀)/N per run, the drifts at T, logit std and attention TV;
    ``share``: the top mode's share w of L_0 per run (default: drawn per run)."""
    t = epochs(cols)
    n = len(r)
    bound = world["bound"]
    z = rng.standard_normal(n) if share is None else share
    w = np.clip(0.5 + noise["share_sd"] * z, 0.05, 0.95)
    with np.errstate(over="ignore"):
        top = np.abs(1 - 2 * r / bound)[:, None] ** (2 * t)  # the top mode under the bound θ: factor 1 − 2r/θ
    catapult = (r >= bound) & (r < 3 * bound) & world["catapult"]
    # the spike saturates (46 … 87× L_0 at epoch 10 measured), then the kernel flattens and the top mode is caught
    top = np.where(catapult[:, None], np.where(t > 10, 0.0, np.minimum(top, 100.0)), top)
    form = world["form"]
    if form == "geometric":
        slow = np.clip(1 - 2 * u / bound, 0, 1)[:, None] ** (2 * t)
    elif form == "polynomial":
        slow = np.broadcast_to(1 / (1 + t / 10), (n, len(t)))
    else:
        slow = np.broadcast_to(0.9 + 0.1 * np.exp(-t / 200), (n, len(t)))
    L0 = 0.5 * lognormal(rng, 0.2, n)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        drop = -np.diff(np.log(w[:, None] * top + (1 - w[:, None]) * slow), axis=1)
        # each decrement of log L between logged epochs × a log-normal factor: the curve keeps its direction
        sd = noise["dec_sd"]
        drop = drop * np.exp(sd * rng.standard_normal(drop.shape) - sd**2 / 2)
        L = L0[:, None] * np.exp(-np.concatenate([np.zeros((n, 1)), np.cumsum(drop, axis=1)], axis=1))
    diverged = (r >= bound) & ~catapult
    gone = diverged[:, None] & ((L > 1e6 * L0[:, None]) | (t >= t[min(len(t) - 1, 3)]))  # NaN once blown up
    L = np.where(gone, np.nan, L)
    rise = (1 - np.exp(-t / 50)) / (1 - np.exp(-t[-1] / 50))
    nan_after = np.where(gone, np.nan, 1.0)
    KD, WD = drift_K[:, None] * rise * nan_after, drift_W[:, None] * rise * nan_after
    from attnlab.experiments.wu2023.analysis import gain

    g = gain(cols)  # r = g·λ_max(K₀): γ_eff/N under mean, γ_eff under sum
    const = lambda v: np.broadcast_to(np.asarray(v, float)[:, None], (n, len(t)))
    out = {
        "trace_step": np.broadcast_to(t, (n, len(t))),
        "trace_train_loss": L,
        "trace_lambda_max": const(r / g),
        "trace_lambda_min": const(u / g),
        "trace_lambda_min_w_O": const(u / g),
        "trace_kernel_drift": KD,
        "trace_weight_drift": WD,
        "trace_logit_std": const(logit),
        "trace_attn_tv": const(tv),
        "train_loss": L[:, -1],
        "status": np.where(diverged, "diverged", "cap"),
    }
    return out | {f"trace_weight_drift_{b}": WD for b in BLOCKS}


def with_run_columns(cols: dict, spec) -> dict:
    """The per-run columns ``derive`` adds (:func:`.analysis.per_run`), as in results.parquet."""
    from attnlab.experiments.wu2023.analysis import per_run

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return cols | per_run(cols, spec.unstable_at)


def tv_of(logit: np.ndarray, a: float, b: float) -> np.ndarray:
    """Attention TV from uniform of softmax rows whose logits have std ``logit``: ∝ logit when
    small, saturating at a."""
    return a * np.tanh(logit / b)


def dynamics_noise(cols: dict, spec) -> dict:
    """Plug-in: the nuisance levels of a stored fig1/fig9 run (medians and log-sds of the step
    ratio and of the fitted slow rate u = 1 − √ρ, the median log-sd of the decrements of log L_t
    over the fit window, the scatter of the log drifts about their log–log line in d_m)."""
    from attnlab.experiments.wu2023.analysis import per_run, rate_fits, trace

    r = per_run(cols, spec.unstable_at)
    ok = ~r["unstable"]
    t, L = np.asarray(cols["trace_step"][0], float), trace(cols, "train_loss")
    rho, *_ = rate_fits(t, L, ok, spec.floor, spec.fit_from * t[-1])
    u = 1 - np.sqrt(rho[np.isfinite(rho)])
    s = t >= spec.fit_from * t[-1]
    drops = [-np.diff(np.log(x[s])) for x in L[ok]]
    wiggle = [np.std(np.log(d[d > 0])) for d in drops if (d > 0).sum() > 2]
    logw = np.log(cols["model.d_m"][ok].astype(float))
    scatter = lambda y: float(np.std(np.log(y) - np.polyval(np.polyfit(logw, np.log(y), 1), logw), ddof=2))
    ratio = r["step_ratio"][ok]
    return {
        "ratio": float(np.median(ratio)),
        "ratio_sd": float(np.std(np.log(ratio))),
        "decay": float(np.median(u)),
        "decay_sd": float(np.std(np.log(u))),
        "dec_sd": float(np.median(wiggle)),
        "kernel_sd": scatter(trace(cols, "kernel_drift")[ok, -1]),
        "weight_sd": scatter(trace(cols, "weight_drift")[ok, -1]),
    }


# ---------------------------------------------------------------- fig1, fig9


def simulate_dynamics(world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    """fig1 / fig9: ratio and slow rate at their measured levels (scaled by γ_eff·d_m/16, so
    step_norm = none reproduces its ∝ d_m ratio), drifts ∝ d_m^slope."""
    cols = frame(cells)
    n = len(cells)
    d_m, lr = cols["model.d_m"].astype(float), cols["train.lr"].astype(float)
    alpha = cols["model.alpha"].astype(float)
    step = lr * d_m / D_REF  # γ under step_norm = width, γ·d_m/16 under none
    r = noise["ratio"] * step * lognormal(rng, noise["ratio_sd"], n)
    u = noise["decay"] * step * lognormal(rng, noise["decay_sd"], n)
    width = (d_m / D_REF) ** world["drift"]
    KD = noise["kernel_level"] * width * lognormal(rng, noise["kernel_sd"], n)
    WD = noise["weight_level"] * width * lognormal(rng, noise["weight_sd"], n)
    logit = d_m ** (0.5 - alpha) * lognormal(rng, 0.05, n)  # ∝ d_m^(1/2 − α)·‖x‖²/d, ‖x‖² ≈ d
    cols |= runs(world, noise, cols, r, u, KD, WD, logit, tv_of(logit, 0.5, 1.0), rng)
    return with_run_columns(cols, spec)


def dynamics_design(ratio: float, kernel_level: float, weight_level: float) -> Design:
    """fig1 (τ₀ = d_m^−1/2) and fig9 (d_m^−1): ``ratio`` the median γ_eff·λ_max(K₀)/N and the
    drift levels at d_m = 16 of their cpu runs; the scatter is the one :func:`dynamics_noise`
    measured on a cpu-scale run of wu2023-fig1 (12 runs)."""
    noise = {
        "ratio": ratio,
        "ratio_sd": 0.06,
        "decay": 0.004,
        "decay_sd": 0.68,
        "dec_sd": 0.13,
        "share_sd": 0.1,
        "kernel_level": kernel_level,
        "kernel_sd": 0.26,
        "weight_level": weight_level,
        "weight_sd": 0.17,
    }
    claims = (
        h_linear(GEOMETRIC),
        h_stability(GEOMETRIC),
        h_drift("drift-kernel", GEOMETRIC),
        h_drift("drift-weight", GEOMETRIC),
    )
    return Design(
        simulate=simulate_dynamics,
        claims=claims,
        noise=noise,
        noise_source="default: measured on a cpu-scale run of wu2023-fig1 (12 runs: ratio sd, slow rate, wiggle of "
        "the decrements of log L_t, drift scatter); the median ratio of each figure's docstring",
        plug_in=lambda cols, spec: noise | dynamics_noise(cols, spec),
    )


# ---------------------------------------------------------------- init: the kernel scales per init


def init_kernel(world: dict, noise: dict, cols: dict, rng) -> tuple[np.ndarray, np.ndarray]:
    """(λ_max(K₀)/N, λ_min(K₀)/N) per run, synthetic data, τ₀ = d_m^−1/2: λ_max/N = A·d_m
    (LeCun; He ×HE; NTK init A, flat), λ_min/N = κ·A·N·(max(d_m, N)/N)^slope (LeCun; He ×HE;
    NTK init: its conditioning ``ntk_cond`` × LeCun's, κ·A) × log-normal scatter."""
    init, d_m, N = cols["model.init"], cols["model.d_m"].astype(float), cols["data.N"].astype(float)
    A, kappa = noise["lmax"], noise["kappa"]
    scale = np.select([init == "he", init == "ntk"], [HE, 1.0 / d_m], 1.0)
    lmax = A * d_m * scale
    slope = np.array([world["lmin"][i] for i in init], float)
    base = np.where(init == "ntk", world["ntk_cond"] * kappa * A, np.where(init == "he", HE, 1.0) * kappa * A * N)
    lmin = base * (np.maximum(d_m, N) / N) ** slope
    sd = np.array([noise[f"lmin_sd_{i}"] for i in init])
    return lmax * lognormal(rng, noise["lmax_sd"], len(init)), lmin * np.exp(sd * rng.standard_normal(len(init)))


# measured on a cpu-scale run of wu2023-init (72 runs): λ_max(K₀)/N = 0.041·d_m (LeCun), 0.047 (NTK init);
# λ_min(K₀) = 0.24 at d_m = 128 (LeCun); log-sds about the per-init log–log lines; the spread of log(L_T/L_0)
# within (compare, init, width), 0.18, sets the top mode's share sd
INIT_NOISE = {
    "lmax": 0.042,
    "lmax_sd": 0.06,
    "kappa": 4.5e-4,
    "lmin_sd_lecun": 0.115,
    "lmin_sd_he": 0.123,
    "lmin_sd_ntk": 0.173,
    "dec_sd": 0.13,
    "share_sd": 0.1,
}


def calibration(same: list[dict]) -> dict:
    """The calibration stage of wu2023-init (the median step-0 λ_max(K₀) of the same-γ runs per
    (init, width)), answered from the kernel model without scatter."""
    cols = frame(same)
    lmax, _ = init_kernel(INIT_THEORY, INIT_NOISE | {"lmax_sd": 0.0}, cols, np.random.default_rng(0))
    return cols | {"trace_lambda_max": (lmax * cols["data.N"])[:, None]}


def simulate_init(world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    cols = frame(cells)
    n = len(cells)
    lmax, lmin = init_kernel(world, noise, cols, rng)
    lr = cols["train.lr"].astype(float)
    ones = np.ones(n)
    cols |= runs(world, noise, cols, lr * lmax, lr * lmin, 0.1 * ones, 0.1 * ones, ones, 0.3 * ones, rng)
    return with_run_columns(cols, spec)


INIT_THEORY = GEOMETRIC | {"lmin": {"lecun": 1.0, "he": 1.0, "ntk": 0.0}, "ntk_cond": 0.5}


def init_design(cells) -> Design:
    """``cells``: the staged cells, ``staged(exp.stages(spec), calibration)``."""
    w = INIT_THEORY
    speed_ratio = ClaimAudit(
        "speed-ratio",
        Hypothesis(
            "NTK init's λ_min/λ_max(K₀) half LeCun/He's (better conditioned; size assumed)",
            "the claim's direction; the theory is silent at a fixed γ·λ_max/N",
            w,
        ),
        Hypothesis(
            "equal λ_min/λ_max(K₀) under every init", "no effect of the init on the conditioning", w | {"ntk_cond": 1.0}
        ),
    )
    return Design(
        simulate=simulate_init,
        claims=(*h_lmin(w), h_speed_gamma(w), speed_ratio, h_stability(w)),
        noise=INIT_NOISE,
        noise_source="default: measured on a cpu-scale run of wu2023-init (72 runs: kernel scales per init, "
        "log-scatter of λ_min(K₀) and λ_max(K₀), spread of log(L_T/L_0)); the loss wiggle as wu2023-fig1's",
        cells=cells,
    )


# ---------------------------------------------------------------- encoder-mnist


# λ_max(K₀)/N and λ_min(K₀)/N at width 16, per (init, α), and NTK init's λ_max(K₀) over LeCun's there.
# The encoder: read off the encoder-mnist docstring's cpu run and pilot (γ = 0.5: ratio ≈ 1.25 for LeCun at
# α = 1/2, ≈ 0.07 at d_m = 256 under α = 1; L_T/L_0 gives u). The ViT: the vit-mnist docstring's pilot spectra.
MNIST_LEVELS = {
    "lmax": {("lecun", 0.5): 2.5, ("he", 0.5): 2.5 * HE, ("lecun", 1.0): 0.32, ("he", 1.0): 0.32 * HE},
    "lmin": {("lecun", 0.5): 0.014, ("he", 0.5): 0.014 * HE, ("lecun", 1.0): 0.0093, ("he", 1.0): 0.0118},
    "ntk": 1 / D_REF,
}
VIT_MNIST_LEVELS = {
    "lmax": {("lecun", 0.5): 93.4, ("he", 0.5): 107.0, ("lecun", 1.0): 65.3, ("he", 1.0): 156.0},
    "lmin": {("lecun", 0.5): 0.0029, ("he", 0.5): 0.0087, ("lecun", 1.0): 0.0016, ("he", 1.0): 0.0042},
    "ntk": 0.5,
}


def mnist_kernel(world: dict, noise: dict, cols: dict, rng, levels: dict) -> tuple[np.ndarray, np.ndarray]:
    """λ_max(K₀)/N ∝ d_m^0.7 (LeCun/He; measured 6.6 … 7.9× over 16×), NTK init ``levels["ntk"]``
    × LeCun's at d_m = 16, flat; λ_min/N ∝ (max(d_m, N)/max(16, N))^slope, NTK init's
    conditioning × LeCun's."""
    from attnlab.experiments.wu2023.analysis import width_of

    init, alpha = cols["model.init"], cols["model.alpha"].astype(float)
    d_m, N = width_of(cols).astype(float), cols["data.N"].astype(float)
    key = lambda i, a: ("lecun" if i == "ntk" else i, float(a))
    lmax16 = np.array([levels["lmax"][key(i, a)] for i, a in zip(init, alpha, strict=True)])
    lmin16 = np.array([levels["lmin"][key(i, a)] for i, a in zip(init, alpha, strict=True)])
    ntk = init == "ntk"
    lmax = np.where(ntk, lmax16 * levels["ntk"], lmax16 * (d_m / D_REF) ** noise["growth"])
    lmin16 = np.where(ntk, world["ntk_cond"] * lmin16 * levels["ntk"], lmin16)
    slope = np.array([world["lmin"][i] for i in init], float)
    lmin = lmin16 * (np.maximum(d_m, N) / np.maximum(D_REF, N)) ** slope
    n = len(init)
    return lmax * lognormal(rng, noise["lmax_sd"], n), lmin * lognormal(rng, noise["lmin_sd"], n)


def simulate_mnist(
    world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator, levels: dict = MNIST_LEVELS
) -> dict:
    from attnlab.experiments.wu2023.analysis import alpha_of, width_of

    cols = frame_union(cells)
    cols["model.alpha"] = alpha_of(cols)
    n = len(cells)
    lmax, lmin = mnist_kernel(world, noise, cols, rng, levels)

    lr, d_m, alpha = cols["train.lr"].astype(float), width_of(cols).astype(float), cols["model.alpha"].astype(float)
    width = (d_m / D_REF) ** world["drift"]
    one = np.where(alpha == 1.0, world["alpha_drift"], 1.0)  # drift under τ₀ = d_m^−1 relative to d_m^−1/2
    KD = noise["kernel_level"] * width * one * lognormal(rng, noise["kernel_sd"], n)
    WD = noise["weight_level"] * width * one * lognormal(rng, noise["weight_sd"], n)
    slope = np.where(alpha == 1.0, world["logit_a1"], 0.0)  # logit std at θ_T: ℓ·d_m^slope (τ₀ ratio d_m^−1/2)
    sd = np.where(alpha == 1.0, noise["logit_sd_a1"], noise["logit_sd_half"])
    logit = noise["logit_level"] * d_m**slope * np.exp(sd * rng.standard_normal(n))
    tv = tv_of(logit, noise["tv_level"], 1.0) * lognormal(rng, noise["tv_sd"], n)
    cols |= runs(world, noise, cols, lr * lmax, lr * lmin, KD, WD, logit, tv, rng)
    cols |= {"train_error": np.zeros(n), "test_error": np.full(n, 0.05)}  # reported, never judged
    return with_run_columns(cols, spec)


MNIST_SOURCE = (
    "default: the cpu-scale run and pilot reported in the encoder-mnist docstring (ratios, L_T/L_0, "
    "drift and logit slope intervals over 3 … 9 repeats, attention TV 0.42 vs 0.019 at d_m = 256)"
)
VIT_MNIST_SOURCE = (
    "default: the kernel levels of the vit-mnist docstring's pilot (K₀ spectra at D = 16, 64, 256); "
    "the scatter, drift and logit levels the encoder's (encoder-mnist docstring)"
)
MNIST_THEORY = INIT_THEORY | {"alpha_drift": 0.5, "logit_a1": -0.5}
# scatter: per-run log-sds from the docstring's slope intervals (kernel drift 0.29 … 0.57, logit std at θ_T 0.2
# and 0.5), else wu2023-fig1's and -init's; levels at d_m = 16 (kernel drift 2.9, logit std 0.9 = 4 × 0.22 at α = 1)
MNIST_NOISE = {
    "growth": 0.7,
    "lmax_sd": 0.06,
    "lmin_sd": 0.12,
    "dec_sd": 0.13,
    "share_sd": 0.1,
    "kernel_level": 2.9,
    "kernel_sd": 0.4,
    "weight_level": 0.7,
    "weight_sd": 0.17,
    "logit_level": 0.9,
    "logit_sd_half": 0.2,
    "logit_sd_a1": 0.5,
    "tv_level": 0.5,
    "tv_sd": 0.1,
}


def mnist_design(levels: dict = MNIST_LEVELS, source: str = MNIST_SOURCE) -> Design:
    w = MNIST_THEORY
    converge = ClaimAudit(
        "converge",
        Hypothesis("geometric decay at the theorem's rate γ_eff·λ_min(K₀)/N", S_LINEAR, w),
        Hypothesis(
            "a plateau: after the top mode, the loss follows 0.9 + 0.1·e^(−t/200)",
            "no convergence (the theorem's width not reached)",
            w | {"form": "plateau"},
        ),
    )
    drift_alpha = ClaimAudit(
        "drift-alpha",
        Hypothesis(
            "kernel drift under τ₀ = d_m^−1 half that under d_m^−1/2 (size assumed)",
            "Wu et al. 2023, Sec. 4: τ₀ = d_m^−1 tends to the two-layer net's (lazier) NTK",
            w,
        ),
        Hypothesis("equal kernel drift under both scalings", "no effect of τ₀", w | {"alpha_drift": 1.0}),
    )
    no_tau = w | {"logit_a1": 0.0}
    s_tau = "Wu et al. 2023, Sec. 4: the logits scale as d_m^(1/2 − α)·‖x‖²/d; τ₀ = d_m^−1 → uniform attention"
    logits = ClaimAudit(
        "logits",
        Hypothesis("logit std ∝ d_m^−1/2 under τ₀ = d_m^−1, flat under d_m^−1/2", s_tau, w),
        Hypothesis("logit std flat under both scalings", "no effect of τ₀ on the logits", no_tau),
    )
    uniform = ClaimAudit(
        "uniform",
        Hypothesis("attention TV ≈ 0.5·tanh(logit std): near 0 under τ₀ = d_m^−1 at d_m = 256", s_tau, w),
        Hypothesis("the attention of both scalings alike (logits flat under both)", "no effect of τ₀", no_tau),
    )
    claims = (
        converge,
        h_linear(w),
        h_stability(w),
        h_drift("drift-kernel", w),
        h_drift("drift-weight", w),
        drift_alpha,
        logits,
        uniform,
        h_speed_gamma(w),
        *h_lmin(w),
    )
    return Design(
        simulate=functools.partial(simulate_mnist, levels=levels),
        claims=claims,
        noise=MNIST_NOISE,
        noise_source=source,
    )


# ---------------------------------------------------------------- width


def simulate_width(world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    cols = frame(cells)
    n = len(cells)
    N, d_m = cols["data.N"].astype(float), cols["model.d_m"].astype(float)
    # one lazy width per repeat (α, N, block, rep): log d* = level + k·(log N − centre) + σ·ε
    keys = np.column_stack([cols["model.alpha"].astype(float), N, cols["block"], cols["rep"]])
    _, group = np.unique(keys, axis=0, return_inverse=True)
    eps = rng.standard_normal(group.max() + 1)[group]
    centre_N = np.log(np.unique(N)).mean()
    log_star = noise["level"] + world["k"] * (np.log(N) - centre_N) + noise["sigma"] * eps
    # peak drift ∝ d_m^−s about the repeat's lazy width, each run with its own scatter
    peak = (
        spec.lazy_drift * np.exp(-noise["drift_slope"] * (np.log(d_m) - log_star)) * lognormal(rng, noise["jitter"], n)
    )
    t = epochs(cols)
    rise = (1 - np.exp(-t / 50)) / (1 - np.exp(-t[-1] / 50))
    L0 = 0.5 * lognormal(rng, 0.2, n)
    reach = peak < spec.lazy_drift  # the loss-target width is descriptive: lazy runs reach it here
    ratio = np.where(reach, rng.uniform(0.01, 0.9, n), rng.uniform(1.1, 100, n)) * spec.target
    loss = L0[:, None] * ratio[:, None] ** (t / t[-1])
    return cols | {
        "train_loss": loss[:, -1],
        "trace_step": np.broadcast_to(t, (n, len(t))),
        "trace_train_loss": loss,
        "trace_kernel_drift": peak[:, None] * rise,
        "status": np.array(["cap"] * n),
    }


def width_noise(cols: dict, spec) -> dict:
    """Plug-in from a stored run, pooled over α: the level of log d_lazy at the grid's centre N and
    the scatter σ of the censored line (never k), the log–log slope of the peak drift against d_m
    and the runs' scatter about it."""
    from attnlab.experiments.wu2023 import width as W
    from attnlab.experiments.wu2023.analysis import trace

    ok = W.lazy(cols, spec.lazy_drift)
    alpha = cols["model.alpha"].astype(float)
    centre = np.log(np.unique(cols["data.N"].astype(float))).mean()
    levels, sigmas, slopes, resid = [], [], [], []
    peak = np.log(np.maximum(trace(cols, "kernel_drift").max(1), 1e-12))
    for a in np.unique(alpha):
        f = W.law(cols, ok, alpha == a, spec.level)
        if f["k"] is not None:
            levels.append(f["log d at log N = 0"] + f["k"] * centre)
            sigmas.append(f["sigma"])
        for n in np.unique(cols["data.N"]):
            s = (alpha == a) & (cols["data.N"] == n) & np.isfinite(peak) & W.finished(cols)
            x = np.log(cols["model.d_m"][s].astype(float))
            if len(np.unique(x)) >= 3:
                b, c = np.polyfit(x, peak[s], 1)
                slopes.append(-b)
                resid.extend(peak[s] - b * x - c)
    out = {}
    if levels:
        out |= {"level": float(np.mean(levels)), "sigma": float(np.mean(sigmas))}
    if slopes:
        out |= {"drift_slope": float(np.median(slopes)), "jitter": float(np.std(resid))}
    return out


def width_design() -> Design:
    src = "Wu et al. 2023, Thm. 1: d_m quadratic in N suffices (LeCun/He); a follow-up reads τ₀ = d_m^−1/2 as cubic"
    quad = Hypothesis("d_lazy ∝ N² (the quadratic width as the requirement)", src, {"k": 2.0})
    cubic = Hypothesis("d_lazy ∝ N³ (the cubic reading as the requirement)", src, {"k": 3.0})
    quartic = Hypothesis(
        "d_lazy ∝ N⁴ (faster than the cubic reading allows)", "the next integer law above the bound", {"k": 4.0}
    )
    return Design(
        simulate=simulate_width,
        claims=(
            ClaimAudit("quadratic-a0.5", quad, cubic),
            ClaimAudit("cubic-a0.5", cubic, quartic),
            ClaimAudit("quadratic-a1", quad, cubic),
        ),
        noise={"level": float(np.log(320)), "sigma": 0.39, "drift_slope": 0.98, "jitter": 0.79},
        noise_source="default: plugged in from a cpu run (widths 2 … 4096: a lazy width of 320 at the grid's centre "
        "N, σ = 0.39; peak drift ∝ d_m^−0.98 with a per-run log-scatter of 0.79); plug_in reads them from a stored run",
        plug_in=width_noise,
    )


# ---------------------------------------------------------------- ntk-limit


def simulate_limit(world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    cols = frame(cells)
    n = len(cells)
    alpha, d_m = cols["model.alpha"].astype(float), cols["model.d_m"].astype(float)
    unit = cols["data.token_norm"] == "unit"
    w = d_m / 64
    ln = lambda sd: lognormal(rng, noise[sd], n)
    # logits ∝ d_m^(1/2 − α)·‖x‖²/d: 1/d of the ‖x‖² ≈ d value for unit tokens (unless the norm has no effect)
    slope = np.where(alpha == 1.0, world["logit_a1"], world["logit_half"])
    norm = np.where(unit, world["unit_logit"], 1.0)
    logit = noise["logit_level"] * 64.0 ** (0.5 - alpha) * w**slope * norm * ln("logit_sd")
    tv = tv_of(logit, noise["tv_a"], noise["tv_b"]) * ln("tv_sd")
    # the NTK error against the τ₀ = d_m^−1 closed form: α = 1 (and unit tokens, attention near uniform) decays
    decays = (alpha == 1.0) | (unit & (world["unit_logit"] < 1))
    e_one = np.sqrt(world["floor"] ** 2 + (noise["error_level_a1"] * w ** world["error_a1"]) ** 2)
    e_half = noise["error_level_half"] * w ** world["error_half"]
    sd = np.where(decays, noise["error_sd_a1"], noise["error_sd_half"])
    err = np.where(decays, e_one, e_half) * np.exp(sd * rng.standard_normal(n))
    # reported only: the query/key share (∝ d_m^−2α, ∝ (‖x‖²/d)²) and the attention entropy
    qk = noise["qk_level"] * 64.0 ** (1 - 2 * alpha) * w ** (-2 * alpha) * norm**2 * ln("logit_sd")
    measures = {
        "ntk_error": err,
        "qk_share": qk,
        "logit_std": logit,
        "attn_tv": tv,
        "attn_entropy": np.log(cols["data.d_s"].astype(float)) - 3.2 * tv**2,
        "n_ntk": np.minimum(spec.n_ntk, cols["data.N"]),
    }
    return cols | measures


def limit_noise(cols: dict, spec) -> dict:
    """Plug-in: levels at d_m = 64 and log-scatter about the per-group log–log lines in d_m of a
    stored run (the error's per scaling, with ‖x‖² ≈ d; logit std and TV: medians over groups)."""
    alpha, d_m, norm = cols["model.alpha"].astype(float), cols["model.d_m"].astype(float), cols["data.token_norm"]
    out, sds = {}, {"logit_sd": [], "tv_sd": []}
    for a in (0.5, 1.0):
        for tn in ("d", "unit"):
            s = (alpha == a) & (norm == tn)
            x = np.log(d_m[s] / 64)
            for m in ("ntk_error", "logit_std", "attn_tv"):
                y = np.log(cols[m][s].astype(float))
                b, c = np.polyfit(x, y, 1)
                sd = float(np.std(y - b * x - c, ddof=2))
                if m == "ntk_error" and tn == "d":
                    tag = "a1" if a == 1 else "half"
                    out |= {f"error_level_{tag}": float(np.exp(c)), f"error_sd_{tag}": sd}
                elif m == "logit_std" and tn == "d" and a == 0.5:
                    out["logit_level"] = float(np.exp(c))
                if m != "ntk_error":
                    sds["logit_sd" if m == "logit_std" else "tv_sd"].append(sd)
    return LIMIT_NOISE | out | {k: float(np.median(v)) for k, v in sds.items()}


# measured on a cpu-scale run of wu2023-ntk-limit (128 cells): levels at d_m = 64, log-sds about the
# per-group lines; TV ≈ 0.74·tanh(logit std/2) and qk_share ≈ 0.027 at d_m = 64 (α = 1/2) fit all four groups
LIMIT_NOISE = {
    "error_level_a1": 0.32,
    "error_level_half": 0.94,
    "error_sd_a1": 0.12,
    "error_sd_half": 0.14,
    "logit_level": 0.97,
    "logit_sd": 0.054,
    "tv_a": 0.74,
    "tv_b": 2.0,
    "tv_sd": 0.052,
    "qk_level": 0.027,
}
LIMIT_THEORY = {
    "error_a1": -0.5,
    "floor": 0.0,
    "error_half": 0.0,
    "logit_a1": -0.5,
    "logit_half": 0.0,
    "unit_logit": 1 / 16,
}


def limit_design() -> Design:
    w = LIMIT_THEORY
    s_lim = "Wu et al. 2023, Sec. 4: under τ₀ = d_m^−1 the NTK tends to the two-layer ReLU NTK of the mean tokens"
    s_log = "Wu et al. 2023, Sec. 4: the logits scale as d_m^(1/2 − α)·‖x‖²/d"
    return Design(
        simulate=simulate_limit,
        claims=(
            ClaimAudit(
                "limit",
                Hypothesis("α = 1: error ∝ d_m^−1/2 → 0 (rate d_m^−1/2)", s_lim, w),
                Hypothesis(
                    "α = 1: the error decays to a floor 0.1 (2× tol), not to 0",
                    "another limit kernel, 10 % from the closed form",
                    w | {"floor": 0.1},
                ),
            ),
            ClaimAudit(
                "logits-a1",
                Hypothesis("α = 1: logit std ∝ d_m^−1/2", s_log, w),
                Hypothesis("α = 1: logit std flat", "no effect of τ₀ (α = 1/2's law)", w | {"logit_a1": 0.0}),
            ),
            ClaimAudit(
                "logits-a0.5",
                Hypothesis("α = 1/2: logit std flat (O(1))", s_log, w),
                Hypothesis("α = 1/2: logit std ∝ d_m^−1/2", "α = 1's law", w | {"logit_half": -0.5}),
            ),
            ClaimAudit(
                "alpha-half",
                Hypothesis(
                    "α = 1/2: the error stays O(1) (flat in d_m)",
                    "Wu et al. 2023, Sec. 4: attention stays non-trivial at every width",
                    w,
                ),
                Hypothesis(
                    "α = 1/2: the error tends to 0 at the rate d_m^−1/4",
                    "the closed form holds for α = 1/2 too, only slower",
                    w | {"error_half": -0.25},
                ),
            ),
            ClaimAudit(
                "pitfall",
                Hypothesis(
                    "logits ∝ ‖x‖²/d: unit tokens give near-uniform attention under both τ₀",
                    "the sheet's pitfall (5): the scalings separate only when ‖x‖² ≈ d",
                    w,
                ),
                Hypothesis("the token norm has no effect on the logits", "no pitfall", w | {"unit_logit": 1.0}),
            ),
        ),
        noise=LIMIT_NOISE,
        noise_source="default: a cpu-scale run of wu2023-ntk-limit (levels at d_m = 64, log-scatter about the "
        "per-group log–log lines)",
        plug_in=limit_noise,
    )


# ---------------------------------------------------------------- data-gram


@functools.lru_cache(maxsize=8)
def gaussian_rho(points: tuple[tuple[int, int], ...], draws: int = 4) -> dict[tuple[int, int], dict[str, float]]:
    """(N, patch) -> mean log ρ of the input and relu Grams of N samples of i.i.d. N(0, 1) tokens
    (d = patch², d_s = (28/patch)²), by the experiment's own :func:`.data_gram.grams` (both full
    rank: N ≤ d_s·d and no two mean tokens parallel, almost surely); each point from its own
    seed (0, N, patch), so a point's value does not depend on the others asked with it."""
    from attnlab.experiments.wu2023.data_gram import grams, spectrum_stats

    out = {}
    for N, p in points:
        rng = np.random.default_rng([0, N, p])
        G = [grams(rng.standard_normal((N, (28 // p) ** 2, p * p))) for _ in range(draws)]
        out[(N, p)] = {k: float(np.mean([np.log(spectrum_stats(g[k])["rho"]) for g in G])) for k in ("input", "relu")}
    return out


def simulate_gram(world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    cols = frame(cells)
    n = len(cells)
    N, p = cols["data.N"].astype(int), cols["data.patch"].astype(int)
    table = gaussian_rho(tuple(sorted(set(zip(N.tolist(), p.tolist(), strict=True)))))
    out = {"d": p * p, "d_s": (28 // p) ** 2}
    for k in ("input", "relu"):
        rho = np.exp([table[(a, b)][k] for a, b in zip(N, p, strict=True)]) * lognormal(rng, noise["sd"], n)
        rho = world["floor"] + world.get("factor", 1.0) * rho
        lam_mean = np.ones(n)
        out |= {
            f"{k}_rho": rho,
            f"{k}_lambda_min": rho,
            f"{k}_lambda_mean": lam_mean,
            f"{k}_lambda_max": np.full(n, 5.0),
            f"{k}_rank": N,
        }
    return cols | out


def gram_noise(cols: dict, spec) -> dict:
    """Plug-in: the median over (N, d) points of the sd of log ρ over subsets (non-singular cells)."""
    sds = []
    for k in ("input", "relu"):
        ok = cols[f"{k}_rank"].astype(int) >= cols["data.N"].astype(int)
        for key in set(zip(cols["data.N"][ok], cols["d"][ok], strict=True)):
            s = ok & (cols["data.N"] == key[0]) & (cols["d"] == key[1])
            if s.sum() >= 2:
                sds.append(np.std(np.log(cols[f"{k}_rho"][s].astype(float)), ddof=1))
    return {"sd": float(np.median(sds))}


def gram_design() -> Design:
    gauss = Hypothesis(
        "ρ of i.i.d. N(0, 1) tokens' Grams (no special structure), same N, d_s, d",
        "the sheet: λ_min/λ̄ of N i.i.d. samples falls with N for any kernel",
        {"floor": 0.0},
    )
    floor = Hypothesis(
        "bounded away from 0 beyond chance: ρ twice that of the Gaussian tokens (size assumed: the paper gives none)",
        "Wu et al. 2023, the data assumption: λ_min of the data Gram bounded away from 0",
        {"floor": 0.0, "factor": 2.0},
    )
    return Design(
        simulate=simulate_gram,
        claims=tuple(ClaimAudit(f"{c}-{k}", floor, gauss) for k in ("input", "relu") for c in ("floor", "trend")),
        noise={"sd": 0.11},
        noise_source="default: the median sd of log ρ over subsets per (N, d) of a cpu-scale run of wu2023-data-gram",
        plug_in=gram_noise,
    )


# ---------------------------------------------------------------- fig1-protocol: γ = 1 under each candidate


def frame_union(cells: list[dict]) -> dict[str, np.ndarray]:
    """:func:`frame` over cells whose keys differ (a field at its default is absent from a cell; two
    data models have different fields): every key, None where a cell lacks it."""
    keys = list(dict.fromkeys(k for c in cells for k in c))
    return {k: np.array([c.get(k) for c in cells]) for k in keys}


def protocol_kernel(world: dict, noise: dict, cols: dict, rng) -> tuple[np.ndarray, np.ndarray]:
    """(λ_max(K₀)/N, u) per run at γ = 1 under ½·mean: λ_max ∝ d_m from its level at d_m = 16 per (τ₀,
    token norm), and the slow rate u (the decay of the run's loss after the top mode, set by
    λ_min(K_t)/N) ∝ d_m^slope from its level at d_m = 16 (the world's slope: 1 where λ_min(K₀) ∝
    d_m), each × log-normal scatter."""
    alpha, d_m = cols["model.alpha"].astype(float), cols["model.d_m"].astype(float)
    norm = cols["data.token_norm"]
    level = lambda what: np.array([noise[f"{what}_a{a:g}_{n}"] for a, n in zip(alpha, norm, strict=True)])
    w = d_m / D_REF
    n = len(alpha)
    lmax = level("lmax16") * w * lognormal(rng, noise["lmax_sd"], n)
    u = level("u16") * w ** world["lmin_slope"] * lognormal(rng, noise["u_sd"], n)
    return lmax, u


def simulate_protocol(world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    """GD runs (:func:`runs`) at ratio r = g·λ_max(K₀) and slow rate g·N·u, g = γ/N under mean and γ
    under sum (N times larger): the ½·sum runs at the same kernel sit N× further up."""
    from attnlab.experiments.wu2023.analysis import gain

    cols = frame_union(cells)
    n = len(cells)
    lmax, u = protocol_kernel(world, noise, cols, rng)
    g = gain(cols) * cols["data.N"].astype(float)  # γ under mean (per λ/N), γ·N under sum
    ones = np.ones(n)
    alpha, d_m = cols["model.alpha"].astype(float), cols["model.d_m"].astype(float)
    logit = d_m ** (0.5 - alpha)
    cols |= runs(world, noise, cols, g * lmax, g * u, ones, ones, logit, tv_of(logit, 0.5, 1.0), rng)
    return with_run_columns(cols, spec)


# measured on the cpu run of wu2023-fig1-protocol (96 runs): λ_max(K₀)/N at d_m = 16 (medians per τ₀ and token
# norm; ∝ d_m^0.93 … 0.96 across widths), the slow rate u at d_m = 16 from the median L_T/L_0 of the trained runs
# ((1 − w)(1 − u)^{2T} = L_T/L_0, w = ½), the log-sds of λ_max and λ_min(K₀) about their lines in d_m
PROTOCOL_NOISE = {
    "lmax16_a0.5_d": 0.745,
    "lmax16_a1_d": 0.421,
    "lmax16_a0.5_unit": 0.0238,
    "lmax16_a1_unit": 0.0238,
    "u16_a0.5_d": 7.8e-3,
    "u16_a1_d": 4.5e-3,
    "u16_a0.5_unit": 2.1e-3,
    "u16_a1_unit": 2.0e-3,
    "lmax_sd": 0.12,
    "u_sd": 0.18,
    "dec_sd": 0.13,
    "share_sd": 0.1,
}
PROTOCOL_THEORY = GEOMETRIC | {"lmin_slope": 1.0}


def protocol_design() -> Design:
    w = PROTOCOL_THEORY
    s_order = (
        "Wu et al. 2023, Fig. 1 (a) at γ = 1: the loss curves ordered by width; Thm. 1: λ_min(K₀) ∝ d_m "
        "under LeCun, so at a fixed γ the rate g·λ_min(K₀) grows with d_m"
    )
    h1 = Hypothesis(
        "λ_min(K₀) ∝ d_m (LeCun): at a fixed γ wider nets converge faster where the step is stable", s_order, w
    )
    h0 = Hypothesis(
        "λ_min(K₀) flat in d_m: at a fixed γ the width has no effect on the rate",
        "no width ordering (the curves' order random per repeat)",
        w | {"lmin_slope": 0.0},
    )
    ordering = tuple(ClaimAudit(f"ordering-{r}-{n}", h1, h0) for r in ("mean", "sum") for n in ("d", "unit"))
    protocol = ClaimAudit(
        "protocol",
        Hypothesis("a candidate normalisation trains at every width with the width ordering", s_order, w),
        Hypothesis(
            "no candidate does", "the normalisation of the published run is not stated", w | {"lmin_slope": 0.0}
        ),
    )
    return Design(
        simulate=simulate_protocol,
        claims=(h_stability(w), *ordering, protocol),
        noise=PROTOCOL_NOISE,
        noise_source="default: λ_max(K₀)/N and the slow rate at d_m = 16 per (τ₀, token norm) and their scatter, "
        "measured on a cpu-scale run of wu2023-fig1-protocol; the loss wiggle and the top mode's share as wu2023-fig1's",
    )


# ---------------------------------------------------------------- scaling: τ₀ = d_m^−1/2 against d_m^−1, paired


def simulate_scaling(world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    """Per data set, the step ratio r and slow rate u of τ₀ = d_m^−1/2 at d_m = 16 (``noise``) ×
    (d_m/16)^slope (the width-normalised step: r flat, u falling as λ_min(K₀) grows slower than d_m);
    under τ₀ = d_m^−1 both × the world's ``alpha_factor``. The two cells of a pair (data set, d_m,
    block, rep) share their draws: a common log-normal factor (``pair_sd``) on u and r and the top
    mode's share of L_0, and each run its own factor (``run_sd``) and loss wiggle."""
    cols = frame_union(cells)
    n = len(cells)
    ds = np.where(cols["data.name"] == "images", "mnist", "synthetic")
    alpha, d_m = cols["model.alpha"].astype(float), cols["model.d_m"].astype(float)
    pair = [(a, w, b, p) for a, w, b, p in zip(ds, d_m, cols["block"], cols["rep"], strict=True)]
    shared = {k: rng.standard_normal(3) for k in dict.fromkeys(pair)}
    common = np.array([shared[k] for k in pair]).reshape(n, 3)
    level = lambda what: np.array([noise[f"{what}_{x}"] for x in ds])
    w = d_m / D_REF
    factor = np.where(alpha == 1.0, world["alpha_factor"], 1.0)
    scatter = lambda j: np.exp(noise["pair_sd"] * common[:, j] + noise["run_sd"] * rng.standard_normal(n))
    r = level("r16") * w ** level("r_slope") * factor * scatter(0)
    u = level("u16") * w ** level("u_slope") * factor * scatter(1)
    ones = np.ones(n)
    logit = d_m ** (0.5 - alpha)
    # the top mode's share of L_0 is the data's (the residual's projection on K₀'s top direction): shared by a pair
    cols |= runs(world, noise, cols, r, u, ones, ones, logit, tv_of(logit, 0.5, 1.0), rng, share=common[:, 2])
    share = np.where(alpha == 1.0, 0.0, 0.3)  # reported only
    cols |= {
        "trace_ntk_share_W_Q": np.broadcast_to(share[:, None], cols["trace_train_loss"].shape),
        "trace_ntk_share_W_K": np.broadcast_to(share[:, None], cols["trace_train_loss"].shape),
    }
    return with_run_columns(cols, spec)


# measured on the cpu run of wu2023-scaling (42 runs, τ₀ = d_m^−1/2): the step ratio at d_m = 16 and its log–log
# slope in d_m, the slow rate u at d_m = 16 from the median L_T/L_0 ((1 − w)(1 − u)^{2T}, w = ½) and its slope;
# the scatter of log u about its (data set, τ₀, width) mean: ≈ 0.18, ≈ 0.1 of it shared by a pair (synthetic)
SCALING_NOISE = {
    "r16_synthetic": 0.745,
    "r_slope_synthetic": -0.036,
    "u16_synthetic": 7.8e-3,
    "u_slope_synthetic": -0.62,
    "r16_mnist": 1.25,
    "r_slope_mnist": -0.35,
    "u16_mnist": 7.6e-3,
    "u_slope_mnist": -0.49,
    "pair_sd": 0.1,
    "run_sd": 0.15,
    "dec_sd": 0.13,
    "share_sd": 0.1,
}


def scaling_design() -> Design:
    w = GEOMETRIC | {"alpha_factor": 0.5}
    h1 = lambda data: Hypothesis(
        f"{data}: K₀ under τ₀ = d_m^−1 half that under d_m^−1/2 (λ_min and λ_max; size assumed)",
        "Wu et al. 2023, Sec. 4: under d_m^−1 the attention blocks' share of the NTK vanishes; the sheet measured "
        "λ_max(K₀) under d_m^−1 at ≈ ½ that under d_m^−1/2",
        w,
    )
    h0 = lambda data: Hypothesis(
        f"{data}: the same K₀ under both scalings", "no effect of τ₀ on the speed", w | {"alpha_factor": 1.0}
    )
    return Design(
        simulate=simulate_scaling,
        claims=(
            ClaimAudit("faster-synthetic", h1("synthetic"), h0("synthetic")),
            ClaimAudit("faster-mnist", h1("MNIST"), h0("MNIST")),
        ),
        noise=SCALING_NOISE,
        noise_source="default: levels and scatter measured on a cpu-scale run of wu2023-scaling (the τ₀ = d_m^−1/2 "
        "runs' step ratio and fitted rate per width; the paired and own scatter of log u); the loss wiggle and the "
        "top mode's share as wu2023-fig1's",
    )
