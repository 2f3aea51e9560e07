"""λ_min(K₀) and the init (wu2023-init, -encoder-mnist): one judged prediction, lmin-lecun, whose
measured value shows the whole kernel's slope first and judges the w_O block from 10N (post hoc in
the ledger); lmin-he and lmin-ntk are checks of the construction. Each rule passes on data shaped
like the theory and fails on data made to break it; the audit's competitor is a sub-linear law,
with a misspecified and an also-true world, and its plug-in reads a run's levels back."""

import dataclasses
import types

import numpy as np
import pytest

from attnlab import audit
from attnlab.experiments import get
from attnlab.experiments.wu2023 import ledger
from attnlab.experiments.wu2023.analysis import INITS, lmin_claims
from attnlab.experiments.wu2023.audit.inits import INIT_NOISE, lmin_levels
from attnlab.ledger import CHECK, MEASUREMENT, PREDICTION

N = 100
WIDTHS = (128, 256, 512, 1024, 2048, 4096)


def kernels(k=None, he_factor=3.0, seed=0, widths=WIDTHS, reps=6, sd=0.05):
    """λ_min(K₀^{w_O}) = 7e-4·d_m^k_i (k: lecun 1, he 1, ntk 0 by default; He × he_factor) and
    λ_min(K₀) = that + an O(1) part q (0.28 under LeCun, as the pilot of K₀ spectra), per repeat
    and width, each × log-normal scatter."""
    k = {"lecun": 1.0, "he": 1.0, "ntk": 0.0} | (k or {})
    q = {"lecun": 0.28, "he": 1.4, "ntk": 0.01}
    rng = np.random.default_rng(seed)
    rows = [(i, w, r) for i in INITS for w in widths for r in range(reps)]
    init = np.array([i for i, _, _ in rows], object)
    width = np.array([w for _, w, _ in rows])
    repeat = np.array([f"0.5/0/{r}" for _, _, r in rows])
    # NTK init's level makes its block LeCun's / d_m at 10N = 1000 (at every width when k_ntk = k_lecun − 1)
    ntk = 1000.0 ** (k["lecun"] - 1 - k["ntk"])
    level = np.array([7e-4 * {"lecun": 1.0, "he": he_factor, "ntk": ntk}[i] for i in init])
    block = level * width ** np.array([k[i] for i in init]) * np.exp(sd * rng.standard_normal(len(init)))
    whole = block + np.array([q[i] for i in init]) * np.exp(sd * rng.standard_normal(len(init)))
    return width, init, block, whole, repeat


def judge(*args, w_min=1000):
    width, init, block, whole, repeat = args
    claims, block_slopes, whole_slopes = lmin_claims(width, init, block, whole, repeat, w_min, N, (0.75, 1.25), 0.25)
    return {c.id: c for c in claims}, block_slopes, whole_slopes


def test_lmin_is_one_prediction_with_the_whole_kernel_in_front():
    got, block, whole = judge(*kernels())
    assert {k: c.outcome for k, c in got.items()} == dict.fromkeys(("lmin-lecun", "lmin-he", "lmin-ntk"), "pass")
    m = got["lmin-lecun"].measured
    assert list(m) == ["whole_kernel", "w_O_block"]  # the whole kernel's slope first
    # the O(1) part of the other blocks keeps the whole kernel's slope below 1 where the block is ∝ d_m
    assert m["whole_kernel"]["slope"] < 0.9 and m["whole_kernel"]["widths_from"] == N
    assert m["w_O_block"]["slope"] == pytest.approx(1.0, abs=0.05) and m["w_O_block"]["widths_from"] == 1000
    assert "post hoc" in got["lmin-lecun"].detail and "post hoc" in got["lmin-lecun"].expected
    assert got["lmin-he"].measured["he/lecun at the widest width"] == pytest.approx(3.0, rel=0.1)
    assert got["lmin-ntk"].measured["d_m·ntk/lecun at the widest width"] == pytest.approx(1.0, rel=0.1)
    assert whole["ntk"]["slope"] == pytest.approx(0.0, abs=0.05) and block["lecun"]["slope"] == pytest.approx(
        1, abs=0.05
    )


@pytest.mark.parametrize("k", [0.5, 2 / 3])
def test_lmin_does_not_pass_a_sub_linear_law(k):
    """The competitor d_m^{1/2} fails; a law between it and ∝ d_m (d_m^{2/3}) does not pass. The
    checks hold (the construction is intact), so they pass whatever the law."""
    got, _, _ = judge(*kernels({"lecun": k, "he": k, "ntk": k - 1}))
    assert got["lmin-lecun"].outcome == "fail" if k == 0.5 else got["lmin-lecun"].outcome != "pass"
    assert got["lmin-he"].outcome == "pass" and got["lmin-ntk"].outcome == "pass"
    assert judge(*kernels({"lecun": 1.6, "he": 1.6, "ntk": 0.6}))[0]["lmin-lecun"].outcome == "fail"  # super-linear


def test_the_checks_fail_when_the_construction_breaks():
    # He's block growing slower than LeCun's; NTK init's block not LeCun's / d_m (a τ₁ of d_m^−1/4)
    got, _, _ = judge(*kernels({"he": 0.5, "ntk": 0.5}))
    assert got["lmin-lecun"].outcome == "pass"
    assert got["lmin-he"].outcome == "fail" and got["lmin-ntk"].outcome == "fail"


def test_below_ten_n_every_lmin_claim_is_descriptive():
    got, _, _ = judge(*kernels(widths=(128, 256, 512)))
    assert {c.outcome for c in got.values()} == {"descriptive"}
    assert got["lmin-lecun"].measured["widths"] == [128, 256, 512] and "not judged" in got["lmin-lecun"].detail


def test_the_ledger_counts_one_fact_once():
    for exp_id in ("wu2023-init", "wu2023-encoder-mnist"):
        rules = ledger.RULES[exp_id]
        assert rules["lmin-lecun"].kind == PREDICTION and rules["lmin-lecun"].post_hoc
        assert rules["lmin-lecun"].history[-1].date == "2026-12-08" and rules["lmin-lecun"].history[-1].seen
        assert rules["lmin-he"].kind == CHECK and rules["lmin-ntk"].kind == CHECK
    vit = ledger.RULES["wu2023-vit-mnist"]
    assert vit["lmin-lecun"].kind == MEASUREMENT and vit["lmin-he"].kind == vit["lmin-ntk"].kind == CHECK
    tests = next(r for r in ledger.PAPER.results if r.id.startswith("λ_min(K₀)")).tests
    assert [(t.experiment, t.claim) for t in tests] == [
        ("wu2023-init", "lmin-lecun"),
        ("wu2023-encoder-mnist", "lmin-lecun"),
    ]
    assert "post hoc" in tests[0].note and tests[1].note.startswith("as wu2023-init's")


def only(exp, claim: str):
    design = dataclasses.replace(exp.audit, claims=tuple(c for c in exp.audit.claims if c.claim == claim))
    return types.SimpleNamespace(id=exp.id, regime=exp.regime, audit=design, cells=exp.cells, analyse=exp.analyse)


@pytest.mark.parametrize("exp_id", ["wu2023-init", "wu2023-encoder-mnist"])
def test_the_audit_pits_lmin_against_a_sub_linear_law(exp_id):
    """H0 is λ_min(K₀^{w_O}) ∝ d_m^{1/2} (not flat, which LeCun's kernel scale excludes); the rule
    passes H1 and a rank-deficit law ∝ d_m, and passes neither H0, d_m^{2/3} nor a saturating law."""
    exp = get(exp_id)
    (ca,) = [c for c in exp.audit.claims if c.claim.startswith("lmin")]
    assert ca.claim == "lmin-lecun" and "1/2" in ca.h0.statement and ca.misspecified and ca.also_true
    row = audit.audit(only(exp, "lmin-lecun"), exp.spec("cpu"), "cpu", sims=10)["claims"][0]
    assert row["id"] == "lmin-lecun" and not row["descriptive"]
    assert row["power"]["rate"] >= 0.9 and row["false_pass"]["rate"] == 0.0
    for w in row["worlds"]:
        assert w["pass"]["rate"] >= 0.8 if w["holds"] else w["pass"]["rate"] == 0.0, w["statement"]


def test_the_plug_in_reads_the_lmin_levels_back():
    exp = get("wu2023-init")
    spec, d = exp.spec("cpu"), exp.audit
    cols = d.simulate(d.claims[0].h1.world, d.noise, spec, d.cells(spec), np.random.default_rng(0))
    noise = d.plug_in(cols, spec)
    assert set(noise) == set(INIT_NOISE)
    for k in ("block10N", "he_block", "q_lecun", "q_ntk"):
        assert noise[k] == pytest.approx(INIT_NOISE[k], rel=0.3), k
    # a run without widths ≥ 10N leaves the block levels at their defaults
    narrow = {
        k: v[cols["model.d_m"] < 1000] if np.ndim(v) and len(v) == len(cols["model.d_m"]) else v
        for k, v in cols.items()
    }
    assert lmin_levels(narrow, spec, INIT_NOISE, q=False) == INIT_NOISE
