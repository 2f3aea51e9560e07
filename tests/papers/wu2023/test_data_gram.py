"""wu2023-data-gram: the two Gram matrices, their spectra, and the claims on synthetic columns whose
answer is known: nonsingular-relu (λ_min above rounding in every cell) judged, the rest measured."""

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
    """Per-cell columns over N × d whose ρ is rho_fn(N, d, kernel) times a little noise (λ̄ = 1,
    λ_max = 10, full rank)."""
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
        "input_varying": np.full(len(N), 600),
        "duplicates": np.zeros(len(N), int),
    }
    for k in G.KERNELS:
        cols[f"{k}_rho"] = rho_fn(N, d, k) * np.exp(0.05 * rng.standard_normal(len(N)))
        cols[f"{k}_lambda_min"] = cols[f"{k}_rho"]
        cols[f"{k}_lambda_mean"] = np.ones(len(N))
        cols[f"{k}_lambda_max"] = np.full(len(N), 10.0)
        cols[f"{k}_rank"] = N.copy()
    return cols


def gauss(factor):
    """ρ = factor(N, d) × the Gaussian-token reference of the same shape and kernel."""
    ref = lambda n, d, k: G.gauss_reference(n, (28 // int(round(d**0.5))) ** 2, d)[k]
    return lambda N, d, k: factor(N, d) * np.array([ref(n, dd, k) for n, dd in zip(N, d, strict=True)])


def analysed(cols, exp_id="wu2023-data-gram"):
    exp = get(exp_id)
    return {c.id: c for c in exp.analyse(cols, exp.spec("cpu")).claims}


def verdicts(cols):
    return {k: c.outcome for k, c in analysed(cols).items()}


MEASURED = ("nonsingular-input", "floor-input", "trend-input", "floor-relu", "trend-relu")


def test_the_judged_claim_is_lambda_min_above_rounding_and_the_rest_is_measured():
    """nonsingular-relu passes any non-singular kernel, however far below Gaussian tokens its ρ lies
    (the assumption is λ_min > 0, not a margin over unstructured data); every other claim is a
    measurement, whatever the numbers."""
    for factor in (3.0, 1.0, 1e-4):
        v = verdicts(columns(gauss(lambda N, d, f=factor: np.full(len(N), f))))
        assert v == {"nonsingular-relu": "pass"} | dict.fromkeys(MEASURED, "descriptive"), factor
    c = analysed(columns(gauss(lambda N, d: np.full(len(N), 0.1))))
    assert c["nonsingular-relu"].regime == "" and "MNIST stands in for IMDB" in c["nonsingular-relu"].detail
    assert get("wu2023-data-gram").regime == "investigation" and get("wu2023-imdb-gram").regime == "protocol"
    m = c["nonsingular-relu"].measured["d = 49"]
    assert m["cells"] == 20 and m["singular"] == 0 and m["min_over_rounding"] > 1e6
    floor = c["floor-relu"].measured["d = 49"]
    assert floor["ratio"] == pytest.approx(0.1, rel=0.1) and "λ_min > 0" in c["floor-relu"].detail
    assert "any kernel" in c["trend-relu"].detail and c["trend-relu"].measured["d = 49"]["slope"] is not None


def test_one_singular_cell_fails_it_and_a_cell_within_rounding_leaves_it_open():
    cols = columns(gauss(lambda N, d: np.full(len(N), 0.1)))
    one = (cols["data.N"] == 64) & (cols["d"] == 49) & (cols["rep"] == 0)
    dup = dict(cols) | {
        "relu_rank": np.where(one, 63, cols["relu_rank"]),
        "relu_lambda_min": np.where(one, 1e-17, cols["relu_lambda_min"]),
    }
    c = analysed(dup)["nonsingular-relu"]
    assert (
        c.outcome == "fail" and c.measured["d = 49"]["singular"] == 1 and c.measured["d = 49"]["singular_at_N"] == [64]
    )
    assert "d = 49: 1 of 20 cells" in c.detail
    negative = dict(cols) | {"relu_lambda_min": np.where(one, -1e-15, cols["relu_lambda_min"])}  # full rank, λ_min < 0
    assert analysed(negative)["nonsingular-relu"].outcome == "fail"
    near = dict(cols) | {"relu_lambda_min": np.where(one, 10 * 10 * 64 * G.EPS, cols["relu_lambda_min"])}  # r = 10·N·ε
    c = analysed(near)["nonsingular-relu"]
    assert c.outcome == "inconclusive" and "within 100× of rounding at d = 49" in c.detail
    assert c.measured["d = 49"]["min_over_rounding"] == pytest.approx(10, rel=1e-3)


def test_singular_input_grams_are_reported_and_leave_the_slope():
    cols = columns(gauss(lambda N, d: np.full(len(N), 3.0)))
    top = cols["data.N"] == 256
    cols["input_rho"] = np.where(top, 1e-16, cols["input_rho"])
    cols["input_lambda_min"] = cols["input_rho"]
    cols["input_rank"] = np.where(top, 250, cols["input_rank"])
    exp = get("wu2023-data-gram")
    a = exp.analyse(cols, exp.spec("cpu"))
    c = {c.id: c for c in a.claims}
    assert {k: c[k].outcome for k in ("nonsingular-input", "floor-input", "trend-input")} == dict.fromkeys(
        ("nonsingular-input", "floor-input", "trend-input"), "descriptive"
    )
    assert (
        c["nonsingular-input"].measured["all d"]["singular"] == 8 and "by construction" in c["nonsingular-input"].detail
    )
    assert "would read fail" in c["nonsingular-input"].detail and c["nonsingular-relu"].outcome == "pass"
    assert a.summary["input: singular cells (rank < N, left out of the slope)"] == {256: 8}
    assert a.summary["input: smallest rank at the largest N"] == 250


def test_cell_measures_report_spectra_ranks_span_and_duplicates():
    rng = np.random.default_rng(2)
    m = G.cell_measures(rng.standard_normal((20, 3, 4)))  # Φ: 20 × 12
    assert m["d"] == 4 and m["d_s"] == 3 and m["input_rank"] == 12 and m["relu_rank"] == 20
    assert m["input_varying"] == 12 and m["duplicates"] == 0
    assert abs(m["input_rho"]) < 1e-12 and m["relu_rho"] > 0
    X = rng.standard_normal((8, 3, 4))
    m = G.cell_measures(X)
    assert m["input_rank"] == 8 and m["input_rho"] > 1e-3
    np.testing.assert_allclose(m["input_lambda_mean"], np.sum(X**2) / 8)
    np.testing.assert_allclose(m["input_lambda_min"], np.linalg.svd(X.reshape(8, -1), compute_uv=False)[-1] ** 2)
    X = rng.standard_normal((6, 3, 4))
    X[:, 0, 0] = 1.0  # a coordinate that never varies
    X[5] = X[2]  # a duplicated sample: both matrices singular
    m = G.cell_measures(X)
    assert m["input_varying"] == 11 and m["duplicates"] == 1
    assert m["input_rank"] == 5 and m["relu_rank"] == 5
