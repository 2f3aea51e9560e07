"""jiang2024-fig2 (MNIST in a noise border): the patch layout (every token pure digit or pure
noise), the SNR definition, and the phase analysis on synthetic columns whose boundary is known."""

import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.data import image_ops
from attnlab.data import images as I
from attnlab.datasets import mnist as dmnist
from attnlab.experiments import get
from attnlab.experiments.jiang2024 import fig2

SMALL = I.Spec(**{k: v for k, v in fig2.DATA.items() if k != "name"} | {"pool": 20, "n_test": 4, "N": 2}).model_dump()


@pytest.fixture(scope="module")
def pool():
    return I.shared(SMALL)


def test_layout_is_one_digit_token_among_eight_noise_tokens(pool):
    assert I.input_shape(SMALL) == {"tokens": 9, "d": 784}
    assert fig2.layout(SMALL) == {"image": 1, "noise": 8, "mixed": 0}
    mask = I.image_mask(SMALL, pool["offset"])
    assert mask.shape == pool["X"].shape
    share = mask.mean(axis=2)
    assert set(np.unique(share)) == {0.0, 1.0}  # every token of every image is all digit or all noise
    assert np.all(share[:, 4] == 1) and np.all(np.delete(share, 4, axis=1) == 0)  # the centre token is the digit
    # the centre token is the whole digit, pixels in [0, 1]; the noise tokens are N(0, σ²) with σ = 1
    mnist = dmnist.load_mnist()
    x, _ = image_ops.class_subset(mnist.x_train, mnist.y_train, "0,1")
    bank = {image_ops.to_unit(im).ravel().tobytes() for im in x}
    assert all(pool["X"][i, 4].tobytes() in bank for i in range(len(pool["X"])))
    noise = np.delete(pool["X"], 4, axis=1)
    assert abs(noise.std() - 1.0) < 0.01 and abs(noise.mean()) < 0.01


def test_patch_edges_that_cut_the_digit_are_reported_as_mixed_tokens():
    # the sheet's guess: an 18×18 centre ([5:23]) in noise, cut into 7×7 patches: the patch edges at 7, 14 and 21
    # cut the digit, so only the 4 inner tokens are clean
    assert fig2.layout(dict(SMALL, crop=18, border=5, patch=7)) == {"image": 4, "noise": 0, "mixed": 12}
    # patch-aligned: a 14×14 crop in a border of 7, 7×7 patches
    assert fig2.layout(dict(SMALL, crop=14, border=7, patch=7)) == {"image": 4, "noise": 12, "mixed": 0}
    # a 56×56 canvas in 28×28 patches: the digit straddles all 4 patches
    assert fig2.layout(dict(SMALL, crop=0, border=14, patch=28)) == {"image": 0, "noise": 0, "mixed": 4}


def test_snr_is_signal_times_rms_digit_norm_over_noise_norm(pool):
    rms = fig2.digit_rms(SMALL)
    np.testing.assert_allclose(rms, np.sqrt(np.mean(np.sum(pool["X"][:, 4].astype(np.float64) ** 2, axis=1))))
    assert 5 < rms < 15  # an MNIST 0 or 1 in [0, 1] pixels
    np.testing.assert_allclose(fig2.snr(3.0, rms, 1.0, 784), 3.0 * rms / 28.0)
    np.testing.assert_allclose(fig2.snr([1.0, 2.0], rms, 0.5, 784), np.array([1.0, 2.0]) * rms / 14.0)
    # the signal knob scales the digit token only, in training and test samples alike
    X = jnp.asarray(pool["X"][:3])
    scaled = np.asarray(I.with_signal(X, jnp.asarray(pool["offset"][:3]), 3.0, SMALL))
    np.testing.assert_allclose(scaled[:, 4], 3.0 * pool["X"][:3, 4], rtol=1e-6)
    np.testing.assert_array_equal(np.delete(scaled, 4, axis=1), np.delete(pool["X"][:3], 4, axis=1))
    np.testing.assert_array_equal(np.asarray(I.with_signal(X, jnp.asarray(pool["offset"][:3]), 1.0, SMALL)), X)


def columns(exponent, C, reps=5, noise=0.05, seed=0):
    """Per-run columns of fig2 whose runs succeed (test loss 0.05) iff N·SNR^exponent > C."""
    rng = np.random.default_rng(seed)
    snrs = np.geomspace(0.3, 10, 24)
    rows = [(n, s, r) for s in snrs for n in range(2, 21, 2) for r in range(reps)]
    N, snr, rep = (np.array(a) for a in zip(*rows, strict=True))
    ok = np.log(N) + exponent * np.log(snr) + noise * rng.standard_normal(len(N)) > np.log(C)
    n = len(N)
    cols = {f"data.{k}": np.full(n, v, dtype=object if isinstance(v, str) else None) for k, v in SMALL.items()}
    cols |= {
        "data.N": N,
        "snr": snr,
        "test_loss": np.where(ok, 0.05, 0.6),
        "status": np.full(n, "converged"),
        "block": np.zeros(n, int),
        "rep": rep,
        "digit_rms": np.full(n, 8.9),
        "data.signal": snr * 28 / 8.9,
    }
    return cols


def verdicts(cols):
    exp = get("jiang2024-fig2")
    a = exp.analyse(cols, exp.spec("cpu", ["n_boot=100", "slope_min_runs=0"]))  # the rule itself, at any size
    return {c.id: c for c in a.claims}, a.summary


def test_analysis_passes_on_a_theory_shaped_boundary_and_fails_on_another_slope():
    v, summary = verdicts(columns(2, 40))  # boundary N·SNR² = 40: inside the grid for N = 2 … 20
    outcomes = {k: c.outcome for k, c in v.items()}
    assert {k: outcomes.pop(k) for k in ("slope", "benign", "harmful")} == dict.fromkeys(
        ("slope", "benign", "harmful"), "pass"
    ), v
    assert outcomes == {"curvature": outcomes["curvature"]} and outcomes["curvature"] != "fail"  # a straight line
    assert abs(v["slope"].measured["slope"] + 2) < 0.3
    assert "C" not in v and summary["C claim"].startswith("not judged")
    assert summary["token layout (pure digit / pure noise / mixed)"] == {"image": 1, "noise": 8, "mixed": 0}
    v, _ = verdicts(columns(1, 8))  # boundary N·SNR = 8: slope −1
    assert v["slope"].outcome == "fail"
    assert abs(v["slope"].measured["slope"] + 1) < 0.2


def test_spec_scales_keep_the_clean_layout():
    exp = get("jiang2024-fig2")
    for scale in ("smoke", "cpu", "paper"):
        spec = exp.spec(scale)
        cell = exp.cells(spec)[0]
        s = fig2.data_static(cell)
        assert fig2.layout(s)["mixed"] == 0 and fig2.layout(s)["image"] == 1
        assert cell["model.name"] == "jiang2024" and cell["train.loss_threshold"] == 0.01


def test_the_slope_is_descriptive_below_the_runs_its_audit_needs():
    """At the cpu design (550 runs < slope_min_runs) the slope is a measurement, not counted."""
    exp = get("jiang2024-fig2")
    a = exp.analyse(columns(2, 40), exp.spec("cpu", ["n_boot=100"]))
    (slope,) = [c for c in a.claims if c.id == "slope"]
    assert slope.outcome == "descriptive" and "descriptive below 2000 runs" in slope.detail
    assert abs(slope.measured["slope"] + 2) < 0.3
