"""The audit design of li2023-settle: a simulator of success per learner and design with each
learner's own exponent of N·α_*^p = C, the plug-in of its steepness, and H1 / H0 of its claims."""

from __future__ import annotations

import numpy as np

from attnlab import theory
from attnlab.audit import ClaimAudit, Design, Hypothesis
from attnlab.experiments.base import staged
from attnlab.experiments.li2023.audit.base import PerExperiment, lr_stage, table
from attnlab.experiments.li2023.phase import middle

SETTLE_SRC = "Li et al. 2023, Thm 1 and Figs. 1–2: the ViT needs N = Ω(α_*^−2), the attention-free baseline Ω(α_*^−4)"


def simulate_settle(world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    """Success per run through a probit link (not the logistic the rules fit), with each learner's own
    law: N·α_*^p = C (``world["p"][learner]``), or the estimation-limited law of a linear rule on the
    mean token (``world["law"][learner] = "estimation"``: N_c ∝ z_c²/(z²(z² − z_c²))). In each design
    every learner's boundary passes through the ViT's at the design's middle column (the median of u
    over the ViT's grid there), shifted by ``world["shift"][learner]`` in log N (a learner that needs
    e^shift times the ViT's samples at equal α_*)."""
    from scipy import stats

    from attnlab.experiments.li2023.audit.diagrams import _margins
    from attnlab.experiments.li2023.phase import log_estimation_nc

    cols = table(cells)
    n = len(cells)
    x, logN = cols["data.alpha_star"].astype(float), np.log(cols["data.N"].astype(float))
    grid = cols["stage"] == "grid"
    learner = np.array([str(ell) for ell in cols["learner"]])
    p = np.array([world["p"].get(ell, 2.0) for ell in learner])
    shift = np.array([world.get("shift", {}).get(ell, 0.0) for ell in learner])
    u = logN + p * np.log(x)
    est = np.array([world.get("law", {}).get(ell) == "estimation" for ell in learner])
    if est.any():
        z = _margins(cols)
        u = np.where(est, logN - np.minimum(log_estimation_nc(z, int(cols["data.n_test"][0])), 50.0), u)
    centre = np.zeros(n)
    for d in np.unique(cols["design"]):
        m = cols["design"] == d
        ref = m & grid & (learner == "vit")
        ref = ref if ref.any() else m & grid if (m & grid).any() else m
        x_mid = middle(x[ref])
        mid = ref & (x == x_mid)
        logNc = np.median(logN[mid] - u[mid]) + np.median(u[ref])  # the ViT's log N_c at the middle column
        for ell in np.unique(learner[m]):
            k = m & (learner == ell)
            kmid = k & (x == x_mid)
            centre[k] = (np.median(u[kmid] - logN[kmid]) if kmid.any() else 0.0) + logNc
    prob = stats.norm.cdf(noise["steepness"] * (u - centre - shift) / 1.7)
    success = rng.random(n) < prob
    n_test = cols["data.n_test"].astype(float)
    wrong = np.minimum(rng.geometric(0.1, n), n_test)
    return cols | {
        "test_error": np.where(success, 0.0, wrong / n_test),
        "test_loss": np.where(success, 0.1, 0.3) * np.exp(0.3 * rng.standard_normal(n)),
        "status": np.full(n, "converged", object),
        "stop_step": np.full(n, 100),
    }


def plug_in_settle(cols: dict, spec) -> dict:
    """s: the coefficient of log N in σ(β₀ + β_N log N + β_α log α_*) per (design, learner) grid, the median."""
    out, ss = {"steepness": 2.71}, []
    g = np.asarray(cols["stage"]) == "grid"
    for d in np.unique(np.asarray(cols["design"])[g]):
        for ell in np.unique(np.asarray(cols["learner"])[g]):
            m = g & (np.asarray(cols["design"]) == d) & (np.asarray(cols["learner"]) == ell)
            s = np.asarray(cols["test_error"])[m] == 0
            if s.any() and not s.all():
                Z = np.column_stack(
                    [
                        np.ones(int(m.sum())),
                        np.log(np.asarray(cols["data.N"])[m].astype(float)),
                        np.log(np.asarray(cols["data.alpha_star"])[m].astype(float)),
                    ]
                )
                ss.append(max(theory.logistic_fit(Z, s)[0][1], 0.1))
    if ss:
        out["steepness"] = float(np.median(ss))
    return out


def settle_design(exp) -> Design:
    """Each claim's worlds, drawn through a probit link: the laws of each learner (the paper's, the
    other learner's, a law between, the estimation-limited law of the mean-token learner) and the
    gap between the baseline and the ViT at equal α_* (the paper's, none, the reverse)."""
    P = lambda shift=None, law=None, **p: {"p": p} | ({"shift": shift} if shift else {}) | ({"law": law} if law else {})
    paper = dict(vit=2.0, cnn=4.0, linear=2.0)
    LOG4 = float(np.log(4.0))
    h_vit2 = Hypothesis("the ViT's N·α_*^2 = C", SETTLE_SRC, P(**paper))
    h_vit4 = Hypothesis(
        "the ViT's N·α_*^4 = C (the baseline's law)", "the law the paper contrasts (Fig. 2)", P(**paper | {"vit": 4.0})
    )
    vit3 = Hypothesis("the ViT's N·α_*^3 = C: a law between", "between the two laws", P(**paper | {"vit": 3.0}))
    vit_est = Hypothesis(
        "the ViT follows the estimation-limited law of a linear rule on the mean token",
        "estimation in noise, not attention (no power law)",
        P(law={"vit": "estimation"}, **paper),
    )
    cnn4 = Hypothesis("the baseline's N·α_*^4 = C", SETTLE_SRC, P(**paper))
    cnn2 = Hypothesis("the baseline's N·α_*^2 = C (the ViT's law)", "no effect of attention", P(**paper | {"cnn": 2.0}))
    cnn3 = Hypothesis("the baseline's N·α_*^3 = C: a law between", "between the two laws", P(**paper | {"cnn": 3.0}))
    gap = Hypothesis(
        "at equal α_* the baseline needs 4× the ViT's samples", SETTLE_SRC, P(shift={"cnn": LOG4}, **paper)
    )
    no_gap = Hypothesis("the baseline needs the ViT's samples", "no effect of attention", P(**paper))
    reverse = Hypothesis(
        "the baseline needs half the ViT's samples", "the reverse", P(shift={"cnn": -float(np.log(2.0))}, **paper)
    )
    same = Hypothesis(
        "the ViT and the linear learner share one law (p = 2 both)",
        "no effect of attention beyond estimation (the floor-free confound of li2023-fig1)",
        P(**paper),
    )
    differ = Hypothesis(
        "the linear learner's law is steeper by 2 (p 4 against the ViT's 2)",
        "the paper's ViT-vs-baseline contrast, applied to the linear learner",
        P(**paper | {"linear": 4.0}),
    )
    flat = Hypothesis(
        "the baseline's law is the ViT's (p = 2 both)", "no effect of attention", P(**paper | {"cnn": 2.0})
    )
    shallower = Hypothesis(
        "the baseline's law is shallower than the ViT's (p = 1)", "the reverse", P(**paper | {"cnn": 1.0})
    )
    return Design(
        simulate=simulate_settle,
        claims=(
            ClaimAudit("free-vit-exponent", h_vit2, h_vit4, misspecified=(vit3, vit_est)),
            ClaimAudit("free-cnn-exponent", cnn4, cnn2, misspecified=(cnn3,)),
            ClaimAudit("free-gap", gap, no_gap, misspecified=(reverse,)),
            ClaimAudit("free-same-as-linear", same, differ),
            ClaimAudit("floor-vit-exponent", h_vit2, h_vit4, misspecified=(vit3,)),
            ClaimAudit("floor-cnn-steeper", h_vit2, flat, misspecified=(shallower,)),
            ClaimAudit("floor-gap", gap, no_gap, misspecified=(reverse,)),
        ),
        noise={"steepness": 2.71},
        noise_source="default: the steepness of li2023-fig1's cpu run",
        plug_in=plug_in_settle,
        cells=lambda spec: staged(exp.stages(spec), lr_stage(spec)),
    )


SETTLE = PerExperiment(settle_design)
