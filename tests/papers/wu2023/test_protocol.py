"""wu2023-fig1-protocol (γ = 1 at every width under each candidate normalisation) and
wu2023-scaling (τ₀ = d_m^−1/2 against d_m^−1, paired): the step ratio under ½·sum is N times the
mean's; the claims pass on columns shaped like the theory and fail on broken ones; the cells use
the literal step and share their draws where the design says; both end to end at smoke scale."""

import dataclasses
import json
import types

import numpy as np
import pytest

from attnlab import audit
from attnlab.engine import grid
from attnlab.experiments import get
from attnlab.experiments.wu2023 import protocol, scaling
from attnlab.experiments.wu2023.analysis import per_run

STEPS = np.array(sorted(set(range(0, 401, 10)) | set(range(10))), float)
WIDTHS = (16, 64, 256, 1024)
N = 100


def _columns(rows):
    cols = {k: np.array([r.get(k) for r in rows]) for k in dict.fromkeys(k for r in rows for k in r)}
    cols["trace_step"] = np.array([STEPS] * len(rows))
    return cols


def run_row(lr, gain, lam_max, lam_min, seed_noise):
    """A GD run of the linearised dynamics: diverged above the ratio 2, else the slow mode's decay."""
    ratio = gain * lam_max
    L0 = 0.5 * seed_noise()
    if ratio >= 2:
        L = np.where(STEPS <= 3, L0 * 10.0 ** np.minimum(STEPS, 3), np.nan)
        return {"status": "diverged", "train_loss": np.nan, "trace_train_loss": L}
    L = L0 * (0.5 * np.abs(1 - ratio) ** (2 * STEPS) + 0.5 * (1 - gain * lam_min) ** (2 * STEPS)) * seed_noise(0.01)
    return {"status": "cap", "train_loss": L[-1], "trace_train_loss": L}


def protocol_columns(lmin_exp=1.0, seed=0, reps=6, widths=WIDTHS):
    """λ_max(K₀)/N = 0.4 (‖x‖² ≈ d) or 0.01 (unit tokens) at d_m = 16 under τ₀ = d_m^−1/2, half under
    d_m^−1, ∝ d_m; λ_min(K₀) ∝ d_m^lmin_exp. γ = 1; ``reps`` units (block 0, rep r)."""
    rng = np.random.default_rng(seed)
    rows = []
    for red in ("mean", "sum"):
        for tn, level in (("d", 0.4), ("unit", 0.01)):
            for a in (0.5, 1.0):
                for w in widths:
                    for rep in range(reps):
                        noise = lambda s=0.03: np.exp(s * rng.standard_normal())
                        lam_max = N * level * (0.5 if a == 1 else 1) * w / 16 * noise()
                        lam_min = 0.05 * lam_max / w * 16 * (w / 16) ** lmin_exp * noise()
                        gain = 1.0 / N if red == "mean" else 1.0
                        row = {
                            "data.N": N,
                            "data.token_norm": tn,
                            "model.d_m": w,
                            "model.alpha": a,
                            "train.lr": 1.0,
                            "block": 0,
                            "rep": rep,
                            "trace_lambda_max": np.full(len(STEPS), lam_max),
                            "trace_lambda_min": np.full(len(STEPS), lam_min),
                        }
                        if red == "sum":
                            row["train.reduction"] = "sum"
                        rows.append(row | run_row(1.0, gain, lam_max, lam_min, noise))
    return _columns(rows)


def outcomes(exp, cols):
    a = exp.analyse(cols, exp.spec("cpu"))
    return {c.id: c.outcome for c in a.claims}, a


def test_the_sum_ratio_is_n_times_the_mean_ratio():
    cols = protocol_columns()
    r = per_run(cols, 2.0)
    red = np.array([x == "sum" for x in cols["train.reduction"]])
    lam = cols["trace_lambda_max"][:, 0]
    assert r["step_ratio"][~red] == pytest.approx(lam[~red] / N)
    assert r["step_ratio"][red] == pytest.approx(lam[red])


def test_protocol_claims_pass_on_theory_shaped_runs_and_fail_on_broken_ones():
    exp = protocol.EXPERIMENT
    got, a = outcomes(exp, protocol_columns())
    # unit tokens under ½·mean: stable at every width and ordered; ‖x‖² ≈ d: stable at 16 and 64 only; ½·sum: nowhere
    assert got == {
        "stability": "pass",
        "ordering-mean-d": "descriptive",
        "ordering-mean-unit": "pass",
        "ordering-sum-d": "descriptive",
        "ordering-sum-unit": "descriptive",
        "protocol": "descriptive",
    }
    claim = {c.id: c for c in a.claims}
    assert claim["protocol"].measured["reproduced by"] == ["½·mean, ‖x‖ = 1"] and claim["protocol"].regime == ""
    assert (
        "not its loss normalisation" in claim["protocol"].detail and "ratio reaches 2" in claim["ordering-sum-d"].detail
    )
    assert a.summary["candidates"]["mean-d"]["predicted-stable widths per τ₀"] == {
        "d_m^-0.5": [16, 64],
        "d_m^-1": [16, 64],
    }
    unit = claim["ordering-mean-unit"]
    assert unit.measured["units"] == 6 and unit.measured["ordered"] == 6 and unit.measured["p_value"] < 0.05
    assert "d_m = 16 … 1024" in unit.statement and unit.measured["widths"] == [16, 64, 256, 1024]
    # narrower nets faster (λ_min ∝ d_m^−1 at a fixed γ): the ordering fails and no candidate reproduces the setting
    got, a = outcomes(exp, protocol_columns(lmin_exp=-1.0))
    assert got["ordering-mean-unit"] == "fail"
    assert next(c for c in a.claims if c.id == "protocol").measured["reproduced by"] == []


def test_the_two_tau0_of_a_draw_are_one_unit():
    """The τ₀ of a (block, rep) share their data and init: 3 units ordered under both τ₀ are 3 of 3
    (p = 0.125, inconclusive), not 6 of 6 repeats (p = 0.016); a unit with one τ₀ out of order is
    not ordered."""
    exp = protocol.EXPERIMENT
    got, a = outcomes(exp, protocol_columns(reps=3))
    unit = next(c for c in a.claims if c.id == "ordering-mean-unit")
    assert got["ordering-mean-unit"] == "inconclusive" and unit.measured["units"] == 3
    assert unit.measured["p_value"] == pytest.approx(0.125)
    assert set(unit.measured["kendall_tau"]["0/0"]) == {"d_m^-0.5", "d_m^-1"}
    # under τ₀ = d_m^−1 in 3 of 6 units, wider nets slower (L_T/L_0 = 0.5^(16/d_m)): those units are not ordered
    cols = protocol_columns()
    flip = (cols["model.alpha"] == 1.0) & (cols["rep"] < 3) & (cols["data.token_norm"] == "unit")
    cols["train_loss"] = np.where(
        flip, cols["trace_train_loss"][:, 0] * 0.5 ** (16 / cols["model.d_m"]), cols["train_loss"]
    )
    got, a = outcomes(exp, cols)
    assert next(c for c in a.claims if c.id == "ordering-mean-unit").measured["ordered"] == 3
    assert got["ordering-mean-unit"] == "fail"


def test_the_ordering_names_its_width_range_and_reports_the_cells_past_it():
    """Unit tokens at γ = 1 are stable only up to a width (here 16·2/0.01 = 3200 under τ₀ = d_m^−1/2):
    d_m = 4096 lies past it; it is reported with the claim, not pooled into the ordering."""
    exp = protocol.EXPERIMENT
    got, a = outcomes(exp, protocol_columns(widths=(*WIDTHS, 4096)))
    claim = {c.id: c for c in a.claims}
    unit = claim["ordering-mean-unit"]
    assert got["ordering-mean-unit"] == "pass" and unit.measured["widths"] == [16, 64, 256, 1024]
    assert unit.measured["stable to d_m ≈"] == pytest.approx(3200, rel=0.1)
    past = unit.measured["past the stability limit (reported, not pooled)"]
    assert list(past) == [4096] and past[4096]["trained"] == "6/12"  # τ₀ = d_m^−1 (half the ratio) still trains
    cand = claim["protocol"].measured["candidates"]["mean-unit"]
    assert cand["reproduces"] and not cand["trains at every width"] and "d_m = 16 … 1024" in claim["protocol"].statement


def test_protocol_cells_take_the_literal_step_and_share_draws_across_tau0_and_reduction():
    exp = protocol.EXPERIMENT
    cells = exp.cells(exp.spec("cpu"))
    assert len(cells) == 2 * 2 * 2 * 4 * 6 and {c["train.lr"] for c in cells} == {1.0}  # 6 units
    assert {c.get("train.reduction", "mean") for c in cells} == {"mean", "sum"}
    strip = lambda c: (c["data.token_norm"], c["model.d_m"], c["rep"])
    seeds = {}
    for c in cells:
        seeds.setdefault(strip(c), set()).add(grid.seed_id(c))
    assert all(len(s) == 1 for s in seeds.values())  # τ₀ and the reduction share the cell's data and init
    assert len({grid.cell_id(c) for c in cells}) == len(cells)


def scaling_columns(factor=0.5, seed=0):
    """Both data sets, λ(K₀) under τ₀ = d_m^−1 = factor × that under d_m^−1/2, shared per pair."""
    rng = np.random.default_rng(seed)
    rows = []
    for name, data in (("wu2023", {}), ("images", {"data.patch": 7})):
        for w in (16, 64, 256):
            for rep in range(3):
                pair = np.exp(0.2 * rng.standard_normal())
                for a in (0.5, 1.0):
                    noise = lambda s=0.02: np.exp(s * rng.standard_normal())
                    lr = 16 / w
                    lam_max = 0.7 * N / lr * (factor if a == 1 else 1) * pair * noise()
                    lam_min = 4e-3 * N / lr * (factor if a == 1 else 1) * pair * noise()
                    row = {
                        "data.name": name,
                        "data.N": N,
                        "model.d_m": w,
                        "model.alpha": a,
                        "train.lr": lr,
                        "train.draws": "common",
                        "block": 0,
                        "rep": rep,
                        "trace_lambda_max": np.full(len(STEPS), lam_max),
                        "trace_lambda_min": np.full(len(STEPS), lam_min),
                        "trace_ntk_share_W_Q": np.full(len(STEPS), 0.2 if a == 0.5 else 0.01),
                        "trace_ntk_share_W_K": np.full(len(STEPS), 0.2 if a == 0.5 else 0.01),
                    } | data
                    rows.append(row | run_row(lr, lr / N, lam_max, lam_min, noise))
    return _columns(rows)


def test_scaling_claims_pass_on_theory_shaped_runs_and_fail_on_broken_ones():
    exp = scaling.EXPERIMENT
    got, a = outcomes(exp, scaling_columns())
    assert got == {"faster-synthetic": "pass", "faster-mnist": "pass"}
    c = next(c for c in a.claims if c.id == "faster-mnist")
    assert c.measured["successes"] == 9 and c.measured["median D"] > 0
    assert a.summary["synthetic"]["d_m^-0.5"][16]["W_Q + W_K share of tr K₀"] == pytest.approx(0.4)
    assert outcomes(exp, scaling_columns(factor=2.0))[0] == {"faster-synthetic": "fail", "faster-mnist": "fail"}
    # 8 of 9 pairs is not enough at level 0.01 (p = 0.02): inconclusive, not pass
    cols = scaling_columns()
    i = np.flatnonzero((cols["data.name"] == "images") & (cols["model.alpha"] == 0.5))[0]
    cols["status"][i], cols["train_loss"][i] = "diverged", np.nan
    assert outcomes(exp, cols)[0]["faster-mnist"] == "inconclusive"


def test_scaling_pairs_share_data_and_init_draws():
    exp = scaling.EXPERIMENT
    spec = exp.spec("cpu")
    cells = exp.cells(spec)
    assert len(cells) == 2 * (4 + 3) * 3
    pairs = {}
    for c in cells:
        pairs.setdefault((c["data.name"], c["model.d_m"], c["rep"]), []).append(c)
    for (name, w, _), (x, y) in pairs.items():
        assert {x["model.alpha"], y["model.alpha"]} == {0.5, 1.0} and x["train.lr"] == y["train.lr"]
        assert grid.seed_id(x) == grid.seed_id(y) and grid.cell_id(x) != grid.cell_id(y)
        assert x["train.lr"] == (1.0 if name == "wu2023" else 0.5) * 16 / w


@pytest.mark.parametrize("exp_id", ["wu2023-fig1-protocol", "wu2023-scaling"])
def test_smoke_run_has_the_experiments_claims(exp_id, smoke):
    run = smoke(exp_id)
    on_disk = json.loads((run.out / "verdict.json").read_text())
    want = {
        "wu2023-fig1-protocol": {
            "stability",
            "ordering-mean-d",
            "ordering-mean-unit",
            "ordering-sum-d",
            "ordering-sum-unit",
            "protocol",
        },
        "wu2023-scaling": {"faster-synthetic", "faster-mnist"},
    }[exp_id]
    assert {c["id"] for c in on_disk["claims"]} == want
    regime = {"wu2023-fig1-protocol": "protocol", "wu2023-scaling": "investigation"}[exp_id]
    assert {c["regime"] for c in on_disk["claims"]} == {regime} and get(exp_id).regime == regime
    assert (run.out / "results.parquet").exists() and list(run.out.glob("*.png"))


def test_the_protocol_audit_draws_a_unit_s_tau0_together_and_counts_units():
    """The simulator gives the cells of one draw (token norm, width, block, rep) one kernel scatter
    and one top-mode share, whatever τ₀ and the reduction (unit tokens: the two τ₀ then have the
    same λ_max); ordering-mean-unit passes λ_min ∝ d_m and ∝ d_m^{1/2}, and passes neither a flat
    λ_min nor one that peaks at d_m = 64."""
    exp = protocol.EXPERIMENT
    spec, d = exp.spec("cpu"), exp.audit
    ca = next(c for c in d.claims if c.claim == "ordering-mean-unit")
    cols = d.simulate(ca.h1.world, d.noise, spec, exp.cells(spec), np.random.default_rng(0))
    lam = {}
    for i in np.flatnonzero(cols["data.token_norm"] == "unit"):
        key = (cols["model.d_m"][i], cols["block"][i], cols["rep"][i])
        lam.setdefault(key, set()).add(round(float(cols["trace_lambda_max"][i][0]), 9))
    assert all(len(v) == 1 for v in lam.values()) and len({min(v) for v in lam.values()}) == len(lam)
    design = dataclasses.replace(d, claims=(ca,))
    one = types.SimpleNamespace(id=exp.id, regime=exp.regime, audit=design, cells=exp.cells, analyse=exp.analyse)
    row = audit.audit(one, spec, "cpu", sims=10)["claims"][0]
    assert row["power"]["rate"] >= 0.9 and row["false_pass"]["rate"] == 0.0  # (10 simulations: too few to unflag)
    assert sorted(w["holds"] for w in row["worlds"]) == [False, True]
    for w in row["worlds"]:
        assert w["pass"]["rate"] >= 0.8 if w["holds"] else w["pass"]["rate"] == 0.0, w["statement"]
