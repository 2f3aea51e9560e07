"""The claim logic of the experiments, on synthetic result columns: it passes on data that
follow the theory and fails on data that do not."""

import numpy as np

from attnlab.experiments import get
from attnlab.experiments.jiang2024 import data


def fig1_columns(form_exponent, C, seed=0):
    """A grid whose cells succeed (test loss 0.05) iff N·SNR^form_exponent > C (with a little
    noise in the boundary), every cell having reached the training-loss threshold."""
    rng = np.random.default_rng(seed)
    d, sigma_p = 64, 0.2
    mu = np.geomspace(3, 100, 16)
    N = np.arange(2, 21, 2)
    cols = {k: [] for k in ("mu", "N", "test_loss", "status")}
    for m in mu:
        for n in N:
            for _ in range(5):
                s = data.snr(m, sigma_p, d)
                ok = np.log(n) + form_exponent * np.log(s) + 0.2 * rng.standard_normal() > np.log(C)
                cols["mu"].append(m)
                cols["N"].append(n)
                cols["test_loss"].append(0.05 if ok else 0.7)
                cols["status"].append("converged")
    cols = {k: np.asarray(v) for k, v in cols.items()}
    cols["sigma_p"] = np.full(len(cols["mu"]), sigma_p)
    cols["d"] = np.full(len(cols["mu"]), d)
    return cols


def verdicts(exp, cols, scale, **sets):
    spec = exp.spec(scale, [f"{k}={v}" for k, v in sets.items()])
    return {c.id: c for c in exp.analyse(cols, spec).claims}


def test_fig1_claims_pass_on_a_theory_shaped_grid():
    exp = get("jiang2024-fig1")
    v = verdicts(exp, fig1_columns(2, 1000), "cpu", n_boot=100)
    assert all(c.passed for c in v.values()), {k: (c.passed, c.measured) for k, c in v.items()}
    assert abs(v["slope"].measured["value"] + 2) < 0.3


def test_fig1_claims_fail_on_a_wrong_form():
    exp = get("jiang2024-fig1")
    v = verdicts(exp, fig1_columns(1, 60), "cpu", n_boot=100)  # boundary N·SNR = 60
    assert not v["slope"].passed and not v["form"].passed and not v["C"].passed


def test_fig1_harmful_claim_fails_when_low_snr_cells_do_not_fit_the_training_set():
    exp = get("jiang2024-fig1")
    cols = fig1_columns(2, 1000)
    cols["status"] = np.where(cols["test_loss"] > 0.5, "cap", "converged")
    v = verdicts(exp, cols, "cpu", n_boot=50)
    assert v["benign"].passed and not v["harmful"].passed


def fig3_columns(v_first: bool, reps=4):
    """Synthetic traces: sigmoid growth of V-scalars, QK logits and attention with chosen onsets."""
    t = np.arange(0, 501, 5.0)
    grow = lambda start: 1 / (1 + np.exp(-(t - start) / 10)) - 1 / (1 + np.exp(start / 10))
    tv, tq = (20, 120) if v_first else (120, 20)
    cols = {"regime": [], "trace_step": [], "train_loss": [], "test_loss": []}
    traces = {}
    for regime in ("harmful", "benign"):
        for _ in range(reps):
            cols["regime"].append(regime)
            cols["trace_step"].append(t)
            cols["train_loss"].append(0.01)
            cols["test_loss"].append(0.7 if regime == "harmful" else 0.02)
            dominant = 1 / 3 + 0.4 * grow(tq + 10)
            other = 1 / 3 - 0.2 * grow(tq + 10)
            series = {
                "attn_signal_mean": dominant if regime == "benign" else other,
                "attn_strong_mean": other if regime == "benign" else dominant,
                "V_signal": 3 * grow(tv), "V_strong": 0.1 * grow(tv),
                "qk_signal_signal": 2 * grow(tq), "qk_signal_strong": 0.1 * grow(tq),
                "qk_weak_signal": 0 * t, "qk_weak_strong": 0 * t,
            }  # fmt: skip
            for k, x in series.items():
                traces.setdefault(f"trace_{k}", []).append(x)
    out = {k: np.asarray(v, dtype=object if k == "trace_step" else None) for k, v in cols.items()}
    out |= {k: np.asarray(v + [], dtype=object) for k, v in traces.items()}
    return out


def test_fig3_claims_follow_the_measured_order():
    exp = get("jiang2024-fig3")
    good = verdicts(exp, fig3_columns(v_first=True), "cpu")
    assert all(c.passed for c in good.values()), {k: c.measured for k, c in good.items()}
    bad = verdicts(exp, fig3_columns(v_first=False), "cpu")
    assert not bad["stages-benign"].passed and not bad["stages-harmful"].passed
    assert bad["sparse-benign"].passed  # attention still concentrates
