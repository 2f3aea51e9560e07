import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from pydantic import ValidationError

from attnlab.data import li2023 as data
from attnlab.train import stream

# One compile per shape and mode (each costs seconds on a loaded CPU): the tests share n = 200,
# M = 6, d = 8, L = 20 and vary only traced fields wherever they can.
KW = dict(alpha_star=0.3, alpha_hash=0.1, tau=0.1, M=6, d=8, L=20)
N0 = 200
KEY = jax.random.PRNGKey(0)


def _draw(n=N0, seed=0, **over):
    return data.dataset(jax.random.PRNGKey(seed), n, **(KW | over))


def _residual(X, M, d, kappa=data.SQRT2):
    """x_l − μ_{pattern(l)} from the metadata."""
    return np.asarray(X["tokens"]) - np.asarray(data.patterns(M, d, kappa))[np.asarray(X["pattern"])]


def test_shapes_dtypes_and_labels():
    X, y = _draw()
    assert X["tokens"].shape == (N0, 20, 8) and X["tokens"].dtype == jnp.float32 and y.dtype == jnp.float32
    assert X["mask"].shape == (N0, 20) and X["mask"].dtype == jnp.bool_ and bool(jnp.all(X["mask"]))
    for k in ("pattern", "role"):
        assert X[k].shape == (N0, 20) and X[k].dtype == jnp.int32
    assert X["noise"].shape == (N0, 20) and X["noise"].dtype == jnp.float32
    np.testing.assert_array_equal(y[:6], [1, -1, 1, -1, 1, -1])


def test_fixed_counts_roles_and_patterns_are_consistent():
    X, y = _draw()
    role, pat, y = np.asarray(X["role"]), np.asarray(X["pattern"]), np.asarray(y)
    np.testing.assert_array_equal((role == data.RELEVANT).sum(1), round(0.3 * 20))
    np.testing.assert_array_equal((role == data.CONFUSION).sum(1), round(0.1 * 20))
    own = np.where(y > 0, 0, 1)[:, None] * np.ones((1, 20), int)
    np.testing.assert_array_equal(pat[role == data.RELEVANT], own[role == data.RELEVANT])
    np.testing.assert_array_equal(pat[role == data.CONFUSION], 1 - own[role == data.CONFUSION])
    irr = pat[role == data.IRRELEVANT]
    assert irr.min() >= 2 and irr.max() <= 5 and len(np.unique(irr)) == 4  # uniform over μ₃..μ_M
    # positions are shuffled: relevant tokens are not always the first ones
    assert len(np.unique(np.argmax(role == data.RELEVANT, axis=1))) > 1
    # the label is the majority vote of the discriminative tokens
    np.testing.assert_array_equal(np.sign((pat == 0).sum(1) - (pat == 1).sum(1)), y)


def test_default_counts_and_tie_rule():
    s = data.Spec()
    assert s.alpha_hash == pytest.approx(0.04) and isinstance(s.alpha_hash, float)  # n_# = ⌊15/6⌋ = 2, stored as 2/50
    assert data.n_tokens(s.alpha_star, s.L) == 15 and data.n_tokens(s.alpha_hash, s.L) == 2
    assert data.n_tokens(0.05, 50) == 2  # 2.5 → 2: ties round down
    assert int(data.n_tokens(jnp.float32(0.05), 50)) == 2  # same rule in float32
    assert (
        data.n_tokens(0.32, 50) == 16
        and data.n_tokens(0.31, 50) == 15
        and data.n_tokens(0.29, 50) == 14
        and data.n_tokens(0.0, 50) == 0
    )


def test_binomial_counts_have_the_right_mean():
    X, _ = _draw(counts="binomial", alpha_star=0.4, alpha_hash=0.1)
    role = np.asarray(X["role"])
    n_rel, n_conf = (role == data.RELEVANT).sum(1), (role == data.CONFUSION).sum(1)
    assert n_rel.mean() == pytest.approx(0.4 * 20, abs=0.4) and n_rel.std() > 1  # sd of the mean 0.16
    assert n_conf.mean() == pytest.approx(0.1 * 20, abs=0.3)  # sd of the mean 0.09


def test_noise_metadata_is_the_residual_norm():
    for noise in ("ball", "gaussian", "coord"):
        X, _ = _draw(noise=noise, tau=0.3)
        np.testing.assert_allclose(np.linalg.norm(_residual(X, 6, 8), axis=-1), X["noise"], rtol=1e-5, atol=1e-6)


def test_noise_laws():
    X, _ = _draw(noise="ball", tau=0.5)  # 4000 tokens
    r = np.asarray(X["noise"])
    assert r.max() <= 0.5 + 1e-6 and r.mean() == pytest.approx(0.5 * 8 / 9, rel=0.01)  # E r = τ d/(d+1)
    X, _ = _draw(noise="gaussian", tau=0.5)
    assert np.mean(np.asarray(X["noise"]) ** 2) == pytest.approx(0.25, rel=0.04)  # E‖z‖² = τ² (sd 0.8 %)
    X, _ = _draw(noise="coord", tau=0.5)
    assert np.std(_residual(X, 6, 8)) == pytest.approx(0.5, rel=0.02)  # per-coordinate std τ


def test_high_dimensional_embedding():
    X, _ = _draw(d=64, tau=0.0)
    assert np.all(np.asarray(X["tokens"])[..., 6:] == 0)
    np.testing.assert_allclose(X["tokens"][..., :6], np.eye(6)[np.asarray(X["pattern"])], atol=1e-6)
    X, _ = _draw(d=64, tau=0.2)
    assert np.all(np.asarray(X["tokens"])[..., 6:] != 0)  # noise lives in all d coordinates
    np.testing.assert_allclose(np.linalg.norm(_residual(X, 6, 64), axis=-1), X["noise"], rtol=1e-5)


def test_kappa_is_the_pattern_distance():
    mu = np.asarray(data.patterns(6, 8, 0.7))
    dist = np.linalg.norm(mu[:, None] - mu[None], axis=-1)
    np.testing.assert_allclose(dist[~np.eye(6, dtype=bool)], 0.7, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(data.patterns(6, 6)), np.eye(6))  # default κ = √2: e_j
    X, _ = _draw(tau=0.0, kappa=0.7)
    x, p = np.asarray(X["tokens"][0]), np.asarray(X["pattern"][0])
    dx = np.linalg.norm(x[:, None] - x[None], axis=-1)
    np.testing.assert_allclose(dx[p[:, None] != p[None]], 0.7, rtol=1e-6)
    assert np.all(dx[p[:, None] == p[None]] == 0)


def test_noisy_tokens_get_the_larger_noise():
    X, _ = _draw(tau=0.1, noisy_frac=0.25, noisy_tau=3.0)
    r = np.asarray(X["noise"])
    big = r > 0.1 + 1e-6  # a noisy token falls below 0.1 with probability (0.1/3)^8
    np.testing.assert_array_equal(big.sum(1), 5)  # [0.25·20] noisy tokens per sample
    assert r.max() <= 3.0 + 1e-5 and r[big].mean() == pytest.approx(3.0 * 8 / 9, rel=0.02)
    assert len({tuple(np.flatnonzero(b)) for b in big}) > 1  # a different subset per sample


def test_spurious_pattern_correlates_with_y_in_training_only():
    def rate(X, y, c):  # frequency of μ₃ among the irrelevant tokens of class c (1400 tokens)
        irr = (np.asarray(X["role"]) == data.IRRELEVANT) & (np.asarray(y)[:, None] == c)
        return np.mean(np.asarray(X["pattern"])[irr] == 2)

    X, y = _draw(train=True, spurious=0.5)  # M = 6: 4 irrelevant patterns
    assert rate(X, y, 1) == pytest.approx(0.5 + 0.5 / 4, abs=0.05)
    assert rate(X, y, -1) == pytest.approx(1 / 4, abs=0.05)
    X, y = _draw(train=False, spurious=0.5)
    assert rate(X, y, 1) == pytest.approx(0.25 + 0.75 / 4, abs=0.05)
    assert rate(X, y, -1) == pytest.approx(0.25 + 0.75 / 4, abs=0.05)
    # spurious = 0: the training and test rules coincide (the same samples)
    a, _ = _draw(train=True)
    b, _ = _draw(train=False)
    np.testing.assert_array_equal(a["tokens"], b["tokens"])


def test_a_sample_does_not_depend_on_how_many_are_drawn():
    """Exact for the discrete parts; the floats to rounding (at XLA's default flags exact too, but
    the suite's lowered backend optimisation may vectorise the norm differently per batch size)."""
    X1, y1 = _draw(7, seed=5)
    X2, y2 = _draw(seed=5)
    for k in ("mask", "pattern", "role"):
        np.testing.assert_array_equal(X1[k], X2[k][:7])
    for k in ("tokens", "noise"):
        np.testing.assert_allclose(X1[k], X2[k][:7], rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(y1, y2[:7])


def test_alpha_star_is_a_traced_per_cell_input():
    kw = {k: v for k, v in KW.items() if k not in ("alpha_star", "alpha_hash")}

    @jax.jit
    def counts(a, h):
        X, _ = data.dataset(KEY, 4, alpha_star=a, alpha_hash=h, **kw)
        return jnp.sum(X["role"] == data.RELEVANT, axis=1), jnp.sum(X["role"] == data.CONFUSION, axis=1)

    rel, conf = jax.vmap(counts)(jnp.array([0.2, 0.45, 0.8]), jnp.array([0.05, 0.1, 0.0]))
    np.testing.assert_array_equal(rel, [[4] * 4, [9] * 4, [16] * 4])
    np.testing.assert_array_equal(conf, [[1] * 4, [2] * 4, [0] * 4])


def test_make_pads_masks_and_uses_independent_streams():
    s = data.Spec(M=6, d=8, L=20, N=150, n_test=N0, tau=0.1, alpha_hash=0.1).model_dump()
    static = {k: s[k] for k in data.PART.static}
    v = {k: jnp.asarray(s[k]) for k in data.PART.batched}
    out = data.make(KEY, v, static, {"N": N0}, None, jnp.dtype("float32"))
    assert out["X"]["tokens"].shape == (N0, 20, 8) and out["X_test"]["tokens"].shape == (N0, 20, 8)
    np.testing.assert_array_equal(out["mask"], np.arange(N0) < 150)
    assert out["y"].shape == (N0,) and out["y_test"].shape == (N0,)
    assert not np.allclose(out["X"]["tokens"], out["X_test"]["tokens"])
    X, y = data.dataset(stream(KEY, "data"), N0, **KW)  # the training set is the data stream's
    np.testing.assert_array_equal(out["X"]["tokens"], X["tokens"])
    assert data.PART.input_shape(static) == {"tokens": 20, "d": 8}
    n, nbytes = data.PART.footprint(static, {"N": N0})
    assert n == 2 * N0 and nbytes >= 2 * N0 * 20 * 8 * 4


def test_every_field_is_classified():
    stored = {k for k, f in data.Spec.model_fields.items() if not f.exclude}  # n_star, n_hash resolve to α_*, α_#
    assert set(data.PART.static) | set(data.PART.batched) == stored and stored == set(data.Spec().model_dump())
    assert not set(data.PART.static) & set(data.PART.batched)
    assert set(data.PART.sizes) <= set(data.PART.batched)


def test_oracle_error():
    X, y = _draw(tau=0.1)
    assert float(data.oracle_error(X, y, M=6)) == 0.0
    X, y = _draw(tau=20.0)
    err = float(data.oracle_error(X, y, M=6))
    assert 0.2 < err <= 0.6
    # per sample: a tie is 1/2, a wrong vote 1; the token mask S limits the vote
    x = jnp.asarray(np.eye(6, 8)[[0, 1, 2]][None], jnp.float32)  # one μ₁, one μ₂, one μ₃ token
    np.testing.assert_allclose(data.oracle_error(x, jnp.array([1.0]), M=6, per_sample=True), [0.5])
    mask = jnp.array([[False, True, True]])
    assert float(data.oracle_error(x, jnp.array([1.0]), M=6, mask=mask)) == 1.0
    assert float(data.oracle_error({"tokens": x, "mask": mask}, jnp.array([-1.0]), M=6)) == 0.0


def test_oracle_shows_the_binomial_label_noise():
    X, y = _draw(counts="binomial", alpha_star=0.15, alpha_hash=0.1, tau=0.0)
    pat = np.asarray(X["pattern"])
    v = (pat == 0).sum(1) - (pat == 1).sum(1)
    expect = np.mean(np.where(v == 0, 0.5, np.sign(v) != np.asarray(y)))
    assert expect > 0.1 and float(data.oracle_error(X, y, M=6)) == pytest.approx(expect)


@pytest.mark.parametrize(
    "kw, field",
    [
        (dict(alpha_star=0.7, alpha_hash=0.4), "alpha_hash"),  # α_* + α_# > 1
        (dict(alpha_star=0.1, alpha_hash=0.1), "alpha_star"),  # α_* ≤ α_#
        (dict(alpha_star=0.1, alpha_hash=0.2), "alpha_star"),
        (dict(alpha_star=0.1, alpha_hash=0.09, L=10), "alpha_star"),  # fixed: [α_* L] = [α_# L] = 1
        (dict(M=20, d=10), "data.d"),
        (dict(M=2, d=2), "M"),
        (dict(alpha_star=1.2), "alpha_star"),
        (dict(alpha_star=-0.1), "alpha_star"),
        (dict(alpha_hash=-0.1), "alpha_hash"),
        (dict(noisy_frac=1.5), "noisy_frac"),
        (dict(spurious=-0.2), "spurious"),
        (dict(spurious=0.3, M=3, d=3), "spurious"),
        (dict(tau=-1.0), "tau"),
        (dict(kappa=0.0), "kappa"),
        (dict(N=0), "N"),
        (dict(n_test=0), "n_test"),
        (dict(L=0), "L"),
        (dict(noise="laplace"), "noise"),
        (dict(counts="poisson"), "counts"),
        (dict(tau=math.nan), "tau"),
        (dict(colour=1), "colour"),
    ],
)
def test_validation_errors_name_the_field(kw, field):
    with pytest.raises(ValidationError, match=field):
        data.Spec(**kw)


def test_binomial_accepts_equal_rounded_counts():
    s = data.Spec(alpha_star=0.1, alpha_hash=0.09, L=10, counts="binomial")
    assert s.alpha_hash == 0.09
