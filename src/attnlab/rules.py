"""Pass rules: turn a measured statistic and its interval into a verdict.

Every rule returns a :class:`Verdict` whose outcome is ``"pass"``, ``"fail"`` or ``"inconclusive"``;
a claim whose rule its design cannot decide is reported as ``"descriptive"`` (a measurement with
its interval, no verdict: never counted as passing or failing).
A rule fails only when the data speak *against* the claim (e.g. the interval lies wholly outside the
margin); when the data are merely too thin to decide, the verdict is inconclusive. The ``rule``
string states the rule with its thresholds so a report can print it verbatim.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

PASS, FAIL, INCONCLUSIVE, DESCRIPTIVE = "pass", "fail", "inconclusive", "descriptive"
# where a verdict holds: the paper's stated protocol, a regime satisfying the theorem's
# hypotheses, or an investigation outside them chosen to make a phenomenon measurable
REGIMES = ("protocol", "theorem", "investigation")


def _num(x):
    """JSON-friendly number: python int/float, None for NaN/inf."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = float(x)
    return x if math.isfinite(x) else None


def _jsonable(d: Mapping) -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out[k] = _jsonable(v)
        elif isinstance(v, (list, tuple)):
            out[k] = [_num(x) for x in v]
        else:
            out[k] = _num(v)
    return out


def _fmt(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class Verdict:
    """Outcome of one pass rule: the outcome, the numbers judged, the rule as a sentence, and why."""

    outcome: str
    measured: dict = field(default_factory=dict)
    rule: str = ""
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome == PASS

    def as_dict(self) -> dict:
        return {"outcome": self.outcome, "measured": self.measured, "rule": self.rule, "detail": self.detail}

    def reported(self, why: str) -> Verdict:
        """This verdict as a measurement its design cannot decide: descriptive, with the rule's
        outcome kept beside the numbers (``rule_outcome``) and ``why`` as the reason."""
        return Verdict(DESCRIPTIVE, self.measured | {"rule_outcome": self.outcome}, self.rule, why)


def equivalence(value: float, lo: float, hi: float, margin: tuple[float, float], name: str = "value") -> Verdict:
    """Interval-inclusion (equivalence) test: does the interval [lo, hi] lie inside the margin [a, b]?

    pass: a ≤ lo and hi ≤ b; fail: hi < a or lo > b (interval disjoint from the margin, so the
    data exclude every value the claim allows); inconclusive: the interval straddles a margin edge,
    or no finite interval exists."""
    a, b = margin
    rule = f"95% interval of {name} inside [{_fmt(a)}, {_fmt(b)}]"
    measured = _jsonable({name: value, "ci95": [lo, hi], "margin": [a, b]})
    if not (np.isfinite(value) and np.isfinite(lo) and np.isfinite(hi)):
        return Verdict(INCONCLUSIVE, measured, rule, "no estimate: the value or its interval is not finite")
    lo, hi = min(lo, hi), max(lo, hi)
    if a <= lo and hi <= b:
        return Verdict(PASS, measured, rule)
    if hi < a or lo > b:
        return Verdict(FAIL, measured, rule, f"interval [{lo:.4g}, {hi:.4g}] lies outside the margin")
    return Verdict(INCONCLUSIVE, measured, rule, f"interval [{lo:.4g}, {hi:.4g}] straddles a margin edge")


def sign_test(
    diffs: Sequence[float], alternative: str = "greater", alpha: float = 0.05, name: str = "difference"
) -> Verdict:
    """Paired sign test over repeats: is the difference consistently in the claimed direction?

    A repeat is a success when diff > 0 (alternative ``"greater"``) or diff < 0 (``"less"``); ties
    and NaNs count as failures (conservative: dropping them would make the test easier to pass).
    With k successes out of n, p = P(X ≥ k), X ~ Binomial(n, ½) (exact one-sided binomial test).
    pass: p < α; fail: k ≤ n/2 (the majority is not in the claimed direction); else inconclusive."""
    if alternative not in ("greater", "less"):
        raise ValueError(f"alternative must be 'greater' or 'less', not {alternative!r}")
    d = np.asarray(diffs, float).ravel()
    n = len(d)
    hits = d > 0 if alternative == "greater" else d < 0  # NaN compares False: a failure
    k = int(np.sum(hits))
    sym = ">" if alternative == "greater" else "<"
    rule = f"one-sided sign test of {name} {sym} 0 over repeats (ties count against), p < {_fmt(alpha)}"
    if n == 0:
        return Verdict(INCONCLUSIVE, _jsonable({"successes": 0, "n": 0, "p_value": np.nan}), rule, "no repeats")
    p = stats.binomtest(k, n, 0.5, alternative="greater").pvalue
    measured = _jsonable({"successes": k, "n": n, "p_value": p})
    if p < alpha:
        return Verdict(PASS, measured, rule)
    if k <= n / 2:
        return Verdict(FAIL, measured, rule, f"only {k} of {n} repeats have {name} {sym} 0")
    return Verdict(
        INCONCLUSIVE, measured, rule, f"{k} of {n} repeats in the claimed direction, p = {p:.3g} ≥ {_fmt(alpha)}"
    )


def ordering(estimates: Mapping[str, tuple[float, float, float]], order: Sequence[str]) -> Verdict:
    """Claim order[0] < order[1] < …, judged on interval separation of consecutive pairs.

    With (value, lo, hi) per name: a pair (a, b) is *right* when hi_a < lo_b and *wrong* when
    hi_b < lo_a. pass: every pair right; fail: any pair wrong; else inconclusive (overlap or no
    interval)."""
    rule = "95% intervals strictly ordered " + " < ".join(order) + " (consecutive intervals disjoint)"
    measured = _jsonable({k: {"value": v[0], "ci95": [v[1], v[2]]} for k, v in estimates.items() if k in order})
    missing = [k for k in order if k not in estimates]
    if missing:
        return Verdict(INCONCLUSIVE, measured, rule, f"no estimate for {', '.join(missing)}")
    wrong, unsure = [], []
    for a, b in zip(order[:-1], order[1:], strict=True):
        (_, lo_a, hi_a), (_, lo_b, hi_b) = estimates[a], estimates[b]
        if not all(np.isfinite([lo_a, hi_a, lo_b, hi_b])):
            unsure.append(f"{a}/{b}: no interval")
        elif hi_a < lo_b:
            continue
        elif hi_b < lo_a:
            wrong.append(f"{b} < {a}")
        else:
            unsure.append(f"{a}/{b}: intervals overlap")
    if wrong:
        return Verdict(FAIL, measured, rule, "wrong order: " + "; ".join(wrong))
    if unsure:
        return Verdict(INCONCLUSIVE, measured, rule, "; ".join(unsure))
    return Verdict(PASS, measured, rule)


def held_out(k: int, n: int, min_fraction: float, alpha: float = 0.05, name: str = "held-out cells") -> Verdict:
    """Share of held-out cells satisfying a prediction, with a Clopper–Pearson (exact) interval.

    p̂ = k/n and [L, U] the exact (1−α) interval from the binomial. pass: p̂ ≥ f and L ≥ f − 0.1
    (an exact lower bound ≥ f would need many cells, so 0.1 of slack is allowed); fail: U < f
    (even the most favourable share consistent with the data misses f); else inconclusive."""
    level = 1 - alpha
    rule = (
        f"share of {name} ok ≥ {_fmt(min_fraction)} and its {level:.0%} Clopper–Pearson lower bound "
        f"≥ {_fmt(min_fraction - 0.1)}; fail if the upper bound < {_fmt(min_fraction)}"
    )
    if n == 0:
        return Verdict(
            INCONCLUSIVE,
            _jsonable({"ok": 0, "n": 0, "fraction": np.nan, "ci": [np.nan, np.nan]}),
            rule,
            "no held-out cells",
        )
    if not 0 <= k <= n:
        raise ValueError(f"need 0 ≤ k ≤ n, got k={k}, n={n}")
    low, high = clopper_pearson(k, n, level)
    frac = k / n
    measured = _jsonable({"ok": k, "n": n, "fraction": frac, "ci": [low, high]})
    if frac >= min_fraction and low >= min_fraction - 0.1:
        return Verdict(PASS, measured, rule)
    if high < min_fraction:
        return Verdict(FAIL, measured, rule, f"{k}/{n} ok; upper bound {high:.3g} < {_fmt(min_fraction)}")
    return Verdict(INCONCLUSIVE, measured, rule, f"{k}/{n} ok, interval [{low:.3g}, {high:.3g}]: too few cells")


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper–Pearson) two-sided interval of a binomial proportion k/n ((0, 1) for n = 0)."""
    if n == 0:
        return 0.0, 1.0
    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="exact")
    return float(ci.low), float(ci.high)


def t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float, float]:
    """Mean over K independent seed blocks and its t interval: x̄ ± t_{K−1, (1+level)/2} · s/√K.

    Non-finite block values (a fit that failed in that block) are dropped before counting K.
    Returns (mean, lo, hi, sd); lo = hi = NaN when K < 2 (sd NaN too)."""
    v = np.asarray(values, float).ravel()
    v = v[np.isfinite(v)]
    K = len(v)
    if K == 0:
        return np.nan, np.nan, np.nan, np.nan
    mean = float(v.mean())
    if K < 2:
        return mean, np.nan, np.nan, np.nan
    sd = float(v.std(ddof=1))
    half = stats.t.ppf((1 + level) / 2, K - 1) * sd / math.sqrt(K)
    return mean, mean - half, mean + half, sd


def no_effect(value: float, lo: float, hi: float, band: float, name: str = "effect") -> Verdict:
    """An equivalence band for a "flat" / "no effect" claim: the interval of the effect lies
    within ±band (pass), wholly outside it (fail), or straddles an edge (inconclusive). With a
    95 % interval this is the two one-sided tests (TOST) at level 0.025 each."""
    v = equivalence(value, lo, hi, (-band, band), name)
    return Verdict(v.outcome, v.measured, f"no effect: {v.rule} (an equivalence band of ±{_fmt(band)})", v.detail)


def likelihood_ratio(log_lr: float, favoured: str, against: str, threshold: float = math.log(32)) -> Verdict:
    """A decision between two models by their log-likelihood ratio log LR = ℓ(favoured) − ℓ(against):
    pass when log LR ≥ threshold (default log 32, "strong evidence"), fail when ≤ −threshold,
    else inconclusive (the data do not separate them)."""
    rule = f"log-likelihood ratio of {favoured} over {against} ≥ {threshold:.3g} (fail ≤ −{threshold:.3g})"
    measured = _jsonable({"log_lr": log_lr, "threshold": threshold})
    if not np.isfinite(log_lr):
        return Verdict(INCONCLUSIVE, measured, rule, "no likelihood ratio")
    if log_lr >= threshold:
        return Verdict(PASS, measured, rule)
    if log_lr <= -threshold:
        return Verdict(FAIL, measured, rule, f"{against} fits better (log LR {log_lr:.3g})")
    return Verdict(INCONCLUSIVE, measured, rule, f"log LR {log_lr:.3g}: the data do not separate the two")
