"""The li2023 experiments' analysis on synthetic result columns: the phase-diagram estimators
(N_c per column, its straight line, the power law, the shift of the boundary, the iteration
count), the learning-rate choice, and the claims of Fig. 1, Fig. 3 and Fig. 4. Each claim passes
on data shaped like the theory and fails on data made to break it (none passes by construction)."""

import numpy as np
import pytest

from attnlab import rules
from attnlab.experiments import get
from attnlab.experiments.base import staged
from attnlab.experiments.li2023 import diagram, floor, phase
from attnlab.experiments.li2023.fig3 import approach_fit, decay_exponent, rate_fit

STRATEGIES = ("irrelevant", "noisiest", "random", "attention")  # Fig. 4's removal strategies

ALPHA = np.array([0.12, 0.14, 0.16, 0.18, 0.2, 0.24])
N_GRID = np.unique(np.round(np.geomspace(4, 4000, 16)).astype(int))  # 4 … 4000: both boundaries inside
LAWS = {2: 1.0, 4: 0.1}  # p -> C of the boundary N·α^p = C (N_c 17 … 69 for p = 2, 30 … 482 for p = 4)
N_BOOT = 100


def phase_grid(p, C, alpha=ALPHA, N=N_GRID, reps=8, noise=0.2, seed=0):
    """(α, N, success) of every run: success iff log N + p·log α + noise > log C."""
    rng = np.random.default_rng(seed)
    a, n = (np.repeat(g.ravel(), reps) for g in np.meshgrid(np.asarray(alpha, float), N, indexing="ij"))
    return a, n, np.log(n) + p * np.log(a) + noise * rng.standard_normal(len(a)) > np.log(C)


def outcomes(claims):
    return {c.id: c.outcome for c in claims}


# ---------------------------------------------------------------- phase estimators


@pytest.mark.parametrize("p", [2, 4])
def test_columns_recover_the_critical_sample_size(p):
    C = LAWS[p]
    a, n, s = phase_grid(p, C)
    cs = phase.columns(a, n, s, N_BOOT, seed=0)
    assert [c.x for c in cs] == list(ALPHA)
    inside = 0
    for c in cs:
        truth = C * c.x**-p
        assert c.status == phase.CROSSED
        assert c.value == pytest.approx(truth, rel=0.2), (c.x, c.value, truth)
        assert c.lo < c.value < c.hi and len(c.boots) == N_BOOT
        inside += c.lo <= truth <= c.hi
        assert set(c.rate) == set(N_GRID.tolist()) and c.rate[int(N_GRID[0])] == 0 and c.rate[int(N_GRID[-1])] == 1
    assert inside >= len(cs) - 1  # the 95 % intervals cover the truth (allow one miss)


def test_columns_censor_columns_without_a_crossing():
    a, n, s = phase_grid(2, 1.0, alpha=[0.16, 0.9, 0.01])  # N_c = 39, 1.2 (below the grid), 10⁴ (above)
    by_x = {c.x: c for c in phase.columns(a, n, s, 50, seed=0)}
    assert by_x[0.16].status == phase.CROSSED
    assert by_x[0.9].status == phase.BELOW and by_x[0.01].status == phase.ABOVE
    for x in (0.9, 0.01):
        assert np.isnan(by_x[x].value) and np.isnan(by_x[x].lo) and by_x[x].as_dict()["N_c"] is None
    # success falling with N: crossed by the data, but no increasing boundary
    flat = phase.column(0.5, n[a == 0.16], ~s[a == 0.16], 50, np.random.default_rng(0))
    assert flat.status == phase.FLAT and np.isnan(flat.value)
    # both outcomes, but the fitted crossing lies outside the grid's N: censored, never extrapolated
    N3 = np.repeat([100, 200, 400], 10)
    rng = np.random.default_rng(0)
    for rate, status in (((0.8, 0.9, 1.0), phase.BELOW), ((0.0, 0.1, 0.2), phase.ABOVE)):
        succ = np.concatenate([np.arange(10) < 10 * r for r in rate])
        c = phase.column(0.3, N3, succ, 50, rng)
        assert c.status == status and np.isnan(c.value) and np.isnan(c.lo), (rate, c)
    # fewer than 3 crossed columns: no straight line
    assert phase.straight_line(list(by_x.values()), 2)["r2"] is None


def test_straight_line_in_alpha_to_the_minus_two():
    cs = phase.columns(*phase_grid(2, 1.0), N_BOOT, seed=0)
    line = phase.straight_line(cs, 2)
    assert line["n_columns"] == len(ALPHA) and line["r2"] > 0.95
    assert line["b"] == pytest.approx(1.0, rel=0.2) and abs(line["a"]) < 10  # N_c = 0 + 1·α^−2
    assert 0 < line["b_ci95"][0] < line["b"] < line["b_ci95"][1] and line["n_boot_used"] >= 20


@pytest.mark.parametrize("p", [2, 4])
def test_power_law_recovers_the_exponent_and_the_verdicts_can_fail(p):
    law = phase.power_law(*phase_grid(p, LAWS[p]), N_BOOT, seed=0)
    assert law["p"]["value"] == pytest.approx(p, abs=0.3)
    assert law["p"]["ci95"][0] < p < law["p"]["ci95"][1]
    assert (law["loglik_2_minus_4"] > 10) == (p == 2) and (law["loglik_2_minus_4"] < -10) == (p == 4)
    # the likelihood-ratio tests of the free fit: the true exponent is kept, the other rejected
    assert law["p_value"][f"p={p}"] >= 0.05 and law["p_value"][f"p={6 - p}"] < 1e-6, law["p_value"]
    margins = {2: (1.5, 2.5), 4: (3.0, 5.0)}
    for favoured, margin in margins.items():
        want = rules.PASS if favoured == p else rules.FAIL
        assert phase.exponent_verdict(law, margin).outcome == want, (favoured, law)
        v = phase.likelihood_verdict(law, favoured)
        assert v.outcome == want, (favoured, law)
        assert v.measured[f"p_value(p={favoured})"] == law["p_value"][f"p={favoured}"]


def test_likelihood_verdict_passes_only_when_the_papers_law_is_kept_and_the_others_rejected():
    """pass: p = favoured not rejected at the level, p = 3 (the law between) and 6 − favoured
    rejected; fail: p = favoured rejected (whatever the others); inconclusive: the favoured law not
    separated from p = 3 or from the other, or no test."""
    law = lambda pv2, pv3, pv4: {
        "p": {"value": 2.5, "ci95": [1.5, 3.5]},
        "loglik_2_minus_4": 1.0,
        "p_value": {"p=2": pv2, "p=3": pv3, "p=4": pv4},
    }
    cases = {
        (0.5, 0.01, 0.001): (rules.PASS, rules.FAIL),  # 2 kept, 3 and 4 rejected
        (0.001, 0.01, 0.5): (rules.FAIL, rules.PASS),
        (0.001, 0.5, 0.001): (rules.FAIL, rules.FAIL),  # a law between: 2 and 4 rejected, neither passes
        (0.5, 0.2, 0.001): (rules.INCONCLUSIVE, rules.FAIL),  # 2 not separated from 3
        (0.3, 0.25, 0.2): (rules.INCONCLUSIVE, rules.INCONCLUSIVE),  # the data do not separate them
        (0.05, 0.049, 0.049): (rules.PASS, rules.FAIL),  # the level's edges: p-value ≥ level keeps, < level rejects
    }
    for (pv2, pv3, pv4), (for2, for4) in cases.items():
        assert phase.likelihood_verdict(law(pv2, pv3, pv4), 2).outcome == for2, (pv2, pv3, pv4)
        assert phase.likelihood_verdict(law(pv2, pv3, pv4), 4).outcome == for4, (pv2, pv3, pv4)
    assert phase.likelihood_verdict(law(0.5, 0.03, 0.001), 2, level=0.01).outcome == rules.INCONCLUSIVE
    assert phase.likelihood_verdict(law(0.03, 0.001, 0.001), 2, level=0.01).outcome == rules.PASS
    assert phase.likelihood_verdict(law(0.5, None, 0.001), 2).outcome == rules.INCONCLUSIVE  # no test of p = 3


def test_likelihood_never_passes_a_law_between_the_two():
    """N·α^3 = C: both p = 2 and p = 4 are rejected, so neither learner's law passes (the old
    comparison of ℓ(2) with ℓ(4) passed whichever was nearer)."""
    law = phase.power_law(*phase_grid(3, 0.3), N_BOOT, seed=0)
    assert law["p"]["value"] == pytest.approx(3, abs=0.3)
    for favoured in (2, 4):
        assert phase.likelihood_verdict(law, favoured).outcome == rules.FAIL, (favoured, law["p_value"])


def test_power_law_without_a_boundary_is_inconclusive():
    a, n, _ = phase_grid(2, 1.0)
    assert phase.power_law(a, n, np.ones(len(a), bool), N_BOOT, seed=0) is None
    assert phase.exponent_verdict(None, (1.5, 2.5)).outcome == rules.INCONCLUSIVE
    assert phase.likelihood_verdict(None, 2).outcome == rules.INCONCLUSIVE


def shift_grid(slope, seed=1):
    """(x, N, success): the boundary log N_c = log 30 + slope·x, x = 0.1 … 0.4 (e.g. τ)."""
    rng = np.random.default_rng(seed)
    x = np.repeat([0.1, 0.2, 0.3, 0.4], len(N_GRID) * 8)
    n = np.tile(np.repeat(N_GRID, 8), 4)
    return x, n, np.log(n) > np.log(30) + slope * x + 0.2 * rng.standard_normal(len(x))


def test_shift_of_the_boundary():
    up = phase.shift(*shift_grid(4.0), N_BOOT, seed=0)
    assert up.value == pytest.approx(4.0, abs=0.8) and up.lo > 0
    assert phase.shift_verdict(up, "tau").outcome == rules.PASS
    down = phase.shift(*shift_grid(-4.0), N_BOOT, seed=0)
    assert down.hi < 0 and phase.shift_verdict(down, "tau").outcome == rules.FAIL
    x, n, _ = shift_grid(4.0)
    none = phase.shift(x, n, np.zeros(len(x), bool), N_BOOT, seed=0)
    assert phase.shift_verdict(none, "tau").outcome == rules.INCONCLUSIVE


def iteration_runs(r, seed=2):
    rng = np.random.default_rng(seed)
    a = np.repeat([0.1, 0.12, 0.16, 0.2, 0.24], 12)
    N = np.tile([20, 40, 80, 160], 15)
    return a, N, np.round(3.0 * a**-r * (N / 20) ** 0.1 * np.exp(0.1 * rng.standard_normal(len(a))))


@pytest.mark.parametrize("r", [1.0, 2.0])
def test_iterations_recover_r(r):
    a, N, T = iteration_runs(r)
    none = np.zeros(len(a), bool)
    est = phase.iterations(a, N, T, none)
    assert est.value == pytest.approx(r, abs=0.1) and est.lo < r < est.hi
    assert (rules.equivalence(est.value, est.lo, est.hi, (0.5, 1.5), "r").outcome == rules.PASS) == (r == 1.0)
    assert np.isnan(phase.iterations(np.full(len(a), 0.1), N, T, none).value)  # one α: no estimate


# ---------------------------------------------------------------- the learning rate


def lr_runs(table):
    """Validation runs: rows (lr, test_error, test_loss, status)."""
    lr, err, loss, status = (np.array(v) for v in zip(*table, strict=True))
    n = len(lr)
    return {
        "train.lr": lr,
        "test_error": err,
        "test_loss": loss,
        "status": status.astype(object),
        "data.alpha_star": np.full(n, 0.16),
        "data.N": np.full(n, 40),
    }


def test_choose_lr_lowest_error_then_loss_skipping_diverged():
    ok, div = "converged", "diverged"
    rows = [(0.05, 0.2, 0.5, ok), (0.05, 0.1, 0.4, ok),  # mean error 0.15
            (0.1, 0.0, 0.3, ok), (0.1, 0.02, 0.3, ok),  # 0.01
            (0.2, 0.0, 0.2, ok), (0.2, 0.02, 0.2, ok),  # 0.01, lower loss: the tie goes to it
            (0.5, 0.0, 0.01, ok), (0.5, 0.0, np.nan, div)]  # fmt: skip  # 0.0, but one run diverged
    out = diagram.choose_lr(lr_runs(rows), "data.alpha_star")
    assert out["chosen"] == 0.2
    by_lr = {r["lr"]: r for r in out["table"]}
    assert set(by_lr) == {0.05, 0.1, 0.2, 0.5} and by_lr[0.5]["diverged"] == 1 and by_lr[0.5]["runs"] == 2
    assert by_lr[0.05]["val_error"] == pytest.approx(0.15) and by_lr[0.5]["val_loss"] == pytest.approx(0.01)
    assert out["where"] == {"data.alpha_star": 0.16, "N": 40}
    # without the diverged run 0.5 wins; the tie alone picks the lower loss whatever the order
    assert diagram.choose_lr(lr_runs(rows[:7]), "data.alpha_star")["chosen"] == 0.5
    assert diagram.choose_lr(lr_runs(rows[2:6][::-1]), "data.alpha_star")["chosen"] == 0.2
    # every lr diverged: the lowest error is still chosen (from all of them)
    every = [(lr, e, np.nan, div) for lr, e in ((0.1, 0.3), (0.2, 0.1))]
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        assert diagram.choose_lr(lr_runs(every), "data.alpha_star")["chosen"] == 0.2


def test_diagram_cells_tune_the_lr_on_a_separate_stage_first():
    """cells(spec, run): the tune stage (tune_lr × tune_reps at the hardest column free of the
    mean-token floor and the middle N, its own seed) is trained through ``run``, and the grid gets
    the lr with the lowest validation error; then the linear learner's own tuning and floor stage."""
    exp = get("li2023-fig1")
    spec = exp.spec("smoke", ["tune_lr=0.1,0.2,0.5", "tune_reps=2", "floor=false", "tau=0.05"])
    spec = spec.model_copy(update={"data": spec.data | {"alpha_star": [1 / 6, 0.25, 0.5], "N": [8, 16, 32]}})
    seen = []

    def run(cells):
        seen.append(cells)
        lr = np.array([c["train.lr"] for c in cells])
        return {
            "train.lr": lr,
            "test_error": np.where(lr == 0.2, 0.0, 0.3),
            "test_loss": np.full(len(lr), 0.1),
            "status": np.full(len(lr), "converged", object),
            "data.alpha_star": np.array([c["data.alpha_star"] for c in cells]),
            "data.N": np.array([c["data.N"] for c in cells]),
        }

    cells = staged(exp.stages(spec), run)
    (tune,) = seen
    assert [c for c in cells if c["stage"] == "tune"] == tune and len(tune) == 3 * 2
    assert sorted(c["train.lr"] for c in tune) == [0.1, 0.1, 0.2, 0.2, 0.5, 0.5]
    assert {(c["data.alpha_star"], c["data.N"], c["seed"], c["block"]) for c in tune} == {
        (1 / 6, 16, spec.seed + diagram.TUNE_SEED, 0)  # every column free at τ = 0.05: the hardest, n_* = 2
    }
    grid = [c for c in cells if c["stage"] == "grid"]
    assert len(grid) == 3 * 3 * spec.reps and {c["train.lr"] for c in grid} == {0.2}
    assert {c["seed"] for c in grid} == {spec.seed}
    assert {c["train.draws"] for c in cells} == {"common"}  # the learners of a diagram share the data draws
    # without a run (or with tune_lr = []) there is no tune stage: the grid runs at the recipe's lr
    for plain in (exp.cells(spec), staged(exp.stages(exp.spec("smoke", ["tune_lr=", "floor=false"])), run)):
        assert {c["stage"] for c in plain} == {"grid"} and {c["train.lr"] for c in plain} == {spec.train["lr"]}
    assert len(seen) == 1
    seen.clear()
    floor = staged(exp.stages(spec.model_copy(update={"floor": True})), run)
    assert [len(s) for s in seen] == [6, 4 * 2]  # the ViT's tuning, then the linear learner's (floor_lr × tune_reps)
    lin = [c for c in floor if c["stage"] == "floor"]
    assert len(lin) == len(grid) and {c["model.name"] for c in lin} == {"li2023-linear"}
    key = lambda c: (c["data.alpha_star"], c["data.N"], c["rep"])
    assert sorted(map(key, lin)) == sorted(map(key, grid))


def test_diagram_tunes_at_the_middle_N_of_a_set_grid():
    exp = get("li2023-fig1")
    spec = exp.spec("smoke", ["N=8,16,32", "tune_lr=0.2"])
    fields, _ = exp.tune_column(exp.cells(spec), spec)
    (tune,) = exp._tune_cells(spec, fields, [0.2])
    assert tune["data.N"] == 16


# ---------------------------------------------------------------- Fig. 1 through Experiment.analyse


def diagram_columns(p, C, T_power=1.0, alpha=ALPHA, L=50, seed=0, tune=True):
    """Result columns of an α_* diagram: grid runs whose test error is 0 iff N·α^p > C (noisy),
    every run converged after T ∝ α^−T_power steps; with ``tune``, validation runs of two lrs
    first (the grid ran at the better one, 0.2)."""
    rng = np.random.default_rng(seed)
    a, n, ok = phase_grid(p, C, alpha=alpha, seed=seed)
    m = len(a)
    T = np.round(3.0 * a**-T_power * np.exp(0.1 * rng.standard_normal(m))).astype(int)
    cols = {
        "stage": np.full(m, "grid", object),
        "data.alpha_star": a,
        "data.N": n,
        "test_error": np.where(ok, 0.0, 0.1),
        "test_loss": np.where(ok, 0.01, 0.4),
        "status": np.full(m, "converged", object),
        "stop_step": T,
        "train.lr": np.full(m, 0.2),
    }
    # τ = 0.02: every column free of the mean-token floor (z = 2.5 … 5 per net token), so the laws are judged
    data = {"name": "li2023", "M": 6, "d": 24, "L": L, "tau": 0.02, "noise": "coord", "n_test": 50}
    cols |= {f"data.{k}": np.full(m, v, object if isinstance(v, str) else None) for k, v in data.items()}
    cols["data.alpha_hash"] = a / 6  # as every expanded cell has it
    if tune:
        t = {
            "stage": ["tune"] * 4,
            "data.alpha_star": [0.16] * 4,
            "data.N": [40] * 4,
            "train.lr": [0.05, 0.05, 0.2, 0.2],
            "test_error": [0.2, 0.1, 0.0, 0.0],
            "test_loss": [0.5, 0.4, 0.02, 0.03],
            "status": ["cap"] * 2 + ["converged"] * 2,
            "stop_step": [100, 100, 30, 40],
        }
        cols = {k: np.concatenate([np.asarray(t[k], dtype=v.dtype) if k in t else v[:4], v]) for k, v in cols.items()}
    return cols


FIG1_SETS = [f"n_boot={N_BOOT}", "oracle_n=50", "exponent_min_runs=0"]  # the exponent judged at any size


def test_fig1_claims_pass_on_a_theory_shaped_diagram():
    exp = get("li2023-fig1")
    an = exp.analyse(diagram_columns(2, 1.0), exp.spec("smoke", FIG1_SETS))
    assert outcomes(an.claims) == dict.fromkeys(("exponent", "likelihood", "iterations"), "pass") | {
        "line": "descriptive"
    }, {c.id: (c.outcome, c.measured, c.detail) for c in an.claims}
    line = {c.id: c for c in an.claims}["line"]
    assert line.measured["r2"] > 0.9 and "does not separate" in line.detail and "false pass 0.88" in line.detail
    s = an.summary
    assert s["runs"] == len(ALPHA) * len(N_GRID) * 8 and s["learning rate"] == 0.2
    assert s["lr tuning (validation runs)"]["chosen"] == 0.2  # the tune rows are analysed apart from the grid
    assert [c["status"] for c in s["columns"]] == [phase.CROSSED] * len(ALPHA)
    assert s["power law"]["p"]["value"] == pytest.approx(2, abs=0.3)
    assert list(s["oracle error per column"]) == list(ALPHA) and max(s["oracle error per column"].values()) < 0.05


def test_fig1_exponent_and_likelihood_fail_on_a_fourth_power_boundary():
    exp = get("li2023-fig1")
    an = exp.analyse(diagram_columns(4, 0.1, tune=False), exp.spec("smoke", FIG1_SETS))
    o = outcomes(an.claims)
    assert o["exponent"] == "fail" and o["likelihood"] == "fail", o
    assert "lr tuning (validation runs)" not in an.summary
    # the same runs pass Fig. 2's claims (the baseline's p = 4, margin [3, 5])
    fig2 = get("li2023-fig2")
    o2 = outcomes(fig2.analyse(diagram_columns(4, 0.1, tune=False), fig2.spec("cpu", FIG1_SETS)).claims)
    assert o2["exponent"] == "pass" and o2["likelihood"] == "pass", o2


def test_fig1_exponent_is_descriptive_below_its_min_runs():
    """The exponent's audit power is below 0.8 at small designs: below ``exponent_min_runs`` grid
    runs it is reported, not judged; the likelihood still decides the law."""
    exp = get("li2023-fig1")
    cols = diagram_columns(2, 1.0, tune=False)
    runs = int(np.sum(cols["stage"] == "grid"))
    an = exp.analyse(cols, exp.spec("smoke", [f"n_boot={N_BOOT}", "oracle_n=50", f"exponent_min_runs={runs + 1}"]))
    c = {c.id: c for c in an.claims}
    assert c["exponent"].outcome == "descriptive" and c["likelihood"].outcome == "pass"
    assert f"below {runs + 1} grid runs (this run: {runs} in the columns free of the floor)" in c["exponent"].detail
    assert c["exponent"].measured["p"] == pytest.approx(2, abs=0.3)
    an = exp.analyse(cols, exp.spec("smoke", [f"n_boot={N_BOOT}", "oracle_n=50", f"exponent_min_runs={runs}"]))
    assert outcomes(an.claims)["exponent"] == "pass"


def test_fig1_iterations_fail_when_T_grows_like_alpha_to_the_minus_three():
    exp = get("li2023-fig1")
    an = exp.analyse(diagram_columns(2, 1.0, T_power=3.0, tune=False), exp.spec("smoke", FIG1_SETS))
    o = outcomes(an.claims)
    assert o["iterations"] == "fail" and o["exponent"] == "pass", o


def test_fig1_without_a_boundary_is_inconclusive():
    """Every run fails: every column lies above the grid, no law to fit (inconclusive). Every run
    succeeds: every column lies below the grid, at its edge, where the law is not judged."""
    exp = get("li2023-fig1")
    cols = diagram_columns(2, 1.0, tune=False)
    cols["test_error"] = np.full(len(cols["test_error"]), 0.1)  # every run fails
    an = exp.analyse(cols, exp.spec("smoke", FIG1_SETS))
    o = outcomes(an.claims)
    assert o["exponent"] == o["likelihood"] == "inconclusive" and o["line"] == "descriptive", o
    assert {c["status"] for c in an.summary["columns"]} == {phase.ABOVE}
    cols["test_error"] = np.zeros(len(cols["test_error"]))  # every run succeeds
    an = exp.analyse(cols, exp.spec("smoke", FIG1_SETS))
    c = {c.id: c for c in an.claims}
    assert c["exponent"].outcome == c["likelihood"].outcome == "descriptive", outcomes(an.claims)
    assert {c["status"] for c in an.summary["columns"]} == {phase.BELOW}
    assert f"{len(ALPHA)} of the {len(ALPHA)} free columns have N_c ≤ 10" in c["likelihood"].detail


def test_fig1_law_is_descriptive_at_the_grids_edge():
    """A boundary N·α² = 0.15 puts N_c at 1 … 10: most columns within two grid steps of the
    smallest N (N ≤ 10 on 4, 6, 10, …) or below it. The law is read off the grid's edge there: the
    law claims are descriptive, the rule's outcome kept beside them; the same law four times
    further in (N_c 17 … 69) is judged."""
    exp = get("li2023-fig1")
    spec = exp.spec("smoke", FIG1_SETS)
    an = exp.analyse(diagram_columns(2, 0.15, tune=False), spec)
    c = {c.id: c for c in an.claims}
    assert c["likelihood"].outcome == c["exponent"].outcome == "descriptive", outcomes(an.claims)
    assert "rule_outcome" in c["likelihood"].measured
    assert "within two grid steps of the smallest N (4)" in c["likelihood"].detail
    assert "the law would be read off the grid's edge" in c["exponent"].detail
    o = outcomes(exp.analyse(diagram_columns(2, 1.0, tune=False), spec).claims)
    assert o["likelihood"] == o["exponent"] == "pass", o


def test_law_gate_counts_the_free_columns_at_the_grids_edge():
    """Descriptive with fewer than min_free_columns columns, or (given the grid's N) when more than
    half of them have N_c ≤ the third smallest N or lie below the grid; columns above the grid or
    crossed further in do not count, and without the grid only the column count gates."""
    spec = get("li2023-fig1").spec("smoke")
    k = spec.min_free_columns
    grid = np.array([5.0, 10, 20, 40, 80])  # the edge: N_c ≤ 20
    col = lambda status, value=np.nan: phase.Column(0.1, value, np.nan, np.nan, status, np.array([]), {})
    v = rules.Verdict(rules.PASS, {"p": 2.0}, "rule")
    gate = lambda cs, N=grid: get("li2023-fig1").law_gate(v, cs, spec, N)
    far = [col(phase.CROSSED, 30.0)] * k
    assert gate(far) == (v, "")
    half = k // 2  # at most half at the edge: judged
    assert gate([col(phase.BELOW)] * half + far[half:])[0].outcome == rules.PASS
    edge = [col(phase.CROSSED, 20.0), col(phase.BELOW)] * k  # all at the edge (N_c = 20 is the third N)
    out, why = gate(edge)
    assert out.outcome == rules.DESCRIPTIVE and out.measured["rule_outcome"] == rules.PASS
    assert f"{2 * k} of the {2 * k} free columns have N_c ≤ 20" in why
    assert gate(edge + far * 3)[0].outcome == rules.PASS  # a minority at the edge
    assert gate([col(phase.ABOVE)] * (2 * k))[0].outcome == rules.PASS  # censored above: not the edge
    assert gate(edge, None) == (v, "")  # no grid given (the shift diagrams): the count alone
    few, why = gate(far[: k - 1])
    assert few.outcome == rules.DESCRIPTIVE and "fewer than" in why


def test_oracle_floor_sees_bayes_error_only_under_heavy_noise():
    from attnlab.data import li2023 as ldata

    data = {"M": 6, "d": 24, "L": 50, "tau": 0.2, "noise": "coord", "N": 40, "n_test": 50}
    fields = lambda **kw: [ldata.Spec(**data | kw | {"alpha_star": a}).model_dump() for a in (0.12, 0.24)]
    assert floor.oracle_floor(fields(), n=200) == [0.0, 0.0]
    noisy = floor.oracle_floor(fields(tau=3.0), n=200)
    assert all(0.2 < e < 0.6 for e in noisy), noisy


def test_fig1_oracle_floor_uses_each_columns_own_confusion_fraction():
    exp = get("li2023-fig1")
    # first grid row α_* = 0.5 (α_# = 1/12, one confusion token at L = 12); the α_* = 0.1 column has one
    # relevant and no confusion token, but is given the first row's α_# and fails the data model's check
    cols = diagram_columns(2, 1.0, alpha=[0.5, 0.25, 0.1], L=12, tune=False)
    an = exp.analyse(cols, exp.spec("smoke", FIG1_SETS))
    assert len(an.summary["oracle error per column"]) == 3


# ---------------------------------------------------------------- Fig. 3


def test_decay_exponent_recovers_q():
    t = np.concatenate([np.arange(0, 10), np.arange(10, 501, 10)]).astype(float)
    for q in (0.5, 1.0, 2.0):
        A = 1 - 0.4 * np.maximum(t, 1) ** -q
        fitted, r2 = decay_exponent(t, A, 10)
        assert fitted == pytest.approx(q, rel=1e-9) and r2 == pytest.approx(1.0, abs=1e-12)
    bent = 1 - 0.4 / (1 + t / 50)  # not a power law over [10, 500]: a smaller local q and R² < 1
    fitted, r2 = decay_exponent(t, bent, 10)
    assert 0.3 < fitted < 0.9 and r2 < 0.99
    assert np.isnan(decay_exponent(t[:12], 1 - 0.4 / np.maximum(t[:12], 1), 10)).all()  # fewer than 3 points
    assert np.isnan(decay_exponent(t, np.ones_like(t), 10)).all()  # A = 1 everywhere: nothing to fit


FIG3_T = np.concatenate([np.arange(0, 10), np.arange(10, 501, 10)]).astype(float)


def fig3_columns(q=1.5, plateau=None, reps=8, seed=0):
    """Traces of A(t) over t = 0 … 500: A(0) = 0.55, then 1 − c·t^−q (q ± 0.1 per repeat, c so that
    A(500) = 0.97) or, with ``plateau``, a rise that saturates at that level."""
    rng = np.random.default_rng(seed)
    t, rows = FIG3_T, []
    for _ in range(reps):
        if plateau is None:
            qr = q + rng.uniform(-0.1, 0.1)
            A = np.maximum(0.55, 1 - 0.03 * (np.maximum(t, 1) / t[-1]) ** -qr)
        else:
            A = plateau - (plateau - 0.55) * np.exp(-t / 10) + 0.003 * rng.standard_normal(len(t))
        rows.append(A)
    m = len(rows)
    steps = np.empty(m, object)  # as a list column reads back from parquet: one array per row
    steps[:] = [t] * m
    return {
        "trace_step": steps,
        "trace_attn_relevant": np.array(rows),
        "trace_attn_entropy": np.array([np.log(12) * (1 - 0.5 * a) for a in rows]),
        "test_error": np.zeros(m),
        "data.L": np.full(m, 12),
        "id": np.array([f"c{i}" for i in range(m)]),
        "train.loss": np.full(m, "logistic", object),  # the design's own loss
        "train_loss": np.zeros(m),
    }


def fig3_claims(cols, *sets):
    exp = get("li2023-fig3")
    an = exp.analyse(cols, exp.spec("cpu", list(sets)))
    return an, outcomes(an.claims)


def with_hinge(cols, hinge, train_loss=0.0):
    """The design's cells (``cols``) and, after them, the same design under the hinge loss (``hinge``'s
    traces), as the run's table holds them; the hinge cells end at training hinge loss ``train_loss``."""
    m = len(hinge["id"])
    hinge = hinge | {
        "id": np.array([f"h{i}" for i in range(m)]),
        "train.loss": np.full(m, "hinge", object),
        "train_loss": np.full(m, train_loss),
    }
    out = {}
    for k in cols:
        a, b = np.asarray(cols[k]), np.asarray(hinge[k])
        if a.dtype == object or b.dtype == object:  # keep one array per row (the trace steps)
            both = np.empty(len(a) + len(b), object)
            both[:] = [*a, *b]
            out[k] = both
        else:
            out[k] = np.concatenate([a, b])
    return out


def test_fig3_claims_pass_on_traces_that_concentrate_as_one_over_t():
    an, o = fig3_claims(with_hinge(fig3_columns(q=1.0), fig3_columns(q=1.0, seed=1)))
    assert o == {"rises": "pass", "near-one": "pass", "rate": "pass", "near-one-hinge": "pass"}, [
        (c.id, c.measured) for c in an.claims
    ]
    s = an.summary
    assert s["repeats"] == 8  # the design's own cells: the hinge cells are judged apart
    assert s["A(T)"]["mean"] == pytest.approx(0.97, abs=1e-6) and s["A(0)"]["mean"] == pytest.approx(0.55)
    assert s["T"] == 500 and s["q"]["band"] == [pytest.approx(2 / 3, abs=1e-4), 1.5]
    assert s["q"]["geometric mean"] == pytest.approx(1.0, abs=0.1)
    assert s["first t with mean A ≥ near_one"] is not None


def test_fig3_rate_is_a_bound_that_fails_a_slow_decay_and_is_undecided_at_its_edge():
    """O(1/t) is a bound, read within the band: q ≥ 1/1.5 = 2/3. t^−½ fails, t^−3 (faster) passes,
    t^−2/3 straddles the bound's edge; the bound moves with q_theory and q_band."""
    an, o = fig3_claims(fig3_columns(q=0.5))  # 1 − A ∝ t^−0.5: still reaches 0.97 at T
    assert o == {"rises": "pass", "near-one": "pass", "rate": "fail"}, [(c.id, c.measured) for c in an.claims]
    _, o = fig3_claims(fig3_columns(q=3.0))
    assert o["rate"] == "pass", o
    _, o = fig3_claims(fig3_columns(q=2 / 3))  # q = 2/3 ± 0.1: the interval straddles 2/3
    assert o["rate"] == "inconclusive", o
    _, o = fig3_claims(fig3_columns(q=0.5), "q_theory=0.5")
    assert o["rate"] == "pass", o
    _, o = fig3_claims(fig3_columns(q=1.0), "q_theory=3")  # a bound of q ≥ 2 fails 1/t
    assert o["rate"] == "fail", o
    _, o = fig3_claims(fig3_columns(q=0.5), "q_band=3")  # q ≥ 1/3
    assert o["rate"] == "pass", o


def test_fig3_exponential_rise_to_a_low_plateau_fails_near_one_and_is_inside_the_rate_bound():
    """An exponential rise to 0.7: far from 1 (near-one fails); it reaches its plateau faster than
    any power of t (q at the cap), inside the O(1/t) bound, so the rate passes."""
    an, o = fig3_claims(fig3_columns(plateau=0.7))
    assert o == {"rises": "pass", "near-one": "fail", "rate": "pass"}, [(c.id, c.measured) for c in an.claims]
    assert an.summary["first t with mean A ≥ near_one"] is None
    assert an.summary["A_inf (fitted)"]["mean"] == pytest.approx(0.7, abs=0.005)
    assert an.summary["q"]["ci95"][0] > 1.5


def plateau_columns(q, A_inf=0.95, t1=20.0, reps=8, jitter=0.03, seed=0):
    """The audit's theory shape: A(t) = A_∞ − (A_∞ − 0.54)(1 + t/t₁)^−q, a plateau below 1, with
    multiplicative noise on 1 − A and a spread of t₁ over repeats."""
    rng = np.random.default_rng(seed)
    t = FIG3_T
    rows = [A_inf - (A_inf - 0.54) * (1 + t / (t1 * np.exp(0.3 * rng.standard_normal()))) ** -q for _ in range(reps)]
    rows = [1 - (1 - a) * np.exp(jitter * rng.standard_normal(len(t)) * (t > 0)) for a in rows]
    cols = fig3_columns(reps=reps)
    return cols | {"trace_attn_relevant": np.array(rows)}


def test_approach_fit_recovers_the_rate_and_the_plateau():
    t = FIG3_T
    for q in (0.5, 1.0, 2.0):
        fit = approach_fit(t, 0.95 - 0.41 * (1 + t / 20) ** -q)
        assert fit["q"] == pytest.approx(q, rel=0.02) and fit["A_inf"] == pytest.approx(0.95, abs=1e-3), (q, fit)
    onset = 0.95 - 0.41 * (1 + (t / 150) ** 4) ** (-1.0 / 4)  # a flat start, then t^−1
    fit = approach_fit(t, onset)
    assert fit["q"] == pytest.approx(1.0, rel=0.05) and fit["k"] == pytest.approx(4, rel=0.1), fit
    assert np.isnan(approach_fit(t, np.full(len(t), 0.54))["q"])  # no rise: nothing to fit


def exponential_columns(A_inf=0.95, tau=40.0, reps=8, jitter=0.03, seed=0):
    """The same rise, but A_∞ − A(t) = (A_∞ − 0.54)·exp(−t/τ): faster than any power of t."""
    rng = np.random.default_rng(seed)
    t = FIG3_T
    rows = [A_inf - (A_inf - 0.54) * np.exp(-t / (tau * np.exp(0.2 * rng.standard_normal()))) for _ in range(reps)]
    rows = [1 - (1 - a) * np.exp(jitter * rng.standard_normal(len(t)) * (t > 0)) for a in rows]
    return fig3_columns(reps=reps) | {"trace_attn_relevant": np.array(rows)}


def test_fig3_rate_judges_the_approach_to_a_plateau_below_one():
    """A_∞ − c/t to a plateau A_∞ = 0.95 passes (a late-phase fit of 1 − A, on the plateau, could
    not pass it); t^−½ to the same plateau does not pass, t^−0.35 fails; t^−2.5 and an exponential
    approach, faster than 1/t, lie inside the bound and pass."""
    an, o = fig3_claims(plateau_columns(1.0))
    assert o["rate"] == "pass", [(c.id, c.measured) for c in an.claims]
    assert an.summary["A_inf (fitted)"]["mean"] == pytest.approx(0.95, abs=0.003)
    assert an.summary["late-phase log-log slope of 1 - A (not judged)"]["mean"] < 0.5  # the plateau's slope
    an, o = fig3_claims(plateau_columns(0.5))  # far from its plateau at T: A_∞ and q trade off, q ≈ 0.52
    assert o["rate"] != "pass", [(c.id, c.measured) for c in an.claims]
    for q, want in ((0.35, "fail"), (2.5, "pass")):
        an, o = fig3_claims(plateau_columns(q))
        assert o["rate"] == want, (q, [(c.id, c.measured) for c in an.claims])
    an, o = fig3_claims(exponential_columns())
    assert o["rate"] == "pass", [(c.id, c.measured) for c in an.claims]
    assert an.summary["window end t_end (gap ≥ window_z·sigma)"]["mean"] < 400  # the window stops at the plateau


def test_fig3_rate_is_not_judged_on_the_plateau():
    """Traces on their plateau from the first steps (the rise is over within the dense start) have
    no window before the plateau: no repeat is fitted and the rate is inconclusive, whatever a fit
    of the plateau's noise would give."""
    rng = np.random.default_rng(1)
    t = FIG3_T
    rows = [0.95 - 0.41 * np.exp(-t / 0.7) + 0.002 * rng.standard_normal(len(t)) * (t > 0) for _ in range(8)]
    an, o = fig3_claims(fig3_columns(reps=8) | {"trace_attn_relevant": np.array(rows)})
    assert o["rate"] == "inconclusive" and o["rises"] == "pass", [(c.id, c.measured) for c in an.claims]
    assert {c.id: c for c in an.claims}["rate"].measured["repeats fitted"] == 0


def test_rate_fit_holds_the_plateau_and_ends_the_window_above_the_noise():
    rng = np.random.default_rng(0)
    t = FIG3_T
    A = 0.95 - 0.41 * (1 + t / 20) ** -1.0 + 0.002 * rng.standard_normal(len(t))
    fit = rate_fit(t, A)
    assert fit["A_inf"] == pytest.approx(0.95, abs=0.003) and fit["q"] == pytest.approx(1.0, abs=0.15), fit
    assert fit["sigma"] == pytest.approx(0.002, rel=0.5) and fit["window"] >= 8
    gap = 0.41 * (1 + t / 20) ** -1.0
    assert fit["t_end"] == pytest.approx(t[gap >= 3 * fit["sigma"]].max(), abs=30)
    assert np.isnan(rate_fit(t, np.full(len(t), 0.54))["q"])  # no rise


def test_fig3_rises_fails_when_attention_falls():
    _, o = fig3_claims(fig3_columns(plateau=0.5))  # 0.55 -> 0.5
    assert o["rises"] == "fail", o


def test_fig3_near_one_hinge_judges_the_hinge_cells_apart():
    """The hinge cells are split off by train.loss: the design's claims read its own cells only,
    and near-one-hinge reads the hinge cells with near-one's rule. Attention frozen at 0.7 once the
    hinge loss reaches 0 fails it, with the training loss as the reason; the same traces under the
    design's loss fail near-one and leave the hinge claim passing."""
    good, frozen = fig3_columns(q=1.0), fig3_columns(plateau=0.7, seed=1)
    an, o = fig3_claims(with_hinge(good, frozen))
    assert o == {"rises": "pass", "near-one": "pass", "rate": "pass", "near-one-hinge": "fail"}, o
    c = {c.id: c for c in an.claims}["near-one-hinge"]
    assert c.measured["mean"] == pytest.approx(0.7, abs=0.005) and c.measured["training hinge loss at T"] == 0
    assert "the hinge loss stops every gradient" in c.detail and "training loss is 0" in c.detail
    assert an.summary["repeats"] == 8 and an.summary["A(T)"]["mean"] == pytest.approx(0.97, abs=1e-6)
    an, o = fig3_claims(with_hinge(frozen, good))
    assert o["near-one"] == "fail" and o["near-one-hinge"] == "pass", o
    assert {c.id: c for c in an.claims}["near-one-hinge"].detail == ""
    # the hinge cells still training (loss at T above 10⁻³): no reason is claimed for the shortfall
    an, o = fig3_claims(with_hinge(good, frozen, train_loss=0.05))
    assert o["near-one-hinge"] == "fail" and {c.id: c for c in an.claims}["near-one-hinge"].detail == ""
    # the design under the hinge loss itself: its cells are the design's, no claim of its own
    _, o = fig3_claims(frozen | {"train.loss": np.full(8, "hinge", object)}, "train.loss=hinge")
    assert o == {"rises": "pass", "near-one": "fail", "rate": "pass"}, o


def test_fig3_cells_add_the_design_under_the_hinge_loss():
    exp = get("li2023-fig3")
    spec = exp.spec("smoke")
    cells = exp.cells(spec)
    losses = [c["train.loss"] for c in cells]
    assert losses == ["logistic"] * spec.reps + ["hinge"] * spec.reps
    strip = lambda c: {k: v for k, v in c.items() if k != "train.loss"}
    assert [strip(c) for c in cells[: spec.reps]] == [strip(c) for c in cells[spec.reps :]]  # the same design
    assert [c["train.loss"] for c in exp.cells(exp.spec("smoke", ["hinge=false"]))] == ["logistic"] * spec.reps
    # a design already under the hinge loss runs once (the variant would repeat every cell)
    assert [c["train.loss"] for c in exp.cells(exp.spec("smoke", ["train.loss=hinge"]))] == ["hinge"] * spec.reps


# ---------------------------------------------------------------- Fig. 4


def fig4_table(slopes, cells=6, ks=(0, 2, 4), seed=0, train=None, train_ks=(2, 4), train_cells=6, train_sd=0.02):
    """A derived table: per cell, strategy and k, test loss = base + slope[strategy]·k + noise
    (strategies missing from ``slopes``: flat, with symmetric noise that cancels over cells); with
    ``train`` (slopes per training strategy), retrained cells per strategy and k of ``train_ks``:
    test loss = 0.1 + slope·k + cell noise of sd ``train_sd`` (independent cells). Hinge = logistic here."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(cells):
        base = 0.1 + 0.02 * rng.standard_normal()
        for s in STRATEGIES:
            for k in ks:
                if k == 0:
                    loss = base
                elif s in slopes:
                    loss = base + slopes[s] * k + 0.001 * rng.standard_normal()
                else:
                    loss = base + 0.002 * (-1) ** c  # flat: Δ = ±0.002 alternating, mean exactly 0
                rows.append((f"cell{c}", "test", s, k, loss, loss, 0.0))
    for s, slope in (train or {}).items():
        for k in train_ks:
            for c in range(train_cells):
                loss = 0.1 + slope * k + train_sd * rng.standard_normal()
                rows.append((f"{s}{k}-{c}", "train", s, k, loss, loss, 0.0))
    keys = ("id", "removal", "strategy", "k_removed", "test_loss", "test_hinge", "test_error")
    columns = zip(*rows, strict=True)
    text = ("id", "removal", "strategy")
    return {k: np.array(v, dtype=object if k in text else None) for k, v in zip(keys, columns, strict=True)}


LOWERS = {"irrelevant": -0.01, "noisiest": -0.006, "attention": -0.004}
# retrained: informed orders help, irrelevant-first most, random removal does not (the paper's order)
TRAIN = {"irrelevant": -0.02, "noisiest": -0.01, "random": 0.005}
FIG4_IDS = (
    "irrelevant",
    "noisiest",
    "random",
    "order-2",
    "order-4",
    "irrelevant-test",
    "noisiest-test",
    "random-test",
    "attention",
)


def fig4(table, *sets):
    exp = get("li2023-fig4")
    an = exp.analyse(table, exp.spec("smoke", list(sets)))
    return an, outcomes(an.claims)


def test_fig4_claims_pass_when_informed_removal_lowers_the_loss():
    """The default noise contrast is 5 (τ_noisy = 1.0 against τ = 0.2): every prediction is judged
    and passes; irrelevant-test (mean pooling's rescaling) and attention (a measurement) are
    descriptive, still measured."""
    spec = get("li2023-fig4").spec("smoke")
    assert (spec.data["noisy_tau"], spec.data["tau"], spec.noisiest_min_contrast) == (1.0, 0.2, 5.0)
    assert spec.order_ks == [2, 4] and get("li2023-fig4").spec("cpu").order_ks == [10, 20]
    an, o = fig4(fig4_table(LOWERS, train=TRAIN, train_sd=0.005))
    assert o == dict.fromkeys(FIG4_IDS, "pass") | {"irrelevant-test": "descriptive", "attention": "descriptive"}, [
        (c.id, c.outcome, c.measured) for c in an.claims
    ]
    assert [c.id for c in an.claims] == list(FIG4_IDS)
    assert an.summary["cells trained on all tokens"] == 6 and an.summary["k_claim"] == 4
    assert an.summary["judged on"] == "test hinge loss"
    assert an.summary["test time: mean Δ test hinge per k"]["irrelevant"][-1] == pytest.approx(-0.04, abs=0.005)
    c = {c.id: c for c in an.claims}
    assert c["irrelevant"].measured["mean"] == pytest.approx(-0.08, abs=0.03) and c["irrelevant"].measured["cells"] == 6
    assert "logistic" in c["irrelevant"].measured and "logistic" in c["attention"].measured  # reported beside
    assert "rescales the output" in c["irrelevant-test"].detail
    assert c["attention"].measured["ci95"][1] < 0 and "a measurement" in c["attention"].detail
    assert c["order-4"].measured["noisiest − irrelevant"]["mean"] == pytest.approx(0.04, abs=0.01)
    assert c["order-4"].measured["random − noisiest"]["mean"] == pytest.approx(0.06, abs=0.01)


def test_fig4_order_passes_in_the_papers_order_and_fails_out_of_it():
    """order-k: irrelevant-first below noisiest-first below random, retrained at k (Welch intervals
    of each consecutive difference above 0). Two informed orders swapped, or random below
    noisiest, fail; indistinguishable orders are inconclusive; each k is judged on its own cells."""
    table = lambda train, **kw: fig4_table(LOWERS, train=train, train_sd=0.005, **kw)
    _, o = fig4(table(TRAIN))
    assert o["order-2"] == o["order-4"] == "pass", o
    an, o = fig4(table(TRAIN | {"irrelevant": -0.01, "noisiest": -0.02}))  # noisiest-first gains most
    assert o["order-2"] == o["order-4"] == "fail", o
    assert {c.id: c for c in an.claims}["order-4"].detail == "the reverse order: noisiest − irrelevant < 0"
    an, o = fig4(table(TRAIN | {"random": -0.02}))  # random removal as good as irrelevant-first
    assert o["order-2"] == o["order-4"] == "fail", o
    assert {c.id: c for c in an.claims}["order-4"].detail == "the reverse order: random − noisiest < 0"
    t = table(TRAIN)  # noisiest-first exactly as good as irrelevant-first: a difference of 0
    retrained = lambda s: (t["removal"] == "train") & (t["strategy"] == s)
    t["test_loss"][retrained("noisiest")] = t["test_loss"][retrained("irrelevant")]
    t["test_hinge"] = t["test_loss"]
    an, o = fig4(t)
    assert o["order-2"] == o["order-4"] == "inconclusive", o
    assert {c.id: c for c in an.claims}["order-4"].measured["noisiest − irrelevant"]["mean"] == 0
    t = table(TRAIN)  # reversed at k = 2 only
    swap = (t["removal"] == "train") & (t["k_removed"] == 2) & (t["strategy"] == "irrelevant")
    t["test_loss"] = np.where(swap, t["test_loss"] + 0.05, t["test_loss"])
    t["test_hinge"] = t["test_loss"]
    _, o = fig4(t)
    assert o["order-2"] == "fail" and o["order-4"] == "pass", o
    # judged at each k of order_ks, which must be a retrained k
    an, o = fig4(table(TRAIN, train_ks=(2,)))
    assert o["order-2"] == "pass" and o["order-4"] == "inconclusive", o
    assert {c.id: c for c in an.claims}["order-4"].detail == "needs retrained cells at k = 4 (train_ks)"
    _, o = fig4(table(TRAIN), "order_ks=4")
    assert "order-2" not in o and o["order-4"] == "pass", o


def test_fig4_training_claims_fail_when_retraining_raises_the_loss():
    _, o = fig4(fig4_table(LOWERS, train=TRAIN | {"irrelevant": 0.02, "noisiest": 0.02}))
    assert o["irrelevant"] == "fail" and o["noisiest"] == "fail" and o["noisiest-test"] == "pass", o
    # the test-time curves alone say nothing about training: without retrained cells, inconclusive
    _, o = fig4(fig4_table(LOWERS))
    assert o["irrelevant"] == o["noisiest"] == o["random"] == o["order-2"] == o["order-4"] == "inconclusive", o


def test_fig4_random_is_judged_against_a_margin_set_before_the_run():
    """random: Δ must not lie below −random_margin × loss(0) (0.1 × 0.1 = 0.01 here). A rise or a
    small drop passes; a drop well past the margin fails; one straddling it is inconclusive."""
    for slope, want in ((0.01, "pass"), (-0.02, "fail")):
        _, o = fig4(fig4_table(LOWERS | {"random": slope}, train=TRAIN | {"random": slope}))
        assert o["random"] == want and o["random-test"] == want, (slope, o)
    _, o = fig4(fig4_table(LOWERS | {"random": -0.001}))  # paired at test time: a small drop passes
    assert o["random-test"] == "pass", o
    _, o = fig4(fig4_table(LOWERS, train=TRAIN | {"random": -0.0025}))  # Δ ≈ −0.01 at k = 4: on the margin
    assert o["random"] == "inconclusive", o
    an, o = fig4(fig4_table(LOWERS | {"random": -0.001}), "random_margin=0")
    assert o["random-test"] == "fail", o  # no margin: a small drop is a drop
    assert {c.id: c for c in an.claims}["random-test"].measured["margin"] == 0


def test_fig4_judges_at_k_claim_capped_by_the_largest_k():
    an, o = fig4(fig4_table(LOWERS, ks=(0, 2), train=TRAIN, train_ks=(2,)), "k_claim=20")
    assert an.summary["k_claim"] == 2 and o["irrelevant"] == "pass" and o["irrelevant-test"] == "descriptive", o
    statements = {c.id: c.statement for c in an.claims}
    for cid in ("irrelevant", "noisiest", "random", "random-test", "attention"):
        assert statements[cid].endswith("(k = 2)"), (cid, statements[cid])
    c = {c.id: c for c in an.claims}
    assert c["attention"].measured["mean"] == pytest.approx(-0.008, abs=0.002)  # measured at k = 2


def test_fig4_noisiest_is_judged_at_k_claim_in_training_and_at_the_noisy_tokens_at_test_time():
    """Smoke: [0.2·12] = 2 noisy tokens, k_claim = 4. Retrained, every strategy is judged at
    k_claim (the paper compares them at equal k): a noisiest-first curve that falls to k = 2 and
    rises past it fails at k = 4. At test time noisiest-test is judged at the 2 noisy tokens: there
    the same shape passes, and a rise already at k = 2 fails. Without noisy tokens in the spec,
    noisiest-test is judged at k_claim."""
    table = fig4_table(LOWERS, train=TRAIN)
    late = (table["strategy"] == "noisiest") & (table["k_removed"] == 4)  # at test time and retrained
    table["test_loss"] = np.where(late, table["test_loss"] + 0.1, table["test_loss"])  # Δ(4) > 0 for noisiest
    table["test_hinge"] = table["test_loss"]
    an, o = fig4(table)
    assert o["noisiest-test"] == "pass" and o["noisiest"] == "fail" and o["irrelevant"] == "pass", o
    assert an.summary["k for noisiest (the noisy tokens)"] == 2 and an.summary["k_claim"] == 4
    statements = {c.id: c.statement for c in an.claims}
    assert statements["noisiest-test"].endswith("(k = 2)") and statements["noisiest"].endswith("(k = 4)")
    assert an.summary["test time: mean Δ test hinge per k"]["noisiest"][-1] > 0  # at k_claim it would fail
    early = fig4_table(LOWERS, train=TRAIN)  # retrained: noisiest-first lowers the loss at k = 4 only
    two = (early["removal"] == "train") & (early["strategy"] == "noisiest") & (early["k_removed"] == 2)
    early["test_loss"] = np.where(two, early["test_loss"] + 0.1, early["test_loss"])
    early["test_hinge"] = early["test_loss"]
    _, o = fig4(early)
    assert o["noisiest"] == "pass", o
    _, o = fig4(fig4_table(LOWERS | {"noisiest": 0.01}, train=TRAIN))
    assert o["noisiest-test"] == "fail", o
    an, _ = fig4(fig4_table(LOWERS, train=TRAIN), "data.noisy_frac=0")
    assert an.summary["k for noisiest (the noisy tokens)"] is None
    statements = {c.id: c.statement for c in an.claims}
    assert statements["noisiest-test"].endswith("(k = 4)") and statements["noisiest"].endswith("(k = 4)")


def test_fig4_noisiest_is_descriptive_at_a_small_noise_contrast():
    """noisy_tau/tau = 2 (the previous design): the audit gives the noisiest and order rules no
    power, so they are measured, not judged (the rule's outcome kept beside the numbers); the other
    claims are unaffected."""
    an, _ = fig4(fig4_table(LOWERS, train=TRAIN, train_sd=0.005), "data.noisy_tau=0.4")
    c = {c.id: c for c in an.claims}
    assert c["noisiest"].outcome == c["noisiest-test"].outcome == "descriptive"
    assert c["order-2"].outcome == c["order-4"].outcome == "descriptive"
    assert c["order-4"].measured["rule_outcome"] == "pass" and "(this run: 2)" in c["order-4"].detail
    assert c["irrelevant"].outcome == "pass" and c["random"].outcome == "pass"
    assert "below noisy_tau/tau = 5 (this run: 2)" in c["noisiest-test"].detail
    assert c["noisiest-test"].measured["mean"] == pytest.approx(-0.012, abs=0.002)  # still measured, at k = 2
    assert c["noisiest"].measured["mean"] == pytest.approx(-0.04, abs=0.02)  # at k = 4


def test_the_estimation_limited_law_is_steep_near_z_c_and_quartic_far_from_it():
    """N_c ∝ z_c²/(z²(z² − z_c²)) with Φ(z_c)^n_test = ½: with z ∝ α_* its local exponent tends to 4
    far above z_c and grows without bound as z nears z_c (a window-dependent slope, not a law)."""
    from scipy import stats

    zc = phase.z_crit(1000)
    assert stats.norm.cdf(zc) ** 1000 == pytest.approx(0.5)
    alpha = np.array([0.1, 0.12, 0.14])
    far = phase.estimation_exponent(alpha, 300 * alpha, 1000)
    near = phase.estimation_exponent(alpha, (zc + 0.3) * alpha / alpha[0], 1000)
    assert far == pytest.approx(4.0, abs=0.05) and near > 6
    assert phase.estimation_exponent(alpha, [1.0, 2.0, 3.0], 1000) is None  # z ≤ z_c in two columns: never


def test_the_alpha_answer_reads_its_numbers_from_the_committed_files_and_says_what_failed():
    from attnlab.experiments.li2023.ledger import alpha_quote

    assert alpha_quote({}, {}) == ""
    law = lambda p, o, keep: {
        "id": "likelihood",
        "outcome": o,
        "measured": {"p": p, "ci95": [p - 0.5, p + 0.6], "p_value(p=2)": keep},
    }
    verdicts = {
        "li2023-fig1": {"claims": [law(4.91, "fail", 1e-5)]},
        "li2023-fig1-theorem": {"claims": [{"id": "success-N", "outcome": "pass"}, law(2.3, "pass", 0.4)]},
    }
    summaries = {
        "li2023-fig1": {
            "estimation-limited law": {"its local p on the free columns": 5.02},
            "α_* range": {"min": 0.1, "max": 0.2},
        }
    }
    text = alpha_quote(verdicts, summaries)
    assert "li2023-fig1 p = 4.91 [4.41, 5.51], p = 2 rejected" in text
    assert "gives 5.02 on these columns (inside the interval)" in text
    assert "success-N pass; the law there: li2023-fig1-theorem p = 2.30" in text
    assert "do not reproduce" in text
    verdicts["li2023-fig1"] = {"claims": [law(2.1, "pass", 0.5)]}
    assert "agree with the paper's" in alpha_quote(verdicts, summaries)
