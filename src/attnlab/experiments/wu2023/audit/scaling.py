"""Audit design of ``wu2023-scaling``: per data set the ratio and slow rate of τ₀ = d_m^−1/2 at their
measured levels and width slopes (the width-normalised step); under d_m^−1 both × a factor: H1 ½
(the sheet's λ_max measurement; size assumed), H0 1 (no effect of τ₀). The two runs of a pair share a
log-normal factor and the top mode's share of L_0 (common draws), each has its own factor and loss
wiggle (:mod:`.runs`)."""

from __future__ import annotations

import numpy as np

from attnlab.audit import ClaimAudit, Design, Hypothesis
from attnlab.experiments.wu2023 import D_REF
from attnlab.experiments.wu2023.audit.hypotheses import GEOMETRIC
from attnlab.experiments.wu2023.audit.runs import frame_union, runs, tv_of, with_run_columns


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


# from the cpu run of wu2023-scaling (τ₀ = d_m^−1/2): the step ratio at d_m = 16 and its log–log slope in d_m, the
# slow rate u at d_m = 16 from the median L_T/L_0 ((1 − w)(1 − u)^{2T}, w = ½) and its slope; the scatter of log u
# about its (data set, τ₀, width) mean, the part a pair shares (synthetic) and each run's own
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
