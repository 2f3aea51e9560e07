"""The claims audit on rules whose answer is known: a rule that cannot fail is flagged, a sound
rule is not, a rule judged at the wrong point of its design is flagged; Clopper–Pearson bounds;
and the jiang2024 phase simulator draws exactly the experiment's design."""

import numpy as np
import pytest
from scipy import stats

from attnlab import audit, rules
from attnlab.audit import ClaimAudit, Design, Hypothesis
from attnlab.errors import AttnlabError
from attnlab.experiments import get
from attnlab.experiments.base import Analysis, Claim
from helpers import AUDIT_ROW

MIS = Hypothesis("removing tokens hurts a little", "a world between", {"effect": -0.005})


class Toy:
    """An experiment of ``reps`` repeats whose one claim judges the column ``x`` with ``rule``."""

    id, regime = "toy", "investigation"

    def __init__(self, rule, simulate, h1, h0, reps=12, misspecified=(MIS,)):
        self.rule, self.reps = rule, reps
        self.audit = Design(
            simulate=simulate,
            claims=(ClaimAudit("c", h1, h0, misspecified=misspecified),),
            noise={"sd": 1.0},
            noise_source="declared",
        )

    def cells(self, spec):
        return [{"rep": r} for r in range(self.reps)]

    def analyse(self, cols, spec):
        return Analysis(claims=[Claim.of("c", "toy", self.rule(cols["x"]))])


def gain_at(k_judged, n_noisy=10):
    """Per repeat, the gain of removing k tokens when the first ``n_noisy`` removals help (H1:
    0.02 each) and later ones remove relevant tokens (−0.025 each); H0: every removal hurts."""

    def simulate(world, noise, spec, cells, rng):
        k = k_judged
        helps = world["effect"] * min(k, n_noisy) - 0.025 * max(k - n_noisy, 0)
        return {"x": helps + 0.05 * noise["sd"] * rng.standard_normal(len(cells))}

    return simulate


H1 = Hypothesis("removing the noisy tokens helps", "the theory", {"effect": 0.02})
H0 = Hypothesis("removing tokens hurts", "the competing law", {"effect": -0.01})
SIGN = lambda x: rules.sign_test(x, name="gain")


def run(exp, sims=100):
    (row,) = audit.audit(exp, None, "smoke", sims=sims, seed=1)["claims"]
    return row


def test_a_rule_that_cannot_fail_is_flagged():
    """'error > 0' on errors that are positive under either hypothesis passes under H0 too."""
    cannot_fail = lambda x: rules.Verdict(rules.PASS if np.all(x > 0) else rules.FAIL, {}, "every error > 0")
    sim = lambda world, noise, spec, cells, rng: {"x": world["scale"] * rng.random(len(cells)) + 1e-9}
    exp = Toy(
        cannot_fail,
        sim,
        Hypothesis("errors ~ 0.3", "s", {"scale": 0.3}),
        Hypothesis("errors ~ 0", "s", {"scale": 1e-3}),
        misspecified=(Hypothesis("errors ~ 0.01", "s", {"scale": 0.01}),),
    )
    row = run(exp)
    assert row["false_pass"]["rate"] == 1.0 and row["flagged"] and "false pass" in row["reason"]


def test_a_sound_rule_is_not_flagged():
    row = run(Toy(SIGN, gain_at(10), H1, H0))
    assert row["power"]["rate"] == 1.0 and row["false_pass"]["rate"] == 0.0 and row["false_fail"]["rate"] == 0.0
    assert not row["flagged"], row["reason"]
    assert AUDIT_ROW <= set(row)
    (world,) = row["worlds"]  # the misspecified world, its own pass rate
    assert world["holds"] is False and world["pass"]["rate"] <= 0.05 and world["pass"]["n"] == 100


def test_a_rule_passing_a_misspecified_world_is_flagged_and_one_without_such_worlds_too():
    """A world where the claim is false but the rule passes (here: a gain half the size of H1's) is
    a flag; a prediction whose design simulates only its own H1 and H0 is flagged as a gap."""
    half = Hypothesis("half the gain", "a law between", {"effect": 0.01})
    row = run(Toy(SIGN, gain_at(10), H1, H0, misspecified=(half,)))
    assert row["flagged"] and "where it is false (half the gain)" in row["reason"]
    row = run(Toy(SIGN, gain_at(10), H1, H0, misspecified=()))
    assert row["flagged"] and "no misspecified world declared" in row["reason"]


def test_a_rule_judged_past_the_last_noisy_token_is_flagged():
    """Judged at k = 20 with 10 noisy tokens, removals 11–20 cost more than the first 10 gained:
    the rule fails under H1 (no power, false fails)."""
    row = run(Toy(SIGN, gain_at(20), H1, H0))
    assert row["flagged"] and row["power"]["rate"] == 0.0 and row["false_fail"]["rate"] > 0.5


def test_too_few_simulations_cannot_show_a_rule_sound():
    """With no false pass in K runs the upper bound is below 0.05 only from K = 72 on."""
    assert run(Toy(SIGN, gain_at(10), H1, H0), sims=40)["flagged"]
    assert audit.clopper_pearson(0, 71)[1] > 0.05 > audit.clopper_pearson(0, 72)[1]
    lo, hi = audit.clopper_pearson(7, 50)
    ci = stats.binomtest(7, 50).proportion_ci(method="exact")
    assert (lo, hi) == pytest.approx((ci.low, ci.high))


def test_descriptive_claims_are_not_flagged():
    desc = lambda x: rules.Verdict(rules.DESCRIPTIVE, {"x": float(np.mean(x))}, "measured")
    row = run(Toy(desc, gain_at(10), H1, H0), sims=5)
    assert row["descriptive"] and not row["flagged"]


def test_an_experiment_without_a_design_and_bad_sims_are_clear_errors():
    bare = type("Bare", (), {"id": "bare", "audit": None})()
    with pytest.raises(AttnlabError, match="bare: no audit design declared yet"):
        audit.audit(bare, None, "cpu", sims=2)
    with pytest.raises(AttnlabError, match="--sims: must be 1 to 10,000"):
        audit.audit(Toy(SIGN, gain_at(10), H1, H0), None, "smoke", sims=0)


def test_the_phase_simulator_draws_the_experiments_design():
    """Every cell of exp.cells(spec) once (grid × seed blocks × reps), with its own N, ‖μ‖, block
    and rep, and outcomes on both sides of the level; the boundary inside the grid."""
    exp = get("jiang2024-fig1")
    spec = exp.spec("cpu", ["seeds=2", "reps=3"])
    cells = exp.cells(spec)
    cols = exp.audit.simulate(
        dict(exp.audit.claims[0].h1.world), exp.audit.noise, spec, cells, np.random.default_rng(0)
    )
    for k in ("data.N", "data.mu", "block", "rep"):
        assert cols[k].tolist() == [c[k] for c in cells], k
    assert len(cells) == 16 * 10 * 3 * 2 and set(cols["block"].tolist()) == {0, 1}
    success = cols["test_loss"] < spec.level
    assert 0.2 < success.mean() < 0.8 and set(cols["status"].tolist()) <= {"converged", "cap"}
    assert np.mean(cols["status"] == "cap") < 0.05  # the default share of runs that did not converge: 1.25 %
    # H0 of the slope (the CNN law N·SNR³ = C) and its linear-in-SNR world really have slopes −3 and −1
    slope = exp.audit.claims[0]
    for world, expected in ((slope.h0, -3.0), (slope.misspecified[1], -1.0)):
        cols = exp.audit.simulate(world.world, exp.audit.noise, spec, cells, np.random.default_rng(1))
        measured = {c.id: c for c in exp.analyse(cols, spec).claims}["slope"].measured["slope"]
        assert measured == pytest.approx(expected, abs=0.2), world.statement


def test_a_descriptive_claim_keeps_its_reason_and_the_markdown_table_shows_it():
    class Descriptive(Toy):
        def analyse(self, cols, spec):
            v = rules.Verdict(rules.DESCRIPTIVE, {"x": 1.0}, "a rule", "")
            return Analysis(claims=[Claim.of("c", "toy", v, "descriptive below 500 runs (this run: 12)")])

    exp = Descriptive(SIGN, gain_at(10), H1, H0)
    result = audit.audit(exp, None, "smoke", sims=5, seed=0)
    (row,) = result["claims"]
    assert row["descriptive"] and not row["flagged"] and row["reason"].startswith("descriptive below 500 runs")
    md = audit.markdown(result)
    assert "| c | investigation |" in md and "— | — | — | descriptive: descriptive below 500 runs" in md
    # five simulations cannot show a sound rule sound: the table says flagged, with the bound
    md = audit.markdown(audit.audit(Toy(SIGN, gain_at(10), H1, H0), None, "smoke", sims=5))
    assert "| 1.00 [0.48, 1.00] |" in md and "**flagged**: false pass up to 0.522 > 0.05" in md


def test_update_replaces_the_audited_sections_and_keeps_the_others():
    result = audit.audit(Toy(SIGN, gain_at(10), H1, H0), None, "smoke", sims=5, seed=0)
    one = lambda exp_id, seconds: result | {"experiment": exp_id, "seconds": seconds}
    text = audit.page([one("wu2023-fig1", 1), one("jiang2024-fig1", 2)])
    new = audit.update(text, [one("wu2023-fig1", 99), one("li2023-fig3", 3)])
    heads = [line for line in new.splitlines() if line.startswith("### ")]
    assert heads == ["### jiang2024-fig1 (smoke)", "### li2023-fig3 (smoke)", "### wu2023-fig1 (smoke)"]  # list order
    assert " · 99 s" in new and " · 1 s" not in new and " · 2 s" in new
    assert audit.update(new, []) == new
