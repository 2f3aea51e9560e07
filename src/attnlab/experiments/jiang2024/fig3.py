"""jiang2024-fig3: training dynamics in the harmful and the benign regime (appendix figure).

Full-batch GD, lr 0.01, 500 steps, no early stop, init/32, 10 repeats per regime; probes of θ_t
are recorded at every step up to ``log_dense_until`` and every ``log_every`` steps after. Five
panels per regime, mean ± std: (1) train and test loss; (2) query-averaged attention of training
sample 0 on its signal and strong-noise tokens; (3) V-scalars μ₊ᵀ W_V w_O, ξ̃ᵀ W_V w_O; (4) QK
logits of the signal and strong-noise queries μ₊ᵀW_QW_Kᵀμ₊, μ₊ᵀW_QW_Kᵀξ̃, ξ̃ᵀW_QW_Kᵀξ̃, ξ̃ᵀW_QW_Kᵀμ₊;
(5) QK logits of a weak-noise query ξ_iᵀW_QW_Kᵀμ₊, ξ_iᵀW_QW_Kᵀξ̃ (ξ̃ = sample 0's strong-noise token).

Harmful setting = the released script's: M = 3, d = 2048, d_h = 1024, d_v = 512, σ_p = 0.05,
σ̃_p = 1, ‖μ‖ = 1, N = 10 (N·SNR² ≈ 2). Benign setting *(assumed)*: the same with ‖μ‖ = 50
(SNR ≈ 22, N·SNR² ≈ 4.9·10³, five times the boundary N·SNR² ≈ 10³ of Fig. 1 — the same
"well above" as Fig. 1's benign region).

Claims (attention = query-averaged, averaged over the training samples, at the last step; one
value per repeat; each judged by a paired one-sided sign test over repeats, ties counted as
failures, p < ``alpha``):
  sparse-<regime>  the dominant token (signal if benign, strong noise if harmful) gets more
                   attention than the best other token (the other named token and every single
                   weak-noise token), and its mean is ≥ 1.25/M (25 % above uniform)
  stages-<regime>  V-scalars start growing first: per repeat, the onset of the V-scalars precedes
                   both the onset of the QK logits and that of the attention on the dominant token
The onset of a group is the first logged step at which any member has moved from its value at
step 0 by ``onset_delta`` (0.1, in logit units: a V-scalar enters f through ā_s·x_sᵀW_V w_O and
a QK logit is a softmax logit), and for the attention by ``onset_attn`` (0.02 of attention
mass). Both are absolute, so an onset does not depend on how long the run is; a group that never
moves that far has no onset (∞), and a tie (both ∞) counts against the claim. The QK group has
six logits, the strong→strong logit ξ̃ᵀW_QW_Kᵀξ̃ (the most likely driver of the attention in the
harmful regime) among them.

Earlier versions timed the stages by the half-change (then 10 %-change) of each probe relative
to its largest change over the run, which depends on the run length; the paper-scale benign run
showed why it misleads (the V-scalar keeps growing for hundreds of steps). Those times are still
reported in the summary.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from pydantic import Field, PositiveFloat, PositiveInt, field_validator

from attnlab import plots, rules, theory
from attnlab.audit import Control
from attnlab.experiments import jiang2024 as common
from attnlab.experiments.base import Analysis, Claim, Experiment, rounded
from attnlab.experiments.config import ExperimentSpec, expand, merge
from attnlab.experiments.jiang2024.audit import dynamics_design
from attnlab.parts import register

REGIMES = ("harmful", "benign")
V_SCALARS = ("V_signal", "V_strong")
QK_LOGITS = (
    "qk_signal_signal",
    "qk_signal_strong",
    "qk_strong_strong",
    "qk_strong_signal",
    "qk_weak_signal",
    "qk_weak_strong",
)


class Spec(ExperimentSpec):
    regime: list[str] = Field(list(REGIMES), description="grid axis: which settings to run")
    mu_harmful: PositiveFloat = Field(1.0, description="‖μ‖ of the harmful setting")
    N_harmful: PositiveInt = Field(10, description="N of the harmful setting (even)")
    mu_benign: PositiveFloat = Field(50.0, description="‖μ‖ of the benign setting")
    N_benign: PositiveInt = Field(10, description="N of the benign setting (even)")
    onset_delta: PositiveFloat = Field(0.1, description="onset of V-scalars / QK logits: this change, in logit units")
    onset_attn: PositiveFloat = Field(0.02, description="onset of attention: this change of attention mass")
    alpha: float = Field(0.05, gt=0, lt=1, description="level of the sign tests")

    @field_validator("N_harmful", "N_benign")
    @classmethod
    def _even(cls, v):
        if v % 2:
            raise ValueError("must be even (class-balanced training set)")
        return v

    @field_validator("regime")
    @classmethod
    def _regimes(cls, v):
        bad = [r for r in v if r not in REGIMES]
        if bad:
            raise ValueError(f"unknown regime(s) {bad}; valid: {list(REGIMES)}")
        return [r for r in REGIMES if r in v]


# The released script's harmful setting; probes at every step for 50 steps, then every 5.
PAPER = dict(
    data={"M": 3, "d": 2048, "sigma_p": 0.05, "sigma_tilde_p": 1.0},
    model={"d_h": 1024, "d_v": 512, "init_scale": 32.0},
    train={
        "lr": 0.01,
        "max_steps": 500,
        "loss_threshold": 0.0,
        "log_every": 5,
        "log_dense_until": 50,
        "probes": "jiang2024",
    },
    reps=10,
)
# cpu: d = 256, d_h = 128, d_v = 64 (8× smaller); ‖μ‖ = 18 keeps the benign N·SNR² ≈ 5·10³.
CPU = dict(data={"d": 256}, model={"d_h": 128, "d_v": 64}, mu_benign=18.0)
SMOKE = dict(
    data={"d": 32, "n_test": 20},
    model={"d_h": 16, "d_v": 8},
    mu_benign=4.0,
    reps=2,
    train={"max_steps": 60, "log_every": 5, "log_dense_until": 10},
)


class Fig3(Experiment):
    id = "jiang2024-fig3"
    regime = "protocol"  # the paper's stated protocol (reduced grids below paper scale)
    title = "Jiang et al. 2024, Fig. 3: three-stage training dynamics, harmful vs benign"
    description = __doc__
    Spec = Spec
    scales = {"smoke": SMOKE, "cpu": CPU, "paper": {}}
    tags = ("regime",)
    assumptions = (
        "Benign setting: the harmful script setting with ‖μ‖ = 50 (paper scale) / 18 (cpu scale), N·SNR² ≈ 5·10³.",
        "cpu scale: d = 256, d_h = 128, d_v = 64 instead of 2048/1024/512.",
        "Onset of a group = first logged step at which a member moved by 0.1 (logit units; 0.02 of attention mass).",
    ) + common.ASSUMPTIONS

    audit = dynamics_design(REGIMES)
    controls = (
        Control(
            "as-stated",
            "positive",
            "cpu",
            (),
            {"sparse-benign": "pass", "sparse-harmful": "pass"},
            "the cpu design as it stands; its audit gives both sparse rules power 1.0",
        ),
        Control(
            "frozen-softmax",
            "negative",
            "cpu",
            ("model.tau=1e-6",),
            {"sparse-benign": "fail", "sparse-harmful": "fail"},
            "softmax temperature 10⁻⁶: the logits (and their gradients) are scaled to ~0, so attention stays "
            "uniform (1/M) and cannot concentrate on any token",
        ),
    )

    def defaults(self):
        return merge(common.DEFAULTS, PAPER)

    def cells(self, spec: Spec) -> list[dict]:
        variants = [
            ({"regime": r}, {"data.mu": getattr(spec, f"mu_{r}"), "data.N": getattr(spec, f"N_{r}")})
            for r in spec.regime
        ]
        return expand(spec, variants)

    def _traces(self, cols, regime):
        sel = cols["regime"] == regime
        t = np.asarray(cols["trace_step"][np.flatnonzero(sel)[0]], float)
        get = lambda name: np.stack([np.asarray(x, float) for x in cols[f"trace_{name}"][sel]])
        return t, get

    def analyse(self, cols, spec: Spec) -> Analysis:
        claims, summary = [], {}
        M = int(cols["data.M"][0])
        for regime in spec.regime:
            t, get = self._traces(cols, regime)
            sig, strong, weak_max = get("attn_signal_mean"), get("attn_strong_mean"), get("attn_weak_max_mean")
            dominant, other = (sig, strong) if regime == "benign" else (strong, sig)
            token = "signal" if regime == "benign" else "strong-noise"
            V = np.stack([get(n) for n in V_SCALARS], 1)  # (reps, 2, T)
            QK = np.stack([get(n) for n in QK_LOGITS], 1)  # (reps, 6, T)

            onset = {
                "V": _onsets(t, V, spec.onset_delta),
                "QK": _onsets(t, QK, spec.onset_delta),
                "attention": _onsets(t, dominant[:, None], spec.onset_attn),
            }
            half = {
                k: [theory.first_crossing(t, _largest(x), 0.5) for x in g]
                for k, g in (("V", V), ("QK", QK), ("attention", dominant[:, None]))
            }
            mu, N = getattr(spec, f"mu_{regime}"), getattr(spec, f"N_{regime}")
            snr = common.data.snr(mu, cols["data.sigma_p"][0], cols["data.d"][0])
            sel = cols["regime"] == regime
            summary[regime] = {
                "N·SNR²": float(N * snr**2),
                "final train loss (mean)": float(cols["train_loss"][sel].mean()),
                "final test loss (mean)": float(cols["test_loss"][sel].mean()),
                f"final attention on {token} (mean)": float(dominant[:, -1].mean()),
                "final attention on the other named token (mean)": float(other[:, -1].mean()),
                "final attention on the best weak-noise token (mean)": float(weak_max[:, -1].mean()),
                "largest |ΔV-scalar| (median)": float(np.median([np.abs(x - x[:, :1]).max() for x in V])),
                "largest |ΔQK logit| (median)": float(np.median([np.abs(x - x[:, :1]).max() for x in QK])),
                "onset steps": {k: [rounded(x) for x in v] for k, v in onset.items()},
                "half-change steps (run-length dependent, for reference)": half,
            }
            best_other = np.maximum(other[:, -1], weak_max[:, -1])
            sparse = rules.sign_test(
                dominant[:, -1] - best_other, alpha=spec.alpha, name=f"attention on {token} − best other token"
            )
            mean_dom = float(dominant[:, -1].mean())
            measured = sparse.measured | {
                f"attn_{token}": rounded(mean_dom),
                "attn_best_other": rounded(float(best_other.mean())),
                "threshold_1.25/M": rounded(1.25 / M),
            }
            outcome = rules.FAIL if mean_dom < 1.25 / M else sparse.outcome
            claims.append(
                Claim.of(
                    f"sparse-{regime}",
                    f"{regime} regime: query-averaged attention concentrates on the {token} token",
                    rules.Verdict(
                        outcome,
                        measured,
                        sparse.rule + f"; and mean ≥ 1.25/M = {1.25 / M:.3f}",
                        sparse.detail if mean_dom >= 1.25 / M else f"mean {mean_dom:.3f} < 1.25/M",
                    ),
                )
            )
            V_on, later = np.asarray(onset["V"]), np.minimum(onset["QK"], onset["attention"])
            with np.errstate(invalid="ignore"):
                diffs = np.where(np.isinf(V_on) & np.isinf(later), 0.0, later - V_on)  # ∞ vs ∞: a tie
            stages = rules.sign_test(diffs, alpha=spec.alpha, name="min(onset QK, onset attention) − onset V")
            med = {k: rounded(float(np.median(v))) for k, v in onset.items()}
            claims.append(
                Claim.of(
                    f"stages-{regime}",
                    f"{regime} regime: V-scalars start growing before the QK logits and before the attention moves",
                    rules.Verdict(
                        stages.outcome,
                        stages.measured | {f"median_onset_{k}": v for k, v in med.items()},
                        stages.rule,
                        stages.detail,
                    ),
                )
            )
        return Analysis(claims=claims, summary=summary)

    def figures(self, cols, spec: Spec, analysis: Analysis, out: Path) -> list[Path]:
        fig, axes = plt.subplots(
            len(spec.regime), 5, figsize=(17, 3.3 * len(spec.regime)), squeeze=False, constrained_layout=True
        )
        panels = (
            ("loss", (("train_loss", "train loss"), ("test_loss", "test loss"))),
            ("attention (sample 0)", (("attn_signal", "signal token"), ("attn_strong", "strong-noise token"))),
            ("V-scalars", (("V_signal", "μ₊ᵀW_V w_O"), ("V_strong", "ξ̃ᵀW_V w_O"))),
            (
                "QK logits, signal and strong-noise queries",
                (
                    ("qk_signal_signal", "μ₊ᵀW_QW_Kᵀμ₊"),
                    ("qk_signal_strong", "μ₊ᵀW_QW_Kᵀξ̃"),
                    ("qk_strong_strong", "ξ̃ᵀW_QW_Kᵀξ̃"),
                    ("qk_strong_signal", "ξ̃ᵀW_QW_Kᵀμ₊"),
                ),
            ),
            ("QK logits, weak-noise query", (("qk_weak_signal", "ξ_iᵀW_QW_Kᵀμ₊"), ("qk_weak_strong", "ξ_iᵀW_QW_Kᵀξ̃"))),
        )
        c = {k: cols[k][0] for k in ("data.d", "data.M", "model.d_h", "model.d_v", "train.lr", "model.init_scale")}
        for row, regime in zip(axes, spec.regime, strict=True):
            t, get = self._traces(cols, regime)
            s = analysis.summary[regime]
            onsets = {k: np.median([np.inf if x is None else x for x in v]) for k, v in s["onset steps"].items()}
            judged = {
                "attention (sample 0)": "attention",
                "V-scalars": "V",
                "QK logits, signal and strong-noise queries": "QK",
                "QK logits, weak-noise query": "QK",
            }
            for ax, (title, series) in zip(row, panels, strict=True):
                for name, label in series:
                    plots.band(ax, t, get(name), label)
                group = judged.get(title)
                if group and np.isfinite(onsets[group]):  # the onset the stages claim judges (median over repeats)
                    ax.axvline(onsets[group], color="black", lw=0.8, ls="--", label=f"{group} onset (median)")
                if title == "attention (sample 0)":
                    ax.axhline(1 / c["data.M"], color="grey", lw=0.8, ls=":", label="uniform 1/M")
                ax.set_title(title)
                ax.set_xscale("symlog", linthresh=10)  # the stages of the benign run fit in ~10 steps
                ax.set_xlim(0, t[-1])
                ax.set_xlabel("iteration (linear to 10, then log)")
                ax.legend(fontsize=7)
            row[0].set_ylabel(
                f"{regime}: ‖μ‖ = {getattr(spec, f'mu_{regime}'):g}, N = {getattr(spec, f'N_{regime}')}, "
                f"N·SNR² = {s['N·SNR²']:.3g}",
                fontsize=9,
            )
        fig.suptitle(
            f"{self.id}: d = {c['data.d']}, M = {c['data.M']}, d_h = {c['model.d_h']}, d_v = {c['model.d_v']}, "
            f"lr = {c['train.lr']:g}, init/{c['model.init_scale']:g}, mean ± std over {spec.reps * spec.seeds} repeats",
            fontsize=9,
        )
        return plots.save(fig, out, "fig3_dynamics")


def _onsets(t, runs, delta) -> list[float]:
    """Per repeat: first logged step at which any member of the group (rows of runs[i]) has
    moved from its step-0 value by ≥ delta; ∞ if none ever does."""
    out = []
    for x in runs:
        moved = np.any(np.abs(x - x[:, :1]) >= delta, axis=0)
        out.append(float(t[np.argmax(moved)]) if moved.any() else np.inf)
    return out


def _largest(series: np.ndarray) -> np.ndarray:
    """The series (row) whose largest change from step 0 is the largest."""
    return series[np.argmax(np.abs(series - series[:, :1]).max(axis=1))]


EXPERIMENT = register(Fig3())
