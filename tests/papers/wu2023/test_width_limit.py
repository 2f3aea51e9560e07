"""wu2023-width and wu2023-ntk-limit: the analysis helpers and every claim on synthetic columns
(each passes on data shaped like the theory and fails on data made to break it), the step of
the width grid, and both experiments end to end at smoke scale."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from attnlab.experiments.li2023 import phase
from attnlab.experiments.wu2023 import limit, width
from attnlab.experiments.wu2023.limit import LIMIT
from attnlab.experiments.wu2023.width import WIDTH

N_BOOT = 60


def outcomes(analysis):
    return {c.id: c.outcome for c in analysis.claims}


# ---------------------------------------------------------------- width: synthetic runs


def width_cols(k, C=2.0, Ns=(2, 3, 4, 6, 8), reps=8, noise=0.25, alphas=(0.5, 1.0), seed=0):
    """Columns of a width grid whose runs reach the target iff log d_m > log C + k log N + noise."""
    rng = np.random.default_rng(seed)
    d_grid = np.unique(np.round(np.geomspace(1, 4096, 25)).astype(int))
    a, n, d = (g.ravel() for g in np.meshgrid(np.asarray(alphas), np.asarray(Ns), d_grid, indexing="ij"))
    a, n, d = (np.repeat(x, reps) for x in (a, n, d))
    ok = np.log(d) > np.log(C) + k * np.log(n) + noise * rng.standard_normal(len(d))
    initial = rng.uniform(0.5, 2.0, len(d))
    final = np.where(ok, initial * 1e-6, initial * 0.3)
    return {
        "model.alpha": a, "data.N": n, "model.d_m": d, "train_loss": final,
        "trace_train_loss": np.array([[i, f] for i, f in zip(initial, final, strict=True)], dtype=object),
        "status": np.array(["cap"] * len(d), dtype=object), "train.max_steps": np.full(len(d), 100),
    }  # fmt: skip


def test_reached_is_the_loss_ratio_and_never_a_diverged_run():
    cols = {"train_loss": np.array([1e-4, 1e-2, np.nan, 1e-4]),
            "trace_train_loss": np.array([[1.0, 0.5], [1.0, 0.1], [1.0, np.nan], [1.0, 1.0]], dtype=object),
            "status": np.array(["cap", "cap", "diverged", "diverged"], dtype=object)}  # fmt: skip
    assert width.reached(cols, 1e-3).tolist() == [True, False, False, False]


@pytest.mark.parametrize("k", [0.5, 1.5, 3.0])
def test_power_law_recovers_the_exponent(k):
    cols = width_cols(k, alphas=(1.0,))
    cs = phase.columns(cols["data.N"], cols["model.d_m"], width.reached(cols, 1e-3), N_BOOT, seed=0)
    assert all(c.status == phase.CROSSED for c in cs)
    law = width.power_law(cs, 3)
    assert law["k"] == pytest.approx(k, abs=0.3)
    assert law["ci95"][0] < law["k"] < law["ci95"][1] and law["n_boot_used"] >= 20
    assert width.power_law(cs, 6)["k"] is None  # fewer crossed columns than asked for: no law


def test_global_exponent_matches_the_boundary():
    cols = width_cols(1.0, alphas=(1.0,))
    g = width.global_exponent(cols["data.N"], cols["model.d_m"], width.reached(cols, 1e-3), N_BOOT, 0)
    assert g["k"] == pytest.approx(1.0, abs=0.3) and g["ci95"][0] < g["k"] < g["ci95"][1]


def test_width_claims_pass_below_the_bound_and_fail_above_it():
    spec = WIDTH.spec("cpu", ["n_boot=60"])
    good = outcomes(WIDTH.analyse(width_cols(0.5), spec))
    assert good == {"quadratic-a0.5": "pass", "cubic-a0.5": "pass", "quadratic-a1": "pass"}
    bad = outcomes(WIDTH.analyse(width_cols(3.8, C=0.05, noise=0.1), spec))
    assert bad == {"quadratic-a0.5": "fail", "cubic-a0.5": "fail", "quadratic-a1": "fail"}
    mid = outcomes(WIDTH.analyse(width_cols(2.5, C=0.2, noise=0.1), spec))
    assert mid["quadratic-a1"] == "fail" and mid["cubic-a0.5"] == "pass"


def test_width_claims_are_inconclusive_without_crossings():
    cols = width_cols(0.5, C=1e4)  # every run fails: all columns above the grid
    assert set(outcomes(WIDTH.analyse(cols, WIDTH.spec("cpu", ["n_boot=20"]))).values()) == {"inconclusive"}


def test_width_cells_use_the_capped_width_normalised_step():
    spec = WIDTH.spec("cpu", ["d_m=4,16,64", "N=8", "alpha=1"])
    assert {c["model.d_m"]: c["train.lr"] for c in WIDTH.cells(spec)} == {4: 1.0, 16: 1.0, 64: 0.25}
    spec = WIDTH.spec("cpu", ["d_m=4", "N=8", "alpha=1", "step_cap=4", "gamma=2"])
    assert {c["train.lr"] for c in WIDTH.cells(spec)} == {4.0}


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
                    rows.append({"model.alpha": a, "data.token_norm": tn, "model.d_m": w, "ntk_error": err,
                                 "qk_share": 0.01, "logit_std": std, "attn_tv": tv, "attn_entropy": 2.0,
                                 "n_ntk": 16})  # fmt: skip
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
    t = _check_run(run.out, WIDTH, v, ["quadratic-a0.5", "cubic-a0.5", "quadratic-a1"])
    assert v["cells"] == 16 and len(t) == 16
    assert set(t["train.lr"]) == {1.0}  # d_m = 2, 8: the width-normalised step capped at γ = 1
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
