"""The (SNR, N) phase diagram shared by Fig. 1 (synthetic) and Fig. 2 (MNIST): its claims and
its heatmap, from per-run columns (N, SNR, test loss at the stopping step, status, block, rep).

Two quantities, and which is which:
  per run   success = test loss of one run < level; a logistic fit of P(success) models the
            chance that one run is below the level, i.e. where the *median* over runs crosses it.
            The slope, curvature and form claims use it (every run is a data point).
  mean      success = the *mean* test loss over the runs of a grid point (one block) < level:
            what a binarised panel shows, so a constant read off a paper's panel compares with
            the C fitted to it. The C claim uses it; the per-run C is reported beside it.

Claims (thresholds are Spec fields). Intervals are 95 %: with ``seeds`` = K ≥ 2 blocks, a t
interval (K − 1 df) over the per-block estimates; otherwise the bootstrap over cells.
  slope      the interval of the boundary slope in (log SNR, log N) lies inside ``slope_margin``
             (the theory says −2); fail if it lies outside; descriptive below ``slope_min_runs``
             runs (fig2: the MNIST boundary is shallow, steepness 2.15 against fig1's 12.4, and
             ``attnlab audit jiang2024-fig2`` gives the rule power 0.28 at its cpu design's 550
             runs, 0.56 at 1100, 0.98 at 2200 — 50 simulations each)
  curvature  the change of the boundary's local slope across the SNR span the boundary crosses
             inside the grid's N range lies inside ``curvature_margin``; descriptive (measured, not
             judged) below ``curvature_min_runs`` runs: ``attnlab audit jiang2024-fig1`` gives the
             rule power 0 at the cpu design (800 runs: the interval's half-width ≈ 0.75 exceeds the
             ±0.5 margin even for a straight boundary); a half-width ≤ 0.30, which gives power 0.8,
             needs ≈ 800·(0.75/0.30)² ≈ 5000 runs (the paper's grid has 10⁴)
  form       the free exponent p of N·SNR^p = C: its interval lies above 1.5 (closer to 2 than
             to 1); fail if below
  C          (only where the caller judges it) Ĉ of the mean quantity, slope fixed at −2, lies
             inside ``C_margin``
  benign     held out: Ĉ is fitted on the even repeats only (per-run quantity); among the odd
             repeats' cells with N·SNR² ≥ ``region_factor``·Ĉ, the share that reached the
             training threshold *and* has test loss < level is ≥ ``min_share``
  harmful    the same for N·SNR² ≤ Ĉ/``region_factor`` with test loss ≥ level
Diverged runs (non-finite loss) are left out of the fits and counted in the summary.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from attnlab import plots, rules, theory
from attnlab.experiments.base import Analysis, Claim, rounded

C_KEY = "C (mean quantity, slope fixed at −2)"


def underpowered(verdict: rules.Verdict, min_runs: int, runs: int, src: str) -> tuple[rules.Verdict, str]:
    """A rule the audit gives too little power below ``min_runs`` runs: reported as a measurement."""
    return rules.Verdict(rules.DESCRIPTIVE, verdict.measured, verdict.rule), (
        f"descriptive below {min_runs} runs (this run: {runs}): `attnlab audit` gives the rule a power below 0.8 "
        f"there; {src}"
    )


def blocks_interval(est: theory.Estimate, per_block: np.ndarray) -> tuple[float, float, float, str]:
    """(value, lo, hi, source): the t interval over seed blocks when there are ≥ 2, else the
    bootstrap's."""
    if np.isfinite(per_block).sum() >= 2:
        mean, lo, hi, _ = rules.t_interval(per_block)
        return mean, lo, hi, f"t interval over {int(np.isfinite(per_block).sum())} seed blocks"
    return est.value, est.lo, est.hi, f"bootstrap over cells ({est.n_boot} resamples)"


def analyse_phase(N, snr, test_loss, status, block, rep, spec, *, judge_C: bool, C_note: str = "") -> Analysis:
    """The claims of the module docstring from per-run columns. ``spec`` carries level, n_boot,
    seed, reps, slope_margin, curvature_margin, region_factor, min_share (and C_paper, C_margin
    when ``judge_C``); ``C_note`` says in the summary why C is not judged otherwise."""
    status = np.asarray(status)
    ok = status != "diverged"
    N = np.asarray(N).astype(float)[ok]
    snr = np.asarray(snr, float)[ok]
    test_loss, converged = np.asarray(test_loss, float)[ok], (status == "converged")[ok]
    block, rep = np.asarray(block)[ok], np.asarray(rep)[ok]
    success = test_loss < spec.level
    logN, logS = np.log(N), np.log(snr)
    n_boot, seed, claims = spec.n_boot, spec.seed, []
    summary = {
        "cells": len(N),
        "diverged (left out)": int(np.sum(~ok)),
        "reached train loss < threshold": float(converged.mean()),
        "success rate (per run)": float(success.mean()),
    }
    mixed = 0 < success.sum() < len(success)
    blocks = np.unique(block)

    def per_block(fn):
        return np.array([fn(block == b) for b in blocks]) if len(blocks) >= 2 else np.array([])

    # the mean quantity: one point per (SNR, N, block), success = mean test loss < level
    keys = np.stack([logS, logN, block], 1)
    pts, inv = np.unique(keys, axis=0, return_inverse=True)
    mean_loss = np.bincount(inv.ravel(), weights=test_loss) / np.bincount(inv.ravel())
    m_logS, m_logN, m_block, m_success = pts[:, 0], pts[:, 1], pts[:, 2], mean_loss < spec.level
    m_mixed = 0 < m_success.sum() < len(m_success)

    if mixed:
        slope = theory.boundary_slope(logS, logN, success, n_boot=n_boot, seed=seed)
        slope_b = per_block(lambda s: theory.boundary_slope(logS[s], logN[s], success[s], n_boot=0).value)
        curv = theory.boundary_curvature(logS, logN, success, n_boot=n_boot, seed=seed)
        curv_grid = theory.boundary_curvature(logS, logN, success, n_boot=n_boot, seed=seed, over="grid")
        curv_b = per_block(lambda s: theory.boundary_curvature(logS[s], logN[s], success[s], n_boot=0).value)
        expo = theory.free_exponent(logN, logS, success, n_boot=n_boot, seed=seed)
        expo_b = per_block(lambda s: theory.free_exponent(logN[s], logS[s], success[s], n_boot=0).p.value)
        C_run = theory.boundary_constant(logN + 2 * logS, success, n_boot=n_boot, seed=seed)
    else:
        slope = curv = curv_grid = C_run = theory.Estimate.missing()
        expo, slope_b, curv_b, expo_b = None, np.array([]), np.array([]), np.array([])
    if m_mixed:
        C_mean = theory.boundary_constant(m_logN + 2 * m_logS, m_success, n_boot=n_boot, seed=seed)
        C_mean_b = (
            np.array(
                [
                    theory.boundary_constant(
                        m_logN[m_block == b] + 2 * m_logS[m_block == b], m_success[m_block == b], n_boot=0
                    ).value
                    for b in blocks
                ]
            )
            if len(blocks) >= 2
            else np.array([])
        )
    else:
        C_mean, C_mean_b = theory.Estimate.missing(), np.array([])
    summary.update(
        slope_bootstrap=slope.as_dict(),
        curvature_bootstrap=curv.as_dict(),
        curvature_over_the_whole_grid=curv_grid.as_dict(),
        C_per_run=C_run.as_dict(1),
        C_mean_quantity=C_mean.as_dict(1),
        free_exponent=expo.as_dict() if expo else None,
        per_block={
            "slope": slope_b.tolist(),
            "curvature": curv_b.tolist(),
            "p": expo_b.tolist(),
            "C_mean_quantity": C_mean_b.tolist(),
        },
    )
    none = "no boundary inside the grid: every cell succeeded or every cell failed"

    v, lo, hi, src = blocks_interval(slope, slope_b)
    slope_v, src = rules.equivalence(v, lo, hi, spec.slope_margin, "slope"), src if mixed else none
    if len(N) < spec.slope_min_runs:
        slope_v, src = underpowered(slope_v, spec.slope_min_runs, len(N), src)
    claims.append(
        Claim.of("slope", "the test-loss boundary has slope −2 in log N vs log SNR (N ∝ SNR⁻²)", slope_v, src)
    )
    v, lo, hi, src = blocks_interval(curv, curv_b)
    curvature = rules.equivalence(v, lo, hi, spec.curvature_margin, "slope change across the boundary's SNR span")
    src = src if mixed and len(np.unique(logS)) >= 3 else none if not mixed else "needs ≥ 3 SNR values"
    if len(N) < spec.curvature_min_runs:  # decided by the design, before the run: see the docstring
        curvature, src = underpowered(curvature, spec.curvature_min_runs, len(N), src)
    claims.append(
        Claim.of(
            "curvature",
            "the boundary is a straight line in (log SNR, log N): its slope does not drift across SNR",
            curvature,
            src,
        )
    )
    if expo is not None:
        v, lo, hi, src = blocks_interval(expo.p, expo_b)
        outcome = rules.PASS if lo > 1.5 else rules.FAIL if hi < 1.5 else rules.INCONCLUSIVE
        form = rules.Verdict(
            outcome,
            {"p": rounded(v), "ci95": [rounded(lo), rounded(hi)], "lr_p_value": expo.as_dict()["p_value"]},
            "95% interval of the free exponent p of N·SNR^p = C lies above 1.5 "
            "(closer to 2 than to 1); fail if it lies below 1.5",
        )
    else:
        form, src = rules.Verdict(rules.INCONCLUSIVE, {}, "free exponent p above 1.5"), none
    claims.append(Claim.of("form", "the boundary is N·SNR² = C rather than N·SNR = C", form, src))

    v, lo, hi, src = blocks_interval(C_mean, C_mean_b)
    summary[C_KEY] = {"value": rounded(v, 1), "ci95": [rounded(lo, 1), rounded(hi, 1)], "from": src}
    if judge_C:
        claims.append(
            Claim.of(
                "C",
                f"the boundary constant C of N·SNR² = C (mean test loss over runs, as in panel b) agrees "
                f"with the paper's {spec.C_paper:g}",
                rules.equivalence(v, lo, hi, spec.C_margin, "C"),
                src if m_mixed else none,
            )
        )
    else:
        summary["C claim"] = C_note

    # benign / harmful, held out: Ĉ from the even repeats, judged on the odd ones
    fit_half = rep % 2 == 0 if spec.reps >= 2 else block % 2 == 0 if len(blocks) >= 2 else np.arange(len(N)) % 2 == 0
    C_fit = (
        theory.boundary_constant((logN + 2 * logS)[fit_half], success[fit_half], n_boot=0).value
        if 0 < success[fit_half].sum() < fit_half.sum()
        else np.nan
    )
    prod = N * snr**2
    summary["C fitted on the fit half (for the regions)"] = rounded(C_fit, 1)
    f = spec.region_factor
    for name, region, good, words in (
        ("benign", prod >= f * C_fit, test_loss < spec.level, f"N·SNR² ≥ {f:g}Ĉ: test loss < {spec.level:g}"),
        ("harmful", prod <= C_fit / f, test_loss >= spec.level, f"N·SNR² ≤ Ĉ/{f:g}: test loss ≥ {spec.level:g}"),
    ):
        sel = region & ~fit_half
        k, n = int(np.sum(sel & good & converged)), int(np.sum(sel))
        verdict = rules.held_out(k, n, spec.min_share, name=f"held-out {name}-region cells")
        claims.append(
            Claim.of(
                name,
                f"held-out cells {'well above' if name == 'benign' else 'well below'} the fitted curve overfit "
                f"{'benignly' if name == 'benign' else 'harmfully'} ({words}, after reaching the training threshold)",
                verdict,
                "" if np.isfinite(C_fit) else "no boundary in the fit half",
            )
        )
    return Analysis(claims=claims, summary=summary)


def heatmap(
    snr,
    N,
    test_loss,
    spec,
    analysis: Analysis,
    out: Path,
    name: str,
    suptitle: str,
    xlabel: str,
    C_theory: float | None = None,
) -> list[Path]:
    """Panel (a): mean test loss over (SNR, N) on real coordinates; panel (b): the same binarised
    at ``spec.level``. Both carry the fitted N·SNR² = Ĉ (mean quantity), the empirical level
    contour and, with ``C_theory``, the theory curve N·SNR² = C_theory."""
    # diverged runs have NaN losses: grid_mean skips them, a grid point with none left is NaN
    xs, ys, Z = plots.grid_mean(np.asarray(snr, float), np.asarray(N).astype(float), np.asarray(test_loss, float))
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4), constrained_layout=True)
    xe, ye = plots.edges(xs, log=True), plots.edges(ys)
    x_line = np.geomspace(xe[0], xe[-1], 200)
    C_fit = analysis.summary[C_KEY]["value"]
    for ax, panel in zip(axes, ("a", "b"), strict=True):
        if panel == "a":
            vmax = max(1.0, float(np.nanpercentile(Z, 95))) if np.isfinite(Z).any() else 1.0
            m = ax.pcolormesh(xe, ye, Z, cmap="viridis", vmin=0, vmax=vmax, shading="flat")
            fig.colorbar(m, ax=ax, label="test loss (mean over runs)")
            ax.set_title("(a) test loss at the stopping step")
        else:
            binary = np.where(np.isfinite(Z), (Z < spec.level).astype(float), np.nan)
            ax.set_facecolor("tab:red")  # a grid point whose every run diverged
            m = ax.pcolormesh(xe, ye, binary, cmap="gray", vmin=0, vmax=1, shading="flat")
            ax.set_title(f"(b) mean test loss < {spec.level:g} (white)")
        if C_theory is not None:
            ax.plot(x_line, C_theory / x_line**2, "r-", lw=1.8, label=f"theory N·SNR² = {C_theory:g}")
        if C_fit:
            ax.plot(x_line, C_fit / x_line**2, "--", color="orange", lw=1.5, label=f"fit N·SNR² = {C_fit:.0f}")
        if len(xs) > 1 and len(ys) > 1 and np.nanmin(Z) < spec.level < np.nanmax(Z):
            ax.contour(xs, ys, Z, levels=[spec.level], colors="cyan", linewidths=1.2)
            ax.plot([], [], color="cyan", label=f"empirical {spec.level:g} contour")
        plots.log_x(ax)
        ax.set_xlim(xe[0], xe[-1])
        ax.set_ylim(ye[0], ye[-1])
        ax.set_xlabel(xlabel)
        ax.set_ylabel("N (training samples)")
        ax.legend(loc="upper right", fontsize=7, framealpha=0.8)
    fig.suptitle(suptitle, fontsize=9)
    return plots.save(fig, out, name)
