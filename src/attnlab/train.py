"""Losses, optimisers, the batch sampler and the trainer: a vectorised bucket trainer and a
plain reference. It knows no paper: everything paper-specific comes in through a :class:`Problem`.

Vectorised path (:func:`train_bucket`): a bucket of cells is one compiled program built from
batched (``vmap``-ed) per-cell functions, in one of two strategies:

    vmap        jit( while_loop( vmap(step_one) ) ), in segments, compacting the batch to the
                cells still running (accelerators: fills the device)
    sequential  jit( lax.map( cell -> while_loop(step) ) ), each cell to its own stop step
                (CPU: a vmapped step costs as much per cell as a single one, so this avoids
                waiting for stragglers and padding)

The step counter lives outside the ``vmap`` so it is a plain scalar: the loop stops as soon as
every cell is done, and the probe and stop schedules are real branches. Per cell, at step t:

* the loss of the step's batch B_t and its gradient are computed, with the model's ``aux``
  (``has_aux``): full batch, B_t = the whole training set; mini-batch (``batch_size = b``),
  B_t = the t-th slice of b indices of a fresh per-cell permutation of the N training samples
  each epoch (the last batch of an epoch may be short);
* on the stop schedule (every ``stop_every`` steps, and at ``max_steps``) the stop quantity on
  the *full* training set, J(θ_t), is judged: the training loss L(θ_t) by default, or the mean
  of another per-sample quantity (``Problem.stop_fn``, e.g. the hinge loss, so "zero training
  hinge loss" can stop a run trained with the logistic loss). For full batch it comes from the
  step's own forward pass; a mini-batch value is too noisy, so it is computed on the full set:
  the cell stops at the first such t with J(θ_t) < ``loss_threshold`` (``converged``), or at
  t = ``max_steps`` (``cap``); a non-finite step loss stops it at once (``diverged``). From then
  on its parameters are frozen by a mask, so metrics taken after the loop are those of θ_stop;
* otherwise θ_{t+1} = θ_t + optimiser update, with the cell's own learning rate times the
  multiplier of each parameter's group (``optax.multi_transform``);
* at every t of a recorder's schedule its probes of θ_t are written into preallocated arrays:
  scalar probes (and the full training loss) on ``log_steps``, array-valued probes (kernels,
  spectra) on ``array_log_steps``; a slot after a cell's stop holds the probes of θ_stop.

Randomness: every stream is ``fold_in(cell key, STREAMS[name])`` with a fixed integer id, so
adding a stream later changes no existing one.

Dual (Gram) form, a fast path a model may declare (:class:`Dual`): parameters W that enter the
model only through token projections P_W = X W (X: the training tokens stacked, n·L × d) move,
under full-batch GD or momentum, only inside the row space of X, W_t = W_0 + Xᵀ A_t, so

    P_W(t) = X W_0 + G A_t,   G = X Xᵀ,   A_{t+1} = A_t + update(∂L/∂P_W)

with the optimiser's own (linear) update applied to A. A step then costs (nL)²·width instead of
nL·d·width, and W_t = W_0 + Xᵀ A_t is rebuilt only where a probe, the final metrics or the saved
parameters need it. Exact in exact arithmetic; tests check it against the plain path.

Reference path (:func:`train_reference`): the same per-cell functions, one cell at a time, in a
Python loop. Tests check that both paths agree.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from attnlab.errors import AttnlabError
from attnlab.models.nn import masked_mean

CONVERGED, CAP, DIVERGED = 0, 1, 2
STATUS_NAMES = {CONVERGED: "converged", CAP: "cap", DIVERGED: "diverged"}

# Fixed ids of the random streams derived from a cell's key: never renumber, only add.
STREAMS = {"data": 0, "test": 1, "init": 2, "batch": 3, "val": 4, "sparsify": 5}


def stream(key, name: str):
    """The cell's independent random stream ``name``: fold_in(key, STREAMS[name])."""
    return jax.random.fold_in(key, STREAMS[name])


Params = dict[str, jax.Array]


# ---------------------------------------------------------------- losses


@dataclass(frozen=True)
class Loss:
    """A per-sample loss ℓ(f, y) and the per-sample metrics that mean something under it."""

    fn: Callable[[jax.Array, jax.Array], jax.Array]
    metrics: Callable[[jax.Array, jax.Array], dict[str, jax.Array]]


def _sign_error(f, y):
    return {"error": (jnp.sign(f) != y).astype(f.dtype)}


LOSSES: dict[str, Loss] = {
    # ℓ = log(1 + exp(−y f)), stable
    "logistic": Loss(lambda f, y: jax.nn.softplus(-y * f), _sign_error),
    # ℓ = max(0, 1 − y f)
    "hinge": Loss(lambda f, y: jnp.maximum(0.0, 1.0 - y * f), _sign_error),
    # ℓ = ½ (f − y)²: a regression loss, so no sign error
    "squared": Loss(lambda f, y: 0.5 * (f - y) ** 2, lambda f, y: {}),
}


# ---------------------------------------------------------------- the plug-in


@dataclass(frozen=True)
class Dual:
    """A model's dual form (see the module docstring): ``projected`` are the parameters W used
    only as P_W = tokens @ W; ``tokens(x)`` -> the (L, d) tokens of one sample;
    ``apply(params, P, x)`` -> (f, aux) for one sample, where ``P[name]`` = its (L, width)
    projection and ``params`` holds the other parameters."""

    projected: tuple[str, ...]
    tokens: Callable[[Any], jax.Array]
    apply: Callable[[Params, dict, Any], tuple[jax.Array, Any]]


@dataclass(frozen=True)
class Problem:
    """Everything the trainer needs about one cell (data + model + loss + probes).

    make_data(key, v, shared) -> dict with X (a per-sample pytree with leading axis n_pad),
                        y (n_pad,), mask (n_pad,) bool, X_test, y_test (and anything probes use);
                        ``shared`` is the bucket's shared arrays (or None), held once per bucket
    init(key, v)      -> params (a dict of arrays)
    apply(params, x)  -> (f, aux) for ONE sample x (a pytree: tokens, token mask, metadata)
    loss              -> a :class:`Loss` (per-sample loss and metrics)
    trainable         -> names of the trained parameters (the others stay fixed)
    groups            -> parameter name -> its learning-rate group (default: its own name)
    lr_mult           -> group -> multiplier of the cell's lr
    probes(params, data, v, aux) -> dict of scalars, on ``log_steps``; ``aux`` is the
                         per-sample aux of the training set at θ_t (never recomputed)
    array_probes(params, data, v, aux) -> dict of arrays, on ``array_log_steps``
    stop_fn(f, y)     -> the per-sample quantity whose training mean the stop rule judges
                         (None: the loss)
    dual              -> a :class:`Dual` form to train in (full-batch gd or momentum only), or None

    ``v`` is the cell's dict of per-cell values (the batched inputs, with its ``key``).
    """

    make_data: Callable[[jax.Array, dict, Any], dict]
    init: Callable[[jax.Array, dict], Params]
    apply: Callable[[Params, Any], tuple[jax.Array, Any]]
    loss: Loss
    trainable: tuple[str, ...]
    groups: dict[str, str] = field(default_factory=dict)
    lr_mult: tuple[tuple[str, float], ...] = ()
    probes: Callable[[Params, dict, dict, Any], dict] | None = None
    array_probes: Callable[[Params, dict, dict, Any], dict] | None = None
    stop_fn: Callable[[jax.Array, jax.Array], jax.Array] | None = None
    dual: Dual | None = None

    def __post_init__(self):
        if self.dual is not None and not set(self.dual.projected) <= set(self.trainable):
            raise ValueError(f"dual: projected {self.dual.projected} must be trained parameters {self.trainable}")


def _check_steps(name: str, steps: tuple[int, ...], max_steps: int) -> None:
    s = list(steps)
    if s != sorted(set(s)):
        raise ValueError(f"{name} must be sorted and unique, got {s[:8]}{'…' if len(s) > 8 else ''}")
    if s and (s[0] < 0 or s[-1] > max_steps):
        raise ValueError(f"{name} must lie in [0, max_steps = {max_steps}], got {s[0]} … {s[-1]}")


@dataclass(frozen=True)
class TrainConfig:
    max_steps: int = 1000
    loss_threshold: float = -float("inf")  # stop at the first judged step with L(θ_t) < this
    optimizer: str = "gd"  # gd | momentum | adam
    momentum: float = 0.9
    batch_size: int = 0  # 0: full batch
    stop_every: int = 1  # the stop rule is judged at t ≡ 0 (mod stop_every) and at max_steps
    log_steps: tuple[int, ...] = ()
    array_log_steps: tuple[int, ...] = ()
    save_params: bool = False
    reduction: str = "mean"  # the objective over a step's samples: mean (1/n) Σ ℓ_i or sum Σ ℓ_i

    def __post_init__(self):
        if self.max_steps < 0:
            raise ValueError(f"max_steps must be >= 0, got {self.max_steps}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {self.reduction!r}")
        if self.batch_size < 0 or self.stop_every < 1:
            raise ValueError(f"need batch_size >= 0 and stop_every >= 1, got {self.batch_size}, {self.stop_every}")
        _check_steps("log_steps", self.log_steps, self.max_steps)
        _check_steps("array_log_steps", self.array_log_steps, self.max_steps)


REDUCTIONS = ("mean", "sum")
OPTIMIZERS: dict[str, Callable[..., optax.GradientTransformation]] = {
    "gd": lambda lr, cfg: optax.sgd(lr),  # plain gradient descent, no momentum
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


def _vapply(problem: Problem, params: Params, X):
    """(f(x_i), aux_i) for every sample of a per-sample pytree X."""
    return jax.vmap(lambda x: problem.apply(params, x))(X)


def _split(problem: Problem, params: Params):
    train = {k: v for k, v in params.items() if k in problem.trainable}
    fixed = {k: v for k, v in params.items() if k not in problem.trainable}
    return train, fixed


def _objective(problem: Problem, fixed, X, y, mask):
    """θ_train -> (mean loss over the masked samples, (per-sample aux, stop quantity J)): J is
    the mean of ``stop_fn`` from the same forward pass (the loss itself when there is none)."""

    def L(train):
        f, aux = _vapply(problem, {**train, **fixed}, X)
        loss, judged = _judged(problem, f, y, mask)
        return loss, (aux, judged)

    return L


def _judged(problem: Problem, f, y, mask):
    loss = masked_mean(problem.loss.fn(f, y), mask)
    return loss, (loss if problem.stop_fn is None else masked_mean(problem.stop_fn(f, y), mask))


def _flat_tokens(problem: Problem, X):
    """The training tokens of every sample stacked: (n·L, d)."""
    Xt = jax.vmap(problem.dual.tokens)(X)
    return Xt.reshape(-1, Xt.shape[-1])


def _to_dual(problem: Problem, data, train):
    """Dual state of a cell at θ_0: A = 0 for each projected W; G = X Xᵀ, P_0 = X W_0 and W_0
    go into ``data["dual"]`` (per-cell constants)."""
    Xf = _flat_tokens(problem, data["X"])
    proj = problem.dual.projected
    consts = {"G": Xf @ Xf.T, "P0": {n: Xf @ train[n] for n in proj}, "W0": {n: train[n] for n in proj}}
    A = {n: jnp.zeros_like(consts["P0"][n]) for n in proj}
    return {**data, "dual": consts}, {**{k: x for k, x in train.items() if k not in proj}, **A}


def _dual_objective(problem: Problem, fixed, data):
    """(P, rest) -> (mean training loss, (aux, J)) in the dual form."""
    X, y, mask = data["X"], data["y"], data["mask"]
    n = y.shape[0]

    def L(P, rest):
        Pi = {k: p.reshape(n, -1, p.shape[-1]) for k, p in P.items()}
        f, aux = jax.vmap(lambda x, p: problem.dual.apply({**rest, **fixed}, p, x))(X, Pi)
        loss, judged = _judged(problem, f, y, mask)
        return loss, (aux, judged)

    return L


def _dual_split(problem: Problem, train, data):
    """(P_t = P_0 + G A_t, the other trained parameters)."""
    dd = data["dual"]
    P = {n: dd["P0"][n] + dd["G"] @ train[n] for n in problem.dual.projected}
    return P, {k: x for k, x in train.items() if k not in problem.dual.projected}


def plain_params(problem: Problem, train, fixed, data) -> Params:
    """Every parameter in the model's own form: W = W_0 + Xᵀ A for the dual's projected ones."""
    if problem.dual is None:
        return {**train, **fixed}
    Xf, dd = _flat_tokens(problem, data["X"]), data["dual"]
    W = {n: dd["W0"][n] + Xf.T @ train[n] for n in problem.dual.projected}
    return {**train, **fixed, **W}


def _full_loss(problem: Problem, train, fixed, data):
    if problem.dual is not None:
        return _dual_objective(problem, fixed, data)(*_dual_split(problem, train, data))
    return _objective(problem, fixed, data["X"], data["y"], data["mask"])(train)


def _batch(cfg: TrainConfig, data, v, t):
    """The training batch of step t: (X_B, y_B, mask_B). Epoch e = ⌊t / n_b⌋ with
    n_b = ⌈N / b⌉ batches; its order is a permutation of the N real samples drawn from
    fold_in(batch stream, e); batch j = t mod n_b takes positions j·b … j·b + b − 1 (the last
    batch of an epoch is short: the positions ≥ N are masked out)."""
    mask = data["mask"]
    n_pad = mask.shape[0]
    b = min(cfg.batch_size, n_pad)  # a batch never holds more rows than the padded set: the same samples, no empty rows
    N = jnp.sum(mask).astype(jnp.int32)
    n_b = (N + b - 1) // b
    epoch, j = t // n_b, t % n_b
    u = jax.random.uniform(jax.random.fold_in(stream(v["key"], "batch"), epoch), (n_pad,))
    perm = jnp.argsort(jnp.where(mask, u, 2.0))  # the N real samples first, in random order
    pos = j * b + jnp.arange(b)
    idx = jnp.take(jnp.concatenate([perm, jnp.zeros(b, perm.dtype)]), pos)
    take = lambda x: jnp.take(x, idx, axis=0)
    return jax.tree.map(take, data["X"]), take(data["y"]), pos < N


def _step_loss(problem: Problem, cfg: TrainConfig, train, fixed, data, v, t):
    """(loss of the step's batch, per-sample aux of that batch), gradient. In the dual form the
    gradient of a projected W is ∂L/∂P_W: the step of its coefficients A. The loss is always
    the mean over the batch's samples; under ``reduction = "sum"`` the step follows the gradient
    of the sum Σ_i ℓ_i = n·mean (n the batch's real samples), so the recorded losses stay
    comparable across reductions and only the step changes."""
    if problem.dual is not None:
        P, rest = _dual_split(problem, train, data)
        value, (gP, g) = jax.value_and_grad(_dual_objective(problem, fixed, data), argnums=(0, 1), has_aux=True)(
            P, rest
        )
        return value, _reduced(cfg, {**g, **gP}, data["mask"])
    if cfg.batch_size:
        X, y, mask = _batch(cfg, data, v, t)
    else:
        X, y, mask = data["X"], data["y"], data["mask"]
    value, grads = jax.value_and_grad(_objective(problem, fixed, X, y, mask), has_aux=True)(train)
    return value, _reduced(cfg, grads, mask)


def _reduced(cfg: TrainConfig, grads, mask):
    """∇ of the step's objective: ∇mean, or ∇sum = n·∇mean."""
    if cfg.reduction == "mean":
        return grads
    n = jnp.sum(mask).astype(jax.tree.leaves(grads)[0].dtype)
    return jax.tree.map(lambda g: n * g, grads)


def _optimizer(problem: Problem, cfg: TrainConfig, lr, train):
    """The cell's optimiser; each parameter group g steps with lr·lr_mult[g]."""
    mult = dict(problem.lr_mult)
    labels = {k: problem.groups.get(k, k) for k in train}
    if not any(mult.get(g, 1.0) != 1.0 for g in labels.values()):
        return OPTIMIZERS[cfg.optimizer](lr, cfg)
    opts = {g: OPTIMIZERS[cfg.optimizer](lr * mult.get(g, 1.0), cfg) for g in set(labels.values())}
    return optax.multi_transform(opts, labels)


def _start(problem: Problem, cfg: TrainConfig, v: dict, shared):
    data = problem.make_data(v["key"], v, shared)
    train, fixed = _split(problem, problem.init(stream(v["key"], "init"), v))
    if problem.dual is not None:
        if cfg.batch_size or cfg.optimizer not in ("gd", "momentum"):
            raise ValueError("the dual form needs full-batch gd or momentum (a linear update)")
        data, train = _to_dual(problem, data, train)
    opt_state = _optimizer(problem, cfg, v["lr"], train).init(train)
    return data, train, fixed, opt_state


def _update(problem: Problem, cfg: TrainConfig, grads, opt_state, train, lr):
    updates, opt_state = _optimizer(problem, cfg, lr, train).update(grads, opt_state, train)
    return optax.apply_updates(train, updates), opt_state


def _final_metrics(problem: Problem, cfg: TrainConfig, train, fixed, data):
    """Loss and the loss's metrics on the training set (masked) and the test set, at θ."""
    p = plain_params(problem, train, fixed, data)
    out = {}
    for split, X, y, mask in (
        ("train", data["X"], data["y"], data["mask"]),
        ("test", data["X_test"], data["y_test"], None),
    ):
        f, _ = _vapply(problem, p, X)
        out[f"{split}_loss"] = masked_mean(problem.loss.fn(f, y), mask)
        for name, x in problem.loss.metrics(f, y).items():
            out[f"{split}_{name}"] = masked_mean(x, mask)
    return out


def _recorders(problem: Problem, cfg: TrainConfig):
    """(name, schedule, fn(train, fixed, data, v, aux, full_loss) -> dict) for each kind of probe."""
    out = []
    if cfg.log_steps:

        def scalars(train, fixed, data, v, aux, loss):
            vals = problem.probes(plain_params(problem, train, fixed, data), data, v, aux) if problem.probes else {}
            return vals | {"train_loss": loss}

        out.append(("traces", cfg.log_steps, scalars))
    if cfg.array_log_steps and problem.array_probes:
        arrays = lambda train, fixed, data, v, aux, loss: problem.array_probes(
            plain_params(problem, train, fixed, data), data, v, aux
        )
        out.append(("arrays", cfg.array_log_steps, arrays))
    return out


# ---------------------------------------------------------------- vectorised path


def _where_cells(done, old, new):
    return jax.tree.map(lambda o, n: jnp.where(done.reshape((-1,) + (1,) * (n.ndim - 1)), o, n), old, new)


def _take(tree, idx):
    return jax.tree.map(lambda x: x[idx], tree)


@dataclass(frozen=True)
class _Programs:
    begin: Callable  # (v, shared) -> (carry, fixed, data)
    advance: Callable  # (carry, fixed, data, v, t_end) -> carry
    finish: Callable  # (cells, fixed, data, v, k) -> result dict
    sequential: Callable  # (v, shared) -> result dict: every cell's whole loop, one after another


def _programs(problem: Problem, cfg: TrainConfig) -> _Programs:
    recs = _recorders(problem, cfg)
    scheds = {name: jnp.asarray(steps, dtype=jnp.int32) for name, steps, _ in recs}
    start = jax.vmap(lambda v, shared: _start(problem, cfg, v, shared), in_axes=(0, None))
    step_loss = jax.vmap(lambda tr, f, d, v, t: _step_loss(problem, cfg, tr, f, d, v, t), in_axes=(0, 0, 0, 0, None))
    full_loss = jax.vmap(lambda tr, f, d: _full_loss(problem, tr, f, d))
    update = jax.vmap(lambda g, s, tr, lr: _update(problem, cfg, g, s, tr, lr))
    rec_fns = {name: jax.vmap(fn) for name, _, fn in recs}
    final = jax.vmap(lambda tr, f, d: _final_metrics(problem, cfg, tr, f, d))

    def advance(c, fixed, data, v, t_end):
        """Steps t … t_end − 1 (or until every cell is done) of the per-cell loop."""

        def skipped(tr):  # zeros shaped like full_loss's result: the unused branch of a cond
            shapes = jax.eval_shape(full_loss, tr, fixed, data)
            return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

        def cond(c):
            return (c["t"] < t_end) & ~jnp.all(c["cells"]["done"])

        def body(c):
            t, k, cell = c["t"], c["k"], c["cells"]
            (loss, (aux, judged)), grads = step_loss(cell["train"], fixed, data, v, t)
            judge = (t % cfg.stop_every == 0) | (t >= cfg.max_steps)
            due = {n: (k[n] < len(s)) & (s[jnp.minimum(k[n], len(s) - 1)] == t) for n, s in scheds.items()}
            if cfg.batch_size:  # the full training loss (and aux), only when a rule or probe needs it
                need = judge
                for d in due.values():
                    need = need | d
                full, (full_aux, full_judged) = jax.lax.cond(
                    need, lambda tr: full_loss(tr, fixed, data), skipped, cell["train"]
                )
            else:
                full, full_aux, full_judged = loss, aux, judged
            finite = jnp.isfinite(loss)
            hit = judge & (full_judged < cfg.loss_threshold)
            new = ~cell["done"] & (hit | ~finite | (t >= cfg.max_steps))
            status = jnp.where(new, jnp.where(~finite, DIVERGED, jnp.where(hit, CONVERGED, CAP)), cell["status"])
            stop_step = jnp.where(new, t, cell["stop_step"])
            done = cell["done"] | new
            rec = dict(cell["rec"])
            for name, fn in rec_fns.items():

                def record(args, name=name, fn=fn):
                    out, kn = args
                    # a cell that stopped earlier keeps θ_stop: its probes stay constant
                    vals = fn(cell["train"], fixed, data, v, full_aux, full)
                    return {p: out[p].at[:, kn].set(vals[p].astype(out[p].dtype)) for p in out}, kn + 1

                rec[name], kn = jax.lax.cond(due[name], record, lambda a: a, (rec[name], k[name]))
                k = {**k, name: kn}
            new_train, new_opt = update(grads, cell["opt_state"], cell["train"], v["lr"])
            cell = dict(
                done=done,
                status=status,
                stop_step=stop_step,
                rec=rec,
                train=_where_cells(done, cell["train"], new_train),
                opt_state=_where_cells(done, cell["opt_state"], new_opt),
            )
            return dict(t=t + 1, k=k, cells=cell)

        return jax.lax.while_loop(cond, body, c)

    def begin(v, shared):
        data, train, fixed, opt_state = start(v, shared)
        B = v["lr"].shape[0]
        dtype = jax.tree.leaves(train)[0].dtype
        rec = {}
        for name, steps, _ in recs:
            loss_shape = jax.ShapeDtypeStruct((B,), dtype)
            aux = jax.eval_shape(lambda tr: full_loss(tr, fixed, data)[1][0], train)
            shapes = jax.eval_shape(rec_fns[name], train, fixed, data, v, aux, loss_shape)
            rec[name] = {p: jnp.full((B, len(steps), *s.shape[1:]), jnp.nan, dtype) for p, s in shapes.items()}
        cells = dict(
            train=train,
            opt_state=opt_state,
            done=jnp.zeros(B, bool),
            status=jnp.full(B, CAP, jnp.int32),
            stop_step=jnp.full(B, cfg.max_steps, jnp.int32),
            rec=rec,
        )
        k = {name: jnp.int32(0) for name, _, _ in recs}
        return dict(t=jnp.int32(0), k=k, cells=cells), fixed, data

    def finish(cell, fixed, data, v, k):
        """Metrics of θ (= θ_stop for a stopped cell); record slots from k on get θ's probes."""
        metrics = final(cell["train"], fixed, data) | {"status": cell["status"], "stop_step": cell["stop_step"]}
        out = {"metrics": metrics}
        if recs:
            loss, (aux, _) = full_loss(cell["train"], fixed, data)
        for name, steps, _ in recs:
            vals = rec_fns[name](cell["train"], fixed, data, v, aux, loss)
            late = jnp.arange(len(steps)) >= k[name]
            r = cell["rec"][name]
            out[name] = {
                p: jnp.where(late.reshape((1, -1) + (1,) * (r[p].ndim - 2)), vals[p].astype(r[p].dtype)[:, None], r[p])
                for p in r
            }
        if cfg.save_params:
            out["params"] = jax.vmap(lambda tr, f, d: plain_params(problem, tr, f, d))(cell["train"], fixed, data)
        return out

    def one_cell(v1, shared):  # the batched functions on a batch of one cell, run to its own stop
        v1 = jax.tree.map(lambda x: x[None], v1)
        c, fixed, data = begin(v1, shared)
        c = advance(c, fixed, data, v1, cfg.max_steps + 1)
        return jax.tree.map(lambda x: x[0], finish(c["cells"], fixed, data, v1, c["k"]))

    sequential = jax.jit(lambda v, shared: jax.lax.map(lambda v1: one_cell(v1, shared), v))
    return _Programs(jax.jit(begin), jax.jit(advance), jax.jit(finish), sequential)


# Compiled programs by (bucket key, recipe), most recently used last. Bounded: every XLA:CPU
# executable holds ~10 memory mappings, and a process that kept all of them (a grid of thousands
# of bucket shapes, or the test suite) crashed inside XLA at the kernel's 65530-mapping limit.
_PROGRAMS: OrderedDict[tuple, _Programs] = OrderedDict()
PROGRAMS_KEPT = 32
PROGRAMS_BUILT = {"count": 0}  # programs built in this process (the Ray workers report it)


def _kept(build: Callable, problem: Problem, cfg: TrainConfig, cache_key):
    """``build(problem, cfg)``, kept under (``build``, ``cache_key``, ``cfg``) when a key is
    given: the caller promises that the key determines the problem (a bucket's static fields
    and pads), so a later call with the same key reuses the compiled programs."""
    if cache_key is None:
        PROGRAMS_BUILT["count"] += 1
        return build(problem, cfg)
    key = (build.__name__, cache_key, cfg)
    progs = _PROGRAMS.get(key)
    if progs is None:
        progs = _PROGRAMS[key] = build(problem, cfg)
        PROGRAMS_BUILT["count"] += 1
        while len(_PROGRAMS) > PROGRAMS_KEPT:
            _PROGRAMS.popitem(last=False)  # its executables are freed with it
    else:
        _PROGRAMS.move_to_end(key)
    return progs


def compile_cache_dir() -> str | None:
    """Where compiled programs are kept across processes: ``$ATTNLAB_COMPILE_CACHE``, else
    ``<user cache>/attnlab/jax``; None when that variable is ``off`` (or ``0``). JAX's cache key
    does not include ``$XLA_FLAGS``, so each set of flags gets a subdirectory of its own: an
    executable compiled under other flags is never loaded."""
    import hashlib
    import os

    where = os.environ.get("ATTNLAB_COMPILE_CACHE", "")
    if where.lower() in ("off", "0", "false", "none"):
        return None
    if not where:
        import platformdirs

        where = os.path.join(platformdirs.user_cache_dir("attnlab"), "jax")
    flags = " ".join(sorted(os.environ.get("XLA_FLAGS", "").split()))
    if flags:
        where = os.path.join(where, "xla-flags-" + hashlib.sha256(flags.encode()).hexdigest()[:16])
    return where


def enable_compile_cache() -> str | None:
    """Keep compiled programs on disk across processes (JAX's persistent compilation cache) in
    :func:`compile_cache_dir`, so a rerun or a resumed run of the same buckets skips compilation:
    the fixed cost of small grids. Programs that compiled in under
    ``$ATTNLAB_COMPILE_CACHE_MIN_SECONDS`` (default 0.5 s) are not kept: loading one costs about
    as much. Returns the directory used, or None."""
    import os

    where = compile_cache_dir()
    if where is not None:
        jax.config.update("jax_compilation_cache_dir", where)
        min_s = os.environ.get("ATTNLAB_COMPILE_CACHE_MIN_SECONDS", "0.5")
        try:
            min_s = float(min_s)
        except ValueError:
            raise AttnlabError(f"ATTNLAB_COMPILE_CACHE_MIN_SECONDS: not a number: {min_s!r}") from None
        jax.config.update("jax_persistent_cache_min_compile_time_secs", min_s)
    return where


def default_strategy() -> str:
    """``sequential`` on CPU, ``vmap`` on accelerators (see :func:`train_bucket`)."""
    return "sequential" if jax.default_backend() == "cpu" else "vmap"


def train_bucket(
    problem: Problem,
    cfg: TrainConfig,
    v: dict,
    shared=None,
    cache_key=None,
    strategy: str | None = None,
    segment: int = 50,
    shrink: int = 4,
    min_batch: int = 8,
) -> dict:
    """Train a bucket of cells in one compiled program. ``v``: dict of per-cell arrays with a
    leading cell axis (must hold ``key`` (B, 2) uint32 and ``lr`` (B,)); ``shared``: arrays held
    once for the whole bucket (not batched). Returns a dict of numpy arrays with a leading cell
    axis: ``metrics`` (name -> (B,)), and where configured ``traces`` (name -> (B, n_log)),
    ``arrays`` (name -> (B, n_array_log, ...)) and ``params``.

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
    progs = _kept(_programs, problem, cfg, cache_key)
    v = {k: jnp.asarray(x) for k, x in v.items()}
    if strategy == "sequential":
        return jax.tree.map(np.asarray, progs.sequential(v, shared))
    return _run_vmap(progs, cfg, v, shared, segment, shrink, min_batch)


def _run_vmap(progs: _Programs, cfg: TrainConfig, v: dict, shared, segment: int, shrink: int, min_batch: int):
    """The host loop of the ``vmap`` strategy: advance a segment, read out finished cells,
    compact the batch once few cells are still running."""
    B = int(v["lr"].shape[0])
    c, fixed, data = progs.begin(v, shared)
    rows = np.arange(B)  # original index of each row of the current batch; −1 for padding
    out = None
    reported = np.zeros(B, bool)  # per current row: its result has been read out
    t = 0
    while True:
        t = min(t + segment, cfg.max_steps + 1)
        c = progs.advance(c, fixed, data, v, t)
        done = np.asarray(c["cells"]["done"])
        fresh = done & ~reported & (rows >= 0)
        if fresh.any():
            # only the cells that just stopped are evaluated (the test set once per cell), as a
            # batch padded to a power of two so that finish compiles for few sizes
            idx = np.flatnonzero(fresh)
            n = len(idx)
            pad = np.concatenate([idx, np.full((1 << int(np.ceil(np.log2(n)))) - n, idx[0])])
            sub = lambda tree: _take(tree, pad)  # noqa: B023
            res = jax.tree.map(np.asarray, progs.finish(sub(c["cells"]), sub(fixed), sub(data), sub(v), c["k"]))
            if out is None:
                out = jax.tree.map(lambda x: np.empty((B, *x.shape[1:]), x.dtype), res)

            for o, x in zip(jax.tree.leaves(out), jax.tree.leaves(res), strict=True):
                o[rows[idx]] = x[:n]
            reported |= fresh
        running = np.flatnonzero(~done & (rows >= 0))
        if len(running) == 0:
            return out
        size = len(rows)
        if len(running) * shrink <= size and size > min_batch:
            new_size = max(min_batch, 1 << int(np.ceil(np.log2(len(running)))))
            idx = np.concatenate([running, np.full(new_size - len(running), running[0])])
            c = dict(t=c["t"], k=c["k"], cells=_take(c["cells"], idx))
            data, fixed, v = _take(data, idx), _take(fixed, idx), _take(v, idx)
            rows = np.concatenate([rows[running], np.full(new_size - len(running), -1)])
            reported = np.zeros(new_size, bool)


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
        start=jax.jit(lambda v, shared: _start(problem, cfg, v, shared)),
        step_loss=jax.jit(lambda tr, fixed, data, v, t: _step_loss(problem, cfg, tr, fixed, data, v, t)),
        full_loss=jax.jit(lambda tr, fixed, data: _full_loss(problem, tr, fixed, data)),
        update=jax.jit(lambda g, s, tr, lr: _update(problem, cfg, g, s, tr, lr)),
        recorders=tuple((name, steps, jax.jit(fn)) for name, steps, fn in _recorders(problem, cfg)),
        final=jax.jit(lambda tr, fixed, data: _final_metrics(problem, cfg, tr, fixed, data)),
        params=jax.jit(lambda tr, fixed, data: plain_params(problem, tr, fixed, data)),
    )


def train_reference(problem: Problem, cfg: TrainConfig, v: dict, shared=None, cache_key=None) -> dict:
    """One cell, one step at a time, in a Python loop: the path the vectorised one is checked
    against. ``v``: dict of per-cell scalars. Returns the dict of :func:`train_bucket` without
    the cell axis. ``cache_key``: as for :func:`train_bucket` (cells of one shape then share
    their compiled functions)."""
    ref = _kept(_reference, problem, cfg, cache_key)
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
