"""The audit design of the (SNR, N) phase claims (:mod:`.phase`): a simulator of the per-run
columns at the experiment's real design, and H1 / H0 for each claim (see :mod:`attnlab.audit`).

Simulator. For every cell of the design (grid point, repeat, seed block), a run succeeds with

    P(success) = floor + (ceiling − floor) · σ(s · (log N + p·log SNR + κ·(log SNR − m)² − log C))

where m is the grid's mean log SNR. A success gets a test loss below the level (level × U(0.2,
0.9)), a failure one above it (level × U(1.2, 4)); every run reaches the training threshold
(``converged``), as the paper's protocol trains to it. log C puts the boundary at the median of
log N + p·log SNR over the design's cells (inside the grid) unless a world fixes C.

Noise: the steepness s of the logistic, from a stored run through ``plug_in`` (the logistic fit
of success on log N + 2·log SNR), else the experiment's default, measured on one of its cpu-scale
runs. Effect sizes (p, κ, floor, ceiling, C) are the hypotheses', never measured.
"""

from __future__ import annotations

import numpy as np

from attnlab import theory
from attnlab.audit import ClaimAudit, Design, Hypothesis

THEORY = {"p": 2.0, "bend": 0.0, "ceiling": 1.0, "floor": 0.0}
SOURCE_THEORY = "Jiang et al. 2024, Thm. 4.1–4.2: the benign/harmful boundary N·SNR² = Θ(1)"
BEND = 1.5  # H0 of curvature: the local slope changes by 3× the ±0.5 margin across the boundary's span


def simulate(derive, world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    """The columns :func:`.phase.analyse_phase`'s caller reads, for ``cells`` under ``world``.
    ``derive(cols)`` adds the columns the experiment derives from its cells, ``snr`` among them
    (the experiment's own definition of the SNR)."""
    cols = derive({k: np.array([c[k] for c in cells]) for k in cells[0]})
    logN, logS = np.log(cols["data.N"].astype(float)), np.log(cols["snr"])
    m = logS.mean()
    p = world["p"]
    span = (logN.max() - logN.min()) / p  # the log-SNR span the boundary crosses inside the N range
    kappa = world["bend"] / (2 * span) if world["bend"] else 0.0  # local slope −p − 2κ(log SNR − m)
    u = logN + p * logS + kappa * (logS - m) ** 2
    logC = np.log(world["C"]) if "C" in world else np.median(u)
    prob = world["floor"] + (world["ceiling"] - world["floor"]) / (1 + np.exp(-noise["steepness"] * (u - logC)))
    success = rng.random(len(cells)) < prob
    level = spec.level
    loss = np.where(success, level * rng.uniform(0.2, 0.9, len(cells)), level * rng.uniform(1.2, 4.0, len(cells)))
    return cols | {"test_loss": loss, "status": np.array(["converged"] * len(cells))}


def plug_in(derive):
    def noise(cols: dict, spec) -> dict:
        """The steepness of the logistic of success on log N + 2·log SNR in a stored run."""
        cols = derive(dict(cols))
        ok = np.asarray(cols["status"]) != "diverged"
        u = np.log(np.asarray(cols["data.N"], float)[ok]) + 2 * np.log(np.asarray(cols["snr"], float)[ok])
        success = np.asarray(cols["test_loss"], float)[ok] < spec.level
        b, _ = theory.logistic_fit(np.column_stack([np.ones_like(u), u]), success)
        return {"steepness": float(abs(b[1]))}

    return noise


def phase_design(derive, steepness: float, noise_source: str, C_paper: float | None = None) -> Design:
    """H1 and H0 of every phase claim (``C`` only where the experiment judges it); ``derive`` as
    for :func:`simulate`; ``steepness``: the default noise level and where it was measured."""
    one = Hypothesis("N·SNR = C (boundary slope −1)", "the linear-in-SNR law the paper's analysis rules out",
                     THEORY | {"p": 1.0})  # fmt: skip
    two = Hypothesis("N·SNR² = C (boundary slope −2)", SOURCE_THEORY, THEORY)
    claims = [
        ClaimAudit("slope", two, one),
        ClaimAudit("form", two, one),
        ClaimAudit("curvature", Hypothesis("a straight boundary N·SNR² = C", SOURCE_THEORY, THEORY),
                   Hypothesis(f"a bent boundary: the local slope changes by {BEND:g} across its SNR span",
                              "no effect of the form: curvature three times the margin", THEORY | {"bend": BEND})),
        ClaimAudit("benign", Hypothesis("runs well above the curve all overfit benignly", SOURCE_THEORY, THEORY),
                   Hypothesis("30 % of runs far above the curve still overfit harmfully (success ≤ 0.7)",
                              "no benign region", THEORY | {"ceiling": 0.7})),
        ClaimAudit("harmful", Hypothesis("runs well below the curve all overfit harmfully", SOURCE_THEORY, THEORY),
                   Hypothesis("30 % of runs far below the curve still generalise (success ≥ 0.3)",
                              "no harmful region", THEORY | {"floor": 0.3})),
    ]  # fmt: skip
    if C_paper is not None:
        claims.append(ClaimAudit(
            "C", Hypothesis(f"N·SNR² = {C_paper:g}", "Jiang et al. 2024, Fig. 1 (the drawn curve)",
                            THEORY | {"C": C_paper}),
            Hypothesis(f"N·SNR² = {4 * C_paper:g} (4× the paper's C)", "another constant: the margin's far side × 2",
                       THEORY | {"C": 4 * C_paper})))  # fmt: skip
    return Design(
        simulate=lambda world, noise, spec, cells, rng: simulate(derive, world, noise, spec, cells, rng),
        claims=tuple(claims),
        noise={"steepness": steepness},
        noise_source=noise_source,
        plug_in=plug_in(derive),
    )
