"""Losses, optimisers and the trainer: a vectorised bucket trainer and a plain reference.

A :class:`Problem` is the model/data/loss plug-in; everything in it acts on *one* cell. The
trainer knows nothing about any particular paper.

Vectorised path (:func:`train_bucket`): a bucket of cells is one compiled program built from
batched (``vmap``-ed) per-cell functions, in one of two strategies:

    vmap        jit( while_loop( vmap(step_one) ) ), in segments, compacting the batch to the
                cells still running (accelerators: fills the device)
    sequential  jit( lax.map( cell -> while_loop(step) ) ), each cell to its own stop step
                (CPU: a vmapped step costs as much per cell as a single one, so this avoids
                waiting for stragglers and padding)

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


def log_schedule(
    max_steps: int, n: int | None = None, every: int | None = None, dense_until: int = 0
) -> tuple[int, ...]:
    """Steps at which probes are recorded: every ``every`` steps (and every step before
    ``dense_until``), or ``n`` log-spaced steps; always includes 0 and ``max_steps``."""
    if every:
        s = set(range(0, max_steps + 1, every)) | set(range(min(dense_until, max_steps + 1)))
    else:
        s = set(np.unique(np.round(np.geomspace(1, max_steps + 1, n or 50) - 1).astype(int)).tolist())
    return tuple(sorted(s | {0, max_steps}))


# ---------------------------------------------------------------- one cell


def forward(problem: Problem, params: Params, X):
    """f(X_i) for every sample."""
    return jax.vmap(lambda x: problem.apply(params, x)[0])(X)


def masked_mean(values, mask=None):
    """(1/N) Σ_{i: mask_i} values_i: the mean over the real (unpadded) samples."""
    if mask is None:
        return values.mean()
    return jnp.sum(jnp.where(mask, values, 0.0)) / jnp.sum(mask)


def mean_loss(problem: Problem, params: Params, X, y, mask=None):
    return masked_mean(problem.loss(forward(problem, params, X), y), mask)


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
    f, f_test = forward(problem, p, data["X"]), forward(problem, p, data["X_test"])
    wrong = lambda f, y: (jnp.sign(f) != y).astype(f.dtype)
    return {
        "train_loss": masked_mean(problem.loss(f, data["y"]), data["mask"]),
        "train_error": masked_mean(wrong(f, data["y"]), data["mask"]),
        "test_loss": masked_mean(problem.loss(f_test, data["y_test"])),
        "test_error": masked_mean(wrong(f_test, data["y_test"])),
    }


def _probe(problem: Problem, train, fixed, data, v):
    return problem.probes({**train, **fixed}, data, v) if problem.probes else {}


# ---------------------------------------------------------------- vectorised path


def _where_cells(done, old, new):
    return jax.tree.map(lambda o, n: jnp.where(done.reshape((-1,) + (1,) * (n.ndim - 1)), o, n), old, new)


def _take(tree, idx):
    return jax.tree.map(lambda x: x[idx], tree)


@dataclass(frozen=True)
class _Programs:
    begin: Callable  # v -> (carry, fixed, data)
    advance: Callable  # (carry, fixed, data, v, t_end) -> carry
    finish: Callable  # (cells, fixed, data, v, k) -> (metrics, traces)
    sequential: Callable  # v -> (metrics, traces): every cell's whole loop, one cell after another
    n_log: int


def _programs(problem: Problem, cfg: TrainConfig) -> _Programs:
    log_steps = [s for s in cfg.log_steps if s <= cfg.max_steps]
    n_log = len(log_steps)
    sched = jnp.asarray(log_steps or [-1], dtype=jnp.int32)
    start = jax.vmap(lambda v: _start(problem, cfg, v))
    loss_and_grad = jax.vmap(lambda t, f, d: _loss_and_grad(problem, t, f, d))
    update = jax.vmap(lambda g, s, t, lr: _update(cfg, g, s, t, lr))
    probe = jax.vmap(lambda t, f, d, v: _probe(problem, t, f, d, v))
    final = jax.vmap(lambda t, f, d: _final_metrics(problem, t, f, d))

    def advance(c, fixed, data, v, t_end):
        """Steps t … t_end − 1 (or until every cell is done) of the per-cell loop."""

        def cond(c):
            return (c["t"] < t_end) & ~jnp.all(c["cells"]["done"])

        def body(c):
            t, k, cell = c["t"], c["k"], c["cells"]
            loss, grads = loss_and_grad(cell["train"], fixed, data)
            finite = jnp.isfinite(loss)
            hit = loss < cfg.loss_threshold
            new = ~cell["done"] & (hit | ~finite | (t >= cfg.max_steps))
            status = jnp.where(new, jnp.where(~finite, DIVERGED, jnp.where(hit, CONVERGED, CAP)), cell["status"])
            stop_step = jnp.where(new, t, cell["stop_step"])
            done = cell["done"] | new
            traces = cell["traces"]
            if n_log:

                def record(args):
                    traces, k = args
                    vals = probe(cell["train"], fixed, data, v) | {"train_loss": loss}
                    # a cell that stopped earlier keeps θ_stop: its probes stay constant
                    return {n: traces[n].at[:, k].set(vals[n].astype(traces[n].dtype)) for n in traces}, k + 1

                due = (k < n_log) & (sched[jnp.minimum(k, n_log - 1)] == t)
                traces, k = jax.lax.cond(due, record, lambda a: a, (traces, k))
            new_train, new_opt = update(grads, cell["opt_state"], cell["train"], v["lr"])
            cell = dict(
                done=done, status=status, stop_step=stop_step, traces=traces,
                train=_where_cells(done, cell["train"], new_train),
                opt_state=_where_cells(done, cell["opt_state"], new_opt),
            )  # fmt: skip
            return dict(t=t + 1, k=k, cells=cell)

        return jax.lax.while_loop(cond, body, c)

    def begin(v):
        data, train, fixed, opt_state = start(v)
        B = v["lr"].shape[0]
        traces = {}
        if n_log:
            names = [*jax.eval_shape(probe, train, fixed, data, v), "train_loss"]
            traces = {n: jnp.full((B, n_log), jnp.nan, jax.tree.leaves(train)[0].dtype) for n in names}
        cells = dict(
            train=train, opt_state=opt_state, done=jnp.zeros(B, bool), status=jnp.full(B, CAP, jnp.int32),
            stop_step=jnp.full(B, cfg.max_steps, jnp.int32), traces=traces,
        )  # fmt: skip
        return dict(t=jnp.int32(0), k=jnp.int32(0), cells=cells), fixed, data

    def finish(cell, fixed, data, v, k):
        """Metrics of θ (= θ_stop for a stopped cell); trace slots from k on get θ's probes."""
        out = final(cell["train"], fixed, data) | {"status": cell["status"], "stop_step": cell["stop_step"]}
        traces = cell["traces"]
        if n_log:
            vals = probe(cell["train"], fixed, data, v) | {"train_loss": out["train_loss"]}
            late = jnp.arange(n_log)[None, :] >= k
            traces = {n: jnp.where(late, vals[n].astype(traces[n].dtype)[:, None], traces[n]) for n in traces}
        return out, traces

    def one_cell(v1):  # the batched functions on a batch of one cell, run to its own stop
        v1 = jax.tree.map(lambda x: x[None], v1)
        c, fixed, data = begin(v1)
        c = advance(c, fixed, data, v1, cfg.max_steps + 1)
        return jax.tree.map(lambda x: x[0], finish(c["cells"], fixed, data, v1, c["k"]))

    sequential = jax.jit(lambda v: jax.lax.map(one_cell, v))
    return _Programs(jax.jit(begin), jax.jit(advance), jax.jit(finish), sequential, n_log)


_PROGRAMS: dict[tuple, _Programs] = {}


def default_strategy() -> str:
    """``sequential`` on CPU, ``vmap`` on accelerators (see :func:`train_bucket`)."""
    return "sequential" if jax.default_backend() == "cpu" else "vmap"


def train_bucket(
    problem: Problem,
    cfg: TrainConfig,
    v: dict,
    cache_key=None,
    strategy: str | None = None,
    segment: int = 50,
    shrink: int = 4,
    min_batch: int = 8,
):
    """Train a bucket of cells in one compiled program. ``v``: dict of per-cell arrays with a
    leading cell axis (must hold ``key`` (B, 2) uint32 and ``lr`` (B,)). Returns
    (metrics, traces) as numpy, each of shape (B,) / (B, n_log).

    ``strategy="vmap"``: all cells step together, ``jit(while_loop(vmap(step)))``, ``segment``
    steps at a time. Between segments the results of cells that stopped are read out, and once
    the running cells fill at most 1/``shrink`` of the batch, the batch is compacted to them
    (padded to a power of two, at least ``min_batch``, with copies of a running cell) so
    stragglers do not keep the whole batch busy.

    ``strategy="sequential"``: ``jit(lax.map(cell → its own loop))``: the same batched functions
    on one cell at a time, each running to its own stop step. On a CPU a vmapped step is no
    cheaper per cell than a single one (the work is compute-bound), so this avoids the
    straggler and padding cost; on an accelerator ``vmap`` fills the device.

    Either way each cell's arithmetic is the same; tests check both against the reference."""
    strategy = strategy or default_strategy()
    if strategy not in ("vmap", "sequential"):
        raise ValueError(f"strategy must be 'vmap' or 'sequential', got {strategy!r}")
    if shrink < 2 or segment < 1 or min_batch < 1:
        raise ValueError("need shrink >= 2, segment >= 1, min_batch >= 1")
    key = (cache_key, cfg)
    progs = _PROGRAMS.get(key) if cache_key is not None else None
    if progs is None:
        progs = _programs(problem, cfg)
        if cache_key is not None:
            _PROGRAMS[key] = progs
    v = {k: jnp.asarray(x) for k, x in v.items()}
    if strategy == "sequential":
        return jax.tree.map(np.asarray, progs.sequential(v))
    return _run_vmap(progs, cfg, v, segment, shrink, min_batch)


def _run_vmap(progs: _Programs, cfg: TrainConfig, v: dict, segment: int, shrink: int, min_batch: int):
    """The host loop of the ``vmap`` strategy: advance a segment, read out finished cells,
    compact the batch once few cells are still running."""
    B = int(v["lr"].shape[0])
    c, fixed, data = progs.begin(v)
    rows = np.arange(B)  # original index of each row of the current batch; −1 for padding
    out_m: dict[str, np.ndarray] = {}
    out_t: dict[str, np.ndarray] = {}
    reported = np.zeros(B, bool)  # per current row: its result has been read out
    t = 0
    while True:
        t = min(t + segment, cfg.max_steps + 1)
        c = progs.advance(c, fixed, data, v, t)
        done = np.asarray(c["cells"]["done"])
        fresh = done & ~reported & (rows >= 0)
        if fresh.any():
            m, tr = jax.tree.map(np.asarray, progs.finish(c["cells"], fixed, data, v, c["k"]))
            for name, x in m.items():
                out_m.setdefault(name, np.empty(B, x.dtype))[rows[fresh]] = x[fresh]
            for name, x in tr.items():
                out_t.setdefault(name, np.empty((B, progs.n_log), x.dtype))[rows[fresh]] = x[fresh]
            reported |= fresh
        running = np.flatnonzero(~done & (rows >= 0))
        if len(running) == 0:
            return out_m, out_t
        size = len(rows)
        if len(running) * shrink <= size and size > min_batch:
            new_size = max(min_batch, 1 << int(np.ceil(np.log2(len(running)))))
            idx = np.concatenate([running, np.full(new_size - len(running), running[0])])
            c = dict(t=c["t"], k=c["k"], cells=_take(c["cells"], idx))
            data, fixed, v = _take(data, idx), _take(fixed, idx), _take(v, idx)
            rows = np.concatenate([rows[running], np.full(new_size - len(running), -1)])
            reported = np.zeros(new_size, bool)


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
