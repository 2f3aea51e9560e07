"""Executors: run the cells a store does not have yet, chunk by chunk, and write their rows.

``local`` trains every chunk in this process (one compiled program per bucket, reused across
its chunks) behind a rich progress bar: cells done / total, rate, ETA.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import jax
import numpy as np
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from attnlab.sweep import grid
from attnlab.sweep.store import Store
from attnlab.train import STATUS_NAMES, train_bucket

EXECUTORS = ("local",)


def rows_for_chunk(family: grid.Family, static: dict, cells: list[dict], n_pad: int) -> list[dict]:
    """Train one chunk of cells (one bucket), their data padded to ``n_pad`` samples; return
    one row per cell."""
    problem = family.problem(static, n_pad)
    cfg = family.train_config(static)
    dtype = static.get("dtype", "float32")
    v = grid.batch_inputs(family, cells, dtype)
    t0 = time.perf_counter()
    with jax.enable_x64(dtype == "float64"):
        out, traces = train_bucket(problem, cfg, v, cache_key=(family.name, tuple(static.items()), n_pad))
    seconds = (time.perf_counter() - t0) / len(cells)
    rows = []
    for i, c in enumerate(cells):
        row = {"id": grid.cell_id(c), **c}
        for k, x in out.items():
            row[k] = x[i].item()
        row["status"] = STATUS_NAMES[int(out["status"][i])]
        row["seconds"] = seconds  # the chunk's wall time shared out evenly
        if traces:
            row["trace_step"] = list(cfg.log_steps)
            for k, x in traces.items():
                row[f"trace_{k}"] = np.asarray(x[i], dtype=np.float64).tolist()
        rows.append(row)
    return rows


def run_cells(
    family: grid.Family,
    cells: list[dict],
    store: Store,
    memory_budget: float = 2e9,
    executor: str = "local",
    progress: bool = True,
    on_chunk: Callable[[int], None] | None = None,
) -> int:
    """Train every cell whose id is not yet in ``store``; returns how many were trained."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor: unknown {executor!r}; available: {', '.join(EXECUTORS)}")
    done = store.done_ids()
    # Chunks (and so each cell's padded N) are planned over *all* cells, finished or not, so a
    # resumed run trains every remaining cell exactly as an uninterrupted run would.
    plan = []
    for key, bucket in grid.buckets(family, cells).items():
        static = dict(key)
        for chunk in grid.chunks(family, static, bucket, memory_budget):
            n_pad = max(c[family.size_field] for c in chunk)
            todo = [c for c in chunk if grid.cell_id(c) not in done]
            if todo:
                plan.append((static, todo, n_pad))
    todo = sum(len(ch) for _, ch, _ in plan)
    if not todo:
        return 0
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("cells"),
               TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()]  # fmt: skip
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task(f"{family.name}: {len(plan)} chunk(s)", total=todo, rate="")
        t0 = time.perf_counter()
        n = 0
        for static, chunk, n_pad in plan:
            store.write_part(rows_for_chunk(family, static, chunk, n_pad))
            n += len(chunk)
            bar.update(task, advance=len(chunk), rate=f"{n / (time.perf_counter() - t0):.1f} cells/s")
            if on_chunk:
                on_chunk(n)
    return todo
