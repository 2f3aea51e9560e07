"""Audit design of ``wu2023-init``: the kernel scales per init (λ_max(K₀) ∝ d_m under LeCun/He, He's
× ``HE``, flat under NTK init; λ_min(K₀) ∝ max(d_m, N) under LeCun/He, flat under NTK init), its
calibration stage answered from that kernel model, and GD runs (:mod:`.runs`) at each cell's lr;
H1 / H0 of lmin-*, speed-gamma and stability from :mod:`.hypotheses`, and of speed-ratio: NTK init's
λ_min/λ_max(K₀) half LeCun/He's (size assumed: the theory is silent) / equal."""

from __future__ import annotations

import numpy as np

from attnlab.audit import ClaimAudit, Design, Hypothesis
from attnlab.experiments.wu2023.audit.hypotheses import GEOMETRIC, h_lmin, h_speed_gamma, h_stability
from attnlab.experiments.wu2023.audit.runs import frame, lognormal, runs, with_run_columns

HE = 3.7  # He's λ_max(K₀) over LeCun's, from a cpu-scale run of wu2023-init


def init_kernel(world: dict, noise: dict, cols: dict, rng) -> tuple[np.ndarray, np.ndarray]:
    """(λ_max(K₀)/N, λ_min(K₀)/N) per run, synthetic data, τ₀ = d_m^−1/2: λ_max/N = A·d_m
    (LeCun; He ×HE; NTK init A, flat), λ_min/N = κ·A·N·(max(d_m, N)/N)^slope (LeCun; He ×HE;
    NTK init: its conditioning ``ntk_cond`` × LeCun's, κ·A) × log-normal scatter. λ_min under
    LeCun/He is the theorem's ∝ d_m in its regime d_m ≥ N and stays at the other blocks' O(1) level
    below N, where the w_O block (rank ≤ d_m) adds nothing."""
    init, d_m, N = cols["model.init"], cols["model.d_m"].astype(float), cols["data.N"].astype(float)
    A, kappa = noise["lmax"], noise["kappa"]
    scale = np.select([init == "he", init == "ntk"], [HE, 1.0 / d_m], 1.0)
    lmax = A * d_m * scale
    slope = np.array([world["lmin"][i] for i in init], float)
    base = np.where(init == "ntk", world["ntk_cond"] * kappa * A, np.where(init == "he", HE, 1.0) * kappa * A * N)
    lmin = base * (np.maximum(d_m, N) / N) ** slope
    sd = np.array([noise[f"lmin_sd_{i}"] for i in init])
    return lmax * lognormal(rng, noise["lmax_sd"], len(init)), lmin * np.exp(sd * rng.standard_normal(len(init)))


# from a cpu-scale run of wu2023-init: the level of λ_max(K₀)/N per d_m and of λ_min(K₀), the log-sds about the
# per-init log–log lines; the spread of log(L_T/L_0) within (compare, init, width) sets the top mode's share sd
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
