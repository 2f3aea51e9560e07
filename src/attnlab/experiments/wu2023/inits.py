"""LeCun / He against NTK initialisation (``wu2023-init``, Wu et al. 2023): LeCun, He and NTK init
(a grid axis over ``model.init``) at widths d_m, in the setting, probes and flags of ``wu2023-fig1``
(:mod:`.dynamics`, whose docstring follows this one in the description), two comparisons (tag
``compare``; their steps and draws: see ``assumptions``):
  gamma   one raw step for every init and width, the width-normalised step of the largest width,
          so LeCun is stable everywhere (He's kernel is a few times LeCun's: He at the largest
          width runs above ``unstable_at`` and is flagged);
  ratio   per (init, width) the step that puts γ·λ_max(K_0)/N at ``c``, calibrated on the
          ``gamma`` runs of that (init, width) (the calibration stage: λ_max(K_0) does not depend
          on the lr); a ``ratio`` run records its own realised ratio.
Claims (λ_min(K₀) and the init: one prediction, two checks; :func:`.analysis.lmin_claims`):
  lmin-lecun            the prediction, under LeCun init λ_min(K₀) grows ∝ d_m. Measured first: the
          whole kernel's log–log slope against d_m over the widths ≥ N (one slope per repeat, both
          comparisons' step-0 values, 95 % t interval); it is below 1 at these widths where the theory
          holds, λ_min(K₀) ≈ λ_min(K₀^{w_O}) + q with q the width-independent part of the W_Q, W_K,
          W_V blocks (measured in a pilot of K₀ spectra, N = 100: q ≈ 0.28, the block 0.0075 → 2.9
          from d_m = 128 to 4096, the whole kernel's slope 0.74). Judged: the slope of
          λ_min(K₀^{w_O}) (the output weights' block, K₀^{w_O} = H Hᵀ, a lower bound of λ_min(K₀):
          the other blocks are PSD) over the widths ≥ ``slope_from`` (default 10N; below N its rank
          ≤ d_m makes it 0, up to ≈ 10N its λ_min/d_m still rises), 95 % t interval inside
          ``lmin_margin`` [0.75, 1.25] (nearer ∝ d_m than the competitor ∝ d_m^{1/2}): pass inside,
          fail disjoint, else inconclusive. *Said openly:* this statistic was chosen after the whole
          kernel's slope from N was seen (0.71 and 0.64, inconclusive under the first rule), so the
          rule is post hoc in the ledger; H0 is a sub-linear law (λ_min ∝ d_m^{1/2}: the infinite-width
          Gram singular, only finite-width fluctuations), not "no growth", which the kernel's scale
          ∝ d_m excludes under LeCun.
  lmin-he               check (the construction): He's block a width-independent multiple of
          LeCun's (√2 on W_V, 2× the logits; ≈ 3 in the pilot): the per-repeat slope difference
          he − lecun inside ±``check_margin`` (0.25).
  lmin-ntk              check (the construction): K₀^{w_O} under NTK init is LeCun's / d_m (the same
          features, τ₁² = 1/d_m), so λ_min stays O(1) there: the per-repeat slope difference lecun −
          ntk inside 1 ± ``check_margin``; NTK init's whole-kernel slope reported.
  speed-gamma           LeCun and He converge faster than NTK init at the same γ: *descriptive*.
          The paired one-sided sign tests over matched (width, block, rep) cells of
          log(L_T/L_0)_ntk − log(L_T/L_0)_init > 0 are reported (outcome under ``rule_outcome``), not
          judged: LeCun/He's kernel is larger by the parameterisations' constant factor, which
          alone makes them faster at one γ whether or not λ_min(K_0) ∝ d_m (the audit's H0, a
          constant factor only, passes it); the width law is lmin-lecun's. A decidable
          form would test the growth of the paired gap with d_m.
  speed-ratio           the same at the same γ·λ_max(K_0)/N = c: the theory does not predict it;
          the claim states the same direction and gets its own measured verdict
  stability             as wu2023-fig1's, over every run of both comparisons
The first λ_min rule (the whole kernel from N, margins [0.7, 1.3]) was fixed before any init run; a
pilot of K_0 spectra alone (no training) was looked at before the cpu widths were picked; the rule
in force (the w_O block from 10N, H0 ∝ d_m^{1/2}) came after the cpu run (the ledger's history).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from pydantic import Field, PositiveFloat, PositiveInt

from attnlab import plots
from attnlab.errors import AttnlabError
from attnlab.experiments import wu2023 as common
from attnlab.experiments.base import Analysis, Claim, Experiment, rounded, staged
from attnlab.experiments.config import expand, merge
from attnlab.experiments.wu2023 import dynamics
from attnlab.experiments.wu2023.analysis import (
    INITS,
    TRAIN,
    add_run_columns,
    lmin_claims,
    logband,
    med,
    per_run,
    repeat_ids,
    slope_measured,
    speed_verdict,
    stability_verdict,
    trace,
)
from attnlab.experiments.wu2023.audit.inits import calibration, init_design
from attnlab.parts import register


class LminSpec(dynamics.Spec):
    """The λ_min claims' fields (wu2023-init, -encoder-mnist, -vit-mnist)."""

    slope_from: PositiveInt | None = Field(
        None, description="smallest width of the λ_min(K₀^{w_O}) slope fit (None: 10·N)"
    )
    lmin_margin: tuple[float, float] = Field(
        (0.75, 1.25),
        description="lmin-lecun: margin of the slope of λ_min(K₀^{w_O}) (1 ± ¼: nearer ∝ d_m than the "
        "competitor ∝ d_m^{1/2})",
    )
    check_margin: PositiveFloat = Field(
        0.25,
        description="lmin-he, lmin-ntk: half-width about 0 (he − lecun) and 1 (lecun − ntk) of the slope differences",
    )


class InitSpec(LminSpec):
    c: PositiveFloat = Field(1.0, description="γ·λ_max(K₀)/N of the 'ratio' comparison (stable below 2)")


SMOKE = dict(
    data={"N": 8, "n_test": 8},
    model={"d_m": [8, 16], "init": list(INITS)},
    train={"max_steps": 20, "log_every": 5, "log_dense_until": 5},
    reps=2,
)
CPU = dict(
    model={"d_m": [128, 256, 512, 1024, 2048, 4096], "init": list(INITS)},
    train={"max_steps": 100, "log_every": 10},
    reps=3,
)
PAPER = dict(model={"d_m": [128, 256, 512, 1024, 2048, 4096, 8192], "init": list(INITS)}, reps=5)


SPEED_GAMMA_WHY = (
    "at one γ LeCun/He's kernel is larger than NTK init's by the parameterisations' constant factor (the 1/√fan_in "
    "multipliers), which alone makes them faster whether or not λ_min(K₀) grows ∝ d_m (the audit's H0, a constant "
    "factor only, passed the sign test 1.0), so the direction is reported, not judged; the width law is judged by "
    "lmin-lecun; a decidable form would test the paired gap's growth with d_m (pairs over width, block, rep)"
)
SPEED_RATIO_WHY = (
    "at one γ·λ_max(K₀)/N the comparison is one of conditioning, λ_min/λ_max(K₀), on which the theory makes no "
    "prediction (it has no H1 to test: the audit, with an assumed size, gave the rule power 0.01), so the paired "
    "direction (pairs over width, block, rep) is reported as a measurement"
)


def calibrate(cols) -> dict[tuple[str, int], float]:
    """(init, d_m) -> median step-0 λ_max(K₀) over the runs given."""
    lam = trace(cols, "lambda_max")[:, 0]
    keys = list(zip(cols["model.init"], cols["model.d_m"].astype(int), strict=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all NaN: reported by the caller
        return {k: float(np.nanmedian(lam[[i for i, x in enumerate(keys) if x == k]])) for k in dict.fromkeys(keys)}


class InitComparison(Experiment):
    id = "wu2023-init"
    title = "Wu et al. 2023: LeCun / He against NTK initialisation (λ_min(K₀) and speed)"
    description = __doc__ + "\n" + dynamics.DOC  # the setting, probes and flags: wu2023-fig1's
    Spec = InitSpec
    scales = {"smoke": SMOKE, "cpu": CPU, "paper": PAPER}
    tags = ("compare",)
    # staged: the 'ratio' runs' lr comes from the calibration stage, answered by the kernel model
    audit = init_design(lambda spec: staged(INIT.stages(spec), calibration))
    assumptions = (
        (
            "Same γ: one raw lr = γ·16/max(d_m) for every init and width; same ratio: lr = c·N/λ̄_max(K₀) per (init, "
            "width), λ̄_max the median step-0 λ_max of the same-γ runs (their own draws: the tag is part of the key).",
            "Speed = log(L_T/L_0) at the last epoch; matched cells share (width, block, rep), not their draws.",
            "cpu scale: 100 epochs, widths 128 … 4096 (all ≥ N, the regime of the λ_min slope fit).",
        )
        + dynamics.Dynamics.assumptions[:1]
        + common.ASSUMPTIONS
    )

    def defaults(self):
        return merge(common.DEFAULTS, {"train": TRAIN | {"log_every": 20, "log_dense_until": 5}})

    def cells(self, spec: InitSpec) -> list[dict]:
        """The same-γ runs (the 'ratio' runs' lr comes from their kernels, once they have run)."""
        same = expand(spec, [({"compare": "gamma"}, {})])  # validated, typed cells
        lr = common.step(spec.gamma, max(c["model.d_m"] for c in same), spec.step_norm)
        return [c | {"train.lr": lr} for c in same]

    def stages(self, spec: InitSpec):
        same = self.cells(spec)
        lam = calibrate((yield same))
        bad = {k: v for k, v in lam.items() if not (np.isfinite(v) and v > 0)}
        if bad:
            raise AttnlabError(f"wu2023-init: no finite λ_max(K₀) to calibrate the 'ratio' step at (init, d_m) {bad}")
        ratio = [
            c | {"train.lr": spec.c * c["data.N"] / lam[(c["model.init"], c["model.d_m"])]}
            for c in expand(spec, [({"compare": "ratio"}, {})])
        ]
        return same + ratio

    def derive(self, table, spec: InitSpec):
        return add_run_columns(table, spec.unstable_at)

    def analyse(self, cols, spec: InitSpec) -> Analysis:
        r = per_run(cols, spec.unstable_at)
        width, init, cmp = cols["model.d_m"].astype(int), cols["model.init"], cols["compare"]
        with np.errstate(divide="ignore", invalid="ignore"):
            speed = np.log(r["loss_T"] / r["loss_0"])  # log(L_T/L_0): more negative = faster
        N = int(np.max(cols["data.N"]))
        w_min = spec.slope_from or 10 * N
        rep = repeat_ids(cols, ("compare", "block", "rep"))
        claims, slopes, total = lmin_claims(
            width, init, r["lambda_min_w_O_0"], r["lambda_min_0"], rep, w_min, N, spec.lmin_margin, spec.check_margin
        )
        per = {c: speed_verdict(cols, speed, spec.level, where=cmp == c) for c in ("gamma", "ratio")}
        for c, why in (("gamma", SPEED_GAMMA_WHY), ("ratio", SPEED_RATIO_WHY)):
            per[c] = per[c].reported(why)
        claims.append(
            Claim.of("speed-gamma", "LeCun and He init converge faster than NTK init at the same step γ", per["gamma"])
        )
        claims.append(
            Claim.of(
                "speed-ratio",
                f"LeCun and He init converge faster than NTK init at the same γ·λ_max(K₀)/N = {spec.c:g}",
                per["ratio"],
            )
        )
        claims.append(
            Claim.of(
                "stability",
                f"every run with γ·λ_max(K₀)/N < {spec.unstable_at:g} trains stably",
                stability_verdict(r, spec.unstable_at, spec.stable_share),
            )
        )
        table = {}
        for c in np.unique(cmp):
            for name in INITS:
                for w in np.unique(width):
                    s = (cmp == c) & (init == name) & (width == w)
                    if s.any():
                        table.setdefault(str(c), {}).setdefault(name, {})[int(w)] = {
                            "lr": med(cols["train.lr"][s].astype(float)),
                            "γ·λ_max(K₀)/N": med(r["step_ratio"][s]),
                            "λ_min(K₀)": med(r["lambda_min_0"][s]),
                            "λ_max(K₀)": med(r["lambda_max_0"][s]),
                            "L_T/L_0": med(np.exp(speed[s])),
                            "flagged": int(r["unstable"][s].sum()),
                        }
        summary = {
            f"λ_min(K₀^w_O) slopes (d_m ≥ {w_min})": {k: slope_measured(e) for k, e in slopes.items()},
            f"λ_min(K₀) slopes, every block (d_m ≥ {N}, descriptive)": {
                k: slope_measured(e) for k, e in total.items() if e["per_repeat"].size
            },
            "per comparison, init and width (medians)": table,
            "γ·λ_max(K₀)/N per run": {
                f"{c}/{i}/{w}/{b}/{p}": rounded(x)
                for c, i, w, b, p, x in zip(cmp, init, width, cols["block"], cols["rep"], r["step_ratio"], strict=True)
            },
        }
        return Analysis(claims=claims, summary=summary)

    def figures(self, cols, spec: InitSpec, analysis: Analysis, out: Path) -> list[Path]:
        r = per_run(cols, spec.unstable_at)
        width, init, cmp = cols["model.d_m"].astype(int), cols["model.init"], cols["compare"]
        t = np.asarray(cols["trace_step"][0], float)
        L = trace(cols, "train_loss")
        fig, axes = plt.subplots(1, 3, figsize=(15, 4), constrained_layout=True)
        colors = dict(zip(INITS, ("tab:blue", "tab:orange", "tab:green"), strict=True))
        slopes = next(v for k, v in analysis.summary.items() if k.startswith("λ_min(K₀^w_O) slopes"))
        ws = np.unique(width)
        for name in INITS:
            s = init == name
            if not s.any():
                continue
            med = lambda v, s=s: [np.nanmedian(v[s & (width == w)]) for w in ws]
            axes[0].plot(
                ws,
                med(r["lambda_min_w_O_0"]),
                "o-",
                color=colors[name],
                label=f"{name}: λ_min of the w_O block (slope {slopes[name]['slope']})",
            )
            axes[0].plot(ws, med(r["lambda_min_0"]), ":", color=colors[name], alpha=0.8, label=f"{name}: λ_min")
            axes[0].plot(ws, med(r["lambda_max_0"]), "s--", color=colors[name], alpha=0.6, label=f"{name}: λ_max")
            for c, ls in (("gamma", "o-"), ("ratio", "s--")):
                sc = s & (cmp == c)
                if sc.any():
                    q = [np.nanmedian(r["loss_T"][sc & (width == w)] / r["loss_0"][sc & (width == w)]) for w in ws]
                    axes[1].plot(ws, q, ls, color=colors[name], label=f"{name}, same {c}")
                    top = sc & (width == ws[-1])
                    logband(axes[2], t, L[top], f"{name}, same {c}", colors[name], "-" if c == "gamma" else "--")
        axes[0].set_title("NTK spectrum at init (median over runs)")
        axes[0].set_yscale("log")
        axes[1].set_title("final / initial training loss")
        axes[1].set_yscale("log")
        axes[2].set_title(f"training loss at d_m = {ws[-1]}")
        axes[2].set_yscale("log")
        axes[2].set_xlabel("epoch")
        for ax in axes[:2]:
            ax.set_xscale("log")
            ax.set_xlabel("width d_m")
        for ax in axes:
            ax.legend(fontsize=7)
        fig.suptitle(
            f"{self.id}: τ₀ = d_m^−{cols['model.alpha'][0]:g}, N = {cols['data.N'][0]}; same γ: lr = "
            f"{spec.gamma:g}·16/{ws.max()}; same ratio: γ·λ_max(K₀)/N = {spec.c:g}",
            fontsize=9,
        )
        return plots.save(fig, out, "init_comparison")


INIT = register(InitComparison())
