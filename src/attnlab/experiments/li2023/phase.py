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
from attnlab.errors import AttnlabError
from attnlab.experiments.base import Analysis, Claim, Experiment, rounded
from attnlab.experiments.config import ExperimentSpec, expand

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
        return {
            "x": rounded(self.x, 6),
            "N_c": rounded(self.value, 2),
            "ci95": [rounded(self.lo, 2), rounded(self.hi, 2)],
            "status": self.status,
            "success_rate": self.rate,
        }


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
    boots = np.exp(
        _ratios(Z, s, theory.resample_counts(len(s), n_boot, rng), lambda b: -b[:, 0], 1)
    )  # _crossing per resample
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
    return {
        "n_columns": len(use),
        "a": rounded(a, 3),
        "b": rounded(b, 4),
        "b_ci95": [rounded(lo, 4), rounded(hi, 4)],
        "r2": rounded(r2, 4),
        "n_boot_used": int(len(slopes)),
    }


def power_law(alpha: np.ndarray, N: np.ndarray, success: np.ndarray, n_boot: int, seed: int) -> dict | None:
    """p of N·α_*^p = C over every run, its interval, and the likelihood of p = 2 against p = 4."""
    s = success.astype(float)
    if s.all() or not s.any():
        return None
    fit = theory.free_exponent(
        np.log(N.astype(float)), np.log(alpha), s, n_boot=n_boot, seed=seed, restricted=(2.0, 4.0)
    )
    # ℓ_2 − ℓ_4 = (LR_4 − LR_2)/2: the same number of parameters, so a plain log-likelihood ratio
    return fit.as_dict() | {
        "loglik_2_minus_4": rounded((fit.lr[4.0] - fit.lr[2.0]) / 2, 3),
        "p_value": fit.as_dict()["p_value"],
    }


def shift(
    x: np.ndarray, N: np.ndarray, success: np.ndarray, n_boot: int, seed: int, level: float = 0.95
) -> theory.Estimate:
    """d log N_c / dx = −β_x/β_N of σ(β₀ + β_N log N + β_x x), with a bootstrap interval at ``level``."""
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
    return theory.Estimate(value, *np.percentile(boots, [50 * (1 - level), 50 * (1 + level)]), n_boot=n_boot)


def iterations(alpha: np.ndarray, N: np.ndarray, steps: np.ndarray, capped: np.ndarray, eta=None) -> theory.Estimate:
    """r of log T = c + r·log α_*⁻¹ + s·log N (+ e·log η⁻¹ when ``eta`` varies) over every run,
    those stopped by the step cap kept as right-censored at the cap (:func:`tobit_slopes`;
    counting only the converged runs biases r: the runs that take longest are the ones dropped).
    With one α_* value and several η, the returned slope is e (T ∝ η^−e). 95 % Wald interval."""
    y = np.log(np.maximum(steps.astype(float), 1.0))
    cols = [np.ones_like(y)]
    if len(np.unique(alpha)) > 1:
        cols.append(-np.log(alpha.astype(float)))
    if eta is not None and len(np.unique(eta)) > 1:
        cols.append(-np.log(eta.astype(float)))
    if len(cols) == 1 or len(y) < 4 or (~capped).sum() < 2:
        return theory.Estimate.missing()
    if len(np.unique(N)) > 1:
        cols.append(np.log(N.astype(float)))
    b, se = tobit_slopes(np.column_stack(cols), y, np.asarray(capped, bool))
    z = 1.959964
    return theory.Estimate(float(b[1]), float(b[1] - z * se[1]), float(b[1] + z * se[1]), 0)


def exponent_verdict(law: dict | None, margin: tuple[float, float]) -> rules.Verdict:
    """p of the power law inside ``margin`` (around the paper's exponent): equivalence."""
    if law is None:
        return rules.Verdict(rules.INCONCLUSIVE, {}, f"p inside {list(margin)}", "no boundary inside the grid")
    p = law["p"]
    return rules.equivalence(
        p["value"] if p["value"] is not None else np.nan, *(np.nan if v is None else v for v in p["ci95"]), margin, "p"
    )


def likelihood_verdict(law: dict | None, favoured: float, min_log_ratio: float) -> rules.Verdict:
    """ℓ_favoured − ℓ_other ≥ ``min_log_ratio`` passes, ≤ −min_log_ratio fails (log-likelihoods of
    the fits with p fixed at 2 and at 4, over the same runs)."""
    rule = (
        f"log-likelihood of p = {favoured:g} minus that of p = {6 - favoured:g} ≥ {min_log_ratio:g} "
        f"(likelihood ratio ≥ e^{min_log_ratio:g}); fail if ≤ −{min_log_ratio:g}"
    )
    if law is None or law["p"]["value"] is None:
        return rules.Verdict(rules.INCONCLUSIVE, {}, rule, "no boundary inside the grid (or a degenerate fit)")
    diff = law["loglik_2_minus_4"] * (1 if favoured == 2 else -1)
    outcome = rules.PASS if diff >= min_log_ratio else rules.FAIL if diff <= -min_log_ratio else rules.INCONCLUSIVE
    return rules.Verdict(outcome, {"loglik_difference": diff, "p": law["p"]["value"]}, rule)


def shift_verdict(est: theory.Estimate, name: str, level: float = 0.95) -> rules.Verdict:
    """N_c grows with x: the interval of d log N_c / dx lies above 0 (fail: below 0)."""
    rule = f"{level:.0%} interval of d log N_c / d{name} lies above 0; fail if it lies below 0"
    m = {"dlogNc_dx": rounded(est.value), "interval": [rounded(est.lo), rounded(est.hi)], "level": level}
    if not np.isfinite(est.lo):
        return rules.Verdict(rules.INCONCLUSIVE, m, rule, "no boundary inside the grid or no interval")
    outcome = rules.PASS if est.lo > 0 else rules.FAIL if est.hi < 0 else rules.INCONCLUSIVE
    return rules.Verdict(outcome, m, rule)


# ---------------------------------------------------------------- oracle floor

_FIELDS = (
    "alpha_star",
    "alpha_hash",
    "tau",
    "M",
    "d",
    "L",
    "kappa",
    "noise",
    "noisy_frac",
    "noisy_tau",
    "spurious",
    "counts",
)


_FLOORS: dict = {}  # oracle_floor's answers: they depend on the fields only, and the audit analyses one spec many times


def column_fields(cols: dict, axis: str, rows: np.ndarray) -> list[dict]:
    """The data fields (without the ``data.`` prefix) of each column of ``axis`` over ``rows``:
    those of the column's first row (a column's runs differ only in N, seed, block and rep),
    validated by the data model (absent fields at their defaults)."""
    x = cols[axis][rows].astype(float)
    data = [k for k in cols if k.removeprefix("data.") in ldata.Spec.model_fields]
    out = []
    for v in np.unique(x):
        i = np.flatnonzero(rows)[np.flatnonzero(x == v)[0]]
        row = {k.removeprefix("data."): cols[k][i].item() if hasattr(cols[k][i], "item") else cols[k][i] for k in data}
        out.append(ldata.Spec(**row).model_dump())  # the fields a run's table lacks at their defaults
    return out


def oracle_floor(fields: list[dict], n: int = 4000, seed: int = 0) -> list[float]:
    """Error of the oracle per-token rule on ``n`` fresh test-set samples of each column (its data
    fields, :func:`column_fields`)."""
    out = []
    for f in fields:
        kw = {k: f[k] for k in _FIELDS}
        key = (json.dumps(kw, sort_keys=True, default=repr), n, seed)
        if key not in _FLOORS:
            X, y = ldata.dataset(jax.random.PRNGKey(seed), n, train=False, **kw)
            _FLOORS[key] = float(ldata.oracle_error(X, y, M=f["M"], kappa=f["kappa"]))
        out.append(_FLOORS[key])
    return out


def margins(fields: list[dict]) -> np.ndarray:
    """The analytic margin z of the best mean-token rule per column (:func:`attnlab.data.li2023.mean_token_margin`)."""
    return np.array([ldata.margin_of(f) for f in fields])


def tobit_slopes(Z: np.ndarray, y: np.ndarray, censored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-likelihood y = Zβ + ε, ε ~ N(0, s²), with right-censored rows (y only known to
    exceed its value: runs stopped by the step cap). Returns β and its standard errors from the
    observed information (the Hessian of the log-likelihood, by differences of its analytic
    gradient). Without censored rows this is least squares."""
    from scipy import optimize, stats

    def nll_grad(theta):
        b, ls = theta[:-1], theta[-1]
        s = np.exp(ls)
        r = (y - Z @ b) / s
        obs = ~censored
        # uncensored: log φ(r) − log s; censored: log(1 − Φ(r))
        ll = np.sum(stats.norm.logpdf(r[obs]) - ls) + np.sum(stats.norm.logsf(r[censored]))
        rc = r[censored]
        with np.errstate(over="ignore"):  # the inverse Mills ratio φ/(1 − Φ) → r far in the tail
            lam = np.exp(stats.norm.logpdf(rc) - stats.norm.logsf(rc))
        lam = np.where(np.isfinite(lam), lam, rc)
        gb = Z[obs].T @ r[obs] / s + Z[censored].T @ lam / s
        gls = np.sum(r[obs] ** 2 - 1) + np.sum(lam * r[censored])
        return -ll, -np.append(gb, gls)

    b0, *_ = np.linalg.lstsq(Z, y, rcond=None)
    start = np.append(b0, np.log(max(np.std(y - Z @ b0), 1e-3)))
    fit = optimize.minimize(nll_grad, start, jac=True, method="L-BFGS-B")
    theta, k = fit.x, len(fit.x)
    H = np.zeros((k, k))
    for j in range(k):
        e = np.zeros(k)
        e[j] = 1e-5 * max(1.0, abs(theta[j]))
        H[:, j] = (nll_grad(theta + e)[1] - nll_grad(theta - e)[1]) / (2 * e[j])
    try:
        cov = np.linalg.inv((H + H.T) / 2)
        se = np.sqrt(np.clip(np.diag(cov)[:-1], 0, None))
    except np.linalg.LinAlgError:
        se = np.full(k - 1, np.nan)
    return theta[:-1], se


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
    shift_level: float = Field(
        0.99,
        gt=0,
        lt=1,
        description="level of the shift claim's bootstrap interval (at 0.95 `attnlab audit` measured "
        "a false pass of 0.06 at the cpu design)",
    )
    oracle_n: PositiveInt = Field(4000, description="fresh samples per column for the oracle floor")
    floor: bool = Field(
        True, description="train the linear learner on the mean token (li2023-linear) on every grid cell, same draws"
    )
    floor_lr: list[PositiveFloat] = Field(
        default_factory=lambda: [1.0, 4.0, 16.0, 64.0], description="learning rates tried for the linear learner"
    )
    free_z: float = Field(
        4.0,
        description="a column is free of the mean-token floor where its analytic margin z ≥ this: the laws are "
        "fitted on those columns only (a linear rule on the mean token succeeds there too)",
    )
    min_free_columns: PositiveInt = Field(
        4, description="fewer columns free of the floor: the law claims are descriptive (the design cannot decide)"
    )
    eta_mults: list[PositiveFloat] = Field(
        default_factory=list,
        description="η stage: the chosen lr times each of these, at the tuning column and N "
        "([]: none); decides T ∝ η^−1",
    )
    eta_reps: PositiveInt = Field(8, description="runs per η of the η stage")
    one_pass: bool = Field(
        False, description="one-pass SGD on fresh samples: every run takes ⌈N/b⌉ steps, each sample seen once (N = b·T)"
    )
    max_confusion_ratio: float = Field(
        1 / (2 * np.e), gt=0, description="largest n_#/n_* a column may have (the theory's c < 1/(2e))"
    )


TUNE_SEED = 7919  # tuning runs use seed + this: their data are independent draws from every grid cell's


def check_counts(grid: list[dict], max_ratio: float) -> None:
    """The α_* columns of a grid as realised counts: the net count n_* − n_# strictly increasing
    with α_* (two columns of equal net count are the same difficulty: the label is the majority
    vote) and n_#/n_* ≤ ``max_ratio``; an error names the field otherwise."""
    cols = {}
    for c in grid:
        L = c["data.L"]
        cols[c["data.alpha_star"]] = (ldata.n_tokens(c["data.alpha_star"], L), ldata.n_tokens(c["data.alpha_hash"], L))
    counts = [cols[a] for a in sorted(cols)]
    for (s0, h0), (s1, h1) in zip(counts, counts[1:], strict=False):
        if s1 - h1 <= s0 - h0:
            raise AttnlabError(
                f"data.n_star: the columns (n_*, n_#) = ({s0}, {h0}) and ({s1}, {h1}) have net counts "
                f"{s0 - h0} and {s1 - h1}; the net count n_* − n_# must increase strictly across the "
                f"α_* columns (drop one, or set data.n_hash)"
            )
    for s_, h in counts:
        if h > max_ratio * s_:
            raise AttnlabError(
                f"data.n_hash: n_#/n_* = {h}/{s_} exceeds {max_ratio:.3g} (the theory's 1/(2e); "
                f"max_confusion_ratio relaxes it)"
            )


def _tune_N(spec) -> int:
    """The N of the tuning and η stages: ``tune_N``, else the grid's middle N."""
    N = spec.data["N"]
    return spec.tune_N if spec.tune_N is not None else sorted(N, key=float)[len(N) // 2] if isinstance(N, list) else N


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

    def _at(self, spec, fields: dict, **update):
        """``spec`` with the column axis fixed at a column (its validated data fields for an α_*
        axis: the realised counts, however the grid gave them) and ``update`` applied."""
        kind, name = self.axis.split(".", 1)
        if name == "alpha_star":
            keep = {k: v for k, v in spec.data.items() if k not in ("n_star", "n_hash", "alpha_star", "alpha_hash")}
            table = keep | {"alpha_star": fields["alpha_star"], "alpha_hash": fields["alpha_hash"]}
        else:
            table = getattr(spec, kind) | {name: fields[name] if kind == "data" else fields["x"]}
        return spec.model_copy(update={kind: table} | update)

    def tune_column(self, grid: list[dict], spec) -> tuple[dict, float]:
        """The column the lr is tuned at, chosen before any run from the analytic margin z: the
        hardest column free of the floor (the smallest z ≥ ``free_z``), else the column of largest
        z; among columns of equal z (a model-field axis) the middle one. ``tune_x`` overrides.
        Returns the column's data fields (with its axis value as ``x``) and its z."""
        cols = {k: np.array([c[k] for c in grid]) for k in grid[0]}
        rows = np.ones(len(grid), bool)
        fields = column_fields(cols, self.axis, rows)
        xs = np.unique(cols[self.axis].astype(float))
        for f, x in zip(fields, xs, strict=True):
            f["x"] = float(x)
        z = margins(fields)
        if spec.tune_x is not None:
            i = int(np.argmin(np.abs(xs - spec.tune_x)))
        else:
            free = np.flatnonzero(z >= spec.free_z)
            pool = free[z[free] == z[free].min()] if len(free) else np.flatnonzero(z == z.max())
            i = int(pool[len(pool) // 2])
        return fields[i], float(z[i])

    def _tune_cells(self, spec, fields: dict, lrs, stage: str = "tune") -> list[dict]:
        n = _tune_N(spec)
        update = dict(seed=spec.seed + TUNE_SEED, seeds=1, reps=spec.tune_reps)
        if self.axis.startswith("model.") and stage != "tune":  # the linear learner has no model-field axis
            tune = spec.model_copy(update=update)
        else:
            tune = self._at(spec, fields, **update)
        tune = tune.model_copy(update={"data": tune.data | {"N": n}, "train": tune.train | {"lr": list(lrs)}})
        return self._expand(tune, stage)

    def _floor_spec(self, spec):
        """The linear learner on the mean token, same data fields and recipe, common draws."""
        return spec.model_copy(update={"model": {"name": "li2023-linear"}})

    @staticmethod
    def _expand(spec, stage: str) -> list[dict]:
        """The cells of ``spec`` tagged ``stage``; under ``one_pass`` each takes ⌈N/b⌉ steps."""
        cells = expand(spec, [({"stage": stage}, {})])
        if spec.one_pass:  # each sample seen once: ⌈N/b⌉ steps of batch b
            for c in cells:
                c["train.max_steps"] = -(-c["data.N"] // (c["train.batch_size"] or c["data.N"]))
        return cells

    def cells(self, spec) -> list[dict]:
        """The grid (its lr is the tuning stage's choice once that has run)."""
        spec = self._common(spec)
        grid = self._expand(spec, "grid")  # validated before any tuning run is written
        if self.axis == "data.alpha_star":
            check_counts(grid, spec.max_confusion_ratio)
        return grid

    @staticmethod
    def _common(spec):
        return spec.model_copy(update={"train": spec.train | {"draws": "common"}})  # learners on the same draws

    def stages(self, spec):
        grid = self.cells(spec)
        spec = self._common(spec)
        fields, _ = self.tune_column(grid, spec)
        out, lr = [], float(spec.train["lr"])
        if spec.tune_lr:
            tune = self._tune_cells(spec, fields, spec.tune_lr)
            lr = choose_lr((yield tune), self.axis)["chosen"]
            out += tune
        out += [c | {"train.lr": lr} for c in grid]
        if spec.eta_mults:
            eta = self._at(spec, fields, reps=spec.eta_reps)
            eta = eta.model_copy(
                update={
                    "data": eta.data | {"N": _tune_N(spec)},
                    "train": eta.train | {"lr": [lr * m for m in spec.eta_mults]},
                }
            )
            out += self._expand(eta, "eta")
        if spec.floor:
            floor = self._floor_spec(spec)
            tune = self._tune_cells(floor, fields, spec.floor_lr, stage="floor-tune")
            flr = choose_lr((yield tune), self.axis)["chosen"]
            out += tune + [c | {"train.lr": flr} for c in self._expand(floor, "floor")]
        return out

    def analyse(self, cols, spec) -> Analysis:
        stage = cols["stage"]
        g = stage == "grid"
        x, N = cols[self.axis][g].astype(float), cols["data.N"][g]
        success = cols["test_error"][g] == 0
        summary: dict = {
            "runs": int(g.sum()),
            "success rate": rounded(success.mean(), 4),
            "learning rate": float(cols["train.lr"][g][0]),
        }
        if "model.name" in cols:
            summary["parameters"] = self.n_params(cols, g)
        sub = lambda m: {k: v[m] for k, v in cols.items()}
        if (stage == "tune").any():
            summary["lr tuning (validation runs)"] = choose_lr(sub(stage == "tune"), self.axis)
        xs, fields = np.unique(x), column_fields(cols, self.axis, g)
        z = margins(fields)
        free = z >= spec.free_z
        fit = g.copy()
        fit[g] = np.isin(x, xs[free])
        cs = columns(x, N, success, spec.n_boot, spec.seed)
        summary["columns"] = [
            c.as_dict() | {"z": rounded(zi, 3), "free of the floor": bool(f)}
            for c, zi, f in zip(cs, z, free, strict=True)
        ]
        summary["mean test error per column"] = {
            rounded(v, 6): rounded(cols["test_error"][g][x == v].mean(), 5) for v in xs
        }
        floor = oracle_floor(fields, spec.oracle_n)
        summary["oracle error per column"] = {rounded(v, 6): rounded(e, 5) for v, e in zip(xs, floor, strict=True)}
        summary["mean-token floor"] = self._floor_summary(cols, xs, fields, z, spec)
        summary["columns free of the floor"] = {
            "criterion (set before the run)": f"z ≥ {spec.free_z:g}",
            "values": [rounded(v, 6) for v in xs[free]],
        }
        claims = self._claims(cols, g, fit, [c for c, f in zip(cs, free, strict=True) if f], spec, summary)
        if (stage == "eta").any():
            claims.append(self._eta_claim(sub(stage == "eta"), spec, summary))
        return Analysis(claims=claims, summary=summary)

    @staticmethod
    def n_params(cols, rows) -> int:
        """The parameter count of the model of the first of ``rows`` (trained and the fixed readout)."""
        from attnlab.problem import Composition

        i = int(np.flatnonzero(rows)[0])
        absent = lambda x: x is None or (isinstance(x, float) and np.isnan(x))  # another part's field
        cell = {
            k: (v[i].item() if hasattr(v[i], "item") else v[i])
            for k, v in cols.items()
            if k.split(".")[0] in ("data", "model", "train")
        }
        cell = {k: x for k, x in cell.items() if not absent(x)}
        comp = Composition.of(cell, ())
        return comp.n_params({k: v for k, v in cell.items() if comp.classify(k) == "static"})

    def _floor_summary(self, cols, xs, fields, z, spec) -> dict:
        """Per column: the realised counts, the analytic margin z of the best mean-token rule, its
        chance of zero test errors Φ(z)^n_test, and the linear learner's N_c on the same draws."""
        out = {
            "per column": [
                {
                    "x": rounded(v, 6),
                    "n_star": ldata.n_tokens(f["alpha_star"], f["L"]),
                    "n_hash": ldata.n_tokens(f["alpha_hash"], f["L"]),
                    "z": rounded(zi, 3),
                    "P(zero test errors), best mean-token rule": rounded(ldata.floor_success(zi, f["n_test"]), 4),
                }
                for v, f, zi in zip(xs, fields, z, strict=True)
            ]
        }
        fl = cols["stage"] == "floor"
        if fl.any():
            xf = cols[self.axis][fl].astype(float) if self.axis.startswith("data.") else np.zeros(int(fl.sum()))
            lin = columns(xf, cols["data.N"][fl], cols["test_error"][fl] == 0, spec.n_boot, spec.seed)
            out["linear learner"] = {
                "learning rate": float(cols["train.lr"][fl][0]),
                "columns": [c.as_dict() for c in lin],
            }
            if (cols["stage"] == "floor-tune").any():
                out["linear learner"]["lr tuning"] = choose_lr(
                    {k: v[cols["stage"] == "floor-tune"] for k, v in cols.items()}, self.axis
                )
        return out

    def _eta_claim(self, cols, spec, summary) -> Claim:
        """T ∝ η^−e at the tuning column and N, the capped runs censored: e inside ``iter_margin``."""
        eta = cols["train.lr"].astype(float)
        ok = cols["status"] != "diverged"
        est = iterations(
            np.ones(int(ok.sum())), cols["data.N"][ok], cols["stop_step"][ok], cols["status"][ok] == "cap", eta=eta[ok]
        )
        summary["iterations: e of T ∝ η^−e"] = est.as_dict() | {"runs": int(ok.sum()), "lr": sorted(set(eta.tolist()))}
        return Claim.of(
            "iterations-eta",
            "iterations to zero training hinge loss fall like η⁻¹ (T ∝ η^−e, e = 1)",
            rules.equivalence(est.value, est.lo, est.hi, spec.iter_margin, "e"),
            f"{int(ok.sum())} runs at the tuning column, capped runs censored at the cap",
        )

    @staticmethod
    def law_gate(v: rules.Verdict, n_free: int, spec) -> tuple[rules.Verdict, str]:
        """A law claim is descriptive with fewer than ``min_free_columns`` columns free of the floor."""
        if n_free >= spec.min_free_columns:
            return v, ""
        return (
            rules.Verdict(rules.DESCRIPTIVE, v.measured, v.rule),
            f"descriptive: {n_free} column(s) free of the mean-token floor (z ≥ {spec.free_z:g}), fewer than "
            f"{spec.min_free_columns}; where the floor binds the fit would carry its shape",
        )

    def _claims(self, cols, g, fit, cs, spec, summary) -> list[Claim]:
        raise NotImplementedError

    # ------------------------------------------------------------ figures

    def coordinate(self, x):
        """The diagram's horizontal coordinate of a column value (α_*^(−k) for α_*)."""
        return x**-self.power if self.power else x

    def xlabel(self) -> str:
        if self.axis_name == "alpha_star":
            return f"α_*^−{self.power:g}"
        return {"tau": "token noise τ", "sigma": "initial value error σ", "delta": "initial query/key error δ"}.get(
            self.axis_name, self.axis_name
        )

    def figures(self, cols, spec, analysis: Analysis, out: Path) -> list[Path]:
        g = cols["stage"] == "grid"
        x, N = cols[self.axis][g].astype(float), cols["data.N"][g].astype(float)
        u = self.coordinate(x)
        xs, ys, Z = plots.grid_mean(u, N, (cols["test_error"][g] == 0).astype(float))
        tuned = "lr tuning (validation runs)" in analysis.summary
        fig, axes = plt.subplots(
            1,
            3 if tuned else 2,
            figsize=(14 if tuned else 10, 4),
            constrained_layout=True,
            gridspec_kw={"width_ratios": [2, 1, 1][: 3 if tuned else 2]},
        )
        ax = axes[0]
        log_n = len(ys) > 2 and ys[-1] / ys[0] > 10 and np.ptp(np.diff(np.log(ys))) < 1e-6  # a geometric N grid
        ye = plots.edges(ys, log=log_n)
        m = ax.pcolormesh(plots.edges(xs), ye, Z, cmap="gray", vmin=0, vmax=1, shading="flat")
        fig.colorbar(m, ax=ax, label="success rate (zero test error)")
        crossed = [c for c in analysis.summary["columns"] if c["status"] == CROSSED]
        if crossed:
            cu = self.coordinate(np.array([c["x"] for c in crossed]))
            nc = np.array([c["N_c"] for c in crossed])
            err = np.array(
                [[c["N_c"] - (c["ci95"][0] or c["N_c"]), (c["ci95"][1] or c["N_c"]) - c["N_c"]] for c in crossed]
            ).T
            ax.errorbar(cu, nc, yerr=err, fmt="o", color="tab:red", ms=4, capsize=2, label="N_c (success ½), 95 % CI")
        line = analysis.summary.get("straight line")
        if line and line.get("b") is not None:
            xl = np.linspace(plots.edges(xs)[0], plots.edges(xs)[-1], 100)
            ax.plot(
                xl,
                line["a"] + line["b"] * xl,
                "-",
                color="orange",
                lw=1.5,
                label=f"fit N_c = {line['a']:.0f} + {line['b']:.3g}·{self.xlabel()} (R² {line['r2']:.2f})",
            )
        law = analysis.summary.get("power law")
        if law and law["p"]["value"] is not None and crossed:
            p = law["p"]["value"]
            a_vals = np.linspace(x.min(), x.max(), 100)
            c0 = np.exp(np.mean(np.log(nc) + p * np.log([c["x"] for c in crossed])))
            ax.plot(
                self.coordinate(a_vals),
                c0 * a_vals**-p,
                "--",
                color="tab:cyan",
                lw=1.3,
                label=f"power law N_c ∝ α_*^−{p:.2f}",
            )
        floor = analysis.summary["mean-token floor"]
        edges = plots.edges(xs)
        bound = [c for c in analysis.summary["columns"] if not c["free of the floor"]]
        for k, c in enumerate(bound):  # the floor binds: hatched, not fitted
            i = int(np.argmin(np.abs(xs - self.coordinate(c["x"]))))
            ax.axvspan(
                edges[i],
                edges[i + 1],
                fill=False,
                hatch="//",
                edgecolor="tab:orange",
                lw=0,
                label=f"floor binds (z < {spec.free_z:g}): not fitted" if k == 0 else None,
            )
        lin = [c for c in floor.get("linear learner", {}).get("columns", []) if c["status"] == CROSSED]
        if lin and self.axis.startswith("data."):
            ax.plot(
                self.coordinate(np.array([c["x"] for c in lin])),
                [c["N_c"] for c in lin],
                "D",
                color="tab:green",
                ms=4,
                label="linear learner on the mean token: N_c",
            )
        ax.set_ylim(ye[0], ye[-1])
        if log_n:
            ax.set_yscale("log")
            ax.set_yticks(ys, [f"{y:g}" for y in ys])
        ax.set_xlabel(self.xlabel())
        ax.set_ylabel("training samples N")
        ax.set_title(f"{self.title.split(':')[0]}: success rate (white = always)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.15), ncol=2)
        ax = axes[1]
        cx = np.unique(x)
        orc = list(analysis.summary["oracle error per column"].values())
        lrn = list(analysis.summary["mean test error per column"].values())
        ax.plot(self.coordinate(cx), np.maximum(lrn, 1e-5), "o-", label="learner: mean test error")
        ax.plot(self.coordinate(cx), np.maximum(orc, 1e-5), "s--", color="k", label="oracle per-token rule")
        from scipy.stats import norm

        zs = np.array([c["z"] for c in floor["per column"]])
        ax.plot(
            self.coordinate(cx),
            np.maximum(norm.sf(zs), 1e-5),
            "^:",
            color="tab:orange",
            label="best mean-token rule: Φ(−z)",
        )
        fl = cols["stage"] == "floor"
        if fl.any() and self.axis.startswith("data."):
            xf = cols[self.axis][fl].astype(float)
            err = [cols["test_error"][fl][xf == v].mean() for v in cx]
            ax.plot(
                self.coordinate(cx),
                np.maximum(err, 1e-5),
                "D-",
                color="tab:green",
                ms=4,
                label="linear learner: mean test error",
            )
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
        table.append(
            {
                "lr": float(v),
                "val_error": rounded(cols["test_error"][s].mean(), 5),
                "val_loss": rounded(np.nanmean(cols["test_loss"][s]), 5),
                "diverged": int(np.sum(cols["status"][s] == "diverged")),
                "runs": int(s.sum()),
            }
        )
    ok = [r for r in table if r["val_error"] is not None and r["diverged"] == 0] or table
    best = min(ok, key=lambda r: (r["val_error"], r["val_loss"] if r["val_loss"] is not None else np.inf))
    where = {axis: float(cols[axis][0])} if axis in cols and cols[axis][0] is not None else {}
    return {"chosen": best["lr"], "table": table, "where": where | {"N": int(cols["data.N"][0])}}
