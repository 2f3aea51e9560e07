"""The vectorised trainer against the plain one-cell reference, same seeds.

Every bucket here is built like a run builds it (Composition.of(cell).problem(static, pads)); the
reference trains one cell alone on exactly N samples (pads = the cell's own N). Compiles dominate
the time, so buckets keep their shapes (cell count, padded N) across tests: the programs are then
compiled once per strategy (see helpers.py).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab import train as T
from attnlab.engine import grid
from attnlab.errors import AttnlabError
from attnlab.experiments.config import ExperimentSpec, expand
from attnlab.experiments.jiang2024 import tiny_cell
from attnlab.problem import Recipe
from attnlab.train import CAP, CONVERGED, DIVERGED, TrainConfig, bucket, log_schedule, train_bucket, train_reference
from attnlab.train import step as per_cell
from helpers import METRICS, assert_same, bucket_of, cell_of, run_bucket, run_reference, x64

# a bucket that exercises the stop rule, the cap, padding (N = 2 … 8) and per-cell lr / ‖μ‖ / N;
# probes on a schedule that is dense up to step 20 and every 7 steps after
BASE = dict(dtype="float64", loss_threshold=0.05, max_steps=60, log_every=7, log_dense_until=20)
CELLS = [
    tiny_cell(mu=6.0, N=2, lr=0.5, **BASE),
    tiny_cell(mu=1.0, N=8, lr=0.1, **BASE),
    tiny_cell(mu=3.0, N=4, lr=0.8, rep=1, **BASE),
    tiny_cell(mu=4.5, N=6, lr=0.6, rep=11, **BASE),
]
PADS = {"data.N": 8}

# segments of 3 steps, compaction as soon as half the batch has stopped, down to one cell
COMPACTING = dict(strategy="vmap", segment=3, shrink=2, min_batch=1)
SEQUENTIAL = dict(strategy="sequential")
KWS = {"vmap": dict(strategy="vmap"), "vmap-compacting": COMPACTING, "sequential": SEQUENTIAL}
STRATEGIES = pytest.mark.parametrize("strategy", list(KWS))


@functools.cache
def main_bucket(strategy):
    """The CELLS bucket on one strategy (trained once per session)."""
    return run_bucket(CELLS, pads=PADS, **KWS[strategy])


@STRATEGIES
def test_vectorised_equals_reference(strategy):
    out = main_bucket(strategy)
    statuses = set(out["metrics"]["status"].tolist())
    assert CONVERGED in statuses and CAP in statuses, "the bucket should exercise both stop rules"
    assert len(set(out["metrics"]["stop_step"].tolist())) >= 3, "cells should stop at different steps"
    assert out["traces"]["train_loss"].shape == (
        len(CELLS),
        len(bucket_of(CELLS)[0].train_config(bucket_of(CELLS)[1]).log_steps),
    )
    for i, c in enumerate(CELLS):
        assert_same(cell_of(out, i), run_reference(c))


@pytest.mark.parametrize("strategy", ["vmap-compacting", "sequential"])
def test_vectorised_equals_reference_float32(strategy):
    cells = [dict(c, **{"train.dtype": "float32"}) for c in CELLS]
    out = run_bucket(cells, pads=PADS, **KWS[strategy])
    assert out["metrics"]["test_loss"].dtype == np.float32
    for i, c in enumerate(cells):
        ref = run_reference(c)
        assert out["metrics"]["stop_step"][i] == ref["metrics"]["stop_step"]
        for k in ("train_loss", "test_loss"):
            np.testing.assert_allclose(out["metrics"][k][i], ref["metrics"][k], rtol=2e-3, atol=1e-5)


@STRATEGIES
def test_a_cell_does_not_depend_on_its_batch(strategy):
    """Reordered, padded differently (reference: no padding), stopped at other steps: the same
    numbers for each cell."""
    together = main_bucket(strategy)
    shuffled = run_bucket(CELLS[::-1], pads=PADS, **KWS[strategy])
    n = len(CELLS)
    for i in range(n):
        assert_same(cell_of(shuffled, n - 1 - i), cell_of(together, i), rtol=1e-12, atol=1e-14)
        assert_same(cell_of(together, i), run_reference(CELLS[i]))


@STRATEGIES
def test_divergence_is_confined_to_its_cell(strategy):
    bad = tiny_cell(mu=50.0, N=8, lr=float("inf"), rep=7, **BASE)
    cells = [CELLS[0], bad, *CELLS[2:]]  # same shapes as the main bucket
    out = run_bucket(cells, pads=PADS, **KWS[strategy])
    assert out["metrics"]["status"][1] == DIVERGED
    assert out["metrics"]["stop_step"][1] == 1  # θ_1 = θ_0 − ∞·∇L: the loss at step 1 is not finite
    main = main_bucket(strategy)
    for i in (0, 2, 3):
        assert np.isfinite(out["metrics"]["train_loss"][i])
        assert_same(cell_of(out, i), cell_of(main, i), rtol=1e-12, atol=1e-14)


@STRATEGIES
def test_stop_rule_records_the_first_step_below_threshold(strategy):
    out = main_bucket(strategy)
    comp, static, _ = bucket_of(CELLS)
    cfg = comp.train_config(static)
    steps = np.asarray(cfg.log_steps)
    thr = cfg.loss_threshold
    converged = [i for i in range(len(CELLS)) if out["metrics"]["status"][i] == CONVERGED]
    assert any(out["metrics"]["stop_step"][i] < 20 for i in converged), "one cell should stop while logs are dense"
    for i in converged:
        t = out["metrics"]["stop_step"][i]
        losses = out["traces"]["train_loss"][i]
        assert np.all(losses[steps < t] >= thr), i  # not below the threshold before the stop …
        assert out["metrics"]["train_loss"][i] < thr  # … below it at the stop
        if t in steps:
            assert losses[steps == t][0] == pytest.approx(out["metrics"]["train_loss"][i], rel=1e-12)
        assert np.all(losses[steps >= t] == out["metrics"]["train_loss"][i])  # frozen after the stop


def test_cap_status_and_no_early_stop():
    out = main_bucket("sequential")
    i = 1  # ‖μ‖ = 1, N = 8: does not reach the threshold in 60 steps
    assert out["metrics"]["status"][i] == CAP and out["metrics"]["stop_step"][i] == BASE["max_steps"]
    assert out["metrics"]["train_loss"][i] >= BASE["loss_threshold"]
    assert out["traces"]["train_loss"][i][-1] == out["metrics"]["train_loss"][i]


@pytest.mark.parametrize("strategy", ["vmap-compacting", "sequential"])
@pytest.mark.parametrize("opt", ["momentum", "adam"])
def test_optimisers_match_reference(strategy, opt):
    # the cells stop at different steps (the vmap batch compacts to the straggler)
    cells = [
        tiny_cell(dtype="float64", optimizer=opt, mu=8.0, lr=0.05, max_steps=25, loss_threshold=0.2, log_every=5),
        tiny_cell(
            dtype="float64", optimizer=opt, mu=1.0, lr=0.01, max_steps=25, loss_threshold=0.2, log_every=5, rep=3
        ),
    ]
    out = run_bucket(cells, **KWS[strategy])
    assert out["metrics"]["stop_step"][0] < out["metrics"]["stop_step"][1]
    for i, c in enumerate(cells):
        assert_same(cell_of(out, i), run_reference(c))


# ---------------------------------------------------------------- mini-batch SGD


# N = 6 with b = 4: two batches per epoch, the second short (2 samples); N = 8: two full ones.
# The stop rule is judged on the full training set every 3 steps; probes (the full training
# loss) at every step.
MB = dict(dtype="float64", batch_size=4, stop_every=3, lr=0.5, loss_threshold=0.15, max_steps=45, log_every=1)
MB_CELLS = [tiny_cell(mu=8.0, N=6, **MB), tiny_cell(mu=5.0, N=8, rep=1, **MB)]


@functools.cache
def minibatch_bucket(strategy):
    return run_bucket(MB_CELLS, **KWS[strategy])


@pytest.mark.parametrize("strategy", ["vmap-compacting", "sequential"])
def test_minibatch_sgd_equals_reference(strategy):
    out = minibatch_bucket(strategy)
    assert CONVERGED in out["metrics"]["status"].tolist(), "the threshold should be reached"
    for i, c in enumerate(MB_CELLS):
        t = int(out["metrics"]["stop_step"][i])
        assert t % MB["stop_every"] == 0 or t == MB["max_steps"]  # judged only on the stop schedule
        assert_same(cell_of(out, i), run_reference(c))


def test_minibatch_trace_is_the_full_training_loss():
    out = minibatch_bucket("sequential")
    for i, c in enumerate(MB_CELLS):
        ref = run_reference(c)
        trace = out["traces"]["train_loss"][i]
        np.testing.assert_allclose(trace, ref["traces"]["train_loss"], rtol=1e-9, atol=1e-12)
        t = int(out["metrics"]["stop_step"][i])
        # the stop step's slot holds L(θ_stop) on all N samples, the metric's value
        assert trace[t] == pytest.approx(out["metrics"]["train_loss"][i], rel=1e-12)
        if out["metrics"]["status"][i] == CONVERGED:
            judged = np.arange(0, t, MB["stop_every"])
            assert np.all(trace[judged] >= MB["loss_threshold"])
            assert trace[t] < MB["loss_threshold"]


def test_minibatch_batches_cover_each_epoch_once():
    """N = 6 real samples padded to 8, b = 4: each epoch's two batches hold each real sample
    once (the second has 2 real slots), and a new epoch draws a new order."""
    cfg = TrainConfig(max_steps=10, batch_size=4)
    n_pad, N = 8, 6
    ids = jnp.arange(n_pad, dtype=jnp.float32)
    data = {"X": ids, "y": ids, "mask": jnp.arange(n_pad) < N}
    v = {"key": jnp.asarray(grid.cell_key("0123456789abcdef"))}
    orders = []
    for epoch in range(2):
        taken = []
        for j in range(2):
            X, y, mask = per_cell.batch(cfg, data, v, jnp.int32(2 * epoch + j))
            assert mask.tolist() == ([True] * 4 if j == 0 else [True, True, False, False])
            taken += np.asarray(X)[np.asarray(mask)].astype(int).tolist()
        assert sorted(taken) == list(range(N))  # padding never drawn
        orders.append(taken)
    assert orders[0] != orders[1]


# ---------------------------------------------------------------- per-group learning rates, params


# trained with W_Q and W_K at 3× the cell's lr; the final parameters are kept
MULT = tiny_cell(dtype="float64", max_steps=20, save_params=True) | {"train.lr_mult.QK": 3.0}


def test_lr_mult_equals_reference_and_changes_the_run():
    out = run_bucket([MULT], strategy="sequential")
    ref = run_reference(MULT)
    assert_same(cell_of(out, 0), ref)
    # the same cell (same key: same data and init) without the multiplier
    comp, static, _ = bucket_of([MULT])
    plain = {k: v for k, v in static.items() if k != "train.lr_mult.QK"}
    v = {k: x[0] for k, x in grid.batch_inputs(comp, [MULT]).items()}
    with x64(MULT):
        one = train_reference(comp.problem(plain, {"data.N": 6}), comp.train_config(plain), v)
    assert abs(one["metrics"]["train_loss"] - ref["metrics"]["train_loss"]) > 1e-6
    assert not np.allclose(one["params"]["W_Q"], ref["params"]["W_Q"])


def test_lr_mult_scales_only_its_group():
    comp, static, _ = bucket_of([MULT])
    problem = comp.problem(static, {"data.N": 6})
    assert problem.lr_mult == (("QK", 3.0),) and problem.groups["W_Q"] == problem.groups["W_K"] == "QK"
    train = {k: jnp.ones(2) for k in ("W_Q", "W_K", "W_V")}
    grads = {k: jnp.full(2, 0.5) for k in train}
    cfg = TrainConfig()
    opt = per_cell.optimizer(problem, cfg, 0.1, train)
    upd, _ = opt.update(grads, opt.init(train), train)
    np.testing.assert_allclose(upd["W_Q"], -0.15)
    np.testing.assert_allclose(upd["W_K"], -0.15)
    np.testing.assert_allclose(upd["W_V"], -0.05)


def test_lr_mult_of_an_unknown_group_is_an_error():
    cell = tiny_cell() | {"train.lr_mult.XY": 2.0}
    comp, static, _ = bucket_of([cell])
    with pytest.raises(AttnlabError, match="XY"):
        comp.problem(static, {"data.N": 6})


def test_save_params_equals_reference():
    out = run_bucket([MULT], strategy="sequential")
    ref = run_reference(MULT)
    assert set(out["params"]) == {"W_Q", "W_K", "W_V", "w_O"}
    for k, p in ref["params"].items():
        assert out["params"][k].shape == (1, *p.shape)
        np.testing.assert_allclose(out["params"][k][0], p, rtol=1e-9, atol=1e-12, err_msg=k)
    # the final parameters give the final metrics
    comp, static, _ = bucket_of([MULT])
    problem = comp.problem(static, {"data.N": 6})
    v = {k: x[0] for k, x in grid.batch_inputs(comp, [MULT]).items()}
    with x64(MULT):
        data = problem.make_data(v["key"], v, None)
        p = jax.tree.map(lambda x: jnp.asarray(x[0]), out["params"])
        f = jax.vmap(lambda x: problem.apply(p, x)[0])(data["X_test"])
        test_loss = float(problem.loss.fn(f, data["y_test"]).mean())
    assert test_loss == pytest.approx(float(out["metrics"]["test_loss"][0]), rel=1e-9)


# ---------------------------------------------------------------- losses


@pytest.mark.parametrize("loss", ["hinge", "squared"])
def test_other_losses_equal_reference(loss):
    cells = [tiny_cell(dtype="float64", loss=loss, mu=8.0, lr=0.05, max_steps=20, loss_threshold=0.3)]
    out = run_bucket(cells, strategy="sequential")
    keys = {"train_loss", "test_loss", "status", "stop_step"}
    if loss == "squared":  # a regression loss: no sign error
        assert set(out["metrics"]) == keys
    else:
        assert set(out["metrics"]) == keys | {"train_error", "test_error"}
    for i, c in enumerate(cells):
        assert_same(cell_of(out, i), run_reference(c), metrics=sorted(out["metrics"]))
    assert set(T.LOSSES) == {"logistic", "hinge", "squared"}


# ---------------------------------------------------------------- shared-array data (pool)


POOL_SPEC = ExperimentSpec(
    data={"name": "pool", "pool": 40, "M": 4, "d": 6, "signal": 2.0, "N": [6, 10], "n_test": 10},
    model={"name": "jiang2024", "d_h": 6, "d_v": 5},
    train={"dtype": "float64", "lr": 0.5, "max_steps": 30, "loss_threshold": 0.1, "log_every": 10},
)
POOL_CELLS = expand(POOL_SPEC)


def test_pool_data_vectorised_equals_reference():
    assert [c["data.N"] for c in POOL_CELLS] == [6, 10] and POOL_CELLS[0]["data.name"] == "pool"
    out = run_bucket(POOL_CELLS, strategy="sequential")
    for i, c in enumerate(POOL_CELLS):
        assert_same(cell_of(out, i), run_reference(c))


def test_pool_cells_draw_their_own_training_indices_and_share_the_test_split():
    comp, static, _ = bucket_of(POOL_CELLS)
    shared = comp.shared(static)
    pads = {"data.N": 10}
    problem = comp.problem(static, pads)
    v = grid.batch_inputs(comp, POOL_CELLS)
    with x64(POOL_CELLS[0]):
        sets = [problem.make_data(jnp.asarray(v["key"][i]), {k: x[i] for k, x in v.items()}, shared) for i in (0, 1)]
    a, b = sets
    np.testing.assert_array_equal(a["X_test"], b["X_test"])  # the pool's last n_test samples
    np.testing.assert_array_equal(a["X_test"], shared["X"][-10:])
    assert not np.array_equal(a["X"][:6], b["X"][:6])
    assert a["mask"].sum() == 6 and b["mask"].sum() == 10
    train_pool = shared["X"][:-10].reshape(30, -1)
    for s in sets:  # every training sample is a pool sample outside the test split, no repeats
        rows = [np.flatnonzero((train_pool == np.asarray(x, np.float32).ravel()).all(1)) for x in s["X"]]
        assert all(len(r) == 1 for r in rows)
        assert len({int(r[0]) for r in rows}) == len(rows)


# ---------------------------------------------------------------- configuration


def test_log_schedule():
    assert log_schedule(10, every=5) == (0, 5, 10)
    assert log_schedule(12, every=5, dense_until=3) == (0, 1, 2, 5, 10, 12)
    s = log_schedule(1000, n=20)
    assert s[0] == 0 and s[-1] == 1000 and list(s) == sorted(set(s))


def test_train_config_validation():
    with pytest.raises(ValueError, match="max_steps"):
        TrainConfig(max_steps=-1)
    with pytest.raises(ValueError, match="optimizer"):
        TrainConfig(optimizer="lbfgs")
    with pytest.raises(ValueError, match="log_steps must be sorted"):
        TrainConfig(max_steps=10, log_steps=(0, 5, 3))
    with pytest.raises(ValueError, match="log_steps must be sorted and unique"):
        TrainConfig(max_steps=10, log_steps=(0, 3, 3))
    with pytest.raises(ValueError, match=r"log_steps must lie in \[0, max_steps = 10\]"):
        TrainConfig(max_steps=10, log_steps=(0, 99))
    with pytest.raises(ValueError, match="array_log_steps"):
        TrainConfig(max_steps=10, array_log_steps=(-1, 2))
    with pytest.raises(ValueError, match="batch_size"):
        TrainConfig(stop_every=0)
    TrainConfig(max_steps=10, log_steps=(0, 10))  # the ends are allowed


def test_unknown_strategy():
    comp, static, _ = bucket_of([CELLS[0]])
    with pytest.raises(ValueError, match="strategy"):
        train_bucket(comp.problem(static, PADS), comp.train_config(static), {}, strategy="pmap")


def test_metrics_keys_and_shapes():
    out = main_bucket("sequential")
    assert set(out) == {"metrics", "traces"}
    assert set(out["metrics"]) == set(METRICS)
    assert all(x.shape == (len(CELLS),) for x in out["metrics"].values())


def test_compiled_programs_are_kept_for_the_most_recent_buckets_only(monkeypatch):
    """A long run of many bucket shapes must not keep every compiled program (each holds memory
    mappings, whose count the kernel limits): the least recently used ones are dropped and freed."""
    import gc
    import weakref

    monkeypatch.setattr(bucket, "PROGRAMS_KEPT", 2)
    monkeypatch.setattr(bucket, "PROGRAMS", type(bucket.PROGRAMS)())
    comp, static, _ = bucket_of([CELLS[0]])
    v = grid.batch_inputs(comp, [CELLS[0]])
    built = T.PROGRAMS_BUILT["count"]

    def run(name):
        with x64(CELLS[0]):
            train_bucket(
                comp.problem(static, PADS), comp.train_config(static), v, cache_key=name, strategy="sequential"
            )
        return bucket.PROGRAMS[("programs", name, comp.train_config(static))]

    first = weakref.ref(run("a"))
    run("b")
    run("a")  # reused, and now the most recent
    run("c")  # drops "b"
    assert [k[1] for k in bucket.PROGRAMS] == ["a", "c"]
    assert T.PROGRAMS_BUILT["count"] - built == 3
    run("d")  # drops "a"
    gc.collect()
    assert first() is None


def test_the_reference_is_compiled_once_per_shape_and_gives_the_uncached_numbers():
    """``train_reference`` with a cache key builds its functions once for every cell of one
    shape and compiles each once (the cell's data and values are arguments, not constants), and
    gives what a fresh, uncached build gives."""
    comp, static, key = bucket_of([CELLS[0]])
    pads = {"data.N": 5}  # a shape no other test uses: its programs are built here
    cfg = comp.train_config(static)
    vs = [{k: x[0] for k, x in grid.batch_inputs(comp, [dict(c, **{"data.N": 5})]).items()} for c in CELLS[:3]]
    cache_key = ("once per shape", key, 5)
    built = T.PROGRAMS_BUILT["count"]
    with x64(CELLS[0]):
        cached = [train_reference(comp.problem(static, pads), cfg, v, cache_key=cache_key) for v in vs]
        assert T.PROGRAMS_BUILT["count"] - built == 1
        ref = bucket.PROGRAMS[("_reference", cache_key, cfg)]
        fns = [ref.start, ref.step_loss, ref.full_loss, ref.update, ref.final] + [f for _, _, f in ref.recorders]
        assert all(f._cache_size() == 1 for f in fns), [f._cache_size() for f in fns]
        for v, c in zip(vs, cached, strict=True):
            assert_same(c, train_reference(comp.problem(static, pads), cfg, v), rtol=0, atol=0)


# ---------------------------------------------------------------- the objective's reduction


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("batch", [0, 3])
def test_the_sum_reduction_is_the_mean_with_the_step_times_n(fast, batch):
    """Σ_i ℓ_i over a batch of n real samples has the gradient n·∇mean: gd on the sum at lr η is
    gd on the mean at lr n·η (N = 6, full batch or batches of 3), on the plain and the dual path,
    from the same draws; recorded losses are means either way. Both reductions train in one
    program (a per-cell input), each cell as the reference trains it; the default leaves a cell's
    id alone."""
    n = batch or 6
    base = tiny_cell(
        dtype="float64", loss="squared", mu=8.0, lr=0.01, max_steps=15, loss_threshold=0.0, fast=fast, batch_size=batch
    )
    summed = base | {"train.reduction": "sum"}

    def reference(cell, lr):  # the base cell's draws (its key), the cell's recipe
        comp, static, _ = bucket_of([cell])
        v = {k: x[0] for k, x in grid.batch_inputs(comp, [cell]).items()}
        v |= {"lr": lr, "key": grid.batch_inputs(comp, [base])["key"][0]}
        pads = {f: cell[f] for f in comp.size_fields()}
        with x64(cell):
            return train_reference(comp.problem(static, pads), comp.train_config(static), v)

    keys = ["train_loss", "test_loss", "status", "stop_step"]  # the squared loss has no sign error
    assert_same(reference(summed, 0.01), reference(base, 0.01 * n), rtol=1e-9, atol=1e-12, metrics=keys)
    # one program for both reductions (a per-cell input, absent from a mean cell), each cell as in its own
    bucket_of([base, summed])  # one bucket: asserted there
    both = run_bucket([base, summed], strategy="sequential")
    for i, cell in enumerate((base, summed)):
        assert_same(cell_of(both, i), run_reference(cell), metrics=keys)
    assert "train.reduction" not in base and grid.cell_id(base) != grid.cell_id(summed)
    with pytest.raises(ValueError, match="reduction"):
        Recipe(reduction="max")
