"""wu2023-ntk-limit: the infinite-width NTK under τ₀ = d_m^−1, and the unit-norm-token pitfall.

No training: every cell draws θ₀ (LeCun init, ``train.max_steps = 0``, ``save_params``) at one
width d_m (model.d_m), scaling α (τ₀ = d_m^−α: model.alpha ∈ {1/2, 1}) and token norm
(data.token_norm: "d", ‖x‖² ≈ d, or "unit"), × reps. ``derive`` rebuilds each cell's training
inputs and evaluates, on its first ``n_ntk`` samples (in float64):

  ntk_error    ‖K̂ − K_∞‖_F / ‖K_∞‖_F, where K̂ = :func:`attnlab.ntk.normalised` (empirical NTK
               at θ₀, K/d_m under LeCun) and K_∞ = :func:`attnlab.ntk.limit_ntk` (the closed
               form of the τ₀ = d_m^−1 limit: the two-layer ReLU NTK of the mean tokens, its W_V
               term at this d_m). The theory (:mod:`attnlab.ntk`): O(d_m^−1/2) under α = 1
  qk_share     ‖K^{W_Q} + K^{W_K}‖_F / ‖K‖_F (the query/key blocks, O(d_m^−2) relative under α = 1)
  logit_std    mean over samples of the std of the softmax logits S (aux of the model):
               ∝ d_m^(1/2 − α)·‖x‖²/d, so d_m^−1/2 under α = 1 and O(1) under α = 1/2
  attn_tv      mean total-variation distance of the attention rows from uniform
  attn_entropy mean attention-row entropy (log d_s when uniform)

Claims, fixed before any run (α, token norm and thresholds are Spec fields; intervals 95 %):
  limit        α = 1, tokens ``claim_norm`` ("d"): the error falls with the width — the bootstrap
               (over cells) interval of the slope of log ntk_error vs log d_m lies below 0 — and
               at the largest width the t interval (over reps) of the error lies below ``tol``
               (0.05). Fail: slope interval above 0, or the error's interval above tol
  logits-a1    α = 1: the slope of log logit_std vs log d_m lies inside ``slope_a1`` [−0.7, −0.3]
  logits-a0.5  α = 1/2: the same slope lies inside ``slope_half`` [−0.15, 0.15]
  alpha-half   α = 1/2, tokens ``claim_norm``: the closed form does *not* hold — the error stays
               O(1): the bootstrap interval of the slope of log ntk_error vs log d_m lies inside
               ±``flat_band`` (0.15, an equivalence band set before the run: rules.no_effect) and
               at the largest width the error's interval lies above ``tol`` (pass). Fail: the
               slope's interval lies wholly outside the band (the error still moves with the
               width, e.g. tends to the closed form at d_m^−1/4) or the error's interval below
               tol. H1: error flat in d_m; H0: error ∝ d_m^−1/4 → 0. (Before: the error above tol
               at the largest width alone, which an error 0.94 still decaying passed.)
  pitfall      at the largest width: with unit-norm tokens the attention of α = 1/2 is already
               near uniform (interval of attn_tv below ``tv_small``, 0.05) while with ‖x‖² ≈ d
               the two scalings separate (Welch interval of attn_tv(α = 1/2) − attn_tv(α = 1)
               above ``tv_gap``, 0.1). Fail: unit-norm attn_tv(α = 1/2) above tv_small, or the
               ‖x‖² ≈ d gap below tv_gap
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
from pydantic import Field, PositiveFloat, PositiveInt
from scipy import stats

from attnlab import ntk, plots, rules, theory
from attnlab.audit import Control
from attnlab.experiments import wu2023 as common
from attnlab.experiments.base import Analysis, Claim, Experiment, rounded, t_summary
from attnlab.experiments.config import ExperimentSpec, merge
from attnlab.experiments.pipeline import trained_cells
from attnlab.experiments.wu2023.audit.limit import limit_design
from attnlab.models import wu2023 as wu_model
from attnlab.parts import register

MEASURES = ("ntk_error", "qk_share", "logit_std", "attn_tv", "attn_entropy")


class Spec(ExperimentSpec):
    n_ntk: PositiveInt = Field(32, description="training samples the NTK is evaluated on (the first n_ntk)")
    n_boot: int = Field(300, ge=20, description="bootstrap resamples for slope intervals")
    claim_norm: Literal["d", "unit"] = Field(
        "d", description="token norm the limit and alpha-half claims are judged on"
    )
    tol: PositiveFloat = Field(0.05, description="relative NTK error the α = 1 limit must reach at the largest width")
    flat_band: PositiveFloat = Field(0.15, description="alpha-half: the error's log–log slope must lie within ±band")
    slope_a1: tuple[float, float] = Field((-0.7, -0.3), description="margin of the logit-std slope under α = 1")
    slope_half: tuple[float, float] = Field((-0.15, 0.15), description="margin of the logit-std slope under α = 1/2")
    tv_small: PositiveFloat = Field(0.05, description="attention distance from uniform counted as near uniform")
    tv_gap: PositiveFloat = Field(0.1, description="separation of the two scalings' attn_tv required with ‖x‖² ≈ d")


# ---------------------------------------------------------------- per-cell measures


def measures(hp: wu_model.Hparams, params: dict, X) -> dict:
    """The measures of one θ₀ on token arrays X (n, d_s, d): see the module docstring."""
    apply = lambda p, x: wu_model.apply(p, x, hp)
    Kb = ntk.empirical_ntk(apply, params, X, blocks=True)
    K = sum(Kb.values())
    Kn = ntk.normalised(K, hp.init, hp.d_m)
    L = ntk.limit_ntk(X, init=hp.init, d=hp.d, d_m=hp.d_m)
    qk = sum(v for b, v in Kb.items() if b in ("W_Q", "W_K"))
    _, aux = jax.vmap(lambda x: apply(params, x))(X)
    return {
        "ntk_error": jnp.linalg.norm(Kn - L) / jnp.linalg.norm(L),
        "qk_share": jnp.linalg.norm(qk) / jnp.linalg.norm(K),
        "logit_std": aux["logit_std"].mean(),
        "attn_tv": aux["attn_tv"].mean(),
        "attn_entropy": aux["attn_entropy"].mean(),
    }


_measures = jax.jit(measures, static_argnums=0)


# ---------------------------------------------------------------- analysis helpers


def loglog_slope(x: np.ndarray, y: np.ndarray, n_boot: int, seed: int) -> theory.Estimate:
    """Slope of log y vs log x by least squares, with a bootstrap interval over cells."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    ok = np.isfinite(lx) & np.isfinite(ly)
    lx, ly = lx[ok], ly[ok]
    if len(np.unique(lx)) < 2:
        return theory.Estimate.missing()

    def stat(idx):
        return np.polyfit(lx[idx], ly[idx], 1)[0] if len(np.unique(lx[idx])) > 1 else np.nan

    return theory.Estimate(*theory.bootstrap(stat, len(lx), n_boot, seed), n_boot=n_boot)


def at_width(values: np.ndarray) -> dict:
    """Mean and t interval over the reps at one width."""
    return t_summary(values, 5) | {"n": len(values)}


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """mean(a) − mean(b) and its 95 % Welch interval (NaN with fewer than 2 values on a side)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    diff = float(a.mean() - b.mean()) if len(a) and len(b) else np.nan
    if len(a) < 2 or len(b) < 2:
        return diff, np.nan, np.nan
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    return diff, float(ci.low), float(ci.high)


def limit_verdict(slope: theory.Estimate, err: dict, tol: float) -> rules.Verdict:
    rule = (
        f"95 % interval of the slope of log error vs log d_m below 0 and, at the largest width, the t interval of "
        f"the error below {tol:g}; fail if the slope's interval lies above 0 or the error's above {tol:g}"
    )
    lo, hi = (np.nan if v is None else v for v in err["ci95"])
    m = {
        "slope": rounded(slope.value),
        "slope_ci95": [rounded(slope.lo), rounded(slope.hi)],
        "error_at_largest_width": err["mean"],
        "error_ci95": err["ci95"],
        "tol": tol,
    }
    if not (np.isfinite(slope.lo) and np.isfinite(lo)):
        return rules.Verdict(rules.INCONCLUSIVE, m, rule, "no interval (needs ≥ 2 widths and ≥ 2 reps)")
    if slope.lo > 0 or lo > tol:
        return rules.Verdict(
            rules.FAIL,
            m,
            rule,
            "the error grows with the width" if slope.lo > 0 else f"the error at the largest width stays above {tol:g}",
        )
    if slope.hi < 0 and hi < tol:
        return rules.Verdict(rules.PASS, m, rule)
    return rules.Verdict(rules.INCONCLUSIVE, m, rule, "an interval straddles its threshold")


def not_limit_verdict(slope: theory.Estimate, err: dict, tol: float, band: float) -> rules.Verdict:
    """α = 1/2 does not tend to the closed form: the error is flat in d_m — the bootstrap interval
    of the slope of log error vs log d_m inside ±band (:func:`attnlab.rules.no_effect`) — and at
    the largest width its t interval lies above tol. Fail: the slope's interval lies wholly
    outside ±band (the error still moves with the width: tending to the closed form when it
    falls) or the error's interval below tol (the closed form reached); else inconclusive."""
    flat = rules.no_effect(slope.value, slope.lo, slope.hi, band, "slope of log error vs log d_m")
    rule = (
        f"{flat.rule}, and at the largest width the t interval of the error above {tol:g}; fail if the slope's "
        f"interval lies outside the band or the error's below {tol:g}"
    )
    lo, hi = (np.nan if v is None else v for v in err["ci95"])
    m = {
        "slope": rounded(slope.value),
        "slope_ci95": [rounded(slope.lo), rounded(slope.hi)],
        "band": band,
        "error_at_largest_width": err["mean"],
        "error_ci95": err["ci95"],
        "tol": tol,
    }
    if flat.outcome == rules.FAIL or (np.isfinite(hi) and hi < tol):
        why = flat.detail if flat.outcome == rules.FAIL else f"the error at the largest width is below {tol:g}"
        return rules.Verdict(rules.FAIL, m, rule, why)
    if flat.outcome == rules.PASS and np.isfinite(lo) and lo > tol:
        return rules.Verdict(rules.PASS, m, rule)
    why = flat.detail or (
        "no interval of the error (needs ≥ 2 reps)"
        if not np.isfinite(lo)
        else f"the error's interval straddles {tol:g}"
    )
    return rules.Verdict(rules.INCONCLUSIVE, m, rule, why)


def pitfall_verdict(tv_unit: dict, gap_d: tuple[float, float, float], gap_unit, tv_small: float, tv_gap: float):
    rule = (
        f"largest width: t interval of attn_tv(α = 1/2, unit tokens) below {tv_small:g} and Welch interval of "
        f"attn_tv(α = 1/2) − attn_tv(α = 1) with ‖x‖² ≈ d above {tv_gap:g}; fail if the first lies above "
        f"{tv_small:g} or the second below {tv_gap:g}"
    )
    ulo, uhi = (np.nan if v is None else v for v in tv_unit["ci95"])
    g, glo, ghi = gap_d
    m = {
        "attn_tv_unit_alpha_half": tv_unit["mean"],
        "ci95_unit": tv_unit["ci95"],
        "gap_d": rounded(g),
        "ci95_gap_d": [rounded(glo), rounded(ghi)],
        "gap_unit": rounded(gap_unit[0]),
        "ci95_gap_unit": [rounded(gap_unit[1]), rounded(gap_unit[2])],
    }
    if not (np.isfinite(ulo) and np.isfinite(glo)):
        return rules.Verdict(rules.INCONCLUSIVE, m, rule, "no interval (needs ≥ 2 reps per group)")
    if ulo > tv_small or ghi < tv_gap:
        return rules.Verdict(rules.FAIL, m, rule)
    if uhi < tv_small and glo > tv_gap:
        return rules.Verdict(rules.PASS, m, rule)
    return rules.Verdict(rules.INCONCLUSIVE, m, rule, "an interval straddles its threshold")


# ---------------------------------------------------------------- the experiment


class Limit(Experiment):
    id = "wu2023-ntk-limit"
    regime = "theorem"  # the widths approach the infinite-width limit the theorem states
    title = "Wu et al. 2023: the τ₀ = d_m^−1 NTK limit, logit scale and the unit-norm pitfall"
    description = __doc__
    Spec = Spec
    audit = limit_design()
    controls = (
        Control(
            "as-stated",
            "positive",
            "cpu",
            (),
            {"limit": "pass"},
            "the cpu design as it stands (d_m up to 8192); its audit gives limit power 1.0",
        ),
        Control(
            "tied",
            "negative",
            "cpu",
            ("model.tied=true",),
            {"limit": "fail"},
            "W_Q = W_K: the logits have mean τ₀·d_h·s²·x_tᵀx_s = O(x_tᵀx_s/d), so attention stays non-uniform at "
            "every width and the untied closed form cannot be reached",
        ),
    )
    scales = {
        "smoke": dict(
            data={"N": 6, "token_norm": ["d", "unit"]},
            model={"d_m": 32, "alpha": [0.5, 1.0]},
            reps=2,
            n_ntk=6,
            n_boot=20,
        ),
        "cpu": dict(
            data={"token_norm": ["d", "unit"]},
            model={"d_m": [64, 128, 256, 512, 1024, 2048, 4096, 8192], "alpha": [0.5, 1.0]},
            reps=4,
        ),
        "paper": dict(
            data={"N": 64, "token_norm": ["d", "unit"]},
            model={"d_m": [64, 256, 1024, 4096, 16384, 32768], "alpha": [0.5, 1.0]},
            reps=8,
            n_ntk=64,
        ),
    }
    assumptions = common.ASSUMPTIONS + (
        "Measured at initialisation only (no training step); the NTK on the first n_ntk training inputs, in float64 "
        "from the float32 draws.",
        "K_∞ keeps the W_V block's leading term at the cell's d_m (it vanishes only as d_m → ∞ under LeCun).",
    )

    def defaults(self):
        return merge(
            common.DEFAULTS,
            {
                "data": {"N": 32, "n_test": 1},
                "model": {"init": "lecun"},
                "train": {"max_steps": 0, "save_params": True},
            },
        )

    def derive(self, table: pa.Table, spec: Spec) -> pa.Table:
        """One row per cell: its columns (without its parameters) and the MEASURES."""
        rows = []
        for t in trained_cells(table):
            n = min(spec.n_ntk, int(t.cell["data.N"]))
            X = np.asarray(t.data["X"][:n], np.float64)
            params = {k: np.asarray(p, np.float64) for k, p in t.params.items()}
            hp = wu_model.PART.hparams(
                {k[6:]: x for k, x in t.cell.items() if k.startswith("model.") and k != "model.name"},
                {"tokens": t.cell["data.d_s"], "d": t.cell["data.d"]},
            )
            with jax.enable_x64(True):
                res = {k: float(x) for k, x in _measures(hp, params, X).items()}
            cell = t.row
            rows.append(cell | res | {"n_ntk": n})
        return pa.Table.from_pylist(rows)

    def analyse(self, cols, spec: Spec) -> Analysis:
        alpha, norm, d_m = cols["model.alpha"].astype(float), cols["data.token_norm"], cols["model.d_m"].astype(int)
        top = int(d_m.max())
        summary: dict = {"cells": len(d_m), "largest width": top, "n_ntk": int(cols["n_ntk"][0])}
        groups = {}
        for a in np.unique(alpha):
            for tn in np.unique(norm):
                s = (alpha == a) & (norm == tn)
                g = {
                    "error slope": loglog_slope(d_m[s], cols["ntk_error"][s], spec.n_boot, spec.seed),
                    "logit-std slope": loglog_slope(d_m[s], cols["logit_std"][s], spec.n_boot, spec.seed),
                    "at largest width": {m: at_width(cols[m][s & (d_m == top)]) for m in MEASURES},
                }
                groups[(a, tn)] = g
                summary[f"α = {a:g}, tokens {tn}"] = {
                    "slope of log ntk_error vs log d_m": g["error slope"].as_dict(),
                    "slope of log logit_std vs log d_m": g["logit-std slope"].as_dict(),
                    "mean per width": {
                        m: {int(w): rounded(cols[m][s & (d_m == w)].mean(), 5) for w in np.unique(d_m[s])}
                        for m in MEASURES
                    },
                    "at largest width": g["at largest width"],
                }
        claims = []
        cn = spec.claim_norm
        one, half = groups.get((1.0, cn)), groups.get((0.5, cn))
        missing = rules.Verdict(rules.INCONCLUSIVE, {}, "", "the grid has no such cells")
        claims.append(
            Claim.of(
                "limit",
                f"τ₀ = d_m^−1 (tokens {cn}): the normalised NTK tends to the closed form (two-layer ReLU NTK of the "
                f"mean tokens) as the width grows",
                limit_verdict(one["error slope"], one["at largest width"]["ntk_error"], spec.tol) if one else missing,
            )
        )
        for a, margin, words in ((1.0, spec.slope_a1, "∝ d_m^−1/2"), (0.5, spec.slope_half, "O(1) in d_m")):
            g = groups.get((a, cn))
            v = (
                rules.equivalence(
                    g["logit-std slope"].value, g["logit-std slope"].lo, g["logit-std slope"].hi, margin, "slope"
                )
                if g
                else missing
            )
            claims.append(
                Claim.of(f"logits-a{a:g}", f"τ₀ = d_m^−{a:g} (tokens {cn}): the softmax-logit std is {words}", v)
            )
        claims.append(
            Claim.of(
                "alpha-half",
                f"τ₀ = d_m^−1/2 (tokens {cn}): the NTK does not tend to the τ₀ = d_m^−1 closed form "
                "(attention stays non-uniform)",
                not_limit_verdict(half["error slope"], half["at largest width"]["ntk_error"], spec.tol, spec.flat_band)
                if half
                else missing,
            )
        )
        top_tv = lambda a, tn: cols["attn_tv"][(alpha == a) & (norm == tn) & (d_m == top)]
        if all((a, tn) in groups for a in (0.5, 1.0) for tn in ("d", "unit")):
            gap_d, gap_unit = welch(top_tv(0.5, "d"), top_tv(1.0, "d")), welch(top_tv(0.5, "unit"), top_tv(1.0, "unit"))
            v = pitfall_verdict(at_width(top_tv(0.5, "unit")), gap_d, gap_unit, spec.tv_small, spec.tv_gap)
            summary["attn_tv gap α = 1/2 − α = 1 at the largest width"] = {
                "tokens d": [rounded(x) for x in gap_d],
                "tokens unit": [rounded(x) for x in gap_unit],
                "ratio d / unit": rounded(gap_d[0] / gap_unit[0]) if gap_unit[0] else None,
                "ntk_error of α = 1/2 (the α = 1 closed form)": {
                    tn: groups[(0.5, tn)]["at largest width"]["ntk_error"]["mean"] for tn in ("d", "unit")
                },
            }
        else:
            v = missing
        claims.append(
            Claim.of(
                "pitfall",
                "with unit-norm tokens the two scalings give nearly uniform attention alike; with ‖x‖² ≈ d they "
                "separate",
                v,
            )
        )
        return Analysis(claims=claims, summary=summary)

    def figures(self, cols, spec: Spec, analysis: Analysis, out: Path) -> list[Path]:
        alpha, norm, d_m = cols["model.alpha"].astype(float), cols["data.token_norm"], cols["model.d_m"].astype(float)
        ws = np.unique(d_m)
        panels = (
            ("ntk_error", "‖K̂ − K_∞‖_F / ‖K_∞‖_F"),
            ("logit_std", "softmax-logit std"),
            ("attn_tv", "attention distance from uniform (TV)"),
        )
        fig, axes = plt.subplots(1, 3, figsize=(15, 4), constrained_layout=True)
        colors = {0.5: "tab:blue", 1.0: "tab:red"}
        for ax, (m, label) in zip(axes, panels, strict=True):
            for a in np.unique(alpha):
                for tn in np.unique(norm):
                    s = (alpha == a) & (norm == tn)
                    mean = np.array([cols[m][s & (d_m == w)].mean() for w in ws])
                    sd = np.array([cols[m][s & (d_m == w)].std() for w in ws])
                    ax.errorbar(
                        ws,
                        mean,
                        yerr=sd,
                        fmt="o-" if tn == "d" else "s--",
                        ms=3,
                        capsize=2,
                        color=colors.get(a, "k"),
                        label=f"τ₀ = d_m^−{a:g}, tokens {tn}",
                    )
            ref = cols[m][(alpha == alpha.max()) & (norm == spec.claim_norm) & (d_m == ws[0])]
            if m in ("ntk_error", "logit_std") and len(ref) and np.all(ref > 0):
                ax.plot(ws, ref.mean() * (ws / ws[0]) ** -0.5, ":", color="grey", label="∝ d_m^−1/2")
            if m == "ntk_error":
                ax.axhline(spec.tol, color="k", lw=0.8, ls="-.", label=f"tol {spec.tol:g}")
            ax.set_yscale("log")
            plots.log_x(ax)
            ax.set_xlabel("width d_m")
            ax.set_title(label)
            ax.legend(fontsize=6)
        axes[0].set_title(f"{panels[0][1]} at init (n = {int(cols['n_ntk'][0])} samples)")
        return plots.save(fig, out, "ntk_limit")


LIMIT = Limit()
register(LIMIT)
