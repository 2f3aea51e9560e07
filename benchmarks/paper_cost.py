"""Cost of an experiment's paper-scale grid, measured on a subset of its cells and extrapolated.

    python benchmarks/paper_cost.py li2023-fig1 [li2023-fig2 ...] [--per-size 2] [--json FILE]

For each experiment: the paper-scale cells (the lr tuning stage, if any, is counted at its own
size and costed like a grid cell of the tuning N). A subset is trained for real: ``--per-size``
cells of every distinct training-set size N, drawn evenly across the other axes. Run time grows
with N (more samples per full-set stop check and larger stop times), so the extrapolation is
per N: total = Σ_N (cells of that N) × (mean seconds per cell measured at that N). Compile time
is counted in the measurement (one compile per bucket of the subset), so the estimate is an
upper bound for the real run, which shares each compile across many more cells.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from attnlab.engine import executors, grid
from attnlab.engine.store import Store
from attnlab.experiments import get
from attnlab.experiments.pipeline import table_columns


def subset(cells: list[dict], per_size: int) -> list[dict]:
    by_n: dict[int, list[dict]] = {}
    for c in cells:
        by_n.setdefault(int(c.get("data.N", 0)), []).append(c)
    out = []
    for _, cs in sorted(by_n.items()):
        idx = np.linspace(0, len(cs) - 1, min(per_size, len(cs))).round().astype(int)
        out += [cs[i] for i in np.unique(idx)]
    return out


def cost(exp_id: str, per_size: int) -> dict:
    exp = get(exp_id)
    spec = exp.spec("paper")
    cells = exp.cells(spec)  # without a runner: the grid at the spec's lr, no tuning stage
    n_tune = len(spec.tune_lr) * spec.tune_reps if getattr(spec, "tune_lr", None) else 0
    sub = subset(cells, per_size)
    with tempfile.TemporaryDirectory() as d:
        store = Store(Path(d))
        t0 = time.perf_counter()
        executors.run_cells(sub, store, tags=exp.tags, memory_budget=spec.memory_budget_gb * 1e9, progress=False)
        wall = time.perf_counter() - t0
        cols = table_columns(store.assemble([grid.cell_id(c) for c in sub], write=False))
    N = cols["data.N"].astype(int)
    per_n = {int(n): float(cols["seconds"][N == n].mean()) for n in np.unique(N)}
    counts = {n: sum(int(c["data.N"]) == n for c in cells) for n in per_n}
    total = sum(counts[n] * per_n[n] for n in per_n)
    mid = sorted(per_n)[len(per_n) // 2]
    total += n_tune * per_n[mid]
    return {
        "experiment": exp_id,
        "paper_cells": len(cells),
        "tuning_cells": n_tune,
        "measured_cells": len(sub),
        "measured_wall_s": round(wall, 1),
        "seconds_per_cell_by_N": {k: round(v, 3) for k, v in per_n.items()},
        "extrapolated_total_s": round(total, 0),
        "extrapolated_total_h": round(total / 3600, 2),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiments", nargs="+")
    ap.add_argument("--per-size", type=int, default=2, help="cells measured per training-set size N")
    ap.add_argument("--json", type=Path, help="write the results here")
    a = ap.parse_args()
    results = []
    for e in a.experiments:
        r = cost(e, a.per_size)
        print(json.dumps(r), flush=True)
        results.append(r)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
