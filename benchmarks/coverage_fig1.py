"""Coverage of the jiang2024-fig1 bootstrap intervals across independent seed blocks.

    python benchmarks/coverage_fig1.py [--blocks 20] [--scale cpu] [--n-boot 200] [--out DIR] [--json FILE]

Pre-registered question: does the bootstrap-over-cells 95 % interval of each boundary statistic
(slope, the per-run C with slope fixed at −2, and C of the mean quantity) cover the across-block
truth at its nominal rate? Protocol, fixed before the run:

1. Run ``jiang2024-fig1`` at the given scale with ``--set seeds=K`` (K independent blocks of the
   whole grid; resumable, so reruns reuse the cells).
2. For every block b, compute the statistic and its percentile-bootstrap 95 % interval from that
   block's cells alone, exactly as the experiment does for a single block.
3. Truth = the statistic fitted to all K blocks pooled (K times the data of one block).
4. Coverage = share of blocks whose interval contains the truth, with its Clopper–Pearson 95 %
   interval; and the ratio of the across-block SD of the point estimates to the mean bootstrap
   SE (interval half-width / 1.96). Calibrated intervals give coverage ≈ 0.95 and ratio ≈ 1.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy import stats

from attnlab import theory
from attnlab.experiments import get
from attnlab.experiments.jiang2024 import data
from attnlab.experiments.pipeline import reproduce, table_columns


def statistics(logS, logN, success, mean_pts, n_boot, seed):
    """{name: Estimate} for one set of cells (and its grid-point means)."""
    m_logS, m_logN, m_success = mean_pts
    return {
        "slope": theory.boundary_slope(logS, logN, success, n_boot=n_boot, seed=seed),
        "C_per_run": theory.boundary_constant(logN + 2 * logS, success, n_boot=n_boot, seed=seed),
        "C_mean_quantity": theory.boundary_constant(m_logN + 2 * m_logS, m_success, n_boot=n_boot, seed=seed),
    }


def mean_points(logS, logN, block, test_loss, level):
    keys = np.stack([logS, logN, block], 1)
    pts, inv = np.unique(keys, axis=0, return_inverse=True)
    mean = np.bincount(inv.ravel(), weights=test_loss) / np.bincount(inv.ravel())
    return pts[:, 0], pts[:, 1], pts[:, 2], mean < level


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=20)
    ap.add_argument("--scale", default="cpu")
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--out", default="results/coverage-fig1")
    ap.add_argument("--json", help="also write the numbers to this file")
    a = ap.parse_args()

    t0 = time.perf_counter()
    exp = get("jiang2024-fig1")
    reproduce(exp, a.scale, Path(a.out), sets=[f"seeds={a.blocks}"], progress=True)
    spec = exp.spec(a.scale, [f"seeds={a.blocks}"])
    import pyarrow.parquet as pq

    cols = table_columns(pq.read_table(Path(a.out) / "results.parquet"))
    ok = cols["status"] != "diverged"
    logN = np.log(cols["data.N"][ok].astype(float))
    logS = np.log(data.snr(cols["data.mu"], cols["data.sigma_p"], cols["data.d"])[ok])
    test_loss, block = cols["test_loss"][ok], cols["block"][ok]
    success = test_loss < spec.level
    m_logS, m_logN, m_block, m_success = mean_points(logS, logN, block, test_loss, spec.level)

    truth = statistics(logS, logN, success, (m_logS, m_logN, m_success), 0, 0)
    per_block = []
    for b in range(a.blocks):
        s, m = block == b, m_block == b
        per_block.append(statistics(logS[s], logN[s], success[s], (m_logS[m], m_logN[m], m_success[m]), a.n_boot, b))

    res = {"blocks": a.blocks, "scale": a.scale, "n_boot": a.n_boot, "cells": int(ok.sum())}
    for name, est in truth.items():
        vals = np.array([pb[name].value for pb in per_block])
        lo = np.array([pb[name].lo for pb in per_block])
        hi = np.array([pb[name].hi for pb in per_block])
        covered = (lo <= est.value) & (est.value <= hi)
        k, n = int(covered.sum()), int(np.isfinite(lo).sum())
        ci = stats.binomtest(k, n).proportion_ci(method="exact")
        se_boot = float(np.nanmean((hi - lo) / (2 * 1.96)))
        res[name] = {
            "truth (all blocks pooled)": float(est.value),
            "across-block mean": float(np.nanmean(vals)),
            "across-block SD": float(np.nanstd(vals, ddof=1)),
            "mean bootstrap SE": se_boot,
            "SD / bootstrap SE": float(np.nanstd(vals, ddof=1) / se_boot),
            "coverage": k / n,
            "coverage 95% CI": [float(ci.low), float(ci.high)],
            "blocks with an interval": n,
        }
    res["seconds"] = round(time.perf_counter() - t0, 1)
    for k, v in res.items():
        print(f"{k:18s} {v}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
