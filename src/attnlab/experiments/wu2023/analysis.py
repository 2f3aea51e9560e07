"""Analysis shared by the wu2023 training experiments (``wu2023-fig1``, ``-fig9``, ``-init``,
``-vit-mnist``): per-run quantities from the ``wu2023`` probe traces, the geometric-rate fit of
the loss, log–log slopes over repeats, the claim verdicts built on them, and plot helpers.

Per run (:func:`per_run`): λ_min(K₀), λ_max(K₀) (step-0 probes), the step ratio
γ_eff·λ_max(K₀)/N (stable while < 2 under the linearised dynamics r_{t+1} = (I − γ_eff K/N) r_t),
L_0, L_T, and the flag ``unstable`` (ratio above the bound, diverged, or L_T not below L_0);
flagged runs are left out of rate and drift fits.
"""

from __future__ import annotations

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa

from attnlab import rules
from attnlab.experiments.base import Claim, rounded

TRAIN = {"dtype": "float64", "probes": "wu2023", "log_every": 10, "log_dense_until": 10}
INITS = ("lecun", "he", "ntk")


# ---------------------------------------------------------------- per-run quantities


def trace(cols, name: str) -> np.ndarray:
    """(runs, logged steps) of a probe."""
    return np.stack([np.asarray(x, float) for x in cols[f"trace_{name}"]])


def per_run(cols, unstable_at: float) -> dict[str, np.ndarray]:
    """Step-0 λ_min(K₀), λ_max(K₀), γ_eff·λ_max(K₀)/N, initial and final loss, and the flags."""
    lam_min, lam_max = trace(cols, "lambda_min")[:, 0], trace(cols, "lambda_max")[:, 0]
    ratio = cols["train.lr"].astype(float) * lam_max / cols["data.N"].astype(float)
    L0, LT = trace(cols, "train_loss")[:, 0], cols["train_loss"].astype(float)
    diverged = cols["status"] == "diverged"
    with np.errstate(invalid="ignore"):
        worse = ~(LT < L0)  # NaN counts as worse
        flagged = ~(ratio <= unstable_at) | diverged | worse
    return {"lambda_min_0": lam_min, "lambda_max_0": lam_max, "step_ratio": ratio, "loss_0": L0, "loss_T": LT,
            "diverged": diverged, "worse": worse, "unstable": flagged}  # fmt: skip


def add_run_columns(table: pa.Table, unstable_at: float) -> pa.Table:
    """The results table with the per-run quantities of :func:`per_run` as columns."""
    from attnlab.experiments.base import table_columns

    for k, v in per_run(table_columns(table), unstable_at).items():
        if k not in table.column_names:
            table = table.append_column(k, pa.array(v))
    return table


def rate_fit(t: np.ndarray, L: np.ndarray, floor: float, t_from: float) -> tuple[float, float, int]:
    """(ρ, R², points) of log L_t = a + b·t, ρ = e^b, over the logged t ≥ t_from up to the last
    point at which L reaches a new lowest value, before the first point that is not finite or
    falls below floor·L_0 (bumps on the way stay in; NaN with fewer than 3 points)."""
    t, L = np.asarray(t, float), np.asarray(L, float)
    above = np.isfinite(L) & (L > floor * L[0])
    stop = int(np.argmin(above)) if not above.all() else len(L)
    best = np.minimum.accumulate(np.where(np.isfinite(L), L, np.inf))
    new_low = np.r_[True, L[1:] < best[:-1]]
    end = int(np.flatnonzero(new_low[:stop])[-1]) + 1 if stop > 0 else 0
    s = (np.arange(len(L)) < end) & (t >= t_from) & above
    if s.sum() < 3:
        return np.nan, np.nan, int(s.sum())
    x, y = t[s], np.log(L[s])
    b, a = np.polyfit(x, y, 1)
    r2 = 1 - np.sum((y - a - b * x) ** 2) / max(np.sum((y - y.mean()) ** 2), 1e-300)
    return float(np.exp(b)), float(r2), int(s.sum())


def rate_fits(t, L, ok, floor: float, t_from: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per run (rows of L): ρ and R² of :func:`rate_fit` from ``t_from`` (NaN where not ``ok``),
    its fit points, and the R² of the same fit from epoch 0 (NaN where not ``ok``)."""
    fits = np.array([rate_fit(t, x, floor, t_from) for x in L]).reshape(-1, 3)
    rho, r2, npts = np.where(ok, fits[:, 0], np.nan), np.where(ok, fits[:, 1], np.nan), fits[:, 2]
    whole = np.array([rate_fit(t, x, floor, 0)[1] if o else np.nan for x, o in zip(L, ok, strict=True)])
    return rho, r2, npts, whole


def repeat_ids(cols, keys=("block", "rep")) -> np.ndarray:
    return np.array(["/".join(str(cols[k][i]) for k in keys) for i in range(len(cols["block"]))])


def loglog_slopes(x, y, repeat) -> np.ndarray:
    """One least-squares slope of log y on log x per repeat (≥ 2 distinct x with finite y > 0)."""
    x, y, repeat = np.asarray(x, float), np.asarray(y, float), np.asarray(repeat)
    out = []
    for r in np.unique(repeat):
        s = (repeat == r) & np.isfinite(y) & (y > 0) & (x > 0)
        if len(np.unique(x[s])) >= 2:
            out.append(np.polyfit(np.log(x[s]), np.log(y[s]), 1)[0])
    return np.array(out, float)


def slope_estimate(x, y, repeat) -> dict:
    slopes = loglog_slopes(x, y, repeat)
    m, lo, hi, sd = rules.t_interval(slopes)
    return {"slope": m, "lo": lo, "hi": hi, "sd": sd, "per_repeat": slopes}


def slope_measured(est: dict) -> dict:
    return {"slope": rounded(est["slope"]), "ci95": [rounded(est["lo"]), rounded(est["hi"])],
            "repeats": len(est["per_repeat"])}  # fmt: skip


def below_zero(est: dict, name: str) -> rules.Verdict:
    """The interval of a slope lies below 0 → pass; above 0 → fail; else inconclusive."""
    rule = f"95 % t interval (over repeats) of the log–log slope of {name} against d_m lies below 0; fail if above"
    m = slope_measured(est)
    if not (np.isfinite(est["lo"]) and np.isfinite(est["hi"])):
        return rules.Verdict(rules.INCONCLUSIVE, m, rule, "no interval: fewer than 2 repeats spanning 2 widths")
    outcome = rules.PASS if est["hi"] < 0 else rules.FAIL if est["lo"] > 0 else rules.INCONCLUSIVE
    return rules.Verdict(outcome, m, rule)


def all_of(verdicts: dict[str, rules.Verdict]) -> rules.Verdict:
    """pass if every verdict passes, fail if any fails, else inconclusive."""
    outs = [v.outcome for v in verdicts.values()]
    outcome = rules.FAIL if rules.FAIL in outs else rules.PASS if all(o == rules.PASS for o in outs) else (
        rules.INCONCLUSIVE)  # fmt: skip
    rule = " and ".join(f"[{k}] {v.rule}" for k, v in verdicts.items())
    detail = "; ".join(f"{k}: {v.detail}" for k, v in verdicts.items() if v.detail)
    return rules.Verdict(outcome, {k: v.measured for k, v in verdicts.items()}, rule, detail)


def stability_verdict(r: dict, unstable_at: float, share_min: float) -> rules.Verdict:
    """Among the runs predicted stable (ratio < unstable_at), the share that trained stably."""
    with np.errstate(invalid="ignore"):
        pred = r["step_ratio"] < unstable_at
    ok = pred & ~r["diverged"] & ~r["worse"]
    n, k = int(pred.sum()), int(ok.sum())
    rule = (f"share of the runs with γ_eff·λ_max(K₀)/N < {unstable_at:g} that neither diverged nor ended above "
            f"their initial loss ≥ {share_min:g}; fail below")  # fmt: skip
    with np.errstate(invalid="ignore"):
        above = ~pred
    measured = {"ok": k, "n": n, "share": rounded(k / n) if n else None, "flagged": int(r["unstable"].sum()),
                "predicted_unstable": int(above.sum()), "predicted_unstable_diverged": int((above & r["diverged"]).sum()),
                "max_ratio": rounded(float(np.nanmax(r["step_ratio"])) if np.isfinite(r["step_ratio"]).any() else np.nan)}  # fmt: skip
    if n == 0:
        return rules.Verdict(rules.INCONCLUSIVE, measured, rule, "no run is predicted stable")
    if k / n >= share_min:
        return rules.Verdict(rules.PASS, measured, rule)
    return rules.Verdict(rules.FAIL, measured, rule, f"{n - k} of {n} runs predicted stable did not train stably")


def linear_verdict(rho: np.ndarray, r2: np.ndarray, r2_min: float) -> rules.Verdict:
    fit = np.isfinite(rho) & np.isfinite(r2)
    rule = f"every fitted geometric rate ρ < 1 and the median R² of the log-linear fits ≥ {r2_min:g}"
    measured = {"fitted_runs": int(fit.sum()), "max_rho": rounded(rho[fit].max(), 6) if fit.any() else None,
                "median_r2": rounded(np.median(r2[fit])) if fit.any() else None}  # fmt: skip
    if not fit.any():
        return rules.Verdict(rules.INCONCLUSIVE, measured, rule, "no stable run with a fit")
    bad = int(np.sum(rho[fit] >= 1))
    if bad:
        return rules.Verdict(rules.FAIL, measured, rule, f"{bad} run(s) with ρ ≥ 1 (the loss does not decay)")
    if np.median(r2[fit]) < r2_min:
        return rules.Verdict(rules.FAIL, measured, rule, "the loss is not log-linear in the epochs")
    return rules.Verdict(rules.PASS, measured, rule)


def linear_claim(statement: str, rho: np.ndarray, r2: np.ndarray, spec, T: float) -> Claim:
    """The claim that the training loss decays geometrically, judged by :func:`linear_verdict`."""
    return Claim.of("linear", statement, linear_verdict(rho, r2, spec.r2_min),
                    f"fit over epochs ≥ {spec.fit_from * T:g} up to the last new low of the loss above "
                    f"{spec.floor:g}·L_0; unflagged runs only")  # fmt: skip


def stability_claim(r: dict, spec) -> Claim:
    return Claim.of("stability", f"every run with γ_eff·λ_max(K₀)/N < {spec.unstable_at:g} trains stably",
                    stability_verdict(r, spec.unstable_at, spec.stable_share))  # fmt: skip


def paired(cols, value, a, b, keys=("model.d_m", "block", "rep"), where=None, by="model.init") -> np.ndarray:
    """value[b] − value[a] over the cells (among ``where``) with ``by`` = a and b (inits by
    default) that share ``keys`` (matched cells share those coordinates, not their draws: every
    field is part of a cell's key)."""
    where = np.ones(len(value), bool) if where is None else np.asarray(where, bool)
    key = lambda i: tuple(cols[k][i] for k in keys)
    sel = {name: {key(i): value[i] for i in np.flatnonzero(where & (cols[by] == name))} for name in (a, b)}
    common = sorted(set(sel[a]) & set(sel[b]))
    return np.array([sel[b][k] - sel[a][k] for k in common], float)


def speed_verdict(cols, speed, level: float, keys=("model.d_m", "block", "rep"), where=None) -> rules.Verdict:
    """LeCun and He converge faster than NTK init: for each, a paired one-sided sign test of
    speed_ntk − speed_init > 0 over matched cells (speed = log(L_T/L_0), more negative = faster;
    ties and non-finite values count against), p < ``level``; pass if both pass, fail if either
    fails (:func:`all_of`)."""
    tests = {}
    for name in ("lecun", "he"):
        diffs = paired(cols, speed, name, "ntk", keys, where)
        tests[name] = rules.sign_test(diffs, alpha=level, name=f"log(L_T/L_0)_ntk − log(L_T/L_0)_{name}")
    return all_of(tests)


def lmin_claims(width, init, lam_min, repeat, w_min: int, lmin_margin, flat_margin) -> tuple[list[Claim], dict]:
    """Claims lmin-<init>: the log–log slope of λ_min(K₀) against d_m over the widths ≥ ``w_min``
    (one least-squares slope per repeat, 95 % t interval over repeats) lies inside ``lmin_margin``
    under lecun and he (∝ d_m) and inside ``flat_margin`` under ntk (flat); equivalence verdicts.
    Returns (claims, slope estimates per init)."""
    slopes, claims = {}, []
    for name in INITS:
        s = (init == name) & (width >= w_min)
        e = slopes[name] = slope_estimate(width[s], lam_min[s], repeat[s])
        margin = flat_margin if name == "ntk" else lmin_margin
        v = rules.equivalence(e["slope"], e["lo"], e["hi"], margin, "slope")
        v = rules.Verdict(v.outcome, v.measured | {"repeats": len(e["per_repeat"]), "widths_from": w_min},
                          v.rule, v.detail)  # fmt: skip
        what = "grows ∝ d_m" if name != "ntk" else "stays flat in d_m"
        claims.append(Claim.of(f"lmin-{name}", f"under {name} init λ_min(K₀) {what}", v,
                               f"log–log slope over d_m ≥ {w_min}, one slope per repeat"))  # fmt: skip
    return claims, slopes


def med(x) -> float | None:
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    return rounded(float(np.median(x)), 6) if len(x) else None


# ---------------------------------------------------------------- figures helpers


def logband(ax, t, runs, label, color=None, ls="-"):
    """Geometric mean ×/÷ geometric std over runs (rows); non-positive values are left out."""
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # epochs after every run diverged: all NaN
        lg = np.log(np.where(np.asarray(runs, float) > 0, runs, np.nan))
        m, s = np.nanmean(lg, 0), np.nanstd(lg, 0)
    (line,) = ax.plot(t, np.exp(m), ls, label=label, color=color, lw=1.4)
    ax.fill_between(t, np.exp(m - s), np.exp(m + s), color=line.get_color(), alpha=0.18, lw=0)


def colors(n):
    return plt.cm.viridis(np.linspace(0.05, 0.85, max(n, 1)))


