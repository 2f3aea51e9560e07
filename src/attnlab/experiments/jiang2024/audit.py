"""The audit design of the (SNR, N) phase claims (:mod:`.phase`): a simulator of the per-run
columns at the experiment's real design, and the worlds of each claim (see :mod:`attnlab.audit`).

Simulator. For every cell of the design (grid point, repeat, seed block) a run succeeds with

    P(success) = floor + (ceiling − floor) · F(s · (u − c)),   then flipped with probability γ / λ
    u = log N + p·log SNR + κ·(log SNR − m)² − log(kink)·[N in the upper half of the N values]

where m is the grid's mean log SNR and F the world's link: ``probit`` (Φ(x/1.7), the logistic's
shape with thinner tails), ``step`` (a hard threshold: every run on its side) or ``logistic``. The
rules fit logistics (with lapse rates) in (log SNR, log N), so every world of a claim uses the
probit or the step link: a generative model other than the fitted family. A success gets a test
loss below the level (level × U(0.2, 0.9)), a failure one above it (level × U(1.2, 4)); a run fails
to reach the training threshold with the run's share of such runs.

Operating point. Every world's boundary passes through the real run's boundary at the grid's
middle N: c = log N₀ + p·log SNR₀, where (SNR₀, N₀) lies on N·SNR² = Ĉ and N₀ is the median N
(without a stored run Ĉ is the median of N·SNR² over the cells: the boundary mid-grid). The
steepness s, Ĉ, the lapse rates γ, λ (runs that ignore the boundary) and the share of runs that
did not converge come from a stored run through ``plug_in`` (a logistic with lapses of success on
log N + 2·log SNR), else the experiment's defaults, measured on one of its cpu-scale runs. Effect
sizes (p, κ, kink, floor, ceiling, C) are the hypotheses', never measured.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from attnlab import theory
from attnlab.audit import ClaimAudit, Design, Hypothesis

THEORY = {"p": 2.0, "bend": 0.0, "kink": 1.0, "ceiling": 1.0, "floor": 0.0, "link": "probit", "flip": 0.0}
SOURCE_THEORY = "Jiang et al. 2024, Thm. 4.1–4.2: the benign/harmful boundary N·SNR² = Θ(1)"
SOURCE_CNN = "two-layer CNNs with ReLU^q activations: benign iff N·SNR^q = Ω(1), q > 2 (Cao et al. 2022)"
BEND = 1.5  # H0 of curvature: the local slope changes by 3× the ±0.5 margin across the boundary's span


def _link(name: str, x: np.ndarray) -> np.ndarray:
    if name == "probit":
        return stats.norm.cdf(x / 1.7)
    if name == "step":
        return (x > 0).astype(float)
    return 1 / (1 + np.exp(-x))


def simulate(derive, world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    """The columns :func:`.phase.analyse_phase`'s caller reads, for ``cells`` under ``world``.
    ``derive(cols)`` adds the columns the experiment derives from its cells, ``snr`` among them
    (the experiment's own definition of the SNR)."""
    cols = derive({k: np.array([c[k] for c in cells]) for k in cells[0]})
    N = cols["data.N"].astype(float)
    logN, logS = np.log(N), np.log(cols["snr"])
    m, p = logS.mean(), world["p"]
    span = (logN.max() - logN.min()) / p  # the log-SNR span the boundary crosses inside the N range
    kappa = world["bend"] / (2 * span) if world["bend"] else 0.0  # local slope −p − 2κ(log SNR − m)
    upper = N > np.median(np.unique(N))
    u = logN + p * logS + kappa * (logS - m) ** 2 - np.log(world["kink"]) * upper
    logC = np.log(noise["C"]) if "C" in noise else np.median(logN + 2 * logS)
    logN0 = np.log(np.median(np.unique(N)))
    c = np.log(world["C"]) if "C" in world else logN0 + p * (logC - logN0) / 2 + kappa * ((logC - logN0) / 2 - m) ** 2
    prob = world["floor"] + (world["ceiling"] - world["floor"]) * _link(world["link"], noise["steepness"] * (u - c))
    success = rng.random(len(cells)) < prob
    gamma, lam = noise.get("lapse_up", 0.0) + world["flip"], noise.get("lapse_down", 0.0) + world["flip"]
    draw = rng.random(len(cells))
    success = np.where(draw < gamma, True, np.where(draw < gamma + lam, False, success))
    level = spec.level
    loss = np.where(success, level * rng.uniform(0.2, 0.9, len(cells)), level * rng.uniform(1.2, 4.0, len(cells)))
    status = np.where(rng.random(len(cells)) < noise.get("unconverged", 0.0), "cap", "converged")
    return cols | {"test_loss": loss, "status": status}


def plug_in(derive):
    def noise(cols: dict, spec) -> dict:
        """The operating point of a stored run: the steepness, Ĉ and lapse rates of a logistic with
        lapses of success on log N + 2·log SNR, and the share of runs that did not converge."""
        cols = derive(dict(cols))
        status = np.asarray(cols["status"])
        ok = status != "diverged"
        u = np.log(np.asarray(cols["data.N"], float)[ok]) + 2 * np.log(np.asarray(cols["snr"], float)[ok])
        success = (np.asarray(cols["test_loss"], float)[ok] < spec.level).astype(float)
        Z = np.column_stack([np.ones_like(u), u])
        b, up, down = theory._lapse_batch(Z, success, np.ones((1, len(u))), 1e-4, iters=200)
        steep = float(abs(b[0, 1]))
        return {
            "steepness": steep,
            "C": float(np.exp(-b[0, 0] / b[0, 1])) if steep > 1e-9 else float(np.exp(np.median(u))),
            "lapse_up": float(up[0]),
            "lapse_down": float(down[0]),
            "unconverged": float(np.mean(status[ok] != "converged")),
        }

    return noise


def phase_design(derive, noise: dict, noise_source: str, C_paper: float | None = None) -> Design:
    """The worlds of every phase claim (``C`` only where the experiment judges it); ``derive`` as
    for :func:`simulate`; ``noise``: the default operating point and where it was measured."""
    two = Hypothesis("N·SNR² = C (boundary slope −2), probit link", SOURCE_THEORY, THEORY)
    cnn = Hypothesis("N·SNR³ = C (slope −3, the CNN law with q = 3)", SOURCE_CNN, THEORY | {"p": 3.0})
    linear = Hypothesis("N·SNR = C (slope −1), a sharp transition", "a linear-in-SNR law", THEORY | {"p": 1.0})
    between = Hypothesis("N·SNR^2.75 = C: between H1 and H0", "a law between the two", THEORY | {"p": 2.75})
    kink = Hypothesis(
        "N·SNR² = C below the median N, = 4C above it: a displaced boundary",
        "another functional form: a step in C",
        THEORY | {"kink": 4.0},
    )
    flips = Hypothesis(
        "N·SNR² = C as a hard threshold, 5 % of runs flipped",
        "H1 under label noise",
        THEORY | {"link": "step", "flip": 0.05},
    )
    claims = [
        ClaimAudit("slope", two, cnn, misspecified=(between, linear, kink), also_true=(flips,)),
        ClaimAudit(
            "curvature",
            Hypothesis("a straight boundary N·SNR² = C", SOURCE_THEORY, THEORY),
            Hypothesis(
                f"a bent boundary: the local slope changes by {BEND:g} across its SNR span",
                "a curved law of the same mean slope",
                THEORY | {"bend": BEND},
            ),
            also_true=(flips,),
        ),
    ]
    for name, far in (("benign", "ceiling"), ("harmful", "floor")):
        claims.append(
            ClaimAudit(
                name,
                Hypothesis(
                    f"runs well {'above' if name == 'benign' else 'below'} N·SNR² = C behave", SOURCE_THEORY, THEORY
                ),
                linear,
                misspecified=(
                    kink,
                    Hypothesis(
                        f"30 % of runs far {'above' if name == 'benign' else 'below'} the curve misbehave",
                        f"no clean {name} region",
                        THEORY | {far: 0.7 if far == "ceiling" else 0.3},
                    ),
                ),
                also_true=(flips,),
            )
        )
    if C_paper is not None:
        claims.append(
            ClaimAudit(
                "C",
                Hypothesis(
                    f"N·SNR² = {C_paper:g}", "Jiang et al. 2024, Fig. 1 (the drawn curve)", THEORY | {"C": C_paper}
                ),
                Hypothesis(
                    f"N·SNR² = {4 * C_paper:g} (4× the paper's C)", "another constant", THEORY | {"C": 4 * C_paper}
                ),
                misspecified=(
                    Hypothesis(
                        f"N·SNR² = {2.5 * C_paper:g}: between", "a constant between", THEORY | {"C": 2.5 * C_paper}
                    ),
                ),
            )
        )
    return Design(
        simulate=lambda world, noise, spec, cells, rng: simulate(derive, world, noise, spec, cells, rng),
        claims=tuple(claims),
        noise=dict(noise),
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
    others stay; every series carries measurement noise far below the onset thresholds.

    Other generative families (world keys): ``spread`` = "gamma" draws the onsets from gamma laws
    of the same median and log-spread, and the final attention with a heavy-tailed (Student t₃)
    spread; ``swap`` puts the concentration on the regime's *other* named token (the signal token
    in the harmful regime, the strong-noise token in the benign one)."""
    from attnlab import train as T
    from attnlab.experiments.jiang2024.fig3 import QK_LOGITS, V_SCALARS

    c0 = cells[0]
    t = np.asarray(
        T.log_schedule(c0["train.max_steps"], every=c0["train.log_every"], dense_until=c0["train.log_dense_until"]),
        float,
    )
    n, M = len(cells), int(c0["data.M"])
    gamma = world.get("spread") == "gamma"
    shape = 1 / max(noise["onset_sd"], 1e-3) ** 2  # a gamma law whose log has about the same sd

    def onsets(median):
        if gamma:
            return median * rng.gamma(shape, 1 / shape, n) / (1 - 1 / (3 * shape))
        return median * np.exp(noise["onset_sd"] * rng.standard_normal(n))

    t_V, t_QK = onsets(noise["onset"]), onsets(noise["onset"] * world["stage_ratio"])
    tau = noise["onset"]  # a move completes over a few onsets
    jitter = lambda: 1e-3 * rng.standard_normal((n, len(t)))
    group = lambda onset, size: _ramp(t, onset, size, tau) + jitter()
    spread = rng.standard_t(3, n) / np.sqrt(3) if gamma else rng.standard_normal(n)
    final = np.clip(world["attn_final"] / M + noise["attn_sd"] * spread, 0, 1)
    dominant = 1 / M + _ramp(t, t_QK, 1.0, tau) * (final - 1 / M)[:, None] + jitter()
    rest = (1 - dominant) / (M - 1)  # the other named token and the weak-noise tokens
    series = {name: group(t_V, 1.0 if i == 0 else 0.0) for i, name in enumerate(V_SCALARS)}
    series |= {name: group(t_QK, 1.0 if i == 0 else 0.0) for i, name in enumerate(QK_LOGITS)}
    benign = np.array([c["regime"] == "benign" for c in cells])[:, None]
    benign = ~benign if world.get("swap") else benign
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
        other = "the strong-noise" if r == "benign" else "the signal"
        claims += [
            ClaimAudit(
                f"sparse-{r}",
                Hypothesis(f"attention on the {token} token ends at 1.8/M", DYNAMICS_SOURCE, H1),
                Hypothesis(
                    f"attention concentrates on the other named token ({other} one)",
                    "the other regime's mechanism: the token the paper says wins there",
                    H1 | {"swap": True},
                ),
                misspecified=(
                    Hypothesis("attention stays uniform (1/M)", "no concentration", H1 | {"attn_final": 1.0}),
                    Hypothesis(
                        "attention ends at 1.1/M: between uniform and the prediction",
                        "a law between",
                        H1 | {"attn_final": 1.1},
                    ),
                ),
                also_true=(
                    Hypothesis(
                        "attention ends at 1.8/M with a heavy-tailed spread over repeats",
                        "H1, another family (Student t₃)",
                        H1 | {"spread": "gamma"},
                    ),
                ),
            ),
            ClaimAudit(
                f"stages-{r}",
                Hypothesis("QK logits and attention start moving 3× later than the V-scalars", DYNAMICS_SOURCE, H1),
                Hypothesis(
                    "QK logits and attention move first, the V-scalars 3× later",
                    "the reverse order of the stages",
                    H1 | {"stage_ratio": 1 / 3},
                ),
                misspecified=(
                    Hypothesis(
                        "V, QK and attention start moving together", "a single stage", H1 | {"stage_ratio": 1.0}
                    ),
                ),
                also_true=(
                    Hypothesis(
                        "QK 3× later than V, onsets gamma-distributed",
                        "H1, another family of onsets",
                        H1 | {"spread": "gamma"},
                    ),
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
