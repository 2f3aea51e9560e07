"""Predicted boundaries, fits with intervals, and the statistics claims are judged on.

Phase boundaries are fitted, not eyeballed: P(success | cell) = σ(β·z) with z the paper's
coordinates (e.g. z = [1, log N, log SNR]); the boundary is β·z = 0. Intervals come from a
bootstrap over cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def logistic_fit(Z: np.ndarray, s: np.ndarray, ridge: float = 1e-4, iters: int = 100) -> tuple[np.ndarray, float]:
    """Maximum-likelihood logistic regression by Newton steps (IRLS).

    Z (n, k) features (first column the intercept), s (n,) in {0, 1}. A small ridge penalty on
    the non-intercept weights keeps the fit finite when the classes are separable (a sharp
    transition); the boundary's *direction* is then that of the max-margin separator.
    Returns (β, log-likelihood)."""
    Z = np.asarray(Z, float)
    s = np.asarray(s, float)
    beta = np.zeros(Z.shape[1])
    P = ridge * np.eye(Z.shape[1])
    P[0, 0] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-np.clip(Z @ beta, -50, 50)))
        g = Z.T @ (s - p) - P @ beta
        H = (Z * (p * (1 - p))[:, None]).T @ Z + P
        step = np.linalg.solve(H + 1e-12 * np.eye(len(beta)), g)
        beta = beta + step
        if np.max(np.abs(step)) < 1e-10 * (1 + np.max(np.abs(beta))):
            break
    eta = Z @ beta
    loglik = float(np.sum(s * eta - np.logaddexp(0.0, eta)))
    return beta, loglik


@dataclass
class Estimate:
    value: float
    lo: float
    hi: float
    n_boot: int

    def as_dict(self, digits: int = 4) -> dict:
        r = lambda x: float(np.round(x, digits)) if np.isfinite(x) else None
        return {"value": r(self.value), "ci95": [r(self.lo), r(self.hi)], "n_boot": self.n_boot}

    @classmethod
    def missing(cls) -> Estimate:
        return cls(np.nan, np.nan, np.nan, 0)


def bootstrap(stat, n: int, n_boot: int, seed: int = 0) -> tuple[float, float, float]:
    """Point value stat(all indices) and the percentile 95 % interval over resampled cells."""
    rng = np.random.default_rng(seed)
    value = stat(np.arange(n))
    boots = np.array([stat(rng.integers(0, n, n)) for _ in range(n_boot)])
    boots = boots[np.isfinite(boots)]
    if len(boots) < max(10, n_boot // 2):
        return value, np.nan, np.nan
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return value, lo, hi


def boundary_slope(x: np.ndarray, y: np.ndarray, success: np.ndarray, n_boot: int = 500, seed: int = 0) -> Estimate:
    """Slope dy/dx of the fitted boundary β₀ + β_x x + β_y y = 0, i.e. −β_x / β_y
    (for x = log SNR, y = log N the theory says −2)."""
    Z = np.column_stack([np.ones_like(x), x, y])

    def stat(idx):
        b, _ = logistic_fit(Z[idx], success[idx])
        return -b[1] / b[2] if abs(b[2]) > 1e-12 else np.nan

    return Estimate(*bootstrap(stat, len(x), n_boot, seed), n_boot=n_boot)


def boundary_constant(u: np.ndarray, success: np.ndarray, n_boot: int = 500, seed: int = 0) -> Estimate:
    """For a boundary of known form u = log C (e.g. u = log N + 2 log SNR), fit
    σ(β₀ + β₁ u) and return C = exp(−β₀/β₁) with its interval."""
    Z = np.column_stack([np.ones_like(u), u])

    def stat(idx):
        b, _ = logistic_fit(Z[idx], success[idx])
        return np.exp(-b[0] / b[1]) if b[1] > 1e-12 else np.nan

    return Estimate(*bootstrap(stat, len(u), n_boot, seed), n_boot=n_boot)


def fixed_form_loglik(u: np.ndarray, success: np.ndarray) -> float:
    """Log-likelihood of σ(β₀ + β₁ u): how well a boundary of form u = const explains the data."""
    return logistic_fit(np.column_stack([np.ones_like(u), u]), success)[1]


def first_crossing(t: np.ndarray, x: np.ndarray, frac: float = 0.5) -> float:
    """First t at which |x(t) − x(0)| reaches ``frac`` of its largest value over the run."""
    dev = np.abs(np.asarray(x) - x[0])
    top = dev.max()
    if not np.isfinite(top) or top == 0:
        return np.nan
    return float(t[np.argmax(dev >= frac * top)])
