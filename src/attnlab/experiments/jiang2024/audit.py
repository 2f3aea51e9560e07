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
    one = Hypothesis(
        "N·SNR = C (boundary slope −1)", "the linear-in-SNR law the paper's analysis rules out", THEORY | {"p": 1.0}
    )
    two = Hypothesis("N·SNR² = C (boundary slope −2)", SOURCE_THEORY, THEORY)
    claims = [
        ClaimAudit("slope", two, one),
        ClaimAudit("form", two, one),
        ClaimAudit(
            "curvature",
            Hypothesis("a straight boundary N·SNR² = C", SOURCE_THEORY, THEORY),
            Hypothesis(
                f"a bent boundary: the local slope changes by {BEND:g} across its SNR span",
                "no effect of the form: curvature three times the margin",
                THEORY | {"bend": BEND},
            ),
        ),
        ClaimAudit(
            "benign",
            Hypothesis("runs well above the curve all overfit benignly", SOURCE_THEORY, THEORY),
            Hypothesis(
                "30 % of runs far above the curve still overfit harmfully (success ≤ 0.7)",
                "no benign region",
                THEORY | {"ceiling": 0.7},
            ),
        ),
        ClaimAudit(
            "harmful",
            Hypothesis("runs well below the curve all overfit harmfully", SOURCE_THEORY, THEORY),
            Hypothesis(
                "30 % of runs far below the curve still generalise (success ≥ 0.3)",
                "no harmful region",
                THEORY | {"floor": 0.3},
            ),
        ),
    ]
    if C_paper is not None:
        claims.append(
            ClaimAudit(
                "C",
                Hypothesis(
                    f"N·SNR² = {C_paper:g}", "Jiang et al. 2024, Fig. 1 (the drawn curve)", THEORY | {"C": C_paper}
                ),
                Hypothesis(
                    f"N·SNR² = {4 * C_paper:g} (4× the paper's C)",
                    "another constant: the margin's far side × 2",
                    THEORY | {"C": 4 * C_paper},
                ),
            )
        )
    return Design(
        simulate=lambda world, noise, spec, cells, rng: simulate(derive, world, noise, spec, cells, rng),
        claims=tuple(claims),
        noise={"steepness": steepness},
        noise_source=noise_source,
        plug_in=plug_in(derive),
    )


# ---------------------------------------------------------------- fig3: the training dynamics

DYNAMICS_SOURCE = "Jiang et al. 2024, Sec. 5 and Fig. 3: the three-stage dynamics (V first, then QK, then attention)"


def _ramp(t: np.ndarray, onset: np.ndarray, size: float, tau: float) -> np.ndarray:
    """(reps, T): 0 before ``onset``, then size·(1 − e^{−(t − onset)/τ})."""
    return size * np.clip(1 - np.exp(-(t[None] - onset[:, None]) / tau), 0, None)


def simulate_dynamics(world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    """The trace columns of :class:`.fig3.Fig3`'s analysis, per cell of the design, on the run's
    logged steps. Per repeat the V-scalar group starts moving at t_V, the QK logits and the
    attention at t_QK (both log-normal around ``onset`` steps with log-sd ``onset_sd``; under H1
    t_QK is ``stage_ratio`` times later in median, under H0 drawn like t_V). The dominant token's
    attention moves from 1/M to ``attn_final``/M (the other M − 1 tokens share the rest) with
    per-repeat sd ``attn_sd``. One member of each group moves by 1 (10× the onset threshold), the
    others stay; every series carries measurement noise far below the onset thresholds."""
    from attnlab import train as T
    from attnlab.experiments.jiang2024.fig3 import QK_LOGITS, V_SCALARS

    c0 = cells[0]
    t = np.asarray(
        T.log_schedule(c0["train.max_steps"], every=c0["train.log_every"], dense_until=c0["train.log_dense_until"]),
        float,
    )
    n, M = len(cells), int(c0["data.M"])
    lognormal = lambda median: median * np.exp(noise["onset_sd"] * rng.standard_normal(n))
    t_V, t_QK = lognormal(noise["onset"]), lognormal(noise["onset"] * world["stage_ratio"])
    tau = noise["onset"]  # a move completes over a few onsets
    jitter = lambda: 1e-3 * rng.standard_normal((n, len(t)))
    group = lambda onset, size: _ramp(t, onset, size, tau) + jitter()
    final = np.clip(world["attn_final"] / M + noise["attn_sd"] * rng.standard_normal(n), 0, 1)
    dominant = 1 / M + _ramp(t, t_QK, 1.0, tau) * (final - 1 / M)[:, None] + jitter()
    rest = (1 - dominant) / (M - 1)  # the other named token and the weak-noise tokens
    series = {name: group(t_V, 1.0 if i == 0 else 0.0) for i, name in enumerate(V_SCALARS)}
    series |= {name: group(t_QK, 1.0 if i == 0 else 0.0) for i, name in enumerate(QK_LOGITS)}
    benign = np.array([c["regime"] == "benign" for c in cells])[:, None]
    series |= {
        "attn_signal_mean": np.where(benign, dominant, rest),
        "attn_strong_mean": np.where(benign, rest, dominant),
        "attn_weak_max_mean": rest + jitter(),
    }
    cols = {k: np.array([c[k] for c in cells]) for k in c0}
    cols |= {f"trace_{k}": _rows(v) for k, v in series.items()} | {"trace_step": _rows(np.tile(t, (n, 1)))}
    return cols | {"train_loss": rng.uniform(0, 0.1, n), "test_loss": rng.uniform(0, 1, n)}


def _rows(x: np.ndarray) -> np.ndarray:
    """A trace column as a run stores it: an object array of one array per cell."""
    out = np.empty(len(x), object)
    out[:] = list(x)
    return out


def plug_in_dynamics(cols: dict, spec) -> dict:
    """The onset scale and spread (median and log-sd of the V-scalar onsets, the spread taken
    within each regime, whose onsets differ in scale) and the per-repeat sd of the final
    attention on the dominant token, pooled over the regimes of a stored run."""
    from attnlab.experiments.jiang2024.fig3 import V_SCALARS, _onsets

    onsets, spread, sds = [], [], []
    for regime in np.unique(cols["regime"]):
        sel = np.flatnonzero(np.asarray(cols["regime"]) == regime)
        t = np.asarray(cols["trace_step"][sel[0]], float)
        get = lambda name, sel=sel: np.stack([np.asarray(cols[f"trace_{name}"][i], float) for i in sel])
        V = np.stack([get(n) for n in V_SCALARS], 1)
        mine = np.log([o for o in _onsets(t, V, spec.onset_delta) if np.isfinite(o) and o > 0])
        onsets += list(mine)
        spread += list(mine - np.median(mine)) if len(mine) else []
        dom = get("attn_signal_mean" if regime == "benign" else "attn_strong_mean")[:, -1]
        sds.append(float(np.std(dom, ddof=1)) if len(dom) > 1 else 0.0)
    log = np.array(onsets) if onsets else np.log([DYNAMICS_NOISE["onset"]])
    return {
        "onset": float(np.exp(np.median(log))),
        "onset_sd": float(max(np.std(spread) if spread else 0, 0.1)),
        "attn_sd": float(max(np.mean(sds), 0.01)),
    }


# measured on a cpu-scale run of jiang2024-fig3 (20 runs): V onsets at steps 2 (benign) and 8
# (harmful), log-sd 0.27 within a regime; final attention sd below 0.01 (floored there)
DYNAMICS_NOISE = {"onset": 3.7, "onset_sd": 0.27, "attn_sd": 0.01}


def dynamics_design(regimes=("harmful", "benign")) -> Design:
    """H1 / H0 of fig3's sparse-* and stages-* claims."""
    H1 = {"attn_final": 1.8, "stage_ratio": 3.0}  # attention 80 % above uniform; QK a stage (3×) after V
    claims = []
    for r in regimes:
        token = "signal" if r == "benign" else "strong-noise"
        claims += [
            ClaimAudit(
                f"sparse-{r}",
                Hypothesis(f"attention on the {token} token ends at 1.8/M", DYNAMICS_SOURCE, H1),
                Hypothesis("attention stays uniform (1/M)", "no effect: no concentration", H1 | {"attn_final": 1.0}),
            ),
            ClaimAudit(
                f"stages-{r}",
                Hypothesis("QK logits and attention start moving 3× later than the V-scalars", DYNAMICS_SOURCE, H1),
                Hypothesis(
                    "V, QK and attention start moving together", "no effect: a single stage", H1 | {"stage_ratio": 1.0}
                ),
            ),
        ]
    return Design(
        simulate=simulate_dynamics,
        claims=tuple(claims),
        noise=dict(DYNAMICS_NOISE),
        noise_source="default: measured on a cpu-scale run of jiang2024-fig3 (20 runs)",
        plug_in=plug_in_dynamics,
    )
