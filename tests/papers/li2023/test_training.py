"""The li2023 parts on the engine: its data model (per-sample pytrees with token metadata) into
its ViT and the attention-free baseline, mini-batch SGD with b < N, hinge loss stopped at zero
training loss, per-group rates; every vectorised path equals the plain reference in float64."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.experiments.config import ExperimentSpec, expand
from attnlab.train import CAP
from helpers import assert_same, cell_of, run_bucket, run_reference


def li_cells(model: str, **train):
    model_fields = {"name": model, "m": 8} | ({"init": "gaussian"} if model != "li2023-linear" else {})
    if model == "li2023-linear":
        model_fields = {"name": model}
    spec = ExperimentSpec(
        data={"name": "li2023", "M": 5, "d": 6, "L": 8, "alpha_star": 0.5, "tau": 0.3, "N": [10, 7], "n_test": 20},
        model=model_fields,
        train={
            "loss": "hinge",
            "optimizer": "gd",
            "lr": 0.2,
            "batch_size": 4,
            "stop_every": 2,
            "loss_threshold": 1e-9,
            "max_steps": 25,
            "dtype": "float64",
        }
        | train,
    )
    return expand(spec)


@pytest.mark.parametrize("model", ["li2023-vit", "li2023-cnn", "li2023-linear"])
def test_li2023_minibatch_equals_reference(model):
    cells = li_cells(model, **({"lr_mult": {"QK": 3.0}} if model == "li2023-vit" else {}))
    out = run_bucket(cells, strategy="sequential")  # padded to N = 10; the N = 7 cells have a short last batch
    for i, c in enumerate(cells):
        assert_same(cell_of(out, i), run_reference(c))


def test_li2023_vit_vmap_equals_reference():
    cells = li_cells("li2023-vit", lr_mult={"QK": 3.0})  # the cells of the sequential test: references cached
    out = run_bucket(cells, strategy="vmap", segment=3, shrink=2, min_batch=1)
    for i, c in enumerate(cells):
        assert_same(cell_of(out, i), run_reference(c))


def test_li2023_probes_by_hand_and_against_reference():
    """attn_relevant etc. recomputed with loops from the model's attention; the vectorised
    traces equal the reference's."""
    import jax
    import numpy as np

    from attnlab.problem import Composition, split
    from helpers import bucket_of

    cells = li_cells("li2023-vit", log_every=5, probes="li2023", max_steps=10)
    out = run_bucket(cells, strategy="sequential")
    for i, c in enumerate(cells):
        assert_same(cell_of(out, i), run_reference(c))
    ref = run_reference(cells[0])
    assert set(ref["traces"]) >= {"attn_relevant", "attn_confusion", "attn_irrelevant", "attn_entropy", "test_loss"}
    # by hand at step 0 (θ_0): the three masses of relevant queries sum to 1
    comp, static, _ = bucket_of(cells[:1])
    with jax.enable_x64(True):
        from attnlab.engine import grid

        v = {k: x[0] for k, x in grid.batch_inputs(comp, cells[:1]).items()}
        prob = comp.problem(static, {"data.N": cells[0]["data.N"]})
        data = prob.make_data(v["key"], v, None)
        from attnlab.train import stream

        params = prob.init(stream(v["key"], "init"), v)
        n = cells[0]["data.N"]
        masses = {r: [] for r in range(3)}
        for i in range(n):
            x = jax.tree.map(lambda a, i=i: a[i], data["X"])
            attn = np.asarray(prob.apply(params, x)[1]["attn"])
            role = np.asarray(x["role"])
            for r in range(3):
                masses[r].append(np.mean([attn[q, role == r].sum() for q in np.flatnonzero(role == 0)]))
    for r, name in enumerate(("relevant", "confusion", "irrelevant")):
        assert ref["traces"][f"attn_{name}"][0] == pytest.approx(np.mean(masses[r]), rel=1e-9)
    assert sum(ref["traces"][f"attn_{k}"][0] for k in ("relevant", "confusion", "irrelevant")) == pytest.approx(1)
    assert split(cells[0], "train")["probes"] == "li2023" and Composition.of(cells[0]).name == "li2023+li2023-vit"


def test_cross_paper_compositions_train_and_equal_reference():
    """li2023 data (pytree samples) into the jiang2024 model, jiang2024 data (plain token arrays)
    into the li2023 ViT: a composition of existing parts, on the same engine."""
    li_data = ExperimentSpec(
        data={"name": "li2023", "M": 5, "d": 6, "L": 8, "N": 6, "n_test": 20},
        model={"name": "jiang2024", "d_h": 4, "d_v": 3, "init_scale": 1.0},
        train={"max_steps": 8, "dtype": "float64", "loss_threshold": 0.0},
    )
    jiang_data = ExperimentSpec(
        data={"name": "jiang2024", "M": 4, "d": 6, "mu": 3.0, "N": 6, "n_test": 10},
        model={"name": "li2023-vit", "m": 8},
        train={"max_steps": 8, "dtype": "float64", "loss_threshold": 0.0},
    )
    for spec in (li_data, jiang_data):
        (cell,) = expand(spec)
        out = run_bucket([cell], strategy="sequential")
        assert_same(cell_of(out, 0), run_reference(cell))
        assert np.isfinite(out["metrics"]["train_loss"][0]) and out["metrics"]["status"][0] == CAP


def test_jiang2024_model_honours_a_token_mask():
    from attnlab.models import jiang2024 as jm

    hp = jm.Hparams(M=5, d=6, d_h=4, d_v=3, init_scale=1.0)
    params = jm.init(jax.random.PRNGKey(0), hp)
    X = jax.random.normal(jax.random.PRNGKey(1), (5, 6))
    all_kept = jnp.ones(5, bool)
    f_plain, _ = jm.apply(params, X, hp)
    f_all, _ = jm.apply(params, {"tokens": X, "mask": all_kept}, hp)
    assert float(f_all) == pytest.approx(float(f_plain), rel=1e-6)
    keep = jnp.array([True, True, False, True, False])
    f_keep, aux = jm.apply(params, {"tokens": X, "mask": keep}, hp)
    X2 = X.at[2].set(100.0).at[4].set(-50.0)  # dropped tokens: any values, same output
    assert float(jm.apply(params, {"tokens": X2, "mask": keep}, hp)[0]) == pytest.approx(float(f_keep), rel=1e-6)
    f_sub, _ = jm.apply(params, X[keep], hp)  # the same as the model on the kept tokens alone
    assert float(f_keep) == pytest.approx(float(f_sub), rel=1e-5)
    assert np.allclose(aux["a_bar"][~np.asarray(keep)], 0)


# ---------------------------------------------------------------- the stop quantity (train.stop_on)


def _hand_margins(cell, params):
    """y·f over the cell's N training samples, recomputed eagerly with the ViT's own forward pass
    (attnlab.models.li2023.apply) on the training set its data model draws (no padding)."""
    from attnlab.engine import grid
    from attnlab.models import li2023 as lm
    from helpers import bucket_of

    comp, static, _ = bucket_of([cell])
    fields = {k.split(".", 1)[1]: x for k, x in cell.items() if k.startswith("model.") and k != "model.name"}
    hp = lm.Hparams(L=cell["data.L"], d=cell["data.d"], **fields)
    with jax.enable_x64(True):
        v = {k: jnp.asarray(x[0]) for k, x in grid.batch_inputs(comp, [cell]).items()}
        data = comp.problem(static, {"data.N": cell["data.N"]}).make_data(v["key"], v, None)
        params = {k: jnp.asarray(x) for k, x in params.items()}
        f, _ = jax.vmap(lambda x: lm.apply(params, x, hp))(data["X"])
        return np.asarray(data["y"] * f)


def test_logistic_run_stopped_at_zero_training_hinge_equals_reference():
    """logistic loss, stop_on = hinge, b = 4 < N, stop_every = 2: the vectorised path equals the
    reference; a converged cell stopped at a judged step with every training margin ≥ 1 (recomputed
    by hand from its saved parameters) while its logistic training loss is far above the threshold,
    so the rule judged the hinge loss, not the training loss."""
    from attnlab.train import CONVERGED

    cells = li_cells("li2023-vit", loss="logistic", stop_on="hinge", save_params=True, lr=1.0, max_steps=40)
    out = run_bucket(cells, strategy="sequential")
    converged = 0
    for i, c in enumerate(cells):
        ref = run_reference(c)
        assert_same(cell_of(out, i), ref)
        m = ref["metrics"]
        if m["status"] != CONVERGED:
            continue
        converged += 1
        assert m["stop_step"] % 2 == 0 or m["stop_step"] == 40
        margins = _hand_margins(c, ref["params"])
        assert len(margins) == c["data.N"]
        assert np.mean(np.maximum(0.0, 1.0 - margins)) < 1e-9
        assert margins.min() >= 1 - c["data.N"] * 1e-9  # mean hinge < 1e-9: every margin within N·1e-9 of 1
        assert m["train_loss"] > 1e-3 and m["train_error"] == 0  # logistic loss: far from its own threshold
    assert converged >= 1, out["metrics"]


def test_stop_on_error_stops_at_zero_training_error():
    from attnlab.train import CONVERGED

    cells = li_cells("li2023-vit", loss="logistic", stop_on="error", lr=1.0, max_steps=40)
    out = run_bucket(cells, strategy="sequential")
    m = out["metrics"]
    assert np.all(m["status"] == CONVERGED), m
    assert np.all(m["train_error"] == 0) and np.all(m["stop_step"] % 2 == 0)
    assert np.all(m["train_loss"] > 0.1)  # stopped as soon as every sign is right, long before the loss is small
    assert_same(cell_of(out, 0), run_reference(cells[0]))
