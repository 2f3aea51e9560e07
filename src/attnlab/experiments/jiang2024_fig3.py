"""jiang2024-fig3: training dynamics in the harmful and the benign regime (appendix figure).

Full-batch GD, lr 0.01, 500 steps, no early stop, init/32, 10 repeats per regime; every
``log_every`` steps the probes of θ_t are recorded. Five panels per regime, mean ± std:
(1) train and test loss; (2) query-averaged attention of training sample 0 on its signal and
strong-noise tokens; (3) V-scalars μ₊ᵀ W_V w_O, ξ₂ᵀ W_V w_O; (4) QK logits μ₊ᵀW_QW_Kᵀμ₊,
μ₊ᵀW_QW_Kᵀξ₂; (5) QK logits ξ_iᵀW_QW_Kᵀμ₊, ξ_iᵀW_QW_Kᵀξ₂.

Harmful setting = the released script's: M = 3, d = 2048, d_h = 1024, d_v = 512, σ_p = 0.05,
σ̃_p = 1, ‖μ‖ = 1, N = 10 (N·SNR² ≈ 2). Benign setting *(assumed)*: the same with ‖μ‖ = 28
(SNR ≈ 12.4, N·SNR² ≈ 1530, well above the boundary N·SNR² ≈ 10³ of Fig. 1).

Claims, fixed before any run (attention = query-averaged, averaged over the training samples,
at the last step; one value per repeat):
  sparse-benign   attention on the signal token > on the strong-noise token in every repeat,
                  and its mean ≥ 1.25/M (25 % above uniform)
  sparse-harmful  attention on the strong-noise token > on the signal token in every repeat,
                  and its mean ≥ 1.25/M
  stages-<regime> V-scalars grow before QK logits: the median over repeats of the step where
                  the largest |ΔV-scalar| first reaches half its final size is smaller than the
                  median step where the largest |ΔQK logit| does
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from pydantic import Field, PositiveFloat, PositiveInt, field_validator

from attnlab import plots, theory
from attnlab.experiments import jiang2024 as common
from attnlab.experiments.base import Analysis, Claim, Experiment

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
    mu_benign: PositiveFloat = 28.0
    N_benign: PositiveInt = 10
    reps: PositiveInt = Field(10, description="independent repeats per regime")
    log_every: PositiveInt = Field(5, description="probe every this many steps")
    half: float = Field(0.5, gt=0, lt=1, description="growth time = first step at this fraction of the final change")

    @field_validator("regime")
    @classmethod
    def _regimes(cls, v):
        bad = [r for r in v if r not in REGIMES]
        if bad:
            raise ValueError(f"unknown regime(s) {bad}; valid: {list(REGIMES)}")
        return [r for r in REGIMES if r in v]


# cpu: d = 256, d_h = 128, d_v = 64 (8× smaller); ‖μ‖ = 10 keeps the benign N·SNR² ≈ 1560.
CPU = dict(d=256, d_h=128, d_v=64, mu_benign=10.0)
SMOKE = dict(d=32, d_h=16, d_v=8, mu_benign=4.0, max_steps=60, reps=2, log_every=5, n_test=20)


class Fig3(Experiment):
    id = "jiang2024-fig3"
    title = "Jiang et al. 2024, Fig. 3: three-stage training dynamics, harmful vs benign"
    description = __doc__
    Spec = Spec
    scales = {"smoke": SMOKE, "cpu": CPU, "paper": {}}
    family = common.FAMILY
    assumptions = (
        "Benign setting: the harmful script setting with ‖μ‖ = 28 (paper scale) / 10 (cpu scale), N·SNR² ≈ 1.5·10³.",
        "cpu scale: d = 256, d_h = 128, d_v = 64 instead of 2048/1024/512.",
        "Growth time of a probe = first logged step where its change from step 0 reaches half of its largest change.",
    ) + common.ASSUMPTIONS

    def cells(self, spec: Spec) -> list[dict]:
        base = spec.cell_fields() | {"log_every": spec.log_every}
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
            sig, strong = get("attn_signal_mean")[:, -1], get("attn_strong_mean")[:, -1]
            snr = common.data.snr(getattr(spec, f"mu_{regime}"), spec.sigma_p, spec.d)
            V = np.stack([get(n) for n in V_SCALARS], 1)  # (reps, 2, T)
            QK = np.stack([get(n) for n in QK_LOGITS], 1)
            t_V = [theory.first_crossing(t, _largest(v), spec.half) for v in V]
            t_QK = [theory.first_crossing(t, _largest(q), spec.half) for q in QK]
            summary[regime] = {
                "N·SNR²": float(getattr(spec, f"N_{regime}") * snr**2),
                "final train loss (mean)": float(cols["train_loss"][cols["regime"] == regime].mean()),
                "final test loss (mean)": float(cols["test_loss"][cols["regime"] == regime].mean()),
                "attention on signal (mean over reps)": float(sig.mean()),
                "attention on strong noise (mean over reps)": float(strong.mean()),
                "V growth steps": t_V,
                "QK growth steps": t_QK,
            }
            dominant, other = (sig, strong) if regime == "benign" else (strong, sig)
            token = "signal" if regime == "benign" else "strong-noise"
            claims.append(Claim(
                f"sparse-{regime}", f"{regime} regime: query-averaged attention concentrates on the {token} token",
                {f"attn_{token}": _r(dominant.mean()), "attn_other": _r(other.mean()),
                 "reps_dominant": int(np.sum(dominant > other)), "reps": len(dominant)},
                f"{token} > other in every repeat, and mean ≥ 1.25/M = {1.25 / spec.M:.3f} (25% above uniform)",
                bool(np.all(dominant > other) and dominant.mean() >= 1.25 / spec.M),
            ))  # fmt: skip
            mV, mQK = np.nanmedian(t_V), np.nanmedian(t_QK)
            claims.append(Claim(
                f"stages-{regime}", f"{regime} regime: V-scalars grow before the QK logits (stage 1 precedes stage 2)",
                {"median_step_V_half": _r(mV), "median_step_QK_half": _r(mQK)},
                "median V growth step < median QK growth step", bool(mV < mQK),
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
                ax.set_xlabel("iteration")
                ax.legend(fontsize=7)
            row[0].set_ylabel(f"{regime}: ‖μ‖ = {getattr(spec, f'mu_{regime}'):g}, N = {getattr(spec, f'N_{regime}')}, "
                              f"N·SNR² = {s['N·SNR²']:.3g}", fontsize=9)  # fmt: skip
        fig.suptitle(
            f"{self.id}: d = {spec.d}, M = {spec.M}, d_h = {spec.d_h}, d_v = {spec.d_v}, lr = {spec.lr:g}, "
            f"init/{spec.init_scale:g}, mean ± std over {spec.reps} repeats",
            fontsize=9,
        )
        return plots.save(fig, out, "fig3_dynamics")


def _largest(series: np.ndarray) -> np.ndarray:
    """The series (row) with the largest total change over the run."""
    return series[np.argmax(np.abs(series[:, -1] - series[:, 0]))]


def _r(x, digits=4):
    return float(np.round(x, digits)) if x is not None and np.isfinite(x) else None


EXPERIMENT = Fig3()
