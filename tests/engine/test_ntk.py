"""attnlab.ntk: the empirical NTK against a direct Jacobian contraction on two papers' models,
per-block contributions, symmetry, vmap over parameter sets, spectra and drift helpers, and the
closed-form infinite-width limit of wu2023 under τ₀ = d_m^{−1}."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab import ntk
from attnlab.errors import AttnlabError
from attnlab.models import jiang2024, wu2023


def small_models():
    """(name, apply(params, x) -> (f, aux), params, X1, X2) in float64."""
    hw = wu2023.Hparams(d_s=4, d=5, d_m=6, heads=2, ffn=True, init="he")
    hj = jiang2024.Hparams(M=4, d=5, d_h=3, d_v=2, init_scale=1.0)
    X1 = jax.random.normal(jax.random.PRNGKey(1), (5, 4, 5), jnp.float64)
    X2 = jax.random.normal(jax.random.PRNGKey(2), (3, 4, 5), jnp.float64)
    return [
        ("wu2023", lambda p, x: wu2023.apply(p, x, hw), wu2023.init(jax.random.PRNGKey(0), hw, jnp.float64), X1, X2),
        (
            "jiang2024",
            lambda p, x: jiang2024.apply(p, x, hj),
            jiang2024.init(jax.random.PRNGKey(0), hj, jnp.float64),
            X1,
            X2,
        ),
    ]


def jacobian_kernel(apply, params, X1, X2, names=None):
    """J₁ J₂ᵀ from jax.jacrev of the stacked outputs, flattened per block."""
    names = names or tuple(params)
    F = lambda p, X: jax.vmap(lambda x: apply({**params, **p}, x)[0])(X)
    sub = {k: params[k] for k in names}
    J1, J2 = jax.jit(jax.jacrev(F))(sub, X1), jax.jit(jax.jacrev(F))(sub, X2)
    blocks = {k: np.asarray(J1[k]).reshape(len(X1), -1) @ np.asarray(J2[k]).reshape(len(X2), -1).T for k in names}
    return sum(blocks.values()), blocks


@pytest.mark.parametrize("method", ["jacobian", "jvp"])
def test_empirical_ntk_equals_the_jacobian_contraction(method):
    with jax.enable_x64(True):
        for name, apply, params, X1, X2 in small_models():
            K_ref, blocks_ref = jacobian_kernel(apply, params, X1, X2)
            kernel = jax.jit(
                lambda p, a, b, apply=apply, **kw: ntk.empirical_ntk(apply, p, a, b, method=method, **kw),
                static_argnames=("apply", "blocks", "chunk", "wrt"),
            )
            K = kernel(params, X1, X2)
            assert K.shape == (5, 3)
            np.testing.assert_allclose(K, K_ref, rtol=1e-10, atol=1e-12, err_msg=name)
            Kb = kernel(params, X1, X2, blocks=True, chunk=2)
            assert set(Kb) == set(params)
            for k in params:
                np.testing.assert_allclose(Kb[k], blocks_ref[k], rtol=1e-10, atol=1e-12, err_msg=f"{name}.{k}")
            np.testing.assert_allclose(sum(Kb.values()), K_ref, rtol=1e-10, atol=1e-12)
            # a subset of the parameters (jiang2024 trains W_Q, W_K, W_V only)
            K_sub = kernel(params, X1, X2, wrt=("W_Q", "W_V"))
            np.testing.assert_allclose(K_sub, jacobian_kernel(apply, params, X1, X2, ("W_Q", "W_V"))[0], rtol=1e-10)


def test_gram_is_symmetric_psd_and_auto_picks_a_path():
    with jax.enable_x64(True):
        for _, apply, params, X1, _ in small_models():
            gram = jax.jit(ntk.empirical_ntk, static_argnums=0, static_argnames=("max_bytes", "chunk"))
            K = gram(apply, params, X1)
            np.testing.assert_array_equal(K, K.T)
            ev = np.linalg.eigvalsh(np.asarray(K))
            assert ev.min() > -1e-10 * ev.max()
            # auto: the jvp path when the Jacobians exceed max_bytes, with the same numbers
            np.testing.assert_allclose(gram(apply, params, X1, max_bytes=1), K, rtol=1e-10, atol=1e-12)
            f_only = lambda p, x, apply=apply: apply(p, x)[0]  # a plain scalar apply is accepted too
            np.testing.assert_allclose(gram(f_only, params, X1, chunk=2), K, rtol=1e-12, atol=1e-14)


def test_vmap_over_parameter_sets_and_jit():
    with jax.enable_x64(True):
        hp = wu2023.Hparams(d_s=4, d=5, d_m=6)
        apply = lambda p, x: wu2023.apply(p, x, hp)
        stacked = jax.vmap(lambda k: wu2023.init(k, hp, jnp.float64))(jax.random.split(jax.random.PRNGKey(0), 3))
        X = jax.random.normal(jax.random.PRNGKey(1), (4, 4, 5), jnp.float64)
        single = jax.jit(lambda p: ntk.empirical_ntk(apply, p, X, blocks=True))
        for method in ("jacobian", "jvp"):
            batched = jax.jit(jax.vmap(lambda p, m=method: ntk.empirical_ntk(apply, p, X, blocks=True, method=m)))(
                stacked
            )
            for i in range(3):
                one = single(jax.tree.map(lambda a, i=i: a[i], stacked))
                for k in one:
                    np.testing.assert_allclose(batched[k][i], one[k], rtol=1e-10, atol=1e-12)


def test_spectrum_and_drift_helpers():
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        B = rng.standard_normal((5, 5))
        K = jnp.asarray(B @ B.T + 0.1 * np.eye(5))
        s = ntk.spectrum(K)
        np.testing.assert_allclose(s["eigvals"], np.linalg.eigvalsh(np.asarray(K)), rtol=1e-10)
        assert float(s["lambda_min"]) == pytest.approx(np.linalg.eigvalsh(np.asarray(K))[0])
        assert float(s["lambda_max"]) == pytest.approx(np.linalg.eigvalsh(np.asarray(K))[-1])
        mask = jnp.array([True, False, True, True, False])  # the spectrum of the kept samples' kernel
        sm = jax.jit(ntk.spectrum)(K, mask)
        sub = np.linalg.eigvalsh(np.asarray(K)[np.ix_(np.asarray(mask), np.asarray(mask))])
        assert np.isnan(np.asarray(sm["eigvals"][:2])).all()
        np.testing.assert_allclose(sm["eigvals"][2:], sub, rtol=1e-10)
        assert float(sm["lambda_min"]) == pytest.approx(sub[0]) and float(sm["lambda_max"]) == pytest.approx(sub[-1])
        K1 = K + 0.3 * jnp.eye(5)
        assert float(ntk.kernel_drift(K1, K)) == pytest.approx(0.3 * np.sqrt(5) / np.linalg.norm(np.asarray(K)))
        Km = np.asarray(K)[np.ix_(np.asarray(mask), np.asarray(mask))]
        assert float(ntk.kernel_drift(K1, K, mask)) == pytest.approx(0.3 * np.sqrt(3) / np.linalg.norm(Km))
        theta0 = {"a": jnp.ones((2, 3)), "b": jnp.array([3.0, 4.0])}
        theta1 = {"a": jnp.ones((2, 3)) * 1.5, "b": jnp.array([3.0, 4.0 + 0.5])}
        drift = ntk.weight_drift(theta1, theta0)
        assert float(drift["a"]) == pytest.approx(0.5) and float(drift["b"]) == pytest.approx(0.1)


def test_bad_input_names_the_field():
    X = jnp.ones((2, 3, 4))
    with pytest.raises(AttnlabError, match="model.init"):
        ntk.limit_ntk(X, init="xavier")
    with pytest.raises(AttnlabError, match="model.init"):
        ntk.normalised(jnp.eye(2), "glorot", 16)
    hp = wu2023.Hparams(d_s=3, d=4, d_m=2)
    p = wu2023.init(jax.random.PRNGKey(0), hp)
    with pytest.raises(AttnlabError, match="ntk.method"):
        ntk.empirical_ntk(lambda p, x: wu2023.apply(p, x, hp), p, X[:, :3], method="exact")
    with pytest.raises(AttnlabError, match="ntk.wrt"):
        ntk.empirical_ntk(lambda p, x: wu2023.apply(p, x, hp), p, X[:, :3], wrt=("W_O",))


def test_arccos_kernels():
    with jax.enable_x64(True):
        g = np.random.default_rng(1).standard_normal((400_000, 3))
        A = jnp.array([[1.0, 0.5, 0.0], [0.0, 2.0, -1.0]])
        k0, k1 = ntk.arccos_kernels(A, A)
        u = g @ np.asarray(A).T  # (samples, 2)
        mc1 = (np.maximum(u, 0)[:, :, None] * np.maximum(u, 0)[:, None, :]).mean(0)
        mc0 = ((u > 0)[:, :, None] & (u > 0)[:, None, :]).mean(0)
        np.testing.assert_allclose(k1, mc1, rtol=0.02)
        np.testing.assert_allclose(k0, mc0, rtol=0.02)
        np.testing.assert_allclose(np.diag(k1), np.linalg.norm(A, axis=1) ** 2 / 2, rtol=1e-12)


WIDTHS = (1024, 4096, 16384)


def limit_errors(init, alpha=1.0, seeds=(0, 1)):
    """Relative Frobenius error of the normalised empirical NTK against limit_ntk, per width
    (mean over seeds), on 6 samples of 8 N(0, 1) tokens in d = 16."""
    X = jax.random.normal(jax.random.PRNGKey(1), (6, 8, 16), jnp.float64)
    errs, qk = [], []
    for d_m in WIDTHS:
        hp = wu2023.Hparams(d_s=8, d=16, d_m=d_m, alpha=alpha, init=init)
        L = ntk.limit_ntk(X, init=init, d_m=d_m)
        e, q = [], []
        for seed in seeds:
            p = wu2023.init(jax.random.PRNGKey(seed), hp, jnp.float64)
            apply = lambda p, x, hp=hp: wu2023.apply(p, x, hp)
            Kb = ntk.normalised(ntk.empirical_ntk(apply, p, X, blocks=True), init, d_m)
            e.append(float(jnp.linalg.norm(sum(Kb.values()) - L) / jnp.linalg.norm(L)))
            q.append(float(jnp.linalg.norm(Kb["W_Q"] + Kb["W_K"]) / jnp.linalg.norm(L)))
        errs.append(np.mean(e))
        qk.append(np.mean(q))
    return np.array(errs), np.array(qk)


@pytest.mark.parametrize("init", ["lecun", "he", "ntk"])
def test_limit_ntk_at_large_width(init):
    """τ₀ = d_m^{−1}: the normalised NTK tends to the two-layer ReLU NTK of the mean tokens; the
    error falls with width (≈ d_m^{−1/2}) and the W_Q, W_K blocks vanish."""
    with jax.enable_x64(True):
        errs, qk = limit_errors(init)
    print(init, dict(zip(WIDTHS, np.round(errs, 4), strict=True)), "QK share", qk)
    assert errs[-1] < 0.04
    assert np.all(np.diff(errs) < 0), errs
    slope = np.polyfit(np.log(WIDTHS), np.log(errs), 1)[0]
    assert -0.8 < slope < -0.25, slope
    assert np.all(np.diff(qk) < 0) and qk[-1] < 1e-4


def test_limit_does_not_hold_under_tau0_sqrt():
    """τ₀ = d_m^{−1/2}: attention stays non-uniform, the uniform-attention limit is off by far
    more and does not improve with width; the logits' std stays O(1) (it shrinks under d_m^{−1})."""
    with jax.enable_x64(True):
        errs, _ = limit_errors("ntk", alpha=0.5, seeds=(0,))
        assert errs.min() > 0.2 and errs[-1] > errs[0] / 2
        X = jax.random.normal(jax.random.PRNGKey(1), (6, 8, 16), jnp.float64)
        std = {}
        for alpha in (0.5, 1.0):
            for d_m in (256, 4096):
                hp = wu2023.Hparams(d_s=8, d=16, d_m=d_m, alpha=alpha)
                p = wu2023.init(jax.random.PRNGKey(0), hp, jnp.float64)
                std[alpha, d_m] = float(
                    jax.vmap(lambda x, p=p, hp=hp: wu2023.apply(p, x, hp)[1])(X)["logit_std"].mean()
                )
        assert std[0.5, 4096] > 0.5 * std[0.5, 256] and std[0.5, 4096] > 0.5
        assert std[1.0, 4096] == pytest.approx(std[1.0, 256] / 4, rel=0.3)  # ∝ d_m^{−1/2}


# ---------------------------------------------------------------- neural-tangents' empirical API


def _vector_model():
    """A two-layer net with a (2, 3) output per sample and nested (flax-style) parameters."""
    k = jax.random.split(jax.random.PRNGKey(0), 4)
    params = {
        "layer": {"kernel": jax.random.normal(k[0], (5, 7)), "bias": jax.random.normal(k[1], (7,))},
        "head": {"kernel": jax.random.normal(k[2], (7, 6)) / 3},
    }

    def f(p, x):  # x: (n, 5) -> (n, 2, 3)
        h = jnp.tanh(x @ p["layer"]["kernel"] + p["layer"]["bias"])
        return (h @ p["head"]["kernel"]).reshape(x.shape[0], 2, 3)

    x1 = jax.random.normal(k[3], (4, 5))
    x2 = jax.random.normal(jax.random.PRNGKey(9), (3, 5))
    return f, params, x1, x2


def _direct(f, params, x1, x2, only=None):
    """Θ[i, j, a, b, c, e] = Σ_θ ∂f(x1)_{i,a,b}/∂θ ∂f(x2)_{j,c,e}/∂θ from whole-batch Jacobians."""
    flat = lambda J, n: jnp.concatenate(
        [
            v.reshape(n, 2, 3, -1)
            for path, v in jax.tree_util.tree_flatten_with_path(J)[0]
            if only is None or ntk._path(path).startswith(only)
        ],
        -1,
    )
    J1 = flat(jax.jacobian(lambda p: f(p, x1))(params), x1.shape[0])
    J2 = flat(jax.jacobian(lambda p: f(p, x2))(params), x2.shape[0])
    return jnp.einsum("iabp,jcep->ijabce", J1, J2)


@pytest.mark.parametrize("implementation", ["jacobian_contraction", "ntk_vector_products"])
def test_empirical_ntk_fn_matches_a_direct_jacobian_contraction(implementation):
    f, params, x1, x2 = _vector_model()
    full = _direct(f, params, x1, x2)  # (n1, n2, 2, 3, 2, 3)
    fn = lambda **kw: ntk.empirical_ntk_fn(f, implementation=implementation, **kw)(x1, x2, params)
    close = lambda a, b: np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
    # default: the last axis traced and averaged; axis 1 kept as a pair
    close(fn(), jnp.einsum("ijacbc->ijab", full) / 3)
    close(fn(trace_axes=()), jnp.transpose(full, (0, 1, 2, 4, 3, 5)))  # pairs (x1's, x2's) per axis
    close(fn(trace_axes=(1, 2)), jnp.einsum("ijabab->ij", full) / 6)
    close(fn(trace_axes=(-1,), diagonal_axes=(1,)), jnp.einsum("ijacac->ija", full) / 3)
    # wrt a subtree of a nested pytree; blocks keyed by the parameter's path and summing to Θ
    close(fn(trace_axes=(1, 2), wrt=["head"]), jnp.einsum("ijabab->ij", _direct(f, params, x1, x2, "head")) / 6)
    Kb = fn(trace_axes=(1, 2), blocks=True)
    assert set(Kb) == {"layer/kernel", "layer/bias", "head/kernel"}
    close(sum(Kb.values()), fn(trace_axes=(1, 2)))
    close(Kb["layer/bias"], jnp.einsum("ijabab->ij", _direct(f, params, x1, x2, "layer/bias")) / 6)


def test_empirical_ntk_fn_x2_none_is_x1_and_symmetric_and_bad_arguments_are_clear():
    f, params, x1, _ = _vector_model()
    K = ntk.empirical_ntk_fn(f, trace_axes=())(x1, None, params)  # (n, n, 2, 2, 3, 3)
    np.testing.assert_allclose(K, jnp.transpose(K, (1, 0, 3, 2, 5, 4)), rtol=0, atol=0)
    np.testing.assert_allclose(K, ntk.empirical_ntk_fn(f, trace_axes=())(x1, x1, params), rtol=1e-5, atol=1e-5)
    with pytest.raises(AttnlabError, match="ntk.wrt: unknown parameter"):
        ntk.empirical_ntk_fn(f, wrt=["nope"])(x1, None, params)
    with pytest.raises(AttnlabError, match="batch axis 0"):
        ntk.empirical_ntk_fn(f, trace_axes=(0,))(x1, None, params)
    with pytest.raises(AttnlabError, match="ntk.implementation: unknown"):
        ntk.empirical_ntk_fn(f, implementation="fast")


def test_part_fn_differentiates_only_what_the_part_trains():
    """jiang2024 with a fixed w_O (the paper's default): the helper's wrt leaves w_O out, and the
    kernel equals the old per-sample call restricted to the trained blocks."""
    f, wrt, hp = ntk.part_fn("jiang2024", {"d_h": 4, "d_v": 4}, {"d": 8, "tokens": 3})
    assert "w_O" not in wrt and set(wrt) <= {"W_Q", "W_K", "W_V"}
    from attnlab import problem

    part = problem.part("model", "jiang2024")
    params = part.init(jax.random.PRNGKey(0), hp, jnp.float32)
    X = jax.random.normal(jax.random.PRNGKey(1), (5, 3, 8))
    K = ntk.empirical_ntk_fn(f, trace_axes=(), wrt=wrt)(X, None, params)
    old = ntk.empirical_ntk(lambda p, x: part.apply(p, x, hp), params, X, wrt=tuple(wrt), method="jacobian")
    np.testing.assert_allclose(K, old, rtol=1e-5, atol=1e-6)
