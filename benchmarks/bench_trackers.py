"""The end-to-end wall-time overhead of --log tensorboard and --log wandb.

    python benchmarks/bench_trackers.py [--id jiang2024-fig3] [--scale cpu] [--repeats 3] [--json FILE] [--check]

Each repeat runs ``attnlab reproduce ID`` as a fresh process (as a user does, compile cache off, so
every run compiles and every process imports what it needs) once without a tracker and once with
each, in an order rotated per repeat so that drifts of the machine's load fall on every mode alike.
The overhead of a tracker is its median wall time over the plain run's, minus 1. The export alone
(the finished directory written to the tracker in this process, nothing overlapped) is timed too.
``--check`` exits 1 when a median overhead exceeds 5 %.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LIMIT = 0.05
MODES = ("none", "tensorboard", "wandb")


def run_once(exp: str, scale: str, out: Path, mode: str) -> float:
    cmd = [sys.executable, "-m", "attnlab.cli", "reproduce", exp, "--scale", scale, "--out", str(out), "--quiet"]
    cmd += [] if mode == "none" else ["--log", mode]
    env = dict(os.environ, ATTNLAB_COMPILE_CACHE="off", WANDB_MODE="offline", WANDB_SILENT="true")
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--id", default="jiang2024-fig3", help="experiment id (default: one with traces and claims)")
    ap.add_argument("--scale", default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--check", action="store_true", help=f"exit 1 if a median overhead exceeds {LIMIT * 100:g} %%")
    args = ap.parse_args()
    from attnlab import trackers

    walls: dict[str, list[float]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory(prefix="attnlab-bench-trackers-") as d:
        for r in range(args.repeats):
            k = r % len(MODES)
            for mode in MODES[k:] + MODES[:k]:
                walls[mode].append(run_once(args.id, args.scale, Path(d) / f"{mode}-{r}", mode))
        export = {}
        for name in trackers.TRACKERS:  # the export alone, after a finished run, in this process
            t0 = time.perf_counter()
            trackers.export(Path(d) / "none-0", [name])
            export[name] = time.perf_counter() - t0
    median = {m: statistics.median(w) for m, w in walls.items()}
    report = {
        "experiment": args.id,
        "scale": args.scale,
        "repeats": args.repeats,
        "wall_seconds": {m: [round(x, 2) for x in w] for m, w in walls.items()},
        "median_wall_seconds": {m: round(v, 2) for m, v in median.items()},
        "overhead": {m: round(median[m] / median["none"] - 1, 4) for m in trackers.TRACKERS},
        "export_alone_seconds": {k: round(v, 3) for k, v in export.items()},
        "limit": LIMIT,
        "definition": "overhead = median wall time of `attnlab reproduce ID --log T` / median without --log − 1, "
        "each a fresh process (compile cache off), modes rotated per repeat; export_alone: the finished "
        "directory exported in one process, nothing overlapped (an upper bound of the added time)",
    }
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
    if args.check and any(v > LIMIT for v in report["overhead"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
