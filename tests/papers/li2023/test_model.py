import jax
import jax.numpy as jnp
import numpy as np
import pytest
from pydantic import ValidationError

from attnlab.models import li2023 as model

L, D = 6, 5
KEEP = np.array([True, False, True, True, False, True])  # S = {0, 2, 3, 5}
ALL = np.ones(L, bool)
HP = model.Hparams(L=L, d=D, init="gaussian", m=7, m_a=4, m_b=3)  # non-square: exercises every transpose
HP_NI = model.Hparams(L=L, d=D, sigma=0.5, delta=0.5)  # near_identity, m_a = m_b = d
HP_CNN = model.CNNHparams(L=L, d=D, init="gaussian", m=7, m_a=4)
HP_LIN = model.LinearHparams(L=L, d=D, init="gaussian")

# The forward passes are compiled once per Hparams and input structure.
init = model.init  # eager: draws of one shape share a compile across tests
apply = jax.jit(model.apply, static_argnums=2)
apply_cnn = jax.jit(model.apply_cnn, static_argnums=2)
apply_linear = jax.jit(model.apply_linear, static_argnums=2)


def _np(params):
    return {k: np.asarray(v, np.float64) for k, v in params.items()}


def reference_vit(params, X, keep):
    """F(X) = (1/|S|) Σ_{l∈S} aᵀ ReLU(W_O Σ_{s∈S} W_V x_s softmax_{s∈S}(x_sᵀ W_Kᵀ W_Q x_l)), by loops."""
    P, X = _np(params), np.asarray(X, np.float64)
    S = [i for i in range(len(X)) if keep[i]]
    A = np.zeros((len(X), len(X)))
    f = 0.0
    for l in S:
        logits = np.array([X[s] @ P["W_K"].T @ P["W_Q"] @ X[l] for s in S])
        e = np.exp(logits - logits.max())
        for j, s in enumerate(S):
            A[l, s] = e[j] / e.sum()
        h = sum(P["W_V"] @ X[s] * A[l, s] for s in S)
        f += P["a"] @ np.maximum(P["W_O"] @ h, 0) / len(S)
    return f, A


def reference_cnn(params, X, keep):
    """F(X) = (1/|S|) Σ_{l∈S} aᵀ ReLU(W_O W_V x_l); 0 for an empty S."""
    P, X = _np(params), np.asarray(X, np.float64)
    S = [i for i in range(len(X)) if keep[i]]
    return sum(P["a"] @ np.maximum(P["W_O"] @ P["W_V"] @ X[l], 0) for l in S) / max(len(S), 1)


def reference_linear(params, X, keep):
    """F(X) = wᵀ (1/|S|) Σ_{l∈S} x_l + b."""
    P, X = _np(params), np.asarray(X, np.float64)
    S = [i for i in range(len(X)) if keep[i]]
    return P["w"] @ (sum(X[l] for l in S) / len(S)) + float(P["b"])


def _x(seed):
    return np.random.default_rng(seed).standard_normal((L, D)).astype(np.float32)


@pytest.mark.parametrize("hp", [HP_NI, HP], ids=["near_identity", "gaussian"])
def test_vit_matches_the_equation_and_ignores_dropped_tokens(hp):
    params = init(jax.random.PRNGKey(0), hp)
    X = 2.0 * _x(1)
    for keep in (ALL, KEEP):
        f, aux = apply(params, {"tokens": X, "mask": keep}, hp)
        f_ref, A_ref = reference_vit(params, X, keep)
        assert float(f) == pytest.approx(f_ref, rel=1e-4, abs=1e-6)
        A = np.asarray(aux["attn"])
        np.testing.assert_allclose(A, A_ref, rtol=1e-4, atol=1e-7)
        np.testing.assert_array_equal(aux["mask"], keep)
        np.testing.assert_allclose(A.sum(-1), keep.astype(float), rtol=1e-6)  # rows of S sum to 1
        assert np.all(A[:, ~keep] == 0) and np.all(A[~keep] == 0)  # dropped keys and queries
    # Dropped tokens do not influence F at all, whatever their values (even NaN padding).
    f1 = float(apply(params, {"tokens": X, "mask": KEEP}, hp)[0])
    for fill in (100.0 * _x(2)[~KEEP], np.nan):
        X2 = X.copy()
        X2[~KEEP] = fill
        assert float(apply(params, {"tokens": X2, "mask": KEEP}, hp)[0]) == f1


def test_cnn_and_linear_match_their_equations():
    X = _x(3)
    hp_ni = model.CNNHparams(L=L, d=D, sigma=0.5)
    cnns = [(h, model.init_cnn(jax.random.PRNGKey(0), h)) for h in (hp_ni, HP_CNN)]
    p_lin = {"w": jnp.asarray(_x(4)[0]), "b": jnp.array(0.3)}
    for keep in (ALL, KEEP):
        x = {"tokens": X, "mask": keep}
        for h, p in cnns:
            f, aux = apply_cnn(p, x, h)
            assert float(f) == pytest.approx(reference_cnn(p, X, keep), rel=1e-4, abs=1e-6)
            assert set(aux) == {"mask"}
        f, aux = apply_linear(p_lin, x, HP_LIN)
        assert float(f) == pytest.approx(reference_linear(p_lin, X, keep), rel=1e-5, abs=1e-6)
        assert set(aux) == {"mask"}
    X2 = X.copy()
    X2[~KEEP] = np.nan
    for fn, p, h in ((apply_cnn, cnns[1][1], HP_CNN), (apply_linear, p_lin, HP_LIN)):
        assert float(fn(p, {"tokens": X2, "mask": KEEP}, h)[0]) == float(fn(p, {"tokens": X, "mask": KEEP}, h)[0])


def test_plain_array_and_pytree_inputs_agree():
    X = _x(1)
    for fn, p, hp in (
        (apply, init(jax.random.PRNGKey(0), HP), HP),
        (apply_cnn, model.init_cnn(jax.random.PRNGKey(0), HP_CNN), HP_CNN),
        (apply_linear, {"w": jnp.asarray(_x(4)[0]), "b": jnp.array(0.3)}, HP_LIN),
    ):
        f, aux = fn(p, X, hp)
        assert aux["mask"].dtype == jnp.bool_ and bool(aux["mask"].all())
        assert float(f) == pytest.approx(float(fn(p, {"tokens": X, "mask": ALL}, hp)[0]), rel=1e-6)
    # A pytree without a mask (metadata only) keeps every token.
    Xk, keep = model.kept({"tokens": X, "role": np.zeros(L, int)})
    np.testing.assert_array_equal(Xk, X)
    assert bool(keep.all())


def test_all_dropped_is_safe():
    params = init(jax.random.PRNGKey(0), HP)
    f, aux = apply(params, {"tokens": _x(1), "mask": np.zeros(L, bool)}, HP)
    assert float(f) == 0.0 and not np.any(aux["attn"])  # finite gradients: see the next test


@pytest.mark.parametrize("which", ["vit", "cnn"])
def test_gradients_match_finite_differences(which):
    """jax.grad of a batch loss against central differences of the float64 loop reference."""
    with jax.enable_x64(True):
        if which == "vit":
            hp, apply_, part = HP, model.apply, model.PART_VIT
            params = model.init(jax.random.PRNGKey(3), hp)
            ref = lambda p, X, k: reference_vit(p, X, k)[0]
        else:
            hp, apply_, part = HP_CNN, model.apply_cnn, model.PART_CNN
            params = model.init_cnn(jax.random.PRNGKey(3), hp)
            ref = reference_cnn
        params = {k: jnp.asarray(v, jnp.float64) for k, v in params.items()}
        X = np.random.default_rng(4).standard_normal((4, L, D))
        masks = np.array([ALL, KEEP, KEEP[::-1], np.zeros(L, bool)])  # the last sample keeps nothing
        y = np.array([1.0, -1, 1, -1])
        ref_masks = [m if m.any() else None for m in masks]

        def loss(p):  # logistic: smooth, so central differences are accurate to O(ε²)
            f = jax.vmap(lambda x, k: apply_(p, {"tokens": x, "mask": k}, hp)[0])(X, masks)
            return jax.nn.softplus(-y * f).mean()

        def loss_ref(p):
            f = np.array([ref(p, x, k) if k is not None else 0.0 for x, k in zip(X, ref_masks, strict=True)])
            return np.mean(np.logaddexp(0, -y * f))

        g = jax.jit(jax.grad(loss))(params)
        assert all(np.all(np.isfinite(v)) for v in g.values())
        rng = np.random.default_rng(0)
        for name in part.trainable(hp):
            for _ in range(3):
                u = rng.standard_normal(params[name].shape)
                eps = 1e-6
                P = _np(params)
                plus, minus = {**P, name: P[name] + eps * u}, {**P, name: P[name] - eps * u}
                fd = (loss_ref(plus) - loss_ref(minus)) / (2 * eps)
                assert float(jnp.sum(g[name] * u)) == pytest.approx(fd, rel=1e-6, abs=1e-10)


def test_near_identity_init_statistics():
    d, m = 200, 400
    hp = model.Hparams(L=3, d=d, m=m, sigma=0.3, delta=0.1)
    p = init(jax.random.PRNGKey(0), hp)
    assert p["W_Q"].shape == p["W_K"].shape == p["W_V"].shape == (d, d) and p["W_O"].shape == (m, d)
    for name, err in (("W_Q", 0.1), ("W_K", 0.1), ("W_V", 0.3)):
        E = np.asarray(p[name]) - np.eye(d)
        assert np.std(E) == pytest.approx(err / np.sqrt(d), rel=0.02)
        assert abs(np.mean(E)) < 0.1 * err / np.sqrt(d)
    assert not np.allclose(p["W_Q"], p["W_K"])  # independent draws
    assert np.std(p["W_O"]) == pytest.approx(1 / np.sqrt(m), rel=0.02)
    np.testing.assert_allclose(np.abs(p["a"]), 1 / np.sqrt(m), rtol=1e-6)
    assert 0.4 < np.mean(np.asarray(p["a"]) > 0) < 0.6  # random signs
    a_lin = model.sign_readout(jax.random.PRNGKey(0), m, "linear", jnp.float32)
    np.testing.assert_allclose(np.abs(a_lin), 1 / m, rtol=1e-6)
    np.testing.assert_array_equal(model.near_identity(jax.random.PRNGKey(0), d, 0.0, jnp.float32), np.eye(d))
    # The CNN draws the same W_V, W_O, a as the ViT for the same key.
    c = model.init_cnn(jax.random.PRNGKey(0), model.CNNHparams(L=3, d=d, m=m, sigma=0.3))
    assert set(c) == {"W_V", "W_O", "a"}
    for name in c:
        np.testing.assert_allclose(c[name], p[name], rtol=1e-6, atol=1e-7)


def test_gaussian_init_statistics():
    d, m, m_a, m_b = 200, 200, 400, 400  # fan_in of W_O = m_a ≠ m: tells the two schemes apart
    p = init(jax.random.PRNGKey(1), model.Hparams(L=3, d=d, m=m, m_a=m_a, m_b=m_b, init="gaussian"))
    assert p["W_Q"].shape == p["W_K"].shape == (m_b, d) and p["W_V"].shape == (m_a, d) and p["W_O"].shape == (m, m_a)
    for name, fan_in in (("W_Q", d), ("W_K", d), ("W_V", d), ("W_O", m_a)):
        assert np.std(p[name]) == pytest.approx(1 / np.sqrt(fan_in), rel=0.03)
    np.testing.assert_allclose(np.abs(p["a"]), 1 / np.sqrt(m), rtol=1e-6)
    w = model.init_linear(jax.random.PRNGKey(1), model.LinearHparams(d=4000, init="gaussian"))["w"]
    assert np.std(w) == pytest.approx(1 / np.sqrt(4000), rel=0.05)
    z = model.init_linear(jax.random.PRNGKey(1), model.LinearHparams(d=5))
    assert not np.any(z["w"]) and float(z["b"]) == 0.0


def test_parts_trainable_groups_and_sizes():
    shape = {"tokens": L, "d": D}
    for part, spec, trained in (
        (model.PART_VIT, {}, ("W_Q", "W_K", "W_V", "W_O")),
        (model.PART_CNN, {}, ("W_V", "W_O")),
        (model.PART_LINEAR, {}, ("w", "b")),
    ):
        s = part.config(**spec).model_dump()
        assert part.static == tuple(s) and part.batched == ()
        hp = part.hparams(s, shape)
        assert hp.L == L and hp.d == D
        params = part.init(jax.random.PRNGKey(0), hp, jnp.float32)
        assert part.trainable(hp) == trained and "a" not in part.trainable(hp)
        assert sorted(p for g in part.groups(hp).values() for p in g) == sorted(trained)
        n_params, act = part.sizes(hp)
        assert n_params == sum(v.size for v in params.values()) and act > 0
    assert model.PART_VIT.groups(None) == {"QK": ("W_Q", "W_K"), "V": ("W_V",), "O": ("W_O",)}
    assert set(model.PART_VIT.config.fields()) == {"m", "m_a", "m_b", "init", "sigma", "delta", "a_scale"}
    assert set(model.PART_CNN.config.fields()) == {"m", "m_a", "init", "sigma", "a_scale"}
    assert model.Hparams().model_dump() == {
        "m": 64,
        "m_a": 0,
        "init": "near_identity",
        "sigma": 0.1,
        "a_scale": "sqrt",
        "m_b": 0,
        "delta": 0.1,
    }  # L, d: the data's, unset
    hp = model.PART_VIT.hparams(model.Hparams().model_dump(), shape)
    assert (hp.m, hp.m_a, hp.m_b, hp.init, hp.a_scale) == (64, D, D, "near_identity", "sqrt")


def test_validation_errors():
    """One typed config validates a cell's fields (d unknown) and the bound hyperparameters."""
    for field in ("m_a", "m_b"):
        with pytest.raises(ValidationError, match=f"model.{field}"):
            model.Hparams(**{field: 7})
        model.Hparams(**{field: 7, "init": "gaussian"})
        with pytest.raises(ValidationError, match=f"model.{field}: init = 'near_identity' needs {field} = d = 4"):
            model.Hparams(L=3, d=4, **{field: 7})
        model.Hparams(L=3, d=4, **{field: 4})  # = d is fine
    with pytest.raises(ValidationError, match="model.m_a"):
        model.CNNHparams(m_a=3)
    with pytest.raises(ValidationError, match="m_b"):
        model.CNNHparams(m_b=0)  # not a CNN field
    with pytest.raises(ValidationError):
        model.Hparams(init="orthogonal")
    with pytest.raises(ValidationError):
        model.Hparams(sigma=-0.1)
    with pytest.raises(ValidationError):
        model.LinearHparams(init="near_identity")
    with pytest.raises(ValidationError, match="a_scale"):
        model.Hparams(a_scale="cube")
    with pytest.raises(ValidationError, match="init"):
        model.LinearHparams(init="ones")
