"""What bench measures besides time: the agreement of outcomes, memory, cores, the GEMM rate; rounding for the report."""

from __future__ import annotations

import math
import os
import platform
import resource
import time

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import philox

LEVEL = 0.2  # the success level of jiang2024-fig1: test loss < 0.2


def rss_mb() -> float:
    """Peak resident set size of this process so far (ru_maxrss: KiB on Linux, bytes on macOS)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 2**20 if platform.system() == "Darwin" else r / 2**10


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def agreement(
    a_val,
    b_val,
    level: float = LEVEL,
    a_stop=None,
    b_stop=None,
    op: str = "<",
    log: bool = False,
    floor: float | None = None,
) -> dict:
    """How far two implementations' outcomes on the same cells agree. Pairs with a non-finite
    value are counted and left out. Success = value ``op`` level; ``different_side``: cells that
    one side counts a success and the other not. With ``log`` the differences are of log10
    values (outcomes spanning decades); ``floor``: values below it are raised to it first (the
    outcome's resolution)."""
    if op not in ("<", "<="):
        raise ValueError(f"op must be '<' or '<=', got {op!r}")
    a, b = np.asarray(a_val, float), np.asarray(b_val, float)
    if floor is not None:
        a, b = np.maximum(a, floor), np.maximum(b, floor)  # NaN stays NaN
    ok = np.isfinite(a) & np.isfinite(b) & ((a > 0) & (b > 0) if log else True)
    a, b = a[ok], b[ok]
    wins = (lambda x: x < level) if op == "<" else (lambda x: x <= level)
    ta, tb = (np.log10(a), np.log10(b)) if log else (a, b)
    diff = np.abs(ta - tb)
    side = wins(a) != wins(b)
    out = {
        "cells": int(ok.sum()),
        "non_finite_pairs": int((~ok).sum()),
        "level": level,
        "success_rule": f"{op} {level:g}",
        "difference_of": "log10" if log else "value",
        "floor": floor,
        "mean_abs_diff": float(diff.mean()) if len(a) else None,
        "median_abs_diff": float(np.median(diff)) if len(a) else None,
        "max_abs_diff": float(diff.max()) if len(a) else None,
        "mean_diff_a_minus_b": float((ta - tb).mean()) if len(a) else None,
        "a_success": int(wins(a).sum()),
        "b_success": int(wins(b).sum()),
        "different_side": int(side.sum()),
        "different_side_share": float(side.mean()) if len(a) else None,
    }
    if op == "<":
        out["a_below_level"], out["b_below_level"] = out["a_success"], out["b_success"]
    if len(a) >= 2:  # is there a systematic difference? (paired: same cells, same data)
        from scipy import stats

        dm, se = float((ta - tb).mean()), float(np.std(ta - tb, ddof=1) / np.sqrt(len(a)))
        q = float(stats.t.ppf(0.975, len(a) - 1))
        out["mean_diff_ci95"] = [dm - q * se, dm + q * se] if se > 0 else [dm, dm]
        nz = (ta - tb) != 0
        out["wilcoxon_p"] = float(stats.wilcoxon(ta[nz], tb[nz]).pvalue) if nz.sum() >= 6 else None
    if a_stop is not None and b_stop is not None:
        sa, sb = np.asarray(a_stop, float)[ok], np.asarray(b_stop, float)[ok]
        out["same_stop_step"] = int((sa == sb).sum())
        out["mean_abs_stop_diff"] = float(np.abs(sa - sb).mean()) if len(sa) else None
    return out


def gemm_flops_jax(n: int = 2048, repeats: int = 10) -> dict:
    """FLOP/s of an n×n float32 matmul in JAX (jit, warmed up): best and median of ``repeats``."""
    ka, kb = jax.random.split(jax.random.PRNGKey(0))
    a = jax.random.normal(ka, (n, n), jnp.float32)
    b = jax.random.normal(kb, (n, n), jnp.float32)
    mm = jax.jit(jnp.matmul)
    mm(a, b).block_until_ready()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        mm(a, b).block_until_ready()
        times.append(time.perf_counter() - t0)
    flops = 2 * n**3
    return {"n": n, "best": flops / min(times), "median": flops / float(np.median(times))}


def rng_rates(n: int = 1 << 22, repeats: int = 5) -> dict[str, float]:
    """Seconds per standard-normal float32 of each generator attnlab could draw with, measured here
    (median of ``repeats`` draws of ``n``): JAX's in a compiled program (threefry, rbg), attnlab's
    Philox4x32-10 in a compiled program (:mod:`attnlab.philox`, what the jiang2024 and li2023 data
    draw with) and numpy's on the host (PCG64, Philox); ``best`` the fastest's name."""
    out: dict[str, float] = {}

    def timed(draw) -> float:
        draw()  # warm-up: compilation, allocation
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            draw()
            times.append(time.perf_counter() - t0)
        return float(np.median(times)) / n

    for impl in ("threefry2x32", "rbg"):
        key = jax.random.key(0, impl=impl)
        normal = jax.jit(lambda k: jax.random.normal(k, (n,), jnp.float32))
        out[f"jax_{impl}"] = timed(lambda normal=normal, key=key: normal(key).block_until_ready())
    normal, key = jax.jit(lambda k: philox.normal(k, (n,), jnp.float32)), jax.random.key(0)
    out["attnlab_philox"] = timed(lambda: normal(key).block_until_ready())
    for name, bits in (("pcg64", np.random.PCG64), ("philox", np.random.Philox)):
        gen = np.random.Generator(bits(0))
        out[f"numpy_{name}"] = timed(lambda gen=gen: gen.standard_normal(n, dtype=np.float32))
    out["best"] = min(out, key=out.get)
    return out


def sig(x, digits: int = 4):
    """A JSON-ready float to ``digits`` significant digits (None for None, NaN, inf)."""
    if x is None or not math.isfinite(float(x)):
        return None
    return float(f"{float(x):.{digits}g}")
