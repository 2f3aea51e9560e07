"""Plan, execute, write: how the cells a store does not have yet get trained.

    plan      a pure, deterministic list of chunks (one bucket's cells, padded sizes)
    execute   ``executor.map(train_chunk, chunks)``: each chunk comes back as an Arrow table
    write     the driver alone writes each table as a Parquet part (atomic rename), so a
              distributed executor needs no shared file system

``local`` trains every chunk in this process (one compiled program per bucket, reused across
its chunks) behind a rich progress bar: cells done / total, rate, ETA.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import jax
import numpy as np
import pyarrow as pa
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from attnlab.problem import Composition
from attnlab.provenance import provenance
from attnlab.sweep import grid
from attnlab.sweep.store import Store
from attnlab.train import STATUS_NAMES, default_strategy, train_bucket

EXECUTORS = ("local",)


@dataclass(frozen=True)
class Chunk:
    """One bucket's cells, trained together, padded to ``pads``."""

    static: tuple  # the bucket key: ((field, value), ...)
    cells: tuple[dict, ...]
    pads: tuple  # ((size field, padded value), ...)
    tags: tuple[str, ...] = ()


def plan(cells: list[dict], done: set[str], memory_budget: float, tags: tuple[str, ...] = ()) -> list[Chunk]:
    """The chunks of the cells not in ``done``. Chunks (and so each cell's padding) are planned
    over *all* cells, finished or not, so a resumed run trains every remaining cell exactly as
    an uninterrupted run would. Pure and deterministic."""
    out = []
    for key, bucket in grid.buckets(cells, tags).items():
        static = dict(key)
        comp = Composition.of(static, tags)
        for chunk, pads in grid.chunks(comp, static, bucket, memory_budget):
            todo = tuple(c for c in chunk if grid.cell_id(c) not in done)
            if todo:
                out.append(Chunk(key, todo, tuple(sorted(pads.items())), tuple(tags)))
    return out


def train_chunk(chunk: Chunk) -> pa.Table:
    """Train one chunk; one row per cell: the cell's fields, metrics, status, probe traces,
    provenance (and its final parameters when ``train.save_params``)."""
    static, pads = dict(chunk.static), dict(chunk.pads)
    comp = Composition.of(static, chunk.tags)
    problem, cfg = comp.problem(static, pads), comp.train_config(static)
    cells = list(chunk.cells)
    dtype = static.get("train.dtype", "float32")
    v = grid.batch_inputs(comp, cells)
    t0 = time.perf_counter()
    with jax.enable_x64(dtype == "float64"):
        res = train_bucket(problem, cfg, v, shared=comp.shared(static), cache_key=(chunk.static, chunk.pads))
    seconds = (time.perf_counter() - t0) / len(cells)
    prov = provenance(default_strategy(), dtype)
    rows = []
    for i, c in enumerate(cells):
        row = {"id": grid.cell_id(c), **c}
        for k, x in res["metrics"].items():
            row[k] = x[i].item()
        row["status"] = STATUS_NAMES[int(res["metrics"]["status"][i])]
        row["seconds"] = seconds  # the chunk's wall time shared out evenly
        if "traces" in res:
            row["trace_step"] = list(cfg.log_steps)
            for k, x in res["traces"].items():
                row[f"trace_{k}"] = np.asarray(x[i], dtype=np.float64).tolist()
        if "arrays" in res:
            row["array_step"] = list(cfg.array_log_steps)
            for k, x in res["arrays"].items():
                a = np.asarray(x[i], dtype=np.float64)
                row[f"array_{k}"] = a.reshape(len(cfg.array_log_steps), -1).tolist()
                row[f"array_{k}_shape"] = list(a.shape[1:])
        if "params" in res:
            buf = io.BytesIO()
            np.savez(buf, **{k: np.asarray(p[i]) for k, p in res["params"].items()})
            row["params_npz"] = buf.getvalue()
        rows.append(row | prov)
    return pa.Table.from_pylist(rows)


class LocalExecutor:
    """Runs every chunk in this process, in order."""

    def map(self, fn: Callable[[Chunk], pa.Table], chunks: Iterable[Chunk]) -> Iterator[pa.Table]:
        for chunk in chunks:
            yield fn(chunk)


def make_executor(name: str):
    if name not in EXECUTORS:
        raise ValueError(f"executor: unknown {name!r}; available: {', '.join(EXECUTORS)}")
    return LocalExecutor()


def run_cells(
    cells: list[dict],
    store: Store,
    tags: tuple[str, ...] = (),
    memory_budget: float = 2e9,
    executor: str = "local",
    progress: bool = True,
    on_chunk: Callable[[int], None] | None = None,
) -> int:
    """Train every cell whose id is not yet in ``store``; returns how many were trained."""
    ex = make_executor(executor)
    chunks = plan(cells, store.done_ids(), memory_budget, tags)
    todo = sum(len(ch.cells) for ch in chunks)
    if not todo:
        return 0
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("cells"),
               TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()]  # fmt: skip
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task(f"{len(chunks)} chunk(s)", total=todo, rate="")
        t0 = time.perf_counter()
        n = 0
        for table in ex.map(train_chunk, chunks):
            store.write_part(table)
            n += table.num_rows
            bar.update(task, advance=table.num_rows, rate=f"{n / (time.perf_counter() - t0):.1f} cells/s")
            if on_chunk:
                on_chunk(n)
    return todo
