"""The fits behind the verdicts recover known boundaries, and can fail."""

import numpy as np
import pytest

from attnlab import theory


def synthetic(form_exponent, C, n=1500, noise=0.3, seed=0):
    rng = np.random.default_rng(seed)
    logN = np.log(rng.uniform(2, 20, n))
    logS = np.log(rng.uniform(0.5, 60, n))
    u = logN + form_exponent * logS - np.log(C)
    success = (u + noise * rng.standard_normal(n)) > 0
    return logN, logS, success


def test_slope_and_constant_recovered():
    logN, logS, s = synthetic(2, 1000)
    slope = theory.boundary_slope(logS, logN, s, n_boot=200)
    assert slope.lo <= -2 <= slope.hi and slope.hi - slope.lo < 0.6
    C = theory.boundary_constant(logN + 2 * logS, s, n_boot=200)
    assert C.lo <= 1000 <= C.hi
    assert theory.fixed_form_loglik(logN + 2 * logS, s) > theory.fixed_form_loglik(logN + logS, s)


def test_a_wrong_form_is_detected():
    logN, logS, s = synthetic(1, 30)  # N·SNR = C, slope −1
    slope = theory.boundary_slope(logS, logN, s, n_boot=100)
    assert not (slope.lo <= -2 <= slope.hi)
    assert slope.lo <= -1 <= slope.hi


def test_separable_data_gives_a_finite_boundary():
    logN, logS, s = synthetic(2, 1000, noise=0.0)
    slope = theory.boundary_slope(logS, logN, s, n_boot=50)
    assert np.isfinite(slope.value) and slope.value == pytest.approx(-2, abs=0.3)


def test_first_crossing():
    t = np.arange(10.0)
    x = np.array([0, 0, 1, 2, 5, 9, 10, 10, 10, 10.0])
    assert theory.first_crossing(t, x, 0.5) == 4
    assert np.isnan(theory.first_crossing(t, np.zeros(10)))


def test_logit_matches_statsmodels():
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(1)
    n = 400
    X = rng.standard_normal((n, 2))
    Z = np.column_stack([np.ones(n), X])
    s = rng.random(n) < 1 / (1 + np.exp(-(0.3 + 1.2 * X[:, 0] - 0.7 * X[:, 1])))
    fit = theory.logit(Z, s, ridge=0.0)
    ref = sm.GLM(s.astype(float), Z, family=sm.families.Binomial()).fit()
    np.testing.assert_allclose(fit.beta, ref.params, rtol=1e-6)
    np.testing.assert_allclose(fit.se, ref.bse, rtol=1e-6)
    np.testing.assert_allclose(fit.cov, ref.cov_params(), rtol=1e-6)
    assert fit.loglik == pytest.approx(ref.llf, rel=1e-8)
    # the old entry point gives the same coefficients
    np.testing.assert_allclose(theory.logistic_fit(Z, s, ridge=0.0)[0], fit.beta)


def test_logit_separable_stays_finite():
    logN, logS, s = synthetic(2, 1000, n=300, noise=0.0)
    fit = theory.logit(np.column_stack([np.ones_like(logN), logN, logS]), s)
    assert np.all(np.isfinite(fit.beta)) and np.all(np.isfinite(fit.se))


@pytest.mark.parametrize("true_p, wrong_p", [(2, 1), (1, 2)])
def test_free_exponent_recovered(true_p, wrong_p):
    logN, logS, s = synthetic(true_p, 1000 if true_p == 2 else 30)
    fit = theory.free_exponent(logN, logS, s, n_boot=150)
    assert fit.p.lo <= true_p <= fit.p.hi and fit.p.hi - fit.p.lo < 0.5
    assert fit.p_value[wrong_p] < 1e-6 and fit.p_value[true_p] > 1e-3
    assert fit.lr[wrong_p] > fit.lr[true_p] >= 0
    assert set(fit.as_dict()["p_value"]) == {"p=1", "p=2"}


def curved(c2, n=2000, noise=0.15, seed=0):
    """Boundary log N = a − 2x + c2·x² with x = log SNR − log 5 over x ∈ [−1, 1]."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, n)
    logN = rng.uniform(-0.5, 5, n)
    s = logN - (1.5 - 2 * x + c2 * x**2) + noise * rng.standard_normal(n) > 0
    return x + np.log(5), logN, s


def test_curvature_detected():
    est = theory.boundary_curvature(*curved(0.0), n_boot=150)
    assert est.lo <= 0 <= est.hi
    est = theory.boundary_curvature(*curved(0.8), n_boot=150, over="grid")
    true = 2 * 0.8 * 2  # Δslope = 2·c2·(x_max − x_min)
    assert est.lo > 0 and est.value == pytest.approx(true, rel=0.25)
    # over the span the boundary crosses: (log N range 5.5) / |slope 2| in x
    est = theory.boundary_curvature(*curved(0.8), n_boot=150)
    assert est.lo > 0 and est.value == pytest.approx(2 * 0.8 * 5.5 / 2, rel=0.25)
    with pytest.raises(ValueError, match="over"):
        theory.boundary_curvature(*curved(0.0), n_boot=0, over="everywhere")


def test_block_estimates_feed_a_t_interval():
    from attnlab import rules

    logN, logS, s = synthetic(2, 1000, n=1200)
    blocks = np.arange(len(s)) % 4
    u = logN + 2 * logS
    Z = np.column_stack([np.ones_like(u), u])

    def log_C(idx):
        b, _ = theory.logistic_fit(Z[idx], s[idx])
        return -b[0] / b[1]

    vals = theory.block_estimates(log_C, blocks)
    assert vals.shape == (4,)
    mean, lo, hi, _ = rules.t_interval(vals)
    assert lo <= np.log(1000) <= hi


def test_bootstrap_constant_is_calibrated_on_the_real_grid():
    """Coverage of the true C by boundary_constant's 95 % interval, on the jiang2024-fig1 cpu design,
    when the data follow the model's own assumptions: success ~ Bernoulli(σ(k(log N + 2 log SNR − log C)))."""
    mu = np.array([3, 4, 5, 6, 8, 10, 12, 15, 18, 22, 27, 33, 40, 50, 65, 100], float)
    snr = mu / (0.2 * np.sqrt(64))
    N = np.arange(2, 21, 2, dtype=float)
    reps = 5
    S, NN = np.meshgrid(snr, N, indexing="ij")
    logS, logN = np.repeat(np.log(S).ravel(), reps), np.repeat(np.log(NN).ravel(), reps)
    u = logN + 2 * logS
    C, k, n_sets = 1000.0, 3.0, 40
    rng = np.random.default_rng(12345)
    covered = 0
    for i in range(n_sets):
        s = rng.random(len(u)) < 1 / (1 + np.exp(-k * (u - np.log(C))))
        est = theory.boundary_constant(u, s, n_boot=100, seed=i)
        covered += est.lo <= C <= est.hi
    # nominal 0.95; with 40 sets, Binomial(40, 0.95) falls below 32 with probability < 1e-3
    assert covered / n_sets >= 0.8


@pytest.mark.parametrize("sharpness", [0.7, 3.0, 40.0])  # noisy, sharp, separable
def test_batched_bootstrap_equals_the_loop_of_single_fits(sharpness):
    """bootstrap_fit (every resample fitted at once on resample counts) gives the plain
    bootstrap's point value and interval: the same resamples and the same fits up to rounding."""
    from attnlab.theory import bootstrap, bootstrap_fit, logistic_fit

    rng = np.random.default_rng(int(sharpness * 10))
    n = 301  # odd: a generator's buffered half-draws would show if the resamples were drawn otherwise
    Z = np.column_stack([np.ones(n), rng.normal(size=n), rng.normal(size=n), rng.normal(size=n) ** 2])
    s = (rng.random(n) < 1 / (1 + np.exp(-sharpness * (Z[:, 1] - 0.5 * Z[:, 2] + 0.2)))).astype(float)
    value = lambda b: np.where(np.abs(b[:, 2]) > 1e-12, -b[:, 1] / b[:, 2], np.nan)

    def stat(idx):
        b, _ = logistic_fit(Z[idx], s[idx])
        return -b[1] / b[2] if abs(b[2]) > 1e-12 else np.nan

    for n_boot, seed in ((200, 3), (0, 0)):
        np.testing.assert_allclose(
            bootstrap_fit(Z, s, value, n_boot, seed), bootstrap(stat, n, n_boot, seed), rtol=1e-9, atol=1e-12
        )


def _thresholds_on_grid(x, y, grid):
    """Where each threshold y falls on a grid of probed values: (lo, hi] between neighbours,
    lo = −∞ below the first point, hi = +∞ beyond the last (never crossed)."""
    i = np.searchsorted(grid, y)
    lo = np.where(i == 0, -np.inf, grid[np.clip(i - 1, 0, len(grid) - 1)])
    hi = np.where(i >= len(grid), np.inf, grid[np.clip(i, 0, len(grid) - 1)])
    return lo, hi


def test_censored_line_keeps_columns_that_never_cross():
    """Thresholds y = 1 + 2x on a grid that stops at 4: the last columns never cross, and those
    near the edge cross only when their noise is low. Dropping the censored columns biases the
    slope down; the censored fit recovers 2 and its interval covers it."""
    rng = np.random.default_rng(3)
    grid = np.arange(0, 4.01, 0.25)
    x = np.linspace(0, 2, 9)
    fits, dropped = [], []
    for _ in range(40):
        y = 1 + 2 * x + 0.3 * rng.standard_normal(len(x))
        lo, hi = _thresholds_on_grid(x, y, grid)
        assert np.isposinf(hi).sum() >= 1  # the design censors
        fits.append(theory.censored_line(x, lo, hi, sigma_min=0.06))
        seen = np.isfinite(hi)
        dropped.append(np.polyfit(x[seen], (lo[seen] + hi[seen]) / 2, 1)[0])
    b = np.array([f.b for f in fits])
    assert abs(b.mean() - 2) < 0.08 and np.mean(dropped) < b.mean() - 0.05
    assert np.mean([f.b_ci[0] <= 2 <= f.b_ci[1] for f in fits]) >= 0.8
    assert fits[0].right >= 1 and fits[0].interval + fits[0].right + fits[0].left + fits[0].exact == len(x)


def test_censored_line_exact_thresholds_match_least_squares_and_unbounded_sides_are_infinite():
    x = np.array([0.0, 1.0, 2.0, 3.0])
    y = np.array([0.1, 1.9, 4.2, 5.8])
    f = theory.censored_line(x, y, y, sigma_min=1e-6)
    b, a = np.polyfit(x, y, 1)
    assert f.b == pytest.approx(b, abs=1e-4) and f.a == pytest.approx(a, abs=1e-4)
    # only the first column crosses: the rest lie somewhere above the grid — no upper bound on b
    lo = np.array([0.0, 1.0, 1.0, 1.0])
    hi = np.array([0.5, np.inf, np.inf, np.inf])
    g = theory.censored_line(x, lo, hi, sigma_min=0.1)
    assert np.isposinf(g.b_ci[1]) and g.right == 3
    with pytest.raises(ValueError, match="lo ≤ hi"):
        theory.censored_line(x, hi, lo, sigma_min=0.1)


@pytest.mark.parametrize(
    "curve, favoured",
    [
        (lambda t: 0.98**t, "exponential"),
        (lambda t: 1 / (1 + t / 10), "power"),
        (lambda t: (t + 1) ** -0.5, "power"),
    ],
)
def test_rate_forms_tell_linear_convergence_from_a_power_law(curve, favoured):
    t = np.arange(0, 400, 5.0)
    noisy = curve(t) * np.exp(0.01 * np.random.default_rng(0).standard_normal(len(t)))
    r = theory.rate_forms(t, noisy)
    assert (r.log_lr > np.log(32)) == (favoured == "exponential") and (r.log_lr < -np.log(32)) == (favoured == "power")
    assert r.n == len(t) - 1  # t = 0 has no log t
