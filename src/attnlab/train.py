"""Losses, optimisers and the trainer: a vectorised bucket trainer and a plain reference.

A :class:`Problem` is the model/data/loss plug-in; everything in it acts on *one* cell. The
trainer knows nothing about any particular paper.

Vectorised path (:func:`train_bucket`): one compiled program per bucket,

    jit( while_loop( vmap(step_one) ) )

The step counter lives outside the ``vmap`` so it is a plain scalar: the loop stops as soon as
every cell is done, and the probe schedule is a real branch, not a per-cell select. Per cell:

* at step t the training loss L(θ_t) and its gradient are computed;
* a cell stops at the first t with L(θ_t) < ``loss_threshold`` (``converged``), at
  t = ``max_steps`` (``cap``), or at a non-finite loss (``diverged``); from then on its
  parameters are frozen by a mask, so metrics taken after the loop are those of θ_stop;
* otherwise θ_{t+1} = θ_t + optimiser update with the cell's own learning rate;
* at every t in ``log_steps`` the problem's probes of θ_t are written into preallocated
  arrays; a slot after a cell's stop holds the probes of θ_stop.

Reference path (:func:`train_reference`): the same per-cell functions, one cell at a time, in a
Python loop. Tests check that both paths agree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

CONVERGED, CAP, DIVERGED = 0, 1, 2
STATUS_NAMES = {CONVERGED: "converged", CAP: "cap", DIVERGED: "diverged"}

Params = dict[str, jax.Array]


@dataclass(frozen=True)
class Problem:
    """A model + data + loss, for one cell.

    make_data(key, v) -> dict with X (n_pad, ...), y (n_pad,), mask (n_pad,) bool,
                         X_test (n_test, ...), y_test (n_test,)
    init(key, v)      -> params (a dict of arrays)
    apply(params, X)  -> (f, aux) for ONE sample X
    loss(f, y)        -> per-sample loss
    trainable         -> names of the parameters that are trained (others stay fixed)
    probes(params, data, v) -> dict of scalars, recorded on the log schedule (optional)

    ``v`` is the cell's dict of per-cell values (the batched inputs).
    """

    make_data: Callable[[jax.Array, dict], dict]
    init: Callable[[jax.Array, dict], Params]
    apply: Callable[[Params, jax.Array], tuple[jax.Array, Any]]
    loss: Callable[[jax.Array, jax.Array], jax.Array]
    trainable: tuple[str, ...]
    probes: Callable[[Params, dict, dict], dict] | None = None


@dataclass(frozen=True)
class TrainConfig:
    max_steps: int = 1000
    loss_threshold: float = -float("inf")  # stop at the first step with L(θ_t) < this
    optimizer: str = "gd"  # gd | momentum | adam
    momentum: float = 0.9
    log_steps: tuple[int, ...] = field(default_factory=tuple)

    def __post_init__(self):
        if self.max_steps < 0:
            raise ValueError(f"max_steps must be >= 0, got {self.max_steps}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {self.optimizer!r}")


OPTIMIZERS: dict[str, Callable[..., optax.GradientTransformation]] = {
    "gd": lambda lr, cfg: optax.sgd(lr),  # full-batch gradient descent, no momentum
    "momentum": lambda lr, cfg: optax.sgd(lr, momentum=cfg.momentum),
    "adam": lambda lr, cfg: optax.adam(lr),
}


def log_schedule(max_steps: int, n: int | None = None, every: int | None = None) -> tuple[int, ...]:
    """Steps at which probes are recorded: every ``every`` steps, or ``n`` log-spaced steps;
    always includes 0 and ``max_steps``."""
    if every:
        s = set(range(0, max_steps + 1, every))
    else:
        s = set(np.unique(np.round(np.geomspace(1, max_steps + 1, n or 50) - 1).astype(int)).tolist())
    return tuple(sorted(s | {0, max_steps}))


# ---------------------------------------------------------------- one cell


def mean_loss(problem: Problem, params: Params, X, y, mask=None):
    """(1/N) Σ_{i: mask_i} ℓ(f(X_i), y_i) over the real (unpadded) samples."""
    f = jax.vmap(lambda x: problem.apply(params, x)[0])(X)
    ell = problem.loss(f, y)
    if mask is None:
        return ell.mean()
    return jnp.sum(jnp.where(mask, ell, 0.0)) / jnp.sum(mask)


def mean_error(problem: Problem, params: Params, X, y, mask=None):
    f = jax.vmap(lambda x: problem.apply(params, x)[0])(X)
    wrong = (jnp.sign(f) != y).astype(f.dtype)
    if mask is None:
        return wrong.mean()
    return jnp.sum(jnp.where(mask, wrong, 0.0)) / jnp.sum(mask)


def _split(problem: Problem, params: Params):
    train = {k: v for k, v in params.items() if k in problem.trainable}
    fixed = {k: v for k, v in params.items() if k not in problem.trainable}
    return train, fixed


def _loss_and_grad(problem: Problem, train, fixed, data):
    return jax.value_and_grad(lambda t: mean_loss(problem, {**t, **fixed}, data["X"], data["y"], data["mask"]))(train)


def _start(problem: Problem, cfg: TrainConfig, v: dict):
    k_data, k_init = jax.random.split(v["key"])
    data = problem.make_data(k_data, v)
    train, fixed = _split(problem, problem.init(k_init, v))
    opt_state = OPTIMIZERS[cfg.optimizer](v["lr"], cfg).init(train)
    return data, train, fixed, opt_state


def _update(cfg: TrainConfig, grads, opt_state, train, lr):
    updates, opt_state = OPTIMIZERS[cfg.optimizer](lr, cfg).update(grads, opt_state, train)
    return optax.apply_updates(train, updates), opt_state


def _final_metrics(problem: Problem, train, fixed, data):
    p = {**train, **fixed}
    return {
        "train_loss": mean_loss(problem, p, data["X"], data["y"], data["mask"]),
        "train_error": mean_error(problem, p, data["X"], data["y"], data["mask"]),
        "test_loss": mean_loss(problem, p, data["X_test"], data["y_test"]),
        "test_error": mean_error(problem, p, data["X_test"], data["y_test"]),
    }


def _probe(problem: Problem, train, fixed, data, v):
    return problem.probes({**train, **fixed}, data, v) if problem.probes else {}


# ---------------------------------------------------------------- vectorised path


def _where_cells(done, old, new):
    return jax.tree.map(lambda o, n: jnp.where(done.reshape((-1,) + (1,) * (n.ndim - 1)), o, n), old, new)


def _bucket_program(problem: Problem, cfg: TrainConfig):
    sched = jnp.asarray([s for s in cfg.log_steps if s <= cfg.max_steps] or [-1], dtype=jnp.int32)
    n_log = int(sched.shape[0]) if cfg.log_steps else 0
    start = jax.vmap(lambda v: _start(problem, cfg, v))
    loss_and_grad = jax.vmap(lambda t, f, d: _loss_and_grad(problem, t, f, d))
    update = jax.vmap(lambda g, s, t, lr: _update(cfg, g, s, t, lr))
    probe = jax.vmap(lambda t, f, d, v: _probe(problem, t, f, d, v))
    final = jax.vmap(lambda t, f, d: _final_metrics(problem, t, f, d))

    def run(v):
        data, train, fixed, opt_state = start(v)
        B = v["lr"].shape[0]
        dtype = jax.tree.leaves(train)[0].dtype
        if n_log:
            shapes = jax.eval_shape(probe, train, fixed, data, v)
            traces = {k: jnp.full((B, n_log), jnp.nan, dtype) for k in shapes}
            traces["train_loss"] = jnp.full((B, n_log), jnp.nan, dtype)
        else:
            traces = {}
        carry = dict(
            t=jnp.int32(0), k=jnp.int32(0), train=train, opt_state=opt_state,
            done=jnp.zeros(B, bool), status=jnp.full(B, CAP, jnp.int32),
            stop_step=jnp.full(B, cfg.max_steps, jnp.int32), traces=traces,
        )  # fmt: skip

        def cond(c):
            return (c["t"] <= cfg.max_steps) & ~jnp.all(c["done"])

        def body(c):
            t = c["t"]
            loss, grads = loss_and_grad(c["train"], fixed, data)
            finite = jnp.isfinite(loss)
            hit = loss < cfg.loss_threshold
            new = ~c["done"] & (hit | ~finite | (t >= cfg.max_steps))
            status = jnp.where(new, jnp.where(~finite, DIVERGED, jnp.where(hit, CONVERGED, CAP)), c["status"])
            stop_step = jnp.where(new, t, c["stop_step"])
            done = c["done"] | new

            traces, k = c["traces"], c["k"]
            if n_log:

                def record(args):
                    traces, k = args
                    vals = probe(c["train"], fixed, data, v)
                    vals["train_loss"] = loss
                    # a cell that stopped earlier keeps θ_stop; its probes stay constant
                    return {n: traces[n].at[:, k].set(vals[n].astype(dtype)) for n in traces}, k + 1

                traces, k = jax.lax.cond(
                    (k < n_log) & (sched[jnp.minimum(k, n_log - 1)] == t), record, lambda a: a, (traces, k)
                )

            new_train, new_opt = update(grads, c["opt_state"], c["train"], v["lr"])
            return dict(
                t=t + 1, k=k, traces=traces, done=done, status=status, stop_step=stop_step,
                train=_where_cells(done, c["train"], new_train),
                opt_state=_where_cells(done, c["opt_state"], new_opt),
            )  # fmt: skip

        c = jax.lax.while_loop(cond, body, carry)
        out = final(c["train"], fixed, data)
        out.update(status=c["status"], stop_step=c["stop_step"])
        traces = c["traces"]
        if n_log:  # slots after the loop ended hold the probes of θ_stop
            vals = probe(c["train"], fixed, data, v)
            vals["train_loss"] = out["train_loss"]
            late = jnp.arange(n_log)[None, :] >= c["k"]
            traces = {n: jnp.where(late, vals[n].astype(dtype)[:, None], traces[n]) for n in traces}
        return out, traces

    return jax.jit(run)


_PROGRAMS: dict[tuple, Callable] = {}


def train_bucket(problem: Problem, cfg: TrainConfig, v: dict, cache_key=None):
    """Train a bucket of cells at once. ``v``: dict of per-cell arrays with a leading cell axis
    (must hold ``key`` (B, 2) uint32 and ``lr`` (B,)). Returns (metrics, traces) as numpy,
    each of shape (B,) / (B, n_log)."""
    if cache_key is not None:
        prog = _PROGRAMS.get((cache_key, cfg))
        if prog is None:
            prog = _PROGRAMS[(cache_key, cfg)] = _bucket_program(problem, cfg)
    else:
        prog = _bucket_program(problem, cfg)
    out, traces = prog({k: jnp.asarray(x) for k, x in v.items()})
    return jax.tree.map(np.asarray, out), jax.tree.map(np.asarray, traces)


# ---------------------------------------------------------------- reference path


def train_reference(problem: Problem, cfg: TrainConfig, v: dict):
    """One cell, one step at a time, in a Python loop: the path the vectorised one is checked
    against. ``v``: dict of per-cell scalars. Returns (metrics, traces) like
    :func:`train_bucket` without the cell axis."""
    v = {k: jnp.asarray(x) for k, x in v.items()}
    data, train, fixed, opt_state = jax.jit(lambda v: _start(problem, cfg, v))(v)
    lg = jax.jit(lambda t: _loss_and_grad(problem, t, fixed, data))
    upd = jax.jit(lambda g, s, t: _update(cfg, g, s, t, v["lr"]))
    probe = jax.jit(lambda t: _probe(problem, t, fixed, data, v))
    log_steps = [s for s in cfg.log_steps if s <= cfg.max_steps]
    traces: dict[str, list] = {}
    status, stop_step = CAP, cfg.max_steps
    for t in range(cfg.max_steps + 1):
        loss, grads = lg(train)
        if t in log_steps:
            vals = {**probe(train), "train_loss": loss}
            for n, x in vals.items():
                traces.setdefault(n, []).append(float(x))
        if not np.isfinite(loss):
            status, stop_step = DIVERGED, t
            break
        if loss < cfg.loss_threshold:
            status, stop_step = CONVERGED, t
            break
        if t == cfg.max_steps:
            break
        train, opt_state = upd(grads, opt_state, train)
    out = jax.tree.map(np.asarray, jax.jit(lambda t: _final_metrics(problem, t, fixed, data))(train))
    out.update(status=np.int32(status), stop_step=np.int32(stop_step))
    for s in log_steps:  # slots after the stop hold the probes of θ_stop
        if s > stop_step:
            for n, x in {**probe(train), "train_loss": out["train_loss"]}.items():
                traces.setdefault(n, []).append(float(x))
    return out, {n: np.asarray(x) for n, x in traces.items()}
