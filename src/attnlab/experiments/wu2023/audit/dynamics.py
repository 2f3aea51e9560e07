"""Audit design of ``wu2023-fig1`` and ``-fig9``: GD runs (:mod:`.runs`) at the step ratio and slow
rate of their cpu runs, scaled by γ_eff·d_m/16 (so step_norm = none reproduces its ∝ d_m ratio),
drifts at T ∝ d_m^slope × log-normal scatter; H1 / H0 of linear, stability and drift-* from
:mod:`.hypotheses`; ``plug_in`` reads the nuisance levels from a stored run."""

from __future__ import annotations

import numpy as np

from attnlab.audit import Design
from attnlab.experiments.wu2023 import D_REF
from attnlab.experiments.wu2023.analysis import per_run, rate_fits, trace
from attnlab.experiments.wu2023.audit.hypotheses import GEOMETRIC, h_drift, h_linear, h_stability
from attnlab.experiments.wu2023.audit.runs import frame, lognormal, runs, tv_of, with_run_columns


def dynamics_noise(cols: dict, spec) -> dict:
    """Plug-in: the nuisance levels of a stored fig1/fig9 run (medians and log-sds of the step
    ratio and of the fitted slow rate u = 1 − √ρ, the median log-sd of the decrements of log L_t
    over the fit window, the scatter of the log drifts about their log–log line in d_m)."""
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
    if "drift_turn" in world:  # falls to the turn, then rises at the opposite slope
        turn = world["drift_turn"]
        width = np.where(d_m <= turn, width, (turn / D_REF) ** world["drift"] * (d_m / turn) ** -world["drift"])
    KD = noise["kernel_level"] * width * lognormal(rng, noise["kernel_sd"], n)
    WD = noise["weight_level"] * width * lognormal(rng, noise["weight_sd"], n)
    logit = d_m ** (0.5 - alpha) * lognormal(rng, 0.05, n)  # ∝ d_m^(1/2 − α)·‖x‖²/d, ‖x‖² ≈ d
    cols |= runs(world, noise, cols, r, u, KD, WD, logit, tv_of(logit, 0.5, 1.0), rng)
    return with_run_columns(cols, spec)


def dynamics_design(ratio: float, kernel_level: float, weight_level: float) -> Design:
    """fig1 (τ₀ = d_m^−1/2) and fig9 (d_m^−1): ``ratio`` the median γ_eff·λ_max(K₀)/N and the
    drift levels at d_m = 16 of their cpu runs; the scatter is the one :func:`dynamics_noise`
    reads off a cpu-scale run of wu2023-fig1."""
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
        "the decrements of log L_t, drift scatter); each figure's median ratio from its own cpu-scale run",
        plug_in=lambda cols, spec: noise | dynamics_noise(cols, spec),
    )
