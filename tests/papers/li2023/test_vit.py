"""The deeper ViT: against its equations written with numpy loops, parameter shapes and init
schemes, attention and token mask (dropping a token = deleting it), gradients against finite
differences, bad input, and on the engine with pool data (vectorised == reference, SGD
mini-batches and Adam)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from pydantic import ValidationError

from attnlab.errors import AttnlabError
from attnlab.experiments.config import ExperimentSpec, expand
from attnlab.models import vit as model
from attnlab.problem import part
from helpers import assert_same, cell_of, run_bucket, run_reference

TINY = dict(L=5, d=6, D=8, depth=2, heads=2, mlp_ratio=2.0)
# pooling × positions; the query/value biases alternate so both layouts meet every check
CONFIGS = {
    "mean-learned": dict(pool="mean", pos="learned", qkv_bias=True),
    "mean-none": dict(pool="mean", pos="none", qkv_bias=False),
    "cls-learned": dict(pool="cls", pos="learned", qkv_bias=False),
    "cls-none": dict(pool="cls", pos="none", qkv_bias=True),
    "mean-ntk-alpha1": dict(pool="mean", pos="learned", qkv_bias=True, init="ntk", alpha=1.0),  # Wu et al.'s scaling
}
OPTIONS = pytest.mark.parametrize("name", list(CONFIGS))


# compiled once per (Hparams, input structure): op-by-op dispatch of the scanned blocks is slower
apply = jax.jit(model.apply, static_argnums=2)


def hparams(**kw):
    return model.Hparams(**(TINY | kw))


def shapes_of(hp):
    """The parameters' shapes, traced without compiling."""
    return jax.eval_shape(lambda k: model.init(k, hp), jax.random.PRNGKey(0))


def draw(hp, seed=0):
    """float64 parameters with every entry random, so every path is exercised: weights
    N(0, 1/fan_in), LN γ ~ 1 + 0.3 N(0, 1), everything else 0.3 N(0, 1) (drawn with numpy: no compile)."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, s in sorted(shapes_of(hp).items()):
        if k.startswith("W_"):
            out[k] = rng.standard_normal(s.shape) / s.shape[-2] ** 0.5
        else:
            out[k] = float(k.endswith("_g")) + 0.3 * rng.standard_normal(s.shape)
    with jax.enable_x64(True):
        return {k: jnp.asarray(v, jnp.float64) for k, v in out.items()}


# ---------------------------------------------------------------- the equations, with loops


def ln(u, g, b):
    mu = sum(u) / len(u)
    var = sum((x - mu) ** 2 for x in u) / len(u)
    return np.array([g[i] * (u[i] - mu) / math.sqrt(var + 1e-6) + b[i] for i in range(len(u))])


def reference_f(params, X, hp, keep=None):
    """f(X) token by token and head by head; returns (f, φ (depth, H, L', L'))."""
    P = {k: np.asarray(v, np.float64) for k, v in params.items()}
    if hp.init == "ntk":  # N(0, 1) weights, 1/√fan_in in the forward pass
        fan_in = {
            "W_E": hp.d,
            "W_Q": hp.D,
            "W_K": hp.D,
            "W_V": hp.D,
            "W_O": hp.D,
            "W_1": hp.D,
            "W_2": int(hp.mlp_ratio * hp.D),
            "w_head": hp.D,
        }
        P |= {k: P[k] / math.sqrt(f) for k, f in fan_in.items()}
    X = np.asarray(X, np.float64)
    keep = np.ones(len(X), bool) if keep is None else np.asarray(keep)
    z = [X[l] @ P["W_E"] + P["b_E"] for l in range(len(X))]
    kept = [bool(k) for k in keep]
    if hp.pool == "cls":
        z, kept = [P["cls"]] + z, [True] + kept
    if hp.pos == "learned":
        z = [z[l] + P["pos"][l] for l in range(len(z))]
    n, dh = len(z), hp.D // hp.heads
    S = [l for l in range(n) if kept[l]]
    zero_b = np.zeros((hp.depth, hp.D))
    phis = np.zeros((hp.depth, hp.heads, n, n))
    for k in range(hp.depth):
        u = [ln(z[l], P["ln1_g"][k], P["ln1_b"][k]) for l in range(n)]
        proj = {c: [u[l] @ P["W_" + c][k] + P.get("b_" + c, zero_b)[k] for l in range(n)] for c in "QKV"}  # no b_K
        heads_out = [np.zeros(hp.D) for _ in range(n)]
        for h in range(hp.heads):
            cols = slice(h * dh, (h + 1) * dh)
            for t in S:
                logits = np.array([proj["Q"][t][cols] @ proj["K"][s][cols] * dh ** (-hp.alpha) for s in S])
                e = np.exp(logits - logits.max())
                for i, s in enumerate(S):
                    phis[k, h, t, s] = e[i] / e.sum()
                    heads_out[t][cols] += phis[k, h, t, s] * proj["V"][s][cols]
        z = [z[l] + heads_out[l] @ P["W_O"][k] + P["b_O"][k] for l in range(n)]
        for l in range(n):
            a = ln(z[l], P["ln2_g"][k], P["ln2_b"][k]) @ P["W_1"][k] + P["b_1"][k]
            gelu = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in a])
            z[l] = z[l] + gelu @ P["W_2"][k] + P["b_2"][k]
    pooled = z[0] if hp.pool == "cls" else sum(z[l] for l in S) / len(S)
    return float(ln(pooled, P["lnf_g"], P["lnf_b"]) @ P["w_head"] + P["b_head"]), phis


@OPTIONS
def test_apply_matches_the_equation(name):
    with jax.enable_x64(True):
        hp = hparams(**CONFIGS[name])
        params = draw(hp)
        X = jax.random.normal(jax.random.PRNGKey(1), (hp.L, hp.d), jnp.float64)
        keep = np.array([True, False, True, True, False])
        for x, k in ((X, None), ({"tokens": X, "mask": jnp.asarray(keep)}, keep)):
            f, aux = apply(params, x, hp)
            f_ref, phi_ref = reference_f(params, X, hp, k)
            assert float(f) == pytest.approx(f_ref, rel=1e-10, abs=1e-12)
            np.testing.assert_allclose(aux["attn"], phi_ref, rtol=1e-10, atol=1e-14)


# ---------------------------------------------------------------- parameters and init


def test_parameter_names_shapes_groups_and_sizes():
    p = shapes_of(hparams(pool="cls"))
    D, n, m, Lp = 8, 2, 16, 6
    assert {k: v.shape for k, v in p.items()} == {
        "W_E": (6, D),
        "b_E": (D,),
        "pos": (Lp, D),
        "cls": (D,),
        "ln1_g": (n, D),
        "ln1_b": (n, D),
        "ln2_g": (n, D),
        "ln2_b": (n, D),
        "W_Q": (n, D, D),
        "W_K": (n, D, D),
        "W_V": (n, D, D),
        "W_O": (n, D, D),
        "b_Q": (n, D),
        "b_V": (n, D),
        "b_O": (n, D),
        "W_1": (n, D, m),
        "b_1": (n, m),
        "W_2": (n, m, D),
        "b_2": (n, D),
        "lnf_g": (D,),
        "lnf_b": (D,),
        "w_head": (D,),
        "b_head": (),
    }
    for kw in (dict(pool="cls"), dict(pool="mean", pos="none", qkv_bias=False), dict(depth=3, mlp_ratio=1.5)):
        hp = hparams(**kw)
        p = shapes_of(hp)
        grouped = [name for names in model.groups(hp).values() for name in names]
        assert sorted(grouped) == sorted(p) and len(set(grouped)) == len(grouped)  # each parameter in one group
        assert set(model.trainable(hp)) == set(p)
        assert model.sizes(hp)[0] == sum(math.prod(v.shape) for v in p.values())
        f, aux = jax.eval_shape(
            lambda p, x, hp=hp: model.apply(p, x, hp), p, jax.ShapeDtypeStruct((hp.L, hp.d), jnp.float32)
        )
        assert f.shape == () and aux["attn"].shape == (hp.depth, hp.heads, hp.n_tokens, hp.n_tokens)
        assert aux["mask"].shape == (hp.n_tokens,) and aux["features"].shape == (hp.D,)
    assert set(model.groups(hparams())) == {"embed", "attn", "mlp", "norm", "head"}
    assert "pos" not in shapes_of(hparams(pos="none"))
    assert {"cls", "b_Q"}.isdisjoint(shapes_of(hparams(qkv_bias=False)))


def test_init_schemes():
    hp = dict(L=4, d=32, D=64, depth=2, heads=4, mlp_ratio=2.0)
    tn = model.init(jax.random.PRNGKey(0), model.Hparams(**hp, init="trunc_normal"))
    lc = model.init(jax.random.PRNGKey(0), model.Hparams(**hp, init="lecun"))
    tn_std = 0.02 * 0.8796  # std of N(0, 1) truncated at ±2
    for k in ("W_E", "W_Q", "W_K", "W_V", "W_O", "W_1", "W_2", "pos"):
        assert float(jnp.std(tn[k])) == pytest.approx(tn_std, rel=0.1), k
        assert float(jnp.max(jnp.abs(tn[k]))) <= 0.04 + 1e-7, k
    for k, fan_in in (("W_E", 32), ("W_Q", 64), ("W_O", 64), ("W_1", 64), ("W_2", 128)):
        assert float(jnp.std(lc[k])) == pytest.approx(fan_in**-0.5, rel=0.1), k
    np.testing.assert_array_equal(lc["pos"], tn["pos"])  # the positions' rule does not depend on the scheme
    for p in (tn, lc):
        for k in ("ln1_g", "ln2_g", "lnf_g"):
            np.testing.assert_array_equal(p[k], 1.0)
        for k in ("ln1_b", "ln2_b", "lnf_b", "b_E", "b_Q", "b_V", "b_O", "b_1", "b_2", "b_head"):
            np.testing.assert_array_equal(p[k], 0.0)
    # ntk: N(0, 1) weights whose forward multipliers 1/√fan_in make them lecun's draws, so the
    # function at init is lecun's (the gradients differ by the multipliers)
    nt = model.init(jax.random.PRNGKey(0), model.Hparams(**hp, init="ntk"))
    mult = model.multipliers(model.Hparams(**hp, init="ntk"))
    assert set(mult) == {"W_E", "W_Q", "W_K", "W_V", "W_O", "W_1", "W_2", "w_head"}
    for k, c in mult.items():
        np.testing.assert_allclose(nt[k] * c, lc[k], rtol=1e-6, atol=1e-7)
    X = jax.random.normal(jax.random.PRNGKey(3), (4, 32))
    f_nt = model.apply(nt, X, model.Hparams(**hp, init="ntk"))[0]
    assert float(f_nt) == pytest.approx(float(model.apply(lc, X, model.Hparams(**hp, init="lecun"))[0]), rel=1e-5)
    # he: lecun's draws × √2
    he = model.init(jax.random.PRNGKey(0), model.Hparams(**hp, init="he"))
    for k in ("W_E", "W_Q", "W_O", "W_1", "W_2", "w_head"):
        np.testing.assert_allclose(he[k], 2**0.5 * lc[k], rtol=1e-6)
    np.testing.assert_array_equal(he["pos"], lc["pos"])
    # an option's extra parameter does not shift the other draws
    cls = model.init(jax.random.PRNGKey(0), model.Hparams(**hp, init="lecun", pool="cls", qkv_bias=False))
    assert float(jnp.max(jnp.abs(cls["cls"]))) < 1e-5
    for k in ("W_E", "W_Q", "W_1", "w_head"):
        np.testing.assert_array_equal(cls[k], lc[k])


# ---------------------------------------------------------------- attention and token mask


@OPTIONS
def test_attention_rows_and_masked_keys(name):
    with jax.enable_x64(True):
        hp = hparams(**CONFIGS[name])
        params = draw(hp)
        X = jax.random.normal(jax.random.PRNGKey(2), (hp.L, hp.d), jnp.float64)
        keep = jnp.array([False, True, True, False, True])
        _, aux = apply(params, {"tokens": X, "mask": keep}, hp)
        phi, k = np.asarray(aux["attn"]), np.asarray(aux["mask"])
        expected = np.concatenate([[True], keep]) if hp.pool == "cls" else np.asarray(keep)
        np.testing.assert_array_equal(k, expected)  # the CLS token is never dropped
        np.testing.assert_allclose(phi[:, :, k].sum(-1), 1.0, rtol=1e-12)
        # the statistics over every block, head and kept query: TV of a row from uniform, its entropy
        rows = phi[:, :, k][..., k].reshape(-1, k.sum())
        np.testing.assert_allclose(aux["attn_tv"], 0.5 * np.abs(rows - 1 / k.sum()).sum(-1).mean(), rtol=1e-10)
        ent = -(rows * np.log(rows)).sum(-1).mean()
        np.testing.assert_allclose(aux["attn_entropy"], ent, rtol=1e-10)
        assert float(aux["logit_std"]) > 0
        assert np.all(phi[:, :, :, ~k] == 0) and np.all(phi[:, :, ~k] == 0)
        assert np.all(phi[:, :, k][..., k] > 0)


@OPTIONS
def test_dropping_a_token_equals_deleting_it(name):
    """f(X with mask S) = f(X_S) on the model with L = |S| tokens; with learned positions, the
    deleted tokens' rows of ``pos`` are deleted too (a kept token keeps its own position)."""
    with jax.enable_x64(True):
        hp = hparams(**CONFIGS[name])
        params = draw(hp)
        X = jax.random.normal(jax.random.PRNGKey(3), (hp.L, hp.d), jnp.float64)
        keep = np.array([True, False, True, True, False])
        f_mask, aux = apply(params, {"tokens": X, "mask": jnp.asarray(keep)}, hp)
        small = hparams(**CONFIGS[name], L=int(keep.sum()))
        sub = dict(params)
        if hp.pos == "learned":
            sub["pos"] = params["pos"][np.asarray(aux["mask"])]
        f_del, aux_del = apply(sub, X[keep], small)
        assert float(f_mask) == pytest.approx(float(f_del), rel=1e-12, abs=1e-14)
        k = np.asarray(aux["mask"])
        np.testing.assert_allclose(np.asarray(aux["attn"])[:, :, k][..., k], aux_del["attn"], rtol=1e-12)
        # dropped tokens are inert: any values (NaN padding) give the same output
        X_bad = X.at[1].set(jnp.nan).at[4].set(1e3)
        f_bad = apply(params, {"tokens": X_bad, "mask": jnp.asarray(keep)}, hp)[0]
        assert float(f_bad) == pytest.approx(float(f_mask), rel=1e-12)
        # without a mask, an all-true mask is the same model
        f_all = apply(params, {"tokens": X, "mask": jnp.ones(hp.L, bool)}, hp)[0]
        assert float(f_all) == pytest.approx(float(apply(params, X, hp)[0]), rel=1e-12)
        assert float(f_all) != pytest.approx(float(f_mask), rel=1e-6)  # the mask does change f


# ---------------------------------------------------------------- gradients


def test_gradients_match_finite_differences():
    """∇ of a logistic loss over three samples (two with dropped tokens), w.r.t. the parameters
    and the tokens, against central differences in float64; dropped tokens get zero gradient."""
    with jax.enable_x64(True):
        hp = hparams(**CONFIGS["mean-learned"])
        params = draw(hp, seed=4)
        X = jax.random.normal(jax.random.PRNGKey(5), (3, hp.L, hp.d), jnp.float64)
        mask = np.array([[True] * 5, [True, False, True, True, True], [False, True, False, True, True]])
        y = jnp.array([1.0, -1.0, 1.0])

        @jax.jit
        def loss(p, X):
            f = jax.vmap(lambda X, m: model.apply(p, {"tokens": X, "mask": m}, hp)[0])(X, jnp.asarray(mask))
            return jnp.mean(jax.nn.softplus(-y * f))

        check_grads(loss, (params, X), order=1, modes=("rev",), eps=1e-6, atol=1e-8, rtol=1e-6)
        g, gX = jax.grad(loss, argnums=(0, 1))(params, X)
        assert all(float(jnp.max(jnp.abs(g[k]))) > 0 for k in params), "every parameter gets a gradient"
        assert np.all(np.asarray(gX)[~mask] == 0) and np.all(np.abs(np.asarray(gX)[mask]) > 0)


# ---------------------------------------------------------------- bad input


def test_bad_input_names_the_field():
    for kw, field in (
        (dict(heads=3), "model.heads"),
        (dict(pool="max"), "model.pool"),
        (dict(depth=0), "model.depth"),
        (dict(init="xavier"), "model.init"),
        (dict(pos="sinusoidal"), "model.pos"),
        (dict(mlp_ratio=0.01), "model.mlp_ratio"),
    ):
        with pytest.raises(ValidationError, match=field.removeprefix("model.")):  # one config validates both
            hparams(**kw)
    for kw, field in (
        (dict(D=8, heads=3), "model.heads"),
        (dict(pool="max"), "model.pool"),
        (dict(depth=0), "model.depth"),
        (dict(init="xavier"), "model.init"),
    ):
        with pytest.raises(AttnlabError, match=field):
            expand(ExperimentSpec(data={"name": "pool"}, model={"name": "vit"} | kw, train={}))


# ---------------------------------------------------------------- on the engine


def vit_cells(model_over, train_over, N):
    spec = ExperimentSpec(
        data={"name": "pool", "pool": 40, "M": 4, "d": 6, "signal": 2.0, "N": N, "n_test": 10},
        model={"name": "vit", "D": 8, "depth": 2, "heads": 2, "mlp_ratio": 2.0} | model_over,
        train={"dtype": "float64", "max_steps": 12, "log_every": 4, "save_params": True} | train_over,
    )
    return expand(spec)


def test_registered_with_the_problem_registry():
    assert part("model", "vit") is model.PART
    assert set(model.PART.static) | set(model.PART.batched) == set(model.Hparams.fields())
    assert model.PART.batched == ("init", "alpha")  # the init scheme (a choice) and τ₀'s exponent: per-cell inputs


def test_engine_minibatch_sgd_equals_the_reference():
    """Two cells in one vmapped bucket (N = 6 padded to 8, N = 8), mini-batches of 4: the padded
    cell (a short second batch each epoch) equals the one-cell reference in float64 with the same
    seeds, and both cells learn."""
    cells = vit_cells({"pool": "mean"}, {"optimizer": "gd", "lr": 0.5, "batch_size": 4, "stop_every": 3}, [6, 8])
    assert [c["data.N"] for c in cells] == [6, 8]
    out = run_bucket(cells, strategy="vmap")
    assert_same(cell_of(out, 0), run_reference(cells[0]))
    for trace in out["traces"]["train_loss"]:
        assert trace[-1] < trace[0]


def test_engine_adam_equals_the_reference():
    """Adam, CLS pooling, lecun init and a per-group learning rate (attn ×2): the sequential path
    equals the reference in float64, and the saved parameters are the model's."""
    (cell,) = vit_cells(
        {"pool": "cls", "init": "lecun"}, {"optimizer": "adam", "lr": 0.01, "lr_mult": {"attn": 2.0}}, 6
    )
    out = run_bucket([cell], strategy="sequential")
    ref = run_reference(cell)
    assert_same(cell_of(out, 0), ref)
    hp = model.PART.hparams(
        {k: cell[f"model.{k}"] for k in model.Hparams.fields() if f"model.{k}" in cell}, {"tokens": 4, "d": 6}
    )
    assert set(ref["params"]) == set(model.trainable(hp))
    assert ref["traces"]["train_loss"][-1] < ref["traces"]["train_loss"][0]


def test_the_scaling_and_init_fields_leave_earlier_cell_ids_alone():
    """alpha at timm's ½ is not in a cell (so li2023-fig5's cells keep their ids); other values are."""
    spec = lambda **kw: ExperimentSpec(data={"name": "images", "dataset": "cifar10"}, model={"name": "vit"} | kw)
    cell = lambda **kw: expand(spec(**kw))[0]
    assert "model.alpha" not in cell() and cell(alpha=1.0)["model.alpha"] == 1.0
    assert cell(init="ntk")["model.init"] == "ntk"
    with pytest.raises(Exception, match="alpha"):
        spec(alpha=0.0) and cell(alpha=0.0)
