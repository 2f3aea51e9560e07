"""Every pass rule can pass, fail and be inconclusive; the statistics match scipy."""

import json

import numpy as np
import pytest
from scipy import stats

from attnlab import rules
from attnlab.rules import FAIL, INCONCLUSIVE, PASS


def test_verdict_is_json_friendly():
    v = rules.equivalence(np.float64(-2.1), np.float64(-2.4), np.nan, (-3, -1), name="slope")
    assert v.outcome == INCONCLUSIVE and not v.passed and "no estimate" in v.detail
    json.dumps(v.as_dict())
    assert "[-3, -1]" in v.rule and "slope" in v.rule


@pytest.mark.parametrize(
    "lo, hi, outcome",
    [
        (-2.4, -1.6, PASS),
        (-0.9, -0.2, FAIL),
        (-4.0, -3.1, FAIL),
        (-3.3, -1.8, INCONCLUSIVE),
        (-2.5, -0.5, INCONCLUSIVE),
    ],
)
def test_equivalence(lo, hi, outcome):
    v = rules.equivalence((lo + hi) / 2, lo, hi, (-3, -1), name="slope")
    assert v.outcome == outcome
    assert v.measured["ci95"] == [lo, hi]


def test_sign_test_outcomes():
    assert rules.sign_test(np.ones(10)).outcome == PASS  # p = 2⁻¹⁰
    assert rules.sign_test(-np.ones(10)).outcome == FAIL
    assert rules.sign_test([1, 1, 1, -1]).outcome == INCONCLUSIVE  # majority right, p = 5/16
    assert rules.sign_test([1, 1, 1]).outcome == INCONCLUSIVE  # too few repeats: p = 1/8
    assert rules.sign_test([]).outcome == INCONCLUSIVE
    assert rules.sign_test(-np.ones(6), alternative="less").outcome == PASS


def test_sign_test_ties_count_against():
    v = rules.sign_test(np.zeros(10))
    assert v.outcome == FAIL and v.measured["successes"] == 0 and v.measured["n"] == 10
    # 7 of 10 with three ties: dropping ties would give 7/7 (p = 1/128, a pass)
    v = rules.sign_test([1] * 7 + [0, np.nan, 0])
    assert v.measured["n"] == 10 and v.measured["successes"] == 7
    assert v.measured["p_value"] == pytest.approx(stats.binomtest(7, 10, alternative="greater").pvalue)
    assert v.outcome == INCONCLUSIVE


def test_ordering():
    est = {"a": (1, 0.5, 1.5), "b": (3, 2.0, 4.0), "c": (6, 5.0, 7.0)}
    assert rules.ordering(est, ["a", "b", "c"]).outcome == PASS
    assert rules.ordering(est, ["a", "c", "b"]).outcome == FAIL
    overlap = est | {"b": (2, 1.0, 5.5)}
    assert rules.ordering(overlap, ["a", "b", "c"]).outcome == INCONCLUSIVE
    assert rules.ordering(est | {"b": (3, np.nan, np.nan)}, ["a", "b", "c"]).outcome == INCONCLUSIVE
    assert rules.ordering(est, ["a", "z"]).outcome == INCONCLUSIVE
    # a wrong pair fails even if another pair is merely unsure
    assert rules.ordering(overlap, ["c", "a", "b"]).outcome == FAIL  # c > a disjoint; a/b overlap


def test_held_out():
    assert rules.held_out(20, 20, 0.9).outcome == PASS  # lower bound 0.83 ≥ 0.8
    assert rules.held_out(2, 10, 0.9).outcome == FAIL  # upper bound 0.56 < 0.9
    assert rules.held_out(4, 4, 0.9).outcome == INCONCLUSIVE  # lower bound 0.40: too few cells
    v = rules.held_out(0, 0, 0.9)
    assert v.outcome == INCONCLUSIVE and "no held-out" in v.detail
    v = rules.held_out(18, 20, 0.8)
    ci = stats.binomtest(18, 20).proportion_ci(0.95, method="exact")
    assert v.measured["ci"] == pytest.approx([ci.low, ci.high]) and v.measured["fraction"] == 0.9


def test_t_interval_matches_scipy():
    x = np.array([1.9, 2.3, 2.05, 1.7, 2.2])
    mean, lo, hi, sd = rules.t_interval(x)
    ref = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert (lo, hi) == pytest.approx(ref) and mean == pytest.approx(x.mean()) and sd == pytest.approx(x.std(ddof=1))
    _, lo90, hi90, _ = rules.t_interval(x, level=0.9)
    assert (lo90, hi90) == pytest.approx(stats.t.interval(0.9, 4, loc=x.mean(), scale=stats.sem(x)))
    m, lo, hi, sd = rules.t_interval([3.0])
    assert m == 3.0 and np.isnan(lo) and np.isnan(hi)
    assert rules.t_interval([1.0, np.nan, 3.0])[:2] == pytest.approx((2.0, stats.t.interval(0.95, 1, 2, 1)[0]))


def test_no_effect_is_an_equivalence_band():
    assert rules.no_effect(0.01, -0.02, 0.04, band=0.05).outcome == rules.PASS
    assert rules.no_effect(0.2, 0.1, 0.3, band=0.05).outcome == rules.FAIL
    v = rules.no_effect(0.03, -0.01, 0.07, band=0.05, name="slope")
    assert v.outcome == rules.INCONCLUSIVE and "±0.05" in v.rule and "slope" in v.rule


def test_likelihood_ratio_decides_only_on_strong_evidence():
    lr = lambda x: rules.likelihood_ratio(x, "exponential", "power law").outcome
    assert (lr(5.0), lr(-5.0), lr(1.0), lr(float("nan"))) == (
        rules.PASS,
        rules.FAIL,
        rules.INCONCLUSIVE,
        rules.INCONCLUSIVE,
    )
