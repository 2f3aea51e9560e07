"""FLOP counts: one sample of each model, and one training run (the analytic model behind the reported FLOP/s)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from attnlab import train as T
from attnlab.errors import AttnlabError
from attnlab.problem import split

# ---------------------------------------------------------------- FLOP count: one sample of each model
# Contractions only, 2 FLOPs per multiply-add (an (m×k)·(k×n) product costs 2mkn). Element-wise work
# (softmax, ReLU, scalings, the loss) is left out. Backward: each contraction again per operand that
# needs a gradient (the inputs X are data: no input gradient; fixed parameters get none).


@dataclass(frozen=True)
class Shape:
    """The static shape of one jiang2024 cell (the FLOP count depends on nothing else)."""

    M: int
    d: int
    d_h: int
    d_v: int
    train_w_O: bool = False

    @classmethod
    def of(cls, cell: dict) -> Shape:
        if cell.get("model.name") != "jiang2024":
            raise AttnlabError(
                f"bench: the FLOP count and the baseline know model 'jiang2024', got {cell.get('model.name')!r}"
            )
        return cls(
            int(cell["data.M"]),
            int(cell["data.d"]),
            int(cell["model.d_h"]),
            int(cell["model.d_v"]),
            bool(cell.get("model.train_w_O", False)),
        )

    @property
    def trained_params(self) -> int:
        return self.d * (2 * self.d_h + self.d_v) + (self.d_v if self.train_w_O else 0)


def flops_per_sample(s: Shape) -> dict[str, int]:
    """jiang2024, one sample (O(M²) element-wise work: < 0.1 % at paper scale).

    forward      Q = X W_Q, K = X W_K: 2·M·d·d_h each;  X W_V: 2·M·d·d_v;  S = Q Kᵀ: 2·M²·d_h;
                 v = (X W_V) w_O: 2·M·d_v;  f = ā·v: 2·M
    backward     W_Q, W_K, W_V; Q and K in S; X W_V (and w_O if trained) in v; ā and v in f
    """
    M, d, d_h, d_v = s.M, s.d, s.d_h, s.d_v
    proj = 2 * M * d * (2 * d_h + d_v)
    fwd = proj + 2 * M * M * d_h + 2 * M * d_v + 2 * M
    bwd = proj + 2 * (2 * M * M * d_h) + (2 if s.train_w_O else 1) * 2 * M * d_v + 2 * (2 * M)
    return {"forward": fwd, "backward": bwd}


def flops_update(s: Shape) -> int:
    """Plain gradient descent θ ← θ − lr·g: 2 FLOPs per trained parameter."""
    return 2 * s.trained_params


def flops_jiang2024(hp) -> dict[str, int]:
    s = Shape(hp.M, hp.d, hp.d_h, hp.d_v, hp.train_w_O)
    return flops_per_sample(s) | {"update": flops_update(s)}


def flops_jiang2024_dual(hp, n_tokens: int) -> dict[str, int]:
    """jiang2024 in its dual form (:mod:`attnlab.train` ``Dual``: W = W₀ + Xᵀ A over the n_tokens =
    N·M training tokens, P = X W = P₀ + G A): every contraction with d of the plain count becomes one
    with n_tokens (G A in place of X W, Gᵀ ∂L/∂P in place of Xᵀ ∂L/∂P), and the update runs over A
    (n_tokens × width). The final test pass is counted in this form too (it runs in the plain one,
    once: a slight undercount)."""
    s = Shape(hp.M, n_tokens, hp.d_h, hp.d_v, hp.train_w_O)
    return flops_per_sample(s) | {"update": flops_update(s)}


def flops_li2023(hp) -> dict[str, int]:
    """li2023 shallow ViT, one sample of L tokens (m_b, m_a: query/key and value widths).

    forward      W_Q x, W_K x: 2·L·d·m_b each;  W_V x: 2·L·d·m_a;  logits q kᵀ: 2·L²·m_b;
                 H = A V: 2·L²·m_a;  W_O h_l: 2·L·m_a·m;  aᵀ ReLU(·): 2·L·m;  mean over l: 2·L
    backward     W_Q, W_K, W_V; q and k in the logits; A and V in H; H and W_O; ReLU(·) in the
                 readout (a is fixed); the per-token outputs in the mean
    """
    L, d, m, m_a, m_b = hp.L, hp.d, hp.m, hp.m_a, hp.m_b
    proj = 2 * L * d * (2 * m_b + m_a)
    fwd = proj + 2 * L * L * m_b + 2 * L * L * m_a + 2 * L * m_a * m + 2 * L * m + 2 * L
    bwd = proj + 2 * (2 * L * L * m_b) + 2 * (2 * L * L * m_a) + 2 * (2 * L * m_a * m) + 2 * L * m + 2 * L
    return {"forward": fwd, "backward": bwd, "update": 2 * (2 * m_b * d + m_a * d + m * m_a)}


def flops_wu2023(hp) -> dict[str, int]:
    """wu2023 encoder (one head, untied, no W_F), one sample of d_s tokens.

    forward      X W_Qᵀ, X W_Kᵀ, X W_Vᵀ: 2·d_s·d·d_m each;  S = Q Kᵀ: 2·d_s²·d_m;  A = φ V: 2·d_s²·d_m;
                 mean pooling h: 2·d_s·d_m;  f = w_Oᵀ h: 2·d_m
    backward     W_Q, W_K, W_V; Q and K in S; φ and V in A; ReLU(A) in h; w_O and h in f
    """
    d_s, d, d_m = hp.d_s, hp.d, hp.d_m
    proj = 3 * 2 * d_s * d * d_m
    fwd = proj + 2 * (2 * d_s * d_s * d_m) + 2 * d_s * d_m + 2 * d_m
    bwd = proj + 2 * (2 * d_s * d_s * d_m) + 2 * (2 * d_s * d_s * d_m) + 2 * d_s * d_m + 2 * (2 * d_m)
    return {"forward": fwd, "backward": bwd, "update": 2 * (3 * d_m * d + d_m)}


# ---------------------------------------------------------------- FLOP count: one training run


@dataclass(frozen=True)
class Loop:
    """What a cell's training loop computes besides the model: set sizes, mini-batch size b (0:
    full batch), the stop schedule, the engine's probe steps, and whether the paper's loop
    evaluates the test set at every step (else once, at the stop)."""

    N: int
    n_test: int
    max_steps: int
    batch: int = 0
    stop_every: int = 1
    stop_on: str = "loss"
    log_steps: tuple[int, ...] = ()
    test_every_step: bool = False

    @classmethod
    def of(cls, cell: dict, test_every_step: bool = False) -> Loop:
        r = split(cell, "train")
        log_every = int(r.get("log_every", 0))
        logs = T.log_schedule(int(r["max_steps"]), every=log_every, dense_until=int(r.get("log_dense_until", 0)))
        return cls(
            int(cell["data.N"]),
            int(cell["data.n_test"]),
            int(r["max_steps"]),
            int(r.get("batch_size", 0)),
            int(r.get("stop_every", 1)),
            r.get("stop_on", "loss"),
            logs if log_every else (),
            test_every_step,
        )

    def rows(self, t: int, n_pad: int | None = None) -> int:
        """Samples in the batch of step t (the engine's order: :func:`attnlab.train.step.batch`); with
        ``n_pad`` the rows the engine computes (a padded batch is b rows, a full batch n_pad)."""
        if not self.batch:
            return n_pad or self.N
        if n_pad is not None:
            return self.batch
        j = t % -(-self.N // self.batch)
        return min(self.batch, self.N - j * self.batch)

    def judged(self, t: int) -> bool:
        return t % self.stop_every == 0 or t >= self.max_steps


def loop_passes(loop: Loop, stop: int, protocol: str = "attnlab", n_pad: int | None = None) -> dict[str, int]:
    """Samples through forward+backward, samples through a forward alone, and updates, of a run
    that stopped at ``stop`` (t = 0 … stop; the update count is ``stop``).

    attnlab  forward+backward of the step's batch at every t (the stop rule reads that loss); with
             mini-batches, a forward of the training set at each judged or probed step; finally a
             forward of the training and the test set. ``n_pad``: the rows computed (padding)
    paper    the serial loop (:func:`serial_cell`): a forward of the step's batch at every t, its
             backward at t < stop; with mini-batches, a forward of the training set at each judged
             step (the full-batch loop judges its own step's output); the test set at every step
             or once at the stop
    """
    N_full = n_pad or loop.N
    steps = range(stop + 1)
    if protocol == "attnlab":
        fb = sum(loop.rows(t, n_pad) for t in steps)
        logs = set(loop.log_steps)
        extra = sum(1 for t in steps if loop.judged(t) or t in logs) * N_full if loop.batch else 0
        return {"forward_backward": fb, "forward": extra + N_full + loop.n_test, "updates": stop}
    if protocol == "paper":
        fb = sum(loop.rows(t) for t in range(stop))
        extra = sum(1 for t in steps if loop.judged(t)) * loop.N if loop.batch else 0
        test = (stop + 1) * loop.n_test if loop.test_every_step else loop.n_test
        return {"forward_backward": fb, "forward": loop.rows(stop) + extra + test, "updates": stop}
    raise ValueError(f"protocol must be 'attnlab' or 'paper', got {protocol!r}")


def cell_flops(per: dict[str, int], loop: Loop, stop: int, protocol: str = "attnlab", n_pad: int | None = None) -> int:
    """FLOPs of one run: ``per`` is a model's per-sample count (forward, backward, update)."""
    p = loop_passes(loop, stop, protocol, n_pad)
    return (
        p["forward_backward"] * (per["forward"] + per["backward"])
        + p["forward"] * per["forward"]
        + p["updates"] * per["update"]
    )


# ---------------------------------------------------------------- random numbers: what a run must draw


def random_numbers(cell: dict, stop: int, tags: tuple[str, ...] = ()) -> int:
    """The random numbers one run of ``cell`` draws under its protocol: one per element of its
    training and test inputs and of its initial parameters (the synthetic data models draw every
    element: Gaussian noise on every coordinate; labels and pattern ids are left out), plus one
    per sample drawn into a mini-batch (a permutation per epoch) over ``stop`` steps."""
    shapes = _draw_shapes(*_signature(cell, tags))
    loop = Loop.of(cell)
    return shapes + (stop * loop.batch if loop.batch else 0)


def _signature(cell: dict, tags: tuple[str, ...]) -> tuple:
    return tuple(sorted((k, v) for k, v in cell.items() if k not in ("seed", "block", "rep"))), tuple(tags)


@functools.lru_cache(maxsize=256)
def _draw_shapes(items: tuple, tags: tuple[str, ...]) -> int:
    import jax
    import numpy as np

    from attnlab.engine.grid import cell_parts

    comp, static, pads, v = cell_parts(dict(items) | {"seed": 0, "block": 0, "rep": 0}, tags)
    problem = comp.problem(static, pads)
    data = jax.eval_shape(lambda v: problem.make_data(v["key"], v, comp.shared(static)), v)
    params = jax.eval_shape(lambda v: problem.init(v["key"], v), v)
    inputs = [data[k] for k in ("X", "X_test") if k in data]
    leaves = [x for tree in (inputs, params) for x in jax.tree_util.tree_leaves(tree)]
    return int(sum(np.prod(x.shape) for x in leaves if np.issubdtype(x.dtype, np.floating)))
