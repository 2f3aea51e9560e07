"""Vectorised bucket trainer vs the one-cell reference path, on the same cells, same process.

    python benchmarks/bench_trainer.py [--cells 64] [--d 64] [--width 32] [--max-steps 1000]

Ways to train the same cells (jiang2024-fig1 cpu-scale model by default):
  reference    train_reference: Python loop over steps, one cell at a time (the checking path)
  sequential   train_bucket(strategy="sequential"): jit(lax.map(cell -> its own while_loop))
  vmap         train_bucket(strategy="vmap"): jit(while_loop(vmap(step))) in segments, the batch
               compacted to the running cells
  vmap-1seg    the same in one segment, without compaction: every cell waits for the slowest
Compilation is timed separately (first call); the reported times are the second call. Ratios
are against the reference in this same process, so the noise of a shared machine cancels out.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from attnlab.engine import grid
from attnlab.experiments.jiang2024 import tiny_cell
from attnlab.problem import Composition
from attnlab.train import train_bucket, train_reference


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", type=int, default=64)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--max-steps", type=int, default=1000)
    ap.add_argument("--json", help="also write the numbers to this file")
    a = ap.parse_args()

    rng = np.random.default_rng(0)
    base = tiny_cell(M=16, d=a.d, d_h=a.width, d_v=a.width, n_test=100, max_steps=a.max_steps)
    cells = [
        base | {"data.mu": float(rng.choice([5.0, 15.0, 40.0])), "data.N": int(n), "rep": i}
        for i, n in enumerate(rng.choice(np.arange(2, 21, 2), a.cells))
    ]
    ((key, bucket),) = grid.buckets(cells).items()
    static = dict(key)
    comp = Composition.of(static)
    cfg = comp.train_config(static)
    n_pad = max(c["data.N"] for c in cells)
    inputs = lambda cs: grid.batch_inputs(comp, cs)

    def timed(fn):
        t = time.perf_counter()
        r = fn()
        return time.perf_counter() - t, r

    prob = comp.problem(static, {"data.N": n_pad})
    variants = {
        "sequential": dict(strategy="sequential"),
        "vmap": dict(strategy="vmap"),
        "vmap-1seg": dict(strategy="vmap", segment=a.max_steps + 1, shrink=10**9),
    }
    times, compile_s, outs = {}, {}, {}
    for name, kw in variants.items():
        first, _ = timed(lambda: train_bucket(prob, cfg, inputs(cells), cache_key="bench", **kw))  # noqa: B023
        times[name], res = timed(lambda: train_bucket(prob, cfg, inputs(cells), cache_key="bench", **kw))  # noqa: B023
        outs[name] = res["metrics"]
        compile_s[name] = first - times[name]

    def reference():
        return [
            train_reference(
                comp.problem(static, {"data.N": c["data.N"]}), cfg, {k: x[0] for k, x in inputs([c]).items()}
            )["metrics"]
            for c in cells
        ]

    t_ref, out_ref = timed(reference)

    res = {
        "cells": len(cells),
        "d": a.d,
        "width": a.width,
        "total_steps": int(sum(r["stop_step"] for r in out_ref)),
        "reference_s": round(t_ref, 3),
    }
    for name, out in outs.items():
        res[f"{name}_s"] = round(times[name], 3)
        res[f"{name}_compile_s"] = round(compile_s[name], 3)
        res[f"speedup_{name}_vs_reference"] = round(t_ref / times[name], 2)
        res[f"{name}_same_stop_fraction"] = float(
            np.mean([out["stop_step"][i] == r["stop_step"] for i, r in enumerate(out_ref)])
        )
        res[f"{name}_max_abs_test_loss_diff"] = float(
            max(abs(out["test_loss"][i] - r["test_loss"]) for i, r in enumerate(out_ref))
        )
    for k, v in res.items():
        print(f"{k:36s} {v}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
