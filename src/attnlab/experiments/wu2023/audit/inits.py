"""Audit design of ``wu2023-init``: the kernel scales per init (λ_max(K₀) ∝ d_m under LeCun/He, He's
× ``HE``, flat under NTK init), λ_min(K₀^{w_O}) (the output weights' block) per :func:`block_law`
and λ_min(K₀) = that + the other blocks' width-independent part (the operating point of a pilot of K₀
spectra, or a stored run's: :func:`lmin_levels`), its calibration stage answered from that kernel
model, and GD runs (:mod:`.runs`) at each cell's lr; H1 / H0 of lmin-lecun (the one audited
prediction: lmin-he, lmin-ntk, speed-gamma and stability are checks, speed-ratio a measurement),
speed-gamma and stability from :mod:`.hypotheses`, and of speed-ratio: NTK init's λ_min/λ_max(K₀)
half LeCun/He's (size assumed: the theory is silent) / equal."""

from __future__ import annotations

import warnings

import numpy as np

from attnlab.audit import ClaimAudit, Design, Hypothesis
from attnlab.experiments.wu2023.analysis import INITS, per_run, width_of
from attnlab.experiments.wu2023.audit.hypotheses import GEOMETRIC, h_lmin, h_speed_gamma, h_stability
from attnlab.experiments.wu2023.audit.runs import frame, lognormal, runs, with_run_columns

HE = 3.7  # He's λ_max(K₀) over LeCun's, from a cpu-scale run of wu2023-init
SATURATE = 20  # the saturating form's width (× N)


def block_law(world: dict, noise: dict, init, d_m, N, rng) -> np.ndarray:
    """λ_min(K₀^{w_O})/N per run: 0 below N (the block H Hᵀ has rank ≤ d_m < N); from N on

        level_i · form(d_m) · (d_m/10N)^(k_i − 1) × log-normal scatter (``block_sd``),

    level_i = ``block10N`` (LeCun's at d_m = 10N), × ``he_block`` (He), / 10N (NTK init: LeCun's / d_m,
    the construction: the same features, τ₁² = 1/d_m); k_i = ``world["lmin"][i]`` (1, 1, 0 in theory);
    ``world["block"]`` the form:

        power       form = d_m/10N                                  (the rule's family)
        deficit     form = (d_m − c·N)/(10N − c·N), c = ``deficit``  (∝ d_m with a rank deficit)
        saturating  form = (d_m/10N)·(1 + 10/s)/(1 + d_m/(s·N)), s = SATURATE  (flat past ≈ sN)"""
    d, N = np.asarray(d_m, float), np.asarray(N, float)
    x = d / (10 * N)
    form = world.get("block", "power")
    if form == "power":
        shape = x
    elif form == "deficit":
        c = noise["deficit"]
        shape = np.clip(d - c * N, 0, None) / ((10 - c) * N)
    elif form == "saturating":
        shape = x * (1 + 10 / SATURATE) / (1 + d / (SATURATE * N))
    else:
        raise ValueError(f"unknown block form {form!r}")
    k = np.array([world["lmin"][i] for i in init], float)
    level = noise["block10N"] * np.select([init == "he", init == "ntk"], [noise["he_block"], 1 / (10 * N)], 1.0)
    block = level * shape * x ** (k - 1) * lognormal(rng, noise["block_sd"], len(d))
    return np.where(d < N, 0.0, block)


def init_kernel(world: dict, noise: dict, cols: dict, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(λ_max(K₀)/N, λ_min(K₀)/N, λ_min(K₀^{w_O})/N) per run, synthetic data, τ₀ = d_m^−1/2: λ_max/N =
    A·d_m (LeCun; He ×HE; NTK init A, flat); the block per :func:`block_law`; λ_min(K₀) = the block
    + q_i, the width-independent part of the W_Q, W_K, W_V blocks (× log-normal ``q_sd``; NTK init's
    × ntk_cond/½: its conditioning against LeCun's)."""
    init, d_m, N = cols["model.init"], cols["model.d_m"].astype(float), cols["data.N"].astype(float)
    A = noise["lmax"]
    scale = np.select([init == "he", init == "ntk"], [HE, 1.0 / d_m], 1.0)
    lmax = A * d_m * scale * lognormal(rng, noise["lmax_sd"], len(init))
    block = block_law(world, noise, init, d_m, N, rng)
    q = np.array([noise[f"q_{i}"] for i in init]) * np.where(init == "ntk", world["ntk_cond"] / 0.5, 1.0)
    return lmax, q * lognormal(rng, noise["q_sd"], len(init)) + block, block


# λ_max(K₀)/N per d_m (A) from a cpu-scale run of wu2023-init, its log-sd; the rest from a pilot of K₀ spectra (LeCun,
# He, NTK init at d_m = 128 … 4096, N = 100, 3 draws): λ_min(K₀^{w_O})/N at 10N (0.61/N) and its log-scatter about the
# law, He's block over LeCun's, its rank deficit c (a·(d_m − c·N) fits it from 256 on), q_i = λ_min(K₀) −
# λ_min(K₀^{w_O}) (/N) and its scatter; the spread of log(L_T/L_0)
# within (compare, init, width) sets the top mode's share sd
INIT_NOISE = {
    "lmax": 0.042,
    "lmax_sd": 0.06,
    "block10N": 6.1e-3,
    "block_sd": 0.08,
    "he_block": 3.0,
    "deficit": 1.6,
    "q_lecun": 2.8e-3,
    "q_he": 1.4e-2,
    "q_ntk": 1.0e-4,
    "q_sd": 0.15,
    "dec_sd": 0.13,
    "share_sd": 0.1,
}


def lmin_levels(cols: dict, spec, base: dict, q: bool = True) -> dict:
    """Plug-in of the λ_min levels of a stored run (``base`` with them replaced where the run has
    them): LeCun's block at 10N and its log-scatter about one log–log line over the widths ≥
    ``slope_from`` (10N), its rank deficit c of a·(d_m − c·N) fitted to LeCun's per-width medians
    there (kept in [0, 2]: beyond, a·(d_m − c·N) is not yet ∝ d_m at 10N), He's block over LeCun's
    there (median of the per-width ratios of medians), and with ``q`` the part of λ_min(K₀) above
    the block per init (median, /N). The other noise levels stay at ``base``'s."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = per_run(cols, spec.unstable_at)
    width, init = width_of(cols).astype(float), np.asarray(cols["model.init"])
    N = float(np.max(cols["data.N"]))
    w_min = getattr(spec, "slope_from", None) or 10 * N
    blk, whole = np.asarray(r["lambda_min_w_O_0"], float), np.asarray(r["lambda_min_0"], float)
    out = dict(base)
    ok = np.isfinite(blk) & (blk > 0) & (width >= w_min)
    s = ok & (init == "lecun")
    if len(np.unique(width[s])) >= 2 and s.sum() >= 4:
        x, y = np.log(width[s] / (10 * N)), np.log(blk[s] / N)
        k, c = np.polyfit(x, y, 1)
        out["block10N"], out["block_sd"] = float(np.exp(c)), float(np.std(y - k * x - c, ddof=2))
        ratios = [
            np.median(blk[ok & (init == "he") & (width == w)]) / np.median(blk[s & (width == w)])
            for w in np.unique(width[s])
            if (ok & (init == "he") & (width == w)).any()
        ]
        if ratios:
            out["he_block"] = float(np.median(ratios))
        ws = np.unique(width[s])
        a, b = np.polyfit(ws, [np.median(blk[s & (width == w)]) for w in ws], 1)
        if a > 0:
            out["deficit"] = float(np.clip(-b / (a * N), 0.0, 2.0))
    if q:
        for name in INITS:
            part = (whole - np.where(np.isfinite(blk), blk, 0.0))[(init == name) & np.isfinite(whole)]
            if len(part) and np.median(part) > 0:
                out[f"q_{name}"] = float(np.median(part) / N)
    return out


def calibration(same: list[dict]) -> dict:
    """The calibration stage of wu2023-init (the median step-0 λ_max(K₀) of the same-γ runs per
    (init, width)), answered from the kernel model without scatter."""
    cols = frame(same)
    lmax, _, _ = init_kernel(INIT_THEORY, INIT_NOISE | {"lmax_sd": 0.0}, cols, np.random.default_rng(0))
    return cols | {"trace_lambda_max": (lmax * cols["data.N"])[:, None]}


def simulate_init(world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    cols = frame(cells)
    n = len(cells)
    lmax, lmin, block = init_kernel(world, noise, cols, rng)
    lr = cols["train.lr"].astype(float)
    ones = np.ones(n)
    cols |= runs(world, noise, cols, lr * lmax, lr * lmin, 0.1 * ones, 0.1 * ones, ones, 0.3 * ones, rng)
    cols["trace_lambda_min_w_O"] = np.broadcast_to((block * cols["data.N"])[:, None], cols["trace_lambda_min"].shape)
    return with_run_columns(cols, spec)


INIT_THEORY = GEOMETRIC | {"lmin": {"lecun": 1.0, "he": 1.0, "ntk": 0.0}, "ntk_cond": 0.5, "block": "power"}


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
        noise_source="default: λ_max(K₀) and the spread of log(L_T/L_0) measured on a cpu-scale run of wu2023-init; "
        "λ_min(K₀^{w_O}) at 10N, its scatter, He's over LeCun's and the other blocks' part of λ_min(K₀) from a pilot "
        "of K₀ spectra (N = 100, d_m = 128 … 4096, 3 draws); the loss wiggle as wu2023-fig1's",
        plug_in=lambda cols, spec: lmin_levels(cols, spec, INIT_NOISE),
        cells=cells,
    )
