"""li2023-fig4: token sparsification, at test time and in training. Two designs side by side:

  test time   a ViT trained on all tokens, evaluated after removing k tokens from every test
              sample (k = 0, 2, …, 20) through its token mask S, one curve per strategy: the three
              oracles (label-irrelevant first, noisiest first, random) and the practical scorer
              (keep the tokens that receive the most attention); one derived row per (trained cell,
              strategy, k), ``removal`` = "test";
  training    the sheet's F with the token set S^n of every training sample sparsified: a ViT
              retrained per oracle strategy and k ∈ ``train_ks`` (``data.sparsify``,
              ``data.sparsify_k``), its test samples sparsified the same way (``data.sparsify_test``);
              one row per trained cell, ``removal`` = "train", compared with the cells trained on
              all tokens (k = 0).

Every row has ``test_loss`` (the recipe's loss, logistic), ``test_hinge`` (the paper's Fig. 4
plots the hinge loss: reported beside it) and ``test_error``, on the cell's own 1000 test samples.

Regime: the default li2023 regime at α_* = 0.16 and N = 40, where the test loss before removal
is not zero (the paper's is about 0.08), with the "noisy tokens" variant — 40 % of the tokens
(at random positions, independent of their role) carry noise of std 1.0 instead of 0.2 — so that
"noisiest first" has something to find (with equal noise levels every token's ‖z‖ is about
τ√d ± 7 % and that oracle is random removal; at a contrast of 2, the previous design, the noise
removed with the noisy tokens was offset by the signal removed with them and the rule had no power).
Every k of the axis (``train_ks``: 2, 4, …, 20) is retrained for each oracle.

Claims (each rule's version and history, post-hoc changes included: :mod:`.ledger`; Δ = test loss
after removal − before; judged on the hinge loss
max(0, 1 − yF), the paper's Fig. 4 axis (``judge_on``), Δ of the logistic loss reported beside
each: training stops at zero training hinge loss, which sets the scale of the margins, so the
logistic loss of a retrained model barely moves with the spread of its margins while the hinge
loss counts the margins below 1 — `attnlab audit` gives the training-time rules on the logistic
loss about 0.1 power at the cpu design, on the hinge loss 1.0). Training-time claims compare the cells retrained at
k with the cells trained on all tokens (independent cells: Welch's 95 % interval of the
difference of means); test-time claims are paired over trained cells (95 % t interval of Δ):
  irrelevant   retraining with k = ``k_claim`` label-irrelevant tokens removed lowers the test
               loss: interval of Δ below 0 (fail: above 0). Judged in training: at test time,
               with mean pooling, dropping a near-zero token mostly rescales the output (the
               margins grow as L/(L − k)), so a lower loss there is close to automatic
  noisiest     retraining with the noisiest tokens removed, k = ``k_claim``: the same rule (past
               the [``noisy_frac``·L] = 20 noisy tokens the order removes ordinary ones, at random
               with respect to their noise). Descriptive (measured, not judged) when the noise
               contrast noisy_tau/tau is below ``noisiest_min_contrast``: there the audit gives the
               rule too little power
  order-10, order-20   the paper's order of the retrained curves at k: label-irrelevant first
               below noisiest first below random (Welch 95 % intervals of noisiest − irrelevant and
               random − noisiest above 0: pass; one below 0: fail)
  random       random removal does not lower the test loss, as the paper states it: a
               non-inferiority band set before the run, Δ_random > −``random_margin``·loss(0)
               (10 % of the mean test hinge loss before removal). Pass: the interval of Δ_random lies
               above −margin; fail: it lies below −margin (random removal lowers the loss by more
               than the margin); else inconclusive. Judged in training at k = ``k_claim``
  *-test       the same three at test time: irrelevant-test descriptive (the rescaling above);
               noisiest-test at k = the number of noisy tokens, descriptive below the contrast;
               random-test the band rule at k = ``k_claim``
  attention    keeping the top tokens by received attention at test time lowers the test loss
               (interval of Δ below 0): descriptive, a measurement — the practical scorer needs a
               trained model, so it has no training-time form here, and at test time mean pooling
               confounds it as it does irrelevant-test
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
from pydantic import Field, NonNegativeInt, PositiveInt
from scipy import stats

from attnlab import plots, rules
from attnlab.data import li2023 as ldata
from attnlab.data import sparsify
from attnlab.experiments import li2023 as common
from attnlab.experiments.base import Analysis, Claim, Experiment, rounded, t_summary
from attnlab.experiments.config import ExperimentSpec, expand, merge
from attnlab.experiments.li2023.audit.sparsification import SPARSIFICATION
from attnlab.experiments.pipeline import trained_cells
from attnlab.parts import register
from attnlab.train import stream


class Spec(ExperimentSpec):
    k_max: NonNegativeInt = Field(20, description="largest number of tokens removed at test time")
    k_step: int = Field(2, ge=1, description="step of k at test time")
    k_claim: NonNegativeInt = Field(20, description="k at which the claims are judged")
    judge_on: Literal["hinge", "logistic"] = Field("hinge", description="the test loss the claims are judged on")
    train_ks: list[PositiveInt] = Field(
        list(range(2, 21, 2)), description="k of the cells retrained with sparsified tokens (every k of the axis)"
    )
    order_ks: list[PositiveInt] = Field([10, 20], description="k at which the order of the strategies is judged")
    random_margin: float = Field(
        0.1, ge=0, description="random passes when Δ_random > −random_margin·(mean test loss before removal)"
    )
    noisiest_min_contrast: float = Field(
        5.0,
        ge=0,
        description="below this noisy_tau/tau the noisiest claims are descriptive (no power, see `attnlab audit`)",
    )


TRAIN_STRATEGIES = ("irrelevant", "noisiest", "random")  # the oracles the data model applies in training


def _removed(apply, loss_fn, params, X, y, key, ks):
    """(loss, hinge, error) for every strategy (rows, in sparsify.STRATEGIES order) × k (columns);
    NaN for the attention scorer when the model has no attention."""
    _, aux = jax.vmap(lambda x: apply(params, x))(X)
    n = y.shape[0]
    out = []
    for j, s in enumerate(sparsify.STRATEGIES):
        attn = aux.get("attn") if s == "attention" else None
        if s == "attention" and attn is None:
            out.append(jnp.full((len(ks), 3), jnp.nan))
            continue
        keys = jax.random.split(jax.random.fold_in(key, j), n)
        prio = jax.vmap(
            lambda x, k, a, s=s: sparsify.priority(x, s, k, a), in_axes=(0, 0, None if attn is None else 0)
        )(X, keys, attn)

        def at(k, prio=prio):
            Xk = jax.vmap(lambda x, p: sparsify.remove(x, k, p))(X, prio)
            f, _ = jax.vmap(lambda x: apply(params, x))(Xk)
            return jnp.stack([loss_fn(f, y).mean(), jnp.maximum(0, 1 - y * f).mean(), (jnp.sign(f) != y).mean()])

        out.append(jax.lax.map(at, ks))
    return jnp.stack(out)  # (strategy, k, 3)


def _evaluated(apply, loss_fn, params, X, y):
    """(loss, hinge, error) of the model on its own (already sparsified) test samples."""
    f, _ = jax.vmap(lambda x: apply(params, x))(X)
    return jnp.stack([loss_fn(f, y).mean(), jnp.maximum(0, 1 - y * f).mean(), (jnp.sign(f) != y).mean()])


class Fig4(Experiment):
    id = "li2023-fig4"
    title = "Li et al. 2023, Fig. 4: test loss vs tokens removed, per sparsification strategy"
    description = __doc__
    Spec = Spec
    audit = SPARSIFICATION
    scales = {
        "smoke": dict(
            data={"d": 24, "M": 6, "L": 12, "alpha_star": 0.25, "N": 16, "n_test": 50, "noisy_frac": 0.2},
            model={"m": 16, "m_a": 8, "m_b": 8},
            train={"max_steps": 40},
            reps=3,
            k_max=4,
            k_claim=4,
            train_ks=[2, 4],
            order_ks=[2, 4],
        ),
        "cpu": dict(reps=24),  # the noisiest rule's audit power at k = 20 is marginal with 16 (Welch, cell scatter)
        "paper": dict(reps=20),
    }
    assumptions = common.ASSUMPTIONS + (
        "Noisy tokens: 40 % of the positions (20 of 50, as many as k_claim removes), chosen at random per sample, have "
        "noise std 1.0 (the rest 0.2): a noise "
        "contrast of 5, from which the audit gives the noisiest rules power.",
        "Test-time removal acts on the model trained on all tokens; training-time removal retrains per strategy and "
        "k with the same removal on the test samples. Ties in the oracles' priorities and the random strategy use a "
        "key derived from the cell's key.",
    )

    def defaults(self):
        return merge(
            common.DEFAULTS,
            {
                "data": {"alpha_star": 0.16, "N": 40, "noisy_frac": 0.4, "noisy_tau": 1.0},
                "train": {"save_params": True},
            },
        )

    def cells(self, spec) -> list[dict]:
        """The cells trained on all tokens (grid × reps), then per training strategy and k of
        ``train_ks`` the same grid × reps retrained with k tokens removed from every training and
        test sample."""
        variants = [({}, {})] + [
            ({}, {"data.sparsify": s, "data.sparsify_k": int(k), "data.sparsify_test": True})
            for s in TRAIN_STRATEGIES
            for k in spec.train_ks
        ]
        return expand(spec, variants)

    def derive(self, table: pa.Table, spec: Spec) -> pa.Table:
        """One row per (cell trained on all tokens, strategy, k) with ``removal`` = "test", and one
        per retrained cell with ``removal`` = "train" (strategy and k its training's): the cell's
        columns (without its parameters) and strategy, k_removed, test_loss, test_hinge, test_error."""
        ks = np.arange(0, spec.k_max + 1, spec.k_step)
        rows = []
        compiled = {}  # one evaluation program per Problem (bucket and N) and kind
        for t in trained_cells(table):
            retrained = t.cell.get("data.sparsify", "none") != "none"
            key = (id(t.problem), retrained)
            if key not in compiled:
                pr = t.problem
                compiled[key] = jax.jit(
                    (lambda p, X, y, key, pr=pr: _evaluated(pr.apply, pr.loss.fn, p, X, y))
                    if retrained
                    else (lambda p, X, y, key, pr=pr: _removed(pr.apply, pr.loss.fn, p, X, y, key, ks))
                )
            with jax.enable_x64(t.static.get("train.dtype") == "float64"):
                res = np.asarray(
                    compiled[key](t.params | t.inputs, t.data["X_test"], t.data["y_test"], stream(t.v["key"], "val"))
                )
            cell = {k: v for k, v in t.row.items() if k not in ("test_loss", "test_error")}
            cell["train_strategy"] = cell.pop("strategy")  # provenance; "strategy" names the removal here
            if retrained:
                rows.append(
                    cell
                    | {
                        "removal": "train",
                        "strategy": t.cell["data.sparsify"],
                        "k_removed": int(t.cell["data.sparsify_k"]),
                        "test_loss": float(res[0]),
                        "test_hinge": float(res[1]),
                        "test_error": float(res[2]),
                    }
                )
                continue
            for j, s in enumerate(sparsify.STRATEGIES):
                for m, k in enumerate(ks):
                    rows.append(
                        cell
                        | {
                            "removal": "test",
                            "strategy": s,
                            "k_removed": int(k),
                            "test_loss": float(res[j, m, 0]),
                            "test_hinge": float(res[j, m, 1]),
                            "test_error": float(res[j, m, 2]),
                        }
                    )
        return pa.Table.from_pylist(rows)

    def analyse(self, cols, spec: Spec) -> Analysis:
        removal = np.asarray(cols["removal"]) if "removal" in cols else np.full(len(cols["id"]), "test", object)
        te, tr = removal == "test", removal == "train"
        ids, strat, k = np.asarray(cols["id"]), np.asarray(cols["strategy"]), np.asarray(cols["k_removed"])
        logistic = np.asarray(cols["test_loss"], float)
        hinge_col = np.asarray(cols.get("test_hinge", cols["test_loss"]), float)
        # judged on ``judge_on``; the other loss is reported beside it under the name "other"
        loss, hinge = (hinge_col, logistic) if spec.judge_on == "hinge" else (logistic, hinge_col)
        other = "logistic" if spec.judge_on == "hinge" else "hinge"
        kc = min(spec.k_claim, int(k[te].max()))
        cells = np.unique(ids[te])
        ks = np.unique(k[te])

        def at(v, s, kk):
            """v per test-time cell for strategy s after removing kk tokens."""
            return np.array([v[te & (ids == c) & (strat == s) & (k == kk)][0] for c in cells])

        before, before_h = at(loss, "random", 0), at(hinge, "random", 0)
        delta = lambda s, kk, v=loss: at(v, s, kk) - at(v, s, 0)  # noqa: E731
        kn = noisy_k(spec, ks)
        k_of = {"irrelevant": kc, "noisiest": kn if kn is not None else kc, "random": kc, "attention": kc}
        margin = spec.random_margin * float(before.mean())
        contrast = float(spec.data.get("noisy_tau", 0.0)) / float(spec.data.get("tau", 1.0))
        low_contrast = contrast < spec.noisiest_min_contrast
        summary = {
            "cells trained on all tokens": len(cells),
            "k_claim": kc,
            "k for noisiest (the noisy tokens)": kn,
            "judged on": f"test {spec.judge_on} loss",
            f"test {spec.judge_on} before removal": t_summary(before, 5),
            f"test {other} before removal": t_summary(before_h, 5),
            "test error before removal": rounded(np.mean(np.asarray(cols["test_error"])[te & (k == 0)]), 5),
            "random margin (random_margin × loss before)": rounded(margin, 5),
        }
        summary[f"test time: mean Δ test {spec.judge_on} per k"] = {"k": ks.tolist()} | {
            s: [rounded(delta(s, kk).mean(), 4) for kk in ks] for s in sparsify.STRATEGIES
        }
        summary[f"test time: mean Δ test {other} per k"] = {"k": ks.tolist()} | {
            s: [rounded(delta(s, kk, hinge).mean(), 4) for kk in ks] for s in sparsify.STRATEGIES
        }
        claims = []

        # ---- training-time sparsification: retrained cells against the cells trained on all tokens
        tks = np.unique(k[tr]) if tr.any() else np.array([], int)
        trained = lambda s, kk, v=loss: v[tr & (strat == s) & (k == kk)]  # noqa: E731
        summary[f"training: test {spec.judge_on} per k (k = 0: all tokens)"] = {"k": [0, *tks.tolist()]} | {
            s: [rounded(before.mean(), 4)] + [rounded(_mean(trained(s, kk)), 4) for kk in tks] for s in TRAIN_STRATEGIES
        }
        summary[f"training: test {other} per k (k = 0: all tokens)"] = {"k": [0, *tks.tolist()]} | {
            s: [rounded(before_h.mean(), 4)] + [rounded(_mean(trained(s, kk, hinge)), 4) for kk in tks]
            for s in TRAIN_STRATEGIES
        }
        kt = dict.fromkeys(TRAIN_STRATEGIES, _largest(tks, kc))  # each strategy judged at k_claim
        for s, words in (
            ("irrelevant", "retraining with label-irrelevant tokens removed"),
            ("noisiest", "retraining with the noisiest tokens removed"),
            ("random", "retraining with random tokens removed"),
        ):
            kk = kt[s]
            v = _welch(trained(s, kk), before) if kk is not None else (np.nan,) * 4
            vh = _welch(trained(s, kk, hinge), before_h) if kk is not None else (np.nan,) * 4
            name = f"Δ test {spec.judge_on} of {s} (retrained at k = {kk} − all tokens)"
            extra = {
                other: rounded(vh[0]),
                f"{other}_ci95": [rounded(vh[1]), rounded(vh[2])],
                "cells": int(len(trained(s, kk))) if kk is not None else 0,
            }
            if s == "random":
                verdict = _not_lower(v, margin, name)
                statement = f"random removal in training does not lower the test loss (k = {kk})"
            else:
                verdict = _below_zero(v, name)
                statement = f"{words} lowers the test loss (k = {kk})"
            verdict.measured.update(extra)
            why = "needs retrained cells at a k of train_ks" if kk is None else ""
            if s == "noisiest" and low_contrast:
                verdict = rules.Verdict(rules.DESCRIPTIVE, verdict.measured, verdict.rule)
                why = (
                    f"descriptive below noisy_tau/tau = {spec.noisiest_min_contrast:g} (this run: {contrast:.3g}): "
                    f"the noise removed with the noisy tokens is offset by the signal removed with them and the "
                    f"rule has no power there (`attnlab audit`); k = {kk}"
                )
            claims.append(Claim.of(s, statement, verdict, why))
        for ko in spec.order_ks:  # the paper's order of the strategies, retrained at k
            kk = _largest(tks, ko) if ko in tks else None
            verdict = _ordered(
                [trained(s, kk) for s in TRAIN_STRATEGIES] if kk is not None else None,
                TRAIN_STRATEGIES,
                f"test {spec.judge_on} retrained at k = {ko}",
            )
            why = "" if kk is not None else f"needs retrained cells at k = {ko} (train_ks)"
            if low_contrast:
                verdict, why = (
                    verdict.reported(""),
                    (f"descriptive below noisy_tau/tau = {spec.noisiest_min_contrast:g} (this run: {contrast:.3g})"),
                )
            claims.append(
                Claim.of(
                    f"order-{ko}",
                    f"retrained at k = {ko}: label-irrelevant first beats noisiest first, which beats random removal "
                    "(the paper's order of the curves)",
                    verdict,
                    why,
                )
            )

        # ---- test-time removal on the cells trained on all tokens (paired over cells)
        for s, words in (
            ("irrelevant", "removing label-irrelevant tokens first at test time"),
            ("noisiest", "removing the noisiest tokens first at test time"),
            ("random", "random removal at test time"),
            ("attention", "keeping the tokens that receive the most attention"),
        ):
            kk = k_of[s]
            d, dh = delta(s, kk), delta(s, kk, hinge)
            cid = s if s == "attention" else f"{s}-test"
            name = f"Δ test {spec.judge_on} of {s} at k = {kk}"
            if s == "random":
                verdict = _not_lower(rules.t_interval(d), margin, name)
                statement = f"random removal at test time does not lower the test loss (k = {kk})"
            else:
                verdict = _below_zero(rules.t_interval(d), name)
                statement = f"{words} lowers the test loss (k = {kk})"
            _, hlo, hhi, _ = rules.t_interval(dh)
            verdict.measured.update(
                {other: rounded(dh.mean()), f"{other}_ci95": [rounded(hlo), rounded(hhi)], "cells": len(d)}
            )
            why = ""
            if s == "noisiest":
                why = (
                    f"judged at k = {kk}, the number of noisy tokens [noisy_frac·L] in the grid (k_claim = {kc} "
                    f"would remove {kc - kk} ordinary tokens too)"
                    if kn is not None
                    else ""
                )
                if low_contrast:
                    verdict = rules.Verdict(rules.DESCRIPTIVE, verdict.measured, verdict.rule)
                    why = (
                        f"descriptive below noisy_tau/tau = {spec.noisiest_min_contrast:g} (this run: {contrast:.3g}): "
                        f"the noise removed with the noisy tokens is offset by the signal removed with them, and "
                        f"`attnlab audit` gives the rule no power there; k = {kk}"
                    )
            if s == "attention":
                verdict = rules.Verdict(rules.DESCRIPTIVE, verdict.measured, verdict.rule)
                why = (
                    "a measurement: attention-based removal needs a trained model's attention, so it has no "
                    "training-time form here, and at test time mean pooling confounds it (as irrelevant-test)"
                )
            if s == "irrelevant":
                verdict = rules.Verdict(rules.DESCRIPTIVE, verdict.measured, verdict.rule)
                why = (
                    "descriptive: with mean pooling, removing a near-zero (irrelevant) token at test time mostly "
                    "rescales the output (margins × L/(L − k)), so a lower loss follows from the pooling whatever "
                    "the attention learned; the claim is judged in training (irrelevant)"
                )
            claims.append(Claim.of(cid, statement, verdict, why))
        return Analysis(claims=claims, summary=summary)

    def figures(self, cols, spec: Spec, analysis: Analysis, out: Path) -> list[Path]:
        removal = np.asarray(cols["removal"]) if "removal" in cols else np.full(len(cols["id"]), "test", object)
        te, tr = removal == "test", removal == "train"
        ids, strat, k = np.asarray(cols["id"]), np.asarray(cols["strategy"]), np.asarray(cols["k_removed"])
        fig, axes = plt.subplots(1, 3, figsize=(15, 3.8), constrained_layout=True)
        ks = np.unique(k[te])
        cells = np.unique(ids[te])
        for s in sparsify.STRATEGIES:
            for ax, name in zip(axes[:2], ("test_loss", "test_hinge"), strict=True):
                v = np.asarray(cols[name], float)
                runs = np.array([[v[te & (ids == c) & (strat == s) & (k == kk)][0] for kk in ks] for c in cells])
                plots.band(ax, ks, runs, label={"attention": "attention top-k (practical)"}.get(s, f"{s} first"))
        for ax, name in zip(axes[:2], ("test loss (logistic)", "test hinge loss"), strict=True):
            ax.set_xlabel("tokens removed from each test sample")
            ax.set_ylabel(name)
            ax.legend(fontsize=7)
        axes[0].set_title(f"{self.title.split(':')[0]}: test time, mean ± std over {len(cells)} trained ViTs")
        axes[1].set_title("test time: hinge loss (the paper's axis)")
        ax = axes[2]
        loss, hinge = np.asarray(cols["test_loss"], float), np.asarray(cols["test_hinge"], float)
        at0 = te & (strat == "random") & (k == 0)
        for i, s in enumerate(TRAIN_STRATEGIES):
            tks = np.unique(k[tr & (strat == s)])
            xs = np.concatenate([[0], tks])
            for v, ls, what in ((loss, "-", "logistic"), (hinge, "--", "hinge")):
                ys = [v[at0].mean()] + [v[tr & (strat == s) & (k == kk)].mean() for kk in tks]
                sd = [v[at0].std()] + [v[tr & (strat == s) & (k == kk)].std() for kk in tks]
                ax.errorbar(
                    xs + 0.15 * i,
                    ys,
                    yerr=sd,
                    fmt="o" + ls,
                    color=f"C{i}",
                    ms=4,
                    capsize=2,
                    label=f"{s} first ({what})",
                )
        ax.set_xlabel("tokens removed from each training (and test) sample")
        ax.set_ylabel("test loss")
        ax.set_title("training-time sparsification: retrained per k (mean ± std)")
        ax.legend(fontsize=6)
        return plots.save(fig, out, "fig4_sparsification")


def _mean(v) -> float:
    return float(np.mean(v)) if len(v) else np.nan


def _largest(ks, k) -> int | None:
    """The largest k of ``ks`` not above k (None when none is)."""
    ok = [int(x) for x in ks if 0 < x <= k] if k is not None else []
    return max(ok) if ok else None


def _welch(a, b, level: float = 0.95) -> tuple[float, float, float, float]:
    """(mean(a) − mean(b), lo, hi, se): Welch's interval of a difference of means of independent cells."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or len(b) < 2:
        return (_mean(a) - _mean(b), np.nan, np.nan, np.nan)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = np.sqrt(va + vb)
    dof = (va + vb) ** 2 / max(va**2 / (len(a) - 1) + vb**2 / (len(b) - 1), 1e-300)
    half = stats.t.ppf((1 + level) / 2, dof) * se
    m = a.mean() - b.mean()
    return float(m), float(m - half), float(m + half), float(se)


def noisy_k(spec, ks) -> int | None:
    """The k at which noisiest-first is judged: the number of noisy tokens [noisy_frac·L] of the
    spec (the largest k of the grid not above it); None when the spec has no noisy tokens."""
    n = ldata.n_tokens(float(spec.data.get("noisy_frac", 0.0)), int(spec.data["L"]))
    ks = np.asarray(ks)
    ok = ks[(ks > 0) & (ks <= n)]
    return int(ok.max()) if n > 0 and len(ok) else None


def _below_zero(iv, name: str) -> rules.Verdict:
    """Pass when the 95 % interval ``iv`` = (mean, lo, hi, ·) of the change lies below 0; fail above."""
    m, lo, hi, _ = iv
    rule = f"95 % interval of {name} lies below 0; fail if it lies above 0"
    measured = {"mean": rounded(m), "ci95": [rounded(lo), rounded(hi)]}
    if not np.isfinite(hi):
        return rules.Verdict(rules.INCONCLUSIVE, measured, rule, "needs ≥ 2 cells")
    return rules.Verdict(rules.PASS if hi < 0 else rules.FAIL if lo > 0 else rules.INCONCLUSIVE, measured, rule)


def _ordered(groups: list | None, names: tuple[str, ...], name: str) -> rules.Verdict:
    """groups[0] < groups[1] < … by Welch's 95 % interval of each consecutive difference of means:
    pass when every difference lies above 0, fail when one lies below 0, else inconclusive."""
    rule = f"{name}: Welch 95 % interval of each consecutive difference above 0 ({' < '.join(names)}); fail if one lies below 0"
    if groups is None or any(len(g) < 2 for g in groups):
        return rules.Verdict(rules.INCONCLUSIVE, {}, rule, "needs ≥ 2 retrained cells per strategy")
    measured, outcomes = {}, []
    for (a, ga), (b, gb) in zip(
        zip(names, groups, strict=True), list(zip(names, groups, strict=True))[1:], strict=False
    ):
        m, lo, hi, _ = _welch(gb, ga)
        measured[f"{b} − {a}"] = {"mean": rounded(m), "ci95": [rounded(lo), rounded(hi)]}
        outcomes.append(rules.PASS if lo > 0 else rules.FAIL if hi < 0 else rules.INCONCLUSIVE)
    outcome = (
        rules.FAIL if rules.FAIL in outcomes else rules.PASS if set(outcomes) == {rules.PASS} else rules.INCONCLUSIVE
    )
    wrong = [k for k, o in zip(measured, outcomes, strict=True) if o == rules.FAIL]
    return rules.Verdict(outcome, measured, rule, f"the reverse order: {', '.join(wrong)} < 0" if wrong else "")


def _not_lower(iv, margin: float, name: str) -> rules.Verdict:
    """Non-inferiority: pass when the 95 % interval of the change lies above −margin (the loss is
    not lowered by more than the margin), fail when it lies below −margin."""
    m, lo, hi, _ = iv
    rule = (
        f"95 % interval of {name} lies above −{margin:.4g} (random_margin × the mean loss before removal, set "
        f"before the run); fail if it lies below −{margin:.4g}"
    )
    measured = {"mean": rounded(m), "ci95": [rounded(lo), rounded(hi)], "margin": rounded(margin, 5)}
    if not np.isfinite(hi):
        return rules.Verdict(rules.INCONCLUSIVE, measured, rule, "needs ≥ 2 cells")
    return rules.Verdict(
        rules.PASS if lo > -margin else rules.FAIL if hi < -margin else rules.INCONCLUSIVE, measured, rule
    )


EXPERIMENT = register(Fig4())
