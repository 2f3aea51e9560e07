import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.data import jiang2024 as data

KW = dict(mu_norm=2.5, sigma_p=0.2, sigma_tilde_p=4.0, M=5, d=16)


def test_token_layout_and_labels():
    X, y = data.dataset(jax.random.PRNGKey(0), 6, **KW)
    assert X.shape == (6, 5, 16) and y.shape == (6,)
    np.testing.assert_array_equal(y, [1, -1, 1, -1, 1, -1])
    for i in range(6):  # token 1 = ‖μ‖·e₁ for y = +1, ‖μ‖·e₂ for y = −1 (orthogonal, not ±μ)
        e = np.zeros(16)
        e[0 if y[i] > 0 else 1] = 2.5
        np.testing.assert_allclose(X[i, 0], e)
    np.testing.assert_array_equal(data.token_roles(5), [data.SIGNAL, data.STRONG_NOISE] + [data.WEAK_NOISE] * 3)


def test_noise_scales():
    X, _ = data.dataset(jax.random.PRNGKey(1), 400, mu_norm=1.0, sigma_p=0.2, sigma_tilde_p=4.0, M=4, d=64)
    assert np.std(X[:, 1]) == pytest.approx(4.0, rel=0.03)  # strong noise token
    assert np.std(X[:, 2:]) == pytest.approx(0.2, rel=0.03)  # weak noise tokens


def test_snr_definition_and_inverse():
    assert data.snr(1.0, 0.2, 1024) == pytest.approx(1 / (0.2 * 32))  # paper: ‖μ‖ = 1 → SNR 0.156
    assert data.snr(100.0, 0.2, 1024) == pytest.approx(15.625)
    assert data.mu_for_snr(data.snr(7.0, 0.3, 50), 0.3, 50) == pytest.approx(7.0)


def test_projected_noise_is_orthogonal_to_signals():
    X, _ = data.dataset(jax.random.PRNGKey(2), 4, projected=True, **KW)
    assert np.all(X[:, 1:, :2] == 0)


@settings(max_examples=8, deadline=None)
# few distinct sizes: each new size costs a compile of every op of ``dataset``
@given(n=st.sampled_from([1, 3, 6]), extra=st.sampled_from([2, 5]), seed=st.integers(0, 2**31 - 1))
def test_a_sample_does_not_depend_on_how_many_are_drawn(n, extra, seed):
    key = jax.random.PRNGKey(seed)
    X1, y1 = data.dataset(key, n, **KW)
    X2, y2 = data.dataset(key, n + extra, **KW)
    np.testing.assert_array_equal(X1, X2[:n])
    np.testing.assert_array_equal(y1, y2[:n])


def test_even_prefixes_are_balanced():
    _, y = data.dataset(jax.random.PRNGKey(3), 20, **KW)
    for n in range(2, 21, 2):
        assert jnp.sum(y[:n] > 0) == n // 2
