"""The audit design of the li2023 phase diagrams (fig1, fig2, noise, init-error and the fig1
regimes): a simulator of success over (x, N) with a boundary inside the grid and of the
iterations to zero training hinge loss, the plug-in of its noise, and H1 / H0 of every claim."""

from __future__ import annotations

import numpy as np
from scipy import stats

from attnlab import theory
from attnlab.audit import ClaimAudit, Design, Hypothesis
from attnlab.experiments.base import staged
from attnlab.experiments.li2023.audit.base import PerExperiment, lr_stage, table, trace
from attnlab.experiments.li2023.phase import log_estimation_nc, middle


def simulate_diagram(exp, world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    """A run succeeds (zero test errors; else a few of its n_test samples are wrong) with

        P(success) = σ(s·(u − log C)),  u = log N + p·log α_*    (α_* diagrams, N·α_*^p = C)
                                        u = log N + 2·log(1 − c·(x − x_min)/(x_max − x_min))   (τ, σ)

    with log C the median of u over the grid (the boundary inside it). The iterations to zero
    training hinge loss are log-normal, T ∝ α_*^−r·N^{b_N}·η^−e, rounded up to the stopping check
    (``stop_every``); a run past ``max_steps`` stays in the data as a "cap" run (censored, as the
    analysis sees it). With the li2023 probe, the attention on relevant tokens at the start and the
    end of the run. The mean-token floor is not simulated: the laws' rules see only the columns
    free of it."""
    cols = table(cells)
    n, grid = len(cells), cols["stage"] == "grid"
    x, logN = cols[exp.axis].astype(float), np.log(cols["data.N"].astype(float))
    if exp.power and world.get("law") == "estimation":
        # the estimation-limited law of a plug-in linear rule on the mean token, N_c ∝ z_c²/(z²(z² − z_c²))
        # with z each column's analytic margin: no power law, steep where z nears z_c
        z = _margins(cols)
        u = world.get("sN", 1.0) * logN - np.minimum(log_estimation_nc(z, int(cols["data.n_test"][0])), 50.0)
    elif exp.power:
        u = world.get("sN", 1.0) * logN + world["p"] * np.log(x)
    else:
        lo, span = x[grid].min(), np.ptp(x[grid]) or 1.0
        u = logN + 2 * np.log(1 - world["shift"] * (x - lo) / span)
    if exp.power and "Nc_mid" in noise:  # the run's operating point: its fitted N_c at the grid's middle column
        mid = grid & (x == middle(x[grid]))
        centre = np.median(u[mid] - logN[mid]) + np.log(noise["Nc_mid"])
    else:  # log C at the median of u over the grid: the boundary crosses the grid whatever the law
        centre = np.median(u[grid])
    link = world.get("link", "logistic")
    t = noise["steepness"] * (u - centre)
    prob = stats.norm.cdf(t / 1.7) if link == "probit" else 1 / (1 + np.exp(-t))
    success = rng.random(n) < prob
    n_test = cols["data.n_test"].astype(float)
    wrong = np.minimum(rng.geometric(0.1, n), n_test)  # a failed run gets a few test samples wrong
    # iterations: log-normal around T_mid at the grid's centre, α_*^−r·N^T_N, checked every stop_every steps
    la = -np.log(cols["data.alpha_star"].astype(float))
    logT = (
        np.log(noise["T_mid"])
        + world["r"] * (la - la[grid].mean())
        + noise["T_N"] * (logN - logN[grid].mean())
        + noise["T_sd"] * (rng.standard_t(3, n) / np.sqrt(3) if world.get("T_tail") == "t3" else rng.standard_normal(n))
    )
    lr = cols["train.lr"].astype(float)  # the η stage: T ∝ η^−e about the grid's lr
    logT -= world.get("e", 1.0) * np.log(lr / lr[grid][0])
    every, cap = cols["train.stop_every"].astype(float), cols["train.max_steps"].astype(float)
    T = every * np.ceil(np.exp(logT) / every)
    extra = {}
    if "li2023" in set(cols.get("train.probes", ())):  # the attention probe at t = 0 and at the end
        a0 = 0.33 + noise.get("attn_sd", 0.02) * rng.standard_normal(n)
        aT = a0 + world.get("attn_gain", 0.0) + noise.get("attn_sd", 0.02) * rng.standard_normal(n)
        extra["trace_attn_relevant"] = trace(np.column_stack([a0, aT]))
    return (
        cols
        | extra
        | {
            "test_error": np.where(success, 0.0, wrong / n_test),
            "test_loss": np.where(success, 0.1, 0.3) * np.exp(0.3 * rng.standard_normal(n)),
            "status": np.where(T <= cap, "converged", "cap").astype(object),
            "stop_step": np.minimum(T, cap).astype(int),
        }
    )


def _margins(cols: dict) -> np.ndarray:
    """Each cell's analytic mean-token margin z (:func:`attnlab.data.li2023.margin_of`), per column."""
    from attnlab.data import li2023 as ldata
    from attnlab.experiments.li2023.floor import column_fields

    keys = [k for k in cols if k.startswith("data.") and k != "data.N"]
    rows = [tuple(np.asarray(cols[k])[i] for k in keys) for i in range(len(cols["data.N"]))]
    z, seen = np.empty(len(rows)), {}
    for i, r in enumerate(rows):
        if r not in seen:
            seen[r] = ldata.margin_of(column_fields(cols, "data.alpha_star", np.arange(len(rows)) == i)[0])
        z[i] = seen[r]
    return z


def plug_in_diagram(exp):
    """The noise of a stored run: the steepness s, T's level, N-slope and scatter, the per-run
    scatter of the attention probe."""

    def noise(cols: dict, spec) -> dict:
        """s: the coefficient of log N in σ(β₀ + β_N log N + β_x x') over the grid runs (x' = log α_*
        or x); T: least squares of log T on log α_*⁻¹ and log N (centred on the grid) over the
        converged runs: its level at the centre, its N-slope and residual sd."""
        g = np.asarray(cols["stage"]) == "grid"
        get = lambda k: np.asarray(cols[k])[g]
        x, logN, s = get(exp.axis).astype(float), np.log(get("data.N").astype(float)), get("test_error") == 0
        out = dict(exp.audit.noise)
        if s.any() and not s.all():
            b, _ = theory.logistic_fit(np.column_stack([np.ones_like(x), logN, np.log(x) if exp.power else x]), s)
            out["steepness"] = float(max(b[1], 0.1))
        la = -np.log(get("data.alpha_star").astype(float))
        Z = np.column_stack([np.ones_like(la), la - la.mean(), logN - logN.mean()])
        conv = get("status") == "converged"
        if conv.sum() > 3:
            y = np.log(get("stop_step")[conv].astype(float))
            coef, *_ = np.linalg.lstsq(Z[conv], y, rcond=None)
            rank = np.linalg.matrix_rank(Z[conv])
            out |= {
                "T_mid": float(np.exp(coef[0])),
                "T_N": float(coef[2]),
                "T_sd": float(np.sqrt(np.sum((y - Z[conv] @ coef) ** 2) / max(conv.sum() - rank, 1))),
            }
        if exp.power and s.any() and not s.all():  # the fitted N_c at the grid's middle column: the operating point
            la = np.log(x)
            b, _ = theory.logistic_fit(np.column_stack([np.ones_like(la), logN, la]), s)
            if b[1] > 1e-9:
                out["Nc_mid"] = float(np.exp(-(b[0] + b[2] * np.log(middle(x))) / b[1]))
        if "trace_attn_relevant" in cols:  # the per-run scatter of the attention at the start and the end
            A = [np.asarray(a, float) for a in np.asarray(cols["trace_attn_relevant"], object)[g]]
            out["attn_sd"] = float(np.std([a[-1] - a[0] for a in A], ddof=1) / np.sqrt(2))
        return out

    return noise


THM1 = "Li et al. 2023, Thm 1 and Fig. 1: the ViT needs N = Ω(α_*^−2)"
CNN = "Li et al. 2023, Fig. 2: the attention-free baseline needs N = Ω(α_*^−4)"
SOURCE = {2.0: THM1, 4.0: CNN}
# the rise of the attention on relevant tokens over one run in the theorem regime: the smallest the theorem's
# mechanism needs to show (the paper's Fig. 3 rises by 0.37 in 100 steps; a one-pass run has 1 … 64 steps)
ATTN_GAIN = 0.02
ATTN_SRC = "Li et al. 2023, Thm 1 and Fig. 3: the attention concentrates on label-relevant tokens during training"


def _claims(exp) -> tuple[ClaimAudit, ...]:
    """The worlds of each diagram claim. Every world draws success through a probit link, not the
    logistic the rules fit. The law (likelihood): the paper's exponent against the other learner's,
    a law between them (p = 3) and the estimation-limited law of a linear rule on the mean token
    (N_c ∝ z_c²/(z²(z² − z_c²)): steep where the margin z nears z_c, no power law), where the rule
    must not pass. T = Θ(α_*^−1) against no effect, and against T ∝ α_*^−2 (the sample
    complexity's exponent); T ∝ η^−1 likewise; the theorem regime's directional claims against no
    effect and the reverse direction; for τ and σ, the bound's (α_* − c·x)^−2 (c making N_c 4×
    larger at the grid's top x; the theorem fixes no c) against no effect and the reverse."""
    P = {"link": "probit"}
    if exp.power:  # the α_* diagrams: the favoured exponent against the other learner's
        k, other = exp.favoured, 6 - exp.favoured
        law = lambda p: P | {"p": p, "r": 1.0}
        h1 = Hypothesis(f"N·α_*^{k:g} = C (the run's N_c at the middle column)", SOURCE[k], law(k))
        h0 = Hypothesis(
            f"N·α_*^{other:g} = C", "the other learner's law, which the paper contrasts: " + SOURCE[other], law(other)
        )
        between = Hypothesis("N·α_*^3 = C: a law between", "between the two laws", law(3.0))
        estimation = Hypothesis(
            "N_c ∝ z_c²/(z²(z² − z_c²)): a linear rule on the mean token, limited by estimation",
            "the mean-token floor's learner (no attention): its local exponent is ≈ 4–5 on these columns",
            law(k) | {"law": "estimation"},
        )
        thm = "Li et al. 2023, Thm 1: T = Θ(α_*^−1·η^−1)"
        heavy = lambda h: Hypothesis(
            h.statement + ", heavy-tailed scatter of log T", "H1, another family", h.world | {"T_tail": "t3"}
        )
        r1 = Hypothesis("T ∝ α_*^−1 (r = 1)", thm, law(k))
        r0 = Hypothesis("T does not depend on α_* (r = 0)", "no effect", law(k) | {"r": 0.0})
        r2 = Hypothesis("T ∝ α_*^−2 (r = 2), the sample complexity's exponent", "another law", law(k) | {"r": 2.0})
        e1 = Hypothesis("T ∝ η^−1 (e = 1)", thm, law(k))
        return (
            ClaimAudit("line", h1, h0),
            ClaimAudit("exponent", h1, h0),
            ClaimAudit("likelihood", h1, h0, misspecified=(between, estimation)),
            ClaimAudit("iterations", r1, r0, misspecified=(r2,), also_true=(heavy(r1),)),
            ClaimAudit(
                "iterations-eta",
                e1,
                Hypothesis("T does not depend on η (e = 0)", "no effect", law(k) | {"e": 0.0}),
                misspecified=(Hypothesis("T ∝ η^−2 (e = 2)", "another law", law(k) | {"e": 2.0}),),
                also_true=(heavy(e1),),
            ),
            # the theorem regime's directional predictions (li2023-fig1-theorem)
            ClaimAudit(
                "success-N",
                Hypothesis("success rises with N (N·α_*^2 = C)", THM1, law(k)),
                Hypothesis("success does not depend on N", "no effect", law(k) | {"sN": 0.0}),
                misspecified=(Hypothesis("success falls with N", "the reverse", law(k) | {"sN": -0.5}),),
            ),
            ClaimAudit(
                "success-alpha",
                Hypothesis("success rises with α_* (N·α_*^2 = C)", THM1, law(k)),
                Hypothesis("success does not depend on α_*", "no effect", law(k) | {"p": 0.0}),
                misspecified=(Hypothesis("success falls with α_*", "the reverse", law(k) | {"p": -1.0}),),
            ),
            ClaimAudit(
                "nc-grows",
                Hypothesis("N_c ∝ α_*^−2", THM1, law(k)),
                Hypothesis("N_c does not depend on α_* (p = 0)", "no effect", law(k) | {"p": 0.0}),
                misspecified=(Hypothesis("N_c falls as α_* falls (p = −1)", "the reverse", law(k) | {"p": -1.0}),),
                also_true=(estimation,),
            ),
            ClaimAudit("iterations-fall", r1, r0),
            ClaimAudit(
                "attention-rises",
                Hypothesis(
                    f"the attention on relevant tokens rises by {ATTN_GAIN} over a run",
                    ATTN_SRC,
                    law(k) | {"attn_gain": ATTN_GAIN},
                ),
                Hypothesis("the attention does not move", "no effect", law(k) | {"attn_gain": 0.0}),
                misspecified=(
                    Hypothesis(
                        f"the attention falls by {ATTN_GAIN}", "the reverse", law(k) | {"attn_gain": -ATTN_GAIN}
                    ),
                ),
            ),
        )
    x = exp.axis_name
    h1 = Hypothesis(
        f"N_c ∝ (α_* − c·{x})^−2, 4× larger at the grid's largest {x} than at its smallest",
        f"Li et al. 2023, Thm 1: the sample complexity grows with the token noise τ and the initial error σ "
        f"(the bound's α_*^−2 form with α_* reduced by c·{x}; the theorem fixes no c)",
        P | {"shift": 0.5, "r": 1.0},
    )
    return (
        ClaimAudit(
            "shift",
            h1,
            Hypothesis(f"N_c does not depend on {x}", "no effect", P | {"shift": 0.0, "r": 1.0}),
            misspecified=(Hypothesis(f"N_c falls as {x} grows", "the reverse", P | {"shift": -0.5, "r": 1.0}),),
        ),
    )


def diagram_design(noise: dict, noise_source: str) -> PerExperiment:
    """The audit design of a :class:`attnlab.experiments.li2023.diagram.Diagram`, built for the
    experiment it is read on. Its cells are the real design's: the lr-tuning stage answered from
    simulation (the grid's lr enters no claim), then the grid, the η stage and the floor stages."""

    def build(exp) -> Design:
        return Design(
            simulate=lambda world, nz, spec, cells, rng: simulate_diagram(exp, world, nz, spec, cells, rng),
            claims=_claims(exp),
            noise=dict(noise),
            noise_source=noise_source,
            plug_in=plug_in_diagram(exp),
            cells=lambda spec: staged(exp.stages(spec), lr_stage(spec)),
        )

    return PerExperiment(build)
