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
