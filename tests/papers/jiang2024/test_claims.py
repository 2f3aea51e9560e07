"""The claim logic of the experiments, on synthetic result columns: each claim passes on data that
follow the theory and fails on data made to break it (so none of them passes by construction);
and the spec → cells expansion."""

import numpy as np
import pytest

from attnlab.errors import AttnlabError
from attnlab.experiments import get
from attnlab.experiments.config import ExperimentSpec, expand
from attnlab.experiments.jiang2024 import data, tiny_cell

REPS = 5


def fig1_columns(form_exponent, C, d=64, mu=None, seed=0, noise=0.2, reps=REPS, curve=0.0):
    """A grid whose runs succeed (test loss 0.05) iff N·SNR^form_exponent > C (with a little noise
    in the boundary; ``curve`` bends it: + curve·(log SNR − log 12)² in log N), every run having
    reached the training-loss threshold."""
    rng = np.random.default_rng(seed)
    sigma_p = 0.2
    mu = np.geomspace(3, 100, 16) if mu is None else mu
    cols = {k: [] for k in ("data.mu", "data.N", "test_loss", "status", "block", "rep")}
    for m in mu:
        for n in range(2, 21, 2):
            for r in range(reps):
                s = data.snr(m, sigma_p, d)
                bend = curve * (np.log(s) - np.log(12)) ** 2
                ok = np.log(n) + form_exponent * np.log(s) - bend + noise * rng.standard_normal() > np.log(C)
                for k, x in (
                    ("data.mu", m),
                    ("data.N", n),
                    ("test_loss", 0.05 if ok else 0.7),
                    ("status", "converged"),
                    ("block", 0),
                    ("rep", r),
                ):
                    cols[k].append(x)
    cols = {k: np.asarray(v) for k, v in cols.items()}
    cols["data.sigma_p"] = np.full(len(cols["data.mu"]), sigma_p)
    cols["data.d"] = np.full(len(cols["data.mu"]), d)
    return cols


def verdicts(exp, cols, scale, **sets):
    spec = exp.spec(scale, [f"{k}={v}" for k, v in sets.items()])
    return {c.id: c for c in exp.analyse(cols, spec).claims}


def outcomes(v):
    return {k: c.outcome for k, c in v.items()}


# a sharp boundary on a fine ‖μ‖ grid that keeps it inside N = 2 … 20 (SNR 6.9 … 22.5): the
# curvature claim needs that much information to pass its margin of ±0.5
SHARP = dict(mu=np.geomspace(11, 36, 40), noise=0.02)


def test_fig1_claims_pass_on_a_theory_shaped_grid():
    v = verdicts(get("jiang2024-fig1"), fig1_columns(2, 1000, **SHARP), "cpu", n_boot=100, curvature_min_runs=0)
    assert outcomes(v) == dict.fromkeys(("slope", "curvature", "benign", "harmful"), "pass"), {
        k: (c.outcome, c.measured, c.detail) for k, c in v.items()
    }
    assert abs(v["slope"].measured["slope"] + 2) < 0.3
    assert v["slope"].measured["p"] == pytest.approx(-v["slope"].measured["slope"], abs=1e-4)  # form: one fact
    assert v["slope"].measured["lr_p_value"]["p=1"] < 1e-6
    for c in v.values():
        assert c.to_json()["pass"] is True and c.to_json()["outcome"] == "pass"


def test_fig1_curvature_fails_on_a_bent_boundary():
    v = verdicts(
        get("jiang2024-fig1"), fig1_columns(2, 1000, curve=1.0, **SHARP), "cpu", n_boot=100, curvature_min_runs=0
    )
    assert v["curvature"].outcome == "fail", (v["curvature"].measured, v["curvature"].detail)


def test_fig1_curvature_is_descriptive_below_its_powered_design():
    """Below ``curvature_min_runs`` the curvature is measured, not judged (the audit gives the
    rule no power there): outcome descriptive, ``pass`` null, the interval still reported."""
    cols = fig1_columns(2, 1000, curve=1.0, **SHARP)
    v = verdicts(get("jiang2024-fig1"), cols, "cpu", n_boot=100, curvature_min_runs=len(cols["data.N"]) + 1)
    c = v["curvature"]
    assert c.outcome == "descriptive" and c.to_json()["pass"] is None and "descriptive below" in c.detail
    assert len(c.measured["ci95"]) == 2


def test_fig1_claims_fail_on_a_wrong_form():
    v = verdicts(get("jiang2024-fig1"), fig1_columns(1, 60), "cpu", n_boot=100)  # boundary N·SNR = 60
    assert v["slope"].outcome == "fail", outcomes(v)
    assert v["slope"].to_json()["pass"] is False
    # Ĉ fitted on one half of N misplaces the other half's boundary: neither region claim passes
    assert v["benign"].outcome != "pass" and v["harmful"].outcome == "fail", outcomes(v)
    assert "C" not in v  # d = 64: the paper's C is not claimed


D1024_MU = np.geomspace(8, 400, 16)  # SNR 1.25 … 62.5 at d = 1024: both boundaries inside


def test_fig1_C_claim_is_judged_only_at_the_papers_d():
    v = verdicts(get("jiang2024-fig1"), fig1_columns(2, 1000, d=1024, mu=D1024_MU), "cpu", n_boot=100)
    assert v["C"].outcome == "pass", (v["C"].measured, v["C"].detail)
    assert v["slope"].outcome == "pass"


def test_fig1_C_claim_fails_on_another_constant():
    v = verdicts(get("jiang2024-fig1"), fig1_columns(2, 100, d=1024, mu=D1024_MU), "cpu", n_boot=100)
    assert v["slope"].outcome == "pass"  # the form is still right …
    assert v["C"].outcome == "fail", (v["C"].measured, v["C"].detail)  # … the constant is not
    assert v["C"].measured["ci95"][1] < 500


def test_fig1_benign_claim_fails_when_held_out_high_snr_cells_overfit_harmfully():
    exp = get("jiang2024-fig1")
    cols = fig1_columns(2, 1000)
    snr = data.snr(cols["data.mu"], cols["data.sigma_p"], cols["data.d"])
    # the upper half of N (judged by the fold fitted on the lower half) overfits harmfully well above the curve
    cols["test_loss"] = np.where((cols["data.N"] > 10) & (cols["data.N"] * snr**2 >= 2 * 1000), 0.7, cols["test_loss"])
    v = verdicts(exp, cols, "cpu", n_boot=50)
    assert v["benign"].outcome == "fail" and "lower N → upper N: " in v["benign"].detail, outcomes(v)


def test_fig1_region_claims_fail_on_a_boundary_displaced_between_the_halves_of_N():
    """N·SNR² = 1000 below N = 10 and 4000 above it: each half's Ĉ misplaces the other's boundary."""
    exp = get("jiang2024-fig1")
    cols = fig1_columns(2, 1000)
    snr = data.snr(cols["data.mu"], cols["data.sigma_p"], cols["data.d"])
    C = np.where(cols["data.N"] > 10, 4000, 1000)
    cols["test_loss"] = np.where(cols["data.N"] * snr**2 > C, 0.05, 0.7)
    v = verdicts(exp, cols, "cpu", n_boot=50)
    assert v["benign"].outcome == "fail" and v["harmful"].outcome == "fail", outcomes(v)


def test_fig1_slope_keeps_its_interval_when_runs_are_flipped_at_random():
    """5 % of runs flipped in a true N·SNR² = C world: the logistic with lapse rates keeps the
    slope near −2 with a narrow interval (the plain fit tilted it to about −2.26 and passed 0 of 10
    such worlds), and the region claims still pass."""
    exp = get("jiang2024-fig1")
    cols = fig1_columns(2, 1000, noise=0.1)
    flip = np.random.default_rng(3).random(len(cols["test_loss"])) < 0.05
    cols["test_loss"] = np.where(flip, np.where(cols["test_loss"] < 0.2, 0.7, 0.05), cols["test_loss"])
    v = verdicts(exp, cols, "cpu", n_boot=100)
    assert v["slope"].outcome == "pass", v["slope"].measured
    assert v["benign"].outcome == "pass" and v["harmful"].outcome == "pass", outcomes(v)


def test_fig1_harmful_claim_fails_when_low_snr_cells_do_not_fit_the_training_set():
    exp = get("jiang2024-fig1")
    cols = fig1_columns(2, 1000)
    cols["status"] = np.where(cols["test_loss"] > 0.5, "cap", "converged")
    v = verdicts(exp, cols, "cpu", n_boot=50)
    assert v["benign"].outcome == "pass" and v["harmful"].outcome == "fail", outcomes(v)


def test_fig1_without_a_boundary_is_inconclusive():
    cols = fig1_columns(2, 1000)
    cols["test_loss"] = np.full(len(cols["test_loss"]), 0.05)  # every run succeeds
    v = verdicts(get("jiang2024-fig1"), cols, "cpu", n_boot=50, curvature_min_runs=0)
    assert {v[k].outcome for k in ("slope", "curvature", "benign", "harmful")} == {"inconclusive"}


def fig3_columns(v_first=True, weak_wins=False, reps=6, M=3):
    """Synthetic traces: sigmoid growth of V-scalars, QK logits and attention with chosen onsets.
    Attention sums to 1 over the M = 3 tokens (one weak-noise token); with ``weak_wins`` the weak
    token ends above the dominant one (which still ends above 1.25/M)."""
    t = np.arange(0, 501, 5.0)
    grow = lambda start: 1 / (1 + np.exp(-(t - start) / 10)) - 1 / (1 + np.exp(start / 10))
    tv, tq = (20, 120) if v_first else (120, 20)
    cols = {k: [] for k in ("regime", "trace_step", "train_loss", "test_loss", "data.M", "data.d", "data.sigma_p")}
    traces = {}
    for regime in ("harmful", "benign"):
        for _ in range(reps):
            for k, x in (
                ("regime", regime),
                ("trace_step", t),
                ("train_loss", 0.01),
                ("test_loss", 0.7 if regime == "harmful" else 0.02),
                ("data.M", M),
                ("data.d", 256),
                ("data.sigma_p", 0.2),
            ):
                cols[k].append(x)
            g = grow(tq + 10)
            dominant, other = (1 / 3 + 0.1 * g, 1 / 3 - 0.3 * g) if weak_wins else (1 / 3 + 0.4 * g, 1 / 3 - 0.2 * g)
            weak = 1 - dominant - other
            series = {
                "attn_signal_mean": dominant if regime == "benign" else other,
                "attn_strong_mean": other if regime == "benign" else dominant,
                "attn_weak_max_mean": weak,
                "V_signal": 3 * grow(tv),
                "V_strong": 0.1 * grow(tv),
                "qk_signal_signal": 2 * grow(tq),
                "qk_signal_strong": 0.1 * grow(tq),
                "qk_strong_strong": 0.5 * grow(tq),
                "qk_strong_signal": 0 * t,
                "qk_weak_signal": 0 * t,
                "qk_weak_strong": 0 * t,
            }
            for k, x in series.items():
                traces.setdefault(f"trace_{k}", []).append(x)
    out = {k: np.asarray(v, dtype=object if k == "trace_step" else None) for k, v in cols.items()}
    out |= {k: np.asarray(v) for k, v in traces.items()}
    return out


def test_fig3_claims_pass_on_v_first_concentrated_traces():
    good = verdicts(get("jiang2024-fig3"), fig3_columns(), "cpu")
    assert set(good) == {"sparse-harmful", "stages-harmful", "sparse-benign", "stages-benign"}
    assert all(c.outcome == "pass" for c in good.values()), {k: (c.outcome, c.measured) for k, c in good.items()}


def test_fig3_stages_fail_on_qk_first_traces():
    bad = verdicts(get("jiang2024-fig3"), fig3_columns(v_first=False), "cpu")
    assert bad["stages-benign"].outcome == "fail" and bad["stages-harmful"].outcome == "fail"
    assert bad["sparse-benign"].outcome == "pass"  # attention still concentrates


def test_fig3_sparse_fails_when_a_weak_token_beats_the_dominant_one():
    cols = fig3_columns(weak_wins=True)
    assert np.all(cols["trace_attn_weak_max_mean"][:, -1] > 1.25 / 3)  # the dominant token alone would pass
    bad = verdicts(get("jiang2024-fig3"), cols, "cpu")
    assert bad["sparse-benign"].outcome == "fail" and bad["sparse-harmful"].outcome == "fail", outcomes(bad)
    assert bad["stages-benign"].outcome == "pass"


def test_fig3_sparse_fails_below_the_uniform_margin():
    cols = fig3_columns(M=16)  # dominant ends at 0.73 ≥ 1.25/16, passes; now flatten it to uniform-ish
    cols["trace_attn_signal_mean"] = np.full_like(cols["trace_attn_signal_mean"], 0.07)
    cols["trace_attn_strong_mean"] = np.full_like(cols["trace_attn_strong_mean"], 0.07)
    cols["trace_attn_weak_max_mean"] = np.full_like(cols["trace_attn_weak_max_mean"], 0.01)
    v = verdicts(get("jiang2024-fig3"), cols, "cpu")
    assert v["sparse-benign"].outcome == "fail" and "1.25/M" in v["sparse-benign"].detail


# ---------------------------------------------------------------- spec → cells


def test_expand_is_the_grid_times_blocks_times_reps():
    spec = ExperimentSpec(
        data={"name": "jiang2024", "M": 4, "d": 12, "mu": ["1", 2.0], "N": [2, 4, 6]},
        model={"name": "jiang2024", "d_h": 6, "d_v": 5},
        train={"lr": "0.5"},
        seeds=2,
        reps=3,
        seed=7,
    )
    cells = expand(spec)
    assert len(cells) == 2 * 3 * 2 * 3
    assert {(c["data.mu"], c["data.N"]) for c in cells} == {(m, n) for m in (1.0, 2.0) for n in (2, 4, 6)}
    assert all(isinstance(c["data.mu"], float) and c["train.lr"] == 0.5 for c in cells)  # validated, typed
    assert {(c["block"], c["rep"]) for c in cells} == {(b, r) for b in range(2) for r in range(3)}
    assert {c["seed"] for c in cells} == {7}
    assert all(k.split(".")[0] in ("data", "model", "train") for c in cells for k in c if "." in k)
    tagged = expand(spec, [({"regime": "x"}, {"data.mu": 9.0})])
    assert {c["data.mu"] for c in tagged} == {9.0} and {c["regime"] for c in tagged} == {"x"}
    with pytest.raises(AttnlabError, match="data.N: values must be even"):
        expand(spec.model_copy(update={"data": spec.data | {"N": [3]}}))


def test_tiny_cell_names_must_be_unambiguous():
    c = tiny_cell(mu=2.0, lr=0.3, **{"model.d_h": 4})
    assert c["data.mu"] == 2.0 and c["train.lr"] == 0.3 and c["model.d_h"] == 4
    with pytest.raises(KeyError, match="name"):
        tiny_cell(name="x")  # data.name or model.name
    with pytest.raises(KeyError, match="no field"):
        tiny_cell(nope=1)
