"""The wall-time overhead of --log tensorboard and --log wandb on a whole run.

    python benchmarks/bench_trackers.py [--id jiang2024-fig3] [--scale cpu] [--json FILE] [--check]

Runs the experiment into a fresh directory (compile cache off, so every repeat is a whole run of
its own), then exports the finished directory to each tracker, timed; the overhead is the export's
seconds over the run's, both measured in this process. ``--check`` exits 1 above 5 %.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

LIMIT = 0.05


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--id", default="jiang2024-fig3", help="experiment id (default: one with traces and claims)")
    ap.add_argument("--scale", default="cpu")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--check", action="store_true", help=f"exit 1 if an overhead exceeds {LIMIT:.0%}")
    args = ap.parse_args()
    os.environ["ATTNLAB_COMPILE_CACHE"] = "off"
    from attnlab import trackers
    from attnlab.api import reproduce

    with tempfile.TemporaryDirectory(prefix="attnlab-bench-trackers-") as d:
        out = Path(d) / "run"
        t0 = time.perf_counter()
        reproduce(args.id, args.scale, out, progress=False)
        run_s = time.perf_counter() - t0
        rows = {}
        for name in trackers.TRACKERS:
            t0 = time.perf_counter()
            trackers.export(out, [name])
            rows[name] = time.perf_counter() - t0
    report = {
        "experiment": args.id,
        "scale": args.scale,
        "run_seconds": round(run_s, 2),
        "export_seconds": {k: round(v, 3) for k, v in rows.items()},
        "overhead": {k: round(v / run_s, 4) for k, v in rows.items()},
        "limit": LIMIT,
    }
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
    if args.check and any(v > LIMIT for v in report["overhead"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
