"""One cell's functions, shared by every path: the objective (plain and dual form), the batch sampler,
the optimiser step, the final metrics and the probe recorders."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from attnlab.models.nn import masked_mean
from attnlab.train.types import OPTIMIZERS, REDUCTIONS, Params, Problem, TrainConfig, stream

# ---------------------------------------------------------------- one cell


def vapply(problem: Problem, params: Params, X):
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
        f, aux = vapply(problem, {**train, **fixed}, X)
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
    """Every parameter in the model's own form: W = W_0 + Xᵀ A for the dual's projected ones;
    the cell's inputs (``problem.inputs``) left out."""
    if problem.dual is None:
        return problem.parameters({**train, **fixed})
    Xf, dd = _flat_tokens(problem, data["X"]), data["dual"]
    W = {n: dd["W0"][n] + Xf.T @ train[n] for n in problem.dual.projected}
    return {**train, **fixed, **W}


def full_loss(problem: Problem, train, fixed, data):
    if problem.dual is not None:
        return _dual_objective(problem, fixed, data)(*_dual_split(problem, train, data))
    return _objective(problem, fixed, data["X"], data["y"], data["mask"])(train)


def surely_above(problem: Problem, cfg: TrainConfig, train, fixed, data):
    """True if the stop quantity J of the training set (the mean of ``stop_fn``, else of the loss)
    is certainly not below ``loss_threshold``, read from as few samples as that takes: the
    training set in blocks of the batch size until the partial sum S of per-sample values
    reaches 2·threshold·N. Every loss and stop quantity is ≥ 0 per sample, so S never exceeds
    N·J, and the factor 2 outweighs any rounding between this pass and the full one: a cell
    this finds above cannot stop at this step, and the full pass (the stop rule's own
    arithmetic) is only needed where it does not. False means "not shown", not "below"."""
    mask = data["mask"]
    n_pad = mask.shape[0]
    b = min(cfg.batch_size, n_pad)
    bound = 2.0 * cfg.loss_threshold * jnp.maximum(jnp.sum(mask), 1)
    per_sample = problem.loss.fn if problem.stop_fn is None else problem.stop_fn

    def block(i):
        start = jnp.minimum(i * b, n_pad - b)  # the last block ends at n_pad; rows seen before are left out
        take = lambda x: jax.lax.dynamic_slice_in_dim(x, start, b, axis=0)
        keep = take(mask) & (start + jnp.arange(b) >= i * b)
        f, _ = vapply(problem, {**train, **fixed}, jax.tree.map(take, data["X"]))
        return jnp.sum(jnp.where(keep, per_sample(f, take(data["y"])), 0))

    n_blocks = -(-n_pad // b)
    S0 = jnp.zeros((), jax.eval_shape(block, 0).dtype)
    _, S = jax.lax.while_loop(
        lambda c: (c[0] < n_blocks) & (c[1] < bound), lambda c: (c[0] + 1, c[1] + block(c[0])), (0, S0)
    )
    return S >= bound


def batch(cfg: TrainConfig, data, v, t):
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


def step_loss(problem: Problem, cfg: TrainConfig, train, fixed, data, v, t):
    """(loss of the step's batch, per-sample aux of that batch), gradient. In the dual form the
    gradient of a projected W is ∂L/∂P_W: the step of its coefficients A. The loss is always
    the mean over the batch's samples; under the sum reduction (``v["reduction"]``) the step follows the gradient
    of the sum Σ_i ℓ_i = n·mean (n the batch's real samples), so the recorded losses stay
    comparable across reductions and only the step changes."""
    if problem.dual is not None:
        P, rest = _dual_split(problem, train, data)
        value, (gP, g) = jax.value_and_grad(_dual_objective(problem, fixed, data), argnums=(0, 1), has_aux=True)(
            P, rest
        )
        return value, _reduced({**g, **gP}, data["mask"], v)
    if cfg.batch_size:
        X, y, mask = batch(cfg, data, v, t)
    else:
        X, y, mask = data["X"], data["y"], data["mask"]
    value, grads = jax.value_and_grad(_objective(problem, fixed, X, y, mask), has_aux=True)(train)
    return value, _reduced(grads, mask, v)


def _reduced(grads, mask, v):
    """∇ of the step's objective: ∇mean, or ∇sum = n·∇mean. ``v["reduction"]``: the cell's
    index in REDUCTIONS (a per-cell input, so both reductions share a program; absent: mean)."""
    if "reduction" not in v:
        return grads
    n = jnp.sum(mask).astype(jax.tree.leaves(grads)[0].dtype)
    factor = jnp.where(v["reduction"] == REDUCTIONS.index("sum"), n, jnp.ones_like(n))  # × 1 is exact
    return jax.tree.map(lambda g: factor * g, grads)


def optimizer(problem: Problem, cfg: TrainConfig, lr, train):
    """The cell's optimiser; each parameter group g steps with lr·lr_mult[g]."""
    mult = dict(problem.lr_mult)
    labels = {k: problem.groups.get(k, k) for k in train}
    if not any(mult.get(g, 1.0) != 1.0 for g in labels.values()):
        return OPTIMIZERS[cfg.optimizer](lr, cfg)
    opts = {g: OPTIMIZERS[cfg.optimizer](lr * mult.get(g, 1.0), cfg) for g in set(labels.values())}
    return optax.multi_transform(opts, labels)


def start(problem: Problem, cfg: TrainConfig, v: dict, shared):
    data = problem.make_data(v["key"], v, shared)
    train, fixed = _split(problem, problem.init(stream(v["key"], "init"), v))
    if problem.dual is not None:
        if cfg.batch_size or cfg.optimizer not in ("gd", "momentum"):
            raise ValueError("the dual form needs full-batch gd or momentum (a linear update)")
        data, train = _to_dual(problem, data, train)
    opt_state = optimizer(problem, cfg, v["lr"], train).init(train)
    return data, train, fixed, opt_state


def update(problem: Problem, cfg: TrainConfig, grads, opt_state, train, lr):
    updates, opt_state = optimizer(problem, cfg, lr, train).update(grads, opt_state, train)
    return optax.apply_updates(train, updates), opt_state


def final_metrics(problem: Problem, cfg: TrainConfig, train, fixed, data):
    """Loss and the loss's metrics on the training set (masked) and the test set, at θ."""
    p = plain_params(problem, train, fixed, data) | {k: fixed[k] for k in problem.inputs}
    out = {}
    for split, X, y, mask in (
        ("train", data["X"], data["y"], data["mask"]),
        ("test", data["X_test"], data["y_test"], None),
    ):
        f, _ = vapply(problem, p, X)
        out[f"{split}_loss"] = masked_mean(problem.loss.fn(f, y), mask)
        for name, x in problem.loss.metrics(f, y).items():
            out[f"{split}_{name}"] = masked_mean(x, mask)
    return out


def recorders(problem: Problem, cfg: TrainConfig):
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
