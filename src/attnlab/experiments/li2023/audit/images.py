"""The audit design of li2023-fig5: a simulator of the accuracy on real images with spurious
patches per α_*, init and sparsification, the pretraining stage answered with a stand-in, the
plug-in of its noise, and H1 / H0 of the rise and sparsification claims."""

from __future__ import annotations

import numpy as np
from scipy import stats

from attnlab.audit import ClaimAudit, Design, Hypothesis
from attnlab.engine.rows import PARAMS, params_bytes
from attnlab.experiments.base import staged
from attnlab.experiments.li2023.audit.base import PerExperiment, table

INITS = ("pretrained", "scratch")
FIG5 = "Li et al. 2023, Fig. 5: accuracy rises with α_* from 0.56 to 1 (size: the mean-pooled model, Φ(α_*·z₁))"
FIG5_SPARSIFY = "Li et al. 2023: removing spurious tokens improves generalisation (size: Φ(√α_*·z₁) − Φ(α_*·z₁))"


def simulate_images(world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    """Accuracy per cell from the mean-pooled model: the test margin is carried by the α_*·M genuine
    patches, so acc(α_*) = Φ(α_*·z₁) with all tokens and Φ(√α_*·z₁) with the spurious ones removed
    (the genuine tokens' mean), z₁ = Φ⁻¹(acc at α_* = 1) of the run (the operating point); per-cell
    scatter around it, rounded to the test set."""
    cols = table(cells)
    n = len(cells)
    a, sparse = cols["data.alpha_star"].astype(float), cols["data.sparsify"].astype(bool)
    ft, n_test = cols["stage"] == "finetune", cols["data.n_test"].astype(float)
    mean, sd = np.full(n, noise["acc_pretrain"]), np.zeros(n)
    for init in INITS:
        sel = ft & (cols["init"] == init)
        z1 = stats.norm.ppf(noise[f"acc1_{init}"])
        at = a if world["rises"] else np.full(n, np.mean(np.unique(a[sel])) if sel.any() else 1.0)
        if world.get("falls"):  # the reverse: accuracy falls as the genuine share grows
            at = (a.max() + a.min()) - a if sel.any() else at
        gain = stats.norm.cdf(np.sqrt(a) * z1) - stats.norm.cdf(a * z1) if world["sparsify"] else 0.0
        gain = -gain if world.get("sparsify_hurts") else gain
        mean = np.where(sel, stats.norm.cdf(at * z1) + np.where(sparse, gain, 0.0), mean)
        sd = np.where(sel, noise[f"sd_{init}"], sd)
    acc = np.round(np.clip(mean + sd * rng.standard_normal(n), 0, 1) * n_test) / n_test
    return cols | {
        "test_error": 1 - acc,
        "test_accuracy": acc,
        "train_error": rng.uniform(0, 0.05, n),
        "test_loss": -np.log(np.clip(acc, 1e-3, 1)),
    }


def plug_in_images(cols: dict, spec) -> dict:
    """Per init: the mean accuracy at α_* = 1 (all tokens) and the scatter of a cell about the mean
    of its (α_*, tokens) group; the pretraining run's accuracy."""
    ft, acc = np.asarray(cols["stage"]) == "finetune", 1 - np.asarray(cols["test_error"], float)
    a, sp = np.asarray(cols["data.alpha_star"], float), np.asarray(cols["data.sparsify"]).astype(bool)
    out = dict(IMAGES_NOISE)
    pre = np.asarray(cols["stage"]) == "pretrain"
    if pre.any():
        out["acc_pretrain"] = float(acc[pre][0])
    for init in INITS:
        sel = ft & (np.asarray(cols["init"]) == init)
        top = sel & (a == 1) & ~sp
        if top.any():
            out[f"acc1_{init}"] = float(np.clip(acc[top].mean(), 0.55, 0.999))
        groups = [acc[sel & (a == x) & (sp == s)] for x in np.unique(a[sel]) for s in (False, True)]
        resid = np.concatenate([g - g.mean() for g in groups if len(g) > 1] or [np.zeros(0)])
        dof = sum(len(g) - 1 for g in groups if len(g) > 1)
        if dof:
            out[f"sd_{init}"] = float(np.sqrt(np.sum(resid**2) / dof))
    return out


IMAGES_NOISE = {
    "acc1_pretrained": 0.932,
    "acc1_scratch": 0.928,
    "sd_pretrained": 0.035,
    "sd_scratch": 0.021,
    "acc_pretrain": 0.943,
}


def _pretrained(cells: list[dict]) -> dict:
    """The pretraining stage answered from simulation: a stand-in parameter file (the cells name it)."""
    return {PARAMS: [params_bytes({"simulated": np.zeros(1)})]}


def _images_design(exp) -> Design:
    """H1: the paper's rise and the sparsification gain at the mean-pooled model's size; H0: no effect
    of α_*, no gain. The cells are the run's: the pretraining stage, answered with a stand-in
    parameter file (written to attnlab's parameter cache as a run's are), then every fine-tuning
    cell of both inits."""
    claims = []
    for init in INITS:
        suffix = "" if init == "pretrained" else "-scratch"
        up = {"rises": True, "sparsify": True}
        claims += [
            ClaimAudit(
                "rises" + suffix,
                Hypothesis("acc = Φ(α_*·z₁): the genuine patches' share of the margin", FIG5, up),
                Hypothesis("accuracy does not depend on α_*", "no effect", up | {"rises": False}),
                misspecified=(Hypothesis("accuracy falls as α_* grows", "the reverse", up | {"falls": True}),),
            ),
            ClaimAudit(
                "sparsify" + suffix,
                Hypothesis("removing the spurious patches: Φ(√α_*·z₁) instead of Φ(α_*·z₁)", FIG5_SPARSIFY, up),
                Hypothesis("removing the spurious patches changes nothing", "no effect", up | {"sparsify": False}),
                misspecified=(
                    Hypothesis(
                        "removing the spurious patches costs what it would gain",
                        "the reverse",
                        up | {"sparsify_hurts": True},
                    ),
                ),
            ),
        ]
    return Design(
        simulate=simulate_images,
        claims=tuple(claims),
        noise=dict(IMAGES_NOISE),
        noise_source="default: a cpu-scale run of li2023-fig5",
        plug_in=plug_in_images,
        cells=lambda spec: staged(exp.stages(spec), _pretrained),
    )


IMAGES = PerExperiment(_images_design)
