"""Phase diagrams of Li et al. 2023: the success rate of a learner over (x, N), where x is α_*
(Fig. 1, Fig. 2), the token noise τ or the initial model error σ / δ.

Success of a run = zero classification error on its fresh test set (the paper's definition).

Critical sample size. In each column (one x), P(success | N) = σ(β₀ + β₁ log N) is fitted to the
column's runs; N_c = exp(−β₀/β₁) is where it crosses 1/2. Its 95 % interval is the percentile
bootstrap over the column's runs. A column whose runs all succeed, or whose crossing is fitted
below the grid's smallest N, has N_c below the grid; all failing, or a crossing beyond the
largest N, above it; β₁ ≤ 0 means no increasing boundary. Such columns are censored (shown,
never fitted, never extrapolated).

Laws of N_c (α_* columns):
  straight line   N_c = a + b·α_*^(−k) over the crossed columns (k = 2 for the ViT, 4 for the
                  baseline: the paper's claim), least squares, with R² and the bootstrap interval
                  of b (the per-column bootstrap replicates refitted);
  power law       N·α_*^p = C: P(success) = σ(β₀ + β_N log N + β_α log α_*) over every run,
                  p = β_α/β_N with a bootstrap interval over runs, and the likelihood of the fits
                  with p fixed at 2 and at 4 (:func:`attnlab.theory.free_exponent`).
Shift (τ, σ, δ columns): P(success) = σ(β₀ + β_N log N + β_x x) over every run; the boundary
moves by d log N_c / dx = −β_x/β_N (positive: more samples are needed as x grows).
Iterations: log T = c + r·log α_*⁻¹ + s·log N over the runs that reached zero training hinge
loss (T = their stop step); the theory says T = Θ(α_*⁻¹ η⁻¹), i.e. r = 1.

The oracle floor beside each diagram is the error of the per-token rule that knows the patterns
(:func:`attnlab.data.li2023.oracle_error`) on fresh samples of each column: where it is not ~0,
the column's failures are Bayes error (noise, confusion tokens), not a sample-size boundary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import jax
import matplotlib.pyplot as plt
import numpy as np
from pydantic import Field, PositiveFloat, PositiveInt

from attnlab import plots, rules, theory
from attnlab.data import li2023 as ldata
from attnlab.experiments.base import Analysis, Claim, Experiment, ExperimentSpec, expand, rounded

CROSSED, BELOW, ABOVE, FLAT = "crossed", "below grid", "above grid", "not increasing"


@dataclass
class Column:
    """N_c of one column: value and 95 % interval (NaN unless crossed), how it was found, the
    bootstrap replicates, and the success rate per N."""

    x: float
    value: float
    lo: float
    hi: float
    status: str
    boots: np.ndarray
    rate: dict

    def as_dict(self) -> dict:
        return {"x": rounded(self.x, 6), "N_c": rounded(self.value, 2), "ci95": [rounded(self.lo, 2),
                rounded(self.hi, 2)], "status": self.status, "success_rate": self.rate}  # fmt: skip


def _crossing(logN: np.ndarray, s: np.ndarray) -> float:
    """exp(−β₀/β₁) of σ(β₀ + β₁ log N); NaN without both outcomes or with β₁ ≤ 0."""
    if s.all() or not s.any():
        return np.nan
    b, _ = theory.logistic_fit(np.column_stack([np.ones_like(logN), logN]), s)
    return float(np.exp(-b[0] / b[1])) if b[1] > 1e-9 else np.nan


def _ratios(Z: np.ndarray, s: np.ndarray, W: np.ndarray, num, den: int) -> np.ndarray:
    """num(β)/β[den] of the logistic fit of every resample (rows counted W[b] times; NaN without
    both outcomes or with β[den] ≤ 1e-9): :func:`attnlab.theory.logistic_fit` one resample at a
    time, batched (the same fits up to rounding; the audit analyses thousands of data sets)."""
    k = W @ s
    both = (k > 0) & (k < W.sum(1))
    out = np.full(len(W), np.nan)
    if both.any():
        b = theory._irls_batch(Z, s, W[both].astype(float), 1e-4, 100)
        ok = b[:, den] > 1e-9
        with np.errstate(over="ignore"):
            out[np.flatnonzero(both)[ok]] = num(b[ok]) / b[ok, den]
    return out


def column(x: float, N: np.ndarray, success: np.ndarray, n_boot: int, rng: np.random.Generator) -> Column:
    """N_c of one column from its runs (N, success). A crossing fitted outside the grid's N range
    is censored (below / above grid), never extrapolated."""
    logN, s = np.log(N.astype(float)), success.astype(float)
    rate = {int(n): rounded(s[N == n].mean(), 3) for n in np.unique(N)}
    value = _crossing(logN, s)
    if s.all() or (np.isfinite(value) and value < N.min()):
        status = BELOW
    elif not s.any() or (np.isfinite(value) and value > N.max()):
        status = ABOVE
    else:
        status = CROSSED if np.isfinite(value) else FLAT
    value = value if status == CROSSED else np.nan
    Z = np.column_stack([np.ones_like(logN), logN])
    boots = np.exp(_ratios(Z, s, theory.resample_counts(len(s), n_boot, rng), lambda b: -b[:, 0], 1))  # _crossing per resample
    finite = boots[np.isfinite(boots)]
    lo, hi = np.percentile(finite, [2.5, 97.5]) if status == CROSSED and len(finite) >= n_boot // 2 else (np.nan,) * 2
    return Column(float(x), value, float(lo), float(hi), status, boots, rate)


def columns(x: np.ndarray, N: np.ndarray, success: np.ndarray, n_boot: int, seed: int) -> list[Column]:
    rng = np.random.default_rng(seed)
    return [column(v, N[x == v], success[x == v], n_boot, rng) for v in np.unique(x)]


def straight_line(cols: list[Column], power: float) -> dict:
    """N_c = a + b·α_*^(−power) over the crossed α_* columns: a, b (interval from the bootstrap
    replicates), R²; None with fewer than 3 crossed columns."""
    use = [c for c in cols if c.status == CROSSED]
    if len(use) < 3:
        return {"n_columns": len(use), "a": None, "b": None, "b_ci95": [None, None], "r2": None}
    u = np.array([c.x for c in use]) ** -power
    Nc = np.array([c.value for c in use])
    b, a = np.polyfit(u, Nc, 1)
    r2 = 1 - np.sum((Nc - (a + b * u)) ** 2) / np.sum((Nc - Nc.mean()) ** 2)
    B = np.stack([c.boots for c in use], 1)
    B = B[np.all(np.isfinite(B), 1)]
    slopes = np.array([np.polyfit(u, row, 1)[0] for row in B]) if len(B) >= 20 else np.array([])
    lo, hi = np.percentile(slopes, [2.5, 97.5]) if len(slopes) else (np.nan, np.nan)
    return {"n_columns": len(use), "a": rounded(a, 3), "b": rounded(b, 4), "b_ci95": [rounded(lo, 4), rounded(hi, 4)],
            "r2": rounded(r2, 4), "n_boot_used": int(len(slopes))}  # fmt: skip


def power_law(alpha: np.ndarray, N: np.ndarray, success: np.ndarray, n_boot: int, seed: int) -> dict | None:
    """p of N·α_*^p = C over every run, its interval, and the likelihood of p = 2 against p = 4."""
    s = success.astype(float)
    if s.all() or not s.any():
        return None
    fit = theory.free_exponent(np.log(N.astype(float)), np.log(alpha), s, n_boot=n_boot, seed=seed,
                               restricted=(2.0, 4.0))  # fmt: skip
    # ℓ_2 − ℓ_4 = (LR_4 − LR_2)/2: the same number of parameters, so a plain log-likelihood ratio
    return fit.as_dict() | {"loglik_2_minus_4": rounded((fit.lr[4.0] - fit.lr[2.0]) / 2, 3),
                            "p_value": fit.as_dict()["p_value"]}  # fmt: skip


def shift(x: np.ndarray, N: np.ndarray, success: np.ndarray, n_boot: int, seed: int) -> theory.Estimate:
    """d log N_c / dx = −β_x/β_N of σ(β₀ + β_N log N + β_x x), with a bootstrap interval."""
    s = success.astype(float)
    if s.all() or not s.any():
        return theory.Estimate.missing()
    Z = np.column_stack([np.ones_like(s), np.log(N.astype(float)), x.astype(float)])
    b, _ = theory.logistic_fit(Z, s)
    value = -b[2] / b[1] if b[1] > 1e-9 else np.nan
    # theory.bootstrap's resamples and percentile interval, the fits batched
    boots = _ratios(Z, s, theory.resample_counts(len(s), n_boot, np.random.default_rng(seed)), lambda b: -b[:, 2], 1)
    boots = boots[np.isfinite(boots)]
    if len(boots) < max(10, n_boot // 2):
        return theory.Estimate(value, np.nan, np.nan, n_boot=n_boot)
    return theory.Estimate(value, *np.percentile(boots, [2.5, 97.5]), n_boot=n_boot)


def iterations(alpha: np.ndarray, N: np.ndarray, steps: np.ndarray, n_boot: int, seed: int) -> theory.Estimate:
    """r of log T = c + r·log α_*⁻¹ + s·log N (least squares over the converged runs)."""
    Z = np.column_stack([np.ones_like(alpha), -np.log(alpha), np.log(N.astype(float))])
    y = np.log(np.maximum(steps.astype(float), 1.0))
    if len(np.unique(alpha)) < 2 or len(y) < 4:
        return theory.Estimate.missing()
    if len(np.unique(N)) < 2:
        Z = Z[:, :2]

    def stat(idx):
        coef, *_ = np.linalg.lstsq(Z[idx], y[idx], rcond=None)
        return coef[1] if len(np.unique(alpha[idx])) > 1 else np.nan

    return theory.Estimate(*theory.bootstrap(stat, len(y), n_boot, seed), n_boot=n_boot)


def exponent_verdict(law: dict | None, margin: tuple[float, float]) -> rules.Verdict:
    """p of the power law inside ``margin`` (around the paper's exponent): equivalence."""
    if law is None:
        return rules.Verdict(rules.INCONCLUSIVE, {}, f"p inside {list(margin)}", "no boundary inside the grid")
    p = law["p"]
    return rules.equivalence(p["value"] if p["value"] is not None else np.nan,
                             *(np.nan if v is None else v for v in p["ci95"]), margin, "p")  # fmt: skip


def likelihood_verdict(law: dict | None, favoured: float, min_log_ratio: float) -> rules.Verdict:
    """ℓ_favoured − ℓ_other ≥ ``min_log_ratio`` passes, ≤ −min_log_ratio fails (log-likelihoods of
    the fits with p fixed at 2 and at 4, over the same runs)."""
    rule = (f"log-likelihood of p = {favoured:g} minus that of p = {6 - favoured:g} ≥ {min_log_ratio:g} "
            f"(likelihood ratio ≥ e^{min_log_ratio:g}); fail if ≤ −{min_log_ratio:g}")  # fmt: skip
    if law is None or law["p"]["value"] is None:
        return rules.Verdict(rules.INCONCLUSIVE, {}, rule, "no boundary inside the grid (or a degenerate fit)")
    diff = law["loglik_2_minus_4"] * (1 if favoured == 2 else -1)
    outcome = rules.PASS if diff >= min_log_ratio else rules.FAIL if diff <= -min_log_ratio else rules.INCONCLUSIVE
    return rules.Verdict(outcome, {"loglik_difference": diff, "p": law["p"]["value"]}, rule)


def shift_verdict(est: theory.Estimate, name: str) -> rules.Verdict:
    """N_c grows with x: the interval of d log N_c / dx lies above 0 (fail: below 0)."""
    rule = f"95 % interval of d log N_c / d{name} lies above 0; fail if it lies below 0"
    m = {"dlogNc_dx": rounded(est.value), "ci95": [rounded(est.lo), rounded(est.hi)]}
    if not np.isfinite(est.lo):
        return rules.Verdict(rules.INCONCLUSIVE, m, rule, "no boundary inside the grid or no interval")
    outcome = rules.PASS if est.lo > 0 else rules.FAIL if est.hi < 0 else rules.INCONCLUSIVE
    return rules.Verdict(outcome, m, rule)


# ---------------------------------------------------------------- oracle floor

_FIELDS = ("alpha_star", "alpha_hash", "tau", "M", "d", "L", "kappa", "noise", "noisy_frac", "noisy_tau", "spurious",
           "counts")  # fmt: skip


_FLOORS: dict = {}  # oracle_floor's answers: they depend on the spec only, and the audit analyses one spec many times


def oracle_floor(data: dict, axis: str, xs, n: int = 4000, seed: int = 0) -> list[float]:
    """Error of the oracle per-token rule on ``n`` fresh test-set samples of each column. ``data``:
    the spec's data fields (grid axes other than ``axis`` are left at their defaults; α_# left
    unset follows each column's α_*/6); ``axis``: the column's data field, or None when the
    columns are not a data field (the same floor for every column)."""
    key = (json.dumps(data, sort_keys=True, default=repr), axis, tuple(float(x) for x in xs), n, seed)
    if key in _FLOORS:
        return list(_FLOORS[key])
    base = {k: v for k, v in data.items() if k not in ("name", "N") and not isinstance(v, list)}
    out = []
    for x in xs:
        fields = ldata.Spec(**base | ({axis: float(x)} if axis else {})).model_dump()
        X, y = ldata.dataset(jax.random.PRNGKey(seed), n, train=False, **{k: fields[k] for k in _FIELDS})
        out.append(float(ldata.oracle_error(X, y, M=fields["M"], kappa=fields["kappa"])))
    _FLOORS[key] = tuple(out)
    return out


# ---------------------------------------------------------------- the experiments


class DiagramSpec(ExperimentSpec):
    """Fields of every li2023 phase diagram."""

    n_boot: int = Field(300, ge=20, description="bootstrap resamples for intervals")
    tune_lr: list[PositiveFloat] = Field(
        default_factory=list, description="learning rates tried on validation runs before the grid ([]: use train.lr)"
    )
    tune_x: float | None = Field(None, description="the column the lr is tuned at (None: the grid's middle value)")
    tune_N: PositiveInt | None = Field(None, description="the N the lr is tuned at (None: the grid's middle value)")
    tune_reps: PositiveInt = Field(4, description="validation runs per learning rate")
    p_margin: tuple[float, float] = Field(
        (1.5, 2.5), description="equivalence margin of the exponent p of N_c ∝ α_*^−p"
    )
    min_log_ratio: PositiveFloat = Field(2.0, description="log-likelihood gap that decides p = 2 against p = 4")
    r2_min: float = Field(0.9, gt=0, le=1, description="R² the paper's straight line must reach")
    iter_margin: tuple[float, float] = Field((0.5, 1.5), description="margin of r in T ∝ α_*^−r")
    oracle_n: PositiveInt = Field(4000, description="fresh samples per column for the oracle floor")


TUNE_SEED = 7919  # tuning runs use seed + this: their data are independent draws from every grid cell's


class Diagram(Experiment):
    """Success rate over (x, N), the critical N_c per column and its law; subclasses set the
    column axis (a data or model field) and, for α_*, the paper's power k of N_c = a + b·α_*^(−k)."""

    axis: str  # "data.alpha_star", "data.tau", "model.sigma", "model.delta"
    power: float | None = None  # k of the paper's straight line (α_* axis only)
    favoured: float | None = None  # the paper's exponent (2 ViT, 4 baseline)
    tags = ("stage",)

    @property
    def axis_name(self) -> str:
        return self.axis.split(".", 1)[1]

    # ------------------------------------------------------------ cells, with the lr tuning stage

    def _tune_cells(self, spec) -> list[dict]:
        kind, name = self.axis.split(".", 1)
        grid = getattr(spec, kind)[name]
        mid = lambda v: sorted(v, key=float)[len(v) // 2] if isinstance(v, list) else v
        x = spec.tune_x if spec.tune_x is not None else mid(grid)
        n = spec.tune_N if spec.tune_N is not None else mid(spec.data["N"])
        tune = spec.model_copy(update={
            kind: getattr(spec, kind) | {name: x}, "seed": spec.seed + TUNE_SEED, "seeds": 1, "reps": spec.tune_reps,
        })  # fmt: skip
        tune = tune.model_copy(update={"data": tune.data | {"N": n}, "train": tune.train | {"lr": list(spec.tune_lr)}})
        return expand(tune, [({"stage": "tune"}, {})])

    def cells(self, spec, run=None) -> list[dict]:
        grid = expand(spec, [({"stage": "grid"}, {})])  # validated before any tuning run is written
        if not (spec.tune_lr and run is not None):
            return grid
        tune = self._tune_cells(spec)
        lr = choose_lr(run(tune), self.axis)["chosen"]
        return tune + [c | {"train.lr": lr} for c in grid]

    # ------------------------------------------------------------ analysis

    def analyse(self, cols, spec) -> Analysis:
        g = cols["stage"] == "grid"
        x, N = cols[self.axis][g].astype(float), cols["data.N"][g]
        success = cols["test_error"][g] == 0
        summary: dict = {"runs": int(g.sum()), "success rate": rounded(success.mean(), 4),
                         "learning rate": float(cols["train.lr"][g][0])}  # fmt: skip
        if (~g).any():
            summary["lr tuning (validation runs)"] = choose_lr({k: v[~g] for k, v in cols.items()}, self.axis)
        cs = columns(x, N, success, spec.n_boot, spec.seed)
        summary["columns"] = [c.as_dict() for c in cs]
        summary["mean test error per column"] = {rounded(v, 6): rounded(cols["test_error"][g][x == v].mean(), 5)
                                                 for v in np.unique(x)}  # fmt: skip
        axis = self.axis_name if self.axis.startswith("data.") else None
        floor = oracle_floor(spec.data, axis, np.unique(x), spec.oracle_n)
        summary["oracle error per column"] = {rounded(v, 6): rounded(e, 5) for v, e in zip(np.unique(x), floor, strict=True)}
        claims = self._claims(cols, g, x, N, success, cs, spec, summary)
        return Analysis(claims=claims, summary=summary)

    def _claims(self, cols, g, x, N, success, cs, spec, summary) -> list[Claim]:
        raise NotImplementedError

    # ------------------------------------------------------------ figures

    def coordinate(self, x):
        """The diagram's horizontal coordinate of a column value (α_*^(−k) for α_*)."""
        return x**-self.power if self.power else x

    def xlabel(self) -> str:
        if self.axis_name == "alpha_star":
            return f"α_*^−{self.power:g}"
        return {"tau": "token noise τ", "sigma": "initial value error σ", "delta": "initial query/key error δ"}.get(
            self.axis_name, self.axis_name)  # fmt: skip

    def figures(self, cols, spec, analysis: Analysis, out: Path) -> list[Path]:
        g = cols["stage"] == "grid"
        x, N = cols[self.axis][g].astype(float), cols["data.N"][g].astype(float)
        u = self.coordinate(x)
        xs, ys, Z = plots.grid_mean(u, N, (cols["test_error"][g] == 0).astype(float))
        tuned = "lr tuning (validation runs)" in analysis.summary
        fig, axes = plt.subplots(1, 3 if tuned else 2, figsize=(14 if tuned else 10, 4), constrained_layout=True,
                                 gridspec_kw={"width_ratios": [2, 1, 1][: 3 if tuned else 2]})  # fmt: skip
        ax = axes[0]
        log_n = len(ys) > 2 and ys[-1] / ys[0] > 10 and np.ptp(np.diff(np.log(ys))) < 1e-6  # a geometric N grid
        ye = plots.edges(ys, log=log_n)
        m = ax.pcolormesh(plots.edges(xs), ye, Z, cmap="gray", vmin=0, vmax=1, shading="flat")
        fig.colorbar(m, ax=ax, label="success rate (zero test error)")
        crossed = [c for c in analysis.summary["columns"] if c["status"] == CROSSED]
        if crossed:
            cu = self.coordinate(np.array([c["x"] for c in crossed]))
            nc = np.array([c["N_c"] for c in crossed])
            err = np.array([[c["N_c"] - (c["ci95"][0] or c["N_c"]), (c["ci95"][1] or c["N_c"]) - c["N_c"]]
                            for c in crossed]).T  # fmt: skip
            ax.errorbar(cu, nc, yerr=err, fmt="o", color="tab:red", ms=4, capsize=2, label="N_c (success ½), 95 % CI")
        line = analysis.summary.get("straight line")
        if line and line.get("b") is not None:
            xl = np.linspace(plots.edges(xs)[0], plots.edges(xs)[-1], 100)
            ax.plot(xl, line["a"] + line["b"] * xl, "-", color="orange", lw=1.5,
                    label=f"fit N_c = {line['a']:.0f} + {line['b']:.3g}·{self.xlabel()} (R² {line['r2']:.2f})")  # fmt: skip
        law = analysis.summary.get("power law")
        if law and law["p"]["value"] is not None and crossed:
            p = law["p"]["value"]
            a_vals = np.linspace(x.min(), x.max(), 100)
            c0 = np.exp(np.mean(np.log(nc) + p * np.log([c["x"] for c in crossed])))
            ax.plot(self.coordinate(a_vals), c0 * a_vals**-p, "--", color="tab:cyan", lw=1.3,
                    label=f"power law N_c ∝ α_*^−{p:.2f}")  # fmt: skip
        ax.set_ylim(ye[0], ye[-1])
        if log_n:
            ax.set_yscale("log")
            ax.set_yticks(ys, [f"{y:g}" for y in ys])
        ax.set_xlabel(self.xlabel())
        ax.set_ylabel("training samples N")
        ax.set_title(f"{self.title.split(':')[0]}: success rate (white = always)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper right")
        ax = axes[1]
        cx = np.unique(x)
        orc = list(analysis.summary["oracle error per column"].values())
        lrn = list(analysis.summary["mean test error per column"].values())
        ax.plot(self.coordinate(cx), np.maximum(lrn, 1e-5), "o-", label="learner: mean test error")
        ax.plot(self.coordinate(cx), np.maximum(orc, 1e-5), "s--", color="k", label="oracle per-token rule")
        ax.set_yscale("log")
        ax.set_ylim(5e-6, 1)
        ax.set_xlabel(self.xlabel())
        ax.set_title("error floor (values < 10⁻⁵ drawn at 10⁻⁵)")
        ax.legend(fontsize=7)
        if tuned:
            t = analysis.summary["lr tuning (validation runs)"]
            ax = axes[2]
            lrs = [r["lr"] for r in t["table"]]
            ax.plot(lrs, [r["val_error"] for r in t["table"]], "o-", label="validation error")
            ax.axvline(t["chosen"], color="tab:red", lw=1, label=f"chosen lr = {t['chosen']:g}")
            plots.log_x(ax)
            ax.set_xlabel("learning rate")
            ax.set_title("lr tuned on validation runs")
            ax.legend(fontsize=7)
        return plots.save(fig, out, self.id.replace("li2023-", "") + "_diagram")


def choose_lr(cols, axis: str) -> dict:
    """The lr with the lowest mean validation error (ties: lowest validation loss); the table."""
    lr = cols["train.lr"].astype(float)
    table = []
    for v in np.unique(lr):
        s = lr == v
        table.append({"lr": float(v), "val_error": rounded(cols["test_error"][s].mean(), 5),
                      "val_loss": rounded(np.nanmean(cols["test_loss"][s]), 5),
                      "diverged": int(np.sum(cols["status"][s] == "diverged")), "runs": int(s.sum())})  # fmt: skip
    ok = [r for r in table if r["val_error"] is not None and r["diverged"] == 0] or table
    best = min(ok, key=lambda r: (r["val_error"], r["val_loss"] if r["val_loss"] is not None else np.inf))
    return {"chosen": best["lr"], "table": table,
            "where": {axis: float(cols[axis][0]), "N": int(cols["data.N"][0])}}  # fmt: skip
