"""Vectorised bucket trainer vs the one-cell reference path, on the same cells, same process.

    python benchmarks/bench_trainer.py [--cells 32] [--d 64] [--width 32] [--max-steps 1000]

Three ways to train the same cells (jiang2024-fig1 cpu-scale model by default):
  reference   train_reference: Python loop over steps, one cell at a time (the checking path)
  compiled-1  train_bucket with one cell per call: the step loop inside one compiled program
  vectorised  train_bucket with all cells in one call: jit(while_loop(vmap(step))), run in
              segments with the batch compacted to the running cells (the default)
  one-segment the same without compaction: every cell waits for the slowest
Compilation is timed separately (first call); the reported times are the second call. Ratios
are against the reference in this same process, so the noise of a shared machine cancels out.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from attnlab.experiments.jiang2024 import FAMILY, ModelSpec
from attnlab.sweep import grid
from attnlab.train import train_bucket, train_reference


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", type=int, default=32)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--max-steps", type=int, default=1000)
    ap.add_argument("--json", help="also write the numbers to this file")
    a = ap.parse_args()

    spec = ModelSpec(d=a.d, d_h=a.width, d_v=a.width, max_steps=a.max_steps)
    rng = np.random.default_rng(0)
    cells = [
        spec.cell_fields() | {"log_every": 0, "mu": float(rng.choice([5.0, 15.0, 40.0])), "N": int(n), "rep": i}
        for i, n in enumerate(rng.choice(np.arange(2, 21, 2), a.cells))
    ]
    static = {f: cells[0][f] for f in FAMILY.static_fields}
    cfg = FAMILY.train_config(static)
    n_pad = max(c["N"] for c in cells)
    inputs = lambda cs: {
        k: (x.astype("float32") if x.dtype.kind == "f" else x) for k, x in grid.batch_inputs(FAMILY, cs).items()
    }

    def timed(fn):
        t = time.perf_counter()
        r = fn()
        return time.perf_counter() - t, r

    # vectorised: all cells, one call
    prob = FAMILY.problem(static, n_pad)
    compile_vec, _ = timed(lambda: train_bucket(prob, cfg, inputs(cells), cache_key="bench-vec"))
    t_vec, (out_vec, _) = timed(lambda: train_bucket(prob, cfg, inputs(cells), cache_key="bench-vec"))

    # vectorised without compaction: one segment
    whole = dict(segment=a.max_steps + 1, shrink=10**9)
    train_bucket(prob, cfg, inputs(cells), cache_key="bench-vec", **whole)
    t_seg1, _ = timed(lambda: train_bucket(prob, cfg, inputs(cells), cache_key="bench-vec", **whole))

    # compiled, one cell per call (programs cached per N)
    def one_by_one():
        outs = []
        for c in cells:
            p = FAMILY.problem(static, c["N"])
            outs.append(train_bucket(p, cfg, inputs([c]), cache_key=("bench-one", c["N"]))[0])
        return outs

    compile_one, _ = timed(one_by_one)
    t_one, _ = timed(one_by_one)

    # reference: Python step loop per cell
    def reference():
        return [
            train_reference(FAMILY.problem(static, c["N"]), cfg, {k: x[0] for k, x in inputs([c]).items()})[0]
            for c in cells
        ]

    t_ref, out_ref = timed(reference)

    same_stop = np.mean([out_vec["stop_step"][i] == r["stop_step"] for i, r in enumerate(out_ref)])
    max_dloss = max(abs(out_vec["test_loss"][i] - r["test_loss"]) for i, r in enumerate(out_ref))
    steps = int(sum(r["stop_step"] for r in out_ref))
    res = {
        "cells": len(cells), "d": a.d, "width": a.width, "total_steps": steps,
        "reference_s": round(t_ref, 3), "compiled_one_s": round(t_one, 3), "vectorised_s": round(t_vec, 3),
        "one_segment_s": round(t_seg1, 3), "compile_vectorised_s": round(compile_vec - t_vec, 3),
        "speedup_vectorised_vs_reference": round(t_ref / t_vec, 2),
        "speedup_compiled_one_vs_reference": round(t_ref / t_one, 2),
        "speedup_vectorised_vs_compiled_one": round(t_one / t_vec, 2),
        "speedup_compaction": round(t_seg1 / t_vec, 2),
        "same_stop_step_fraction": float(same_stop), "max_abs_test_loss_diff": float(max_dloss),
    }  # fmt: skip
    for k, v in res.items():
        print(f"{k:36s} {v}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
