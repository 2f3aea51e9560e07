"""The wu2023 model against its equation written with loops, its init schemes, gradients, token
mask and bad input; the wu2023 data model; both on the engine (vectorised == reference)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from pydantic import ValidationError

from attnlab.data import wu2023 as data
from attnlab.errors import AttnlabError
from attnlab.experiments.config import ExperimentSpec, expand
from attnlab.models import wu2023 as model
from helpers import METRICS, assert_same, cell_of, run_bucket, run_reference

REGRESSION = tuple(m for m in METRICS if not m.endswith("_error"))  # the squared loss has no sign error
CONFIGS = {  # name -> Hparams fields (d_s = 4, d = 5, d_m = 6 unless given)
    "lecun": dict(init="lecun", alpha=0.5),
    "he-alpha1": dict(init="he", alpha=1.0),
    "ntk": dict(init="ntk", alpha=0.5),
    "tied": dict(init="lecun", tied=True),
    "ffn-ntk": dict(init="ntk", ffn=True, alpha=1.0),
    "heads": dict(init="he", heads=2),
    "all-options": dict(init="ntk", tied=True, ffn=True, heads=3, alpha=0.7),
}


def hparams(**kw):
    return model.Hparams(**({"d_s": 4, "d": 5, "d_m": 6} | kw))


def reference_f(params, X, hp, keep=None):
    """f(X) = τ₁ Σ_j w_j (1/|S|) Σ_{t∈S} ReLU(A_tj) with loops over heads, tokens and hidden units."""
    P = {k: np.asarray(v, np.float64) for k, v in params.items()}
    X = np.asarray(X, np.float64)
    d_s, d = X.shape
    d_m, H = hp.d_m, hp.heads
    d_h = d_m // H
    ntk = hp.init == "ntk"
    m, m_F, tau1 = (d**-0.5, d_m**-0.5, d_m**-0.5) if ntk else (1.0, 1.0, 1.0)
    tau0 = d_h ** (-hp.alpha)
    W_K = P["W_Q"] if hp.tied else P["W_K"]
    S = [t for t in range(d_s) if keep is None or keep[t]]
    A = np.zeros((d_s, d_m))
    logits = []
    for k in range(H):
        rows = range(k * d_h, (k + 1) * d_h)
        for t in S:
            s_t = np.array([tau0 * sum((m * P["W_Q"][j] @ X[t]) * (m * W_K[j] @ X[s]) for j in rows) for s in S])
            logits += list(s_t)
            e = np.exp(s_t - s_t.max())
            phi = e / e.sum()
            for j in rows:
                A[t, j] = sum(phi[i] * (m * P["W_V"][j] @ X[s]) for i, s in enumerate(S))
    if hp.ffn:
        A = np.array(
            [[m_F * sum(P["W_F"][i, j] * A[t, j] for j in range(d_m)) for i in range(d_m)] for t in range(d_s)]
        )
    h = [sum(max(A[t, j], 0.0) for t in S) / len(S) for j in range(d_m)]
    return tau1 * sum(P["w_O"][j] * h[j] for j in range(d_m)), np.std(logits)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_apply_matches_the_equation(name):
    with jax.enable_x64(True):
        hp = hparams(**CONFIGS[name])
        params = model.init(jax.random.PRNGKey(0), hp, jnp.float64)
        X = 1.5 * jax.random.normal(jax.random.PRNGKey(1), (hp.d_s, hp.d), jnp.float64)
        f, aux = model.apply(params, X, hp)
        f_ref, logit_std = reference_f(params, X, hp)
        assert float(f) == pytest.approx(f_ref, rel=1e-12, abs=1e-14)
        assert float(aux["logit_std"]) == pytest.approx(logit_std, rel=1e-10)
        phi = np.asarray(aux["attn"])
        assert phi.shape == (hp.heads, hp.d_s, hp.d_s)
        np.testing.assert_allclose(phi.sum(-1), 1.0, rtol=1e-12)
        tv = 0.5 * np.abs(phi - 1 / hp.d_s).sum(-1).mean()
        assert float(aux["attn_tv"]) == pytest.approx(tv, rel=1e-10)
        assert float(aux["attn_entropy"]) == pytest.approx(-(phi * np.log(phi)).sum(-1).mean(), rel=1e-10)
        assert float(aux["attn_entropy"]) <= np.log(hp.d_s) + 1e-12


def test_init_schemes():
    d, d_m = 64, 256
    stds = {}
    for init in model.INITS:
        hp = model.Hparams(d_s=3, d=d, d_m=d_m, init=init, ffn=True)
        p = model.init(jax.random.PRNGKey(0), hp)
        assert set(p) == {"W_Q", "W_K", "W_V", "w_O", "W_F"} and p["W_Q"].shape == (d_m, d) and p["w_O"].shape == (d_m,)
        stds[init] = {k: float(np.std(v)) for k, v in p.items()}
    for k in ("W_Q", "W_K", "W_V"):
        assert stds["lecun"][k] == pytest.approx(d**-0.5, rel=0.03)
        assert stds["he"][k] == pytest.approx((2 / d) ** 0.5, rel=0.03)
        assert stds["ntk"][k] == pytest.approx(1.0, rel=0.03)
    for k in ("w_O", "W_F"):
        assert stds["lecun"][k] == pytest.approx(d_m**-0.5, rel=0.1)
        assert stds["he"][k] == pytest.approx((2 / d_m) ** 0.5, rel=0.1)
        assert stds["ntk"][k] == pytest.approx(1.0, rel=0.1)
    tied = model.Hparams(d_s=3, d=4, d_m=6, tied=True)
    assert set(model.init(jax.random.PRNGKey(0), tied)) == {"W_Q", "W_V", "w_O"}
    assert model.trainable(tied) == ("W_Q", "W_V", "w_O")
    assert model.groups(tied) == {"QK": ("W_Q",), "V": ("W_V",), "O": ("w_O",)}
    full = model.Hparams(d_s=3, d=4, d_m=6, ffn=True)
    assert model.trainable(full) == ("W_Q", "W_K", "W_V", "w_O", "W_F")
    assert model.groups(full)["F"] == ("W_F",) and model.groups(full)["QK"] == ("W_Q", "W_K")
    assert model.Hparams(d_m=64, heads=4, alpha=1.0).tau0 == pytest.approx(1 / 16)  # head width


def test_ntk_parameterisation_is_a_forward_multiplier():
    """f_ntk(θ) = f_lecun(θ') with W' = W/√d (W_Q, W_K, W_V), w_O' = w_O/√d_m, W_F' = W_F/√d_m,
    and the gradients carry the multipliers: ∇_W f_ntk(θ) = ∇_{W'} f_lecun(θ')/√d."""
    with jax.enable_x64(True):
        hp_ntk, hp_lecun = hparams(init="ntk", ffn=True, heads=2), hparams(init="lecun", ffn=True, heads=2)
        theta = model.init(jax.random.PRNGKey(2), hp_ntk, jnp.float64)
        mult = {
            "W_Q": hp_ntk.d**-0.5,
            "W_K": hp_ntk.d**-0.5,
            "W_V": hp_ntk.d**-0.5,
            "w_O": hp_ntk.d_m**-0.5,
            "W_F": hp_ntk.d_m**-0.5,
        }
        theta_l = {k: mult[k] * v for k, v in theta.items()}
        X = jax.random.normal(jax.random.PRNGKey(3), (hp_ntk.d_s, hp_ntk.d), jnp.float64)
        f_ntk = lambda p: model.apply(p, X, hp_ntk)[0]
        f_lecun = lambda p: model.apply(p, X, hp_lecun)[0]
        assert float(f_ntk(theta)) == pytest.approx(float(f_lecun(theta_l)), rel=1e-12)
        g_ntk, g_lecun = jax.grad(f_ntk)(theta), jax.grad(f_lecun)(theta_l)
        for k in theta:
            np.testing.assert_allclose(g_ntk[k], mult[k] * g_lecun[k], rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("name", ["lecun", "all-options", "heads"])
def test_gradients_match_finite_differences(name):
    with jax.enable_x64(True):
        hp = hparams(**CONFIGS[name])
        params = model.init(jax.random.PRNGKey(3), hp, jnp.float64)
        X = jax.random.normal(jax.random.PRNGKey(4), (5, hp.d_s, hp.d), jnp.float64)
        y = jax.random.normal(jax.random.PRNGKey(5), (5,), jnp.float64)

        @jax.jit
        def L(p):
            f = jax.vmap(lambda x: model.apply(p, x, hp)[0])(X)
            return 0.5 * jnp.mean((f - y) ** 2)

        g = jax.jit(jax.grad(L))(params)
        rng = np.random.default_rng(0)
        for k in params:
            for _ in range(2):
                direction = jnp.asarray(rng.standard_normal(params[k].shape))
                eps = 1e-6
                fd = L({**params, k: params[k] + eps * direction}) - L({**params, k: params[k] - eps * direction})
                fd = fd / (2 * eps)
                assert float(jnp.sum(g[k] * direction)) == pytest.approx(float(fd), rel=1e-6, abs=1e-10)


def test_token_mask():
    with jax.enable_x64(True):
        hp = model.Hparams(d_s=5, d=4, d_m=6, heads=2, ffn=True)
        params = model.init(jax.random.PRNGKey(0), hp, jnp.float64)
        X = jax.random.normal(jax.random.PRNGKey(1), (5, 4), jnp.float64)
        f_plain, _ = model.apply(params, X, hp)
        f_all, _ = model.apply(params, {"tokens": X, "mask": jnp.ones(5, bool)}, hp)
        assert float(f_all) == pytest.approx(float(f_plain), rel=1e-12)
        keep = jnp.array([True, False, True, True, False])
        f_keep, aux = model.apply(params, {"tokens": X, "mask": keep}, hp)
        X2 = X.at[1].set(jnp.nan).at[4].set(-50.0)  # dropped tokens: any values, same output
        assert float(model.apply(params, {"tokens": X2, "mask": keep}, hp)[0]) == pytest.approx(
            float(f_keep), rel=1e-12
        )
        assert float(f_keep) == pytest.approx(float(model.apply(params, X[keep], hp)[0]), rel=1e-12)
        f_ref, logit_std = reference_f(params, X, hp, keep=np.asarray(keep))
        assert float(f_keep) == pytest.approx(f_ref, rel=1e-12)
        assert float(aux["logit_std"]) == pytest.approx(logit_std, rel=1e-10)
        assert np.allclose(np.asarray(aux["attn"])[:, :, ~np.asarray(keep)], 0)


def test_bad_input_names_the_field():
    for kw, field in (
        (dict(init="xavier"), "model.init"),
        (dict(alpha=0.0), "model.alpha"),
        (dict(alpha=-1.0), "model.alpha"),
        (dict(d_m=6, heads=4), "model.heads"),
    ):
        with pytest.raises(ValidationError, match=field.removeprefix("model.")):  # one config validates both
            model.Hparams(**kw)
    for fields, field in (
        ({"init": "xavier"}, "model.init"),
        ({"alpha": 0}, "model.alpha"),
        ({"d_m": 6, "heads": 4}, "model.heads"),
        ({"token_norm": "l2"}, "data.token_norm"),
    ):
        model_fields = {"name": "wu2023"} | {k: v for k, v in fields.items() if k != "token_norm"}
        data_fields = {"name": "wu2023"} | {k: v for k, v in fields.items() if k == "token_norm"}
        with pytest.raises(AttnlabError, match=field):
            expand(ExperimentSpec(data=data_fields, model=model_fields, train={"loss": "squared"}))


# ---------------------------------------------------------------- data model


def test_data_model():
    with jax.enable_x64(True):
        key = jax.random.PRNGKey(0)
        X, y = data.dataset(key, 6, d_s=8, d=16, dtype=jnp.float64)
        assert X.shape == (6, 8, 16) and y.shape == (6,)
        X3, y3 = data.dataset(key, 3, d_s=8, d=16, dtype=jnp.float64)  # a sample does not depend on n
        np.testing.assert_array_equal(X[:3], X3)
        np.testing.assert_array_equal(y[:3], y3)
        Xu, yu = data.dataset(key, 6, d_s=8, d=16, token_norm="unit", scale=2.0, dtype=jnp.float64)
        np.testing.assert_allclose(np.linalg.norm(Xu, axis=-1), 2.0, rtol=1e-12)
        np.testing.assert_array_equal(yu, y)  # the targets do not depend on the tokens' normalisation
        Xb, _ = data.dataset(key, 400, d_s=8, d=16, scale=3.0)
        assert float(jnp.mean(jnp.sum(Xb**2, -1))) == pytest.approx(9 * 16, rel=0.03)  # ‖x‖² ≈ s²d
        assert float(jnp.std(data.dataset(key, 2000, d_s=2, d=2)[1])) == pytest.approx(1.0, rel=0.05)


def test_teacher_targets():
    with jax.enable_x64(True):
        tkey = jax.random.PRNGKey(7)
        target = lambda: data.teacher_fn(tkey, 8, 16, 32, dtype=jnp.float64)  # built once per trace
        draw = jax.jit(lambda k: data.dataset(k, 300, d_s=8, d=16, target_fn=target(), dtype=jnp.float64))
        X, y = draw(jax.random.PRNGKey(1))
        params, hp = data.teacher(tkey, 8, 16, 32, jnp.float64)
        f = jax.vmap(lambda x: model.apply(params, x, hp)[0])(X)
        corr = np.corrcoef(np.asarray(f), np.asarray(y))[0, 1]
        assert corr == pytest.approx(1.0, abs=1e-12)  # an affine map of the teacher's output
        assert float(jnp.std(y)) == pytest.approx(1.0, abs=0.15) and abs(float(jnp.mean(y))) < 0.2


def test_make_streams_and_padding():
    with jax.enable_x64(True):
        s = dict(d_s=3, d=4, target="teacher", teacher_width=8, n_test=5)
        v = {"scale": 1.0, "N": 4, "token_norm": 0}  # a batched choice: its index (TOKEN_NORMS)
        key = jax.random.PRNGKey(3)
        make = lambda n: jax.jit(lambda key, v: data.make(key, v, s, {"N": n}, None, jnp.float64))(key, v)
        a, b = make(4), make(7)
        np.testing.assert_array_equal(a["X"], b["X"][:4])
        np.testing.assert_array_equal(a["y"], b["y"][:4])  # the same teacher whatever the padding
        np.testing.assert_array_equal(a["y_test"], b["y_test"])
        assert b["mask"].tolist() == [True] * 4 + [False] * 3
        assert not np.allclose(a["X"][0], a["X_test"][0])  # train and test from different streams


# ---------------------------------------------------------------- on the engine


def wu_cells(**over):
    spec = ExperimentSpec(
        data={"name": "wu2023", "d_s": 3, "d": 4, "N": [6, 4], "n_test": 5} | over.pop("data", {}),
        model={"name": "wu2023", "d_m": 8, "alpha": 0.5, "init": "lecun"} | over.pop("model", {}),
        train={
            "loss": "squared",
            "optimizer": "gd",
            "lr": 0.5,
            "max_steps": 12,
            "loss_threshold": 0.0,
            "dtype": "float64",
            "log_every": 4,
        }
        | over.pop("train", {}),
    )
    return expand(spec)


def test_engine_trains_wu2023_like_the_reference():
    """Full-batch GD on the squared loss: a bucket (padded to N = 6) on the sequential path equals
    the plain reference in float64, and the training loss goes down."""
    cells = wu_cells()
    out = run_bucket(cells, strategy="sequential")
    for i, c in enumerate(cells):
        ref = run_reference(c)
        assert_same(cell_of(out, i), ref, metrics=REGRESSION)
        assert ref["traces"]["train_loss"][-1] < ref["traces"]["train_loss"][0]


def test_engine_trains_every_option_like_the_reference():
    (cell,) = wu_cells(
        data={"N": 5, "target": "teacher", "teacher_width": 4, "token_norm": "unit"},
        model={"init": "ntk", "alpha": 1.0, "tied": True, "ffn": True, "heads": 2},
        train={"lr_mult": {"QK": 2.0, "F": 0.5}, "save_params": True},
    )
    out = run_bucket([cell], strategy="sequential")
    ref = run_reference(cell)
    assert_same(cell_of(out, 0), ref, metrics=REGRESSION)
    assert set(ref["params"]) == {"W_Q", "W_V", "w_O", "W_F"}
    assert ref["traces"]["train_loss"][-1] < ref["traces"]["train_loss"][0]
