"""Fast paths against the plain path, same seeds (float64): the collapsed value path and the dual
(Gram) form of full-batch GD, on both strategies and the reference, with probes and saved
parameters. A fast path must give the plain path's numbers, never other ones."""

import numpy as np
import pytest

from attnlab.engine import grid
from attnlab.experiments.jiang2024 import tiny_cell
from helpers import assert_same, bucket_of, cell_of, run_bucket, run_reference, use_part

# N·M = 4·N ≤ 32 < d = 40: the dual form applies; probes (jiang2024's) on a schedule, saved parameters
BASE = dict(d=40, dtype="float64", loss_threshold=0.05, max_steps=50, log_every=5, probes="jiang2024", save_params=True)
GRID = [dict(mu=2.0, N=2, lr=0.2), dict(mu=1.0, N=8, lr=0.1), dict(mu=3.0, N=4, lr=0.3, rep=1)]


def cells(fast, **kw):
    return [tiny_cell(**(BASE | g | kw), fast=fast) for g in GRID]


def test_dual_form_is_chosen_only_where_exact_and_cheaper():
    def dual(N=8, **kw):
        comp, static, _ = bucket_of([tiny_cell(**BASE | kw, N=N)])
        return comp.problem(static, {"data.N": N}).dual

    assert dual() is not None
    assert dual(fast=False) is None
    assert dual(optimizer="adam") is None  # not a linear update
    assert dual(batch_size=2) is None  # mini-batches: nothing to gain
    assert dual(N=10) is None  # N·M = 40 = d: the plain form is cheaper


@pytest.mark.parametrize("optimizer", ["gd", "momentum"])
@pytest.mark.parametrize("strategy", ["sequential", "vmap"])
def test_fast_equals_plain(strategy, optimizer):
    fast = run_bucket(cells(True, optimizer=optimizer), pads={"data.N": 8}, strategy=strategy)
    plain = run_bucket(cells(False, optimizer=optimizer), pads={"data.N": 8}, strategy=strategy)
    stops = fast["metrics"]["stop_step"]
    assert len(set(stops.tolist())) >= 2 and (stops >= 3).all(), "cells should train for several, different steps"
    for i in range(len(GRID)):
        assert_same(cell_of(fast, i), cell_of(plain, i), rtol=1e-8, atol=1e-10)


def test_fast_reference_equals_plain_reference():
    for f, p in zip(cells(True), cells(False), strict=True):
        assert_same(run_reference(f), run_reference(p), rtol=1e-8, atol=1e-10)


def test_fast_paths_differ_only_in_rounding_in_float32():
    f32 = dict(dtype="float32")
    fast = run_bucket(cells(True, **f32), pads={"data.N": 8})
    plain = run_bucket(cells(False, **f32), pads={"data.N": 8})
    np.testing.assert_allclose(fast["metrics"]["test_loss"], plain["metrics"]["test_loss"], rtol=1e-4, atol=1e-5)
    assert np.abs(fast["metrics"]["stop_step"] - plain["metrics"]["stop_step"]).max() <= 1


def test_compile_cache_directory_and_off_switch(monkeypatch, tmp_path):
    from attnlab.train import compile_cache_dir

    monkeypatch.setenv("ATTNLAB_COMPILE_CACHE", "off")
    assert compile_cache_dir() is None
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setenv("ATTNLAB_COMPILE_CACHE", str(tmp_path))
    assert compile_cache_dir() == str(tmp_path)
    monkeypatch.delenv("ATTNLAB_COMPILE_CACHE")
    assert compile_cache_dir().endswith("jax") and "attnlab" in compile_cache_dir()
    # executables compiled under other XLA flags live apart (JAX's key leaves the flags out)
    monkeypatch.setenv("ATTNLAB_COMPILE_CACHE", str(tmp_path))
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0 --xla_cpu_enable_fast_math=false")
    a = compile_cache_dir()
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false  --xla_backend_optimization_level=0")
    assert compile_cache_dir() == a and a.startswith(str(tmp_path)) and a != str(tmp_path)
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=3")
    assert compile_cache_dir() not in (a, str(tmp_path))


def test_compile_cache_threshold(monkeypatch, tmp_path):
    """Programs faster to compile than ``$ATTNLAB_COMPILE_CACHE_MIN_SECONDS`` are not kept; a
    value that is not a number is one clear error."""
    import jax

    from attnlab.errors import AttnlabError
    from attnlab.train import enable_compile_cache

    before = jax.config.jax_persistent_cache_min_compile_time_secs, jax.config.jax_compilation_cache_dir
    monkeypatch.setenv("ATTNLAB_COMPILE_CACHE", str(tmp_path))
    try:
        monkeypatch.setenv("ATTNLAB_COMPILE_CACHE_MIN_SECONDS", "2.5")
        assert enable_compile_cache().startswith(str(tmp_path))
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 2.5
        monkeypatch.delenv("ATTNLAB_COMPILE_CACHE_MIN_SECONDS")
        enable_compile_cache()
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.5
        monkeypatch.setenv("ATTNLAB_COMPILE_CACHE_MIN_SECONDS", "soon")
        with pytest.raises(AttnlabError, match="ATTNLAB_COMPILE_CACHE_MIN_SECONDS: not a number: 'soon'"):
            enable_compile_cache()
    finally:  # the session's settings again
        jax.config.update("jax_persistent_cache_min_compile_time_secs", before[0])
        jax.config.update("jax_compilation_cache_dir", before[1])


def test_a_part_derived_with_its_own_apply_never_trains_the_parents_fast_path(monkeypatch):
    """dataclasses.replace(part, apply=mine) keeps the parent's fast_apply and dual, which compute
    the parent's function: they must not be used, so fast on and fast off train the same model —
    the derived one (here a linearised softmax: attention replaced by its first-order form)."""
    import dataclasses

    import jax.numpy as jnp

    from attnlab.models import jiang2024 as J

    def linear_attention(params, x, hp):  # a different function from the parent's
        f, aux = J.apply(params, x, hp)
        return 0.5 * f + 0.1 * jnp.tanh(f), aux

    mine = dataclasses.replace(J.PART, name="jiang2024-linsoft", apply=linear_attention)
    assert J.PART.fast and not mine.fast and mine.fast_apply is J.PART.fast_apply
    use_part(monkeypatch, mine)
    for fast in (True, False):
        comp, static, _ = bucket_of([tiny_cell(**BASE, N=4, fast=fast) | {"model.name": mine.name}])
        assert comp.problem(static, {"data.N": 4}).dual is None  # the parent's dual form is not this model's
    on = run_reference(tiny_cell(**BASE, N=4, fast=True) | {"model.name": mine.name})
    off = run_reference(tiny_cell(**BASE, N=4, fast=False) | {"model.name": mine.name})
    np.testing.assert_allclose(on["metrics"]["train_loss"], off["metrics"]["train_loss"], rtol=1e-12)
    parent = run_reference(tiny_cell(**BASE, N=4, fast=True))
    assert abs(float(on["metrics"]["train_loss"]) - float(parent["metrics"]["train_loss"])) > 1e-3


@pytest.mark.parametrize("strategy", ["sequential", "vmap"])
def test_a_fast_compile_trains_the_same_cells_to_rounding(strategy):
    """train.compile = fast compiles the cells' programs at XLA's lower LLVM effort: the same
    numbers to float64 rounding and the same random draws, under another id; the default is left
    out of a cell (earlier cells keep their ids)."""
    usual = cells(True)
    quick = [c | {"train.compile": "fast"} for c in usual]
    a = run_bucket(usual, pads={"data.N": 8}, strategy=strategy)
    b = run_bucket(quick, pads={"data.N": 8}, strategy=strategy)
    for i in range(len(GRID)):
        assert_same(cell_of(a, i), cell_of(b, i), rtol=1e-10, atol=1e-12)
    assert "train.compile" not in usual[0]
    assert grid.cell_id(quick[0]) != grid.cell_id(usual[0]) and grid.seed_id(quick[0]) == grid.seed_id(usual[0])
    assert bucket_of(quick)[0].train_config(bucket_of(quick)[1]).xla_options == (("xla_backend_optimization_level", 1),)
