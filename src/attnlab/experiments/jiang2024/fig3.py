"""jiang2024-fig3: training dynamics in the harmful and the benign regime (appendix figure).

Full-batch GD, lr 0.01, 500 steps, no early stop, init/32, 10 repeats per regime; probes of θ_t
are recorded at every step up to ``log_dense_until`` and every ``log_every`` steps after. Five
panels per regime, mean ± std: (1) train and test loss; (2) query-averaged attention of training
sample 0 on its signal and strong-noise tokens; (3) V-scalars μ₊ᵀ W_V w_O, ξ₂ᵀ W_V w_O; (4) QK
logits μ₊ᵀW_QW_Kᵀμ₊, μ₊ᵀW_QW_Kᵀξ₂; (5) QK logits ξ_iᵀW_QW_Kᵀμ₊, ξ_iᵀW_QW_Kᵀξ₂.

Harmful setting = the released script's: M = 3, d = 2048, d_h = 1024, d_v = 512, σ_p = 0.05,
σ̃_p = 1, ‖μ‖ = 1, N = 10 (N·SNR² ≈ 2). Benign setting *(assumed)*: the same with ‖μ‖ = 50
(SNR ≈ 22, N·SNR² ≈ 4.9·10³, five times the boundary N·SNR² ≈ 10³ of Fig. 1 — the same
"well above" as Fig. 1's benign region).

Claims (attention = query-averaged, averaged over the training samples, at the last step; one
value per repeat). Onset of a probe = first logged step where its change from step 0 reaches
``onset`` (10 %) of its largest change; for a group (V-scalars, QK logits) the member with the
largest change is used.
  sparse-benign   attention on the signal token > on the strong-noise token in every repeat,
                  and its mean ≥ 1.25/M (25 % above uniform)
  sparse-harmful  attention on the strong-noise token > on the signal token in every repeat,
                  and its mean ≥ 1.25/M
  stages-<regime> V-scalars grow first, while attention is still near uniform: the median onset
                  of the V-scalars precedes the median onsets of the QK logits and of the
                  attention on the dominant token
The stage statistic was first the half-change time (step at 50 % of the largest change). The
paper-scale benign run showed why that is a poor stage marker: the V-scalar keeps growing
slowly for hundreds of steps, so its half-change time is late although its growth starts first
(half-change V 35 vs QK 25 steps at ‖μ‖ = 28, a failing verdict; V 15 vs QK 7 at ‖μ‖ = 50). The
onset replaced it; the half-change times are still reported beside it.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from pydantic import Field, PositiveFloat, PositiveInt, field_validator

from attnlab import plots, theory
from attnlab.experiments import jiang2024 as common
from attnlab.experiments.base import Analysis, Claim, Experiment, rounded

REGIMES = ("harmful", "benign")
V_SCALARS = ("V_signal", "V_strong")
QK_LOGITS = ("qk_signal_signal", "qk_signal_strong", "qk_weak_signal", "qk_weak_strong")


class Spec(common.ModelSpec):
    M: int = Field(3, ge=3)
    d: PositiveInt = 2048
    d_h: PositiveInt = 1024
    d_v: PositiveInt = 512
    sigma_p: PositiveFloat = 0.05
    sigma_tilde_p: PositiveFloat = 1.0
    init_scale: PositiveFloat = 32.0
    lr: PositiveFloat = 0.01
    max_steps: int = Field(500, ge=1)
    loss_threshold: float = Field(0.0, description="0: no early stop (the loss is positive)")
    regime: list[str] = Field(list(REGIMES), description="grid axis: which settings to run")
    mu_harmful: PositiveFloat = 1.0
    N_harmful: PositiveInt = 10
    mu_benign: PositiveFloat = 50.0
    N_benign: PositiveInt = 10
    reps: PositiveInt = Field(10, description="independent repeats per regime")
    log_every: PositiveInt = Field(5, description="probe every this many steps")
    log_dense_until: int = Field(50, ge=0, description="probe at every step before this one")
    onset: float = Field(0.1, gt=0, lt=1, description="onset = first step at this fraction of the largest change")

    @field_validator("N_harmful", "N_benign")
    @classmethod
    def _even(cls, v):
        if v % 2:
            raise ValueError(f"must be even (class-balanced training set), got {v}")
        return v

    @field_validator("regime")
    @classmethod
    def _regimes(cls, v):
        bad = [r for r in v if r not in REGIMES]
        if bad:
            raise ValueError(f"unknown regime(s) {bad}; valid: {list(REGIMES)}")
        return [r for r in REGIMES if r in v]


# cpu: d = 256, d_h = 128, d_v = 64 (8× smaller); ‖μ‖ = 18 keeps the benign N·SNR² ≈ 5·10³.
CPU = dict(d=256, d_h=128, d_v=64, mu_benign=18.0)
SMOKE = dict(d=32, d_h=16, d_v=8, mu_benign=4.0, max_steps=60, reps=2, log_every=5, log_dense_until=10, n_test=20)


class Fig3(Experiment):
    id = "jiang2024-fig3"
    title = "Jiang et al. 2024, Fig. 3: three-stage training dynamics, harmful vs benign"
    description = __doc__
    Spec = Spec
    scales = {"smoke": SMOKE, "cpu": CPU, "paper": {}}
    family = common.FAMILY
    assumptions = (
        "Benign setting: the harmful script setting with ‖μ‖ = 50 (paper scale) / 18 (cpu scale), N·SNR² ≈ 5·10³.",
        "cpu scale: d = 256, d_h = 128, d_v = 64 instead of 2048/1024/512.",
        "Onset of a probe = first logged step where its change from step 0 reaches 10% of its largest change.",
    ) + common.ASSUMPTIONS

    def cells(self, spec: Spec) -> list[dict]:
        base = spec.cell_fields() | {"log_every": spec.log_every, "log_dense_until": spec.log_dense_until}
        setting = {r: (getattr(spec, f"mu_{r}"), getattr(spec, f"N_{r}")) for r in REGIMES}
        return [
            base | {"regime": r, "mu": setting[r][0], "N": setting[r][1], "rep": k}
            for r in spec.regime
            for k in range(spec.reps)
        ]

    def _traces(self, cols, regime):
        sel = cols["regime"] == regime
        t = np.asarray(cols["trace_step"][np.flatnonzero(sel)[0]], float)
        get = lambda name: np.stack([np.asarray(x, float) for x in cols[f"trace_{name}"][sel]])
        return t, get

    def analyse(self, cols, spec: Spec) -> Analysis:
        claims, summary = [], {}
        for regime in spec.regime:
            t, get = self._traces(cols, regime)
            sig, strong = get("attn_signal_mean"), get("attn_strong_mean")
            dominant, other = (sig, strong) if regime == "benign" else (strong, sig)
            token = "signal" if regime == "benign" else "strong-noise"
            V = np.stack([get(n) for n in V_SCALARS], 1)  # (reps, 2, T)
            QK = np.stack([get(n) for n in QK_LOGITS], 1)

            groups = {"V": V, "QK": QK, "attention": dominant}
            onset = {k: _times(t, x, spec.onset) for k, x in groups.items()}
            half = {k: _times(t, x, 0.5) for k, x in groups.items()}
            med = {k: float(np.nanmedian(x)) for k, x in onset.items()}
            snr = common.data.snr(getattr(spec, f"mu_{regime}"), spec.sigma_p, spec.d)
            sel = cols["regime"] == regime
            summary[regime] = {
                "N·SNR²": float(getattr(spec, f"N_{regime}") * snr**2),
                "final train loss (mean)": float(cols["train_loss"][sel].mean()),
                "final test loss (mean)": float(cols["test_loss"][sel].mean()),
                f"final attention on {token} (mean)": float(dominant[:, -1].mean()),
                "final attention on the other token (mean)": float(other[:, -1].mean()),
                "largest |ΔV-scalar| (median)": float(
                    np.median([np.abs(_largest(x) - _largest(x)[0]).max() for x in V])
                ),
                "largest |ΔQK logit| (median)": float(
                    np.median([np.abs(_largest(x) - _largest(x)[0]).max() for x in QK])
                ),
                "onset steps": onset,
                "half-change steps": half,
            }
            final_dom, final_other = dominant[:, -1], other[:, -1]
            claims.append(Claim(
                f"sparse-{regime}", f"{regime} regime: query-averaged attention concentrates on the {token} token",
                {f"attn_{token}": rounded(final_dom.mean()), "attn_other": rounded(final_other.mean()),
                 "reps_dominant": int(np.sum(final_dom > final_other)), "reps": len(final_dom)},
                f"{token} > other in every repeat, and mean ≥ 1.25/M = {1.25 / spec.M:.3f} (25% above uniform)",
                bool(np.all(final_dom > final_other) and final_dom.mean() >= 1.25 / spec.M),
            ))  # fmt: skip
            k_v = int(np.argmin(np.abs(t - med["V"]))) if np.isfinite(med["V"]) else 0
            claims.append(Claim(
                f"stages-{regime}",
                f"{regime} regime: V-scalars start growing before the QK logits and before attention sparsifies",
                {"median_onset_V": rounded(med["V"]), "median_onset_QK": rounded(med["QK"]),
                 "median_onset_attention": rounded(med["attention"]),
                 f"attn_{token}_at_V_onset": rounded(float(dominant[:, k_v].mean())),
                 "median_half_V": rounded(float(np.nanmedian(half["V"]))),
                 "median_half_QK": rounded(float(np.nanmedian(half["QK"])))},
                "median onset V < median onset QK and < median onset of attention",
                bool(med["V"] < med["QK"] and med["V"] < med["attention"]),
            ))  # fmt: skip
        return Analysis(claims=claims, summary=summary)

    def figures(self, cols, spec: Spec, analysis: Analysis, out: Path) -> list[Path]:
        fig, axes = plt.subplots(len(spec.regime), 5, figsize=(17, 3.3 * len(spec.regime)), squeeze=False,
                                 constrained_layout=True)  # fmt: skip
        panels = (
            ("loss", (("train_loss", "train loss"), ("test_loss", "test loss"))),
            ("attention (sample 0)", (("attn_signal", "signal token"), ("attn_strong", "strong-noise token"))),
            ("V-scalars", (("V_signal", "μ₊ᵀW_V w_O"), ("V_strong", "ξ₂ᵀW_V w_O"))),
            ("QK logits, signal query", (("qk_signal_signal", "μ₊ᵀW_QW_Kᵀμ₊"), ("qk_signal_strong", "μ₊ᵀW_QW_Kᵀξ₂"))),
            ("QK logits, weak-noise query", (("qk_weak_signal", "ξ_iᵀW_QW_Kᵀμ₊"), ("qk_weak_strong", "ξ_iᵀW_QW_Kᵀξ₂"))),
        )
        for row, regime in zip(axes, spec.regime, strict=True):
            t, get = self._traces(cols, regime)
            s = analysis.summary[regime]
            for ax, (title, series) in zip(row, panels, strict=True):
                for name, label in series:
                    plots.band(ax, t, get(name), label)
                if title == "attention (sample 0)":
                    ax.axhline(1 / spec.M, color="grey", lw=0.8, ls=":", label="uniform 1/M")
                ax.set_title(title)
                ax.set_xscale("symlog", linthresh=10)  # the stages of the benign run fit in ~10 steps
                ax.set_xlim(0, t[-1])
                ax.set_xlabel("iteration (linear to 10, then log)")
                ax.legend(fontsize=7)
            row[0].set_ylabel(f"{regime}: ‖μ‖ = {getattr(spec, f'mu_{regime}'):g}, N = {getattr(spec, f'N_{regime}')}, "
                              f"N·SNR² = {s['N·SNR²']:.3g}", fontsize=9)  # fmt: skip
        fig.suptitle(
            f"{self.id}: d = {spec.d}, M = {spec.M}, d_h = {spec.d_h}, d_v = {spec.d_v}, lr = {spec.lr:g}, "
            f"init/{spec.init_scale:g}, mean ± std over {spec.reps} repeats",
            fontsize=9,
        )
        return plots.save(fig, out, "fig3_dynamics")


def _times(t, runs, frac):
    """Per repeat: first step at ``frac`` of the largest change (of the group's largest member)."""
    return [theory.first_crossing(t, _largest(x) if x.ndim == 2 else x, frac) for x in runs]


def _largest(series: np.ndarray) -> np.ndarray:
    """The series (row) whose largest change from step 0 is the largest."""
    return series[np.argmax(np.abs(series - series[:, :1]).max(axis=1))]


EXPERIMENT = Fig3()
