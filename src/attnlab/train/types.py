"""What the trainer is given and returns: the plug-in (:class:`Problem`, its :class:`Dual` form, the
losses), the run's configuration (:class:`TrainConfig`, log schedules), the stop statuses and the
random streams."""

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
    inputs            -> names of fixed entries of params that are the cell's inputs to ``apply``
                         (a model's batched fields, but a choice one value fills over the
                         bucket: a constant), not parameters: probes and saved parameters
                         leave them out

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
    inputs: tuple[str, ...] = ()

    def parameters(self, params: Params) -> Params:
        """The model's parameters among ``params``: the cell's inputs left out."""
        return {k: p for k, p in params.items() if k not in self.inputs}

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
    xla_options: tuple[tuple[str, Any], ...] = ()  # XLA compiler options of the programs (Recipe.compile)

    def __post_init__(self):
        if self.max_steps < 0:
            raise ValueError(f"max_steps must be >= 0, got {self.max_steps}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {self.optimizer!r}")
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
