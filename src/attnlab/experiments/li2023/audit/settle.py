"""The audit design of li2023-settle: a simulator of success per learner and design with each
learner's own exponent of N·α_*^p = C, the plug-in of its steepness, and H1 / H0 of its claims."""

from __future__ import annotations

import numpy as np

from attnlab import theory
from attnlab.audit import ClaimAudit, Design, Hypothesis
from attnlab.experiments.base import staged
from attnlab.experiments.li2023.audit.base import PerExperiment, lr_stage, table

SETTLE_SRC = "Li et al. 2023, Thm 1 and Figs. 1–2: the ViT needs N = Ω(α_*^−2), the attention-free baseline Ω(α_*^−4)"


def simulate_settle(world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    """Success per run as in :func:`.diagrams.simulate_diagram`, with each learner's own exponent
    (``world["p"][learner]``) and the boundary at the median of u over that learner's grid in that
    design (so it crosses every learner's grid, whatever its law)."""
    cols = table(cells)
    n = len(cells)
    x, logN = cols["data.alpha_star"].astype(float), np.log(cols["data.N"].astype(float))
    grid = cols["stage"] == "grid"
    p = np.array([world["p"].get(str(ell), 2.0) for ell in cols["learner"]])
    u = logN + p * np.log(x)
    centre = np.zeros(n)
    for key in {(str(d), str(ell)) for d, ell in zip(cols["design"], cols["learner"], strict=True)}:
        m = (cols["design"] == key[0]) & (cols["learner"] == key[1])
        centre[m] = np.median(u[m & grid]) if (m & grid).any() else np.median(u[m])
    success = rng.random(n) < 1 / (1 + np.exp(-noise["steepness"] * (u - centre)))
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
    P = lambda **p: {"p": p}
    h_vit2 = Hypothesis("the ViT's N·α_*^2 = C", SETTLE_SRC, P(vit=2.0, cnn=4.0, linear=2.0))
    h_vit4 = Hypothesis(
        "the ViT's N·α_*^4 = C (the steeper law of estimation in noise, or of the baseline)",
        "the law the paper contrasts (Fig. 2)",
        P(vit=4.0, cnn=4.0, linear=4.0),
    )
    same = Hypothesis(
        "the ViT and the linear learner share one law (p = 2 both)",
        "no effect of attention beyond estimation (the floor-free confound of li2023-fig1)",
        P(vit=2.0, cnn=4.0, linear=2.0),
    )
    differ = Hypothesis(
        "the linear learner's law is steeper by 2 (p 4 against the ViT's 2)",
        "the paper's ViT-vs-baseline contrast, applied to the linear learner",
        P(vit=2.0, cnn=4.0, linear=4.0),
    )
    flat = Hypothesis(
        "the baseline's law is the ViT's (p = 2 both)", "no effect of attention", P(vit=2.0, cnn=2.0, linear=2.0)
    )
    return Design(
        simulate=simulate_settle,
        claims=(
            ClaimAudit("free-vit-exponent", h_vit2, h_vit4),
            ClaimAudit("free-same-as-linear", same, differ),
            ClaimAudit("floor-vit-exponent", h_vit2, h_vit4),
            ClaimAudit("floor-cnn-steeper", h_vit2, flat),
        ),
        noise={"steepness": 2.71},
        noise_source="default: the steepness of li2023-fig1's cpu run",
        plug_in=plug_in_settle,
        cells=lambda spec: staged(exp.stages(spec), lr_stage(spec)),
    )


SETTLE = PerExperiment(settle_design)
