import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.models import jiang2024 as model

HP = model.Hparams(M=4, d=10, d_h=6, d_v=5, init_scale=16.0)


def reference_f(params, X, tau=1.0):
    """f(X) = w_Oᵀ((1/M) Σ_l softmax_s((x_l W_Q)(x_s W_K)ᵀ) · X W_V), written with loops."""
    P = {k: np.asarray(v, np.float64) for k, v in params.items()}
    X = np.asarray(X, np.float64)
    M = X.shape[0]
    a_bar = np.zeros(M)
    for l in range(M):
        s = np.array([tau * (X[l] @ P["W_Q"]) @ (X[j] @ P["W_K"]) for j in range(M)])
        e = np.exp(s - s.max())
        a_bar += e / e.sum() / M
    return sum(a_bar[j] * (X[j] @ P["W_V"] @ P["w_O"]) for j in range(M)), a_bar


@pytest.mark.parametrize("tau", [1.0, 0.3])
def test_apply_matches_the_equation(tau):
    hp = model.Hparams(**{**HP.__dict__, "tau": tau, "init_scale": 1.0})
    params = model.init(jax.random.PRNGKey(0), hp)
    X = jax.random.normal(jax.random.PRNGKey(1), (hp.M, hp.d))
    f, aux = model.apply(params, X, hp)
    f_ref, a_ref = reference_f(params, X, tau)
    assert float(f) == pytest.approx(f_ref, rel=1e-4, abs=1e-6)
    np.testing.assert_allclose(aux["a_bar"], a_ref, rtol=1e-5)
    np.testing.assert_allclose(aux["phi"].sum(-1), 1.0, rtol=1e-6)


def test_init_is_pytorch_linear_divided_by_scale():
    hp = model.Hparams(M=3, d=400, d_h=300, d_v=200, init_scale=16.0)
    p = model.init(jax.random.PRNGKey(0), hp)
    for name in ("W_Q", "W_K", "W_V"):  # U(±1/√d) / 16
        bound = 1 / np.sqrt(hp.d) / 16
        assert np.abs(p[name]).max() <= bound
        assert np.abs(p[name]).max() > 0.98 * bound
        assert np.std(p[name]) == pytest.approx(bound / np.sqrt(3), rel=0.02)
    assert np.abs(p["w_O"]).max() <= 1 / np.sqrt(hp.d_v)  # w_O keeps U(±1/√d_v)
    assert np.abs(p["w_O"]).max() > 0.95 / np.sqrt(hp.d_v)
    assert model.trainable(hp) == ("W_Q", "W_K", "W_V")
    assert "w_O" in model.trainable(model.Hparams(train_w_O=True))


def test_logistic_loss_is_stable():
    f = jnp.array([-1000.0, 0.0, 1000.0])
    np.testing.assert_allclose(model.logistic_loss(f, jnp.ones(3)), [1000.0, np.log(2), 0.0], atol=1e-6)


def test_gradients_match_finite_differences():
    with jax.enable_x64(True):
        hp = model.Hparams(M=4, d=8, d_h=5, d_v=3, init_scale=2.0, train_w_O=True)
        params = model.init(jax.random.PRNGKey(3), hp, jnp.float64)
        X = jax.random.normal(jax.random.PRNGKey(4), (6, hp.M, hp.d), jnp.float64)
        y = jnp.array([1.0, -1, 1, -1, 1, -1])

        def L(p):
            f = jax.vmap(lambda x: model.apply(p, x, hp)[0])(X)
            return model.logistic_loss(f, y).mean()

        g = jax.grad(L)(params)
        rng = np.random.default_rng(0)
        for name in params:
            for _ in range(3):
                direction = jnp.asarray(rng.standard_normal(params[name].shape))
                eps = 1e-6
                plus = {**params, name: params[name] + eps * direction}
                minus = {**params, name: params[name] - eps * direction}
                fd = (L(plus) - L(minus)) / (2 * eps)
                assert float(jnp.sum(g[name] * direction)) == pytest.approx(float(fd), rel=1e-6, abs=1e-10)


def test_probes_by_hand():
    """The jiang2024 probe set, built as a run builds it, against hand-written values; the
    attention probes read the training pass's aux (ā per sample)."""
    from attnlab.data import jiang2024 as data
    from attnlab.experiments.jiang2024 import tiny_cell
    from attnlab.problem import Composition

    cell = tiny_cell(M=5, d=8, d_h=4, d_v=3, init_scale=1.0, N=4, n_test=6, probes="jiang2024")
    comp = Composition.of(cell)
    static = {k: v for k, v in cell.items() if comp.classify(k) == "static"}
    problem = comp.problem(static, {"data.N": 4})
    hp = model.Hparams(M=5, d=8, d_h=4, d_v=3, init_scale=1.0)
    params = model.init(jax.random.PRNGKey(5), hp)
    X, y = data.dataset(jax.random.PRNGKey(6), 4, mu_norm=2.0, sigma_p=0.2, sigma_tilde_p=4.0, M=5, d=8)
    Xt, yt = data.dataset(jax.random.PRNGKey(7), 6, mu_norm=2.0, sigma_p=0.2, sigma_tilde_p=4.0, M=5, d=8)
    mask = jnp.array([True, True, True, False])  # the last sample is padding
    batch = {"X": X, "y": y, "mask": mask, "X_test": Xt, "y_test": yt}
    _, aux = jax.jit(jax.vmap(lambda x: model.apply(params, x, hp)))(X)
    probes = jax.jit(problem.probes)  # one compile instead of one per eager op
    p = probes(params, batch, {}, aux)
    Wvw = np.asarray(params["W_V"] @ params["w_O"])
    W_QK = np.asarray(params["W_Q"] @ params["W_K"].T)
    assert float(p["V_signal"]) == pytest.approx(2.0 * Wvw[0], rel=1e-5)  # μ₊ = 2·e₁
    assert float(p["V_strong"]) == pytest.approx(float(X[0, 1] @ Wvw), rel=1e-5)
    assert float(p["qk_signal_signal"]) == pytest.approx(4.0 * W_QK[0, 0], rel=1e-4)
    assert float(p["qk_weak_strong"]) == pytest.approx(float(X[0, 2] @ W_QK @ X[0, 1]), rel=1e-4)
    assert float(p["qk_strong_signal"]) == pytest.approx(float(X[0, 1] @ W_QK @ X[0, 0]), rel=1e-4)
    a_bar = [reference_f(params, X[i])[1] for i in range(4)]
    assert float(p["attn_signal"]) == pytest.approx(a_bar[0][0], rel=1e-5)
    assert float(p["attn_strong_mean"]) == pytest.approx(np.mean([a[1] for a in a_bar[:3]]), rel=1e-5)
    assert float(p["attn_weak_max_mean"]) == pytest.approx(np.mean([a[2:].max() for a in a_bar[:3]]), rel=1e-5)
    assert float(p["attn_signal"] + p["attn_strong"] + p["attn_weak"]) == pytest.approx(1.0, rel=1e-6)
    f_test = np.array([reference_f(params, Xt[i])[0] for i in range(6)])
    assert float(p["test_loss"]) == pytest.approx(np.mean(np.log1p(np.exp(-np.asarray(yt) * f_test))), rel=1e-4)
    # the array probe: the attention matrix averaged over the real training samples
    arrays = jax.jit(problem.array_probes)(params, batch, {}, aux)
    np.testing.assert_allclose(arrays["attn_matrix"], np.mean(np.asarray(aux["phi"])[:3], axis=0), rtol=1e-5)
    # the probes read ā from aux: a different aux gives different attention probes
    other = jax.tree.map(lambda a: a[::-1], aux)
    assert float(probes(params, batch, {}, other)["attn_signal"]) != pytest.approx(float(p["attn_signal"]))


def test_the_probe_set_is_registered():
    from attnlab.experiments.jiang2024 import probes
    from attnlab.problem import part

    assert part("probes", "jiang2024") is probes.PROBES and probes.PROBES.name == "jiang2024"
