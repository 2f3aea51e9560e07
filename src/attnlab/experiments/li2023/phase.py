"""The statistics of a li2023 phase diagram (success over (x, N), x = α_*, τ, σ or δ): the
critical sample size N_c of each column with its bootstrap interval and censoring, the laws of
N_c over the columns (the paper's straight line, the free power law, the shift with x), the
iterations to zero training hinge loss, and the verdicts the diagrams' claims apply to them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnlab import rules, theory
from attnlab.experiments.base import rounded

CROSSED, BELOW, ABOVE, FLAT = "crossed", "below grid", "above grid", "not increasing"


@dataclass
class Column:
    """N_c of one column: value and 95 % interval (NaN unless crossed), how it was found, the
    bootstrap replicates, and the success rate per N."""

    x: float
    value: float
    lo: float
    hi: float
    status: str
    boots: np.ndarray
    rate: dict

    def as_dict(self) -> dict:
        return {
            "x": rounded(self.x, 6),
            "N_c": rounded(self.value, 2),
            "ci95": [rounded(self.lo, 2), rounded(self.hi, 2)],
            "status": self.status,
            "success_rate": self.rate,
        }


def _crossing(logN: np.ndarray, s: np.ndarray) -> float:
    """exp(−β₀/β₁) of σ(β₀ + β₁ log N); NaN without both outcomes or with β₁ ≤ 0."""
    if s.all() or not s.any():
        return np.nan
    b, _ = theory.logistic_fit(np.column_stack([np.ones_like(logN), logN]), s)
    return float(np.exp(-b[0] / b[1])) if b[1] > 1e-9 else np.nan


def _ratios(Z: np.ndarray, s: np.ndarray, W: np.ndarray, num, den: int) -> np.ndarray:
    """num(β)/β[den] of the logistic fit of every resample (rows counted W[b] times; NaN without
    both outcomes or with β[den] ≤ 1e-9): :func:`attnlab.theory.logistic_fit` one resample at a
    time, batched (the same fits up to rounding; the audit analyses thousands of data sets)."""
    k = W @ s
    both = (k > 0) & (k < W.sum(1))
    out = np.full(len(W), np.nan)
    if both.any():
        b = theory._irls_batch(Z, s, W[both].astype(float), 1e-4, 100)
        ok = b[:, den] > 1e-9
        with np.errstate(over="ignore"):
            out[np.flatnonzero(both)[ok]] = num(b[ok]) / b[ok, den]
    return out


def column(x: float, N: np.ndarray, success: np.ndarray, n_boot: int, rng: np.random.Generator) -> Column:
    """N_c of one column from its runs (N, success): P(success | N) = σ(β₀ + β₁ log N) fitted to the
    runs, N_c = exp(−β₀/β₁) where it crosses 1/2, its 95 % interval the percentile bootstrap over
    the runs. All runs succeeding, or a crossing fitted below the grid's smallest N: below the grid;
    all failing, or beyond the largest N: above it; β₁ ≤ 0: no increasing boundary. Such columns are
    censored (shown, never fitted, never extrapolated)."""
    logN, s = np.log(N.astype(float)), success.astype(float)
    rate = {int(n): rounded(s[N == n].mean(), 3) for n in np.unique(N)}
    value = _crossing(logN, s)
    if s.all() or (np.isfinite(value) and value < N.min()):
        status = BELOW
    elif not s.any() or (np.isfinite(value) and value > N.max()):
        status = ABOVE
    else:
        status = CROSSED if np.isfinite(value) else FLAT
    value = value if status == CROSSED else np.nan
    Z = np.column_stack([np.ones_like(logN), logN])
    boots = np.exp(
        _ratios(Z, s, theory.resample_counts(len(s), n_boot, rng), lambda b: -b[:, 0], 1)
    )  # _crossing per resample
    finite = boots[np.isfinite(boots)]
    lo, hi = np.percentile(finite, [2.5, 97.5]) if status == CROSSED and len(finite) >= n_boot // 2 else (np.nan,) * 2
    return Column(float(x), value, float(lo), float(hi), status, boots, rate)


def middle(values) -> float:
    """The middle column of a grid: the value nearest the median of its distinct values (the lower
    of two): where an operating point is read and where the simulators place it."""
    v = np.unique(np.asarray(values, float))
    return float(v[np.argmin(np.abs(v - np.median(v)))])


def z_crit(n_test: int) -> float:
    """The mean-token margin z_c at which the best mean-token rule makes zero errors on n_test test
    samples with probability ½: Φ(z_c)^n_test = ½ (3.2 at n_test = 1000)."""
    from scipy import stats

    return float(stats.norm.ppf(0.5 ** (1.0 / n_test)))


def log_estimation_nc(z, n_test: int) -> np.ndarray:
    """log N_c, up to a constant, of the estimation-limited law: a plug-in linear rule on the mean
    token, whose margin falls from z to z_c as its weights are estimated from N samples, needs

        N_c ∝ z_c² / (z²·(z² − z_c²))

    (no power law in α_*: steep where z nears z_c). +inf where z ≤ z_c (never succeeds)."""
    z, zc = np.asarray(z, float), z_crit(n_test)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(z > zc, np.log(zc**2 / (z**2 * (z**2 - zc**2))), np.inf)


def estimation_exponent(alpha, z, n_test: int) -> float | None:
    """The local exponent p the estimation-limited law shows over the columns (α_*, z): the slope of
    its log N_c on log α_*⁻¹ (None with fewer than two columns where it is finite). What a window of
    floor-free columns reads as "p" with no attention at work."""
    lx, ln = -np.log(np.asarray(alpha, float)), log_estimation_nc(z, n_test)
    ok = np.isfinite(ln)
    if ok.sum() < 2 or np.ptp(lx[ok]) == 0:
        return None
    return float(np.polyfit(lx[ok], ln[ok], 1)[0])


def columns(x: np.ndarray, N: np.ndarray, success: np.ndarray, n_boot: int, seed: int) -> list[Column]:
    rng = np.random.default_rng(seed)
    return [column(v, N[x == v], success[x == v], n_boot, rng) for v in np.unique(x)]


def straight_line(cols: list[Column], power: float) -> dict:
    """N_c = a + b·α_*^(−power) over the crossed α_* columns (power 2 for the ViT, 4 for the
    baseline: the paper's line), least squares: a, b (its interval from the per-column bootstrap
    replicates refitted), R²; None with fewer than 3 crossed columns."""
    use = [c for c in cols if c.status == CROSSED]
    if len(use) < 3:
        return {"n_columns": len(use), "a": None, "b": None, "b_ci95": [None, None], "r2": None}
    u = np.array([c.x for c in use]) ** -power
    Nc = np.array([c.value for c in use])
    b, a = np.polyfit(u, Nc, 1)
    r2 = 1 - np.sum((Nc - (a + b * u)) ** 2) / np.sum((Nc - Nc.mean()) ** 2)
    B = np.stack([c.boots for c in use], 1)
    B = B[np.all(np.isfinite(B), 1)]
    slopes = np.array([np.polyfit(u, row, 1)[0] for row in B]) if len(B) >= 20 else np.array([])
    lo, hi = np.percentile(slopes, [2.5, 97.5]) if len(slopes) else (np.nan, np.nan)
    return {
        "n_columns": len(use),
        "a": rounded(a, 3),
        "b": rounded(b, 4),
        "b_ci95": [rounded(lo, 4), rounded(hi, 4)],
        "r2": rounded(r2, 4),
        "n_boot_used": int(len(slopes)),
    }


def power_law(alpha: np.ndarray, N: np.ndarray, success: np.ndarray, n_boot: int, seed: int) -> dict | None:
    """p of N·α_*^p = C over every run: P(success) = σ(β₀ + β_N log N + β_α log α_*), p = β_α/β_N
    with a bootstrap interval over runs (:func:`attnlab.theory.free_exponent`), and the likelihood
    of the fits with p fixed at 2, 3 and 4."""
    s = success.astype(float)
    if s.all() or not s.any():
        return None
    fit = theory.free_exponent(
        np.log(N.astype(float)), np.log(alpha), s, n_boot=n_boot, seed=seed, restricted=(2.0, 3.0, 4.0)
    )
    # ℓ_2 − ℓ_4 = (LR_4 − LR_2)/2: the same number of parameters, so a plain log-likelihood ratio
    return fit.as_dict() | {"loglik_2_minus_4": rounded((fit.lr[4.0] - fit.lr[2.0]) / 2, 3)}


def shift(
    x: np.ndarray, N: np.ndarray, success: np.ndarray, n_boot: int, seed: int, level: float = 0.95
) -> theory.Estimate:
    """d log N_c / dx = −β_x/β_N of σ(β₀ + β_N log N + β_x x) over every run, with a bootstrap
    interval at ``level`` (positive: more samples are needed as x grows)."""
    s = success.astype(float)
    if s.all() or not s.any():
        return theory.Estimate.missing()
    Z = np.column_stack([np.ones_like(s), np.log(N.astype(float)), x.astype(float)])
    b, _ = theory.logistic_fit(Z, s)
    value = -b[2] / b[1] if b[1] > 1e-9 else np.nan
    # theory.bootstrap's resamples and percentile interval, the fits batched
    boots = _ratios(Z, s, theory.resample_counts(len(s), n_boot, np.random.default_rng(seed)), lambda b: -b[:, 2], 1)
    boots = boots[np.isfinite(boots)]
    if len(boots) < max(10, n_boot // 2):
        return theory.Estimate(value, np.nan, np.nan, n_boot=n_boot)
    return theory.Estimate(value, *np.percentile(boots, [50 * (1 - level), 50 * (1 + level)]), n_boot=n_boot)


def iterations(alpha: np.ndarray, N: np.ndarray, steps: np.ndarray, capped: np.ndarray, eta=None) -> theory.Estimate:
    """r of log T = c + r·log α_*⁻¹ + s·log N (+ e·log η⁻¹ when ``eta`` varies) over every run,
    those stopped by the step cap kept as right-censored at the cap (:func:`tobit_slopes`;
    counting only the converged runs biases r: the runs that take longest are the ones dropped).
    With one α_* value and several η, the returned slope is e (T ∝ η^−e). 95 % Wald interval. The
    theory says T = Θ(α_*⁻¹ η⁻¹): r = e = 1."""
    y = np.log(np.maximum(steps.astype(float), 1.0))
    cols = [np.ones_like(y)]
    if len(np.unique(alpha)) > 1:
        cols.append(-np.log(alpha.astype(float)))
    if eta is not None and len(np.unique(eta)) > 1:
        cols.append(-np.log(eta.astype(float)))
    if len(cols) == 1 or len(y) < 4 or (~capped).sum() < 2:
        return theory.Estimate.missing()
    if len(np.unique(N)) > 1:
        cols.append(np.log(N.astype(float)))
    b, se = tobit_slopes(np.column_stack(cols), y, np.asarray(capped, bool))
    z = 1.959964
    return theory.Estimate(float(b[1]), float(b[1] - z * se[1]), float(b[1] + z * se[1]), 0)


def tobit_slopes(Z: np.ndarray, y: np.ndarray, censored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-likelihood y = Zβ + ε, ε ~ N(0, s²), with right-censored rows (y only known to
    exceed its value: runs stopped by the step cap). Returns β and its standard errors from the
    observed information (the Hessian of the log-likelihood, by differences of its analytic
    gradient). Without censored rows this is least squares."""
    from scipy import optimize, stats

    def nll_grad(theta):
        b, ls = theta[:-1], theta[-1]
        s = np.exp(ls)
        r = (y - Z @ b) / s
        obs = ~censored
        # uncensored: log φ(r) − log s; censored: log(1 − Φ(r))
        ll = np.sum(stats.norm.logpdf(r[obs]) - ls) + np.sum(stats.norm.logsf(r[censored]))
        rc = r[censored]
        with np.errstate(over="ignore"):  # the inverse Mills ratio φ/(1 − Φ) → r far in the tail
            lam = np.exp(stats.norm.logpdf(rc) - stats.norm.logsf(rc))
        lam = np.where(np.isfinite(lam), lam, rc)
        gb = Z[obs].T @ r[obs] / s + Z[censored].T @ lam / s
        gls = np.sum(r[obs] ** 2 - 1) + np.sum(lam * r[censored])
        return -ll, -np.append(gb, gls)

    b0, *_ = np.linalg.lstsq(Z, y, rcond=None)
    start = np.append(b0, np.log(max(np.std(y - Z @ b0), 1e-3)))
    fit = optimize.minimize(nll_grad, start, jac=True, method="L-BFGS-B")
    theta, k = fit.x, len(fit.x)
    H = np.zeros((k, k))
    for j in range(k):
        e = np.zeros(k)
        e[j] = 1e-5 * max(1.0, abs(theta[j]))
        H[:, j] = (nll_grad(theta + e)[1] - nll_grad(theta - e)[1]) / (2 * e[j])
    try:
        cov = np.linalg.inv((H + H.T) / 2)
        se = np.sqrt(np.clip(np.diag(cov)[:-1], 0, None))
    except np.linalg.LinAlgError:
        se = np.full(k - 1, np.nan)
    return theta[:-1], se


def exponent_verdict(law: dict | None, margin: tuple[float, float]) -> rules.Verdict:
    """p of the power law inside ``margin`` (around the paper's exponent): equivalence."""
    if law is None:
        return rules.Verdict(rules.INCONCLUSIVE, {}, f"p inside {list(margin)}", "no boundary inside the grid")
    p = law["p"]
    return rules.equivalence(
        p["value"] if p["value"] is not None else np.nan, *(np.nan if v is None else v for v in p["ci95"]), margin, "p"
    )


def likelihood_verdict(law: dict | None, favoured: float, level: float = 0.05) -> rules.Verdict:
    """The law N·α_*^p = C with p = ``favoured`` (2 ViT, 4 baseline), by the likelihood-ratio tests
    of the free fit (:func:`attnlab.theory.free_exponent`; LR ~ χ²₁): pass when p = favoured is
    *not* rejected at ``level`` while the law between the two, p = 3, *and* the other, 6 − favoured,
    are; fail when p = favoured is rejected; else inconclusive (the data do not separate the
    favoured law from its nearest competitor). Rejecting only the far law passed a p = 3 world in
    7 of 40 simulations at li2023-fig1's operating point; a pass now excludes the law between."""
    other, between = 6 - favoured, 3.0
    rule = (
        f"likelihood-ratio tests of the free exponent's fit: p = {favoured:g} not rejected (p-value ≥ {level:g}), "
        f"p = {between:g} and p = {other:g} rejected (< {level:g}); fail if p = {favoured:g} is rejected"
    )
    if law is None or law["p"]["value"] is None:
        return rules.Verdict(rules.INCONCLUSIVE, {}, rule, "no boundary inside the grid (or a degenerate fit)")
    pv = law["p_value"]
    keep, mid, drop = pv.get(f"p={favoured:g}"), pv.get(f"p={between:g}"), pv.get(f"p={other:g}")
    measured = {
        "p": law["p"]["value"],
        "ci95": law["p"]["ci95"],
        f"p_value(p={favoured:g})": keep,
        f"p_value(p={between:g})": mid,
        f"p_value(p={other:g})": drop,
        "loglik_difference": law["loglik_2_minus_4"] * (1 if favoured == 2 else -1),
    }
    if keep is None or drop is None or mid is None:
        return rules.Verdict(rules.INCONCLUSIVE, measured, rule, "no likelihood-ratio test")
    if keep < level:
        return rules.Verdict(rules.FAIL, measured, rule, f"p = {favoured:g} is rejected (p-value {keep:.3g})")
    if mid < level and drop < level:
        return rules.Verdict(rules.PASS, measured, rule)
    return rules.Verdict(
        rules.INCONCLUSIVE,
        measured,
        rule,
        f"p = {favoured:g} is not separated from p = {between:g} or {other:g} (p-values {mid:.3g}, {drop:.3g})",
    )


def shift_verdict(est: theory.Estimate, name: str, level: float = 0.95) -> rules.Verdict:
    """N_c grows with x: the interval of d log N_c / dx lies above 0 (fail: below 0)."""
    rule = f"{level:.0%} interval of d log N_c / d{name} lies above 0; fail if it lies below 0"
    m = {"dlogNc_dx": rounded(est.value), "interval": [rounded(est.lo), rounded(est.hi)], "level": level}
    if not np.isfinite(est.lo):
        return rules.Verdict(rules.INCONCLUSIVE, m, rule, "no boundary inside the grid or no interval")
    outcome = rules.PASS if est.lo > 0 else rules.FAIL if est.hi < 0 else rules.INCONCLUSIVE
    return rules.Verdict(outcome, m, rule)
