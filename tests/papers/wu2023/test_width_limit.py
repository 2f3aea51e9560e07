"""wu2023-width and wu2023-ntk-limit: the analysis helpers and every claim on synthetic columns
(each passes on data shaped like the theory and fails on data made to break it), the step of
the width grid, and both experiments end to end at smoke scale."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from attnlab.experiments.wu2023 import limit, width
from attnlab.experiments.wu2023.limit import LIMIT
from attnlab.experiments.wu2023.width import WIDTH

N_BOOT = 60


def outcomes(analysis):
    return {c.id: c.outcome for c in analysis.claims}


# ---------------------------------------------------------------- width: synthetic runs

D_GRID = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
LOG_64 = float(np.log(64))


def width_cols(k, level=LOG_64, Ns=(8, 16, 32), reps=4, sigma=0.15, alphas=(0.5, 1.0), seed=0):
    """Columns of a width grid: each repeat has a lazy width log d* = level + k·(log N − log 16) + σ·ε;
    a run's peak kernel drift is 0.1·d*/d_m (lazy iff d_m ≥ d*); lazy runs reach the loss target."""
    rng = np.random.default_rng(seed)
    a, n, r, d = (
        g.ravel()
        for g in np.meshgrid(np.asarray(alphas), np.asarray(Ns), np.arange(reps), np.asarray(D_GRID), indexing="ij")
    )
    star = {}
    for key in zip(a, n, r, strict=True):
        star.setdefault(key, level + k * (np.log(key[1]) - np.log(16)) + sigma * rng.standard_normal())
    log_star = np.array([star[key] for key in zip(a, n, r, strict=True)])
    peak = 0.1 * np.exp(log_star - np.log(d))
    initial = rng.uniform(0.5, 2.0, len(d))
    final = np.where(peak <= 0.1, initial * 1e-6, initial * 0.3)
    obj = lambda rows: np.array([np.asarray(x, float) for x in rows] + [None], dtype=object)[:-1]
    lr = 16 / d
    lam_min = 0.01 * n / lr  # γ_eff·λ_min(K₀)/N = 0.01: the bound (0.99)^(2t) lies above every lazy run's loss
    return {
        "model.alpha": a,
        "data.N": n,
        "data.d": np.full(len(d), 32),
        "model.d_m": d,
        "train.lr": lr,
        "block": np.zeros(len(d), int),
        "rep": r,
        "train_loss": final,
        "trace_step": obj([[0, 100]] * len(d)),
        "trace_train_loss": obj([[i, f] for i, f in zip(initial, final, strict=True)]),
        "trace_kernel_drift": obj([[0.0, p] for p in peak]),
        "trace_kernel_drift_op": obj([[0.0, p * 50 * lm] for p, lm in zip(peak, lam_min, strict=True)]),
        "trace_lambda_min": obj([[x, x] for x in lam_min]),
        "trace_lambda_max": obj([[50 * x, 50 * x] for x in lam_min]),
        "status": np.array(["cap"] * len(d), dtype=object),
        "train.max_steps": np.full(len(d), 100),
    }


def test_lazy_is_the_peak_drift_and_never_a_diverged_run():
    obj = lambda rows: np.array([np.asarray(x, float) for x in rows] + [None], dtype=object)[:-1]
    cols = {
        "train_loss": np.array([1e-4, 1e-4, np.nan, 1e-4]),
        "trace_train_loss": obj([[1.0, 0.5], [1.0, 0.1], [1.0, np.nan], [1.0, 1.0]]),
        "trace_kernel_drift": obj([[0.0, 0.05], [0.2, 0.05], [0.0, 0.01], [0.0, np.nan]]),
        "status": np.array(["cap", "cap", "diverged", "cap"], dtype=object),
    }
    assert width.lazy(cols, 0.1).tolist() == [True, False, False, False]  # the peak, not the last value
    assert width.reached(cols, 1e-3).tolist() == [True, True, False, True]  # the final loss column


def test_thresholds_are_interval_censored_per_repeat():
    cols = width_cols(1.0, alphas=(1.0,), reps=1, Ns=(8,), sigma=0.0, level=np.log(64) + np.log(8 / 16) + 0.1)
    x, lo, hi = width.thresholds(cols, width.lazy(cols, 0.1), np.ones(len(cols["data.N"]), bool))
    assert np.exp(lo).round().tolist() == [16] and np.exp(hi).round().tolist() == [32]  # d* ≈ 17.7
    every = width_cols(1.0, alphas=(1.0,), reps=1, Ns=(8,), level=-5.0)
    none = width_cols(1.0, alphas=(1.0,), reps=1, Ns=(8,), level=20.0)
    sel = np.ones(len(D_GRID), bool)
    assert np.isneginf(width.thresholds(every, width.lazy(every, 0.1), sel)[1]).all()
    assert np.isposinf(width.thresholds(none, width.lazy(none, 0.1), sel)[2]).all()


@pytest.mark.parametrize("k", [1.0, 2.0, 3.0])
def test_the_censored_law_recovers_the_exponent(k):
    cols = width_cols(k, alphas=(1.0,), reps=6)
    fit = width.law(cols, width.lazy(cols, 0.1), np.ones(len(cols["data.N"]), bool), 0.95)
    assert fit["k"] == pytest.approx(k, abs=0.35) and fit["ci"][0] < fit["k"] < fit["ci"][1]


def test_width_claims_pass_below_the_bound_and_fail_above_it():
    """The bound rules, judged (``judge_bounds``); by default they are reported with their outcome."""
    reported = WIDTH.analyse(width_cols(3.0, level=np.log(48)), WIDTH.spec("cpu"))
    q = next(c for c in reported.claims if c.id == "quadratic-a0.5")
    assert q.outcome == "descriptive" and q.measured["rule_outcome"] == "fail" and "power" in q.detail
    spec = WIDTH.spec("cpu", ["judge_bounds=true"])
    theorem = {f"{c}-{a}": "descriptive" for c in ("laziness", "drift-law") for a in ("a0.5", "a1")}
    assert outcomes(WIDTH.analyse(width_cols(1.0), spec)) == theorem | {
        "theorem-a0.5": "pass",
        "quadratic-a0.5": "pass",
        "cubic-a0.5": "pass",
        "exponent-a0.5": "descriptive",
        "target-width-a0.5": "descriptive",
        "theorem-a1": "pass",
        "quadratic-a1": "pass",
        "exponent-a1": "descriptive",
        "target-width-a1": "descriptive",
    }
    cubic = outcomes(WIDTH.analyse(width_cols(3.0, level=np.log(48)), spec))
    assert cubic["quadratic-a0.5"] == cubic["quadratic-a1"] == "fail" and cubic["cubic-a0.5"] == "pass"
    quartic = outcomes(WIDTH.analyse(width_cols(4.0, level=np.log(40), reps=6, sigma=0.05), spec))
    assert quartic["cubic-a0.5"] == "fail"


def theorem_cols(c=1.5, form="geometric", Ns=(4, 8), widths=(16, 64, 256), reps=3, seed=0):
    """Runs of the width grid whose loss follows ``form`` about the bound's rate u = γ_eff·λ_min(K₀)/N
    = 0.01 (:func:`attnlab.experiments.wu2023.audit.width.theorem_loss`), logged every 10 epochs."""
    from attnlab.experiments.wu2023.audit.width import theorem_loss

    rng = np.random.default_rng(seed)
    n, d, r = (g.ravel() for g in np.meshgrid(np.asarray(Ns), np.asarray(widths), np.arange(reps), indexing="ij"))
    t = np.arange(0, 401, 10.0)
    lr = 16 / d
    u = np.full(len(d), 0.01)
    L = 0.5 * theorem_loss({"form": form, "c": c}, u, np.full(len(d), 0.5), t, rng)
    lam_min = u * n / lr
    obj = lambda rows: np.array([np.asarray(x, float) for x in rows] + [None], dtype=object)[:-1]
    const = lambda v: obj([np.full(len(t), x) for x in v])
    drift = 0.3 * lam_min * (d / 16.0) ** -0.5 * (n / 4.0)
    return {
        "model.alpha": np.full(len(d), 0.5),
        "data.N": n,
        "data.d": np.full(len(d), 32),
        "model.d_m": d,
        "train.lr": lr,
        "block": np.zeros(len(d), int),
        "rep": r,
        "train_loss": L[:, -1],
        "trace_step": obj([t] * len(d)),
        "trace_train_loss": obj(L),
        "trace_kernel_drift": const(0.01 * (d / 16.0) ** -0.5),
        "trace_kernel_drift_op": obj([x * (1 - np.exp(-t / 50)) for x in drift]),
        "trace_lambda_min": const(lam_min),
        "trace_lambda_max": const(50 * lam_min),
        "status": np.array(["cap"] * len(d), dtype=object),
        "train.max_steps": np.full(len(d), 400),
    }


def test_the_width_theorem_is_judged_in_its_regime_only():
    """theorem-a0.5: the runs with d_m ≥ N² and d ≥ N (here N = 4 at 16 … 256, N = 8 at 64, 256)
    stay under L_t ≤ (1 − γ_eff·λ_min(K₀)/N)^(2t)·L_0 — pass when the slow part decays at 1.5× the
    bound's rate; fail at the rate of λ_min(K₀)/2 (a drifted kernel) and under an O(1/t) decay;
    a power-law kernel spectrum above λ_min passes. The proofs' criterion and the drift law are
    reported: q = peak ‖K_t − K₀‖_op/(λ_min(K₀)/2) ∝ d_m^−1/2·N (so its width ∝ N²)."""
    spec = WIDTH.spec("cpu")
    get = lambda cols, cid: next(c for c in WIDTH.analyse(cols, spec).claims if c.id == cid)
    good = get(theorem_cols(), "theorem-a0.5")
    assert good.outcome == "pass" and good.regime == "theorem"
    assert good.measured["runs in the regime"] == 15 and good.measured["over the bound"] == 0
    assert set(good.measured["per (N, d_m)"]) == {
        "N=4, d_m=16",
        "N=4, d_m=64",
        "N=4, d_m=256",
        "N=8, d_m=64",
        "N=8, d_m=256",
    }
    assert get(theorem_cols(c=0.5), "theorem-a0.5").outcome == "fail"
    assert get(theorem_cols(form="power"), "theorem-a0.5").outcome == "fail"
    assert get(theorem_cols(form="spectrum"), "theorem-a0.5").outcome == "pass"
    assert get(theorem_cols(Ns=(16,)), "theorem-a0.5").outcome == "inconclusive"  # 16² > 256: no run in the regime
    law = get(theorem_cols(), "drift-law-a0.5").measured
    assert law["b_d"] == pytest.approx(-0.5, abs=0.01) and law["b_N"] == pytest.approx(1.0, abs=0.01)
    assert law["k = −b_N/b_d"] == pytest.approx(2.0, abs=0.05)
    laz = get(theorem_cols(), "laziness-a0.5")
    assert laz.outcome == "descriptive" and laz.measured["runs in the regime"] == 15


def test_width_claims_are_inconclusive_when_no_width_is_lazy():
    cols = width_cols(1.0, level=30.0)  # every threshold above the grid: k is not bounded
    got = outcomes(WIDTH.analyse(cols, WIDTH.spec("cpu", ["judge_bounds=true"])))
    assert {got[c] for c in ("quadratic-a0.5", "cubic-a0.5", "quadratic-a1")} == {"inconclusive"}


def test_width_cells_use_the_capped_width_normalised_step():
    spec = WIDTH.spec("cpu", ["d_m=4,16,64", "N=8", "alpha=1"])
    assert {c["model.d_m"]: c["train.lr"] for c in WIDTH.cells(spec)} == {4: 1.0, 16: 1.0, 64: 0.25}
    spec = WIDTH.spec("cpu", ["d_m=4", "N=8", "alpha=1", "step_cap=4", "gamma=2"])
    assert {c["train.lr"] for c in WIDTH.cells(spec)} == {4.0}


def test_width_cpu_grid_separates_the_laws_and_meets_the_premise():
    """d ≥ N, N over a factor 4, widths from below N to N² of the largest N."""
    spec = WIDTH.spec("cpu")
    Ns, widths = spec.data["N"], spec.model["d_m"]
    assert spec.data["d"] >= max(Ns) and max(Ns) / min(Ns) >= 4
    assert min(widths) < min(Ns) and max(widths) >= max(Ns) ** 2


# ---------------------------------------------------------------- limit: synthetic cells


def limit_cols(broken=False, widths=(64, 256, 1024, 4096), reps=4, seed=0):
    """Cells shaped like the theory (or, with ``broken``, against every claim)."""
    rng = np.random.default_rng(seed)
    rows = []
    for a in (0.5, 1.0):
        for tn in ("d", "unit"):
            for w in widths:
                for _ in range(reps):
                    z = lambda: np.exp(0.05 * rng.standard_normal())  # noqa: E731
                    scale = 1.0 if tn == "d" else 1 / 16
                    if not broken:
                        err = (0.8 * w**-0.5 if a == 1 else 0.4) * z()
                        std = scale * w ** (0.5 - a) * z()
                        tv = (0.3 if tn == "d" else 0.025) * (w**-0.5 * 8 if a == 1 else 1) * z()
                    else:
                        err = (0.3 if a == 1 else 0.01 * w**-0.5) * z()
                        std = scale * w ** (-0.5 if a == 0.5 else 0.0) * z()
                        tv = 0.3 * z() if tn == "unit" or a == 1 else 0.31 * z()
                    rows.append(
                        {
                            "model.alpha": a,
                            "data.token_norm": tn,
                            "model.d_m": w,
                            "ntk_error": err,
                            "qk_share": 0.01,
                            "logit_std": std,
                            "attn_tv": tv,
                            "attn_entropy": 2.0,
                            "n_ntk": 16,
                        }
                    )
    return {k: np.array([r[k] for r in rows], dtype=object if k == "data.token_norm" else None) for k in rows[0]}


def test_loglog_slope_and_welch():
    w = np.repeat([64, 256, 1024, 4096], 3)
    est = limit.loglog_slope(w, 2.0 * w**-0.5, 50, 0)
    assert est.value == pytest.approx(-0.5) and est.lo == pytest.approx(-0.5) and est.hi == pytest.approx(-0.5)
    assert np.isnan(limit.loglog_slope(np.full(4, 64), np.ones(4), 50, 0).value)
    d, lo, hi = limit.welch(np.array([1.0, 1.1, 0.9]), np.array([0.1, 0.2, 0.0]))
    assert d == pytest.approx(0.9) and lo < 0.9 < hi
    assert np.isnan(limit.welch(np.array([1.0]), np.array([0.0, 1.0]))[1])


def test_limit_claims_pass_on_theory_shaped_cells():
    spec = LIMIT.spec("cpu", ["n_boot=60"])
    a = LIMIT.analyse(limit_cols(), spec)
    assert outcomes(a) == dict.fromkeys(("limit", "logits-a1", "logits-a0.5", "alpha-half", "pitfall"), "pass")
    assert a.summary["largest width"] == 4096


def test_limit_claims_fail_on_broken_cells():
    spec = LIMIT.spec("cpu", ["n_boot=60"])
    assert outcomes(LIMIT.analyse(limit_cols(broken=True), spec)) == dict.fromkeys(
        ("limit", "logits-a1", "logits-a0.5", "alpha-half", "pitfall"), "fail"
    )


def test_limit_claims_without_unit_tokens_are_inconclusive():
    cols = limit_cols()
    keep = cols["data.token_norm"] == "d"
    a = LIMIT.analyse({k: v[keep] for k, v in cols.items()}, LIMIT.spec("cpu", ["n_boot=20"]))
    assert outcomes(a)["pitfall"] == "inconclusive" and outcomes(a)["limit"] == "pass"


# ---------------------------------------------------------------- end to end at smoke scale


def _check_run(out, exp, verdict, claim_ids):
    assert verdict["experiment"] == exp.id and [c["id"] for c in verdict["claims"]] == claim_ids
    assert json.loads((out / "verdict.json").read_text())["cells"] == verdict["cells"]
    assert (out / "report.html").exists() and list(out.glob("*.png")) and list(out.glob("*.pdf"))
    return pq.read_table(out / "results.parquet").to_pandas()


def test_width_smoke(smoke):
    run = smoke(WIDTH.id)  # the session's shared smoke run
    v = run.verdict
    t = _check_run(
        run.out,
        WIDTH,
        v,
        [
            "theorem-a0.5",
            "laziness-a0.5",
            "drift-law-a0.5",
            "quadratic-a0.5",
            "cubic-a0.5",
            "exponent-a0.5",
            "target-width-a0.5",
            "theorem-a1",
            "laziness-a1",
            "drift-law-a1",
            "quadratic-a1",
            "exponent-a1",
            "target-width-a1",
        ],
    )
    assert v["cells"] == 24 and len(t) == 24
    assert all(len(x) >= 2 and abs(x[0]) < 1e-5 for x in t["trace_kernel_drift_op"])  # ‖K_0 − K_0‖_op (float32)
    assert set(t["train.lr"]) == {1.0, 0.5}  # d_m = 2, 8: the width-normalised step capped at γ = 1; 32: 16/32
    assert all(len(x) >= 2 and x[0] > 0 for x in t["trace_train_loss"])


def test_limit_smoke(smoke):
    run = smoke(LIMIT.id)  # the session's shared smoke run
    v = run.verdict
    t = _check_run(run.out, LIMIT, v, ["limit", "logits-a1", "logits-a0.5", "alpha-half", "pitfall"])
    assert v["cells"] == 8 and len(t) == 8 and "params_npz" not in t.columns
    for m in limit.MEASURES:
        assert np.all(np.isfinite(t[m])) and np.all(t[m] >= 0), m
    assert np.all(t["ntk_error"] > 0) and set(t["n_ntk"]) == {6}
    # ‖x‖² ≈ d: the logits of τ₀ = d_m^−1/2 are √d_m = 5.7 times those of d_m^−1 (the same θ₀ law)
    d = t[t["data.token_norm"] == "d"]
    ratio = d[d["model.alpha"] == 0.5]["logit_std"].mean() / d[d["model.alpha"] == 1.0]["logit_std"].mean()
    assert 3 < ratio < 10
