"""Where the engine's time goes on a bench suite's cells: data, steps, stop-rule passes, final metrics.

    python benchmarks/profile_suite.py [--suite li2023] [--cells 40] [--seed 0] [--chunks 2] [--steps 50] [--json FILE]

The suite's seeded cell selection is planned into chunks as ``attnlab bench`` plans them; for
``--chunks`` of its chunk programs (the smallest and the largest padded training set first) it
times, compiled and warm, the whole chunk as the engine trains it (``train_chunk``, CPU strategy
``sequential``: every cell's loop one after another) and each piece of that loop alone, built from
the same Problem and run the same way (``lax.map`` over the chunk's cells):

    data     the cell's training and test sets (``make_data``)
    steps    the step's loss and gradient (its mini-batch, or the padded training set) and the update,
             timed over ``--steps`` steps and scaled to the cells' own stop steps
    judged   with mini-batches: the pass over the training set the stop rule reads at judged steps
    final    the final metrics (a forward of the training and the test set; ``test``: the test set alone)
    loop_other  the compiled program minus the pieces: loop control, masks, probe records, transfer
    host     ``train_chunk`` minus its compiled program: inputs, the results table

and compilation (the first call of the chunk's program minus the warm one). Padding: the share of
the step rows that are padding (a mini-batch of b rows for N < b samples; the padded training set).
Every time is process CPU time (all threads), the least of a few calls: on a shared machine wall
times of pieces measured minutes apart are not comparable.
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import train as T
from attnlab.bench import flops, suites
from attnlab.engine import executors, grid
from attnlab.engine.plan import Plan
from attnlab.problem import Composition
from attnlab.train import step as per_cell


def _timed(fn, *args, repeats: int = 3) -> float:
    """Least CPU time of ``fn(*args)`` over ``repeats`` calls after a first (compiling) one."""
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        jax.block_until_ready(fn(*args))
        best = min(best, time.process_time() - t0)
    return best


def profile_chunk(ch: executors.Chunk, steps: int) -> dict:
    static, pads = dict(ch.static), dict(ch.pads)
    comp = Composition.of(static, ch.tags)
    problem, cfg = comp.problem(static, pads), comp.train_config(static)
    shared = comp.shared(static)
    cells = list(ch.cells)
    v = {k: jnp.asarray(x) for k, x in grid.batch_inputs(comp, cells).items()}

    t0 = time.process_time()
    table = executors.train_chunk(ch)
    first = time.process_time() - t0
    total = _timed(lambda: executors.train_chunk(ch), repeats=2)
    program = _timed(lambda: T.train_bucket(problem, cfg, v, shared, cache_key=(ch.static, ch.pads)), repeats=2)
    stops = np.asarray(table.column("stop_step").to_numpy(), int)

    one = lambda f: jax.jit(lambda *a: jax.lax.map(lambda x: f(*x), a))  # noqa: E731
    data_fn = one(lambda v1: problem.make_data(v1["key"], v1, shared))
    start_fn = one(lambda v1: per_cell.start(problem, cfg, v1, shared))

    def run_steps(v1, data, train, fixed, opt):
        def body(t, c):
            tr, os = c
            _, grads = per_cell.step_loss(problem, cfg, tr, fixed, data, v1, t)
            return per_cell.update(problem, cfg, grads, os, tr, v1["lr"])

        return jax.lax.fori_loop(0, steps, body, (train, opt))[0]

    steps_fn = one(run_steps)
    full_fn = one(lambda data, train, fixed: per_cell.full_loss(problem, train, fixed, data)[0])
    final_fn = one(lambda data, train, fixed: per_cell.final_metrics(problem, cfg, train, fixed, data))
    test_fn = one(
        lambda data, train, fixed: problem.loss.fn(
            per_cell.vapply(problem, {**train, **fixed}, data["X_test"])[0], data["y_test"]
        ).mean()
    )

    data, train, fixed, opt = start_fn(v)
    K = len(cells)
    per_step = _timed(steps_fn, v, data, train, fixed, opt) / (K * steps)
    loop = flops.Loop.of(cells[0])
    n_judged = sum(sum(1 for t in range(s + 1) if loop.judged(t)) for s in stops) if loop.batch else 0
    per_judged = _timed(full_fn, data, train, fixed) / K if loop.batch else 0.0
    loops = [flops.Loop.of(c) for c in cells]
    real = sum(flops.loop_passes(lp, int(s))["forward_backward"] for lp, s in zip(loops, stops, strict=True))
    rows = sum(
        flops.loop_passes(lp, int(s), n_pad=pads.get("data.N"))["forward_backward"]
        for lp, s in zip(loops, stops, strict=True)
    )
    parts = {
        "data": _timed(data_fn, v),
        "steps": per_step * float((stops + 1).sum()),
        "judged": per_judged * n_judged,
        "final": _timed(final_fn, data, train, fixed),
    }
    test = _timed(test_fn, data, train, fixed)
    parts["loop_other"] = program - sum(parts.values())  # loop control, masks, probe records, transfer
    parts["host"] = total - program  # train_chunk around the program: inputs, results table
    return {
        "pads": pads,
        "cells": K,
        "stop_steps": stops.tolist(),
        "total_s": total,
        "compile_s": max(first - total, 0.0),
        "parts_s": parts,
        "final_test_only_s": test,
        "seconds_per_step": per_step,
        "seconds_per_judged_pass": per_judged,
        "step_rows_padding_share": 1 - real / rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="li2023")
    ap.add_argument("--scale", default=None)
    ap.add_argument("--cells", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunks", type=int, default=2, help="chunk programs profiled (smallest and largest N first)")
    ap.add_argument("--steps", type=int, default=50, help="steps timed per cell for the per-step cost")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    exp, spec, all_cells = suites.suite_cells(args.suite, args.scale)
    cells = suites.select_cells(all_cells, args.cells, args.seed)
    chunks = Plan.of(cells, exp.tags, spec.memory_budget_gb * 1e9).chunks
    by_size = sorted(chunks, key=lambda c: (dict(c.pads).get("data.N", 0), -len(c.cells)))
    pick = [by_size[0], by_size[-1], *by_size[1:-1]][: args.chunks] if len(by_size) > 1 else by_size
    out = {"suite": args.suite, "cells": len(cells), "chunks": len(chunks), "profiled": []}
    for ch in pick:
        r = profile_chunk(ch, args.steps)
        out["profiled"].append(r)
        share = {k: round(x / r["total_s"], 3) for k, x in r["parts_s"].items()}
        print(
            f"chunk {r['pads']} ({r['cells']} cells, stops {min(r['stop_steps'])}-{max(r['stop_steps'])}): "
            f"total {r['total_s']:.2f} s, compile {r['compile_s']:.1f} s; shares {share}; final test set alone "
            f"{r['final_test_only_s']:.3f} s; padding {r['step_rows_padding_share']:.2f} of step rows; "
            f"{r['seconds_per_step'] * 1e3:.3f} ms/step",
            flush=True,
        )
    tot = {k: sum(r["parts_s"][k] for r in out["profiled"]) for k in out["profiled"][0]["parts_s"]}
    s = sum(r["total_s"] for r in out["profiled"])
    out["summary_shares"] = {k: round(x / s, 3) for k, x in tot.items()}
    out["summary_compile_s_per_program"] = float(np.mean([r["compile_s"] for r in out["profiled"]]))
    print(
        f"over the profiled chunks: shares {out['summary_shares']}; compile "
        f"{out['summary_compile_s_per_program']:.1f} s per program",
        flush=True,
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
