"""The reference path: the same per-cell functions, one cell at a time, in a Python loop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.train import step as per_cell
from attnlab.train.bucket import kept_program
from attnlab.train.step import plain_params
from attnlab.train.types import CAP, CONVERGED, DIVERGED, Problem, TrainConfig

# ---------------------------------------------------------------- reference path


@dataclass(frozen=True)
class _Reference:
    """The reference path's per-cell functions, compiled with the cell's data and values as
    arguments (not constants), so that every cell of one shape shares them."""

    start: Callable  # (v, shared) -> (data, train, fixed, opt_state)
    step_loss: Callable  # (train, fixed, data, v, t) -> ((loss, (aux, J)), grads)
    full_loss: Callable  # (train, fixed, data) -> (loss, (aux, J))
    update: Callable  # (grads, opt_state, train, lr) -> (train, opt_state)
    recorders: tuple  # (name, schedule, fn(train, fixed, data, v, aux, loss) -> dict)
    final: Callable  # (train, fixed, data) -> metrics
    params: Callable  # (train, fixed, data) -> every parameter in the model's own form


def _reference(problem: Problem, cfg: TrainConfig) -> _Reference:
    return _Reference(
        start=jax.jit(lambda v, shared: per_cell.start(problem, cfg, v, shared)),
        step_loss=jax.jit(lambda tr, fixed, data, v, t: per_cell.step_loss(problem, cfg, tr, fixed, data, v, t)),
        full_loss=jax.jit(lambda tr, fixed, data: per_cell.full_loss(problem, tr, fixed, data)),
        update=jax.jit(lambda g, s, tr, lr: per_cell.update(problem, cfg, g, s, tr, lr)),
        recorders=tuple((name, steps, jax.jit(fn)) for name, steps, fn in per_cell.recorders(problem, cfg)),
        final=jax.jit(lambda tr, fixed, data: per_cell.final_metrics(problem, cfg, tr, fixed, data)),
        params=jax.jit(lambda tr, fixed, data: plain_params(problem, tr, fixed, data)),
    )


def train_reference(problem: Problem, cfg: TrainConfig, v: dict, shared=None, cache_key=None) -> dict:
    """One cell, one step at a time, in a Python loop: the path the vectorised one is checked
    against. ``v``: dict of per-cell scalars. Returns the dict of :func:`train_bucket` without
    the cell axis. ``cache_key``: as for :func:`train_bucket` (cells of one shape then share
    their compiled functions)."""
    ref = kept_program(_reference, problem, cfg, cache_key)
    v = {k: jnp.asarray(x) for k, x in v.items()}
    data, train, fixed, opt_state = ref.start(v, shared)
    out: dict[str, Any] = {name: {} for name, _, _ in ref.recorders}

    def record(name, fn, tr, step=None):
        loss, (aux, _) = step if step is not None else ref.full_loss(tr, fixed, data)
        for p, x in fn(tr, fixed, data, v, aux, loss).items():
            out[name].setdefault(p, []).append(np.asarray(x, np.float64))

    status, stop_step = CAP, cfg.max_steps
    for t in range(cfg.max_steps + 1):
        step, grads = ref.step_loss(train, fixed, data, v, t)
        loss = step[0]
        full = None if cfg.batch_size else step  # full batch: the step's forward pass is at θ_t
        for name, steps, fn in ref.recorders:
            if t in steps:
                record(name, fn, train, full)
        if not np.isfinite(loss):
            status, stop_step = DIVERGED, t
            break
        if t % cfg.stop_every == 0 or t == cfg.max_steps:
            if (full or ref.full_loss(train, fixed, data))[1][1] < cfg.loss_threshold:
                status, stop_step = CONVERGED, t
                break
        if t == cfg.max_steps:
            break
        train, opt_state = ref.update(grads, opt_state, train, v["lr"])
    metrics = jax.tree.map(np.asarray, ref.final(train, fixed, data))
    metrics.update(status=np.int32(status), stop_step=np.int32(stop_step))
    for name, steps, fn in ref.recorders:  # slots after the stop hold the probes of θ_stop
        for s in steps:
            if s > stop_step:
                record(name, fn, train)
    res = {"metrics": metrics} | {name: {p: np.asarray(x) for p, x in r.items()} for name, r in out.items()}
    if cfg.save_params:
        res["params"] = jax.tree.map(np.asarray, ref.params(train, fixed, data))
    return res
