"""The li2023 audit designs: every id's design runs at smoke and cpu scale with a row per declared
claim (a row without simulations for a check or measurement, a flagged gap row for a stated
prediction without worlds); each simulator draws exactly its experiment's design (cells, stages,
grid values, blocks, reps, derived rows, logged steps, fig3's hinge cells); the plug-ins read back
the noise a simulator was given, and the diagrams' operating point N_c at the middle column; and
the rules the design once decided: fig4's noisiest-first is judged at k_claim in training and at
the number of noisy tokens at test time, decided at the default noise contrast of 5, and its
training-time claims separate H1 from H0; fig3's rate is a bound that passes the proved O(1/t) to
a plateau below 1 and an exponential approach, and fails slower decays; near-one-hinge separates
H1 from a plateau below the level; fig1's straight line passes a fourth-power law (so it is
descriptive). The batched bootstrap of the phase columns gives the replicates of the one-at-a-time
fits."""

import numpy as np
import pytest

from attnlab import audit, ledger
from attnlab.data import sparsify
from attnlab.experiments import get
from attnlab.experiments.li2023 import phase
from attnlab.experiments.li2023.diagram import TUNE_SEED

IDS = ("li2023-fig1", "li2023-fig2", "li2023-noise", "li2023-init-error", "li2023-fig3", "li2023-fig4", "li2023-fig5")
DIAGRAMS = IDS[:4]
FAST = ["oracle_n=50"]  # the oracle floor is a summary beside the claims: fewer samples keep the suite fast


def spec_of(exp, scale):
    return exp.spec(scale, FAST if exp.id in DIAGRAMS else [])


def design_cells(exp, spec):
    d = exp.audit
    return d.cells(spec) if d.cells else exp.cells(spec)


def simulate(exp, spec, world=None, seed=0):
    d = exp.audit
    return d.simulate(
        world or d.claims[0].h1.world, d.noise, spec, design_cells(exp, spec), np.random.default_rng(seed)
    )


def outcomes(exp, spec, world, sims, claim):
    return [
        {c.id: c.outcome for c in exp.analyse(simulate(exp, spec, world, k), spec).claims}[claim] for k in range(sims)
    ]


# fig4's cpu design (112 000 simulated test samples a simulation) is audited by its rules' own tests below
@pytest.mark.parametrize(
    ("exp_id", "scale"), [(i, s) for i in IDS for s in ("smoke", "cpu") if (i, s) != ("li2023-fig4", "cpu")]
)
def test_every_design_runs_with_a_row_per_claim(exp_id, scale):
    exp = get(exp_id)
    sims = 4  # the form of the rows only
    spec = spec_of(exp, scale)
    result = audit.audit(exp, spec, scale, sims=sims, seed=1)
    stated = [c.id for c in exp.analyse(simulate(exp, spec), spec).claims]  # a design may declare claims a scale lacks
    declared = {ca.claim: ca for ca in exp.audit.claims}
    kind = lambda claim: getattr(ledger.rule_of(exp, claim), "kind", ledger.PREDICTION)
    # a stated prediction without worlds would get a gap row after the declared claims; every li2023
    # design declares worlds for every prediction it states (fig4's order-k at smoke's k = 2, 4 too)
    gaps = [c for c in stated if c not in declared and kind(c) == ledger.PREDICTION]
    assert gaps == []
    assert [c["id"] for c in result["claims"]] == [ca.claim for ca in exp.audit.claims if ca.claim in stated] + gaps
    for c in result["claims"]:
        assert c["kind"] == kind(c["id"]), c["id"]
        if c["id"] in gaps:  # a gap: shown, flagged, nothing simulated
            assert c["power"]["n"] == 0 and c["flagged"] and not c["descriptive"]
            assert c["reason"] == "no worlds declared for this prediction yet" and c["worlds"] == []
            continue
        ca = declared[c["id"]]
        if c["kind"] != "prediction":  # a check or a measurement: nothing of the paper's to audit
            assert c["power"]["n"] == 0 and not c["flagged"] and c["worlds"] == []
            continue
        assert ca.misspecified, c["id"]  # every prediction has a world where it is false beyond H0
        # a descriptive claim (a measurement at this design) is not simulated under H0 nor the other worlds
        assert c["power"]["n"] == sims and c["false_pass"]["n"] == (0 if c["descriptive"] else sims)
        worlds = [(w["statement"], w["holds"]) for w in c["worlds"]]
        assert worlds == (
            []
            if c["descriptive"]
            else [(h.statement, False) for h in ca.misspecified] + [(h.statement, True) for h in ca.also_true]
        )
        assert all(w["pass"]["n"] == sims for w in c["worlds"])
        assert c["h1_source"] and c["h0_source"]
    assert set(result["noise"]) == set(exp.audit.noise) and result["noise_source"].startswith("default")


@pytest.mark.parametrize("exp_id", DIAGRAMS)
def test_the_diagram_simulator_draws_the_staged_design(exp_id):
    """The lr-tuning stage (tune_lr × tune_reps at the hardest free column and the tuning N, its own
    seed), the grid × reps at the chosen lr, then (η stage) and the linear learner's tuning and floor
    stages: every cell once, with its own values, block and rep."""
    exp = get(exp_id)
    spec = spec_of(exp, "cpu")
    cells = design_cells(exp, spec)
    cols = simulate(exp, spec)
    for k in cells[0]:
        assert cols[k].tolist() == [c.get(k) for c in cells], k
    tune, grid = cols["stage"] == "tune", cols["stage"] == "grid"
    assert tune.sum() == len(spec.tune_lr) * spec.tune_reps and set(cols["seed"][tune]) == {spec.seed + TUNE_SEED}
    plain = exp.cells(spec)
    assert grid.sum() == len(plain) and len(set(cols["train.lr"][grid])) == 1
    points = {(c[exp.axis], c["data.N"]) for c in plain}
    assert set(zip(cols[exp.axis][grid], cols["data.N"][grid], strict=True)) == points
    floor = cols["stage"] == "floor"
    assert floor.sum() == (
        grid.sum() if exp.axis.startswith("data.") else len({(c["data.N"], c["rep"]) for c in plain})
    )
    assert set(cols["model.name"][floor]) == {"li2023-linear"}
    assert sorted(set(cols["rep"][grid])) == list(range(spec.reps)) and set(cols["block"][grid]) == {0}
    # outcomes on both sides of the boundary; stop steps on the stopping check, capped runs censored
    success = cols["test_error"][grid] == 0
    assert 0.2 < success.mean() < 0.8
    assert np.all(cols["stop_step"] % spec.train.get("stop_every", 10) == 0)
    assert np.all(cols["stop_step"] <= cols["train.max_steps"]) and set(cols["status"]) <= {"converged", "cap"}


def test_the_attention_simulator_draws_one_trace_per_repeat_on_the_logged_steps():
    from attnlab import train as T

    exp = get("li2023-fig3")
    spec = exp.spec("cpu")
    cols = simulate(exp, spec)
    tr = spec.train
    t = T.log_schedule(tr["max_steps"], every=tr["log_every"], dense_until=tr["log_dense_until"])
    n = 2 * spec.reps  # the design under its loss, then the same under the hinge loss
    assert len(cols["trace_step"]) == n and list(cols["rep"]) == list(range(spec.reps)) * 2
    assert list(cols["train.loss"]) == ["logistic"] * spec.reps + ["hinge"] * spec.reps
    assert np.array_equal(cols["train_loss"], np.zeros(n))  # trained to zero training loss
    A = np.stack(cols["trace_attn_relevant"])
    assert [list(s) for s in cols["trace_step"]] == [list(t)] * n and A.shape == (n, len(t))
    assert np.all(A < 1) and abs(A[:, 0].mean() - 0.54) < 0.02 and abs(A[:, list(t).index(100)].mean() - 0.91) < 0.05
    claims = [c.id for c in exp.analyse(cols, spec).claims]
    assert claims == ["rises", "near-one", "rate", "near-one-hinge"]


def test_the_sparsification_simulator_draws_the_derived_rows():
    """One row per cell trained on all tokens × strategy × k ("test"), then one per retrained cell
    ("train", its training strategy and k): the cells' own columns and ids."""
    from attnlab.engine.grid import cell_id

    exp = get("li2023-fig4")
    spec = exp.spec("cpu")
    cells, cols = exp.cells(spec), simulate(exp, spec)
    base = [c for c in cells if c["data.sparsify"] == "none"]
    retrained = [c for c in cells if c["data.sparsify"] != "none"]
    assert len(base) == spec.reps and len(retrained) == 3 * len(spec.train_ks) * spec.reps
    ks = list(range(0, spec.k_max + 1, spec.k_step))
    per = len(sparsify.STRATEGIES) * len(ks)
    test = cols["removal"] == "test"
    assert test.sum() == len(base) * per and (~test).sum() == len(retrained)
    assert list(cols["id"][test][::per]) == [cell_id(c) for c in base]
    assert list(cols["rep"][test][::per]) == list(range(spec.reps))
    first = slice(0, per)
    assert [(s, k) for s, k in zip(cols["strategy"][first], cols["k_removed"][first], strict=True)] == [
        (s, k) for s in sparsify.STRATEGIES for k in ks
    ]
    at0 = cols["test_loss"][test & (cols["k_removed"] == 0)].reshape(len(base), -1)
    assert np.all(at0 == at0[:, :1])  # k = 0 is the same evaluation for every strategy
    assert sorted(cols["id"][~test]) == sorted(cell_id(c) for c in retrained)
    assert np.array_equal(cols["strategy"][~test], cols["data.sparsify"][~test])
    assert np.array_equal(cols["k_removed"][~test], cols["data.sparsify_k"][~test])


def test_the_images_simulator_draws_both_stages_and_every_variant():
    exp = get("li2023-fig5")
    spec = exp.spec("cpu")
    cells, cols = design_cells(exp, spec), simulate(exp, spec)
    assert [c["stage"] for c in cells].count("pretrain") == 1 and len(cols["test_error"]) == len(cells) == 43
    for k in ("stage", "init", "data.alpha_star", "data.sparsify", "block", "rep"):
        assert cols[k].tolist() == [c[k] for c in cells], k
    ft = cols["stage"] == "finetune"
    pairs = {
        (i, a, s)
        for i, a, s in zip(cols["init"][ft], cols["data.alpha_star"][ft], cols["data.sparsify"][ft], strict=True)
    }
    alphas = spec.data["alpha_star"]
    assert pairs == {
        (i, a, s) for i in ("pretrained", "scratch") for a in alphas for s in (False, True) if a < 1 or not s
    }
    acc = cols["test_accuracy"]
    assert np.allclose(acc, 1 - cols["test_error"]) and np.allclose(acc * 1000, np.round(acc * 1000))


@pytest.mark.parametrize("exp_id", IDS)
def test_a_plug_in_reads_back_the_noise_it_was_simulated_with(exp_id):
    exp = get(exp_id)
    spec = spec_of(exp, "cpu")
    d = exp.audit
    got = d.plug_in(simulate(exp, spec), spec)
    # the α_* diagrams also read their operating point, the fitted N_c at the grid's middle column
    assert set(got) == set(d.noise) | ({"Nc_mid"} if exp_id in ("li2023-fig1", "li2023-fig2") else set())
    for k, v in d.noise.items():
        if exp_id == "li2023-fig3" and k == "plateau_sd":
            continue  # H1 has no plateau below 1
        assert v / 2.5 < got[k] < 2.5 * v, (k, got[k], v)


@pytest.mark.parametrize("exp_id", ["li2023-fig1", "li2023-fig2"])
def test_the_diagram_simulator_places_the_boundary_at_a_plugged_in_operating_point(exp_id):
    """With Nc_mid in the noise the simulated boundary crosses the middle column at that N (the
    stored run's operating point), whatever the law: the plug-in reads it back, and success at
    the middle column rises through ½ there."""
    exp = get(exp_id)
    spec = spec_of(exp, "cpu")
    d = exp.audit
    cells = design_cells(exp, spec)
    for nc in (15.0, 100.0):
        for world in (d.claims[0].h1.world, d.claims[0].h0.world):
            cols = d.simulate(world, d.noise | {"Nc_mid": nc}, spec, cells, np.random.default_rng(0))
            got = d.plug_in(cols, spec)["Nc_mid"]
            assert nc / 1.5 < got < 1.5 * nc, (nc, got, world)
    low, high = (
        d.plug_in(
            d.simulate(d.claims[0].h1.world, d.noise | {"Nc_mid": nc}, spec, cells, np.random.default_rng(1)), spec
        )
        for nc in (15.0, 100.0)
    )
    assert 3 < high["Nc_mid"] / low["Nc_mid"] < 12  # the operating point moves with the stored run's


def analysed(exp, spec, world, sims, *specs):
    """The claims of ``sims`` simulations of ``world`` at ``spec``'s design, by id; with ``specs``
    (the same design, other rules), the same simulations analysed under each too."""
    out = []
    for k in range(sims):
        cols = simulate(exp, spec, world, k)
        out.append([{c.id: c for c in exp.analyse(cols, s).claims} for s in (spec, *specs)])
    return [o[0] for o in out] if not specs else out


def test_fig4_noisiest_first_is_decided_at_the_default_noise_contrast():
    """The default design has 20 noisy tokens of τ_noisy = 5τ (1.0 against 0.2; 40 % of L = 50):
    noisiest-first is judged at k_claim = 20 in training, as irrelevant and random are, and at the
    number of noisy tokens (20) at test time, so both remove the noisy tokens and nothing else. H1
    passes at test time and does not fail in training; the orders that remove the quietest tokens
    first, or at random, fail both. At
    τ_noisy = 2τ the noise removed is offset by the signal removed with it, and the claims are
    descriptive there."""
    exp = get("li2023-fig4")
    spec = exp.spec("cpu")
    assert spec.data["noisy_tau"] == 1.0 and spec.data["noisy_frac"] == 0.4 and spec.k_claim == 20
    assert spec.train_ks == list(range(2, 21, 2))
    noisiest = next(ca for ca in exp.audit.claims if ca.claim == "noisiest")
    for c in analysed(exp, spec, noisiest.h1.world, 2):
        # at test time the mean-pooled model gains clearly; retrained, removing the noisy tokens also removes
        # 40 % of the signal, and the model's gain is small (its audit measures the power at a run's noise)
        assert c["noisiest-test"].outcome == "pass" and c["noisiest"].outcome != "fail", (c["noisiest"].measured,)
        assert c["noisiest"].statement.endswith("(k = 20)") and c["noisiest-test"].statement.endswith("(k = 20)")
    for h in (*noisiest.misspecified, noisiest.h0):
        for claims in analysed(exp, spec, h.world, 1):
            assert claims["noisiest"].outcome == claims["noisiest-test"].outcome == "fail", h.statement
    weak = exp.spec("cpu", ["data.noisy_tau=0.4"])
    (o,) = analysed(exp, weak, noisiest.h1.world, 1)
    assert o["noisiest"].outcome == o["noisiest-test"].outcome == o["order-10"].outcome == "descriptive"


def test_fig4_training_time_claims_separate_h1_from_h0():
    """Retrained cells: irrelevant-first lowers the hinge loss and random removal raises it under
    H1; under H0 irrelevant-first does what random removal does (fail) and random removal what
    irrelevant-first does (it lowers the loss past the margin: fail). The test-time irrelevant
    claim is descriptive (mean pooling's rescaling), and so is attention (a measurement)."""
    exp = get("li2023-fig4")
    spec = exp.spec("cpu")
    by = {(ca.claim, ca.h0.statement): ca for ca in exp.audit.claims}
    irr = next(ca for (c, _), ca in by.items() if c == "irrelevant")
    rnd = next(ca for (c, _), ca in by.items() if c == "random")
    assert irr.h1.world == rnd.h1.world  # one H1 world: its simulations serve both claims
    for c in analysed(exp, spec, irr.h1.world, 2):
        assert c["irrelevant"].outcome == c["random"].outcome == "pass"
        assert c["irrelevant-test"].outcome == c["attention"].outcome == "descriptive"
    assert outcomes(exp, spec, irr.h0.world, 2, "irrelevant") == ["fail"] * 2
    assert outcomes(exp, spec, rnd.h0.world, 2, "random") == ["fail"] * 2


def test_fig3_rate_passes_at_the_proved_rate_to_a_plateau_and_faster_and_fails_slower():
    """The rate is a bound: A_∞ − A(t) ∝ (1 + t/t₁)^−1 to a plateau 0.95 passes (the old fit of
    1 − A on t ∈ [100, 500] never did), and so does an exponential approach (faster, inside the
    bound: the rule's v3 failed it); (1 + t/t₁)^−½ (H0) and ^−¼ (misspecified) fail."""
    exp = get("li2023-fig3")
    spec = exp.spec("cpu")
    (rate,) = [ca for ca in exp.audit.claims if ca.claim == "rate"]
    (slower,), (fast,) = rate.misspecified, rate.also_true
    assert rate.h1.world["A_inf"] < 1 and rate.h0.world["q"] == 0.5 and slower.world["q"] == 0.25
    assert fast.world["shape"] == "exponential"
    assert outcomes(exp, spec, rate.h1.world, 10, "rate") == ["pass"] * 10
    assert outcomes(exp, spec, rate.h0.world, 10, "rate") == ["fail"] * 10
    assert outcomes(exp, spec, slower.world, 5, "rate") == ["fail"] * 5
    assert outcomes(exp, spec, fast.world, 5, "rate") == ["pass"] * 5


def test_fig3_near_one_hinge_separates_h1_from_a_plateau_below_the_level():
    """near-one-hinge reads the hinge cells with near-one's rule: the paper's A → 1 passes, a
    plateau at 0.85 (H0) and a frozen one at 0.6 (misspecified) fail."""
    exp = get("li2023-fig3")
    spec = exp.spec("cpu")
    hinge = next(ca for ca in exp.audit.claims if ca.claim == "near-one-hinge")
    assert outcomes(exp, spec, hinge.h1.world, 3, "near-one-hinge") == ["pass"] * 3
    assert outcomes(exp, spec, hinge.h0.world, 3, "near-one-hinge") == ["fail"] * 3
    assert outcomes(exp, spec, hinge.misspecified[0].world, 3, "near-one-hinge") == ["fail"] * 3


def test_fig1_line_is_descriptive_since_its_r2_passes_a_fourth_power_law():
    """R² of N_c on α_*^−2 stays high when N_c ∝ α_*^−4: the line cannot tell the two laws apart,
    so it is reported (with the audit's numbers), never judged."""
    exp = get("li2023-fig1")
    spec = spec_of(exp, "cpu")
    line = next(ca for ca in exp.audit.claims if ca.claim == "line")
    assert line.h0.world["p"] == 4.0
    claims = [
        {c.id: c for c in exp.analyse(simulate(exp, spec, line.h0.world, k), spec).claims}["line"] for k in range(20)
    ]
    assert {c.outcome for c in claims} == {"descriptive"} and "false pass 0.88" in claims[0].detail
    assert sum((c.measured.get("r2") or 0) >= 0.9 and (c.measured["b_ci95"][0] or -1) > 0 for c in claims) >= 10


def test_the_batched_column_bootstrap_gives_the_loops_replicates():
    rng = np.random.default_rng(3)
    N = np.repeat([10, 20, 40, 80, 160, 320], 6)
    for steep in (0.5, 2.0, 8.0):
        s = rng.random(len(N)) < 1 / (1 + np.exp(-steep * (np.log(N) - np.log(40))))
        col = phase.column(0.1, N, s, 60, np.random.default_rng(7))
        r = np.random.default_rng(7)
        loop = np.array(
            [
                phase._crossing(np.log(N[i]), s[i].astype(float))
                for i in (r.integers(0, len(s), len(s)) for _ in range(60))
            ]
        )
        assert np.array_equal(np.isnan(loop), np.isnan(col.boots))
        np.testing.assert_allclose(col.boots[np.isfinite(loop)], loop[np.isfinite(loop)], rtol=1e-8)


def test_the_negative_control_fails_on_a_real_run(tmp_path):
    """W_Q, W_K frozen (lr ×10⁻⁶): the attention stays at A(0), so near-one must fail (not be
    inconclusive); three smoke repeats decide it."""
    import dataclasses

    exp = get("li2023-fig3")
    (negative,) = [c for c in exp.controls if c.kind == "negative"]
    result = audit.run_control(exp, dataclasses.replace(negative, scale="smoke"), tmp_path / "neg")
    assert result["held"] and result["got"] == {"near-one": "fail"}, result
