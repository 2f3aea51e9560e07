"""Predicted boundaries, fits with intervals, and the statistics claims are judged on.

Phase boundaries are fitted, not eyeballed: P(success | cell) = σ(β·z) with z the paper's
coordinates (e.g. z = [1, log N, log SNR]); the boundary is β·z = 0. Intervals come from a
bootstrap over cells, or from the fit's own standard errors (:func:`logit`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import stats


@dataclass
class LogitFit:
    """A logistic fit: coefficients, their standard errors and covariance, and the log-likelihood."""

    beta: np.ndarray
    se: np.ndarray
    loglik: float
    cov: np.ndarray


def _penalty(k: int, ridge: float) -> np.ndarray:
    P = ridge * np.eye(k)
    P[0, 0] = 0.0  # the intercept is not shrunk: only the boundary's direction needs regularising
    return P


def _irls(Z: np.ndarray, s: np.ndarray, ridge: float, iters: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Newton/IRLS on the penalised log-likelihood ℓ(β) − ½ βᵀPβ. Returns (β, H at β̂, ℓ(β̂))."""
    beta = np.zeros(Z.shape[1])
    P = _penalty(Z.shape[1], ridge)

    def info(beta):
        p = 1.0 / (1.0 + np.exp(-np.clip(Z @ beta, -50, 50)))
        return p, (Z * (p * (1 - p))[:, None]).T @ Z + P

    for _ in range(iters):
        p, H = info(beta)
        g = Z.T @ (s - p) - P @ beta
        step = np.linalg.solve(H + 1e-12 * np.eye(len(beta)), g)
        beta = beta + step
        if np.max(np.abs(step)) < 1e-10 * (1 + np.max(np.abs(beta))):
            break
    _, H = info(beta)  # information at the optimum, not at the previous iterate
    eta = Z @ beta
    loglik = float(np.sum(s * eta - np.logaddexp(0.0, eta)))
    return beta, H, loglik


def logistic_fit(Z: np.ndarray, s: np.ndarray, ridge: float = 1e-4, iters: int = 100) -> tuple[np.ndarray, float]:
    """Maximum-likelihood logistic regression by Newton steps (IRLS).

    Z (n, k) features (first column the intercept), s (n,) in {0, 1}. A small ridge penalty on
    the non-intercept weights keeps the fit finite when the classes are separable (a sharp
    transition); the boundary's *direction* is then that of the max-margin separator.
    Returns (β, log-likelihood) — the log-likelihood is the unpenalised one."""
    beta, _, loglik = _irls(np.asarray(Z, float), np.asarray(s, float), ridge, iters)
    return beta, loglik


def logit(Z: np.ndarray, s: np.ndarray, ridge: float = 1e-4, iters: int = 100) -> LogitFit:
    """:func:`logistic_fit` plus standard errors.

    cov = (ZᵀWZ + P)⁻¹ at β̂, W = diag(p̂(1 − p̂)), P the ridge penalty: the inverse of the penalised
    observed information (for the logit link observed = expected information). With ridge = 0 this
    is the usual Wald covariance (statsmodels GLM Binomial); on separable data it is the ridge that
    keeps it finite, and the SEs are then large and only indicative."""
    beta, H, loglik = _irls(np.asarray(Z, float), np.asarray(s, float), ridge, iters)
    try:
        cov = np.linalg.inv(H)
    except np.linalg.LinAlgError:
        cov = np.full_like(H, np.nan)
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    return LogitFit(beta, se, loglik, cov)


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


def _irls_batch(
    Z: np.ndarray, s: np.ndarray, W: np.ndarray, ridge: float, iters: int, start: np.ndarray | None = None
) -> np.ndarray:
    """:func:`_irls` for a batch of row weightings W (B, n) of the same rows: row i counted W[b, i]
    times (a bootstrap resample), each replicate stepping until its own convergence (from
    ``start``, default β = 0). Returns β̂ (B, k)."""
    B, k = W.shape[0], Z.shape[1]
    beta = np.zeros((B, k)) if start is None else np.array(start, float)
    P, active = _penalty(k, ridge), np.ones(B, bool)
    eye = 1e-12 * np.eye(k)
    for _ in range(iters):
        a = np.flatnonzero(active)
        if not len(a):
            break
        b, w = beta[a], W[a]
        p = 1.0 / (1.0 + np.exp(-np.clip(b @ Z.T, -50, 50)))
        H = np.matmul(((w * p * (1 - p))[:, :, None] * Z).transpose(0, 2, 1), Z) + P
        g = (w * (s - p)) @ Z - b @ P
        step = np.linalg.solve(H + eye, g[..., None])[..., 0]
        beta[a] = b + step
        done = np.max(np.abs(step), axis=1) < 1e-10 * (1 + np.max(np.abs(beta[a]), axis=1))
        active[a[done]] = False
    return beta


LAPSE_MAX = 0.25  # a lapse rate above this is not a lapse but a second boundary


def _lapse_batch(
    Z: np.ndarray, s: np.ndarray, W: np.ndarray, ridge: float, iters: int = 25, start: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The logistic with lapses, q = P(s = 1) = γ + (1 − γ − λ)·σ(β·z), fitted by maximum likelihood
    for a batch of row weightings W (B, n): each run either follows the boundary or "lapses" to
    success (rate γ) or failure (rate λ) whatever its coordinates — a run caught in a lucky or
    unlucky minimum, a flipped outcome — so a few such runs do not tilt the boundary (Wichmann and
    Hill 2001). Fisher scoring on θ = (β, γ, λ) from the plain logistic fit, with γ and λ kept in
    [0, LAPSE_MAX]: the information is Σ w·(∂q/∂θ)(∂q/∂θ)ᵀ / (q(1 − q)) + the ridge on β, with
    ∂q/∂β = (1 − γ − λ)·p(1 − p)·z, ∂q/∂γ = 1 − p, ∂q/∂λ = −p; a step moves no coordinate by more
    than 20 (a sharp, nearly separable boundary would otherwise overshoot). Each replicate stops at
    its own convergence, from ``start`` (θ, e.g. the fit to all rows for bootstrap replicates) or
    else from the plain logistic fit with γ = λ = 0.01. Returns β̂ (B, k), γ̂ (B,), λ̂ (B,)."""
    B, k = W.shape[0], Z.shape[1]
    if start is None:
        theta = np.concatenate([_irls_batch(Z, s, W, ridge, 50), np.full((B, 2), 0.01)], 1)
    else:
        theta = np.tile(np.asarray(start, float), (B, 1))
    P = np.zeros((k + 2, k + 2))
    P[:k, :k] = _penalty(k, ridge)
    eye = 1e-10 * np.eye(k + 2)
    active = np.ones(B, bool)
    for _ in range(iters):
        a = np.flatnonzero(active)
        if not len(a):
            break
        th, w = theta[a], W[a]
        beta, gamma, lam = th[:, :k], th[:, k], th[:, k + 1]
        p = 1.0 / (1.0 + np.exp(-np.clip(beta @ Z.T, -50, 50)))
        q = np.clip(gamma[:, None] + (1 - gamma - lam)[:, None] * p, 1e-12, 1 - 1e-12)
        J = np.concatenate(
            [((1 - gamma - lam)[:, None] * p * (1 - p))[..., None] * Z, (1 - p)[..., None], -p[..., None]], 2
        )
        v = w / (q * (1 - q))
        info = np.matmul((v[..., None] * J).transpose(0, 2, 1), J) + P
        grad = np.matmul((v * (s - q))[:, None, :], J)[:, 0] - th @ P
        step = np.linalg.solve(info + eye, grad[..., None])[..., 0]
        step *= np.minimum(1.0, 20.0 / np.maximum(np.max(np.abs(step), 1), 1e-300))[:, None]
        new = th + step
        new[:, k:] = np.clip(new[:, k:], 0.0, LAPSE_MAX)
        theta[a] = new
        done = np.max(np.abs(new - th), 1) < 1e-5 * (1 + np.max(np.abs(new), 1))
        active[a[done]] = False
    return theta[:, :k], theta[:, k], theta[:, k + 1]


def resample_counts(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n): how often each row is drawn in each of ``n_boot`` resamples, each drawn as
    ``rng.integers(0, n, n)`` (the generator calls of :func:`bootstrap`, so the same resamples)."""
    idx = np.array([rng.integers(0, n, n) for _ in range(n_boot)], int).reshape(n_boot, n)
    return np.bincount((idx + n * np.arange(n_boot)[:, None]).ravel(), minlength=n_boot * n).reshape(n_boot, n)


def bootstrap_fit(
    Z: np.ndarray,
    s: np.ndarray,
    value: Callable[[np.ndarray], np.ndarray],
    n_boot: int,
    seed: int = 0,
    ridge: float = 1e-4,
    iters: int = 100,
    level: float = 0.95,
    lapses: bool = False,
) -> tuple[float, float, float]:
    """:func:`bootstrap` of stat(idx) = value(β̂ of :func:`logistic_fit` on Z[idx], s[idx]), with
    every resample fitted at once (batched IRLS on resample counts): the same resamples, drawn from
    the same generator calls, and the same fits up to rounding. ``value`` maps β (B, k) -> (B,).
    The interval is the percentile interval at ``level``. ``lapses``: β̂ of the logistic with
    lapse rates (:func:`_lapse_batch`), whose boundary a share of runs that ignore it does not tilt."""
    Z, s = np.asarray(Z, float), np.asarray(s, float)
    n = len(s)
    rng = np.random.default_rng(seed)
    if lapses:
        b, g, l = _lapse_batch(Z, s, np.ones((1, n)), ridge, iters=200)
        point = float(value(b)[0])
        fit = lambda W: _lapse_batch(Z, s, W, ridge, start=np.concatenate([b[0], g, l]))[0]
    else:
        fit = lambda W: _irls_batch(Z, s, W, ridge, iters)
        point = float(value(logistic_fit(Z, s, ridge, iters)[0][None])[0])
    if n_boot == 0:
        return point, np.nan, np.nan
    boots = value(fit(resample_counts(n, n_boot, rng).astype(float)))
    boots = boots[np.isfinite(boots)]
    if len(boots) < max(10, n_boot // 2):
        return point, np.nan, np.nan
    lo, hi = np.percentile(boots, [50 * (1 - level), 50 * (1 + level)])
    return point, lo, hi


def _ratio(num: np.ndarray, den: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """scale·num/den where |den| > 1e-12, else NaN (a boundary parallel to an axis)."""
    ok = np.abs(den) > 1e-12
    return np.where(ok, scale * num / np.where(ok, den, 1.0), np.nan)


def block_estimates(stat: Callable[[np.ndarray], float], block_ids: np.ndarray) -> np.ndarray:
    """stat(indices of block b) for each distinct block id (e.g. a seed block), in sorted id order.

    Feed the result to :func:`attnlab.rules.t_interval` for a t interval over independent blocks."""
    block_ids = np.asarray(block_ids)
    return np.array([stat(np.flatnonzero(block_ids == b)) for b in np.unique(block_ids)], float)


def boundary_slope(
    x: np.ndarray, y: np.ndarray, success: np.ndarray, n_boot: int = 500, seed: int = 0, lapses: bool = False
) -> Estimate:
    """Slope dy/dx of the fitted boundary β₀ + β_x x + β_y y = 0, i.e. −β_x / β_y
    (for x = log SNR, y = log N the theory says −2); ``lapses``: of the logistic with lapse rates."""
    Z = np.column_stack([np.ones_like(x), x, y])
    value = lambda b: _ratio(b[:, 1], b[:, 2], -1.0)
    return Estimate(*bootstrap_fit(Z, success, value, n_boot, seed, lapses=lapses), n_boot=n_boot)


def boundary_constant(
    u: np.ndarray, success: np.ndarray, n_boot: int = 500, seed: int = 0, lapses: bool = False
) -> Estimate:
    """For a boundary of known form u = log C (e.g. u = log N + 2 log SNR), fit
    σ(β₀ + β₁ u) (with lapse rates, given ``lapses``) and return C = exp(−β₀/β₁) with its interval."""
    Z = np.column_stack([np.ones_like(u), u])

    def C(b):
        ok = b[:, 1] > 1e-12
        with np.errstate(over="ignore"):  # a resample whose boundary lies far outside the grid: C = inf, dropped
            return np.where(ok, np.exp(np.where(ok, -b[:, 0] / np.where(ok, b[:, 1], 1.0), 0.0)), np.nan)

    return Estimate(*bootstrap_fit(Z, success, C, n_boot, seed, lapses=lapses), n_boot=n_boot)


def within_steepness(rows: np.ndarray, u: np.ndarray, success: np.ndarray) -> float:
    """The steepness s of σ(a_row + s·u) with one intercept per row (e.g. per N) and lapse rates:
    how sharp the transition is along u *within* a row, which a boundary of another form than u's
    (rows whose transitions lie at different u) does not flatten, as it flattens a pooled fit."""
    keys, idx = np.unique(rows, return_inverse=True)
    Z = np.column_stack([np.ones(len(u)), u, np.eye(len(keys))[idx.ravel()][:, 1:]])
    b, _, _ = _lapse_batch(Z, np.asarray(success, float), np.ones((1, len(u))), 1e-4, iters=200)
    return float(b[0, 1])


def fixed_form_loglik(u: np.ndarray, success: np.ndarray) -> float:
    """Log-likelihood of σ(β₀ + β₁ u): how well a boundary of form u = const explains the data."""
    return logistic_fit(np.column_stack([np.ones_like(u), u]), success)[1]


@dataclass
class ExponentFit:
    """Free exponent p of a boundary N·SNR^p = C, and likelihood-ratio tests of fixed exponents.

    lr[q] = 2(ℓ_free − ℓ_q) for the restricted fit with p = q; p_value[q] = P(χ²₁ > lr[q])."""

    p: Estimate
    loglik: float
    lr: dict[float, float] = field(default_factory=dict)
    p_value: dict[float, float] = field(default_factory=dict)

    def as_dict(self, digits: int = 4) -> dict:
        r = lambda x: float(np.round(x, digits)) if np.isfinite(x) else None
        return {
            "p": self.p.as_dict(digits),
            "loglik": r(self.loglik),
            "lr": {f"p={q:g}": r(v) for q, v in self.lr.items()},
            "p_value": {f"p={q:g}": (float(f"{v:.3g}") if np.isfinite(v) else None) for q, v in self.p_value.items()},
        }


def free_exponent(
    logN: np.ndarray,
    logS: np.ndarray,
    success: np.ndarray,
    n_boot: int = 500,
    seed: int = 0,
    restricted: tuple[float, ...] = (1.0, 2.0),
) -> ExponentFit:
    """Fit σ(β₀ + β_N log N + β_S log SNR) and return the exponent p = β_S/β_N of N·SNR^p = C
    (the boundary's slope in log N vs log SNR is −p), with a bootstrap interval over cells.

    For each q in ``restricted`` the fit with p = q, σ(β₀ + β₁(log N + q log SNR)), is one
    parameter short of the free fit, so LR = 2(ℓ_free − ℓ_q) ~ χ²₁ under p = q (Wilks). The ridge
    makes both fits slightly penalised, and on separable data the LR is not meaningful."""
    logN, logS, success = (np.asarray(a, float) for a in (logN, logS, success))
    Z = np.column_stack([np.ones_like(logN), logN, logS])
    est = Estimate(*bootstrap_fit(Z, success, lambda b: _ratio(b[:, 2], b[:, 1]), n_boot, seed), n_boot=n_boot)
    ll_free = logistic_fit(Z, success)[1]
    lr, pv = {}, {}
    for q in restricted:
        lr[q] = max(0.0, 2 * (ll_free - fixed_form_loglik(logN + q * logS, success)))
        pv[q] = float(stats.chi2.sf(lr[q], 1))
    return ExponentFit(est, ll_free, lr, pv)


def boundary_curvature(
    logS: np.ndarray,
    logN: np.ndarray,
    success: np.ndarray,
    n_boot: int = 500,
    seed: int = 0,
    over: str = "boundary",
    lapses: bool = False,
) -> Estimate:
    """Change of the boundary's local slope: is log N vs log SNR a straight line?

    Fit σ(β₀ + β_S x + β_N y + β_SS x²) with x = log SNR − mean (centred, so x and x² are not
    collinear) and y = log N. The boundary y(x) = −(β₀ + β_S x + β_SS x²)/β_N has slope
    dy/dx = −(β_S + 2β_SS x)/β_N, which changes by Δslope = −2β_SS·Δx/β_N over a span Δx:

    over = "boundary"  Δx = the SNR span the boundary crosses inside the grid's N range,
                       (y_max − y_min)·|β_N/β_S| (where the boundary is observed)
    over = "grid"      Δx = x_max − x_min, the grid's whole SNR range (this extrapolates the
                       quadratic across SNRs where no boundary is observed)

    The spans are fixed from the full data, so every bootstrap replicate measures the same
    span. A straight boundary has Δslope = 0. ``lapses``: fits with lapse rates."""
    logS, logN, success = (np.asarray(a, float) for a in (logS, logN, success))
    if over not in ("boundary", "grid"):
        raise ValueError(f"over must be 'boundary' or 'grid', got {over!r}")
    x = logS - logS.mean()
    Z = np.column_stack([np.ones_like(x), x, logN, x**2])
    if over == "grid":
        span = x.max() - x.min()
    else:
        if lapses:
            b = _lapse_batch(Z[:, :3], success, np.ones((1, len(x))), 1e-4, iters=200)[0][0]
        else:
            b, _ = logistic_fit(Z[:, :3], success)
        span = (logN.max() - logN.min()) * abs(b[2] / b[1]) if abs(b[1]) > 1e-12 else np.nan

    change = lambda b: _ratio(b[:, 3], b[:, 2], -2 * span)
    return Estimate(*bootstrap_fit(Z, success, change, n_boot, seed, lapses=lapses), n_boot=n_boot)


def first_crossing(t: np.ndarray, x: np.ndarray, frac: float = 0.5) -> float:
    """First t at which |x(t) − x(0)| reaches ``frac`` of its largest value over the run."""
    dev = np.abs(np.asarray(x) - x[0])
    top = dev.max()
    if not np.isfinite(top) or top == 0:
        return np.nan
    return float(t[np.argmax(dev >= frac * top)])


# ---------------------------------------------------------------- thresholds that may lie outside the grid


@dataclass(frozen=True)
class CensoredLine:
    """y* = a + b·x + ε, ε ~ N(0, σ²), fitted to thresholds known only as lo ≤ y* ≤ hi."""

    a: float
    b: float
    sigma: float
    b_ci: tuple[float, float]
    loglik: float
    exact: int  # lo == hi
    interval: int  # finite lo < hi
    left: int  # lo = −∞: the threshold lies below the grid
    right: int  # hi = +∞: never crossed inside the grid

    def as_dict(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "sigma": self.sigma,
            "b_ci": list(self.b_ci),
            "loglik": self.loglik,
            "exact": self.exact,
            "interval": self.interval,
            "left_censored": self.left,
            "right_censored": self.right,
        }


_LOG_SQRT_2PI = np.log(np.sqrt(2 * np.pi))


def _censored_loglik(x: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """ℓ(a, b, σ) of thresholds in [lo, hi] under N(a + b·x, σ²): log density where lo = hi, log
    probability of the interval elsewhere. The masks and subsets are taken once per fit (the
    optimiser calls ℓ ~10⁵ times)."""
    from scipy.special import log_ndtr

    exact = lo == hi
    x_e, lo_e = x[exact], lo[exact]
    x_c, lo_c, hi_c = x[~exact], lo[~exact], hi[~exact]

    def loglik(a: float, b: float, sigma: float) -> float:
        z = (lo_e - (a + b * x_e)) / sigma
        ll = np.sum(-(z**2) / 2.0) - len(z) * (_LOG_SQRT_2PI + np.log(sigma))
        mu = a + b * x_c
        lower, upper = (lo_c - mu) / sigma, (hi_c - mu) / sigma
        # log(Φ(upper) − Φ(lower)), taken in the tail where it is precise (mirror when lower > 0)
        flip = lower > 0
        lower, upper = np.where(flip, -upper, lower), np.where(flip, -lower, upper)
        lb, la = log_ndtr(upper), log_ndtr(lower)
        with np.errstate(divide="ignore"):
            ll += np.sum(lb + np.log1p(-np.exp(np.minimum(la - lb, 0.0)) + 1e-300))
        return float(ll)

    return loglik


def censored_line(x, lo, hi, sigma_min: float, level: float = 0.95) -> CensoredLine:
    """Maximum-likelihood line through thresholds that may be censored: a column whose threshold
    lies beyond the grid (never crossed: hi = +∞; crossed at the first point: lo = −∞) or between
    two grid points (lo < hi) counts by the probability of its interval, not dropped (dropping
    the columns that never cross biases the slope toward the grid's shape). ``sigma_min``: the
    smallest scatter σ allowed (e.g. a quarter of the grid's log step), without which a line
    through every interval has σ → 0 and no interval of its own. The interval of b is the profile
    likelihood's: {b : 2(ℓ̂ − max_{a,σ} ℓ(a, b, σ)) ≤ c} with c = n·log(1 + t²/(n − 2)), t the
    (1 + level)/2 quantile of Student's t with n − 2 degrees of freedom — the cut-off that makes
    the interval exact for uncensored normal thresholds (χ²₁ under-covers at a handful of columns:
    0.92 at n = 5 in a simulation); an end is ±∞ when the profile never drops that far (the data
    do not bound the slope on that side)."""
    from scipy import optimize

    x, lo, hi = (np.asarray(v, float).ravel() for v in (x, lo, hi))
    if not (len(x) == len(lo) == len(hi)) or np.any(lo > hi) or np.any(np.isnan(lo) | np.isnan(hi)):
        raise ValueError("censored_line: x, lo, hi must have one entry per threshold, lo ≤ hi, no NaN")
    counts = dict(
        exact=int(np.sum(lo == hi)),
        interval=int(np.sum((lo < hi) & np.isfinite(lo) & np.isfinite(hi))),
        left=int(np.sum(np.isneginf(lo))),
        right=int(np.sum(np.isposinf(hi))),
    )
    mid = np.where(np.isfinite(lo) & np.isfinite(hi), (lo + hi) / 2, np.where(np.isfinite(lo), lo, hi))
    finite = np.isfinite(mid)
    if finite.sum() < 2 or len(np.unique(x)) < 2:
        nan = float("nan")
        return CensoredLine(nan, nan, nan, (nan, nan), nan, **counts)
    b0, a0 = np.polyfit(x[finite], mid[finite], 1)
    scale = max(float(np.std(mid[finite])), sigma_min)
    sig = lambda s: sigma_min + np.exp(s)
    loglik = _censored_loglik(x, lo, hi)
    nll = lambda a, b, s: -loglik(a, b, sig(s))
    start = [a0, b0, np.log(scale)]
    fit = optimize.minimize(
        lambda p: nll(*p), start, method="Nelder-Mead", options={"xatol": 1e-7, "fatol": 1e-9, "maxiter": 4000}
    )
    a, b, s = fit.x
    best = -fit.fun

    def profile(bb: float) -> float:
        r = optimize.minimize(
            lambda p: nll(p[0], bb, p[1]),
            [a + (b - bb) * x.mean(), s],
            method="Nelder-Mead",
            options={"xatol": 1e-7, "fatol": 1e-9},
        )
        return 2 * (best + r.fun) - cut  # < 0 inside the interval

    n = len(x)
    cut = n * np.log1p(stats.t.ppf((1 + level) / 2, n - 2) ** 2 / (n - 2)) if n > 2 else np.inf
    span = max(1.0, abs(b)) * 1e3
    ends = []
    for direction in (-1, 1):
        step, inner = max(0.05, 0.1 * abs(b)), b
        while True:
            outer = b + direction * step
            if profile(outer) > 0:
                ends.append(optimize.brentq(profile, min(inner, outer), max(inner, outer), xtol=1e-6))
                break
            if step > span:
                ends.append(direction * np.inf)
                break
            inner, step = outer, 2 * step
    return CensoredLine(float(a), float(b), float(sig(s)), (float(ends[0]), float(ends[1])), float(best), **counts)


# ---------------------------------------------------------------- exponential against power-law decay


@dataclass(frozen=True)
class RateForms:
    """log L fitted on t (L = A·ρ^t: linear convergence) and on log t (L = A·t^−q: a power law),
    each by least squares, with their Gaussian log-likelihoods (two parameters each)."""

    rho: float
    q: float
    loglik_exponential: float
    loglik_power: float
    n: int

    @property
    def log_lr(self) -> float:
        """log LR of linear convergence over the power law (> 0 favours linear convergence)."""
        return self.loglik_exponential - self.loglik_power

    def as_dict(self) -> dict:
        return {
            "rho": self.rho,
            "q": self.q,
            "loglik_exponential": self.loglik_exponential,
            "loglik_power": self.loglik_power,
            "log_lr": self.log_lr,
            "n": self.n,
        }


def rate_forms(t, loss) -> RateForms:
    """Linear convergence against a power law for one loss curve, by likelihood. Points with
    t ≥ 1 and a positive finite loss are used (log t needs t > 0). Both models have two
    parameters, so the log-likelihood ratio needs no penalty; σ² is each fit's residual mean
    square (its MLE), ℓ = −n/2·(log 2πσ̂² + 1)."""
    t, L = np.asarray(t, float), np.asarray(loss, float)
    ok = (t >= 1) & np.isfinite(L) & (L > 0)
    t, y = t[ok], np.log(L[ok])
    n = len(t)
    if n < 3:
        nan = float("nan")
        return RateForms(nan, nan, nan, nan, n)

    def fit(z):
        A = np.column_stack([np.ones_like(z), z])
        coef, *_ = np.linalg.lstsq(A, y, rcond=None)
        rss = max(float(np.sum((y - A @ coef) ** 2)), 1e-300 * n)
        return coef[1], -n / 2 * (np.log(2 * np.pi * rss / n) + 1)

    slope_t, ll_exp = fit(t)
    slope_logt, ll_pow = fit(np.log(t))
    return RateForms(float(np.exp(slope_t)), float(-slope_logt), float(ll_exp), float(ll_pow), n)
