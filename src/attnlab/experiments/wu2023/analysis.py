"""Analysis shared by the wu2023 training experiments (``wu2023-fig1``, ``-fig9``, ``-init``,
``-encoder-mnist``): per-run quantities from the ``wu2023`` probe traces, the geometric-rate fit of
the loss, log–log slopes over repeats, the claim verdicts built on them, and plot helpers.

Per run (:func:`per_run`): λ_min(K₀), λ_max(K₀) (step-0 probes), the step ratio
γ_eff·λ_max(K₀)/N (stable while < 2 under the linearised dynamics r_{t+1} = (I − γ_eff K/N) r_t;
under ``train.reduction = sum`` the step follows ½·Σ (f − y)², r_{t+1} = (I − γ_eff K) r_t, and the
ratio is γ_eff·λ_max(K₀)), L_0, L_T, and the flag ``unstable`` (ratio above the bound, diverged,
or L_T not below L_0); flagged runs are left out of rate and drift fits.
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
LOG_LR = float(np.log(32))  # "strong evidence" (rules.likelihood_ratio)
LOG_DROP = float(np.log(5))  # linear: a run is decided when its loss falls fivefold over its window (or should)


# ---------------------------------------------------------------- per-run quantities


def trace(cols, name: str) -> np.ndarray:
    """(runs, logged steps) of a probe; a run logged at fewer steps (a 0-step kernel cell) is
    padded with NaN."""
    rows = [np.asarray(x, float) for x in cols[f"trace_{name}"]]
    n = max(len(x) for x in rows)
    return np.stack([np.pad(x, (0, n - len(x)), constant_values=np.nan) for x in rows])


def select_runs(cols: dict, mask: np.ndarray) -> dict:
    """The columns of the runs in ``mask``."""
    return {k: np.asarray(v)[mask] if np.ndim(v) and len(v) == len(mask) else v for k, v in cols.items()}


def gain(cols) -> np.ndarray:
    """Per run, the factor g of the linearised step r_{t+1} = (I − g·K) r_t: γ_eff/N under ½·mean
    (f − y)², γ_eff under ½·Σ (``train.reduction = sum``; a column absent at its default, mean)."""
    lr, N = cols["train.lr"].astype(float), cols["data.N"].astype(float)
    red = cols.get("train.reduction")
    return lr / N if red is None else np.where(np.asarray(red) == "sum", lr, lr / N)


def trained(cols) -> np.ndarray:
    """The runs that trained (a 0-step cell only measures K₀)."""
    if "train.max_steps" in cols:
        return np.asarray(cols["train.max_steps"]) > 0
    return np.ones(len(cols["train_loss"]), bool)


def width_key(cols) -> str:
    """The width's column: ``model.d_m`` of the wu2023 encoder, ``model.D`` of the ViT."""
    return "model.d_m" if "model.d_m" in cols else "model.D"


def width_of(cols) -> np.ndarray:
    """The width of every run (d_m, or the ViT's D)."""
    return np.asarray(cols[width_key(cols)]).astype(int)


def alpha_of(cols) -> np.ndarray:
    """τ₀'s α of every run; a ViT cell leaves α = ½ (timm's) out (its id stays that of earlier
    cells), so a missing or null α is ½."""
    a = cols["model.alpha"] if "model.alpha" in cols else [None] * len(cols["train_loss"])
    return np.array([0.5 if v is None else v for v in a], float)


def per_run(cols, unstable_at: float) -> dict[str, np.ndarray]:
    """Step-0 λ_min(K₀), λ_max(K₀), λ_min of the w_O block K₀^{w_O}, the step ratio g·λ_max(K₀)
    (:func:`gain`: γ_eff·λ_max(K₀)/N under mean, γ_eff·λ_max(K₀) under sum), initial and final
    loss, and the flags."""
    lam_min, lam_max = trace(cols, "lambda_min")[:, 0], trace(cols, "lambda_max")[:, 0]
    ratio = gain(cols) * lam_max
    L0, LT = trace(cols, "train_loss")[:, 0], cols["train_loss"].astype(float)
    diverged = cols["status"] == "diverged"
    with np.errstate(invalid="ignore"):
        worse = ~(LT < L0)  # NaN counts as worse
        flagged = ~(ratio <= unstable_at) | diverged | worse
    # λ_min of the w_O block: NaN for runs stored before that probe existed
    lam_w_O = trace(cols, "lambda_min_w_O")[:, 0] if "trace_lambda_min_w_O" in cols else np.full(len(ratio), np.nan)
    return {
        "lambda_min_0": lam_min,
        "lambda_max_0": lam_max,
        "lambda_min_w_O_0": lam_w_O,
        "step_ratio": ratio,
        "loss_0": L0,
        "loss_T": LT,
        "diverged": diverged,
        "worse": worse,
        "unstable": flagged,
    }


def add_run_columns(table: pa.Table, unstable_at: float) -> pa.Table:
    """The results table with the per-run quantities of :func:`per_run` as columns."""
    from attnlab.experiments.pipeline import table_columns

    for k, v in per_run(table_columns(table), unstable_at).items():
        if k not in table.column_names:
            table = table.append_column(k, pa.array(v))
    return table


def fit_window(t: np.ndarray, L: np.ndarray, floor: float, t_from: float) -> np.ndarray:
    """The logged points of a loss curve a rate is fitted on: t ≥ t_from, up to the last point at
    which L reaches a new lowest value, before the first point that is not finite or falls below
    floor·L_0 (bumps on the way stay in)."""
    t, L = np.asarray(t, float), np.asarray(L, float)
    above = np.isfinite(L) & (L > floor * L[0])
    stop = int(np.argmin(above)) if not above.all() else len(L)
    best = np.minimum.accumulate(np.where(np.isfinite(L), L, np.inf))
    new_low = np.r_[True, L[1:] < best[:-1]]
    end = int(np.flatnonzero(new_low[:stop])[-1]) + 1 if stop > 0 else 0
    return (np.arange(len(L)) < end) & (t >= t_from) & above


def rate_fit(t: np.ndarray, L: np.ndarray, floor: float, t_from: float) -> tuple[float, float, int]:
    """(ρ, R², points) of log L_t = a + b·t, ρ = e^b, over :func:`fit_window` (NaN with fewer
    than 3 points)."""
    t, L = np.asarray(t, float), np.asarray(L, float)
    s = fit_window(t, L, floor, t_from)
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


def at_matched_loss(L: np.ndarray, traces: dict[str, np.ndarray], sel: np.ndarray) -> tuple[float, dict]:
    """Probe values read where every run of ``sel`` has trained as far: at c = max over those runs of
    min_t L_t/L_0 (the loss ratio the slowest of them reaches), each run's value at its first
    logged epoch with L_t/L_0 ≤ c. Read at T instead, a wide run (slower per epoch under a step
    ∝ 1/d_m) is compared while still under-trained. Returns (c, name -> per-run values, NaN
    outside ``sel``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = L / L[:, :1]
    ratio = np.where(np.isfinite(ratio), ratio, np.inf)
    if not sel.any():
        return float("nan"), {k: np.full(len(L), np.nan) for k in traces}
    c = float(np.max(ratio[sel].min(1)))
    first = np.argmax(ratio <= c, axis=1)
    rows = np.arange(len(L))
    return c, {k: np.where(sel, v[rows, first], np.nan) for k, v in traces.items()}


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
    return {
        "slope": rounded(est["slope"]),
        "ci95": [rounded(est["lo"]), rounded(est["hi"])],
        "repeats": len(est["per_repeat"]),
    }


def below_zero(est: dict, name: str, bound: float = 0.0) -> rules.Verdict:
    """The interval of a slope lies below ``bound`` (0: the sign only) → pass; above → fail; else
    inconclusive."""
    rule = (
        f"95 % t interval (over repeats) of the log–log slope of {name} against d_m lies below {bound:g}; fail if above"
    )
    m = slope_measured(est) | ({"bound": bound} if bound else {})
    if not (np.isfinite(est["lo"]) and np.isfinite(est["hi"])):
        return rules.Verdict(rules.INCONCLUSIVE, m, rule, "no interval: fewer than 2 repeats spanning 2 widths")
    outcome = rules.PASS if est["hi"] < bound else rules.FAIL if est["lo"] > bound else rules.INCONCLUSIVE
    return rules.Verdict(outcome, m, rule)


def all_of(verdicts: dict[str, rules.Verdict]) -> rules.Verdict:
    """pass if every verdict passes, fail if any fails, else inconclusive."""
    outs = [v.outcome for v in verdicts.values()]
    outcome = (
        rules.FAIL if rules.FAIL in outs else rules.PASS if all(o == rules.PASS for o in outs) else (rules.INCONCLUSIVE)
    )
    rule = " and ".join(f"[{k}] {v.rule}" for k, v in verdicts.items())
    detail = "; ".join(f"{k}: {v.detail}" for k, v in verdicts.items() if v.detail)
    return rules.Verdict(outcome, {k: v.measured for k, v in verdicts.items()}, rule, detail)


def stability_verdict(r: dict, unstable_at: float, share_min: float, probe_min: int = 3) -> rules.Verdict:
    """Among the runs predicted stable (ratio < unstable_at), the share that trained stably: below
    ``share_min`` → fail. Otherwise descriptive when fewer than ``probe_min`` of them run at a
    ratio ≥ unstable_at/2 (below half the bound every step is stable under the bound and under a
    bound half as large, mean (f − y)² without the ½, so such a design cannot test the bound),
    else pass."""
    with np.errstate(invalid="ignore"):
        pred = r["step_ratio"] < unstable_at
        probe = pred & (r["step_ratio"] >= unstable_at / 2)
    ok = pred & ~r["diverged"] & ~r["worse"]
    n, k = int(pred.sum()), int(ok.sum())
    rule = (
        f"share of the runs with γ_eff·λ_max(K₀)/N < {unstable_at:g} that neither diverged nor ended above "
        f"their initial loss ≥ {share_min:g}; fail below"
    )
    with np.errstate(invalid="ignore"):
        above = ~pred
    measured = {
        "ok": k,
        "n": n,
        "share": rounded(k / n) if n else None,
        "flagged": int(r["unstable"].sum()),
        "predicted_unstable": int(above.sum()),
        "predicted_unstable_diverged": int((above & r["diverged"]).sum()),
        "max_ratio": rounded(float(np.nanmax(r["step_ratio"])) if np.isfinite(r["step_ratio"]).any() else np.nan),
    }
    if n == 0:
        return rules.Verdict(rules.INCONCLUSIVE, measured, rule, "no run is predicted stable")
    measured["runs_in_upper_half"] = int(probe.sum())
    if k / n < share_min:  # a run below the bound that did not train speaks against the claim at any design
        return rules.Verdict(rules.FAIL, measured, rule, f"{n - k} of {n} runs predicted stable did not train stably")
    if probe.sum() < probe_min:
        return rules.Verdict(
            rules.DESCRIPTIVE,
            measured,
            rule,
            f"{int(probe.sum())} run(s) at γ_eff·λ_max(K₀)/N in [{unstable_at / 2:g}, {unstable_at:g}): "
            f"below {unstable_at / 2:g} a bound half as large predicts the same stable runs, so the "
            f"design cannot test the bound; decided from {probe_min} runs in that range (a larger γ)",
        )
    return rules.Verdict(rules.PASS, measured, rule)


def linearised_rate(cols) -> tuple[np.ndarray, np.ndarray]:
    """Per run, (ρ_lin at K₀, ρ_lin of the slowest kernel of the run): ρ_lin = (1 − g·λ_min(K_t))²
    (g = :func:`gain`, γ_eff/N under mean) at step 0 and at the smallest λ_min(K_t) over the logged
    steps (NaN where λ_min is not recorded)."""
    lam = trace(cols, "lambda_min")
    g = gain(cols)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN traces (diverged runs)
        slowest = np.nanmin(np.where(np.isfinite(lam), lam, np.nan), axis=1)
    return (1 - g * lam[:, 0]) ** 2, (1 - g * slowest) ** 2


def linear_runs(t, L, ok, floor: float, t_from: float) -> dict[str, np.ndarray]:
    """Per run (rows of L, NaN where not ``ok`` or fewer than 3 points): the fitted rate ρ, the
    log-likelihood ratio of linear convergence over a power law (:func:`attnlab.theory.rate_forms`)
    on the run's :func:`fit_window`, the fall of log L over the window and the window's length."""
    from attnlab import theory

    t = np.asarray(t, float)
    out = {k: np.full(len(L), np.nan) for k in ("rho", "log_lr", "drop", "span")}
    for i, (x, o) in enumerate(zip(L, ok, strict=True)):
        s = fit_window(t, x, floor, t_from)
        if o and s.sum() >= 3:
            y = np.asarray(x, float)[s]
            f = theory.rate_forms(t[s], y)
            out["rho"][i], out["log_lr"][i] = f.rho, f.log_lr
            out["drop"][i], out["span"][i] = np.log(y[0] / y[-1]), t[s][-1] - t[s][0]
    return out


def linear_verdict(
    fits: dict, rho_lin, width, rate_share: float, min_drop: float = LOG_DROP, threshold: float = LOG_LR
) -> rules.Verdict:
    """Linear convergence at every width, judged per width (a claim made at every width is not
    pooled). A fitted run is *decided* when its loss falls by ≥ e^min_drop (5×) over its window,
    or when its slowest kernel says it should (−log ρ_lin × the window's length ≥ min_drop): over
    less, a geometric and a slow power law are not told apart. A decided run is *linear* when the
    log-likelihood ratio of log L on t over log L on log t is ≥ ``threshold`` and its decay reaches
    ``rate_share`` of the linearised one, −log ρ ≥ rate_share·(−log ρ_lin) with ρ_lin < 1 (a
    plateau decays far slower than the kernel allows). Per width: pass when a run is decided and
    every decided run is linear; fail when more than half of the fitted runs are decided and
    not linear; else inconclusive (an undecided run is no evidence either way). The claim passes when every width passes, fails when any fails."""
    rho, log_lr, drop, span = (np.asarray(fits[k], float) for k in ("rho", "log_lr", "drop", "span"))
    rho_lin, width = np.asarray(rho_lin, float), np.asarray(width)
    fit = np.isfinite(rho) & np.isfinite(log_lr)
    with np.errstate(invalid="ignore", divide="ignore"):
        fast = (rho_lin < 1) & (-np.log(rho) >= rate_share * -np.log(rho_lin))
        decided = fit & ((drop >= min_drop) | (-np.log(rho_lin) * span >= min_drop))
        share = np.log(rho) / np.log(rho_lin)
    favoured = log_lr >= threshold
    linear = decided & favoured & fast
    rule = (
        f"per width: a fitted run decided (log L falls ≥ {min_drop:.3g} over the window, or the slowest "
        f"kernel says it should) and every decided run linear (log LR(log L on t : log L on log t) ≥ {threshold:.3g}, −log ρ ≥ "
        f"{rate_share:g}·(−log ρ_lin)); fail: more than half decided and not linear; the claim passes when every "
        "width passes, fails when any fails"
    )
    per_width, outcomes = {}, {}
    for w in np.unique(width[fit]):
        s = fit & (width == w)
        n, k, against = int(s.sum()), int((linear & s).sum()), int((decided & ~linear & s).sum())
        dec = int((decided & s).sum())
        o = rules.PASS if dec >= 1 and k == dec else rules.FAIL if 2 * against > n else rules.INCONCLUSIVE
        outcomes[int(w)] = o
        per_width[str(int(w))] = {
            "fitted": n,
            "decided": dec,
            "linear": k,
            "favour a power law": int((log_lr[s] <= -threshold).sum()),
            "median log-loss fall": med(drop[s]),
            "outcome": o,
        }
    measured = {
        "fitted_runs": int(fit.sum()),
        "decided_runs": int(decided.sum()),
        "linear_runs": int(linear.sum()),
        "lr_favours_linear": int((favoured & fit).sum()),
        "lr_favours_power": int((log_lr[fit] <= -threshold).sum()),
        "rate_ok": int((fast & fit).sum()),
        "median_log_lr": med(log_lr[fit]),
        "max_rho": rounded(rho[fit].max(), 6) if fit.any() else None,
        "median_rate_over_linearised": med(share[fit]),
        "per width": per_width,
    }
    if not outcomes:
        return rules.Verdict(rules.INCONCLUSIVE, measured, rule, "no stable run with a fit")
    failed = [w for w, o in outcomes.items() if o == rules.FAIL]
    if failed:
        return rules.Verdict(rules.FAIL, measured, rule, f"not linear at d_m = {', '.join(map(str, failed))}")
    if all(o == rules.PASS for o in outcomes.values()):
        return rules.Verdict(rules.PASS, measured, rule)
    open_ = [w for w, o in outcomes.items() if o != rules.PASS]
    return rules.Verdict(
        rules.INCONCLUSIVE, measured, rule, f"undecided at d_m = {', '.join(map(str, open_))} (runs too short to tell)"
    )


def linear_claim(statement: str, cols, L, ok, spec, T: float) -> tuple[Claim, dict]:
    """The claim that the training loss decays geometrically at every width, judged by
    :func:`linear_verdict`; returns the claim and the per-run fits (ρ, log LR, log-loss fall,
    ρ_lin at K₀ and of the slowest kernel)."""
    t = np.asarray(cols["trace_step"][0], float)
    fits = linear_runs(t, L, ok, spec.floor, spec.fit_from * T)
    fits["rho_lin_0"], fits["rho_lin"] = linearised_rate(cols)
    v = linear_verdict(fits, fits["rho_lin"], width_of(cols), spec.rate_share)
    window = (
        f"fit over epochs ≥ {spec.fit_from * T:g} up to the last new low of the loss above {spec.floor:g}·L_0; "
        "unflagged runs only"
    )
    return Claim.of("linear", statement, v, "; ".join(x for x in (v.detail, window) if x)), fits


def stability_claim(r: dict, spec) -> Claim:
    return Claim.of(
        "stability",
        f"every run with γ_eff·λ_max(K₀)/N < {spec.unstable_at:g} trains stably",
        stability_verdict(r, spec.unstable_at, spec.stable_share),
    )


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


LMIN_WHY = (
    "judged on the w_O block from d_m ≥ 10N, a statistic chosen after the whole kernel's slope was seen: post hoc "
    "(the ledger dates it). λ_min(K₀) = λ_min(K₀^{w_O} + the W_Q, W_K, W_V blocks) ≥ λ_min(K₀^{w_O}) (every block "
    "is PSD), and those blocks add a part O(1) in d_m, so at these widths the whole kernel's slope is below 1 "
    "where the theory holds"
)


def keyed_slopes(x, y, repeat) -> dict[str, float]:
    """repeat -> the least-squares slope of log y on log x over its points (≥ 2 distinct x with
    finite y > 0), as :func:`loglog_slopes` but keyed, so two inits' slopes pair by repeat."""
    x, y, repeat = np.asarray(x, float), np.asarray(y, float), np.asarray(repeat)
    out = {}
    for r in np.unique(repeat):
        s = (repeat == r) & np.isfinite(y) & (y > 0) & (x > 0)
        if len(np.unique(x[s])) >= 2:
            out[str(r)] = float(np.polyfit(np.log(x[s]), np.log(y[s]), 1)[0])
    return out


def slope_difference(a: dict[str, float], b: dict[str, float]) -> dict:
    """The per-repeat difference a − b of two inits' slopes over the repeats both have, with its
    95 % t interval over those repeats (each repeat's cells are their own draws: independent)."""
    d = np.array([a[k] - b[k] for k in sorted(set(a) & set(b))], float)
    m, lo, hi, _ = rules.t_interval(d)
    return {"difference": m, "lo": lo, "hi": hi, "repeats": len(d)}


def level_ratio(width, init, lam, a: str, b: str, scale: bool = False) -> float | None:
    """median λ(a) / median λ(b) at the widest width both have (× d_m with ``scale``)."""
    ws = [w for w in np.unique(width) if ((init == a) & (width == w)).any() and ((init == b) & (width == w)).any()]
    if not ws:
        return None
    w = max(ws)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        q = np.nanmedian(lam[(init == a) & (width == w)]) / np.nanmedian(lam[(init == b) & (width == w)])
    return rounded(float(q * (w if scale else 1)), 4)


def lmin_claims(
    width, init, lam_block, lam_whole, repeat, w_min: int, N: int, margin, check: float
) -> tuple[list[Claim], dict, dict]:
    """λ_min(K₀) and the init (Wu et al. 2023: λ_min(K₀) ∝ d_m under LeCun/He, O(1) under NTK init)
    as one prediction and two checks of the construction; one least-squares log–log slope against
    d_m per repeat, 95 % t interval over repeats.

      lmin-lecun  the prediction: under LeCun init λ_min(K₀) grows ∝ d_m. Measured first, reported:
                  the *whole kernel's* slope over the widths ≥ N. Judged (:data:`LMIN_WHY`: post
                  hoc): the slope of λ_min(K₀^{w_O}) (the output weights' block, K₀^{w_O} = H Hᵀ with
                  H the N×d_m pooled features) over the widths ≥ ``w_min`` (10N: below N its rank ≤
                  d_m makes it 0, up to ≈ 10N its λ_min/d_m still rises) inside ``margin`` (1 ± ¼:
                  nearer ∝ d_m than the competitor ∝ d_m^{1/2}); pass inside, fail disjoint, else
                  inconclusive (:func:`attnlab.rules.equivalence`).
      lmin-he     check: He's block is a width-independent multiple of LeCun's (√2 on W_V and 2× the
                  logits at every width): the per-repeat slope difference he − lecun inside ±check.
      lmin-ntk    check: K₀^{w_O} under NTK init is LeCun's / d_m (the same features, τ₁² = 1/d_m): the
                  per-repeat difference lecun − ntk inside 1 ± check; NTK init's whole-kernel slope
                  (O(1) in d_m) reported.

    He and NTK init restate the construction, not the theory: they are checks, so the one fact is
    counted once. Each is descriptive with fewer than 2 widths ≥ ``w_min``.
    Returns (claims, block slope estimates per init, whole-kernel slope estimates per init)."""
    width, init = np.asarray(width), np.asarray(init)
    wide = len(np.unique(width[width >= w_min])) >= 2
    w_from = N if len(np.unique(width[width >= N])) >= 2 else int(width.min())
    block, whole, keyed = {}, {}, {}
    for name in INITS:
        at = (init == name) & (width >= w_min)
        block[name] = slope_estimate(width[at], lam_block[at], repeat[at])
        keyed[name] = keyed_slopes(width[at], lam_block[at], repeat[at])
        s = (init == name) & (width >= w_from)
        whole[name] = slope_estimate(width[s], lam_whole[s], repeat[s])
    first = lambda name: slope_measured(whole[name]) | {"widths_from": w_from}
    undecided = (
        f"fewer than 2 widths ≥ {w_min} (≈ 10N, where λ_min(K₀^{{w_O}}) becomes ∝ d_m; below N it is 0): "
        "reported, not judged"
    )

    def judged(v: rules.Verdict, measured: dict) -> rules.Verdict:
        if wide:
            return rules.Verdict(v.outcome, measured, v.rule, v.detail)
        return rules.Verdict(
            rules.DESCRIPTIVE, measured | {"widths": [int(w) for w in np.unique(width)]}, v.rule, undecided
        )

    e = block["lecun"]
    v = rules.equivalence(e["slope"], e["lo"], e["hi"], margin, "slope")
    rule = (
        f"95 % t interval (over repeats) of the log–log slope of λ_min(K₀^w_O) against d_m over d_m ≥ {w_min} "
        f"inside [{margin[0]:g}, {margin[1]:g}], fail if disjoint (the w_O block: post hoc); the whole kernel's "
        f"slope over d_m ≥ {w_from} reported first"
    )
    measured = {
        "whole_kernel": first("lecun"),
        "w_O_block": slope_measured(e) | {"margin": list(margin), "widths_from": w_min},
    }
    lecun = judged(rules.Verdict(v.outcome, {}, rule, v.detail), measured)

    def check_verdict(diff: dict, centre: float, what: str, extra: dict) -> rules.Verdict:
        v = rules.equivalence(diff["difference"], diff["lo"], diff["hi"], (centre - check, centre + check), what)
        m = {what: rounded(diff["difference"]), "ci95": [rounded(diff["lo"]), rounded(diff["hi"])]}
        return judged(v, m | {"margin": [centre - check, centre + check], "repeats": diff["repeats"]} | extra)

    he = check_verdict(
        slope_difference(keyed["he"], keyed["lecun"]),
        0.0,
        "slope he − lecun",
        {
            "he_block": slope_measured(block["he"]),
            "he/lecun at the widest width": level_ratio(width, init, lam_block, "he", "lecun"),
            "whole_kernel_he": first("he"),
        },
    )
    ntk = check_verdict(
        slope_difference(keyed["lecun"], keyed["ntk"]),
        1.0,
        "slope lecun − ntk",
        {
            "ntk_block": slope_measured(block["ntk"]),
            "d_m·ntk/lecun at the widest width": level_ratio(width, init, lam_block, "ntk", "lecun", scale=True),
            "whole_kernel_ntk": first("ntk"),
        },
    )
    fit = f"one log–log slope per repeat; the w_O block over d_m ≥ {w_min}"
    claims = [
        Claim.of(
            "lmin-lecun",
            f"under LeCun init λ_min(K₀) grows ∝ d_m (judged on its w_O block from d_m ≥ {w_min}; the whole "
            "kernel's slope reported first)",
            lecun,
            "; ".join(x for x in (lecun.detail, LMIN_WHY if wide else "") if x),
        ),
        Claim.of(
            "lmin-he",
            "check: He init's λ_min(K₀^{w_O}) is a width-independent multiple of LeCun's (the construction)",
            he,
            he.detail or fit,
        ),
        Claim.of(
            "lmin-ntk",
            "check: under NTK init K₀^{w_O} is LeCun's divided by d_m (τ₁² = 1/d_m on the same features), so its "
            "λ_min stays O(1) where LeCun's grows ∝ d_m",
            ntk,
            ntk.detail or fit,
        ),
    ]
    return claims, block, whole


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
