"""The simulated runs of the wu2023 audit designs: the cells' own columns, log-normal scatter, and the
probe traces of full-batch GD runs under the linearised dynamics (:func:`runs`), which the designs of
the trained experiments draw."""

from __future__ import annotations

import warnings

import numpy as np

from attnlab.experiments.wu2023.analysis import gain, per_run
from attnlab.train import log_schedule

BLOCKS = ("W_Q", "W_K", "W_V", "w_O")


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
    """The probe traces and final columns of GD runs: r = γ_eff λ_max(K₀)/N and u = γ_eff
    λ_min(K₀)/N per run, the drifts at T, logit std and attention TV; ``share``: the top mode's
    share w of L_0 per run (default: drawn per run).

    The linearised GD dynamics of the package docstring, r_{t+1} = (I − γ_eff K₀/N) r_t, the initial
    loss split between the top eigen-direction of K₀ (share w, ratio r) and the slowest (rate u);
    under a stability bound θ (``world["bound"]``: 2 for ½·mean (f − y)²) the step acts as 2/θ
    times it, and ``world["form"]`` sets the slow part:

        L_t / L_0 = w·|1 − 2r/θ|^{2t} + (1 − w)·s_t,   s_t = (1 − 2u/θ)^{2t}      (geometric)
                                                      s_t = 1/(1 + t/10)          (polynomial)
                                                      s_t = (1 + t/40)^−0.3       (slow-power: halves by t = 400)
                                                      s_t = 0.9 + 0.1·e^{−t/200}  (plateau)

    on the cells' own logged epochs; each decrement of log L_t between logged epochs is × a
    log-normal factor (the wiggle about the law, keeping GD's descent monotone). With
    ``world["catapult"]`` a run with θ ≤ r < 3θ catapults (the spike saturates, then the top mode
    is gone after 10 epochs: Lewkowycz et al. 2020, as the flagged He runs of wu2023-init and
    -encoder-mnist trained); a run above that diverges (NaN, status ``diverged``). The drifts rise as
    1 − e^{−t/50} to their values at T; logit std and attention TV are constant in t."""
    t = epochs(cols)
    n = len(r)
    bound = world["bound"]
    z = rng.standard_normal(n) if share is None else share
    w = np.clip(0.5 + noise["share_sd"] * z, 0.05, 0.95)
    with np.errstate(over="ignore"):
        top = np.abs(1 - 2 * r / bound)[:, None] ** (2 * t)  # the top mode under the bound θ: factor 1 − 2r/θ
    catapult = (r >= bound) & (r < 3 * bound) & world["catapult"]
    # the spike saturates (at 100× L_0), then the kernel flattens and the top mode is caught
    top = np.where(catapult[:, None], np.where(t > 10, 0.0, np.minimum(top, 100.0)), top)
    form = world["form"]
    if form == "geometric":
        slow = np.clip(1 - 2 * u / bound, 0, 1)[:, None] ** (2 * t)
    elif form == "polynomial":
        slow = np.broadcast_to(1 / (1 + t / 10), (n, len(t)))
    elif form == "slow-power":
        slow = np.broadcast_to((1 + t / 40) ** -0.3, (n, len(t)))
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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return cols | per_run(cols, spec.unstable_at)


def tv_of(logit: np.ndarray, a: float, b: float) -> np.ndarray:
    """Attention TV from uniform of softmax rows whose logits have std ``logit``: ∝ logit when
    small, saturating at a."""
    return a * np.tanh(logit / b)


def frame_union(cells: list[dict]) -> dict[str, np.ndarray]:
    """:func:`frame` over cells whose keys differ (a field at its default is absent from a cell; two
    data models have different fields): every key, None where a cell lacks it."""
    keys = list(dict.fromkeys(k for c in cells for k in c))
    return {k: np.array([c.get(k) for c in cells]) for k in keys}
