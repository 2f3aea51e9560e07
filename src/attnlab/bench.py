"""``attnlab bench``: the engine against a paper-style serial PyTorch baseline, same cells, same process.

    attnlab bench [--suite jiang2024|li2023|wu2023] [--cells 100] [--baseline-cells K] [--scale S] [--json FILE]

A suite (:class:`Suite`) is a declaration: its experiment, default scale, the baseline's PyTorch
model, the FLOP count of that model, the per-cell outcome compared and the experiment's success
level. Everything else (cell selection, timing, the serial loop, the report) is shared.

    jiang2024  jiang2024-fig1 at paper scale (M = 16, d = 1024, d_h = d_v = 512, full-batch GD lr
               0.1 to train loss < 0.01, cap 1000 steps); outcome: test loss at the stop, success < 0.2
    li2023     li2023-fig1 at cpu scale (the shallow ViT, L = 50, d = 100, m = 64, m_a = m_b = 32;
               logistic loss, SGD on mini-batches of 32, stop at zero training hinge loss judged
               every 10 steps, cap 1000); outcome: test error at the stop, success = 0
    wu2023     wu2023-width at cpu scale (the encoder, d_s = 8, d = 16, d_m = 1 … 64; ½·mean squared
               loss, full-batch GD for 800 epochs at the width-normalised step); outcome: final /
               initial training loss, success ≤ 10⁻³ (compared on a log scale)

Cells: a seeded subset spread over the experiment's grid (:func:`select_cells`). Grid cells only:
an experiment's lr-tuning stage (li2023-fig1) is not run, every cell trains at its own train.lr.

attnlab: the cells go through the engine twice, as ``attnlab reproduce`` trains them
(``sweep.executors.run_cells`` into a temporary store): the first run compiles (``whole``), the
second reuses the compiled programs (``steady``). Compilation alone is then timed ahead of time
(``jit(...).lower(...).compile()`` of every chunk's program, on fresh functions so nothing is
cached).

Baseline: one model at a time, in plain PyTorch as a paper's own script trains it
(:func:`serial_cell`): ``nn.Linear`` layers initialised by the same law as attnlab's model (not
the same draws), ``torch.optim.SGD``, the cell's loss, batch size, stop rule and cap; jiang2024
evaluates the test loss at every step (the released scripts do), the others the test set once at
the stop. Its data are attnlab's (the cell's own key), and so are its mini-batches (the order
:func:`attnlab.train._batch` draws, :func:`batch_order`): only the init differs, so outcomes agree
statistically, not bit for bit. Data and batch order are drawn outside its timer. PyTorch threads
(:class:`Baseline`): every core for jiang2024; for the small li2023 and wu2023 models the faster of
1 and every core on short runs (``--baseline-threads`` overrides). With ``--baseline-cells`` <
cells it runs on a seeded sub-subset and its time per cell is extrapolated (stated in the report).

Reported: the ratio of time per cell (baseline / attnlab; steady and whole), the agreement of
outcomes (mean |Δ|, cells on different sides of the success level), the achieved FLOP/s of an
analytic count (:func:`cell_flops`) against a large float32 GEMM measured in the same run, compile
time, peak RSS. PyTorch is optional (``make bench`` or ``pip install torch==2.13.0``); everything
but the baseline works without it.
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from attnlab import train as T
from attnlab.errors import AttnlabError
from attnlab.experiments.base import cell_parts, table_columns
from attnlab.parts import tokens
from attnlab.problem import KEY_ONLY, Composition, split
from attnlab.sweep import executors, grid
from attnlab.sweep.store import Store

LEVEL = 0.2  # the success level of jiang2024-fig1: test loss < 0.2
TORCH_VERSION = "2.13.0"
TORCH_MISSING = (
    "the serial baseline needs PyTorch, which is not installed: run `make bench` (installs the `bench` extra) or "
    f"`.venv/bin/pip install torch=={TORCH_VERSION}` (CPU wheel); or pass --baseline-cells 0 to time attnlab alone"
)


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
        """Samples in the batch of step t (the engine's order: :func:`attnlab.train._batch`); with
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


# ---------------------------------------------------------------- PyTorch models (torch is imported lazily)


@functools.cache
def _jiang2024_class(torch):
    nn = torch.nn

    class Transformer(nn.Module):
        """f(X) = w_Oᵀ(Σ_s ā_s W_Vᵀ x_s), ā = mean over queries of softmax((X W_Q)(X W_K)ᵀ):
        the layout of the released scripts (nn.Linear without bias, default init, W_Q, W_K,
        W_V divided by init_scale, w_O fixed)."""

        def __init__(self, d, d_h, d_v, init_scale, tau=1.0, train_w_O=False):
            super().__init__()
            self.W_Q = nn.Linear(d, d_h, bias=False)
            self.W_K = nn.Linear(d, d_h, bias=False)
            self.W_V = nn.Linear(d, d_v, bias=False)
            self.w_O = nn.Linear(d_v, 1, bias=False)
            self.tau = tau
            with torch.no_grad():
                for lin in (self.W_Q, self.W_K, self.W_V):
                    lin.weight.div_(init_scale)
            self.w_O.weight.requires_grad_(train_w_O)

        def forward(self, X):  # X: (n, M, d) -> f: (n,)
            Q, K, V = self.W_Q(X), self.W_K(X), self.W_V(X)  # (n, M, d_h), (n, M, d_h), (n, M, d_v)
            phi = torch.softmax(self.tau * Q @ K.transpose(1, 2), dim=-1)  # (n, M, M), row = query
            a_bar = phi.mean(dim=1)  # (n, M)
            return self.w_O((a_bar.unsqueeze(1) @ V).squeeze(1)).squeeze(-1)

    return Transformer


@functools.cache
def _li2023_class(torch):
    nn = torch.nn

    class ShallowViT(nn.Module):
        """F(X) = (1/L) Σ_l aᵀ ReLU(W_O Σ_s W_V x_s · softmax_s(x_sᵀ W_Kᵀ W_Q x_l)) (Li et al. 2023):
        nn.Linear layers without bias, W_Q, W_K, W_V, W_O trained, the readout a fixed with random
        signs. Init ``gaussian``: every weight N(0, 1/fan_in); ``near_identity``: W_Q, W_K =
        I + δG/√d, W_V = I + σG/√d, W_O ~ N(0, 1/m)."""

        def __init__(self, d, m, m_a, m_b, init="gaussian", sigma=0.1, delta=0.1, a_scale="sqrt"):
            super().__init__()
            self.W_Q = nn.Linear(d, m_b, bias=False)
            self.W_K = nn.Linear(d, m_b, bias=False)
            self.W_V = nn.Linear(d, m_a, bias=False)
            self.W_O = nn.Linear(m_a, m, bias=False)
            signs = torch.randint(0, 2, (m,)).float() * 2 - 1
            self.register_buffer("a", signs / (m**0.5 if a_scale == "sqrt" else m))
            with torch.no_grad():
                if init == "gaussian":
                    for lin in (self.W_Q, self.W_K, self.W_V, self.W_O):
                        nn.init.normal_(lin.weight, std=lin.in_features**-0.5)
                else:  # near_identity: m_a = m_b = d
                    for lin, err in ((self.W_Q, delta), (self.W_K, delta), (self.W_V, sigma)):
                        lin.weight.copy_(torch.eye(d) + err * torch.randn(d, d) / d**0.5)
                    nn.init.normal_(self.W_O.weight, std=m**-0.5)

        def forward(self, X):  # X: (n, L, d) -> F: (n,)
            q, k, v = self.W_Q(X), self.W_K(X), self.W_V(X)  # (n, L, m_b), (n, L, m_b), (n, L, m_a)
            A = torch.softmax(q @ k.transpose(1, 2), dim=-1)  # (n, L, L), row = query l
            return (torch.relu(self.W_O(A @ v)) @ self.a).mean(dim=1)

    return ShallowViT


@functools.cache
def _wu2023_class(torch):
    nn = torch.nn

    class Encoder(nn.Module):
        """f(X) = τ₁ w_Oᵀ (1/d_s) Σ_t ReLU(φ X W_Vᵀ)_t, φ = row softmax of τ₀ (X W_Qᵀ)(X W_Kᵀ)ᵀ, τ₀ = d_m^−α
        (Wu et al. 2023): nn.Linear layers without bias, all trained. Init ``lecun``/``he``:
        N(0, gain/fan_in); ``ntk``: N(0, 1) with 1/√d on the inputs and τ₁ = d_m^−1/2."""

        def __init__(self, d, d_m, alpha=0.5, init="lecun"):
            super().__init__()
            self.W_Q = nn.Linear(d, d_m, bias=False)
            self.W_K = nn.Linear(d, d_m, bias=False)
            self.W_V = nn.Linear(d, d_m, bias=False)
            self.w_O = nn.Linear(d_m, 1, bias=False)
            gain = 2.0 if init == "he" else 1.0
            with torch.no_grad():
                for lin in (self.W_Q, self.W_K, self.W_V, self.w_O):
                    nn.init.normal_(lin.weight, std=1.0 if init == "ntk" else (gain / lin.in_features) ** 0.5)
            self.tau0 = d_m**-alpha
            self.scale_in, self.tau1 = (d**-0.5, d_m**-0.5) if init == "ntk" else (1.0, 1.0)

        def forward(self, X):  # X: (n, d_s, d) -> f: (n,)
            Q, K, V = (self.scale_in * lin(X) for lin in (self.W_Q, self.W_K, self.W_V))  # (n, d_s, d_m) each
            phi = torch.softmax(self.tau0 * Q @ K.transpose(1, 2), dim=-1)  # (n, d_s, d_s), row = query
            h = torch.relu(phi @ V).mean(dim=1)  # (n, d_m)
            return self.tau1 * self.w_O(h).squeeze(-1)

    return Encoder


def _paper_model(torch):
    """The jiang2024 module class (kept for scripts that build it directly)."""
    return _jiang2024_class(torch)


# ---------------------------------------------------------------- suites


@dataclass(frozen=True)
class Outcome:
    """The per-cell result both sides report, and the experiment's success rule on it:
    success = value < level (``op`` "<") or value ≤ level ("<=")."""

    name: str  # report keys attnlab_<name>, baseline_<name>
    label: str
    op: str
    attnlab: Callable[[dict[str, np.ndarray]], np.ndarray]  # from the results table's columns
    baseline: Callable[[dict], float]  # from one serial run (:func:`serial_cell`)
    log: bool = False  # compare log10 values (a ratio spanning decades)
    floor: float | None = None  # values below it are not resolved: raised to it before comparing


def _loss_ratio(cols: dict[str, np.ndarray]) -> np.ndarray:
    initial = np.array([float(t[0]) for t in cols["trace_train_loss"]])
    return cols["train_loss"].astype(float) / initial


def _ratio(r: dict) -> float:
    return r["train_loss"] / r["initial_train_loss"] if r["initial_train_loss"] else float("nan")


@dataclass(frozen=True)
class Suite:
    """A benchmark suite: an experiment's grid, the baseline's PyTorch model and the outcome compared.

    ``module(torch, hp)`` builds the model with its init law from the attnlab Hparams of a cell;
    ``layout`` maps each attnlab parameter to the module's tensor (stored transposed or not), for
    the same-parameters check; ``flops(hp)`` is the per-sample count; ``requires`` the cell
    values the serial loop implements beyond the common ones (plain GD, float32)."""

    name: str
    experiment: str
    scale: str
    model: str
    module: Callable[[Any, Any], Any]
    layout: dict[str, tuple[str, bool]]
    flops: Callable[[Any], dict[str, int]]
    outcome: Outcome
    level: Callable[[Any], float]
    implementation: str
    requires: dict[str, tuple] = field(default_factory=dict)
    test_every_step: bool = False
    threads: str = "calibrate"  # the baseline's intra-op threads: "all" cores, or "calibrate" (see Baseline)
    row: Callable[[dict], dict] = lambda c: {}
    notes: tuple[str, ...] = ()
    sets: tuple[str, ...] = ()  # --set overrides of the experiment's spec at the suite's scale: its own grid
    fields: dict = field(default_factory=dict)  # values every cell of the suite takes

    def check(self, cell: dict, baseline: bool = True) -> None:
        """The cell is this suite's model (the FLOP count) and, with ``baseline``, a recipe the
        serial loop implements; else one clear error."""
        if cell.get("model.name") != self.model:
            raise AttnlabError(
                f"bench: the FLOP count and the baseline know model {self.model!r}, got {cell.get('model.name')!r}"
            )
        if not baseline:
            return
        want = {
            "train.optimizer": ("gd",),
            "train.dtype": ("float32",),
            "train.loss": tuple(LOSS_NAMES),
            "train.stop_on": tuple(STOP_NAMES),
        } | self.requires
        bad = {k: cell.get(k) for k, ok in want.items() if k in cell and cell[k] not in ok}
        bad |= {k: v for k, v in cell.items() if k.startswith("train.lr_mult.")}
        if bad:
            valid = ", ".join(f"{k} in {list(v)}" for k, v in want.items())
            raise AttnlabError(
                f"bench: the {self.name} serial baseline implements {valid} (no lr_mult); cell has {bad}"
            )


LOSS_NAMES = ("logistic", "hinge", "squared")
STOP_NAMES = ("loss", "hinge", "error")

SUITES: dict[str, Suite] = {
    "jiang2024": Suite(
        name="jiang2024",
        experiment="jiang2024-fig1",
        scale="paper",
        model="jiang2024",
        module=lambda torch, hp: _jiang2024_class(torch)(hp.d, hp.d_h, hp.d_v, hp.init_scale, hp.tau, hp.train_w_O),
        layout={
            "W_Q": ("W_Q.weight", True),
            "W_K": ("W_K.weight", True),
            "W_V": ("W_V.weight", True),
            "w_O": ("w_O.weight", False),
        },
        flops=flops_jiang2024,
        outcome=Outcome(
            "test_loss", "test loss", "<", lambda cols: cols["test_loss"].astype(float), lambda r: r["test_loss"]
        ),
        level=lambda spec: float(spec.level),
        implementation="PyTorch, one model at a time: nn.Linear (default init / init_scale), torch.optim.SGD, "
        "full batch, test loss at every step; data = attnlab's (same key), init draws differ",
        requires={
            "train.loss": ("logistic",),
            "train.batch_size": (0,),
            "train.stop_on": ("loss",),
            "train.stop_every": (1,),
        },
        test_every_step=True,
        row=lambda c: {"mu": c.get("data.mu"), "snr": _r(c["data.mu"] / (c["data.sigma_p"] * c["data.d"] ** 0.5), 4)},
    ),
    "li2023": Suite(
        name="li2023",
        experiment="li2023-fig1",
        scale="cpu",
        model="li2023-vit",
        module=lambda torch, hp: _li2023_class(torch)(
            hp.d, hp.m, hp.m_a, hp.m_b, hp.init, hp.sigma, hp.delta, hp.a_scale
        ),
        layout={
            "W_Q": ("W_Q.weight", False),
            "W_K": ("W_K.weight", False),
            "W_V": ("W_V.weight", False),
            "W_O": ("W_O.weight", False),
            "a": ("a", False),
        },
        flops=flops_li2023,
        outcome=Outcome(
            "test_error", "test error", "<=", lambda cols: cols["test_error"].astype(float), lambda r: r["test_error"]
        ),
        level=lambda spec: 0.0,
        implementation="PyTorch, one model at a time: nn.Linear layers drawn N(0, 1/fan_in) (attnlab's law), fixed "
        "±1/√m readout, torch.optim.SGD on mini-batches in attnlab's order, hinge loss of the "
        "training set judged every stop_every steps, test error once at the stop; data = attnlab's "
        "(same key), init draws differ",
        requires={"data.sparsify": ("none",)},
        row=lambda c: {"alpha_star": c.get("data.alpha_star")},
        notes=("li2023-fig1's lr-tuning stage is not run: every cell trains at its train.lr",),
    ),
    "wu2023": Suite(
        name="wu2023",
        experiment="wu2023-width",
        scale="cpu",
        model="wu2023",
        module=lambda torch, hp: _wu2023_class(torch)(hp.d, hp.d_m, hp.alpha, hp.init),
        layout={
            "W_Q": ("W_Q.weight", False),
            "W_K": ("W_K.weight", False),
            "W_V": ("W_V.weight", False),
            "w_O": ("w_O.weight", False),
        },
        flops=flops_wu2023,
        # ½(f − y)² in float32 with f, y ~ 1 stalls at ~10⁻¹⁴…10⁻¹² of the initial loss (f resolved to ~10⁻⁷):
        # below 10⁻¹⁰ two runs differ by rounding, not by training
        outcome=Outcome("loss_ratio", "final/initial train loss", "<=", _loss_ratio, _ratio, log=True, floor=1e-10),
        level=lambda spec: float(spec.target),
        implementation="PyTorch, one model at a time: nn.Linear layers drawn N(0, 1/fan_in) (LeCun, attnlab's law), "
        "torch.optim.SGD, full batch, the training loss logged every epoch; data = attnlab's (same "
        "key), init draws differ",
        requires={"model.heads": (1,), "model.tied": (False,), "model.ffn": (False,), "train.batch_size": (0,)},
        row=lambda c: {"d_m": c.get("model.d_m"), "alpha": c.get("model.alpha")},
        # the loss-target grid the suite has always timed (no kernel probes: the baseline records none)
        sets=("data.N=4,8,16,32,64", "data.d=16", "model.d_m=1,2,3,4,6,8,12,16,32,64", "train.max_steps=800", "reps=6"),
        fields={"train.probes": ""},
    ),
}


def get_suite(name: str) -> Suite:
    if name not in SUITES:
        raise AttnlabError(f"--suite: unknown {name!r}; valid: {', '.join(SUITES)}")
    return SUITES[name]


def model_hparams(cell: dict):
    """The attnlab Hparams of a cell's model (widths resolved as the engine resolves them)."""
    comp = Composition.of(cell)
    return comp.model.hparams(split(cell, "model"), comp.data.input_shape(split(cell, "data")))


# ---------------------------------------------------------------- cells


def grid_axes(cells: list[dict]) -> list[str]:
    """The fields that vary across ``cells``, except the key-only ones (seed, block, rep)."""
    out = []
    for f in sorted(cells[0]):
        if f in KEY_ONLY:
            continue
        if len({json.dumps(c.get(f), sort_keys=True) for c in cells}) > 1:
            out.append(f)
    return out


def select_cells(cells: list[dict], k: int, seed: int = 0) -> list[dict]:
    """A seeded subset of ``k`` cells spread over the grid: the cells are ordered by their grid
    coordinates (varying fields in name order; then block and rep), cut into k strata of
    consecutive cells of near-equal size, and one cell is drawn from each stratum. Every stratum is
    a contiguous block of the grid, so every value of the first axis gets ≈ k / its size cells,
    each spread along the others."""
    if k <= 0:
        return []
    axes = grid_axes(cells) + [f for f in KEY_ONLY if f in cells[0]]
    order = sorted(range(len(cells)), key=lambda i: tuple(cells[i].get(f) for f in axes))
    rng = np.random.default_rng(seed)
    strata = np.array_split(np.asarray(order), min(k, len(cells)))
    return [cells[int(rng.choice(s))] for s in strata]


def suite_cells(suite: str, scale: str | None = None) -> tuple[Any, Any, list[dict]]:
    """(experiment, spec, every cell of the grid) of a suite at ``scale`` (None: the suite's own)."""
    from attnlab.experiments import get

    s = get_suite(suite)
    exp = get(s.experiment)
    scale = scale or s.scale
    spec = exp.spec(scale, list(s.sets) if scale == s.scale else [])
    return exp, spec, [c | s.fields for c in exp.cells(spec)]


# ---------------------------------------------------------------- statistics


def agreement(
    a_val,
    b_val,
    level: float = LEVEL,
    a_stop=None,
    b_stop=None,
    op: str = "<",
    log: bool = False,
    floor: float | None = None,
) -> dict:
    """How far two implementations' outcomes on the same cells agree. Pairs with a non-finite
    value are counted and left out. Success = value ``op`` level; ``different_side``: cells that
    one side counts a success and the other not. With ``log`` the differences are of log10
    values (outcomes spanning decades); ``floor``: values below it are raised to it first (the
    outcome's resolution)."""
    if op not in ("<", "<="):
        raise ValueError(f"op must be '<' or '<=', got {op!r}")
    a, b = np.asarray(a_val, float), np.asarray(b_val, float)
    if floor is not None:
        a, b = np.maximum(a, floor), np.maximum(b, floor)  # NaN stays NaN
    ok = np.isfinite(a) & np.isfinite(b) & ((a > 0) & (b > 0) if log else True)
    a, b = a[ok], b[ok]
    wins = (lambda x: x < level) if op == "<" else (lambda x: x <= level)
    ta, tb = (np.log10(a), np.log10(b)) if log else (a, b)
    diff = np.abs(ta - tb)
    side = wins(a) != wins(b)
    out = {
        "cells": int(ok.sum()),
        "non_finite_pairs": int((~ok).sum()),
        "level": level,
        "success_rule": f"{op} {level:g}",
        "difference_of": "log10" if log else "value",
        "floor": floor,
        "mean_abs_diff": float(diff.mean()) if len(a) else None,
        "median_abs_diff": float(np.median(diff)) if len(a) else None,
        "max_abs_diff": float(diff.max()) if len(a) else None,
        "mean_diff_a_minus_b": float((ta - tb).mean()) if len(a) else None,
        "a_success": int(wins(a).sum()),
        "b_success": int(wins(b).sum()),
        "different_side": int(side.sum()),
        "different_side_share": float(side.mean()) if len(a) else None,
    }
    if op == "<":
        out["a_below_level"], out["b_below_level"] = out["a_success"], out["b_success"]
    if len(a) >= 2:  # is there a systematic difference? (paired: same cells, same data)
        from scipy import stats

        dm, se = float((ta - tb).mean()), float(np.std(ta - tb, ddof=1) / np.sqrt(len(a)))
        q = float(stats.t.ppf(0.975, len(a) - 1))
        out["mean_diff_ci95"] = [dm - q * se, dm + q * se] if se > 0 else [dm, dm]
        nz = (ta - tb) != 0
        out["wilcoxon_p"] = float(stats.wilcoxon(ta[nz], tb[nz]).pvalue) if nz.sum() >= 6 else None
    if a_stop is not None and b_stop is not None:
        sa, sb = np.asarray(a_stop, float)[ok], np.asarray(b_stop, float)[ok]
        out["same_stop_step"] = int((sa == sb).sum())
        out["mean_abs_stop_diff"] = float(np.abs(sa - sb).mean()) if len(sa) else None
    return out


def _rss_mb() -> float:
    """Peak resident set size of this process so far (ru_maxrss: KiB on Linux, bytes on macOS)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 2**20 if platform.system() == "Darwin" else r / 2**10


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def gemm_flops_jax(n: int = 2048, repeats: int = 10) -> dict:
    """FLOP/s of an n×n float32 matmul in JAX (jit, warmed up): best and median of ``repeats``."""
    ka, kb = jax.random.split(jax.random.PRNGKey(0))
    a = jax.random.normal(ka, (n, n), jnp.float32)
    b = jax.random.normal(kb, (n, n), jnp.float32)
    mm = jax.jit(jnp.matmul)
    mm(a, b).block_until_ready()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        mm(a, b).block_until_ready()
        times.append(time.perf_counter() - t0)
    flops = 2 * n**3
    return {"n": n, "best": flops / min(times), "median": flops / float(np.median(times))}


# ---------------------------------------------------------------- attnlab side


def _cols(store: Store, cells: list[dict]) -> dict[str, np.ndarray]:
    return table_columns(store.assemble([grid.cell_id(c) for c in cells], write=False))


def aot_compile(chunks: list[executors.Chunk], strategy: str | None = None) -> dict:
    """Seconds to lower and to compile the program of every distinct chunk shape, ahead of time,
    on fresh functions (nothing cached). The CPU strategy (``sequential``) is one program per
    chunk; the accelerator strategy (``vmap``) compiles its begin/advance/finish programs at the
    full batch (its compacted batches compile more, not counted)."""
    lower_s = compile_s = 0.0
    seen = set()
    strategy = strategy or T.default_strategy()
    for ch in chunks:
        sig = (ch.static, ch.pads, len(ch.cells))
        if sig in seen:
            continue
        seen.add(sig)
        static, pads = dict(ch.static), dict(ch.pads)
        comp = Composition.of(static, ch.tags)
        problem, cfg = comp.problem(static, pads), comp.train_config(static)
        with jax.enable_x64(static.get("train.dtype", "float32") == "float64"):
            v = {k: jnp.asarray(x) for k, x in grid.batch_inputs(comp, list(ch.cells)).items()}
            shared = comp.shared(static)
            progs = T._programs(problem, cfg)
            t0 = time.perf_counter()
            if strategy == "sequential":
                lowered = [progs.sequential.lower(v, shared)]
            else:
                c, fixed, data = jax.eval_shape(progs.begin, v, shared)
                lowered = [
                    progs.begin.lower(v, shared),
                    progs.advance.lower(c, fixed, data, v, jnp.int32(0)),
                    progs.finish.lower(c["cells"], fixed, data, v, c["k"]),
                ]
            t1 = time.perf_counter()
            for low in lowered:
                low.compile()
            t2 = time.perf_counter()
        lower_s += t1 - t0
        compile_s += t2 - t1
    return {"programs": len(seen), "lower_s": lower_s, "compile_s": compile_s, "strategy": strategy}


def run_attnlab(
    cells: list[dict],
    tags=(),
    memory_budget: float = 2e9,
    aot: bool = True,
    progress: bool = True,
    between: Callable[[executors.Chunk, Callable[[int], None]], None] | None = None,
    between_total: int = 0,
    outcome: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None,
) -> dict:
    """Train ``cells`` through the engine twice and time the compilation ahead of time.

    whole   ``run_cells`` into a fresh store: what ``attnlab reproduce`` does, compiles included
    steady  the same chunks again (``train_chunk`` + ``write_part``, as ``run_cells`` runs them) with
            the compiled programs reused, one chunk at a time; ``between(chunk, advance)`` runs after
            each (the baseline on that chunk's cells, ``between_total`` in all, calling ``advance(n)``
            as it goes), so both sides see the same load of a shared machine

    Per-cell outcomes (``outcome(columns)``, default the test loss) come from the steady run; the
    whole run's are checked to be the same."""
    tags = tuple(tags)
    outcome = outcome or (lambda cols: cols["test_loss"].astype(float))
    chunks = executors.plan(cells, set(), memory_budget, tags)
    with tempfile.TemporaryDirectory(prefix="attnlab-bench-") as d:
        store = Store(Path(d))
        t0, c0 = time.perf_counter(), time.process_time()
        executors.run_cells(cells, store, tags=tags, memory_budget=memory_budget, progress=progress)
        whole, whole_cpu = time.perf_counter() - t0, time.process_time() - c0
        cold = _cols(store, cells)
    rss_after = _rss_mb()  # the compiling run holds the most memory; the baseline comes later
    chunk_s, chunk_cpu_s = [], []
    what = "steady run" + (" + baseline" if between else "")
    with tempfile.TemporaryDirectory(prefix="attnlab-bench-") as d, Progress(disable=not progress) as bar:
        store = Store(Path(d))
        task = bar.add_task(what, total=len(cells) + (between_total if between else 0))
        for ch in chunks:
            t0, c0 = time.perf_counter(), time.process_time()
            store.write_part(executors.train_chunk(ch))
            chunk_s.append(time.perf_counter() - t0)
            chunk_cpu_s.append(time.process_time() - c0)
            bar.advance(task, len(ch.cells))
            if between is not None:
                between(ch, lambda n: bar.advance(task, n))  # noqa: B023
        cols = _cols(store, cells)
    comp = aot_compile(chunks) if aot else None
    pads = {grid.cell_id(c): dict(ch.pads) for ch in chunks for c in ch.cells}
    out, out_cold = outcome(cols), outcome(cold)
    return {
        "whole_s": whole,
        "steady_s": float(sum(chunk_s)),
        "whole_cpu_s": whole_cpu,
        "steady_cpu_s": float(sum(chunk_cpu_s)),
        "chunk_s": chunk_s,
        "aot": comp,
        "chunks": len(chunks),
        "chunk_sizes": [len(ch.cells) for ch in chunks],
        "chunk_ids": [[grid.cell_id(c) for c in ch.cells] for ch in chunks],
        "strategy": T.default_strategy(),
        "outcome": out,
        "test_loss": cols["test_loss"].astype(float),
        "stop_step": cols["stop_step"].astype(int),
        "status": cols["status"].astype(str),
        "seconds": cols["seconds"].astype(float),
        "N_pad": np.array([pads[grid.cell_id(c)].get("data.N", c.get("data.N")) for c in cells]),
        "cold_equals_warm": bool(
            np.array_equal(cold["test_loss"], cols["test_loss"], equal_nan=True)
            and np.array_equal(out_cold, out, equal_nan=True)
        ),
        "peak_rss_mb": rss_after,
    }


# ---------------------------------------------------------------- baseline (PyTorch, lazy)


def torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def import_torch():
    try:
        import torch
    except ImportError:
        raise AttnlabError(TORCH_MISSING) from None
    return torch


def cell_data(cell: dict, tags=()) -> dict[str, np.ndarray]:
    """The cell's training set (its N samples, unpadded) and test set, drawn by attnlab's data
    model from the cell's own key: the same arrays the engine trains on. X, X_test: the tokens
    (n, tokens, d) of samples whose every token is kept (a token mask would need the model's
    masked path, which the baselines do not implement)."""
    comp, static, pads, v = cell_parts(cell, tuple(tags))
    data = comp.problem(static, pads).make_data(v["key"], v, comp.shared(static))
    out = {}
    for k in ("X", "X_test"):
        X, mask = tokens(data[k])
        if mask is not None and not bool(np.all(np.asarray(mask))):
            raise AttnlabError(
                f"bench: the serial baseline needs every token kept; cell {grid.cell_id(cell)} masks some"
            )
        out[k] = np.asarray(X)
    return out | {k: np.asarray(data[k]) for k in ("y", "y_test")}


def batch_order(cell: dict, tags=(), n_pad: int | None = None) -> list[np.ndarray] | None:
    """The training-sample indices of the mini-batch of every step t = 0 … max_steps, as the
    engine draws them (:func:`attnlab.train._batch`: epoch e = ⌊t/n_b⌋ is a permutation of the N
    samples from fold_in(batch stream, e), batch j = t mod n_b its j-th slice of b); None for
    full batch. ``n_pad``: the padded training-set size the engine ran the cell at (its random
    draw has that length)."""
    b = int(cell.get("train.batch_size", 0))
    if not b:
        return None
    *_, v = cell_parts(cell, tuple(tags))
    N, cap = int(cell["data.N"]), int(cell["train.max_steps"])
    n_pad = n_pad or N
    n_b = -(-N // b)
    key = T.stream(v["key"], "batch")

    def perm(e):
        u = jax.random.uniform(jax.random.fold_in(key, e), (n_pad,))
        return jnp.argsort(jnp.where(jnp.arange(n_pad) < N, u, 2.0))[:N]

    perms = np.asarray(jax.jit(jax.vmap(perm))(jnp.arange(cap // n_b + 1)))
    return [perms[t // n_b, (t % n_b) * b : (t % n_b + 1) * b] for t in range(cap + 1)]


def _torch_losses(torch) -> dict[str, Callable]:
    F = torch.nn.functional
    return {
        "logistic": lambda f, y: F.softplus(-y * f),  # log(1 + exp(−y f))
        "hinge": lambda f, y: F.relu(1 - y * f),
        "squared": lambda f, y: 0.5 * (f - y) ** 2,
        "error": lambda f, y: (torch.sign(f) != y).to(f.dtype),
    }


def serial_cell(torch, suite: Suite, cell: dict, data: dict, batches: list | None = None) -> dict:
    """One cell the way a paper's own script trains it: build the model, ``torch.optim.SGD``, and
    step by step the batch's loss (logged), the stop rule on the training set every stop_every
    steps, backward, update; the test set at every step (``suite.test_every_step``) or once at the
    stop. ``batches``: index tensors of each step's mini-batch (None: full batch). Timed from the
    model's construction to the final test evaluation."""
    suite.check(cell)
    losses = _torch_losses(torch)
    loss_fn = losses[cell["train.loss"]]
    loop = Loop.of(cell)
    stop_fn = loss_fn if loop.stop_on == "loss" else losses[loop.stop_on]
    X, y, X_test, y_test = (torch.from_numpy(np.array(data[k])) for k in ("X", "y", "X_test", "y_test"))
    hp = model_hparams(cell)
    torch.manual_seed(int(grid.cell_id(cell)[:8], 16))
    t0, c0 = time.perf_counter(), time.process_time()
    model = suite.module(torch, hp)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=float(cell["train.lr"]))
    threshold = float(cell["train.loss_threshold"])
    curve, test_curve = [], []
    status = "cap"
    for t in range(loop.max_steps + 1):
        opt.zero_grad()
        Xb, yb = (X[batches[t]], y[batches[t]]) if batches else (X, y)
        f = model(Xb)
        loss = loss_fn(f, yb).mean()
        if suite.test_every_step:  # as the released scripts: the test loss at every step
            with torch.no_grad():
                test_curve.append(loss_fn(model(X_test), y_test).mean().item())
        curve.append(loss.item())
        if not math.isfinite(curve[-1]):
            status = "diverged"
            break
        if loop.judged(t):
            if batches:  # the stop rule reads the whole training set
                with torch.no_grad():
                    judged = stop_fn(model(X), y).mean().item()
            else:
                judged = curve[-1] if loop.stop_on == "loss" else stop_fn(f.detach(), y).mean().item()
            if judged < threshold:
                status = "converged"
                break
        if t == loop.max_steps:
            break
        loss.backward()
        opt.step()
    test_error = None
    if test_curve:
        test_loss = test_curve[-1]
    else:
        with torch.no_grad():
            f_test = model(X_test)
            test_loss = loss_fn(f_test, y_test).mean().item()
            if cell["train.loss"] != "squared":
                test_error = losses["error"](f_test, y_test).mean().item()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    full = batches is None
    return {
        "test_loss": test_loss,
        "test_error": test_error,
        "train_loss": curve[-1] if full else None,
        "initial_train_loss": curve[0] if full else None,
        "stop_step": t,
        "status": status,
        "seconds": seconds,
        "cpu_s": cpu,
    }


def gemm_flops_torch(torch, n: int = 2048, repeats: int = 10) -> dict:
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return {"n": n, "best": 2 * n**3 / min(times), "median": 2 * n**3 / float(np.median(times))}


CALIBRATION_STEPS = 100  # steps of the short runs that pick the baseline's thread count


class Baseline:
    """The serial PyTorch baseline of a suite, run a few cells at a time (between attnlab's chunks).

    Threads: ``threads`` if given; else the suite's rule: the faster of 1 thread and every core on
    short runs of the first cell (the default: on a loaded machine a 2-thread step measured
    10-30× slower than a 1-thread one, which would flatter attnlab), or every core ("all")."""

    def __init__(self, suite: Suite | str = "jiang2024", tags=(), threads: int | None = None, gemm_n: int = 2048):
        self.suite = get_suite(suite) if isinstance(suite, str) else suite
        self.torch = import_torch()
        self.tags = tuple(tags)
        self.torch.set_num_threads(cpu_count())
        self.gemm = gemm_flops_torch(self.torch, gemm_n)
        self.threads = threads or (cpu_count() if self.suite.threads == "all" else None)
        if self.threads:
            self.torch.set_num_threads(self.threads)
        self.calibration: dict[int, float] = {}
        self.warmup_s: float | None = None
        self.rows: dict[str, dict] = {}

    def _first(self, cell: dict, data: dict, batches) -> None:
        # PyTorch's first training loop in a process is seconds slower (lazy initialisation); a
        # paper's script pays that once per process, not per cell: untimed runs first
        if self.threads:
            self.warmup_s = serial_cell(self.torch, self.suite, cell, data, batches)["seconds"]
            return
        short = cell | {"train.max_steps": min(int(cell["train.max_steps"]), CALIBRATION_STEPS)}
        self.warmup_s = serial_cell(self.torch, self.suite, short, data, batches)["seconds"]
        for n in sorted({1, cpu_count()}):
            self.torch.set_num_threads(n)
            self.calibration[n] = serial_cell(self.torch, self.suite, short, data, batches)["seconds"]
        self.threads = min(self.calibration, key=self.calibration.get)
        self.torch.set_num_threads(self.threads)

    def run(self, cells: list[dict], advance: Callable[[int], None] | None = None, pads: dict | None = None) -> None:
        """Train ``cells`` one after the other; ``pads``: the chunk's padded sizes (the engine's
        batch draws depend on them)."""
        for c in cells:
            data = cell_data(c, self.tags)  # drawn outside the cell's timer, as the batch order
            order = batch_order(c, self.tags, (pads or {}).get("data.N"))
            batches = None if order is None else [self.torch.from_numpy(i.astype(np.int64)) for i in order]
            if self.warmup_s is None:
                self._first(c, data, batches)
            self.rows[grid.cell_id(c)] = serial_cell(self.torch, self.suite, c, data, batches)
            if advance is not None:
                advance(1)

    def result(self, cells: list[dict]) -> dict:
        rows = [self.rows[grid.cell_id(c)] for c in cells]
        col = lambda k: np.array([r[k] for r in rows])  # noqa: E731
        return {
            "torch_version": self.torch.__version__,
            "threads": self.threads,
            "gemm": self.gemm,
            "threads_calibration_s": {str(k): round(v, 4) for k, v in self.calibration.items()} or None,
            "warmup_s": self.warmup_s,
            "cpu_s": col("cpu_s"),
            "test_loss": col("test_loss"),
            "outcome": np.array([self.suite.outcome.baseline(r) for r in rows], float),
            "stop_step": col("stop_step"),
            "status": col("status"),
            "seconds": col("seconds"),
            "peak_rss_mb": _rss_mb(),
        }


def run_baseline(
    cells: list[dict], tags=(), threads: int | None = None, gemm_n: int = 2048, suite: Suite | str = "jiang2024"
) -> dict:
    """The baseline on ``cells``, one after the other."""
    b = Baseline(suite, tags, threads, gemm_n)
    b.run(cells)
    return b.result(cells)


def check_model(torch, suite: Suite | str, cell: dict, n: int = 6, tags=None) -> dict[str, float]:
    """attnlab's model and the suite's PyTorch module on the same parameters (attnlab's init of
    the cell, copied in) and the cell's first ``n`` training samples: the largest difference of f,
    of the loss and of each trained parameter's gradient, relative to the largest |attnlab value|;
    ``untrained_without_grad``: 1.0 when the parameters attnlab keeps fixed get no gradient."""
    from attnlab.experiments import get

    s = get_suite(suite) if isinstance(suite, str) else suite
    comp = Composition.of(cell)
    hp = model_hparams(cell)
    params = comp.model.init(jax.random.PRNGKey(0), hp)
    tags = get(s.experiment).tags if tags is None else tags
    trained = comp.model.trainable(hp)
    data = cell_data(cell, tags)
    X, y = data["X"][:n], data["y"][:n]
    loss_fn = T.LOSSES[cell["train.loss"]].fn

    def loss(tr):
        f, _ = jax.vmap(lambda x: comp.model.apply(params | tr, x, hp))(jnp.asarray(X))
        return loss_fn(f, jnp.asarray(y)).mean(), f

    (L, f), g = jax.jit(jax.value_and_grad(loss, has_aux=True))({k: params[k] for k in trained})
    module = s.module(torch, hp)
    tensors = dict(module.named_parameters()) | dict(module.named_buffers())
    with torch.no_grad():
        for name, (attr, transposed) in s.layout.items():
            w = np.asarray(params[name])
            tensors[attr].copy_(torch.from_numpy(np.array(w.T if transposed else w)).reshape(tensors[attr].shape))
    ft = module(torch.from_numpy(np.array(X)))
    Lt = _torch_losses(torch)[cell["train.loss"]](ft, torch.from_numpy(np.array(y))).mean()
    Lt.backward()
    rel = lambda a, b: float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))  # noqa: E731
    out = {"f": rel(ft.detach().numpy(), np.asarray(f)), "loss": rel(np.array(Lt.item()), np.array(float(L)))}
    for name in trained:
        attr, transposed = s.layout[name]
        gt = tensors[attr].grad.numpy()
        out[f"grad_{name}"] = rel((gt.T if transposed else gt).reshape(np.shape(g[name])), np.asarray(g[name]))
    fixed = [s.layout[k][0] for k in s.layout if k not in trained]
    out["untrained_without_grad"] = float(all(getattr(tensors[a], "grad", None) is None for a in fixed))
    return out


def init_rms(torch, suite: Suite | str, cell: dict, seed: int = 0) -> dict[str, tuple[float, float, int]]:
    """Per parameter: (RMS of attnlab's init draw, RMS of the PyTorch module's, entries): the two
    inits follow the same law when these agree within sampling error (~1/√(2·entries))."""
    s = get_suite(suite) if isinstance(suite, str) else suite
    comp, hp = Composition.of(cell), model_hparams(cell)
    params = comp.model.init(jax.random.PRNGKey(seed), hp)
    torch.manual_seed(seed)
    module = s.module(torch, hp)
    tensors = dict(module.named_parameters()) | dict(module.named_buffers())
    rms = lambda a: float(np.sqrt(np.mean(np.square(np.asarray(a, np.float64)))))  # noqa: E731
    return {
        k: (rms(params[k]), rms(tensors[a].detach().numpy()), int(np.size(params[k]))) for k, (a, _) in s.layout.items()
    }


# ---------------------------------------------------------------- report


def _r(x, digits: int = 4):
    if x is None:
        return None
    x = float(x)
    return round(x, digits) if math.isfinite(x) else None


def _sig(x, digits: int = 4):
    """A JSON-ready float to ``digits`` significant digits (None for None, NaN, inf)."""
    if x is None or not math.isfinite(float(x)):
        return None
    return float(f"{float(x):.{digits}g}")


def build_report(
    *,
    suite: str,
    experiment: str,
    scale: str,
    seed: int,
    grid_cells: int,
    cells: list[dict],
    attn: dict,
    base: dict | None,
    base_idx: list[int],
    gemm: dict,
    rss_start_mb: float,
    level: float | None = None,
) -> dict:
    """Everything measured, as one JSON-ready dict: ratios, agreement, FLOP/s, compile, memory,
    and one row per cell. ``base_idx``: positions in ``cells`` of the baseline's cells; ``level``:
    the success level (None: the experiment's at ``scale``)."""
    s = get_suite(suite)
    if level is None:
        from attnlab.experiments import get

        level = s.level(get(experiment).spec(scale))
    oc = s.outcome
    K = len(cells)
    per = [s.flops(model_hparams(c)) for c in cells]
    loops = [Loop.of(c, s.test_every_step) for c in cells]
    N = np.array([lp.N for lp in loops])
    stops = attn["stop_step"]
    useful = sum(cell_flops(p, lp, int(st)) for p, lp, st in zip(per, loops, stops, strict=True))
    executed = sum(
        cell_flops(p, lp, int(st), n_pad=int(n)) for p, lp, st, n in zip(per, loops, stops, attn["N_pad"], strict=True)
    )
    peak = gemm["best"]
    steady, whole = attn["steady_s"], attn["whole_s"]
    aot = attn.get("aot")
    a = {
        "strategy": attn["strategy"],
        "chunks": attn["chunks"],
        "chunk_sizes": attn["chunk_sizes"],
        "whole_s": _r(whole, 3),
        "steady_s": _r(steady, 3),
        "whole_cpu_s": _r(attn["whole_cpu_s"], 3),
        "steady_cpu_s": _r(attn["steady_cpu_s"], 3),
        "cores_used_steady": _r(attn["steady_cpu_s"] / steady, 2),
        "compile_s_aot": _r(aot["compile_s"], 3) if aot else None,
        "lower_s_aot": _r(aot["lower_s"], 3) if aot else None,
        "programs_compiled": aot["programs"] if aot else None,
        "whole_minus_steady_s": _r(whole - steady, 3),
        "seconds_per_cell_steady": _r(steady / K),
        "seconds_per_cell_whole": _r(whole / K),
        "cells_per_s_steady": _r(K / steady, 3),
        "cells_per_s_whole": _r(K / whole, 3),
        "model_steps": int(stops.sum()),
        "model_steps_per_s_steady": _r(stops.sum() / steady, 2),
        "flops_useful": int(useful),
        "flops_executed_with_padding": int(executed),
        "flops_per_s_steady": _r(useful / steady, 0),
        "peak_fraction_steady": _sig(useful / steady / peak),
        "flops_per_s_whole": _r(useful / whole, 0),
        "peak_fraction_whole": _sig(useful / whole / peak),
        "padding_overhead": _r(executed / useful, 3),
        "cold_run_equals_warm_run": attn["cold_equals_warm"],
        "status_counts": {st: int((attn["status"] == st).sum()) for st in np.unique(attn["status"])},
        "peak_rss_mb": _r(attn["peak_rss_mb"], 1),
        "rss_before_training_mb": _r(rss_start_mb, 1),
    }
    shapes = {json.dumps(p, sort_keys=True) for p in per}
    report: dict[str, Any] = {
        "suite": suite,
        "experiment": experiment,
        "scale": scale,
        "seed": seed,
        "grid_cells": grid_cells,
        "cells": K,
        "machine": {
            "cpus": cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "jax": jax.__version__,
            "jax_backend": jax.default_backend(),
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
        },
        "gemm_jax": {
            "n": gemm["n"],
            "best_flops_per_s": _r(gemm["best"], 0),
            "median_flops_per_s": _r(gemm["median"], 0),
        },
        "flop_model": {
            "per_sample_forward": per[0]["forward"],
            "per_sample_backward": per[0]["backward"],
            "update": per[0]["update"],
            "model_shapes": len(shapes),
            "note": "contractions only, 2 FLOPs per multiply-add, per the cell's own model shape (per_sample_*: "
            "the first cell's); attnlab's count: forward+backward of the step's batch at t = 0..stop (with "
            "mini-batches also a forward of the training set at each judged step), stop updates, a final "
            "forward of the train and test sets (padding excluded; 'executed' includes it); the baseline's: "
            "forward of the step's batch at every step, backward and update at t < stop, the training set at "
            "each judged step (mini-batches), the test set at every step (jiang2024) or once",
        },
        "outcome": {
            "name": oc.name,
            "label": oc.label,
            "success": f"{oc.label} {oc.op} {level:g}",
            "difference_of": "log10" if oc.log else "value",
            "floor": oc.floor,
        },
        "attnlab": a,
        "baseline": None,
        "ratio": None,
        "agreement": None,
        "notes": list(s.notes),
    }
    fmt_out = _sig if oc.log else (lambda x: _r(x, 6))
    rows = []
    for i, c in enumerate(cells):
        row = {
            "id": grid.cell_id(c),
            "N": int(N[i]),
            **s.row(c),
            "rep": c.get("rep"),
            "block": c.get("block"),
            f"attnlab_{oc.name}": fmt_out(attn["outcome"][i]),
            "attnlab_stop_step": int(stops[i]),
            "attnlab_status": str(attn["status"][i]),
            "attnlab_seconds_chunk_share": _r(attn["seconds"][i], 4),
        }
        rows.append(row)
    if base is not None and len(base_idx):
        nb = len(base_idx)
        b_sec = float(base["seconds"].sum())
        per_cell = b_sec / nb
        b_flops = sum(
            cell_flops(per[i], loops[i], int(st), "paper") for i, st in zip(base_idx, base["stop_step"], strict=True)
        )
        b_steps = int(base["stop_step"].sum())
        a_flops_same = sum(cell_flops(per[i], loops[i], int(stops[i])) for i in base_idx)
        report["baseline"] = {
            "implementation": s.implementation,
            "torch": base["torch_version"],
            "threads": base["threads"],
            "cells": nb,
            "threads_calibration_s": base.get("threads_calibration_s"),
            "extrapolated": nb < K,
            "seconds": _r(b_sec, 3),
            "seconds_per_cell": _r(per_cell),
            "cpu_s": _r(base["cpu_s"].sum(), 3),
            "cores_used": _r(base["cpu_s"].sum() / b_sec, 2),
            "warmup_s_untimed": _r(base["warmup_s"], 3),
            "extrapolated_seconds_for_all_cells": _r(per_cell * K, 2),
            "model_steps": b_steps,
            "model_steps_per_s": _r(b_steps / b_sec, 2),
            "flops": int(b_flops),
            "flops_per_s": _r(b_flops / b_sec, 0),
            "peak_fraction_of_jax_gemm": _sig(b_flops / b_sec / peak),
            "gemm_torch_best_flops_per_s": _r(base["gemm"]["best"], 0),
            "peak_fraction_of_torch_gemm": _sig(b_flops / b_sec / base["gemm"]["best"]),
            "status_counts": {st: int((base["status"] == st).sum()) for st in np.unique(base["status"])},
            "peak_rss_mb_after_baseline": _r(base["peak_rss_mb"], 1),
        }
        report["ratio"] = {
            "steady": _r(per_cell / (steady / K), 3),
            "whole": _r(per_cell / (whole / K), 3),
            "per_model_step_steady": _r((b_sec / max(b_steps, 1)) / (steady / max(int(stops.sum()), 1)), 3),
            "steady_cpu_time": _r(float(base["cpu_s"].sum()) / nb / (attn["steady_cpu_s"] / K), 3),
            # steady ≈ work × efficiency: how much more arithmetic the paper's loop does on the same cells,
            # and how much faster attnlab does each FLOP
            "work_baseline_over_attnlab": _r(b_flops / a_flops_same, 3),
            "flops_per_s_attnlab_over_baseline": _r((useful / steady) / (b_flops / b_sec), 3),
            "whole_cpu_time": _r(float(base["cpu_s"].sum()) / nb / (attn["whole_cpu_s"] / K), 3),
            "definition": "baseline seconds per cell / attnlab seconds per cell (steady: compiled programs reused; "
            "whole: the first run, compilation included); *_cpu_time: the same with process CPU "
            "seconds (less sensitive to other jobs on a shared machine, but it also counts how many "
            "cores each side keeps busy: see cores_used)"
            + (f"; baseline per cell measured on {nb} of the {K} cells and extrapolated" if nb < K else ""),
        }
        if attn.get("chunk_ids"):  # per chunk: the two sides ran back to back, under the same load
            bsec = {grid.cell_id(cells[i]): float(base["seconds"][j]) for j, i in enumerate(base_idx)}
            by_chunk = []
            for ids, sec in zip(attn["chunk_ids"], attn["chunk_s"], strict=True):
                mine = [bsec[i] for i in ids if i in bsec]
                if mine:
                    by_chunk.append(_r(np.mean(mine) / (sec / len(ids)), 3))
            report["ratio"]["steady_by_chunk"] = by_chunk
            report["ratio"]["steady_by_chunk_range"] = [min(by_chunk), max(by_chunk)] if by_chunk else None
        idx = np.asarray(base_idx)
        report["agreement"] = agreement(
            attn["outcome"][idx],
            base["outcome"],
            level,
            stops[idx],
            base["stop_step"],
            op=oc.op,
            log=oc.log,
            floor=oc.floor,
        )
        report["agreement"]["a"], report["agreement"]["b"] = "attnlab", "baseline"
        report["agreement"]["outcome"] = oc.label
        for j, i in enumerate(base_idx):
            rows[i].update(
                {
                    f"baseline_{oc.name}": fmt_out(base["outcome"][j]),
                    "baseline_stop_step": int(base["stop_step"][j]),
                    "baseline_status": str(base["status"][j]),
                    "baseline_seconds": _r(base["seconds"][j], 4),
                }
            )
        if nb < K:
            report["notes"].insert(
                0,
                f"baseline ran on a seeded sub-subset of {nb} of the {K} cells; its time per cell "
                "is extrapolated to all of them",
            )
    else:
        report["notes"].insert(0, "no baseline run (--baseline-cells 0)")
    report["notes"].append(
        "times are measured in this one process; the steady run and the baseline alternate chunk by "
        "chunk so both see the same load (ratio.steady_by_chunk: their spread); the compiling run "
        "comes first, alone. On a shared machine, repeat for spread"
    )
    report["per_cell"] = rows
    return report


def render(report: dict, console: Console) -> None:
    """A short human table of the report."""
    a, b, r, g = report["attnlab"], report["baseline"] or {}, report["ratio"] or {}, report["agreement"]
    t = Table(
        title=f"attnlab bench {report['suite']} ({report['experiment']}, {report['scale']}): "
        f"{report['cells']} of {report['grid_cells']} cells"
    )
    for col in ("", "attnlab", "serial PyTorch"):
        t.add_column(col, overflow="fold")
    fmt = lambda x, spec="": "—" if x is None else format(x, spec)  # noqa: E731
    bcells = f"{b.get('cells')}" + (" (extrapolated)" if b.get("extrapolated") else "") if b else "—"
    t.add_row("cells", str(report["cells"]), bcells)
    t.add_row("s / cell (steady)", fmt(a["seconds_per_cell_steady"], ".3f"), fmt(b.get("seconds_per_cell"), ".3f"))
    t.add_row(
        "s / cell (whole, incl. compile)",
        fmt(a["seconds_per_cell_whole"], ".3f"),
        fmt(b.get("seconds_per_cell"), ".3f"),
    )
    t.add_row("cells / s (steady)", fmt(a["cells_per_s_steady"], ".2f"), "—")
    t.add_row("model-steps / s", fmt(a["model_steps_per_s_steady"], ".1f"), fmt(b.get("model_steps_per_s"), ".1f"))
    t.add_row(
        "GFLOP/s (analytic count)",
        fmt(a["flops_per_s_steady"] and a["flops_per_s_steady"] / 1e9, ".2f"),
        fmt(b.get("flops_per_s") and b["flops_per_s"] / 1e9, ".2f"),
    )
    t.add_row(
        "fraction of JAX GEMM peak",
        fmt(a["peak_fraction_steady"], ".3g"),
        fmt(b.get("peak_fraction_of_jax_gemm"), ".3g"),
    )
    t.add_row("cores busy (CPU s / wall s)", fmt(a["cores_used_steady"], ".2f"), fmt(b.get("cores_used"), ".2f"))
    t.add_row("compile s (AOT)", fmt(a["compile_s_aot"], ".1f"), "—")
    t.add_row("peak RSS MB", fmt(a["peak_rss_mb"], ".0f"), fmt(b.get("peak_rss_mb_after_baseline"), ".0f"))
    console.print(t)
    gj = report["gemm_jax"]["best_flops_per_s"]
    console.print(f"JAX float32 {report['gemm_jax']['n']}² GEMM: {gj / 1e9:.1f} GFLOP/s (best)", highlight=False)
    if r:
        rng = r.get("steady_by_chunk_range")
        console.print(
            f"ratio baseline / attnlab per cell: steady {r['steady']:.2f}×"
            + (f" (chunks {rng[0]:.2f}–{rng[1]:.2f}×)" if rng else "")
            + f", whole {r['whole']:.2f}× (CPU time: steady {r['steady_cpu_time']:.2f}×, whole {r['whole_cpu_time']:.2f}×); "
            f"= the baseline's {r['work_baseline_over_attnlab']:.2f}× more FLOPs × attnlab's "
            f"{r['flops_per_s_attnlab_over_baseline']:.2f}× its FLOP/s",
            highlight=False,
        )
    if g:
        what = ("log10 " if g["difference_of"] == "log10" else "") + g.get("outcome", "test loss")
        what += f", values < {g['floor']:g} raised to it" if g.get("floor") is not None else ""
        console.print(
            f"agreement on {g['cells']} cells: mean |Δ {what}| {g['mean_abs_diff']:.4g} (max {g['max_abs_diff']:.4g}); "
            f"{g['different_side']} cell(s) on different sides of {g['level']:g} (success: {g['success_rule']}); "
            f"same stop step {g['same_stop_step']}/{g['cells']}"
            + (
                f"; mean Δ (attnlab − baseline) 95% CI [{g['mean_diff_ci95'][0]:.4g}, {g['mean_diff_ci95'][1]:.4g}]"
                if g.get("mean_diff_ci95")
                else ""
            ),
            highlight=False,
        )
    for n in report["notes"]:
        console.print(f"note: {n}", highlight=False, soft_wrap=True)


def run_suite(
    suite: str = "jiang2024",
    cells: int = 100,
    baseline_cells: int | None = None,
    seed: int = 0,
    scale: str | None = None,
    aot: bool = True,
    progress: bool = True,
    console: Console | None = None,
    gemm_n: int = 2048,
    baseline_threads: int | None = None,
) -> dict:
    """Select the cells, check the baseline can run, time attnlab, then the baseline; the report.
    ``scale`` None: the suite's own (jiang2024 paper, li2023 and wu2023 cpu); ``baseline_threads``
    None: the suite's rule (:class:`Baseline`)."""
    s = get_suite(suite)
    scale = scale or s.scale
    from attnlab.experiments import get

    if scale not in get(s.experiment).scales:  # every argument checked before the baseline's needs
        raise AttnlabError(f"--scale: unknown {scale!r}; valid: {', '.join(get(s.experiment).scales)}")
    if cells < 1:
        raise AttnlabError(f"--cells: must be ≥ 1, got {cells}")
    nb = cells if baseline_cells is None else baseline_cells
    if not 0 <= nb <= cells:
        raise AttnlabError(f"--baseline-cells: must lie in [0, --cells = {cells}], got {nb}")
    if baseline_threads is not None and baseline_threads < 1:
        raise AttnlabError(f"--baseline-threads: must be ≥ 1, got {baseline_threads}")
    if nb and not torch_available():  # fail before any long run (without importing torch yet: RSS)
        raise AttnlabError(TORCH_MISSING)
    exp, spec, all_cells = suite_cells(suite, scale)
    chosen = select_cells(all_cells, cells, seed)
    for c in chosen:
        s.check(c, baseline=bool(nb))
    say = (console or Console(stderr=True)).print
    say(
        f"bench {suite}: {len(chosen)} of {len(all_cells)} {exp.id} {scale} cells; measuring JAX GEMM peak",
        highlight=False,
    )
    rss0 = _rss_mb()
    gemm = gemm_flops_jax(gemm_n)
    sub = (select_cells(chosen, nb, seed + 1) if nb < len(chosen) else chosen) if nb else []
    sub_ids = {grid.cell_id(c) for c in sub}
    pos = {grid.cell_id(c): i for i, c in enumerate(chosen)}
    base_idx = sorted(pos[i] for i in sub_ids)
    state: dict[str, Any] = {}

    def baseline_between(ch: executors.Chunk, advance: Callable[[int], None]) -> None:
        if "b" not in state:  # torch is imported only now: after attnlab's compiling run and its RSS
            state["b"] = Baseline(s, exp.tags, baseline_threads, gemm_n)
        state["b"].run([c for c in ch.cells if grid.cell_id(c) in sub_ids], advance, dict(ch.pads))

    say(
        "attnlab: a run that compiles, then a steady run chunk by chunk"
        + (f", each chunk followed by the serial baseline on its cells ({len(sub)} in all)" if sub else "")
        + ("; then ahead-of-time compile timing" if aot else ""),
        highlight=False,
    )
    attn = run_attnlab(
        chosen,
        exp.tags,
        spec.memory_budget_gb * 1e9,
        aot=aot,
        progress=progress,
        between=baseline_between if sub else None,
        between_total=len(sub),
        outcome=s.outcome.attnlab,
    )
    gemm2 = gemm_flops_jax(gemm_n)
    gemm = gemm if gemm["best"] >= gemm2["best"] else gemm2
    base = state["b"].result([chosen[i] for i in base_idx]) if sub else None
    return build_report(
        suite=suite,
        experiment=exp.id,
        scale=scale,
        seed=seed,
        grid_cells=len(all_cells),
        cells=chosen,
        attn=attn,
        base=base,
        base_idx=base_idx,
        gemm=gemm,
        rss_start_mb=rss0,
        level=s.level(spec),
    )
