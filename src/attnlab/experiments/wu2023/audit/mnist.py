"""Audit design of ``wu2023-encoder-mnist`` and ``-vit-mnist``: the kernel levels at width 16 per
(init, τ₀), growing with the width, and GD runs (:mod:`.runs`) with drifts, logit std and attention
TV per τ₀. H1 / H0 beyond :mod:`.hypotheses`: converge, geometric at the theorem's rate / a plateau;
drift-alpha, kernel drift under τ₀ = d_m^−1 half that under d_m^−1/2 (size assumed) / equal; logits
and uniform, logit std ∝ d_m^(1/2 − α) and the attention TV following it / τ₀ without effect."""

from __future__ import annotations

import functools

import numpy as np

from attnlab.audit import ClaimAudit, Design, Hypothesis
from attnlab.experiments.wu2023 import D_REF
from attnlab.experiments.wu2023.analysis import alpha_of, width_of
from attnlab.experiments.wu2023.audit.hypotheses import (
    S_LINEAR,
    h_drift,
    h_linear,
    h_lmin,
    h_speed_gamma,
    h_stability,
)
from attnlab.experiments.wu2023.audit.inits import HE, INIT_THEORY, block_law, lmin_levels
from attnlab.experiments.wu2023.audit.runs import frame_union, lognormal, runs, tv_of, with_run_columns

# λ_max(K₀)/N and λ_min(K₀)/N at width 16, per (init, α), and NTK init's λ_max(K₀) over LeCun's there. The
# encoder's from its cpu run and pilot of K₀ spectra (L_T/L_0 gives λ_min); the ViT's from its pilot spectra.
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


def mnist_kernel(world: dict, noise: dict, cols: dict, rng, levels: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(λ_max(K₀)/N, λ_min(K₀)/N, λ_min(K₀^{w_O})/N): λ_max(K₀)/N ∝ d_m^growth (LeCun/He;
    ``noise["growth"]``), NTK init ``levels["ntk"]`` × LeCun's at d_m = 16, flat; the w_O block per
    :func:`.inits.block_law` (0 below N); λ_min/N = the other blocks' part, ∝ (max(d_m, N)/max(16,
    N))^slope from its level at 16 (NTK init's conditioning × LeCun's), + the block."""
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
    block = block_law(world, noise, init, d_m, N, rng)
    return lmax * lognormal(rng, noise["lmax_sd"], n), lmin * lognormal(rng, noise["lmin_sd"], n) + block, block


def simulate_mnist(
    world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator, levels: dict = MNIST_LEVELS
) -> dict:
    cols = frame_union(cells)
    cols["model.alpha"] = alpha_of(cols)
    n = len(cells)
    lmax, lmin, block = mnist_kernel(world, noise, cols, rng, levels)

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
    cols["trace_lambda_min_w_O"] = np.broadcast_to(
        (block * cols["data.N"].astype(float))[:, None], cols["trace_lambda_min"].shape
    )
    cols |= {"train_error": np.zeros(n), "test_error": np.full(n, 0.05)}  # reported, never judged
    return with_run_columns(cols, spec)


MNIST_SOURCE = (
    "default: a cpu-scale run of wu2023-encoder-mnist and its pilot of K₀ spectra (ratios, L_T/L_0, "
    "drift and logit slope intervals over 3 … 9 repeats, attention TV 0.42 vs 0.019 at d_m = 256)"
)
VIT_MNIST_SOURCE = (
    "default: the kernel levels of a pilot of the ViT's K₀ spectra at D = 16, 64, 256; "
    "the scatter, drift and logit levels those of wu2023-encoder-mnist"
)
MNIST_THEORY = INIT_THEORY | {"alpha_drift": 0.5, "logit_a1": -0.5}
# scatter: per-run log-sds from the slope intervals of the encoder's cpu run (kernel drift, logit std at θ_T), else
# wu2023-fig1's and -init's; the drift and logit levels at d_m = 16
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
    # λ_min(K₀^{w_O}) (LeCun, both τ₀) at 10N from the encoder's 0-step cells (0.48, 0.98, 1.97 at d_m = 1024 … 4096)
    # and its scatter, its rank deficit; He's over LeCun's as the synthetic pilot's (not measured on MNIST: a check)
    "block10N": 4.7e-3,
    "block_sd": 0.1,
    "he_block": 3.0,
    "deficit": 0.4,  # a·(d_m − c·N) through those three
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
        plug_in=lambda cols, spec: lmin_levels(cols, spec, MNIST_NOISE, q=False),
    )
