"""Running a suite: attnlab's side (the engine, twice, and the ahead-of-time compile), the statistics, and run_suite."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from rich.console import Console
from rich.progress import Progress

from attnlab import train as T
from attnlab.bench.baseline import TORCH_MISSING, Baseline, torch_available
from attnlab.bench.measure import gemm_flops_jax, rng_rates, rss_mb
from attnlab.bench.report import build_report
from attnlab.bench.suites import get_suite, select_cells, suite_cells
from attnlab.engine import executors, grid
from attnlab.engine.plan import Chunk, Plan
from attnlab.engine.store import Store
from attnlab.errors import AttnlabError
from attnlab.experiments.pipeline import table_columns
from attnlab.problem import Composition
from attnlab.train import bucket

# ---------------------------------------------------------------- statistics


# ---------------------------------------------------------------- attnlab side


def _cols(store: Store, cells: list[dict]) -> dict[str, np.ndarray]:
    return table_columns(store.assemble([grid.cell_id(c) for c in cells], write=False))


def aot_compile(chunks: list[Chunk], strategy: str | None = None) -> dict:
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
            progs = bucket.programs(problem, cfg)
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
    between: Callable[[Chunk, Callable[[int], None]], None] | None = None,
    between_total: int = 0,
    outcome: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None,
) -> dict:
    """Train ``cells`` through the engine twice and time the compilation ahead of time.

    whole   ``run_cells`` into a fresh store: what ``attnlab reproduce`` does, compiles included
    steady  the same chunks again (``train_chunk`` + ``write_part``, as ``run_cells`` runs them) with
            the compiled programs reused, in groups of as many chunks as the local executor trains
            at once (its ``workers``; ``chunk_s``: seconds per group); ``between(chunk, advance)``
            runs after each group, for each of its chunks (the baseline on that chunk's cells,
            ``between_total`` in all, calling ``advance(n)`` as it goes), so both sides see the
            same load of a shared machine

    Per-cell outcomes (``outcome(columns)``, default the test loss) come from the steady run; the
    whole run's are checked to be the same."""
    tags = tuple(tags)
    outcome = outcome or (lambda cols: cols["test_loss"].astype(float))
    plan = Plan.of(cells, tags, memory_budget)
    chunks = plan.chunks
    ex = executors.LocalExecutor(ahead=False)  # the steady run's: programs are compiled by then
    groups = [chunks[i : i + ex.workers] for i in range(0, len(chunks), ex.workers)]
    with tempfile.TemporaryDirectory(prefix="attnlab-bench-") as d:
        store = Store(Path(d))
        t0, c0 = time.perf_counter(), time.process_time()
        executors.run_cells(plan, store, progress=progress)
        whole, whole_cpu = time.perf_counter() - t0, time.process_time() - c0
        cold = _cols(store, cells)
    rss_after = rss_mb()  # the compiling run holds the most memory; the baseline comes later
    chunk_s, chunk_cpu_s = [], []
    what = "steady run" + (" + baseline" if between else "")
    with tempfile.TemporaryDirectory(prefix="attnlab-bench-") as d, Progress(disable=not progress) as bar:
        store = Store(Path(d))
        task = bar.add_task(what, total=len(cells) + (between_total if between else 0))
        for group in groups:
            t0, c0 = time.perf_counter(), time.process_time()
            for table in ex.map(executors.train_chunk, group):
                store.write_part(table)
            chunk_s.append(time.perf_counter() - t0)
            chunk_cpu_s.append(time.process_time() - c0)
            bar.advance(task, sum(len(ch.cells) for ch in group))
            if between is not None:
                for ch in group:
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
        "chunk_ids": [[grid.cell_id(c) for ch in group for c in ch.cells] for group in groups],
        "workers": ex.workers,
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
    rss0 = rss_mb()
    gemm = gemm_flops_jax(gemm_n)
    rng = rng_rates()
    sub = (select_cells(chosen, nb, seed + 1) if nb < len(chosen) else chosen) if nb else []
    sub_ids = {grid.cell_id(c) for c in sub}
    pos = {grid.cell_id(c): i for i, c in enumerate(chosen)}
    base_idx = sorted(pos[i] for i in sub_ids)
    state: dict[str, Any] = {}

    def baseline_between(ch: Chunk, advance: Callable[[int], None]) -> None:
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
        rng=rng,
        tags=exp.tags,
    )
