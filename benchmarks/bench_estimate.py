"""The dry run's wall-time estimate against the measured run, on the example grids.

    python benchmarks/bench_estimate.py [--json FILE] [--check]

For each spec in examples/*.toml, in a process of its own with an empty compile cache (the
estimate is a cold-cache one): ``dry_run(..., estimate=True)`` (a short calibration), then the
run itself. Compared: the estimate against the run's training time (every chunk's wall time,
compile included: the verdict's ``train_seconds_total``), and against its whole wall time
(which adds analysis, figures and the report). ``--check`` fails unless every ratio
estimate / training time lies within [1/2, 2].
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BAND = (0.5, 2.0)

ONE = """
import json, sys, time
from attnlab.experiments.pipeline import dry_run
from attnlab.experiments.sweep import SCALE, UserGrid, sweep
grid = UserGrid.of(sys.argv[1])
t0 = time.perf_counter()
e = dry_run(grid, grid.spec(SCALE), estimate=True)["estimate"]
t1 = time.perf_counter()
v = sweep(sys.argv[1], sys.argv[2], progress=False)
t2 = time.perf_counter()
print(json.dumps({"estimate": e, "dry_run_s": t1 - t0, "train_s": v["train_seconds_total"], "run_s": t2 - t1}))
"""


def measure(spec: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="attnlab-estimate-") as tmp:
        env = os.environ | {"ATTNLAB_COMPILE_CACHE": str(Path(tmp) / "jax")}
        r = subprocess.run(
            [sys.executable, "-c", ONE, str(spec), str(Path(tmp) / "out")],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode:
            raise SystemExit(f"{spec.name}: {r.stderr[-2000:]}")
        m = json.loads(r.stdout.strip().splitlines()[-1])
    est = m["estimate"]["seconds"]
    return m | {"spec": spec.name, "ratio_train": est / m["train_s"], "ratio_run": est / m["run_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path, help="write the measurements here")
    ap.add_argument("--check", action="store_true", help=f"fail unless every estimate/training ratio is in {BAND}")
    args = ap.parse_args()
    rows = [measure(p) for p in sorted((ROOT / "examples").glob("*.toml"))]
    for r in rows:
        e = r["estimate"]
        print(
            f"{r['spec']:36s} estimate {e['seconds']:6.1f} s (compile {e['compile_seconds']:5.1f} s, "
            f"{e['programs']} programs)  training {r['train_s']:6.1f} s  ratio {r['ratio_train']:.2f}  "
            f"whole run {r['run_s']:6.1f} s  ratio {r['ratio_run']:.2f}  (dry run {r['dry_run_s']:.1f} s)"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))
    bad = [r["spec"] for r in rows if not BAND[0] <= r["ratio_train"] <= BAND[1]]
    if args.check and bad:
        raise SystemExit(f"estimate outside {BAND} × the measured training time: {', '.join(bad)}")


if __name__ == "__main__":
    main()
