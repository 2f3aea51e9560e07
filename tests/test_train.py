"""The vectorised trainer against the plain one-cell reference, same seeds."""

import jax
import numpy as np
import pytest

from attnlab.experiments.jiang2024 import tiny_cell
from attnlab.sweep import grid
from attnlab.train import CAP, CONVERGED, DIVERGED, TrainConfig, log_schedule, train_bucket, train_reference

METRICS = ("train_loss", "train_error", "test_loss", "test_error", "stop_step", "status")


def run_bucket(family, cells, dtype="float64", **kw):
    static = {f: cells[0][f] for f in family.static_fields}
    n_pad = max(c["N"] for c in cells)
    v = grid.batch_inputs(family, cells, dtype)
    with jax.enable_x64(dtype == "float64"):
        return train_bucket(family.problem(static, n_pad), family.train_config(static), v, **kw)


_REFERENCE: dict[str, tuple] = {}


def run_reference(family, cell):
    """The reference result of a cell (computed once per test session: it is the slow path)."""
    cid = grid.cell_id(cell)
    if cid not in _REFERENCE:
        _REFERENCE[cid] = _run_reference(family, cell)
    return _REFERENCE[cid]


def _run_reference(family, cell):
    static = {f: cell[f] for f in family.static_fields}
    v = {k: x[0] for k, x in grid.batch_inputs(family, [cell], cell["dtype"]).items()}
    with jax.enable_x64(cell["dtype"] == "float64"):
        # the reference draws exactly N samples: no padding at all
        return train_reference(family.problem(static, cell["N"]), family.train_config(static), v)


def assert_same(a, b, i=None, rtol=1e-9, atol=1e-12):
    pick = (lambda x: x[i]) if i is not None else (lambda x: x)
    for k in METRICS:
        np.testing.assert_allclose(pick(a[0][k]), b[0][k], rtol=rtol, atol=atol, err_msg=k)
    for k in b[1]:
        np.testing.assert_allclose(pick(a[1][k]), b[1][k], rtol=rtol, atol=atol, err_msg=k)


# a bucket that exercises the stop rule, the cap, padding and per-cell lr / ‖μ‖ / N
CELLS = [
    tiny_cell(dtype="float64", mu=6.0, N=2, lr=0.5, loss_threshold=0.05, max_steps=60, log_every=7),
    tiny_cell(dtype="float64", mu=1.0, N=8, lr=0.1, loss_threshold=0.05, max_steps=60, log_every=7),
    tiny_cell(dtype="float64", mu=3.0, N=4, lr=0.3, loss_threshold=0.05, max_steps=60, log_every=7, rep=1),
]


# segments of 3 steps, compaction as soon as half the batch has stopped, down to one cell
COMPACTING = dict(strategy="vmap", segment=3, shrink=2, min_batch=1)
SEQUENTIAL = dict(strategy="sequential")
STRATEGIES = pytest.mark.parametrize(
    "kw", [dict(strategy="vmap"), COMPACTING, SEQUENTIAL], ids=["vmap", "vmap-compacting", "sequential"]
)


@STRATEGIES
def test_vectorised_equals_reference(family, kw):
    cells = CELLS + [dict(c, rep=c["rep"] + 10, mu=c["mu"] * 1.5) for c in CELLS]
    out = run_bucket(family, cells, **kw)
    statuses = set(out[0]["status"].tolist())
    assert CONVERGED in statuses and CAP in statuses, "the bucket should exercise both stop rules"
    assert len(set(out[0]["stop_step"].tolist())) >= 3, "cells should stop at different steps"
    for i, c in enumerate(cells):
        assert_same(out, run_reference(family, c), i)


@STRATEGIES
def test_vectorised_equals_reference_float32(family, kw):
    cells = [dict(c, dtype="float32") for c in CELLS]
    out = run_bucket(family, cells, "float32", **kw)
    for i, c in enumerate(cells):
        ref = run_reference(family, c)
        assert out[0]["stop_step"][i] == ref[0]["stop_step"]
        for k in ("train_loss", "test_loss"):
            np.testing.assert_allclose(out[0][k][i], ref[0][k], rtol=2e-3, atol=1e-5)


def cell_of(out, i):
    return tuple({k: v[i] for k, v in part.items()} for part in out)


@STRATEGIES
def test_a_cell_does_not_depend_on_its_batch(family, kw):
    alone = cell_of(run_bucket(family, [CELLS[0]], strategy="vmap"), 0)
    together = run_bucket(family, CELLS, **kw)  # padded to N = 8, other cells stop later
    shuffled = run_bucket(family, [CELLS[2], CELLS[1], CELLS[0]], **kw)
    assert_same(together, alone, 0)
    assert_same(shuffled, alone, 2)


@STRATEGIES
def test_divergence_is_confined_to_its_cell(family, kw):
    bad = tiny_cell(dtype="float64", mu=50.0, lr=float("inf"), max_steps=30, rep=7)
    good = tiny_cell(dtype="float64", mu=3.0, lr=0.1, max_steps=30)
    out = run_bucket(family, [bad, good], **kw)
    assert out[0]["status"][0] == DIVERGED
    assert np.isfinite(out[0]["train_loss"][1])
    alone = run_bucket(family, [good])
    for k in METRICS:
        np.testing.assert_allclose(out[0][k][1], alone[0][k][0], rtol=1e-12, err_msg=k)


@STRATEGIES
def test_stop_rule_records_the_first_step_below_threshold(family, kw):
    cell = tiny_cell(dtype="float64", mu=8.0, N=4, lr=0.5, loss_threshold=0.1, max_steps=200, log_every=1)
    (out, traces) = run_bucket(family, [cell], **kw)
    t = out["stop_step"][0]
    assert out["status"][0] == CONVERGED
    losses = traces["train_loss"][0]
    assert losses[t] < 0.1 and np.all(losses[:t] >= 0.1)
    assert out["train_loss"][0] == pytest.approx(losses[t], rel=1e-12)
    assert np.all(losses[t:] == losses[t])  # frozen after the stop


def test_cap_status_and_no_early_stop(family):
    cell = tiny_cell(dtype="float64", loss_threshold=0.0, max_steps=15)
    out, _ = run_bucket(family, [cell])
    assert out["status"][0] == CAP and out["stop_step"][0] == 15


@STRATEGIES
def test_optimisers_match_reference(family, kw):
    for opt in ("momentum", "adam"):
        cell = tiny_cell(dtype="float64", optimizer=opt, lr=0.01, max_steps=25, log_every=5)
        assert_same(run_bucket(family, [cell, dict(cell, rep=3)], **kw), run_reference(family, cell), 0)


def test_log_schedule():
    assert log_schedule(10, every=5) == (0, 5, 10)
    s = log_schedule(1000, n=20)
    assert s[0] == 0 and s[-1] == 1000 and list(s) == sorted(set(s))
    with pytest.raises(ValueError, match="max_steps"):
        TrainConfig(max_steps=-1)
    with pytest.raises(ValueError, match="optimizer"):
        TrainConfig(optimizer="lbfgs")


def test_unknown_strategy(family):
    with pytest.raises(ValueError, match="strategy"):
        run_bucket(family, [tiny_cell(dtype="float64")], strategy="pmap")
