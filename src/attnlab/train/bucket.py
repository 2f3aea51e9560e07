"""The vectorised path: a bucket of cells as one compiled program (vmap or sequential strategy),
the programs kept per process, and the persistent compile cache."""

from __future__ import annotations

import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.errors import AttnlabError
from attnlab.train import step as per_cell
from attnlab.train.step import plain_params
from attnlab.train.types import CAP, CONVERGED, DIVERGED, Problem, TrainConfig

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
    executables: dict = field(default_factory=dict)  # sequential's, compiled per input signature (Futures)


def programs(problem: Problem, cfg: TrainConfig) -> _Programs:
    recs = per_cell.recorders(problem, cfg)
    scheds = {name: jnp.asarray(steps, dtype=jnp.int32) for name, steps, _ in recs}
    start = jax.vmap(lambda v, shared: per_cell.start(problem, cfg, v, shared), in_axes=(0, None))
    step_loss = jax.vmap(
        lambda tr, f, d, v, t: per_cell.step_loss(problem, cfg, tr, f, d, v, t), in_axes=(0, 0, 0, 0, None)
    )
    full_loss = jax.vmap(lambda tr, f, d: per_cell.full_loss(problem, tr, f, d))
    surely_above = jax.vmap(lambda tr, f, d: per_cell.surely_above(problem, cfg, tr, f, d))
    screen = SCREEN and bool(cfg.batch_size)
    update = jax.vmap(lambda g, s, tr, lr: per_cell.update(problem, cfg, g, s, tr, lr))
    # a probe set traced once per program, not at each call site (the shapes in begin, the record
    # in the loop, finish): a Jacobian probe's trace took seconds. Inlined, so the program is the
    # same (as a call it changed float32 probes by an ulp between the screened and plain rules)
    rec_fns = {name: jax.jit(jax.vmap(fn), inline=True) for name, _, fn in recs}
    final = jax.vmap(lambda tr, f, d: per_cell.final_metrics(problem, cfg, tr, f, d))

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
            above = jnp.zeros_like(cell["done"])  # cells whose stop quantity is shown above the threshold
            if cfg.batch_size:  # the full training loss (and aux), only when a rule or probe needs it
                probe = jnp.zeros((), bool)
                for d in due.values():
                    probe = probe | d
                if screen:  # a judged step with no probe due: the full pass only where a screen cannot decide
                    above = jax.lax.cond(
                        judge & ~probe, lambda tr: surely_above(tr, fixed, data), lambda tr: above, cell["train"]
                    )
                need = probe | (judge & ~jnp.all(above))
                full, (full_aux, full_judged) = jax.lax.cond(
                    need, lambda tr: full_loss(tr, fixed, data), skipped, cell["train"]
                )
            else:
                full, full_aux, full_judged = loss, aux, judged
            finite = jnp.isfinite(loss)
            hit = judge & ~above & (full_judged < cfg.loss_threshold)
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

    jit = functools.partial(jax.jit, compiler_options=dict(cfg.xla_options) or None)
    sequential = jit(lambda v, shared: jax.lax.map(lambda v1: one_cell(v1, shared), v))
    return _Programs(jit(begin), jit(advance), jit(finish), sequential)


# A judged step of a mini-batch run first screens the training set (per_cell.surely_above) and
# skips the full pass where every cell is shown above the threshold; False builds the plain rule
# (tests compare the two).
SCREEN = True

# Compiled programs by (bucket key, recipe), most recently used last. Bounded: every XLA:CPU
# executable holds ~10 memory mappings, and a process that kept all of them (a grid of thousands
# of bucket shapes, or the test suite) crashed inside XLA at the kernel's 65530-mapping limit.
PROGRAMS: OrderedDict[tuple, _Programs] = OrderedDict()
PROGRAMS_KEPT = 32
PROGRAMS_BUILT = {"count": 0}  # programs built in this process (the Ray workers report it)
# seconds in this process: spent compiling the CPU strategy's programs (any thread), and spent by
# train_bucket waiting for one (what a compile ahead did not hide); executables compiled
COMPILE_TIME = {"compiled_s": 0.0, "waited_s": 0.0, "executables": 0}


_LOCK = threading.Lock()  # PROGRAMS and the executables: a chunk's program may compile in another thread


def kept_program(build: Callable, problem: Problem, cfg: TrainConfig, cache_key):
    """``build(problem, cfg)``, kept under (``build``, ``cache_key``, ``cfg``) when a key is
    given: the caller promises that the key determines the problem (a bucket's static fields
    and pads), so a later call with the same key reuses the compiled programs."""
    with _LOCK:
        if cache_key is None:
            PROGRAMS_BUILT["count"] += 1
            return build(problem, cfg)
        key = (build.__name__, cache_key, cfg)
        progs = PROGRAMS.get(key)
        if progs is None:
            progs = PROGRAMS[key] = build(problem, cfg)
            PROGRAMS_BUILT["count"] += 1
            while len(PROGRAMS) > PROGRAMS_KEPT:
                PROGRAMS.popitem(last=False)  # its executables are freed with it
        else:
            PROGRAMS.move_to_end(key)
        return progs


def sequential_executable(progs: _Programs, v: dict, shared):
    """``progs.sequential`` compiled ahead of time for the shapes of (``v``, ``shared``), once per
    signature: a call from another thread that finds the compile under way waits for it rather
    than compiling again (:func:`compile_ahead` starts the next chunk's while this one trains).
    The executable is the jitted function's own (same lowering), so results are identical."""
    sig = (jax.config.jax_enable_x64, jax.tree.structure((v, shared)), *map(jax.typeof, jax.tree.leaves((v, shared))))
    with _LOCK:
        pending = progs.executables.get(sig)
        owner = pending is None
        if owner:
            pending = progs.executables[sig] = Future()
    if owner:
        try:
            t0 = time.perf_counter()
            pending.set_result(progs.sequential.lower(v, shared).compile())
            with _LOCK:
                COMPILE_TIME["compiled_s"] += time.perf_counter() - t0
                COMPILE_TIME["executables"] += 1
        except BaseException as e:  # an interrupt too: a waiting thread must not wait forever
            with _LOCK:
                progs.executables.pop(sig, None)  # a later call compiles again (and raises its own error)
            pending.set_exception(e)
            raise
    return pending.result()


def compile_ahead(problem: Problem, cfg: TrainConfig, v: dict, shared, cache_key) -> None:
    """Compile the program ``train_bucket``'s ``sequential`` strategy would run on these inputs,
    and keep it under ``cache_key``: called from a background thread while another chunk trains,
    so the next chunk starts without waiting for its compile. XLA's compile and the training both
    release the interpreter, so the two overlap on the machine's cores. The caller enters the
    chunk's x64 mode, as ``train_bucket``'s does (other thread-local JAX settings are not used)."""
    v = {k: jnp.asarray(x) for k, x in v.items()}
    sequential_executable(kept_program(programs, problem, cfg, cache_key), v, shared)


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
    progs = kept_program(programs, problem, cfg, cache_key)
    v = {k: jnp.asarray(x) for k, x in v.items()}
    if strategy == "sequential":
        t0 = time.perf_counter()
        run = sequential_executable(progs, v, shared)
        with _LOCK:
            COMPILE_TIME["waited_s"] += time.perf_counter() - t0
        return jax.tree.map(np.asarray, run(v, shared))
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
