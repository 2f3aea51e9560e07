"""The serial PyTorch baseline: each paper's model in plain PyTorch, trained one cell at a time as a paper's script trains it."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import train as T
from attnlab.bench.flops import Loop
from attnlab.bench.measure import cpu_count, rss_mb
from attnlab.bench.suites import Suite, get_suite, model_hparams
from attnlab.engine import grid
from attnlab.engine.grid import cell_parts
from attnlab.errors import AttnlabError
from attnlab.parts import tokens
from attnlab.problem import Composition

TORCH_VERSION = "2.13.0"
TORCH_MISSING = (
    "the serial baseline needs PyTorch, which is not installed: run `make bench` (installs the `bench` extra) or "
    f"`.venv/bin/pip install torch=={TORCH_VERSION}` (CPU wheel); or pass --baseline-cells 0 to time attnlab alone"
)


# ---------------------------------------------------------------- PyTorch models (torch is imported lazily)


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
    engine draws them (:func:`attnlab.train.step.batch`: epoch e = ⌊t/n_b⌋ is a permutation of the N
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
            row = serial_cell(self.torch, self.suite, c, data, batches)
            self.rows[grid.cell_id(c)] = row | {"draw_seconds": self._draw(data)}
            if advance is not None:
                advance(1)

    def _draw(self, data: dict) -> float:
        """Seconds a paper's script spends drawing this cell's inputs (training and test) itself:
        ``torch.randn`` of as many numbers (the cell is trained on attnlab's draw of them, so that
        the two sides' outcomes can be compared; this times the draw it stands for)."""
        n = sum(int(np.size(data[k])) for k in ("X", "X_test"))
        t0 = time.perf_counter()
        self.torch.randn(n)
        return time.perf_counter() - t0

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
            "draw_seconds": col("draw_seconds"),
            "peak_rss_mb": rss_mb(),
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
