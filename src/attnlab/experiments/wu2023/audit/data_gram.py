"""Audit design of ``wu2023-data-gram`` and ``wu2023-imdb-gram``: per cell, the columns of the
experiment's :func:`.data_gram.cell_measures` (λ_min, λ_max, λ̄, ρ, the numerical rank per matrix,
the varying input coordinates, duplicated samples) drawn under worlds of differently generated
data, at the cells of the real design.

The level of a non-singular matrix is that of i.i.d. N(0, 1) tokens of the cell's N, d_s, d (mean
log ρ and log λ_max/λ̄ of 4 draws per point by the experiment's own :func:`.data_gram.gram_stats`,
computed once; the analysis's reference ρ_gauss) × ``factor`` × log-normal scatter. Where a world
makes a cell's matrix singular, its rank is below N and its λ_min is rounding noise,
|λ_min| ≲ λ_max·ε. The judged claim is nonsingular-relu (λ_min/λ_max above 100·N·ε in every cell):

    H1          a non-singular kernel, ρ = 0.1 ρ_gauss (MNIST's measured 0.06 … 0.17)
    H0          an exact duplicate pair in every cell (rank N − 1): data with repeated samples
    misspecified  a low-rank (many-to-one) embedding: the samples span r dimensions, r the
                median N of the grid, so only the cells with N > r are singular; and two
                near-parallel samples in every cell: full numerical rank, λ_min/λ_max ≈ 10·N·ε,
                within the margin of rounding (the rule must not pass)
    also true   ill-conditioned but non-singular data: ρ = 10⁻⁴ ρ_gauss (must pass)

The other claims (floor-*, trend-*, nonsingular-input) are measurements: not audited."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from attnlab.audit import ClaimAudit, Design, Hypothesis
from attnlab.experiments.wu2023.audit.runs import frame, lognormal

EPS = float(np.finfo(np.float64).eps)
KERNELS = ("input", "relu")


@functools.lru_cache(maxsize=8)
def gaussian_stats(
    points: tuple[tuple[int, int, int], ...], draws: int = 4
) -> dict[tuple[int, int, int], dict[str, dict[str, float]]]:
    """(N, d_s, d) -> per matrix (input, relu) the mean log ρ and mean log λ_max/λ̄ of N samples of
    i.i.d. N(0, 1) tokens, by the experiment's own :func:`.data_gram.gram_stats` (the relu kernel is
    full rank: no two mean tokens are parallel, almost surely; the input Gram is singular where
    N > d_s·d, and its log ρ is then NaN); each point from its own seed (0, N, d_s, d), so a
    point's value does not depend on the others asked with it."""
    from attnlab.experiments.wu2023.data_gram import gram_stats

    out = {}
    for N, d_s, d in points:
        rng = np.random.default_rng([0, N, d_s, d])
        S = [gram_stats(rng.standard_normal((N, d_s, d))) for _ in range(draws)]
        out[(N, d_s, d)] = {
            k: {
                "rho": float(np.mean(np.log([s[k]["rho"] for s in S]))) if k == "relu" or N <= d_s * d else np.nan,
                "top": float(np.mean(np.log([s[k]["lambda_max"] / s[k]["lambda_mean"] for s in S]))),
            }
            for k in KERNELS
        }
    return out


def simulator(shape: Callable[[dict], tuple[int, int]]):
    """The design's ``simulate``, for an experiment whose cell ``c`` has tokens of shape
    ``shape(c)`` = (d_s, d)."""

    def simulate_gram(world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
        cols = frame(cells)
        n = len(cells)
        N = cols["data.N"].astype(int)
        d_s, d = (np.array(a) for a in zip(*(shape(c) for c in cells), strict=True))
        points = tuple(sorted({(int(a), int(b), int(c)) for a, b, c in zip(N, d_s, d, strict=True)}))
        table = gaussian_stats(points)
        lookup = lambda k, m: np.array([table[(a, b, c)][k][m] for a, b, c in zip(N, d_s, d, strict=True)])
        r = int(np.median(np.unique(N)))
        if world.get("singular") == "duplicate":
            rank = N - 1
        elif world.get("singular") == "lowrank":
            rank = np.minimum(N, r)
        else:
            rank = N.copy()
        out = {"d": d, "d_s": d_s, "input_varying": d_s * d, "duplicates": (rank < N).astype(int)}
        for k in KERNELS:
            rho = np.exp(lookup(k, "rho")) * world.get("factor", 1.0) * lognormal(rng, noise["sd"], n)
            top = np.exp(lookup(k, "top")) * lognormal(rng, noise["sd"], n)  # λ_max/λ̄
            k_rank = np.minimum(rank, d_s * d) if k == "input" else rank
            sing = (k_rank < N) | ~np.isfinite(rho)
            k_rank = np.where(sing, np.minimum(k_rank, N - 1), N)
            if world.get("near"):  # two near-parallel samples: full rank, λ_min/λ_max ≈ near·N·ε
                rho = world["near"] * N * EPS * top * lognormal(rng, 0.3, n)
            rounding = EPS * top * rng.uniform(-1, 1, n)  # λ_min of a singular matrix: rounding noise
            rho = np.where(sing, rounding, rho)
            out |= {
                f"{k}_rho": rho,
                f"{k}_lambda_min": rho,
                f"{k}_lambda_mean": np.ones(n),
                f"{k}_lambda_max": top,
                f"{k}_rank": k_rank,
            }
        return cols | out

    return simulate_gram


def gram_noise(cols: dict, spec) -> dict:
    """Plug-in: the median over (N, d) points of the sd of log ρ over subsets (non-singular cells)."""
    sds = []
    for k in KERNELS:
        ok = (cols[f"{k}_rank"].astype(int) >= cols["data.N"].astype(int)) & (cols[f"{k}_rho"].astype(float) > 0)
        for key in set(zip(cols["data.N"][ok], cols["d"][ok], strict=True)):
            s = ok & (cols["data.N"] == key[0]) & (cols["d"] == key[1])
            if s.sum() >= 2:
                sds.append(np.std(np.log(cols[f"{k}_rho"][s].astype(float)), ddof=1))
    return {"sd": float(np.median(sds))}


S_ASSUME = "Wu et al. 2023, the data assumption: λ_min of the data's Gram matrix > 0 (bounded away from 0)"
S_DISTINCT = (
    "NTK convergence proofs assume pairwise non-parallel samples (κ₁ is then strictly positive definite); "
    "a duplicated sample breaks it (IMDB's training split repeats some reviews)"
)


def gram_design(shape: Callable[[dict], tuple[int, int]]) -> Design:
    """The audit design of a data-gram experiment whose cells have tokens of shape ``shape(c)``."""
    h1 = Hypothesis("a non-singular kernel: ρ = 0.1 ρ_gauss (MNIST's measured level)", S_ASSUME, {"factor": 0.1})
    h0 = Hypothesis("an exact duplicate pair in every cell: rank N − 1", S_DISTINCT, {"singular": "duplicate"})
    lowrank = Hypothesis(
        "a low-rank (many-to-one) embedding: the samples span r = the grid's median N dimensions; cells with N > r "
        "are singular, the others not",
        "an embedding of too few dimensions, or reviews cut to identical first tokens",
        {"factor": 0.1, "singular": "lowrank"},
    )
    near = Hypothesis(
        "two near-parallel samples in every cell: full numerical rank, λ_min/λ_max ≈ 10·N·ε",
        "near-duplicates (a review and its light edit): λ_min ≈ 0 within float64 rounding",
        {"near": 10.0},
    )
    illcond = Hypothesis(
        "ill-conditioned but non-singular: ρ = 10⁻⁴ ρ_gauss",
        "structured data far worse conditioned than Gaussian tokens still satisfy λ_min > 0",
        {"factor": 1e-4},
    )
    judged = ClaimAudit("nonsingular-relu", h1, h0, misspecified=(lowrank, near), also_true=(illcond,))
    measured = tuple(
        ClaimAudit(f"{c}-{k}", h1, h0)
        for k in KERNELS
        for c in ("nonsingular", "floor", "trend")
        if (c, k) != ("nonsingular", "relu")
    )
    return Design(
        simulate=simulator(shape),
        claims=(judged, *measured),
        noise={"sd": 0.11},
        noise_source="default: the median sd of log ρ over subsets per (N, d) of a cpu-scale run of wu2023-data-gram",
        plug_in=gram_noise,
    )
