"""wu2023-data-gram: the two Gram matrices, their spectra, and the claims on synthetic columns whose
answer is known."""

import jax
import numpy as np
import pytest

from attnlab import ntk
from attnlab.data import image_ops
from attnlab.experiments import get
from attnlab.experiments.wu2023 import data_gram as G


def test_input_gram_does_not_depend_on_the_patch_size_and_relu_gram_is_the_limit_ntk():
    rng = np.random.default_rng(0)
    imgs = rng.standard_normal((6, 28, 28))
    g7, g28 = G.grams(image_ops.patchify(imgs, 7)), G.grams(image_ops.patchify(imgs, 28))
    np.testing.assert_allclose(g7["input"], g28["input"], rtol=1e-12)  # patching permutes a sample's pixels
    flat = imgs.reshape(6, -1)
    np.testing.assert_allclose(g7["input"], flat @ flat.T, rtol=1e-12)
    X = image_ops.patchify(imgs, 7)
    with jax.enable_x64(True):
        limit = np.asarray(ntk.limit_ntk(X, init="lecun", d_m=None))
    np.testing.assert_allclose(g7["relu"], 49 * limit, rtol=1e-10)  # κ₁ of the mean tokens = d·K_∞ under LeCun
    # κ₁ = E_w[ReLU(wᵀa) ReLU(wᵀb)]: a Monte-Carlo check on two mean tokens
    xbar = X.mean(axis=1)[:2]
    w = rng.standard_normal((200_000, 49))
    mc = np.mean(np.maximum(w @ xbar[0], 0) * np.maximum(w @ xbar[1], 0))
    np.testing.assert_allclose(g7["relu"][0, 1], mc, rtol=0.03)


def test_spectrum_stats_and_the_rank_bound():
    s = G.spectrum_stats(np.diag([1.0, 2.0, 3.0]))
    assert s == {"lambda_min": 1.0, "lambda_max": 3.0, "lambda_mean": 2.0, "rho": 0.5}
    rng = np.random.default_rng(1)
    X = rng.standard_normal((20, 3, 4))  # N = 20 samples of d_s·d = 12 numbers: Φ Φᵀ has rank 12
    assert abs(G.spectrum_stats(G.grams(X)["input"])["rho"]) < 1e-12
    assert G.spectrum_stats(G.grams(X)["relu"])["rho"] > 1e-6  # κ₁ stays positive definite


def columns(rho_fn, reps=4, seed=0):
    """Per-cell columns over N × d whose ρ is rho_fn(N, d, kernel) times a little noise."""
    rng = np.random.default_rng(seed)
    rows = [(n, p, r) for n in (16, 32, 64, 128, 256) for p in (7, 28) for r in range(reps)]
    N, p, rep = (np.array(a) for a in zip(*rows, strict=True))
    d, d_s = p**2, (28 // p) ** 2
    cols = {
        "data.N": N,
        "d": d,
        "d_s": d_s,
        "rep": rep,
        "block": np.zeros(len(N), int),
        "data.classes": np.full(len(N), "3,8", dtype=object),
    }
    for k in G.KERNELS:
        cols[f"{k}_rho"] = rho_fn(N, d, k) * np.exp(0.05 * rng.standard_normal(len(N)))
        cols[f"{k}_rank"] = N.copy()
    return cols


def gauss(factor):
    """ρ = factor(N, d) × the Gaussian-token reference of the same shape and kernel."""
    return lambda N, d, k: factor(N, d) * np.array([G.gauss_reference(n, dd)[k] for n, dd in zip(N, d, strict=True)])


def verdicts(cols):
    exp = get("wu2023-data-gram")
    return {c.id: c.outcome for c in exp.analyse(cols, exp.spec("cpu")).claims}


def test_floors_are_judged_against_gaussian_tokens_and_trends_are_descriptive():
    """floor-*: ρ above 1.5× the Gram of i.i.d. Gaussian tokens of the same N, d_s, d passes, ρ at
    the Gaussian level does not, below it fails; trend-*: a measurement only (it falls for any
    i.i.d. sample), whatever ρ does."""
    assert verdicts(columns(gauss(lambda N, d: np.full(len(N), 3.0)))) == {
        "floor-input": "pass",
        "floor-relu": "pass",
        "trend-input": "descriptive",
        "trend-relu": "descriptive",
    }
    same = verdicts(columns(gauss(lambda N, d: np.ones(len(N)))))
    assert same["floor-input"] != "pass" and same["floor-relu"] != "pass"  # Gaussian tokens themselves
    worse = verdicts(columns(gauss(lambda N, d: np.where(d == 49, 0.3, 3.0))))  # one d worse than Gaussian tokens
    assert worse["floor-relu"] == "fail"
    # a fixed ρ = 0.05 (above the old 10⁻³ floor, flat in N) is no longer a pass by itself: below Gaussian tokens' ρ
    flat = verdicts(columns(lambda N, d, k: np.full(len(N), 0.05)))
    assert flat["trend-relu"] == "descriptive" and flat["floor-relu"] == "fail"
    exp = get("wu2023-data-gram")
    a = exp.analyse(columns(gauss(lambda N, d: np.full(len(N), 3.0))), exp.spec("cpu"))
    floor = next(c for c in a.claims if c.id == "floor-relu")
    assert floor.measured["d = 49"]["ratio"] == pytest.approx(3.0, rel=0.1)
    trend = next(c for c in a.claims if c.id == "trend-relu")
    assert "any kernel" in trend.detail and trend.measured["d = 49"]["slope"] is not None


def test_singular_input_grams_count_as_zero_and_leave_the_slope():
    cols = columns(gauss(lambda N, d: np.full(len(N), 3.0)))
    top = cols["data.N"] == 256
    cols["input_rho"] = np.where(top, 1e-16, cols["input_rho"])
    cols["input_rank"] = np.where(top, 250, cols["input_rank"])
    exp = get("wu2023-data-gram")
    a = exp.analyse(cols, exp.spec("cpu"))
    v = {c.id: c.outcome for c in a.claims}
    assert v["floor-input"] == "fail" and v["trend-input"] == "descriptive"
    assert a.summary["input: singular cells (rank < N, left out of the slope)"] == {256: 8}
    assert a.summary["input: smallest rank at the largest N"] == 250


def test_cell_measures_report_spectra_and_ranks():
    rng = np.random.default_rng(2)
    m = G.cell_measures(rng.standard_normal((20, 3, 4)))  # Φ: 20 × 12
    assert m["d"] == 4 and m["d_s"] == 3 and m["input_rank"] == 12 and m["relu_rank"] == 20
    assert abs(m["input_rho"]) < 1e-12 and m["relu_rho"] > 0
    X = rng.standard_normal((8, 3, 4))
    m = G.cell_measures(X)
    assert m["input_rank"] == 8 and m["input_rho"] > 1e-3
    np.testing.assert_allclose(m["input_lambda_mean"], np.sum(X**2) / 8)
    np.testing.assert_allclose(m["input_lambda_min"], np.linalg.svd(X.reshape(8, -1), compute_uv=False)[-1] ** 2)
