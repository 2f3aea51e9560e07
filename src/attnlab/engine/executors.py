"""Plan, execute, write: how the cells a store does not have yet get trained.

    plan      a pure, deterministic list of chunks (one bucket's cells, padded sizes):
              :mod:`attnlab.engine.plan`
    execute   ``executor.map(train_chunk, chunks)``: each chunk comes back as an Arrow table
    write     the driver alone writes each table as a Parquet part (atomic rename), so a
              distributed executor needs no shared file system

``local`` trains every chunk in this process (one compiled program per bucket, reused across
its chunks); ``ray`` trains them on a pool of Ray workers (:class:`RayExecutor`), locally or on a
cluster (``RAY_ADDRESS``). Either way the driver writes each part as it arrives, behind a rich
progress bar: cells done / total, rate, ETA.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any

import jax
import numpy as np
import pyarrow as pa
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from attnlab import fastcheck, parts
from attnlab.engine import grid, rows
from attnlab.engine.plan import Chunk, Plan
from attnlab.engine.store import Store, part_name
from attnlab.errors import AttnlabError
from attnlab.problem import Composition
from attnlab.provenance import provenance
from attnlab.train import compile_ahead, default_strategy, train_bucket

EXECUTORS = ("local", "ray")
RAY_INSTALL = 'pip install -c constraints.txt -e ".[ray]"'


def _setup(chunk: Chunk):
    """(composition, static fields, problem, train config, per-cell inputs) of a chunk."""
    static, pads = dict(chunk.static), dict(chunk.pads)
    comp = Composition.of(static, chunk.tags)
    return comp, static, comp.problem(static, pads), comp.train_config(static), grid.batch_inputs(comp, chunk.cells)


def train_chunk(chunk: Chunk) -> pa.Table:
    """Train one chunk; one row per cell: the cell's fields, metrics, status, probe traces,
    provenance (and its final parameters when ``train.save_params``)."""
    comp, static, problem, cfg, v = _setup(chunk)
    dtype = static.get("train.dtype", "float32")
    fastcheck.ensure(comp, static, {k: x[0] for k, x in v.items()}, dict(chunk.pads))  # an outside model's fast paths
    t0 = time.perf_counter()
    with jax.enable_x64(dtype == "float64"):
        res = train_bucket(problem, cfg, v, shared=comp.shared(static), cache_key=(chunk.static, chunk.pads))
    seconds = (time.perf_counter() - t0) / len(chunk.cells)
    return rows.table(rows.rows(list(chunk.cells), res, cfg, seconds, provenance(default_strategy(), dtype)))


def compile_chunk(chunk: Chunk) -> None:
    """Compile the program ``train_chunk`` will run for ``chunk`` (and keep it), training nothing;
    under the CPU strategy only (an accelerator's ``vmap`` strategy compiles as it goes)."""
    if default_strategy() != "sequential":
        return
    comp, static, problem, cfg, v = _setup(chunk)
    with jax.enable_x64(static.get("train.dtype", "float32") == "float64"):
        compile_ahead(problem, cfg, v, comp.shared(static), cache_key=(chunk.static, chunk.pads))


AHEAD = {train_chunk: compile_chunk}  # a chunk trainer -> what prepares a chunk for it ahead of time


def default_workers() -> int:
    """How many chunks the local executor trains at once: ``$ATTNLAB_WORKERS``, else on a CPU
    backend the cores this process may use (at most 4), on an accelerator 1 (its chunks share
    one device and run one after another anyway)."""
    raw = os.environ.get("ATTNLAB_WORKERS", "")
    if raw:
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if n < 1:
            raise AttnlabError(f"ATTNLAB_WORKERS: must be a whole number ≥ 1, got {raw!r}")
        return n
    if jax.default_backend() != "cpu":
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, 4))


def memory_available() -> float | None:
    """Bytes of memory available to new allocations now (Linux ``MemAvailable``), else None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class LocalExecutor:
    """Runs every chunk in this process, ``workers`` chunks at a time (one thread each), and
    yields each chunk's table as it finishes.

    Why several at once: a chunk's program is a loop of small products, and XLA:CPU keeps about
    one core busy with it (li2023's chunks on 2 cores ran within 5–12 % of their time on one); two
    chunks in two threads trained 1.5–2× the cells per second. Each chunk's program and inputs are
    its own, so its rows are the same whichever thread trains it and whatever runs beside it.
    Memory: up to ``workers`` chunks are held at once, each within the plan's memory budget;
    ``run_cells`` lowers ``workers`` where that many budgets exceed the memory available
    (:meth:`within`).

    As a chunk starts, the next one's program compiles in a background thread (for a trainer
    listed in ``AHEAD``; ``ahead``): on a cold compile cache a grid of many chunk shapes pays its
    compiles alongside its training (with two workers on 2 cores this was 4–8 % faster than
    without, on two of three ids). A compile that fails ahead is left for the chunk's own call to
    raise. With one worker, chunks train in the calling thread. If a chunk raises, no further
    chunk starts, the chunks already running finish and their tables are yielded, then the first
    error is raised."""

    def __init__(self, ahead: bool | None = None, workers: int | None = None):
        if ahead is None:  # $ATTNLAB_COMPILE_AHEAD=0 turns it off (e.g. where every core is already busy)
            ahead = os.environ.get("ATTNLAB_COMPILE_AHEAD", "1").lower() not in ("0", "off", "false", "no")
        self.ahead = ahead
        self.workers = default_workers() if workers is None else workers
        if self.workers < 1:
            raise ValueError(f"workers must be ≥ 1, got {self.workers}")

    def within(self, memory_budget: float) -> LocalExecutor:
        """This executor, or one with fewer workers where ``workers`` chunks of ``memory_budget``
        bytes each would not fit in the memory available now (at least one worker)."""
        avail = memory_available()
        fit = self.workers if avail is None else max(1, min(self.workers, int(avail // memory_budget)))
        return self if fit == self.workers else LocalExecutor(self.ahead, fit)

    def map(self, fn: Callable[[Chunk], pa.Table], chunks: Iterable[Chunk]) -> Iterator[pa.Table]:
        chunks = list(chunks)
        prepare = AHEAD.get(fn) if self.ahead and len(chunks) > 1 else None
        early = ThreadPoolExecutor(1, thread_name_prefix="attnlab-compile") if prepare else None

        def start(i: int) -> Chunk:  # chunk i starts: the next one's program compiles meanwhile
            if early and i + 1 < len(chunks):
                early.submit(_quietly, prepare, chunks[i + 1])
            return chunks[i]

        try:
            if self.workers == 1 or len(chunks) == 1:  # in this thread (the caller's JAX settings hold)
                for i in range(len(chunks)):
                    yield fn(start(i))
            else:
                yield from self._concurrent(fn, len(chunks), start)
        finally:
            if early:
                early.shutdown(wait=True, cancel_futures=True)

    def _concurrent(self, fn: Callable[[Chunk], pa.Table], n: int, start: Callable[[int], Chunk]) -> Iterator[pa.Table]:
        """At most ``workers`` of the ``n`` chunks in flight, started in plan order, each table
        yielded as it lands."""
        running, error, nxt = set(), None, 0
        with ThreadPoolExecutor(self.workers, thread_name_prefix="attnlab-chunk") as pool:
            try:
                while running or (nxt < n and error is None):
                    while nxt < n and error is None and len(running) < self.workers:
                        running.add(pool.submit(fn, start(nxt)))
                        nxt += 1
                    done, running = wait(running, return_when=FIRST_COMPLETED)
                    for f in done:
                        if f.exception() is not None:
                            error = error or f.exception()
                        else:
                            yield f.result()
            finally:
                for f in running:  # an interrupt, or the consumer stopped: start nothing new
                    f.cancel()
        if error is not None:
            raise error


def _quietly(fn: Callable, *args) -> None:
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 — the chunk's own call compiles again and raises it where it is seen
        pass


# ---------------------------------------------------------------- ray


def import_ray():
    """The ``ray`` module, or one AttnlabError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise AttnlabError(
            f"--executor ray: Ray is not installed. Install the optional extra in the attnlab checkout: "
            f"{RAY_INSTALL} (or pip install ray==2.60.0)"
        ) from None
    return ray


def _program_key(chunk: Chunk) -> tuple:
    """What ``train_bucket`` caches a compiled program under (besides the train config, which
    the static fields fix)."""
    return (chunk.static, chunk.pads)


class _Worker:
    """A long-lived Ray actor: one process that keeps ``train_bucket``'s compiled programs, so
    further chunks of a bucket it has trained skip the compile."""

    def run(self, fn: Callable[[Chunk], pa.Table], chunk: Chunk, modules: tuple = ()) -> tuple[pa.Table, dict]:
        """Train one chunk; ``modules``: the outside parts' files (:func:`attnlab.parts.bundle`)."""
        from attnlab import train

        parts.install(modules)
        before = train.PROGRAMS_BUILT["count"]
        t0 = time.perf_counter()
        table = fn(chunk)
        stat = {
            "pid": os.getpid(),
            "built": train.PROGRAMS_BUILT["count"] > before,
            "seconds": time.perf_counter() - t0,
            "cells": len(chunk.cells),
            "program": _program_key(chunk),
        }
        return table, stat


def _connect(ray, num_cpus: int | None) -> bool:
    """Join the Ray instance: an initialised one as it is; the cluster at ``RAY_ADDRESS`` (its
    workers get this process's attnlab package shipped to them, so they run the driver's code);
    else a new local instance with ``num_cpus`` (default: the CPUs this process may use).
    Returns whether the code was shipped."""
    if ray.is_initialized():
        return False
    quiet = {"logging_level": "WARNING", "log_to_driver": False}
    address = os.environ.get("RAY_ADDRESS")
    if address:
        import attnlab

        def cannot(reason: str) -> AttnlabError:
            return AttnlabError(
                f"--executor ray: cannot join the Ray cluster at RAY_ADDRESS={address} ({reason}). Is it running "
                f"(`ray status` on its head node)? If it uses token authentication, also set RAY_AUTH_MODE=token "
                f"and its token (RAY_AUTH_TOKEN, or the file ~/.ray/auth_token). Unset RAY_ADDRESS to run on a "
                f"local Ray instance instead."
            )

        # Ray itself retries an unreachable address for about ten minutes: try the port first.
        host, _, port = address.rpartition(":")
        if "://" not in address and host and port.isdigit():
            try:
                socket.create_connection((host, int(port)), timeout=10).close()
            except OSError as e:
                raise cannot(e.strerror or str(e)) from None
        try:
            ray.init(runtime_env={"py_modules": [os.path.dirname(attnlab.__file__)]}, **quiet)
        except ConnectionError as e:
            raise cannot(str(e)) from None
        return True
    cpus = num_cpus or len(os.sched_getaffinity(0))
    ray.init(num_cpus=cpus, include_dashboard=False, **quiet)
    return False


def _driver_code(table: pa.Table) -> pa.Table:
    """A table from a worker that ran shipped code, with the provenance of that code: the
    driver's commit and version (the worker sees an unpacked copy, no checkout)."""
    from attnlab.provenance import provenance

    prov = provenance("", "")
    for col in ("git_sha", "attnlab_version"):
        if col in table.column_names:
            i = table.column_names.index(col)
            table = table.set_column(i, col, pa.array([prov[col]] * table.num_rows, pa.string()))
    return table


class RayExecutor:
    """Trains chunks on a pool of Ray actors, one per CPU of the Ray instance (one per GPU where it
    has GPUs). Each chunk is one actor task returning an Arrow table; the driver hands tables on
    as they complete (``ray.wait``) and alone writes parts, so no shared file system is needed.

    Compile reuse: an actor keeps the compiled programs of the buckets it trained, and a free
    actor is given the next chunk of the bucket it trained last, else the bucket with the most
    chunks left that no actor holds, else a share of a held bucket if that saves time (see
    :meth:`_worth_sharing`): a bucket compiles once per actor that trains it, not once per chunk.
    ``stats`` records, per chunk: its index, the actor's pid, whether it had to build the program,
    seconds, attempts.

    Faults: when an actor's process dies (killed, out of memory, its node lost) its chunk goes to
    a fresh actor that replaces it, up to ``max_retries`` times per chunk. The driver does this
    rather than Ray's own actor restart + task retry, which was measured to spend the retries
    while the restarted process is still starting ("actor is restarting"). A chunk's result
    arrives once or not at all, so a retry cannot duplicate rows. An exception raised by the
    training code itself is not retried (it would fail the same way) and reaches the caller."""

    _pool: dict[str, Any] = {"job": None, "actors": []}  # kept across runs of one Ray session
    _shipped = False  # this process joined a cluster and shipped its attnlab package to it
    _actor_class = None  # ray.remote(_Worker), made once

    def __init__(self, max_retries: int = 3, num_cpus: int | None = None):
        self.ray = import_ray()
        self.max_retries = max_retries
        self.num_cpus = num_cpus
        self.stats: list[dict] = []
        self.failures: list[str] = []  # one line per chunk attempt lost to a dead worker

    def _new_actor(self):
        """One worker: a CPU, and a GPU where the cluster has GPUs. Not restarted by Ray: a dead
        one is replaced by the driver (:meth:`map`)."""
        if RayExecutor._actor_class is None:
            RayExecutor._actor_class = self.ray.remote(_Worker)
        gpus = int(self.ray.cluster_resources().get("GPU", 0))
        return RayExecutor._actor_class.options(num_cpus=1, num_gpus=1 if gpus else 0, max_restarts=0).remote()

    def _actors(self, wanted: int) -> list:
        """The session's pool, grown to min(wanted, slots) actors."""
        ray = self.ray
        job = ray.get_runtime_context().get_job_id()
        pool = RayExecutor._pool
        if pool["job"] != job:
            pool.update(job=job, actors=[])
        res = ray.cluster_resources()
        slots = int(res.get("GPU", 0)) or max(1, int(res.get("CPU", 1)))
        n = max(1, min(wanted, slots))
        while len(pool["actors"]) < n:
            pool["actors"].append(self._new_actor())
        return pool["actors"][:n]

    def _replace(self, i: int):
        """Put a fresh actor in place of pool actor ``i`` (whose process died)."""
        pool = RayExecutor._pool
        try:
            self.ray.kill(pool["actors"][i], no_restart=True)
        except Exception:
            pass
        pool["actors"][i] = self._new_actor()
        return pool["actors"][i]

    @classmethod
    def release(cls) -> None:
        """End the pool's actors, freeing their CPUs (GPUs) for other Ray work; a later run
        starts new ones (and compiles again)."""
        import ray

        for actor in cls._pool["actors"]:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass
        cls._pool.update(job=None, actors=[])

    def _worth_sharing(self, program: tuple, left: int, holders: int) -> bool:
        """Whether an idle actor should join a bucket ``holders`` other actors are training: only
        if their remaining work (``left`` chunks at the warm time per chunk) exceeds the compile
        this actor would need, as measured so far (on this bucket, else on all); with nothing
        measured yet, yes."""

        def estimate(stats):
            warm = [s["seconds"] for s in stats if not s["built"]]
            cold = [s["seconds"] for s in stats if s["built"]]
            if not warm or not cold:
                return None
            w = float(np.median(warm))
            return w, max(0.0, float(np.median(cold)) - w)

        est = estimate([s for s in self.stats if s["program"] == program]) or estimate(self.stats)
        if est is None:
            return True
        warm, compile_s = est
        return left * warm / holders > compile_s

    def map(self, fn: Callable[[Chunk], pa.Table], chunks: Iterable[Chunk]) -> Iterator[pa.Table]:
        chunks = list(chunks)
        if not chunks:
            return
        ray = self.ray
        if _connect(ray, self.num_cpus):
            RayExecutor._shipped = True
        actors = self._actors(len(chunks))
        names = {(kind, dict(ch.static)[f"{kind}.name"]) for ch in chunks for kind in ("data", "model")}
        modules = ray.put(parts.bundle(sorted(names)))  # outside parts' modules, importable on every worker
        queues: dict[tuple, deque[int]] = {}
        for n, ch in enumerate(chunks):
            queues.setdefault(_program_key(ch), deque()).append(n)
        last: list[tuple | None] = [None] * len(actors)
        running: dict[Any, tuple[int, int]] = {}  # ref -> (actor, chunk index)
        tries = [0] * len(chunks)

        def send(i: int, n: int) -> None:
            tries[n] += 1
            running[actors[i].run.remote(fn, chunks[n], modules)] = (i, n)

        def submit(i: int) -> None:
            key = last[i]
            if not queues.get(key):
                held = Counter(last[j] for j, _ in running.values())
                left = [k for k, q in queues.items() if q]
                free = [k for k in left if not held[k]]
                if free:
                    key = max(free, key=lambda k: len(queues[k]))
                else:
                    share = [k for k in left if self._worth_sharing(k, len(queues[k]), held[k])]
                    if not share:
                        return  # stays idle: the holders finish sooner than this actor could compile
                    key = max(share, key=lambda k: len(queues[k]) / held[k])
            last[i] = key
            send(i, queues[key].popleft())

        try:
            for i in range(len(actors)):
                submit(i)
            while running:
                (ref,), _ = ray.wait(list(running), num_returns=1)
                i, n = running.pop(ref)
                chunk = chunks[n]
                try:
                    table, stat = ray.get(ref)
                except ray.exceptions.RayTaskError as e:
                    cause = getattr(e, "cause", None)
                    if isinstance(cause, AttnlabError):
                        raise cause from None
                    raise
                except ray.exceptions.RayError as e:  # the worker died, or its node, or the result was lost
                    reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
                    self.failures.append(reason)
                    actors[i] = self._replace(i)  # the pool stays whole for the next run, too
                    if tries[n] > self.max_retries:
                        raise AttnlabError(
                            f"--executor ray: a worker died {tries[n]} times training a chunk of {len(chunk.cells)} "
                            f"cells (Ray: {reason}). The cells finished so far are saved; rerun the same command "
                            f"to resume (a worker killed for memory: lower memory_budget_gb)."
                        ) from e
                    last[i] = _program_key(chunk)
                    send(i, n)
                    continue
                self.stats.append(stat | {"actor": i, "chunk": n, "attempts": tries[n]})
                submit(i)
                yield _driver_code(table) if RayExecutor._shipped else table
        finally:
            for ref in running:  # the caller stopped early: drop what is still queued
                try:
                    ray.cancel(ref)
                except Exception:
                    pass


def make_executor(name: str):
    """The executor called ``name`` (``ray`` fails here, with how to install it, if missing)."""
    if name not in EXECUTORS:
        raise ValueError(f"executor: unknown {name!r}; available: {', '.join(EXECUTORS)}")
    return RayExecutor() if name == "ray" else LocalExecutor()


def _report_damage(store: Store, chunks: list[Chunk], since: int):
    """One warning per part the store moved aside since ``since``, with how many cells it held:
    its footer's row count, or failing that the chunk (of the plan, or left to train) whose ids
    hash to its name."""
    sizes = {part_name(grid.cell_id(c) for c in ch.cells): len(ch.cells) for ch in chunks}
    for d in store.damaged[since:]:
        n = d.cells if d.cells is not None else sizes.get(d.path.name)
        what = (
            f"its {n} cell(s) are trained again" if n is not None else "its cells (how many: unknown) are trained again"
        )
        note = f"damaged part {d.path} ({d.reason}) was moved to {d.moved_to}; {what}"
        store.notes.append(note)
        print(f"warning: {note}", file=sys.stderr, flush=True)


def run_cells(
    work: Plan | list[dict],
    store: Store,
    tags: tuple[str, ...] = (),
    memory_budget: float = 2e9,
    executor: str | Any = "local",
    progress: bool = True,
    on_chunk: Callable[[int], None] | None = None,
    train: Callable[[Chunk], pa.Table] = train_chunk,
) -> int:
    """Train every cell of ``work`` (a run's :class:`Plan`, or cells planned here with ``tags``
    and ``memory_budget``) whose id is not yet in ``store``; returns how many were trained.
    ``executor``: a name in EXECUTORS or an executor object; ``train``: the chunk trainer (a
    picklable function of a Chunk). Parts found damaged are moved aside, reported on stderr and
    in ``store.notes``, and their cells trained again."""
    ex = make_executor(executor) if isinstance(executor, str) else executor
    plan = work if isinstance(work, Plan) else Plan.of(work, tags, memory_budget, check=False)
    if isinstance(ex, LocalExecutor):
        ex = ex.within(plan.memory_budget)
    since = len(store.damaged)
    chunks = plan.todo(store.done_ids())
    if len(store.damaged) > since:
        _report_damage(store, [*plan.chunks, *chunks], since)
    todo = sum(len(ch.cells) for ch in chunks)
    if not todo:
        return 0
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("cells"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task(f"{len(chunks)} chunk(s)", total=todo, rate="")
        t0 = time.perf_counter()
        n = 0
        for table in ex.map(train, chunks):
            store.write_part(table)
            n += table.num_rows
            bar.update(task, advance=table.num_rows, rate=f"{n / (time.perf_counter() - t0):.1f} cells/s")
            if on_chunk:
                on_chunk(n)
    return todo
