"""wu2023-vit-mnist: a ViT (models.vit) on the encoder-mnist data, step and claims. Its cells (one
head, so τ₀ = D^(−α); the width-normalised step at γ = 0.01), the head block of its NTK (what
``lambda_min_w_O`` measures for the ViT), and its claims on the encoder's theory-shaped and broken
columns with the width named D. The end-to-end smoke run is in tests/e2e/test_smoke.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab import ntk
from attnlab import problem as P
from attnlab.experiments.wu2023 import step
from attnlab.experiments.wu2023 import vit_mnist as V
from attnlab.experiments.wu2023.analysis import alpha_of
from attnlab.experiments.wu2023.probes import OUTPUT
from attnlab.models import vit

from .test_encoder_mnist import ALL, LMIN, REPORTED, columns


def test_cells_feed_mnist_patches_to_a_one_head_vit_at_the_normalised_step():
    exp = V.EXPERIMENT
    spec = exp.spec("cpu")
    cells = exp.cells(spec)
    widths = spec.model["D"]
    assert len(cells) == len(widths) * 2 * 3 * spec.reps
    assert {(c["model.D"], c["train.lr"]) for c in cells} == {(w, step(0.01, w, "width")) for w in widths}
    # α = ½ (timm's) is left out of a ViT cell; alpha_of reads it back as ½
    assert sorted(set(alpha_of({"model.alpha": [c.get("model.alpha") for c in cells]}))) == [0.5, 1.0]
    c = cells[0]
    assert (c["model.name"], c["model.heads"], c["model.depth"], c["data.patch"], c["data.N"]) == ("vit", 1, 1, 7, 100)
    assert (c["train.loss"], c["train.optimizer"], c["train.dtype"], c["train.probes"]) == (
        "squared",
        "gd",
        "float32",
        "wu2023",
    )
    comp = P.Composition.of(c)
    hp = comp.hparams({k: v for k, v in c.items() if comp.classify(k) == "static"})
    assert (hp.L, hp.d, hp.d_h) == (16, 49, c["model.D"])  # one head: τ₀ = d_h^(−α) = D^(−α)


@pytest.mark.parametrize("init", ["lecun", "ntk"])
def test_the_heads_ntk_block_is_the_feature_gram(init):
    """K^{w_head} = H Hᵀ (times 1/D under ntk, the head's forward multiplier): the ViT's output
    block, whose λ_min the wu2023 probes record as lambda_min_w_O, of rank ≤ D."""
    with jax.enable_x64(True):
        hp = vit.Hparams(L=4, d=6, D=8, depth=1, heads=1, mlp_ratio=2.0, init=init, alpha=1.0)
        params = vit.init(jax.random.PRNGKey(0), hp, jnp.float64)
        X = jax.random.normal(jax.random.PRNGKey(1), (5, 4, 6), jnp.float64)
        apply = lambda p, x: vit.apply(p, x, hp)
        K = ntk.empirical_ntk(apply, params, X, blocks=True, method="jacobian")[OUTPUT["vit"]]
        H = jax.vmap(lambda x: apply(params, x)[1]["features"])(X)
        np.testing.assert_allclose(K, H @ H.T * (1 / hp.D if init == "ntk" else 1.0), rtol=1e-10)


def vit_columns(**kw):
    """The encoder's synthetic columns with the width named D and α = ½ left out, as a ViT's."""
    cols = columns(**kw)
    cols["model.D"] = cols.pop("model.d_m")
    cols["model.alpha"] = np.array([None if a == 0.5 else a for a in cols["model.alpha"]], dtype=object)
    cols["model.alpha"] = alpha_of(cols)
    return cols


def test_claims_on_theory_shaped_and_broken_runs_with_the_width_named_D(tmp_path):
    exp = V.EXPERIMENT
    spec = exp.spec("cpu")
    a = exp.analyse(vit_columns(), spec)
    assert {c.id: c.outcome for c in a.claims} == dict.fromkeys(ALL, "pass") | dict.fromkeys(
        ("stability", *REPORTED, *LMIN), "descriptive"
    )
    assert a.summary["logit std slopes at θ_T"]["τ₀ = d_m^−1"]["slope"] == pytest.approx(-0.5, abs=0.05)
    got = {c.id: c.outcome for c in exp.analyse(vit_columns(same_attention=True), spec).claims}
    assert got["uniform"] == "fail"
    got = {c.id: c.outcome for c in exp.analyse(vit_columns(drift_exp=0.5), spec).claims}
    assert got["drift-weight"] == "fail"
    paths = exp.figures(vit_columns(), spec, a, tmp_path)
    assert {p.name for p in paths} >= {"mnist_loss.png", "mnist_width.png"}
