"""Jiang et al. 2024: the theorem map (each result and the claims that test it) and every claim's
rule history (:mod:`attnlab.ledger`).

Theorem numbers are those of arXiv 2409.19345 as the experiments cite them; the paper sheet numbers
no theorem. The proofs assume noise orthogonal to the signals, σ̃_p ≫ σ_p, M = Θ(1), strong
over-parameterisation and small init; the paper's released scripts (which ``protocol`` follows)
use isotropic noise, and ``data.projected = true`` gives the theory's variant.
"""

from __future__ import annotations

from attnlab.ledger import DIRECT, PREDICTION, PROXY, Paper, Result, Test, rule
from attnlab.parts import register

CPU = (
    "the paper's protocol at cpu scale (d = 64, d_h = d_v = 32 for 1024/512/512; 5 runs per cell), with the "
    "paper's isotropic noise where the proof projects it out"
)
MNIST = (
    "MNIST digits in a noise border stand in for the data model (no strong-noise token; the layout is assumed): "
    "the same phenomenon on other data, so a fail would not refute the theorem"
)

# --------------------------------------------------------------------------- rule histories
# (date, what the rule became, why, whether results of the id had been seen, commit)

ISSUE5 = "the rules were rewritten for issue 5 after the first cpu and paper runs"
LAPSES = (
    "2026-12-07",
    "the boundary is fitted as a logistic with lapse rates (a run may lapse to success or failure whatever its "
    "coordinates); the free exponent p = −slope and the likelihood-ratio tests of p = 1 and p = 2 are reported "
    "beside it: the claim `form` was the same estimate (one fact, one claim) and is merged here",
    "5 % of runs flipped in a true N·SNR² = C world tilted the plain fit to −2.26 and widened its interval 3×: "
    "rule v2 passed that world in 0 of 10 draws, and `form` passed it 10 of 10 on the same estimate (issue 40)",
    True,
)
REGIONS = (
    "2026-12-07",
    "held out by N: Ĉ and the within-row steepness ŝ (fits with lapse rates) come from one half of the N values and "
    "are judged on the other, both ways; the margin is f = 19^(1/ŝ) ≤ 4 (where the fitted transition is 19:1) "
    "instead of a fixed 4",
    "v2 fitted Ĉ on the same grid points it judged, with a factor-4 margin: any monotone sharp transition passed, "
    "a boundary N·SNR = C or one displaced 4× between the halves of N included (issue 40)",
    True,
)
CURVATURE_LAPSES = (
    "2026-12-07",
    "fits with lapse rates, as the slope's",
    "the same flipped runs bend and widen the plain quadratic fit; one estimator for the boundary's shape",
    True,
)

FIG1 = {
    "slope": rule(
        PREDICTION,
        (
            "2026-12-02",
            "95% bootstrap interval of the logistic boundary's slope contains −2 and lies within [−3, −1]",
            "first rule",
            False,
            "10f8a8e",
        ),
        (
            "2026-12-02",
            "equivalence: the interval (t over seed blocks when ≥ 2, else bootstrap) inside [−2.5, −1.5]; fail if disjoint",
            "the 'contains −2' rule failed the paper grid's narrow interval by precision alone; " + ISSUE5,
            True,
            "e1454a3",
        ),
        LAPSES,
    ),
    "curvature": rule(
        PREDICTION,
        (
            "2026-12-02",
            "the slope change across the grid's whole SNR range inside [−0.5, 0.5]",
            "issue 5 asked for a test of the straight boundary; " + ISSUE5,
            True,
            "e1454a3",
        ),
        (
            "2026-12-02",
            "the span is the SNR span the boundary crosses inside the grid's N range (the whole-grid value reported)",
            "the whole range extrapolates the quadratic where no boundary lies (cpu: +2.5 fail → +0.82 inconclusive)",
            True,
            "26194bc",
        ),
        (
            "2026-12-04",
            "descriptive below curvature_min_runs = 5000 runs",
            "its audit gives the rule power 0 at the cpu design (interval half-width ≈ 0.75 against ±0.5)",
            True,
            "a77bb0a",
        ),
        CURVATURE_LAPSES,
    ),
    "C": rule(
        PREDICTION,
        (
            "2026-12-02",
            "Ĉ of N·SNR² = C (slope fixed at −2): its interval overlaps [C/3, 3C], at any d",
            "first rule",
            False,
            "10f8a8e",
        ),
        ("2026-12-02", "C requires the form claim to pass", "a C of the wrong form means nothing", False, "e70beba"),
        (
            "2026-12-02",
            "judged only at d = 1024 on the binarised mean quantity, equivalence margin [500, 2000]",
            "[C/3, 3C] read at any d passed almost anything; " + ISSUE5,
            True,
            "e1454a3",
        ),
    ),
    "benign": rule(
        PREDICTION,
        (
            "2026-12-02",
            "cells with N·SNR² ≥ 4Ĉ (Ĉ from the same cells): median test loss < 0.1, ≥ 95% reached the threshold",
            "first rule",
            False,
            "10f8a8e",
        ),
        (
            "2026-12-02",
            "held out by repeat: Ĉ from the even repeats; the odd repeats' cells with N·SNR² ≥ 4Ĉ behave in ≥ 90%",
            "the first rule was circular (Ĉ fitted on the judged cells); " + ISSUE5,
            True,
            "e1454a3",
        ),
        REGIONS,
    ),
}
FIG1["harmful"] = rule(
    PREDICTION,
    (
        "2026-12-02",
        "cells with N·SNR² ≤ Ĉ/4 (Ĉ from the same cells): median test loss ≥ 0.3, ≥ 95% reached the threshold",
        "first rule",
        False,
        "10f8a8e",
    ),
    (
        "2026-12-02",
        "held out by repeat as benign, N·SNR² ≤ Ĉ/4 with test loss ≥ 0.2",
        "the first rule was circular (Ĉ fitted on the judged cells); " + ISSUE5,
        True,
        "e1454a3",
    ),
    REGIONS,
)

FIG2 = {
    "slope": rule(
        PREDICTION,
        ("2026-12-03", "the slope's interval inside [−2.5, −1.5] (as fig1's v2)", "first rule", False, "b1d65f8"),
        (
            "2026-12-04",
            "descriptive below slope_min_runs = 2000 runs",
            "its audit gives the rule power 0.28 at the cpu design's 550 runs",
            True,
            "db73c18",
        ),
        LAPSES,
    ),
    "curvature": rule(
        PREDICTION,
        (
            "2026-12-03",
            "the slope change across the boundary's SNR span inside [−0.5, 0.5]",
            "first rule",
            False,
            "b1d65f8",
        ),
        ("2026-12-04", "descriptive below 5000 runs", "its audit: no power at the cpu design", True, "a77bb0a"),
        CURVATURE_LAPSES,
    ),
    "benign": rule(
        PREDICTION,
        ("2026-12-03", "held out by repeat, N·SNR² ≥ 4Ĉ, ≥ 90% behave (as fig1's v2)", "first rule", False, "b1d65f8"),
        REGIONS,
    ),
    "harmful": rule(
        PREDICTION,
        ("2026-12-03", "held out by repeat, N·SNR² ≤ Ĉ/4, ≥ 90% behave (as fig1's v2)", "first rule", False, "b1d65f8"),
        REGIONS,
    ),
}

_SPARSE = (
    (
        "2026-12-02",
        "final attention on the dominant token above the other named token in every repeat, mean ≥ 1.25/M",
        "first rule",
        False,
        "10f8a8e",
    ),
    (
        "2026-12-02",
        "one-sided sign test over repeats that the dominant token beats the best other token (weak-noise tokens "
        "included), p < 0.05, and mean ≥ 1.25/M",
        "it must beat the best other token, not only the other named one; " + ISSUE5,
        True,
        "e1454a3",
    ),
)
_STAGES = (
    (
        "2026-12-02",
        "median half-change step of the V-scalars before that of the QK logits",
        "first rule",
        False,
        "10f8a8e",
    ),
    (
        "2026-12-02",
        "onset = first step at 10% of a probe's largest change; median V onset before QK and attention onsets",
        "the half-change time failed the paper-scale benign run although V moved first",
        True,
        "e70beba",
    ),
    (
        "2026-12-02",
        "absolute onsets (0.1 logit units, 0.02 attention mass); per-repeat sign tests that V precedes QK and attention",
        "relative onsets depend on the run's length; " + ISSUE5,
        True,
        "e1454a3",
    ),
)
FIG3 = {
    f"{kind}-{r}": rule(PREDICTION, *h)
    for r in ("harmful", "benign")
    for kind, h in (("sparse", _SPARSE), ("stages", _STAGES))
}


# --------------------------------------------------------------------------- the theorem map

PAPER = register(
    Paper(
        name="jiang2024",
        title="Jiang et al. 2024: benign and harmful overfitting of a two-layer softmax transformer",
        results=(
            Result(
                "Thm 4.1",
                "benign overfitting: if N·SNR² = Ω(1), GD drives the training loss to 0 and the test loss is small",
                (
                    Test("jiang2024-fig1", "benign", PROXY, CPU),
                    Test("jiang2024-fig2", "benign", PROXY, MNIST, refutes=False),
                ),
                "in the proof's own data model (noise orthogonal to the signals): "
                "`attnlab reproduce jiang2024-fig1 --scale paper --set data.projected=true`",
            ),
            Result(
                "Thm 4.2",
                "harmful overfitting: if N⁻¹·SNR⁻² = Ω(1), the training loss goes to 0 but the test loss stays Θ(1)",
                (
                    Test("jiang2024-fig1", "harmful", PROXY, CPU),
                    Test("jiang2024-fig2", "harmful", PROXY, MNIST, refutes=False),
                ),
                "as Thm 4.1",
            ),
            Result(
                "Thm 4.1–4.2 (sharp condition)",
                "the two regimes meet at N·SNR² = Θ(1): the test-loss boundary has slope −2 in (log SNR, log N)",
                (
                    Test(
                        "jiang2024-fig1",
                        "slope",
                        PROXY,
                        CPU + "; the slope is the statement's own quantity (direct at paper scale)",
                    ),
                    Test("jiang2024-fig2", "slope", PROXY, MNIST, refutes=False),
                ),
            ),
            Result(
                "Fig. 1",
                "test loss over (SNR, N): the transition follows the drawn curve N·SNR² = 1000, a straight line in "
                "(log SNR, log N)",
                (Test("jiang2024-fig1", "curvature", DIRECT, "the straight line: the figure's own reading"),),
                "the constant 1000 is judged only at the paper's d = 1024: `attnlab reproduce jiang2024-fig1 --scale "
                "paper` (7.5 min on 2 cores; the cpu run has d = 64, where C is only reported)",
            ),
            Result(
                "Fig. 2",
                "MNIST digits with Gaussian noise show the same benign/harmful transition",
                (
                    Test("jiang2024-fig2", "benign", DIRECT, "the figure's own data, in an assumed layout"),
                    Test("jiang2024-fig2", "harmful", DIRECT, "the figure's own data, in an assumed layout"),
                ),
            ),
            Result(
                "Sec. 5, sparse attention (Fig. 3)",
                "attention sparsifies: in the benign regime the query-averaged attention concentrates on the signal "
                "token, in the harmful regime on the strong-noise token",
                (
                    Test(
                        "jiang2024-fig3",
                        "sparse-benign",
                        PROXY,
                        "concentration above uniform (not sparsity → 1), at cpu d = 256 for 2048",
                    ),
                    Test(
                        "jiang2024-fig3",
                        "sparse-harmful",
                        PROXY,
                        "concentration above uniform (not sparsity → 1), at cpu d = 256 for 2048",
                    ),
                ),
            ),
            Result(
                "Sec. 5, three-stage dynamics (Fig. 3)",
                "the V-scalars grow first while attention stays near uniform, then the QK logits grow and attention "
                "sparsifies, then the loss converges",
                (
                    Test("jiang2024-fig3", "stages-benign", PROXY, "the order of the first two stages' onsets only"),
                    Test("jiang2024-fig3", "stages-harmful", PROXY, "the order of the first two stages' onsets only"),
                ),
                "the third stage and 'attention near uniform while V grows' are not judged; both could be read off "
                "the traces jiang2024-fig3 records",
            ),
        ),
        rules={"jiang2024-fig1": FIG1, "jiang2024-fig2": FIG2, "jiang2024-fig3": FIG3},
    )
)
