"""A stored fingerprint of one cell, and the independence of its random streams.

This file exists to catch any change that alters a cell's numbers or its id: a stored result is
found again by its id and trusted by its numbers, so either changing silently would mix old and
new results in one results directory. If a test here fails on purpose (a deliberate change of a
data model, a model or the recipe), bump the ``version`` of the part that changed (DataModel /
Model ``version``, or ``problem.RECIPE_VERSION``) and paste the new values below.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab import train as T
from attnlab.data import jiang2024 as jdata
from attnlab.engine import executors, grid
from attnlab.engine.plan import Plan
from attnlab.experiments.jiang2024 import tiny_cell
from attnlab.problem import Composition
from attnlab.train import types

# the fixed cell, written out in full (so that its id depends on nothing but this literal)
CELL = {
    "data.name": "jiang2024",
    "data.M": 4,
    "data.d": 12,
    "data.mu": 6.0,
    "data.sigma_p": 0.2,
    "data.sigma_tilde_p": 4.0,
    "data.projected": False,
    "data.N": 6,
    "data.n_test": 10,
    "model.name": "jiang2024",
    "model.d_h": 6,
    "model.d_v": 5,
    "model.init_scale": 16.0,
    "model.tau": 1.0,
    "model.train_w_O": False,
    "train.loss": "logistic",
    "train.optimizer": "gd",
    "train.momentum": 0.9,
    "train.lr": 0.5,
    "train.batch_size": 0,
    "train.max_steps": 40,
    "train.loss_threshold": 0.05,
    "train.stop_on": "loss",
    "train.stop_every": 1,
    "train.log_every": 0,
    "train.log_dense_until": 0,
    "train.array_log_every": 0,
    "train.probes": "",
    "train.dtype": "float64",
    "train.save_params": False,
    "train.fast": True,
    "seed": 0,
    "block": 0,
    "rep": 0,
}
CELL_ID = "a9610b5544646b37"
TEST_LOSS = 0.43718841146058635
TRAIN_LOSS = 0.04941338491098075
STOP_STEP = 19


def test_cell_id_is_stable():
    assert grid.cell_id(CELL) == CELL_ID
    assert grid.cell_key(CELL_ID).tolist() == [int("a9610b55", 16), int("44646b37", 16)]


def test_the_cell_is_what_the_specs_expand_to():
    """A new field with a default, or a changed default, changes every cell's id: it must come
    with a version bump (this catches it even when the literal above still hashes the same)."""
    assert tiny_cell(dtype="float64", mu=6.0, lr=0.5, loss_threshold=0.05) == CELL


def test_cell_numbers_are_stable():
    (chunk,) = Plan.of([CELL], memory_budget=2e9).chunks
    row = executors.train_chunk(chunk).to_pylist()[0]
    assert row["id"] == CELL_ID
    assert row["status"] == "converged" and row["stop_step"] == STOP_STEP
    # float64; a relative 1e-9 allows for XLA's choice of summation order, nothing more
    assert row["test_loss"] == pytest.approx(TEST_LOSS, rel=1e-9)
    assert row["train_loss"] == pytest.approx(TRAIN_LOSS, rel=1e-9)


# One cell per other paper's model (and the ViT), written out in full the same way: (cell, id,
# test loss, train loss, stop step) in float64. Stored when each model got its one typed config.
PAPER_CELLS = {
    "li2023": (
        {
            "data.name": "li2023",
            "data.M": 4,
            "data.d": 6,
            "data.L": 8,
            "data.alpha_star": 0.5,
            "data.alpha_hash": 0.125,
            "data.kappa": 1.4142135623730951,
            "data.tau": 0.5,
            "data.noise": "ball",
            "data.noisy_frac": 0.0,
            "data.noisy_tau": 1.0,
            "data.spurious": 0.0,
            "data.counts": "fixed",
            "data.sparsify": "none",
            "data.sparsify_k": 0,
            "data.sparsify_test": False,
            "data.N": 6,
            "data.n_test": 20,
            "model.name": "li2023-vit",
            "model.m": 8,
            "model.m_a": 0,
            "model.init": "near_identity",
            "model.sigma": 0.2,
            "model.a_scale": "sqrt",
            "model.m_b": 0,
            "model.delta": 0.2,
            "train.loss": "logistic",
            "train.optimizer": "gd",
            "train.momentum": 0.9,
            "train.lr": 0.05,
            "train.batch_size": 0,
            "train.max_steps": 8,
            "train.loss_threshold": 0.0,
            "train.stop_on": "loss",
            "train.stop_every": 1,
            "train.log_every": 0,
            "train.log_dense_until": 0,
            "train.array_log_every": 0,
            "train.probes": "",
            "train.dtype": "float64",
            "train.save_params": False,
            "train.fast": True,
            "seed": 0,
            "block": 0,
            "rep": 0,
        },
        "01eed02f9b614b64",
        0.7016072684937167,
        0.6957583701782574,
        8,
    ),
    "vit": (
        {
            "data.name": "pool",
            "data.pool": 40,
            "data.M": 4,
            "data.d": 6,
            "data.signal": 1.0,
            "data.sigma": 1.0,
            "data.pool_seed": 0,
            "data.N": 8,
            "data.n_test": 8,
            "model.name": "vit",
            "model.D": 8,
            "model.depth": 1,
            "model.heads": 2,
            "model.mlp_ratio": 4.0,
            "model.pool": "mean",
            "model.pos": "learned",
            "model.init": "lecun",
            "model.qkv_bias": True,
            "train.loss": "logistic",
            "train.optimizer": "adam",
            "train.momentum": 0.9,
            "train.lr": 0.01,
            "train.batch_size": 0,
            "train.max_steps": 10,
            "train.loss_threshold": 0.0,
            "train.stop_on": "loss",
            "train.stop_every": 1,
            "train.log_every": 0,
            "train.log_dense_until": 0,
            "train.array_log_every": 0,
            "train.probes": "",
            "train.dtype": "float64",
            "train.save_params": False,
            "train.fast": True,
            "seed": 0,
            "block": 0,
            "rep": 0,
        },
        "78e48a896548d82f",
        1.0657635845071558,
        0.17626743197304315,
        10,
    ),
    "wu2023": (
        {
            "data.name": "wu2023",
            "data.d_s": 3,
            "data.d": 5,
            "data.token_norm": "d",
            "data.scale": 1.0,
            "data.target": "gaussian",
            "data.teacher_width": 32,
            "data.N": 6,
            "data.n_test": 10,
            "model.name": "wu2023",
            "model.d_m": 8,
            "model.alpha": 1.0,
            "model.init": "he",
            "model.tied": False,
            "model.ffn": False,
            "model.heads": 1,
            "train.loss": "squared",
            "train.optimizer": "gd",
            "train.momentum": 0.9,
            "train.lr": 0.5,
            "train.batch_size": 0,
            "train.max_steps": 30,
            "train.loss_threshold": 0.0,
            "train.stop_on": "loss",
            "train.stop_every": 1,
            "train.log_every": 0,
            "train.log_dense_until": 0,
            "train.array_log_every": 0,
            "train.probes": "",
            "train.dtype": "float64",
            "train.save_params": False,
            "train.fast": True,
            "seed": 0,
            "block": 0,
            "rep": 0,
        },
        "927ab785c3a8f2b5",
        1.1077910404541453,
        0.0018390314415178577,
        30,
    ),
}


@pytest.mark.parametrize("name", sorted(PAPER_CELLS))
def test_each_papers_cell_id_and_numbers_are_stable(name):
    cell, cid, test_loss, train_loss, stop_step = PAPER_CELLS[name]
    assert grid.cell_id(cell) == cid
    (chunk,) = Plan.of([cell], memory_budget=2e9).chunks
    row = executors.train_chunk(chunk).to_pylist()[0]
    assert row["id"] == cid and row["stop_step"] == stop_step
    assert row["test_loss"] == pytest.approx(test_loss, rel=1e-9)
    assert row["train_loss"] == pytest.approx(train_loss, rel=1e-9)


def _sets():
    """The cell's training and test set, drawn by its data model (eagerly, no compile cache)."""
    comp = Composition.of(CELL)
    static = {k: v for k, v in CELL.items() if comp.classify(k) == "static"}
    problem = comp.problem(static, {"data.N": CELL["data.N"]})
    v = {k: x[0] for k, x in grid.batch_inputs(comp, [CELL]).items()}
    with jax.enable_x64(True):
        return problem.make_data(jnp.asarray(v["key"]), v, None), v


def test_training_and_test_sets_come_from_independent_streams():
    data, v = _sets()
    kw = dict(mu_norm=6.0, sigma_p=0.2, sigma_tilde_p=4.0, M=4, d=12, dtype=jnp.float64)
    with jax.enable_x64(True):
        X, _ = jdata.dataset(T.stream(v["key"], "data"), 6, **kw)
        X_test, _ = jdata.dataset(T.stream(v["key"], "test"), 10, **kw)
    np.testing.assert_array_equal(data["X"], X)
    np.testing.assert_array_equal(data["X_test"], X_test)
    assert not np.allclose(data["X"][0], data["X_test"][0])  # same index, same label, other draw
    assert len(set(T.STREAMS.values())) == len(T.STREAMS)


def test_the_independence_check_can_fail(monkeypatch):
    """Mutation check: with the test stream given the data stream's id, the first test sample is
    the first training sample, so the test above would fail."""
    monkeypatch.setattr(types, "STREAMS", T.STREAMS | {"test": T.STREAMS["data"]})
    data, _ = _sets()
    np.testing.assert_array_equal(data["X_test"][0], data["X"][0])
