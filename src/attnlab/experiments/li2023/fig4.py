"""li2023-fig4: token sparsification. Test loss of a trained ViT against the number k of tokens
removed from every test sample (k = 0, 2, …, 20), one curve per strategy: the three oracles
(label-irrelevant first, noisiest first, random) and the practical scorer (keep the tokens that
receive the most attention). Removal acts through the token mask S at test time only: it is an
evaluation of the trained model, so each trained cell gives one row per (strategy, k) with the
columns ``strategy``, ``k_removed``, ``test_loss`` (the recipe's loss), ``test_hinge`` and
``test_error``, all on the cell's own 1000 test samples.

Regime: the default li2023 regime at α_* = 0.16 and N = 40, where the test loss before removal
is not zero (the paper's is about 0.08), with the "noisy tokens" variant — 20 % of the tokens
(at random positions, independent of their role) carry noise of std 0.4 instead of 0.2 — so that
"noisiest first" has something to find (with equal noise levels every token's ‖z‖ is about
τ√d ± 7 % and that oracle is random removal).

Claims (paired over trained cells: Δ(k) = test loss after removing k tokens − before, at
k = ``k_claim`` except for noisiest; 95 % t intervals over cells):
  irrelevant   removing label-irrelevant tokens lowers the test loss: interval of Δ below 0
               (fail: above 0)
  noisiest     removing the noisiest tokens lowers it: the same rule, at k = the number of noisy
               tokens [``noisy_frac``·L] (10 at L = 50; the largest k of the grid not above it),
               fixed by the spec before the run — beyond it the noisiest-first order removes
               ordinary tokens, at random with respect to their noise; k_claim when the spec has
               no noisy tokens. Descriptive (measured, not judged) when the noise contrast
               noisy_tau/tau is below ``noisiest_min_contrast`` (5): at the cpu design's 2 the
               mean-pooled model's H1 gives Δ(10) ≈ 0 (the noise removed is offset by the relevant
               tokens removed with it) and `attnlab audit` gives the rule power 0.01; at 5 (``--set
               data.noisy_tau=1``) power 1.0 (50 simulations)
  random       random removal does not: Δ_random is not significantly below 0 (interval reaches 0)
               and it lowers the loss less than irrelevant-first (the paired Δ_random −
               Δ_irrelevant has its interval above 0); fail if Δ_random's interval lies below 0
  attention    keeping the top tokens by received attention lowers the test loss (interval of Δ
               below 0)
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
from pydantic import Field, NonNegativeInt

from attnlab import plots, rules
from attnlab.data import li2023 as ldata
from attnlab.data import sparsify
from attnlab.experiments import li2023 as common
from attnlab.experiments.base import (
    Analysis,
    Claim,
    Experiment,
    ExperimentSpec,
    merge,
    rounded,
    t_summary,
    trained_cells,
)
from attnlab.experiments.li2023.audit import SPARSIFICATION
from attnlab.train import stream


class Spec(ExperimentSpec):
    k_max: NonNegativeInt = Field(20, description="largest number of tokens removed")
    k_step: int = Field(2, ge=1, description="step of k")
    k_claim: NonNegativeInt = Field(20, description="k at which the claims are judged")
    noisiest_min_contrast: float = Field(
        5.0, ge=0, description="below this noisy_tau/tau the noisiest claim is descriptive (no power, see `attnlab audit`)"
    )


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
        prio = jax.vmap(lambda x, k, a, s=s: sparsify.priority(x, s, k, a),
                        in_axes=(0, 0, None if attn is None else 0))(X, keys, attn)  # fmt: skip

        def at(k, prio=prio):
            Xk = jax.vmap(lambda x, p: sparsify.remove(x, k, p))(X, prio)
            f, _ = jax.vmap(lambda x: apply(params, x))(Xk)
            return jnp.stack([loss_fn(f, y).mean(), jnp.maximum(0, 1 - y * f).mean(), (jnp.sign(f) != y).mean()])

        out.append(jax.lax.map(at, ks))
    return jnp.stack(out)  # (strategy, k, 3)


class Fig4(Experiment):
    id = "li2023-fig4"
    title = "Li et al. 2023, Fig. 4: test loss vs tokens removed, per sparsification strategy"
    description = __doc__
    Spec = Spec
    audit = SPARSIFICATION
    scales = {
        "smoke": dict(
            data={"d": 24, "M": 6, "L": 12, "alpha_star": 0.25, "N": 16, "n_test": 50},
            model={"m": 16, "m_a": 8, "m_b": 8},
            train={"max_steps": 40},
            reps=3,
            k_max=4,
            k_claim=4,
        ),  # fmt: skip
        "cpu": dict(reps=12),
        "paper": dict(reps=20),
    }
    assumptions = common.ASSUMPTIONS + (
        "Noisy tokens: 20 % of the positions, chosen at random per sample, have noise std 0.4 (the rest 0.2).",
        "Removal happens at test time on the trained model; ties in the oracles' priorities and the random strategy "
        "use a key derived from the cell's key.",
    )

    def defaults(self):
        return merge(common.DEFAULTS, {
            "data": {"alpha_star": 0.16, "N": 40, "noisy_frac": 0.2, "noisy_tau": 0.4},
            "train": {"save_params": True},
        })  # fmt: skip

    def derive(self, table: pa.Table, spec: Spec) -> pa.Table:
        """One row per (trained cell, strategy, k): the cell's columns (without its parameters)
        and strategy, k_removed, test_loss, test_hinge, test_error."""
        ks = np.arange(0, spec.k_max + 1, spec.k_step)
        rows = []
        compiled = {}  # one evaluation program per Problem (bucket and N)
        for t in trained_cells(table):
            if id(t.problem) not in compiled:
                pr = t.problem
                compiled[id(pr)] = jax.jit(lambda p, X, y, key, pr=pr: _removed(pr.apply, pr.loss.fn, p, X, y, key, ks))
            with jax.enable_x64(t.static.get("train.dtype") == "float64"):
                res = np.asarray(compiled[id(t.problem)](t.params, t.data["X_test"], t.data["y_test"],
                                                         stream(t.v["key"], "val")))  # fmt: skip
            cell = {k: v for k, v in t.row.items() if k not in ("test_loss", "test_error")}
            cell["train_strategy"] = cell.pop("strategy")  # provenance; "strategy" names the removal here
            for j, s in enumerate(sparsify.STRATEGIES):
                for m, k in enumerate(ks):
                    rows.append(cell | {"strategy": s, "k_removed": int(k), "test_loss": float(res[j, m, 0]),
                                        "test_hinge": float(res[j, m, 1]), "test_error": float(res[j, m, 2])})  # fmt: skip
        return pa.Table.from_pylist(rows)

    def analyse(self, cols, spec: Spec) -> Analysis:
        ids, strat, k, loss = cols["id"], cols["strategy"], cols["k_removed"], cols["test_loss"]
        kc = min(spec.k_claim, int(k.max()))
        cells = np.unique(ids)

        def delta(s, kk=kc):
            """Δ(kk) per cell for strategy s."""
            at = lambda kk: np.array([loss[(ids == c) & (strat == s) & (k == kk)][0] for c in cells])
            return at(kk) - at(0)

        d = {s: delta(s) for s in sparsify.STRATEGIES}
        kn = noisy_k(spec, np.unique(k))
        kk = {"noisiest": kn if kn is not None else kc}
        d_noisy = delta("noisiest", kk["noisiest"])
        summary = {"cells": len(cells), "k_claim": kc, "k for noisiest (the noisy tokens)": kn,
                   "test loss before removal": t_summary(np.array([loss[(ids == c) & (k == 0)][0] for c in cells]), 5),
                   "test error before removal": rounded(np.mean(cols["test_error"][k == 0]), 5)} | {
            f"Δ test loss at k={kc}: {s}": t_summary(v, 5) for s, v in d.items()} | {
            f"Δ test loss at k={kk['noisiest']}: noisiest": t_summary(d_noisy, 5)}  # fmt: skip
        ks = np.unique(k)
        summary["mean Δ test loss per k"] = {"k": ks.tolist()} | {
            s: [rounded(np.mean([loss[(ids == c) & (strat == s) & (k == kk)][0] - loss[(ids == c) & (strat == s) & (k == 0)][0]
                                 for c in cells]), 4) for kk in ks] for s in sparsify.STRATEGIES}  # fmt: skip
        claims = []
        for s, words in (("irrelevant", "removing label-irrelevant tokens first"),
                         ("noisiest", "removing the noisiest tokens first"),
                         ("attention", "keeping the tokens that receive the most attention")):  # fmt: skip
            ks_ = kk.get(s, kc)
            v = _below_zero(d_noisy if s == "noisiest" else d[s], f"Δ {s} at k = {ks_}")
            why = (f"judged at k = {ks_}, the number of noisy tokens [noisy_frac·L] in the grid (k_claim = {kc} would "
                   f"remove {kc - ks_} ordinary tokens too)" if s == "noisiest" and kn is not None else "")  # fmt: skip
            contrast = float(spec.data.get("noisy_tau", 0.0)) / float(spec.data.get("tau", 1.0))
            if s == "noisiest" and contrast < spec.noisiest_min_contrast:
                v = rules.Verdict(rules.DESCRIPTIVE, v.measured, v.rule)
                why = (f"descriptive below noisy_tau/tau = {spec.noisiest_min_contrast:g} (this run: {contrast:.3g}): "
                       f"the noise removed with the noisy tokens is offset by the signal removed with them, and "
                       f"`attnlab audit` gives the rule power 0.01 at 2, 1.0 at 5; k = {ks_}")  # fmt: skip
            claims.append(Claim.of(s, f"{words} lowers the test loss (k = {ks_})", v, why))
        m, lo, hi, _ = rules.t_interval(d["random"])
        pm, plo, phi, _ = rules.t_interval(d["random"] - d["irrelevant"])
        rule = ("95 % t interval of Δ_random reaches 0 and that of Δ_random − Δ_irrelevant lies above 0; "
                "fail if Δ_random's interval lies below 0")  # fmt: skip
        outcome = (rules.FAIL if hi < 0 else rules.PASS if hi >= 0 and plo > 0 else rules.INCONCLUSIVE) \
            if np.isfinite(hi) and np.isfinite(plo) else rules.INCONCLUSIVE  # fmt: skip
        measured = {"delta_random": rounded(m), "ci95": [rounded(lo), rounded(hi)],
                    "random_minus_irrelevant": rounded(pm), "ci95_paired": [rounded(plo), rounded(phi)]}  # fmt: skip
        claims.append(Claim.of("random", f"random removal does not lower the test loss (k = {kc})",
                               rules.Verdict(outcome, measured, rule)))  # fmt: skip
        return Analysis(claims=claims, summary=summary)

    def figures(self, cols, spec: Spec, analysis: Analysis, out: Path) -> list[Path]:
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
        ks = np.unique(cols["k_removed"])
        for s in sparsify.STRATEGIES:
            for ax, name in zip(axes, ("test_loss", "test_error"), strict=True):
                runs = np.array([[cols[name][(cols["id"] == c) & (cols["strategy"] == s) & (cols["k_removed"] == k)][0]
                                  for k in ks] for c in np.unique(cols["id"])])  # fmt: skip
                plots.band(ax, ks, runs, label={"attention": "attention top-k (practical)"}.get(s, f"{s} first"))
        for ax, name in zip(axes, ("test loss (logistic)", "test error"), strict=True):
            ax.set_xlabel("tokens removed from each test sample")
            ax.set_ylabel(name)
            ax.legend(fontsize=7)
        axes[0].set_title(f"{self.title.split(':')[0]}: mean ± std over {len(np.unique(cols['id']))} trained ViTs")
        return plots.save(fig, out, "fig4_sparsification")


def noisy_k(spec, ks) -> int | None:
    """The k at which noisiest-first is judged: the number of noisy tokens [noisy_frac·L] of the
    spec (the largest k of the grid not above it); None when the spec has no noisy tokens."""
    n = ldata.n_tokens(float(spec.data.get("noisy_frac", 0.0)), int(spec.data["L"]))
    ks = np.asarray(ks)
    ok = ks[(ks > 0) & (ks <= n)]
    return int(ok.max()) if n > 0 and len(ok) else None


def _below_zero(v: np.ndarray, name: str) -> rules.Verdict:
    m, lo, hi, _ = rules.t_interval(v)
    rule = f"95 % t interval over trained cells of {name} lies below 0; fail if it lies above 0"
    measured = {"mean": rounded(m), "ci95": [rounded(lo), rounded(hi)], "cells": len(v)}
    if not np.isfinite(hi):
        return rules.Verdict(rules.INCONCLUSIVE, measured, rule, "needs ≥ 2 cells")
    return rules.Verdict(rules.PASS if hi < 0 else rules.FAIL if lo > 0 else rules.INCONCLUSIVE, measured, rule)


EXPERIMENT = Fig4()
