"""Audit design of ``wu2023-data-gram``: ρ = λ_min/λ̄ per cell from the experiment's own
:func:`.data_gram.grams` on i.i.d. N(0, 1) tokens of the cell's N, d_s, d (data with no special
structure; mean log ρ of 4 draws per point, computed once; the analysis's own reference ρ_gauss) ×
log-normal scatter. H0: that Gram; H1: twice its ρ (the paper gives no size): better conditioned than
unstructured data, the sampling decay remaining. Both fall with N, as the Gram of any i.i.d. sample
does, so the trend-* claims are descriptive."""

from __future__ import annotations

import functools

import numpy as np

from attnlab.audit import ClaimAudit, Design, Hypothesis
from attnlab.experiments.wu2023.audit.runs import frame, lognormal


@functools.lru_cache(maxsize=8)
def gaussian_rho(points: tuple[tuple[int, int], ...], draws: int = 4) -> dict[tuple[int, int], dict[str, float]]:
    """(N, patch) -> mean log ρ of the input and relu Grams of N samples of i.i.d. N(0, 1) tokens
    (d = patch², d_s = (28/patch)²), by the experiment's own :func:`.data_gram.grams` (both full
    rank: N ≤ d_s·d and no two mean tokens parallel, almost surely); each point from its own
    seed (0, N, patch), so a point's value does not depend on the others asked with it."""
    from attnlab.experiments.wu2023.data_gram import grams, spectrum_stats

    out = {}
    for N, p in points:
        rng = np.random.default_rng([0, N, p])
        G = [grams(rng.standard_normal((N, (28 // p) ** 2, p * p))) for _ in range(draws)]
        out[(N, p)] = {k: float(np.mean([np.log(spectrum_stats(g[k])["rho"]) for g in G])) for k in ("input", "relu")}
    return out


def simulate_gram(world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    cols = frame(cells)
    n = len(cells)
    N, p = cols["data.N"].astype(int), cols["data.patch"].astype(int)
    table = gaussian_rho(tuple(sorted(set(zip(N.tolist(), p.tolist(), strict=True)))))
    out = {"d": p * p, "d_s": (28 // p) ** 2}
    for k in ("input", "relu"):
        rho = np.exp([table[(a, b)][k] for a, b in zip(N, p, strict=True)]) * lognormal(rng, noise["sd"], n)
        rho = world["floor"] + world.get("factor", 1.0) * rho
        lam_mean = np.ones(n)
        out |= {
            f"{k}_rho": rho,
            f"{k}_lambda_min": rho,
            f"{k}_lambda_mean": lam_mean,
            f"{k}_lambda_max": np.full(n, 5.0),
            f"{k}_rank": N,
        }
    return cols | out


def gram_noise(cols: dict, spec) -> dict:
    """Plug-in: the median over (N, d) points of the sd of log ρ over subsets (non-singular cells)."""
    sds = []
    for k in ("input", "relu"):
        ok = cols[f"{k}_rank"].astype(int) >= cols["data.N"].astype(int)
        for key in set(zip(cols["data.N"][ok], cols["d"][ok], strict=True)):
            s = ok & (cols["data.N"] == key[0]) & (cols["d"] == key[1])
            if s.sum() >= 2:
                sds.append(np.std(np.log(cols[f"{k}_rho"][s].astype(float)), ddof=1))
    return {"sd": float(np.median(sds))}


def gram_design() -> Design:
    gauss = Hypothesis(
        "ρ of i.i.d. N(0, 1) tokens' Grams (no special structure), same N, d_s, d",
        "the sheet: λ_min/λ̄ of N i.i.d. samples falls with N for any kernel",
        {"floor": 0.0},
    )
    floor = Hypothesis(
        "bounded away from 0 beyond chance: ρ twice that of the Gaussian tokens (size assumed: the paper gives none)",
        "Wu et al. 2023, the data assumption: λ_min of the data Gram bounded away from 0",
        {"floor": 0.0, "factor": 2.0},
    )
    return Design(
        simulate=simulate_gram,
        claims=tuple(ClaimAudit(f"{c}-{k}", floor, gauss) for k in ("input", "relu") for c in ("floor", "trend")),
        noise={"sd": 0.11},
        noise_source="default: the median sd of log ρ over subsets per (N, d) of a cpu-scale run of wu2023-data-gram",
        plug_in=gram_noise,
    )
