"""The bench report: the numbers of a run, and their rendering."""

from __future__ import annotations

import json
import os
import platform
from typing import Any

import jax
import numpy as np
from rich.console import Console
from rich.table import Table

from attnlab.bench.flops import Loop, cell_flops
from attnlab.bench.measure import agreement, cpu_count, sig
from attnlab.bench.suites import get_suite
from attnlab.engine import grid
from attnlab.experiments.base import rounded

# ---------------------------------------------------------------- report


def build_report(
    *,
    suite: str,
    experiment: str,
    scale: str,
    seed: int,
    grid_cells: int,
    cells: list[dict],
    attn: dict,
    base: dict | None,
    base_idx: list[int],
    gemm: dict,
    rss_start_mb: float,
    level: float | None = None,
    rng: dict | None = None,
    tags: tuple[str, ...] = (),
) -> dict:
    """Everything measured, as one JSON-ready dict: ratios, agreement, FLOP/s, compile, memory,
    and one row per cell. ``base_idx``: positions in ``cells`` of the baseline's cells; ``level``:
    the success level (None: the experiment's at ``scale``)."""
    s = get_suite(suite)
    if level is None:
        from attnlab.experiments import get

        level = s.level(get(experiment).spec(scale))
    oc = s.outcome
    K = len(cells)
    forms = [s.per_sample(c, int(n)) for c, n in zip(cells, attn["N_pad"], strict=True)]
    per = [f["run"] for f in forms]
    loops = [Loop.of(c, s.test_every_step) for c in cells]
    N = np.array([lp.N for lp in loops])
    stops = attn["stop_step"]
    useful = sum(cell_flops(p, lp, int(st)) for p, lp, st in zip(per, loops, stops, strict=True))
    executed = sum(
        cell_flops(f["run_padded"], lp, int(st), n_pad=int(n))
        for f, lp, st, n in zip(forms, loops, stops, attn["N_pad"], strict=True)
    )
    peak = gemm["best"]
    steady, whole = attn["steady_s"], attn["whole_s"]
    aot = attn.get("aot")
    a = {
        "strategy": attn["strategy"],
        "chunks": attn["chunks"],
        "chunk_sizes": attn["chunk_sizes"],
        "workers": attn.get("workers", 1),  # chunks trained at once (steady_by_chunk: per group of them)
        "whole_s": rounded(whole, 3),
        "steady_s": rounded(steady, 3),
        "whole_cpu_s": rounded(attn["whole_cpu_s"], 3),
        "steady_cpu_s": rounded(attn["steady_cpu_s"], 3),
        "cores_used_steady": rounded(attn["steady_cpu_s"] / steady, 2),
        "compile_s_aot": rounded(aot["compile_s"], 3) if aot else None,
        "lower_s_aot": rounded(aot["lower_s"], 3) if aot else None,
        "programs_compiled": aot["programs"] if aot else None,
        "whole_minus_steady_s": rounded(whole - steady, 3),
        "seconds_per_cell_steady": rounded(steady / K),
        "seconds_per_cell_whole": rounded(whole / K),
        "cells_per_s_steady": rounded(K / steady, 3),
        "cells_per_s_whole": rounded(K / whole, 3),
        "model_steps": int(stops.sum()),
        "model_steps_per_s_steady": rounded(stops.sum() / steady, 2),
        "flops_useful": int(useful),
        "flops_executed_with_padding": int(executed),
        "flops_per_s_steady": rounded(useful / steady, 0),
        "peak_fraction_steady": sig(useful / steady / peak),
        "flops_per_s_whole": rounded(useful / whole, 0),
        "peak_fraction_whole": sig(useful / whole / peak),
        "padding_overhead": rounded(executed / useful, 3),
        "cold_run_equals_warm_run": attn["cold_equals_warm"],
        "status_counts": {st: int((attn["status"] == st).sum()) for st in np.unique(attn["status"])},
        "peak_rss_mb": rounded(attn["peak_rss_mb"], 1),
        "rss_before_training_mb": rounded(rss_start_mb, 1),
    }
    shapes = {json.dumps(p, sort_keys=True) for p in per}
    floor = _floor(cells, [f["least"] for f in forms], stops, rng, peak, steady / K, tags) if rng else None
    report: dict[str, Any] = {
        "suite": suite,
        "experiment": experiment,
        "scale": scale,
        "seed": seed,
        "grid_cells": grid_cells,
        "cells": K,
        "machine": {
            "cpus": cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "jax": jax.__version__,
            "jax_backend": jax.default_backend(),
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
        },
        "gemm_jax": {
            "n": gemm["n"],
            "best_flops_per_s": rounded(gemm["best"], 0),
            "median_flops_per_s": rounded(gemm["median"], 0),
        },
        "flop_model": {
            "per_sample_forward": per[0]["forward"],
            "per_sample_backward": per[0]["backward"],
            "update": per[0]["update"],
            "model_shapes": len(shapes),
            "note": "contractions only, 2 FLOPs per multiply-add, per the cell's own model shape and the form "
            "attnlab trains it in (the dual form where the engine uses it; per_sample_*: the first cell's); "
            "attnlab's count: forward+backward of the step's batch at t = 0..stop (with "
            "mini-batches also a forward of the training set at each judged step), stop updates, a final "
            "forward of the train and test sets (padding excluded; 'executed' includes it); the baseline's: "
            "forward of the step's batch at every step, backward and update at t < stop, the training set at "
            "each judged step (mini-batches), the test set at every step (jiang2024) or once",
        },
        "outcome": {
            "name": oc.name,
            "label": oc.label,
            "success": f"{oc.label} {oc.op} {level:g}",
            "difference_of": "log10" if oc.log else "value",
            "floor": oc.floor,
        },
        "attnlab": a,
        "floor": floor,
        "baseline": None,
        "ratio": None,
        "agreement": None,
        "notes": list(s.notes),
    }
    fmt_out = sig if oc.log else (lambda x: rounded(x, 6))
    rows = []
    for i, c in enumerate(cells):
        row = {
            "id": grid.cell_id(c),
            "N": int(N[i]),
            **s.row(c),
            "rep": c.get("rep"),
            "block": c.get("block"),
            f"attnlab_{oc.name}": fmt_out(attn["outcome"][i]),
            "attnlab_stop_step": int(stops[i]),
            "attnlab_status": str(attn["status"][i]),
            "attnlab_seconds_chunk_share": rounded(attn["seconds"][i], 4),
        }
        rows.append(row)
    if base is not None and len(base_idx):
        nb = len(base_idx)
        b_sec = float(base["seconds"].sum())
        per_cell = b_sec / nb
        draw_cell = float(np.sum(base["draw_seconds"])) / nb if "draw_seconds" in base else 0.0
        b_flops = sum(
            cell_flops(forms[i]["plain"], loops[i], int(st), "paper")
            for i, st in zip(base_idx, base["stop_step"], strict=True)
        )
        b_steps = int(base["stop_step"].sum())
        a_flops_same = sum(cell_flops(per[i], loops[i], int(stops[i])) for i in base_idx)
        report["baseline"] = {
            "implementation": s.implementation,
            "torch": base["torch_version"],
            "threads": base["threads"],
            "cells": nb,
            "threads_calibration_s": base.get("threads_calibration_s"),
            "extrapolated": nb < K,
            "seconds": rounded(b_sec, 3),
            "seconds_per_cell": rounded(per_cell),
            "draw_seconds_per_cell": rounded(draw_cell, 6),
            "seconds_per_cell_with_draw": rounded(per_cell + draw_cell),
            "cpu_s": rounded(base["cpu_s"].sum(), 3),
            "cores_used": rounded(base["cpu_s"].sum() / b_sec, 2),
            "warmup_s_untimed": rounded(base["warmup_s"], 3),
            "extrapolated_seconds_for_all_cells": rounded(per_cell * K, 2),
            "model_steps": b_steps,
            "model_steps_per_s": rounded(b_steps / b_sec, 2),
            "flops": int(b_flops),
            "flops_per_s": rounded(b_flops / b_sec, 0),
            "peak_fraction_of_jax_gemm": sig(b_flops / b_sec / peak),
            "gemm_torch_best_flops_per_s": rounded(base["gemm"]["best"], 0),
            "peak_fraction_of_torch_gemm": sig(b_flops / b_sec / base["gemm"]["best"]),
            "status_counts": {st: int((base["status"] == st).sum()) for st in np.unique(base["status"])},
            "peak_rss_mb_after_baseline": rounded(base["peak_rss_mb"], 1),
        }
        report["ratio"] = {
            "steady": rounded(per_cell / (steady / K), 3),
            "whole": rounded(per_cell / (whole / K), 3),
            "steady_with_baseline_draw": rounded((per_cell + draw_cell) / (steady / K), 3),
            "whole_with_baseline_draw": rounded((per_cell + draw_cell) / (whole / K), 3),
            "per_model_step_steady": rounded((b_sec / max(b_steps, 1)) / (steady / max(int(stops.sum()), 1)), 3),
            "steady_cpu_time": rounded(float(base["cpu_s"].sum()) / nb / (attn["steady_cpu_s"] / K), 3),
            # steady ≈ work × efficiency: how much more arithmetic the paper's loop does on the same cells,
            # and how much faster attnlab does each FLOP
            "work_baseline_over_attnlab": rounded(b_flops / a_flops_same, 3),
            "flops_per_s_attnlab_over_baseline": rounded((useful / steady) / (b_flops / b_sec), 3),
            "whole_cpu_time": rounded(float(base["cpu_s"].sum()) / nb / (attn["whole_cpu_s"] / K), 3),
            "definition": "baseline seconds per cell / attnlab seconds per cell (steady: compiled programs reused; "
            "whole: the first run, compilation included; *_with_baseline_draw: the baseline also drawing its "
            "cell's inputs itself, as a paper's script does, timed as torch.randn of as many numbers); *_cpu_time: the same with process CPU "
            "seconds (less sensitive to other jobs on a shared machine, but it also counts how many "
            "cores each side keeps busy: see cores_used)"
            + (f"; baseline per cell measured on {nb} of the {K} cells and extrapolated" if nb < K else ""),
        }
        if attn.get("chunk_ids"):  # per chunk: the two sides ran back to back, under the same load
            bsec = {grid.cell_id(cells[i]): float(base["seconds"][j]) for j, i in enumerate(base_idx)}
            by_chunk = []
            for ids, sec in zip(attn["chunk_ids"], attn["chunk_s"], strict=True):
                mine = [bsec[i] for i in ids if i in bsec]
                if mine:
                    by_chunk.append(rounded(np.mean(mine) / (sec / len(ids)), 3))
            report["ratio"]["steady_by_chunk"] = by_chunk
            report["ratio"]["steady_by_chunk_range"] = [min(by_chunk), max(by_chunk)] if by_chunk else None
        idx = np.asarray(base_idx)
        report["agreement"] = agreement(
            attn["outcome"][idx],
            base["outcome"],
            level,
            stops[idx],
            base["stop_step"],
            op=oc.op,
            log=oc.log,
            floor=oc.floor,
        )
        report["agreement"]["a"], report["agreement"]["b"] = "attnlab", "baseline"
        report["agreement"]["outcome"] = oc.label
        for j, i in enumerate(base_idx):
            rows[i].update(
                {
                    f"baseline_{oc.name}": fmt_out(base["outcome"][j]),
                    "baseline_stop_step": int(base["stop_step"][j]),
                    "baseline_status": str(base["status"][j]),
                    "baseline_seconds": rounded(base["seconds"][j], 4),
                }
            )
        if nb < K:
            report["notes"].insert(
                0,
                f"baseline ran on a seeded sub-subset of {nb} of the {K} cells; its time per cell "
                "is extrapolated to all of them",
            )
    else:
        report["notes"].insert(0, "no baseline run (--baseline-cells 0)")
    report["notes"].append(
        "times are measured in this one process; the steady run and the baseline alternate chunk by "
        "chunk so both see the same load (ratio.steady_by_chunk: their spread); the compiling run "
        "comes first, alone. On a shared machine, repeat for spread"
    )
    report["per_cell"] = rows
    return report


def render(report: dict, console: Console) -> None:
    """A short human table of the report."""
    a, b, r, g = report["attnlab"], report["baseline"] or {}, report["ratio"] or {}, report["agreement"]
    t = Table(
        title=f"attnlab bench {report['suite']} ({report['experiment']}, {report['scale']}): "
        f"{report['cells']} of {report['grid_cells']} cells"
    )
    for col in ("", "attnlab", "serial PyTorch"):
        t.add_column(col, overflow="fold")
    fmt = lambda x, spec="": "—" if x is None else format(x, spec)  # noqa: E731
    bcells = f"{b.get('cells')}" + (" (extrapolated)" if b.get("extrapolated") else "") if b else "—"
    t.add_row("cells", str(report["cells"]), bcells)
    t.add_row("s / cell (steady)", fmt(a["seconds_per_cell_steady"], ".3f"), fmt(b.get("seconds_per_cell"), ".3f"))
    t.add_row(
        "s / cell (whole, incl. compile)",
        fmt(a["seconds_per_cell_whole"], ".3f"),
        fmt(b.get("seconds_per_cell"), ".3f"),
    )
    t.add_row("cells / s (steady)", fmt(a["cells_per_s_steady"], ".2f"), "—")
    t.add_row("model-steps / s", fmt(a["model_steps_per_s_steady"], ".1f"), fmt(b.get("model_steps_per_s"), ".1f"))
    t.add_row(
        "GFLOP/s (analytic count)",
        fmt(a["flops_per_s_steady"] and a["flops_per_s_steady"] / 1e9, ".2f"),
        fmt(b.get("flops_per_s") and b["flops_per_s"] / 1e9, ".2f"),
    )
    t.add_row(
        "fraction of JAX GEMM peak",
        fmt(a["peak_fraction_steady"], ".3g"),
        fmt(b.get("peak_fraction_of_jax_gemm"), ".3g"),
    )
    t.add_row("cores busy (CPU s / wall s)", fmt(a["cores_used_steady"], ".2f"), fmt(b.get("cores_used"), ".2f"))
    t.add_row("padding (executed / useful FLOPs)", fmt(a["padding_overhead"], ".3f"), "—")
    t.add_row("compile s (AOT)", fmt(a["compile_s_aot"], ".1f"), "—")
    t.add_row("peak RSS MB", fmt(a["peak_rss_mb"], ".0f"), fmt(b.get("peak_rss_mb_after_baseline"), ".0f"))
    console.print(t)
    gj = report["gemm_jax"]["best_flops_per_s"]
    console.print(f"JAX float32 {report['gemm_jax']['n']}² GEMM: {gj / 1e9:.1f} GFLOP/s (best)", highlight=False)
    f = report.get("floor")
    if f:
        console.print(
            f"protocol floor: {f['seconds_per_cell']:.3g} s / cell ({f['random_numbers_per_cell']:,} random numbers at "
            f"{f['generator']}: {f['draw_seconds_per_cell']:.3g} s; {f['flops_per_cell']:.3g} FLOPs at the GEMM rate: "
            f"{f['flop_seconds_per_cell']:.3g} s); attnlab steady = {f['multiple']:.2f}× the floor",
            highlight=False,
        )
    if r:
        rng = r.get("steady_by_chunk_range")
        console.print(
            f"ratio baseline / attnlab per cell: steady {r['steady']:.2f}×"
            + (f" (chunks {rng[0]:.2f}–{rng[1]:.2f}×)" if rng else "")
            + f", whole {r['whole']:.2f}×"
            + (
                f" (with the baseline's own data draw: steady {r['steady_with_baseline_draw']:.2f}×, whole "
                f"{r['whole_with_baseline_draw']:.2f}×)"
                if r.get("steady_with_baseline_draw")
                else ""
            )
            + f" (CPU time: steady {r['steady_cpu_time']:.2f}×, whole {r['whole_cpu_time']:.2f}×); "
            f"= the baseline's {r['work_baseline_over_attnlab']:.2f}× more FLOPs × attnlab's "
            f"{r['flops_per_s_attnlab_over_baseline']:.2f}× its FLOP/s",
            highlight=False,
        )
    if g:
        what = ("log10 " if g["difference_of"] == "log10" else "") + g.get("outcome", "test loss")
        what += f", values < {g['floor']:g} raised to it" if g.get("floor") is not None else ""
        console.print(
            f"agreement on {g['cells']} cells: mean |Δ {what}| {g['mean_abs_diff']:.4g} (max {g['max_abs_diff']:.4g}); "
            f"{g['different_side']} cell(s) on different sides of {g['level']:g} (success: {g['success_rule']}); "
            f"same stop step {g['same_stop_step']}/{g['cells']}"
            + (
                f"; mean Δ (attnlab − baseline) 95% CI [{g['mean_diff_ci95'][0]:.4g}, {g['mean_diff_ci95'][1]:.4g}]"
                if g.get("mean_diff_ci95")
                else ""
            ),
            highlight=False,
        )
    for n in report["notes"]:
        console.print(f"note: {n}", highlight=False, soft_wrap=True)


def _floor(cells, per, stops, rng: dict, peak: float, steady_per_cell: float, tags) -> dict:
    """The protocol's floor per cell: the random numbers it must draw at the fastest generator
    measured in this run, plus the FLOPs its exact algorithm cannot avoid (the paper's loop, the
    test set evaluated once, no padding, in the cheaper of the model's exact forms: ``per``) at
    the GEMM rate measured in this run."""
    from attnlab.bench.flops import random_numbers

    numbers = [random_numbers(c, int(st), tuple(tags)) for c, st in zip(cells, stops, strict=True)]
    flops = [cell_flops(p, Loop.of(c), int(st), "paper") for p, c, st in zip(per, cells, stops, strict=True)]
    best = rng[rng["best"]]
    draw_s, flop_s = best * float(np.mean(numbers)), float(np.mean(flops)) / peak
    seconds = draw_s + flop_s
    return {
        "seconds_per_cell": sig(seconds),
        "multiple": rounded(steady_per_cell / seconds, 3),
        "random_numbers_per_cell": int(np.mean(numbers)),
        "draw_seconds_per_cell": sig(draw_s),
        "flops_per_cell": int(np.mean(flops)),
        "flop_seconds_per_cell": sig(flop_s),
        "generator": rng["best"],
        "seconds_per_number": {k: sig(v) for k, v in rng.items() if k != "best"},
        "definition": "floor = random numbers the protocol draws (inputs, test inputs, initial parameters, "
        "mini-batch permutations) × the fastest generator's seconds per number + the FLOPs of the paper's "
        "loop with the test set evaluated once (no padding; the cheaper exact form: plain or dual) / the JAX GEMM rate, both measured in this run; "
        "multiple = attnlab's steady seconds per cell / floor",
    }
