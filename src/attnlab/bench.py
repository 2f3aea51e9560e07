"""``attnlab bench``: the engine against a paper-style serial PyTorch baseline, same cells, same process.

    attnlab bench [--suite jiang2024] [--cells 100] [--baseline-cells K] [--json FILE]

Cells: a seeded subset spread over the experiment's grid (:func:`select_cells`), paper scale by
default (jiang2024-fig1: M = 16, d = 1024, d_h = d_v = 512, full-batch GD lr 0.1 to train loss
< 0.01, cap 1000 steps, 100 test samples).

attnlab: the cells go through the engine twice, as ``attnlab reproduce`` trains them
(``sweep.executors.run_cells`` into a temporary store): the first run compiles (``whole``), the
second reuses the compiled programs (``steady``). Compilation alone is then timed ahead of time
(``jit(...).lower(...).compile()`` of every chunk's program, on fresh functions so nothing is
cached).

Baseline: one model at a time, written as the paper's released scripts are: ``nn.Linear``
parameters with PyTorch's default init divided by ``init_scale`` (the same law as attnlab's, not
the same draws), ``torch.optim.SGD``, full batch, the test loss evaluated at every step, stop at
train loss < threshold or at the cap. Its data are attnlab's (the cell's own key), so only the
init differs and the outcomes agree statistically, not bit for bit. Data generation is outside
its timer. With ``--baseline-cells`` < cells it runs on a seeded sub-subset and its time per cell
is extrapolated (stated in the report).

Reported: the ratio of time per cell (baseline / attnlab; steady and whole), the agreement of
outcomes (|Δ test loss|, cells on different sides of the success level), the achieved FLOP/s of an
analytic count (:func:`flops_per_sample`) against a large float32 GEMM measured in the same run,
compile time, peak RSS. PyTorch is optional (``make bench`` or ``pip install torch==2.13.0``);
everything but the baseline works without it.
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
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
from attnlab.problem import KEY_ONLY, Composition
from attnlab.sweep import executors, grid
from attnlab.sweep.store import Store

SUITES = {"jiang2024": "jiang2024-fig1"}
LEVEL = 0.2  # the success level of jiang2024-fig1: test loss < 0.2
TORCH_VERSION = "2.13.0"
TORCH_MISSING = (
    "the serial baseline needs PyTorch, which is not installed: run `make bench` (installs the `bench` extra) or "
    f"`.venv/bin/pip install torch=={TORCH_VERSION}` (CPU wheel); or pass --baseline-cells 0 to time attnlab alone"
)


# ---------------------------------------------------------------- FLOP count


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
            raise AttnlabError(f"bench: the FLOP count and the baseline know model 'jiang2024', got {cell.get('model.name')!r}")
        return cls(int(cell["data.M"]), int(cell["data.d"]), int(cell["model.d_h"]), int(cell["model.d_v"]),
                   bool(cell.get("model.train_w_O", False)))  # fmt: skip

    @property
    def trained_params(self) -> int:
        return self.d * (2 * self.d_h + self.d_v) + (self.d_v if self.train_w_O else 0)


def flops_per_sample(s: Shape) -> dict[str, int]:
    """FLOPs of the plain algorithm for one sample: contractions only, 2 per multiply-add (an
    (m×k)·(k×n) product costs 2mkn); element-wise work (softmax, the query mean, the loss) is
    O(M²) per sample and left out (< 0.1 % at paper scale).

    forward      Q = X W_Q, K = X W_K: 2·M·d·d_h each;  X W_V: 2·M·d·d_v;  S = Q Kᵀ: 2·M²·d_h;
                 v = (X W_V) w_O: 2·M·d_v;  f = ā·v: 2·M
    backward     each contraction again (2mkn) per operand that needs a gradient: W_Q, W_K, W_V
                 (X is data: no input gradient); Q and K in S; X W_V (and w_O if trained) in v;
                 ā and v in f
    """
    M, d, d_h, d_v = s.M, s.d, s.d_h, s.d_v
    proj = 2 * M * d * (2 * d_h + d_v)
    fwd = proj + 2 * M * M * d_h + 2 * M * d_v + 2 * M
    bwd = proj + 2 * (2 * M * M * d_h) + (2 if s.train_w_O else 1) * 2 * M * d_v + 2 * (2 * M)
    return {"forward": fwd, "backward": bwd}


def flops_update(s: Shape) -> int:
    """Plain gradient descent θ ← θ − lr·g: 2 FLOPs per trained parameter."""
    return 2 * s.trained_params


def cell_flops(s: Shape, N: int, n_test: int, stop_step: int, protocol: str = "attnlab") -> int:
    """FLOPs of one cell that stopped at ``stop_step`` (the number of updates).

    attnlab  forward+backward at every t = 0 … stop (the step loss and its gradient come from
             one pass; the stop rule reads the loss), ``stop`` updates, then the final metrics:
             one forward of the N training and the n_test test samples
    paper    the released scripts' loop: a forward of the N training samples and of the n_test
             test samples at every t = 0 … stop, a backward and an update at t < stop
    """
    f = flops_per_sample(s)
    u = flops_update(s)
    steps = stop_step + 1
    if protocol == "attnlab":
        return steps * N * (f["forward"] + f["backward"]) + stop_step * u + (N + n_test) * f["forward"]
    if protocol == "paper":
        return steps * (N + n_test) * f["forward"] + stop_step * (N * f["backward"] + u)
    raise ValueError(f"protocol must be 'attnlab' or 'paper', got {protocol!r}")


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


def suite_cells(suite: str, scale: str = "paper") -> tuple[Any, Any, list[dict]]:
    """(experiment, spec, every cell of the grid) of a suite at ``scale``."""
    from attnlab.experiments import get

    if suite not in SUITES:
        raise AttnlabError(f"--suite: unknown {suite!r}; valid: {', '.join(SUITES)}")
    exp = get(SUITES[suite])
    spec = exp.spec(scale)
    return exp, spec, exp.cells(spec)


# ---------------------------------------------------------------- statistics


def agreement(a_loss, b_loss, level: float = LEVEL, a_stop=None, b_stop=None) -> dict:
    """How far two implementations' outcomes on the same cells agree. Pairs with a non-finite
    value are counted and left out. ``different_side``: cells whose test losses fall on different
    sides of ``level`` (one a success, the other not)."""
    a, b = np.asarray(a_loss, float), np.asarray(b_loss, float)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    diff = np.abs(a - b)
    side = (a < level) != (b < level)
    out = {
        "cells": int(ok.sum()), "non_finite_pairs": int((~ok).sum()), "level": level,
        "mean_abs_diff": float(diff.mean()) if len(a) else None,
        "median_abs_diff": float(np.median(diff)) if len(a) else None,
        "max_abs_diff": float(diff.max()) if len(a) else None,
        "mean_diff_a_minus_b": float((a - b).mean()) if len(a) else None,
        "a_below_level": int((a < level).sum()), "b_below_level": int((b < level).sum()),
        "different_side": int(side.sum()), "different_side_share": float(side.mean()) if len(a) else None,
    }  # fmt: skip
    if len(a) >= 2:  # is there a systematic difference? (paired: same cells, same data)
        from scipy import stats

        dm, se = float((a - b).mean()), float(np.std(a - b, ddof=1) / np.sqrt(len(a)))
        q = float(stats.t.ppf(0.975, len(a) - 1))
        out["mean_diff_ci95"] = [dm - q * se, dm + q * se] if se > 0 else [dm, dm]
        nz = (a - b) != 0
        out["wilcoxon_p"] = float(stats.wilcoxon(a[nz], b[nz]).pvalue) if nz.sum() >= 6 else None
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
                lowered = [progs.begin.lower(v, shared), progs.advance.lower(c, fixed, data, v, jnp.int32(0)),
                           progs.finish.lower(c["cells"], fixed, data, v, c["k"])]  # fmt: skip
            t1 = time.perf_counter()
            for low in lowered:
                low.compile()
            t2 = time.perf_counter()
        lower_s += t1 - t0
        compile_s += t2 - t1
    return {"programs": len(seen), "lower_s": lower_s, "compile_s": compile_s, "strategy": strategy}


def run_attnlab(
    cells: list[dict], tags=(), memory_budget: float = 2e9, aot: bool = True, progress: bool = True,
    between: Callable[[executors.Chunk, Callable[[int], None]], None] | None = None, between_total: int = 0,
) -> dict:  # fmt: skip
    """Train ``cells`` through the engine twice and time the compilation ahead of time.

    whole   ``run_cells`` into a fresh store: what ``attnlab reproduce`` does, compiles included
    steady  the same chunks again (``train_chunk`` + ``write_part``, as ``run_cells`` runs them) with
            the compiled programs reused, one chunk at a time; ``between(chunk, advance)`` runs after
            each (the baseline on that chunk's cells, ``between_total`` in all, calling ``advance(n)``
            as it goes), so both sides see the same load of a shared machine

    Per-cell outcomes come from the steady run (the whole run's are checked to be the same)."""
    tags = tuple(tags)
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
    return {
        "whole_s": whole, "steady_s": float(sum(chunk_s)), "whole_cpu_s": whole_cpu,
        "steady_cpu_s": float(sum(chunk_cpu_s)), "chunk_s": chunk_s, "aot": comp, "chunks": len(chunks),
        "chunk_sizes": [len(ch.cells) for ch in chunks], "chunk_ids": [[grid.cell_id(c) for c in ch.cells] for ch in chunks],
        "strategy": T.default_strategy(),
        "test_loss": cols["test_loss"].astype(float), "stop_step": cols["stop_step"].astype(int),
        "status": cols["status"].astype(str), "seconds": cols["seconds"].astype(float),
        "N_pad": np.array([pads[grid.cell_id(c)].get("data.N", c.get("data.N")) for c in cells]),
        "cold_equals_warm": bool(np.array_equal(cold["test_loss"], cols["test_loss"], equal_nan=True)),
        "peak_rss_mb": rss_after,
    }  # fmt: skip


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


def _paper_model(torch):
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


def _check_recipe(cell: dict) -> None:
    want = {"train.loss": "logistic", "train.optimizer": "gd", "train.batch_size": 0, "train.stop_on": "loss",
            "train.stop_every": 1, "train.dtype": "float32"}  # fmt: skip
    bad = {k: cell.get(k) for k, v in want.items() if cell.get(k, v) != v}
    if bad or cell.get("train.lr_mult"):
        raise AttnlabError(f"bench: the serial baseline implements full-batch GD on the logistic loss; cell has {bad}")


def cell_data(cell: dict, tags=()) -> dict[str, np.ndarray]:
    """The cell's training set (its N samples, unpadded) and test set, drawn by attnlab's data
    model from the cell's own key: the same arrays the engine trains on."""
    comp, static, pads, v = cell_parts(cell, tuple(tags))
    data = comp.problem(static, pads).make_data(v["key"], v, comp.shared(static))
    return {k: np.asarray(data[k]) for k in ("X", "y", "X_test", "y_test")}


def baseline_cell(torch, cell: dict, data: dict) -> dict:
    """One cell, the released scripts' way. Timed from the model's construction to the stop."""
    _check_recipe(cell)
    F = torch.nn.functional
    s = Shape.of(cell)
    X, y, X_test, y_test = (torch.from_numpy(np.array(data[k])) for k in ("X", "y", "X_test", "y_test"))
    torch.manual_seed(int(grid.cell_id(cell)[:8], 16))
    t0, c0 = time.perf_counter(), time.process_time()
    model = _paper_model(torch)(s.d, s.d_h, s.d_v, cell["model.init_scale"], cell.get("model.tau", 1.0), s.train_w_O)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=cell["train.lr"])
    max_steps, threshold = int(cell["train.max_steps"]), float(cell["train.loss_threshold"])
    test_curve = []
    status = "cap"
    for t in range(max_steps + 1):
        opt.zero_grad()
        loss = F.softplus(-y * model(X)).mean()
        with torch.no_grad():  # as the released scripts: the test loss at every step
            test_curve.append(F.softplus(-y_test * model(X_test)).mean().item())
        train_loss = loss.item()
        if not math.isfinite(train_loss):
            status = "diverged"
            break
        if train_loss < threshold:
            status = "converged"
            break
        if t == max_steps:
            break
        loss.backward()
        opt.step()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"test_loss": test_curve[-1], "train_loss": train_loss, "stop_step": t, "status": status, "seconds": seconds,
            "cpu_s": cpu}  # fmt: skip


def gemm_flops_torch(torch, n: int = 2048, repeats: int = 10) -> dict:
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return {"n": n, "best": 2 * n**3 / min(times), "median": 2 * n**3 / float(np.median(times))}


class Baseline:
    """The serial PyTorch baseline, run a few cells at a time (between attnlab's chunks)."""

    def __init__(self, tags=(), threads: int | None = None, gemm_n: int = 2048):
        self.torch = import_torch()
        self.tags = tuple(tags)
        self.threads = threads or cpu_count()
        self.torch.set_num_threads(self.threads)
        self.gemm = gemm_flops_torch(self.torch, gemm_n)
        self.warmup_s: float | None = None
        self.rows: dict[str, dict] = {}

    def run(self, cells: list[dict], advance: Callable[[int], None] | None = None) -> None:
        for c in cells:
            data = cell_data(c, self.tags)  # drawn outside the cell's timer
            if self.warmup_s is None:
                # PyTorch's first training loop in a process is seconds slower (lazy initialisation); a
                # paper's script pays that once per process, not per cell: one untimed run first
                self.warmup_s = baseline_cell(self.torch, c, data)["seconds"]
            self.rows[grid.cell_id(c)] = baseline_cell(self.torch, c, data)
            if advance is not None:
                advance(1)

    def result(self, cells: list[dict]) -> dict:
        rows = [self.rows[grid.cell_id(c)] for c in cells]
        return {
            "torch_version": self.torch.__version__, "threads": self.threads, "gemm": self.gemm,
            "warmup_s": self.warmup_s, "cpu_s": np.array([r["cpu_s"] for r in rows]),
            "test_loss": np.array([r["test_loss"] for r in rows]), "stop_step": np.array([r["stop_step"] for r in rows]),
            "status": np.array([r["status"] for r in rows]), "seconds": np.array([r["seconds"] for r in rows]),
            "peak_rss_mb": _rss_mb(),
        }  # fmt: skip


def run_baseline(cells: list[dict], tags=(), threads: int | None = None, gemm_n: int = 2048) -> dict:
    """The baseline on ``cells``, one after the other."""
    b = Baseline(tags, threads, gemm_n)
    b.run(cells)
    return b.result(cells)


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
    *, suite: str, experiment: str, scale: str, seed: int, grid_cells: int, cells: list[dict], attn: dict,
    base: dict | None, base_idx: list[int], gemm: dict, rss_start_mb: float, snr: Callable | None = None,
) -> dict:  # fmt: skip
    """Everything measured, as one JSON-ready dict: ratios, agreement, FLOP/s, compile, memory,
    and one row per cell. ``base_idx``: positions in ``cells`` of the baseline's cells."""
    K = len(cells)
    shapes = [Shape.of(c) for c in cells]
    N = np.array([int(c["data.N"]) for c in cells])
    n_test = np.array([int(c["data.n_test"]) for c in cells])
    stops = attn["stop_step"]
    useful = sum(cell_flops(s, int(n), int(nt), int(st)) for s, n, nt, st in zip(shapes, N, n_test, stops, strict=True))
    executed = sum(cell_flops(s, int(n), int(nt), int(st))
                   for s, n, nt, st in zip(shapes, attn["N_pad"], n_test, stops, strict=True))  # fmt: skip
    peak = gemm["best"]
    steady, whole = attn["steady_s"], attn["whole_s"]
    aot = attn.get("aot")
    a = {
        "strategy": attn["strategy"], "chunks": attn["chunks"], "chunk_sizes": attn["chunk_sizes"],
        "whole_s": _r(whole, 3), "steady_s": _r(steady, 3),
        "whole_cpu_s": _r(attn["whole_cpu_s"], 3), "steady_cpu_s": _r(attn["steady_cpu_s"], 3),
        "cores_used_steady": _r(attn["steady_cpu_s"] / steady, 2),
        "compile_s_aot": _r(aot["compile_s"], 3) if aot else None, "lower_s_aot": _r(aot["lower_s"], 3) if aot else None,
        "programs_compiled": aot["programs"] if aot else None,
        "whole_minus_steady_s": _r(whole - steady, 3),
        "seconds_per_cell_steady": _r(steady / K), "seconds_per_cell_whole": _r(whole / K),
        "cells_per_s_steady": _r(K / steady, 3), "cells_per_s_whole": _r(K / whole, 3),
        "model_steps": int(stops.sum()), "model_steps_per_s_steady": _r(stops.sum() / steady, 2),
        "flops_useful": int(useful), "flops_executed_with_padding": int(executed),
        "flops_per_s_steady": _r(useful / steady, 0), "peak_fraction_steady": _sig(useful / steady / peak),
        "flops_per_s_whole": _r(useful / whole, 0), "peak_fraction_whole": _sig(useful / whole / peak),
        "padding_overhead": _r(executed / useful, 3), "cold_run_equals_warm_run": attn["cold_equals_warm"],
        "status_counts": {s: int((attn["status"] == s).sum()) for s in np.unique(attn["status"])},
        "peak_rss_mb": _r(attn["peak_rss_mb"], 1), "rss_before_training_mb": _r(rss_start_mb, 1),
    }  # fmt: skip
    report: dict[str, Any] = {
        "suite": suite, "experiment": experiment, "scale": scale, "seed": seed, "grid_cells": grid_cells, "cells": K,
        "machine": {"cpus": cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "jax": jax.__version__, "jax_backend": jax.default_backend(),
                    "xla_flags": os.environ.get("XLA_FLAGS", "")},
        "gemm_jax": {"n": gemm["n"], "best_flops_per_s": _r(gemm["best"], 0), "median_flops_per_s": _r(gemm["median"], 0)},
        "flop_model": {
            "per_sample_forward": flops_per_sample(shapes[0])["forward"],
            "per_sample_backward": flops_per_sample(shapes[0])["backward"], "update": flops_update(shapes[0]),
            "note": "contractions only, 2 FLOPs per multiply-add; attnlab's count: forward+backward of the N real "
                    "samples at t = 0..stop, stop updates, a final forward of the train and test sets (padding "
                    "excluded; 'executed' includes it); the baseline's: forward of train and test sets at every "
                    "step, backward and update at t < stop",
        },
        "attnlab": a, "baseline": None, "ratio": None, "agreement": None, "notes": [],
    }  # fmt: skip
    rows = []
    for i, c in enumerate(cells):
        row = {"id": grid.cell_id(c), "N": int(N[i]), "mu": c.get("data.mu"), "rep": c.get("rep"),
               "block": c.get("block"), "attnlab_test_loss": _r(attn["test_loss"][i], 6),
               "attnlab_stop_step": int(stops[i]), "attnlab_status": str(attn["status"][i]),
               "attnlab_seconds_chunk_share": _r(attn["seconds"][i], 4)}  # fmt: skip
        if snr is not None:
            row["snr"] = _r(snr(c), 4)
        rows.append(row)
    if base is not None and len(base_idx):
        nb = len(base_idx)
        b_sec = float(base["seconds"].sum())
        per_cell = b_sec / nb
        b_shapes = [shapes[i] for i in base_idx]
        b_flops = sum(cell_flops(s, int(N[i]), int(n_test[i]), int(st), "paper")
                      for s, i, st in zip(b_shapes, base_idx, base["stop_step"], strict=True))  # fmt: skip
        b_steps = int(base["stop_step"].sum())
        a_flops_same = sum(cell_flops(shapes[i], int(N[i]), int(n_test[i]), int(stops[i])) for i in base_idx)
        report["baseline"] = {
            "implementation": "PyTorch, one model at a time: nn.Linear (default init / init_scale), torch.optim.SGD, "
                              "full batch, test loss at every step; data = attnlab's (same key), init draws differ",
            "torch": base["torch_version"], "threads": base["threads"], "cells": nb,
            "extrapolated": nb < K, "seconds": _r(b_sec, 3), "seconds_per_cell": _r(per_cell),
            "cpu_s": _r(base["cpu_s"].sum(), 3), "cores_used": _r(base["cpu_s"].sum() / b_sec, 2),
            "warmup_s_untimed": _r(base["warmup_s"], 3),
            "extrapolated_seconds_for_all_cells": _r(per_cell * K, 2),
            "model_steps": b_steps, "model_steps_per_s": _r(b_steps / b_sec, 2),
            "flops": int(b_flops), "flops_per_s": _r(b_flops / b_sec, 0),
            "peak_fraction_of_jax_gemm": _sig(b_flops / b_sec / peak),
            "gemm_torch_best_flops_per_s": _r(base["gemm"]["best"], 0),
            "peak_fraction_of_torch_gemm": _sig(b_flops / b_sec / base["gemm"]["best"]),
            "status_counts": {s: int((base["status"] == s).sum()) for s in np.unique(base["status"])},
            "peak_rss_mb_after_baseline": _r(base["peak_rss_mb"], 1),
        }  # fmt: skip
        report["ratio"] = {
            "steady": _r(per_cell / (steady / K), 3), "whole": _r(per_cell / (whole / K), 3),
            "per_model_step_steady": _r((b_sec / max(b_steps, 1)) / (steady / max(int(stops.sum()), 1)), 3),
            "steady_cpu_time": _r(float(base["cpu_s"].sum()) / nb / (attn["steady_cpu_s"] / K), 3),
            # steady ≈ work × efficiency: how much more arithmetic the paper's loop does on the same cells
            # (mostly the test loss at every step), and how much faster attnlab does each FLOP
            "work_baseline_over_attnlab": _r(b_flops / a_flops_same, 3),
            "flops_per_s_attnlab_over_baseline": _r((useful / steady) / (b_flops / b_sec), 3),
            "whole_cpu_time": _r(float(base["cpu_s"].sum()) / nb / (attn["whole_cpu_s"] / K), 3),
            "definition": "baseline seconds per cell / attnlab seconds per cell (steady: compiled programs reused; "
                          "whole: the first run, compilation included); *_cpu_time: the same with process CPU "
                          "seconds (less sensitive to other jobs on a shared machine, but it also counts how many "
                          "cores each side keeps busy: see cores_used)"
                          + (f"; baseline per cell measured on {nb} of the {K} cells and extrapolated" if nb < K else ""),
        }  # fmt: skip
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
        report["agreement"] = agreement(attn["test_loss"][idx], base["test_loss"], LEVEL, stops[idx], base["stop_step"])
        report["agreement"]["a"], report["agreement"]["b"] = "attnlab", "baseline"
        for j, i in enumerate(base_idx):
            rows[i].update(baseline_test_loss=_r(base["test_loss"][j], 6), baseline_stop_step=int(base["stop_step"][j]),
                           baseline_status=str(base["status"][j]), baseline_seconds=_r(base["seconds"][j], 4))  # fmt: skip
        if nb < K:
            report["notes"].append(f"baseline ran on a seeded sub-subset of {nb} of the {K} cells; its time per cell is "
                                   "extrapolated to all of them")  # fmt: skip
    else:
        report["notes"].append("no baseline run (--baseline-cells 0)")
    report["notes"].append("times are measured in this one process; the steady run and the baseline alternate chunk by "
                           "chunk so both see the same load (ratio.steady_by_chunk: their spread); the compiling run "
                           "comes first, alone. On a shared machine, repeat for spread")  # fmt: skip
    report["per_cell"] = rows
    return report


def render(report: dict, console: Console) -> None:
    """A short human table of the report."""
    a, b, r, g = report["attnlab"], report["baseline"] or {}, report["ratio"] or {}, report["agreement"]
    t = Table(title=f"attnlab bench {report['suite']} ({report['experiment']}, {report['scale']}): "
                    f"{report['cells']} of {report['grid_cells']} cells")  # fmt: skip
    for col in ("", "attnlab", "serial PyTorch"):
        t.add_column(col, overflow="fold")
    fmt = lambda x, spec="": "—" if x is None else format(x, spec)
    bcells = f"{b.get('cells')}" + (" (extrapolated)" if b.get("extrapolated") else "") if b else "—"
    t.add_row("cells", str(report["cells"]), bcells)
    t.add_row("s / cell (steady)", fmt(a["seconds_per_cell_steady"], ".3f"), fmt(b.get("seconds_per_cell"), ".3f"))
    t.add_row("s / cell (whole, incl. compile)", fmt(a["seconds_per_cell_whole"], ".3f"), fmt(b.get("seconds_per_cell"), ".3f"))
    t.add_row("cells / s (steady)", fmt(a["cells_per_s_steady"], ".2f"), "—")
    t.add_row("model-steps / s", fmt(a["model_steps_per_s_steady"], ".1f"), fmt(b.get("model_steps_per_s"), ".1f"))
    t.add_row("GFLOP/s (analytic count)", fmt(a["flops_per_s_steady"] and a["flops_per_s_steady"] / 1e9, ".1f"),
              fmt(b.get("flops_per_s") and b["flops_per_s"] / 1e9, ".1f"))  # fmt: skip
    t.add_row("fraction of JAX GEMM peak", fmt(a["peak_fraction_steady"], ".3f"), fmt(b.get("peak_fraction_of_jax_gemm"), ".3f"))
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
        console.print(
            f"agreement on {g['cells']} cells: mean |Δ test loss| {g['mean_abs_diff']:.4f} (max {g['max_abs_diff']:.4f}); "
            f"{g['different_side']} cell(s) on different sides of {g['level']:g}; "
            f"same stop step {g['same_stop_step']}/{g['cells']}"
            + (f"; mean Δ (attnlab − baseline) 95% CI [{g['mean_diff_ci95'][0]:.4f}, {g['mean_diff_ci95'][1]:.4f}]"
               if g.get("mean_diff_ci95") else ""),
            highlight=False,
        )
    for n in report["notes"]:
        console.print(f"note: {n}", highlight=False, soft_wrap=True)


def run_suite(
    suite: str = "jiang2024", cells: int = 100, baseline_cells: int | None = None, seed: int = 0,
    scale: str = "paper", aot: bool = True, progress: bool = True, console: Console | None = None, gemm_n: int = 2048,
) -> dict:  # fmt: skip
    """Select the cells, check the baseline can run, time attnlab, then the baseline; the report."""
    if cells < 1:
        raise AttnlabError(f"--cells: must be ≥ 1, got {cells}")
    nb = cells if baseline_cells is None else baseline_cells
    if not 0 <= nb <= cells:
        raise AttnlabError(f"--baseline-cells: must lie in [0, --cells = {cells}], got {nb}")
    if nb and not torch_available():  # fail before any long run (without importing torch yet: RSS)
        raise AttnlabError(TORCH_MISSING)
    exp, spec, all_cells = suite_cells(suite, scale)
    chosen = select_cells(all_cells, cells, seed)
    for c in chosen:
        Shape.of(c)
        if nb:
            _check_recipe(c)
    say = (console or Console(stderr=True)).print
    say(f"bench {suite}: {len(chosen)} of {len(all_cells)} {exp.id} {scale} cells; measuring JAX GEMM peak", highlight=False)
    rss0 = _rss_mb()
    gemm = gemm_flops_jax(gemm_n)
    sub = (select_cells(chosen, nb, seed + 1) if nb < len(chosen) else chosen) if nb else []
    sub_ids = {grid.cell_id(c) for c in sub}
    pos = {grid.cell_id(c): i for i, c in enumerate(chosen)}
    base_idx = sorted(pos[i] for i in sub_ids)
    state: dict[str, Any] = {}

    def baseline_between(ch: executors.Chunk, advance: Callable[[int], None]) -> None:
        if "b" not in state:  # torch is imported only now: after attnlab's compiling run and its RSS
            state["b"] = Baseline(exp.tags, gemm_n=gemm_n)
        state["b"].run([c for c in ch.cells if grid.cell_id(c) in sub_ids], advance)

    say("attnlab: a run that compiles, then a steady run chunk by chunk"
        + (f", each chunk followed by the serial baseline on its cells ({len(sub)} in all)" if sub else "")
        + ("; then ahead-of-time compile timing" if aot else ""), highlight=False)  # fmt: skip
    attn = run_attnlab(chosen, exp.tags, spec.memory_budget_gb * 1e9, aot=aot, progress=progress,
                       between=baseline_between if sub else None, between_total=len(sub))  # fmt: skip
    gemm2 = gemm_flops_jax(gemm_n)
    gemm = gemm if gemm["best"] >= gemm2["best"] else gemm2
    base = state["b"].result([chosen[i] for i in base_idx]) if sub else None
    snr = None
    if suite == "jiang2024":
        snr = lambda c: c["data.mu"] / (c["data.sigma_p"] * c["data.d"] ** 0.5)
    return build_report(suite=suite, experiment=exp.id, scale=scale, seed=seed, grid_cells=len(all_cells),
                        cells=chosen, attn=attn, base=base, base_idx=base_idx, gemm=gemm, rss_start_mb=rss0, snr=snr)  # fmt: skip
