"""The li2023 regimes (protocol, theorem, investigation), the floor-aware fits of the phase
diagrams (laws on the columns free of the mean-token floor, censored iterations, the η stage) and
the settling experiment's paired exponents, on synthetic result columns."""

import numpy as np
import pytest

from attnlab import rules
from attnlab.errors import AttnlabError
from attnlab.experiments import get
from attnlab.experiments.base import staged
from attnlab.experiments.li2023 import phase, regimes, settle


def test_each_fig1_regime_is_its_own_id():
    ids = {e: get(e).regime for e in ("li2023-fig1", "li2023-fig1-protocol", "li2023-fig1-theorem")}
    assert ids == {"li2023-fig1": "investigation", "li2023-fig1-protocol": "protocol", "li2023-fig1-theorem": "theorem"}
    p = get("li2023-fig1-protocol").spec("cpu")
    assert (p.data["M"], p.data["d"], p.data["L"], p.data["noise"], p.data["tau"]) == (20, 20, 50, "ball", 0.2)
    assert (
        p.model["init"],
        p.model["m"],
        p.train["loss"],
        p.train["lr"],
        p.train["batch_size"],
        p.train["max_steps"],
    ) == ("near_identity", 64, "hinge", 0.05, 32, 500) and not p.tune_lr


def test_the_theorem_regime_satisfies_the_theorems_hypotheses_on_its_spec():
    exp = get("li2023-fig1-theorem")
    for scale in ("cpu", "paper"):
        held = regimes.hypotheses(exp.spec(scale))
        assert len(held) == 5 and all(h["holds"] for h in held), held
    broken = {
        "loss=logistic": "hinge loss",
        "tau=0.5": "ball noise",
        "m=16": "m ≥ M²",
        "one_pass=false": "one-pass",
        "init=gaussian": "near-identity",
    }
    for s, name in broken.items():
        sets = [s] + (["m_a=32", "m_b=32"] if s == "init=gaussian" else [])
        failed = [h["hypothesis"] for h in regimes.hypotheses(exp.spec("cpu", sets)) if not h["holds"]]
        assert len(failed) == 1 and failed[0].startswith(name), (s, failed)


def test_one_pass_cells_take_N_over_b_steps():
    exp = get("li2023-fig1-theorem")
    spec = exp.spec("cpu", ["reps=1"])
    for c in exp.cells(spec):
        assert c["train.max_steps"] == -(-c["data.N"] // 16)
    assert {c["train.max_steps"] for c in get("li2023-fig1").cells(get("li2023-fig1").spec("cpu", ["reps=1"]))} == {
        1000
    }


def test_the_theorem_claims_leave_the_theorem_regime_when_a_hypothesis_fails():
    exp = get("li2023-fig1-theorem")
    cols = theorem_columns()
    ok = exp.analyse(cols, exp.spec("smoke", ["n_boot=50", "oracle_n=50"]))
    o = {c.id: c.outcome for c in ok.claims}
    assert {o[k] for k in ("success-N", "success-alpha", "attention-rises", "nc-grows", "iterations-fall")} == {
        "pass"
    }, o
    assert {c.regime for c in ok.claims} == {"theorem"}
    bad = exp.analyse(cols, exp.spec("smoke", ["n_boot=50", "oracle_n=50", "loss=logistic"]))
    assert {c.regime for c in bad.claims} == {"investigation"}
    cols["trace_attn_relevant"] = np.array([np.array([0.5, 0.4]) for _ in cols["stage"]], object)  # attention falls
    o = {c.id: c.outcome for c in exp.analyse(cols, exp.spec("smoke", ["n_boot=50", "oracle_n=50"])).claims}
    assert o["attention-rises"] == "fail"


def theorem_columns(seed=0):
    rng = np.random.default_rng(seed)
    a = np.repeat([0.25, 0.5, 0.75], 40)
    N = np.tile(np.repeat([8, 16, 32, 64], 10), 3)
    ok = np.log(N) + 2 * np.log(a) + 0.3 * rng.standard_normal(len(a)) > np.log(4.0)
    m = len(a)
    T = np.round(4.0 / a * np.exp(0.1 * rng.standard_normal(m)))
    cap = -(-N // 8)
    cols = {
        "stage": np.full(m, "grid", object),
        "data.alpha_star": a,
        "data.alpha_hash": np.where(a > 0.3, 1 / 12, 0.0),
        "data.N": N,
        "data.L": np.full(m, 12),
        "data.d": np.full(m, 24),
        "data.M": np.full(m, 4),
        "data.tau": np.full(m, 0.2),
        "data.noise": np.full(m, "ball", object),
        "data.n_test": np.full(m, 50),
        "test_error": np.where(ok, 0.0, 0.1),
        "test_loss": np.where(ok, 0.01, 0.4),
        "status": np.where(T <= cap, "converged", "cap").astype(object),
        "stop_step": np.minimum(T, cap),
        "train.lr": np.full(m, 0.5),
        "trace_attn_relevant": np.array([np.array([0.3, 0.3 + 0.1 * x]) for x in a], object),
    }
    return cols


def test_censored_iterations_recover_r_where_dropping_the_capped_runs_is_biased():
    rng = np.random.default_rng(3)
    a = np.repeat([0.1, 0.12, 0.16, 0.2, 0.24], 40)
    N = np.tile([20, 40, 80, 160], 50)
    T = 3.0 * a**-2.0 * np.exp(0.3 * rng.standard_normal(len(a)))  # r = 2; the slow small-α runs hit the cap
    cap = np.full(len(a), 250.0)
    capped = T > cap
    assert 0.1 < capped.mean() < 0.5
    est = phase.iterations(a, N, np.minimum(T, cap), capped)
    assert est.lo < 2.0 < est.hi and est.value == pytest.approx(2.0, abs=0.2)
    naive = phase.iterations(a[~capped], N[~capped], T[~capped], np.zeros((~capped).sum(), bool))
    assert naive.value < est.value - 0.2 and naive.hi < 2.0  # converged runs only: biased low
    eta = np.repeat([0.05, 0.1, 0.2, 0.4], 30)  # T ∝ η^−1 at one α
    Te = 20 / eta * np.exp(0.1 * rng.standard_normal(len(eta)))
    e = phase.iterations(np.ones(len(eta)), np.full(len(eta), 40), np.minimum(Te, 300), Te > 300, eta=eta)
    assert e.lo < 1.0 < e.hi and rules.equivalence(e.value, e.lo, e.hi, (0.5, 1.5)).outcome == rules.PASS


def test_laws_are_fitted_on_the_columns_free_of_the_floor_only():
    """The same boundary: with every column free it is judged; with the floor binding in most
    columns (large τ) the law claims are descriptive, the floor reported per column."""
    exp = get("li2023-fig1")
    from papers.li2023.test_claims import diagram_columns

    sets = ["n_boot=50", "oracle_n=50", "exponent_min_runs=0"]
    cols = diagram_columns(2, 1.0, tune=False)
    for tau, judged in ((0.02, True), (0.2, False)):
        cols["data.tau"] = np.full(len(cols["data.tau"]), tau)
        an = exp.analyse(cols, exp.spec("smoke", sets))
        o = {c.id: c for c in an.claims}
        free = [c["free of the floor"] for c in an.summary["columns"]]
        assert all(free) if judged else sum(free) < 4
        assert (o["likelihood"].outcome == "pass") == judged, (tau, o["likelihood"].outcome, o["likelihood"].detail)
        if not judged:
            assert o["likelihood"].outcome == o["exponent"].outcome == "descriptive"
            assert "free of the mean-token floor" in o["likelihood"].detail
        zs = [c["z"] for c in an.summary["mean-token floor"]["per column"]]
        assert zs == sorted(zs) and all(z > 0 for z in zs)


def test_the_lr_is_tuned_at_the_hardest_column_free_of_the_floor():
    exp = get("li2023-fig1")
    spec = exp.spec("cpu", ["reps=1"])
    grid = exp.cells(spec)
    fields, z = exp.tune_column(grid, spec)
    assert z == pytest.approx(4.0) and round(fields["alpha_star"] * 50) == 9  # n_* = 9: z = 4, the smallest ≥ 4


SETTLE_ALPHA = np.array([0.1, 0.12, 0.14, 0.16, 0.2])  # the middle α_* is 0.14
SETTLE_N = np.array([5, 10, 20, 40, 80, 160, 320, 640])
NC_MID = float(np.exp(np.median(np.log(SETTLE_N))))  # every learner's N_c at the middle α_* (57), unless shifted


def settle_rows(p_by, seed=0, shift=None):
    """Per learner, success iff N·α^p > C (noisy, the noise shared by the learners' common draws):
    every boundary passes through N_c = NC_MID at the middle α_*, times e^shift[learner]."""
    rng = np.random.default_rng(seed)
    alpha, N = SETTLE_ALPHA, SETTLE_N
    a, n = (np.repeat(g.ravel(), 12) for g in np.meshgrid(alpha, N, indexing="ij"))
    rep = np.tile(np.arange(12), len(alpha) * len(N))
    units = list(zip(a.tolist(), n.tolist(), [0] * len(a), rep.tolist(), strict=True))
    e = rng.standard_normal(len(a))  # common draws: the same noise per unit for every learner
    out = {}
    for name, p in p_by.items():
        C = NC_MID * np.median(alpha) ** p * np.exp((shift or {}).get(name, 0.0))
        out[name] = {
            "alpha": a,
            "N": n,
            "unit": units,
            "success": np.log(n) + p * np.log(a) + 0.4 * (e + 0.5 * rng.standard_normal(len(a))) > np.log(C),
        }
    return out


def test_paired_exponents_recover_each_learners_law_and_their_difference():
    per, pairs = settle.paired_exponents(settle_rows({"vit": 2.0, "cnn": 4.0, "linear": 2.0}), 200, 0)
    assert per["vit"]["p"] == pytest.approx(2, abs=0.3) and per["cnn"]["p"] == pytest.approx(4, abs=0.5)
    d = pairs["vit − cnn"]
    assert d["ci95"][1] < 0 and d["value"] == pytest.approx(-2, abs=0.6)
    same = pairs["vit − linear"]
    assert same["ci95"][0] < 0 < same["ci95"][1]
    assert rules.no_effect(same["value"], *same["ci95"], 1.0).outcome == rules.PASS
    # the likelihood-ratio tests of each learner's free fit: its own law kept, the other rejected
    for name, (keep, drop) in {"vit": ("p=2", "p=4"), "cnn": ("p=4", "p=2"), "linear": ("p=2", "p=4")}.items():
        pv = per[name]["lr_p_value"]
        assert pv[keep] >= 0.05 and pv[drop] < 0.05, (name, pv)
        assert per[name]["N_c at the middle α_*"] == pytest.approx(NC_MID, rel=0.3), (name, per[name])
    for pair in ("vit − cnn", "vit − linear", "cnn − linear"):  # no gap at the middle α_*: each interval holds 0
        gap = pairs[pair]["log N_c gap at the middle α_*"]
        assert gap["ci95"][0] < 0 < gap["ci95"][1] and abs(gap["value"]) < 0.3, (pair, gap)


def test_paired_exponents_measure_the_gap_at_the_middle_alpha():
    """The baseline needing 2× the ViT's samples at the middle α_* (its law steeper through that
    point): the paired interval of log N_c(vit) − log N_c(cnn) lies below 0, about −log 2."""
    per, pairs = settle.paired_exponents(settle_rows({"vit": 2.0, "cnn": 4.0}, shift={"cnn": np.log(2)}), 200, 0)
    gap = pairs["vit − cnn"]["log N_c gap at the middle α_*"]
    assert gap["value"] == pytest.approx(-np.log(2), abs=0.15) and gap["ci95"][1] < 0, gap
    assert per["cnn"]["N_c at the middle α_*"] / per["vit"]["N_c at the middle α_*"] == pytest.approx(2, rel=0.15)


def settle_results(design, rows, n_boot=200):
    """The summary's results of one design from the learners' runs, as Settle.analyse stores them."""
    per, pairs = settle.paired_exponents(rows, n_boot, 0)
    cols = lambda r: [c.as_dict() for c in phase.columns(r["alpha"], r["N"], r["success"], 20, 0)]
    learners = {name: {"exponent": e, "columns": cols(rows[name])} for name, e in per.items()}
    return {design: {"learners": learners, "differences of p (paired)": pairs}}


def test_settle_free_claims_judge_each_learners_law_and_the_gap():
    """free-vit-exponent (p = 2 kept, 4 rejected), free-cnn-exponent (p = 4 kept, 2 rejected) and
    free-gap (the baseline's N_c above the ViT's at the middle α_*) on paired runs: each passes
    where the paper's picture holds and fails where it is reversed; no gap is inconclusive."""
    exp = get("li2023-settle")
    spec = exp.spec("cpu")
    claims = lambda p_by, shift=None: {
        c.id: c for c in exp._claims(settle_results("free", settle_rows(p_by, shift=shift)), spec)
    }
    c = claims({"vit": 2.0, "cnn": 4.0}, {"cnn": np.log(2)})
    assert [c[k].outcome for k in ("free-vit-exponent", "free-cnn-exponent", "free-gap")] == ["pass"] * 3, c
    assert c["free-gap"].measured["ratio"] == pytest.approx(2, rel=0.15)
    assert c["free-cnn-exponent"].measured["p_value(p=4)"] >= 0.05 > c["free-cnn-exponent"].measured["p_value(p=2)"]
    c = claims({"vit": 4.0, "cnn": 2.0}, {"cnn": -np.log(2)})  # the laws swapped, the baseline needs fewer
    assert [c[k].outcome for k in ("free-vit-exponent", "free-cnn-exponent", "free-gap")] == ["fail"] * 3, c
    c = claims({"vit": 2.0, "cnn": 4.0})  # the two boundaries cross at the middle α_*
    assert c["free-gap"].outcome == "inconclusive", c["free-gap"].measured
    assert list(c)[:3] == ["free-vit-exponent", "free-cnn-exponent", "free-gap"]


def test_settle_designs_are_checked_before_anything_runs():
    exp = get("li2023-settle")
    spec = exp.spec("cpu", ["reps=1"])
    assert spec.designs["floor"] == {
        "n_star": [6, 7, 8, 9, 10],
        "n_hash": 1,
        "N": [20, 40, 80, 160, 320, 640],
        "tau": 0.3,
    }
    designs = spec.designs | {"floor": spec.designs["floor"] | {"n_star": [6, 7, 8, 9, 11]}}  # n_* = 11: z = 3.33
    with pytest.raises(AttnlabError, match=r"designs.floor: the column α_\* = 0.22 has margin z = 3.33"):
        staged(
            exp.stages(spec.model_copy(update={"designs": designs})), lambda cells: pytest.fail("ran before the check")
        )
    for scale in ("cpu", "paper"):
        s = exp.spec(scale, ["reps=1"])
        for design in s.designs:
            sub = settle._sub(s, design, "vit")
            grid = settle._COLUMN._expand(sub, "grid")
            zs = settle.check_design(grid, design, s.z_range[design])
            assert len(zs) >= 5 and zs == sorted(zs)
            counts = {(c["data.alpha_star"] * c["data.L"], c["data.alpha_hash"] * c["data.L"]) for c in grid}
            # n_# = 1 in every floor column (not ⌊n_*/6⌋, which is 0 below n_* = 6); ⌊n_*/6⌋ in the free design
            want = (lambda n: 1) if design == "floor" else (lambda n: n // 6)
            assert all(round(h) == want(round(n)) for n, h in counts), counts


def test_settle_claims_read_each_pair_in_either_order():
    """The paired differences are stored in the learners' order (vit − cnn, or cnn − vit where the
    baseline comes first); floor-cnn-steeper reads p_cnn − p_vit and floor-gap log N_c(cnn) −
    log N_c(vit) from either, sign and interval flipped: pass, fail and inconclusive alike; the ViT's
    law by its likelihood-ratio p-values."""
    exp = get("li2023-settle")
    spec = exp.spec("cpu")

    def pair(v, lo, hi, g, glo, ghi, order="vit − cnn"):
        sign = 1 if order == "vit − cnn" else -1
        flip = lambda *xs: [sign * x for x in xs][::sign]  # an interval stays ordered
        return {
            order: {
                "value": sign * v,
                "ci95": flip(lo, hi),
                "ci99": flip(lo - 0.2, hi + 0.2),
                "log N_c gap at the middle α_*": {"value": sign * g, "ci95": flip(glo, ghi)},
            }
        }

    for order in ("vit − cnn", "cnn − vit"):
        results = {
            "floor": {
                "learners": {"vit": settle_learner(2.0, 0.6, 0.001), "cnn": settle_learner(4.0, 0.001, 0.5)},
                "differences of p (paired)": pair(-2.0, -2.6, -1.3, -1.0, -1.5, -0.5, order),
            }
        }
        (vit, cnn, gap) = exp._claims(results, spec)
        assert vit.id == "floor-vit-exponent" and vit.outcome == "pass"
        assert cnn.id == "floor-cnn-steeper" and cnn.outcome == "pass" and cnn.measured["ci99"] == [1.1, 2.8]
        assert gap.id == "floor-gap" and gap.outcome == "pass", (order, gap.measured)
        assert gap.measured["log N_c(cnn) − log N_c(vit)"] == 1.0 and gap.measured["ci95"] == [0.5, 1.5]
        results["floor"]["differences of p (paired)"] = pair(0.8, 0.4, 1.4, 0.6, 0.2, 1.0, order)
        results["floor"]["learners"]["vit"] = settle_learner(4.1, 0.001, 0.7)
        assert [c.outcome for c in exp._claims(results, spec)] == ["fail", "fail", "fail"], order
        results["floor"]["differences of p (paired)"] = pair(0.8, 0.4, 1.4, 0.1, -0.3, 0.5, order)
        assert exp._claims(results, spec)[2].outcome == "inconclusive"  # the gap's interval holds 0
    no_gap = pair(-2.0, -2.6, -1.3, 0.0, 0.0, 0.0)  # a learner never or always succeeds: no interval
    no_gap["vit − cnn"]["log N_c gap at the middle α_*"] = {"value": None, "ci95": [None, None]}
    gap = exp._claims(results | {"floor": results["floor"] | {"differences of p (paired)": no_gap}}, spec)[2]
    assert gap.outcome == "inconclusive" and gap.detail.startswith("no interval")


def settle_learner(p, pv2, pv4, crossed=5, pv3=0.001):
    """A learner's stored exponent: its free fit and the p-values of its likelihood-ratio tests (p = 3
    rejected unless ``pv3`` says otherwise), over ``crossed`` of 5 columns with N_c inside the grid."""
    return {
        "columns": [{"status": "crossed" if i < crossed else "above grid"} for i in range(5)],
        "exponent": {
            "p": p,
            "ci95": [p - 0.4, p + 0.4],
            "loglik p=2 minus p=4": 1.0,
            "lr_p_value": {"p=2": pv2, "p=3": pv3, "p=4": pv4},
        }
    }


def test_settle_laws_need_three_columns_inside_the_grid():
    """A learner whose N_c lies inside the N grid in fewer than 3 columns has no law to judge: its
    exponent claim is inconclusive whatever the likelihood ratios of a degenerate fit say (the
    cpu floor design: one crossed column of five, p = 55 [−34, 390], both laws rejected)."""
    exp = get("li2023-settle")
    results = {"floor": {"learners": {"vit": settle_learner(55.0, 4e-16, 6e-13, crossed=1)}}}
    c = {c.id: c for c in exp._claims(results, exp.spec("cpu"))}["floor-vit-exponent"]
    assert c.outcome == "inconclusive" and c.measured["columns crossed"] == 1 and "no law" in c.detail
    results = {"floor": {"learners": {"vit": settle_learner(55.0, 4e-16, 6e-13, crossed=3)}}}
    assert {c.id: c for c in exp._claims(results, exp.spec("cpu"))}["floor-vit-exponent"].outcome == "fail"


def test_settle_same_law_is_reported_unless_judged():
    """free-same-as-linear: the band rule's outcome is kept beside the measurement (its audit's power
    at the cpu design is 0.76); with judge_same_law it is the verdict."""
    exp = get("li2023-settle")
    same = {"vit − linear": {"value": 0.3, "ci95": [-0.5, 1.1], "ci99": [-0.7, 1.3]}}
    results = {
        "free": {
            "learners": {"vit": settle_learner(4.5, 1e-6, 0.4), "linear": settle_learner(4.3, 1e-5, 0.5)},
            "differences of p (paired)": same,
        }
    }
    by_id = {c.id: c for c in exp._claims(results, exp.spec("cpu"))}
    law, reported = by_id["free-vit-exponent"], by_id["free-same-as-linear"]
    assert law.outcome == "fail"
    # no baseline among the learners: its law and the gap have nothing to read
    assert by_id["free-cnn-exponent"].outcome == by_id["free-gap"].outcome == "inconclusive"
    assert (
        reported.outcome == "descriptive" and reported.measured["rule_outcome"] == "pass" and "0.76" in reported.detail
    )
    same_law = lambda res: {c.id: c for c in exp._claims(res, exp.spec("cpu", ["judge_same_law=true"]))}
    assert same_law(results)["free-same-as-linear"].outcome == "pass"
    far = {"vit − linear": {"value": -2.5, "ci95": [-3.0, -2.0], "ci99": [-3.2, -1.8]}}
    judged = same_law(results | {"free": results["free"] | {"differences of p (paired)": far}})
    assert judged["free-same-as-linear"].outcome == "fail"
