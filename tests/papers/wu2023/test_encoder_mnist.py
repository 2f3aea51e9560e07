"""wu2023-encoder-mnist: the cells it makes (MNIST patches into the wu2023 model, the width-normalised
step), the sign errors of its derive step, and its claims on synthetic columns shaped like the
theory (pass) and broken (fail); the figures draw from those columns. The end-to-end smoke run
is in tests/e2e/test_smoke.py."""

import jax.numpy as jnp
import numpy as np
import pytest

from attnlab import problem as P
from attnlab.experiments.wu2023 import encoder_mnist as M
from attnlab.experiments.wu2023 import step

STEPS = np.array(sorted(set(range(0, 401, 10)) | set(range(10))), float)
WIDTHS = (16, 64, 256)


def test_cells_feed_mnist_patches_to_the_wu2023_model_at_the_normalised_step():
    exp = M.EXPERIMENT
    cells = exp.cells(exp.spec("cpu"))
    spec = exp.spec("cpu")
    widths, kernel = spec.model["d_m"], spec.kernel_widths
    # the trained grid, then K₀ alone (0-step cells) at widths ≥ 10N, where λ_min(K₀^{w_O}) is fitted
    assert len(kernel) >= 2 and min(kernel) >= 10 * 100
    assert len(cells) == (len(widths) + len(kernel)) * 2 * 3 * 3
    assert {(c["model.d_m"], c["train.lr"]) for c in cells} == {(w, step(0.5, w, "width")) for w in widths + kernel}
    assert {c["model.d_m"] for c in cells if c["train.max_steps"] == 0} == set(kernel)
    assert {c["train.max_steps"] for c in cells if c["model.d_m"] in widths} == {400}
    cells = [c for c in cells if c["train.max_steps"]]
    assert {(c["model.alpha"], c["model.init"]) for c in cells} == {(a, i) for a in (0.5, 1.0) for i in M.INITS}
    c = cells[0]
    assert (c["data.name"], c["data.dataset"], c["data.classes"], c["data.patch"], c["data.norm"], c["data.N"]) == (
        "images",
        "mnist",
        "3,8",
        7,
        "standardise",
        100,
    )
    assert (c["train.loss"], c["train.optimizer"], c["train.batch_size"], c["train.dtype"], c["train.probes"]) == (
        "squared",
        "gd",
        0,
        "float64",
        "wu2023",
    )
    assert c["train.save_params"] and c["train.max_steps"] == 400
    comp = P.Composition.of(c)
    static = {k: v for k, v in c.items() if comp.classify(k) == "static"}
    hp = comp.hparams(static)
    assert (hp.d_s, hp.d, hp.d_m) == (16, 49, c["model.d_m"])  # 7×7 patches of 28×28 images
    assert {c["train.lr"] for c in exp.cells(exp.spec("cpu", ["step_norm=none"]))} == {0.5}
    smoke = exp.cells(exp.spec("smoke"))
    assert len(smoke) == 2 * 2 * 2 and {c["model.init"] for c in smoke} == {"lecun"}


def test_sign_errors_count_the_real_samples_only():
    apply = lambda p, x: (jnp.sum(x) * p["w"], {})
    data = {
        "X": jnp.array([[1.0], [-1.0], [2.0], [5.0]]),
        "y": jnp.array([1.0, 1.0, -1.0, 1.0]),
        "mask": jnp.array([True, True, True, False]),
        "X_test": jnp.array([[1.0], [-3.0]]),
        "y_test": jnp.array([-1.0, 1.0]),
    }
    train, test = M.sign_errors(apply, {"w": jnp.array(1.0)}, data)
    assert float(train) == pytest.approx(2 / 3) and float(test) == 1.0


def columns(slow=False, flat_logits=False, drift_exp=-0.5, same_attention=False, he_unstable=False, seed=0):
    """Runs shaped like the theory: LeCun/He at γ_eff·λ_max(K₀)/N ≈ 0.7 whose loss decays
    geometrically to ≈ 3·10⁻⁴·L_0, NTK init at ≈ 0.01 (slow); drifts ∝ d_m^drift_exp (half under
    α = 1); logit std flat (α = 1/2) or ∝ d_m^−1/2 (α = 1); attention TV 0.3 or 0.3·(16/d_m)^½;
    λ_min(K₀) ∝ d_m (lecun, he) or flat (ntk). Broken variants: ``slow`` LeCun/He stop at
    0.5·L_0; ``flat_logits`` (α = 1 too); ``same_attention`` (α = 1 as α = 1/2);
    ``he_unstable``: He under α = 1/2 at ratio 3, diverged."""
    rng = np.random.default_rng(seed)
    rows = []
    for a in (0.5, 1.0):
        for init in M.INITS:
            for w in WIDTHS:
                for rep in range(3):
                    noise = lambda s=0.03: np.exp(s * rng.standard_normal())
                    lr = step(0.5, w, "width")
                    learner = init != "ntk"
                    bad = he_unstable and init == "he" and a == 0.5
                    ratio = 3.0 if bad else 0.7 * noise() if learner else 0.01 * noise()
                    L0 = 0.5 * noise()
                    L = L0 * (0.98**STEPS if learner else 0.9995**STEPS) * noise(0.002)
                    if slow and learner:
                        L = L0 * (0.5 + 0.5 * 0.98**STEPS)
                    if bad:
                        L = L0 * np.where(STEPS < 30, 10.0 ** np.minimum(STEPS, 30), np.nan)
                    grow = 1 - np.exp(-STEPS / 50)
                    drift = w**drift_exp * grow * noise() * (0.5 if a == 1 else 1.0)
                    logit = 1.0 if a == 0.5 or flat_logits else 4 * w**-0.5
                    tv = 0.3 if a == 0.5 or same_attention else 0.3 * (16 / w) ** 0.5
                    rows.append(
                        {
                            "model.d_m": w,
                            "model.alpha": a,
                            "model.init": init,
                            "data.N": 100,
                            "data.classes": "3,8",
                            "train.lr": lr,
                            "block": 0,
                            "rep": rep,
                            "status": "diverged" if bad else "cap",
                            "train_loss": L[-1],
                            "trace_train_loss": L,
                            "train_error": 0.0,
                            "test_error": 0.05,
                            "trace_lambda_max": np.full(len(STEPS), ratio * 100 / lr),
                            "trace_lambda_min": np.full(len(STEPS), 0.01 * (w if learner else 1.0) * noise()),
                            "trace_lambda_min_w_O": np.full(len(STEPS), 0.01 * (w if learner else 1.0) * noise()),
                            "trace_kernel_drift": 2 * drift,
                            "trace_weight_drift": drift,
                            "trace_logit_std": np.full(len(STEPS), logit * noise()),
                            "trace_attn_tv": np.full(len(STEPS), tv * noise()),
                        }
                    )
    cols = {k: np.array([r[k] for r in rows], dtype=object if isinstance(rows[0][k], str) else None) for k in rows[0]}
    cols["trace_step"] = np.array([STEPS] * len(rows))
    return cols


def outcomes(cols, overrides=()):
    """Claim id -> outcome; a descriptive claim's rule is still evaluated (``rule_outcome``): its value."""
    exp = M.EXPERIMENT
    got = exp.analyse(cols, exp.spec("cpu", list(overrides))).claims
    return {c.id: c.measured.get("rule_outcome", c.outcome) if c.outcome == "descriptive" else c.outcome for c in got}


ALL = (
    "converge",
    "linear",
    "stability",
    "drift-kernel",
    "drift-weight",
    "drift-alpha",
    "logits",
    "uniform",
    "speed-gamma",
    "lmin-lecun",
    "lmin-he",
    "lmin-ntk",
)
# reported, not judged, at the cpu design (the audit gives their rules no power or no size there)
REPORTED = ("converge", "drift-kernel", "drift-alpha", "logits", "speed-gamma")
LMIN = ("lmin-lecun", "lmin-he", "lmin-ntk")  # from 10N = 1000 on: none of these columns' widths


def test_claims_pass_on_theory_shaped_runs(tmp_path):
    exp = M.EXPERIMENT
    cols, spec = columns(), exp.spec("cpu")
    a = exp.analyse(cols, spec)
    # stability: every ratio ≈ 0.7 < 1, where a bound half as large predicts the same runs (descriptive)
    assert {c.id: c.outcome for c in a.claims} == dict.fromkeys(ALL, "pass") | dict.fromkeys(
        ("stability", *REPORTED, *LMIN), "descriptive"
    )
    assert outcomes(cols) == dict.fromkeys(ALL, "pass") | dict.fromkeys(("stability", *LMIN), "descriptive")
    # the λ_min rule, asked to judge from d_m = 16 on (below 10N), decides
    assert {k: v for k, v in outcomes(cols, ["slope_from=16"]).items() if k in LMIN} == dict.fromkeys(LMIN, "pass")
    point = a.summary["per scaling, init and width"]["τ₀ = d_m^−1"]["lecun"][256]
    assert point["L_T/L_0 (geometric mean)"] == pytest.approx(0.98**400, rel=0.1)
    assert point["ρ (median)"] == pytest.approx(0.98, abs=1e-3)
    slopes = a.summary["logit std slopes at θ_T"]
    assert slopes["τ₀ = d_m^−1"]["slope"] == pytest.approx(-0.5, abs=0.05)
    assert slopes["τ₀ = d_m^−1/2"]["slope"] == pytest.approx(0.0, abs=0.05)
    assert a.tables and len(a.tables[0][2]) == 2 * 3 * len(WIDTHS) and not a.summary["flagged runs"]
    paths = exp.figures(cols, spec, a, tmp_path)
    assert {p.name for p in paths} == {"mnist_loss.png", "mnist_loss.pdf", "mnist_width.png", "mnist_width.pdf"}


def test_claims_fail_on_broken_runs():
    assert outcomes(columns(slow=True))["converge"] == "fail"
    assert outcomes(columns(flat_logits=True))["logits"] == "fail"
    assert outcomes(columns(same_attention=True))["uniform"] == "fail"
    grow = outcomes(columns(drift_exp=0.5))
    assert grow["drift-kernel"] == "fail" and grow["drift-weight"] == "fail"
    # He diverging at ratio 3 under α = 1/2: flagged and left out, so the claims still pass on the rest
    cols = columns(he_unstable=True)
    got = outcomes(cols)
    assert got == dict.fromkeys(ALL, "pass") | dict.fromkeys(("stability", *LMIN), "descriptive")
    a = M.EXPERIMENT.analyse(cols, M.EXPERIMENT.spec("cpu"))
    assert len(a.summary["flagged runs"]) == 9
    speed = next(c for c in a.claims if c.id == "speed-gamma").measured
    assert (
        speed["rule_outcome"] == "pass" and speed["he"]["n"] == 9 and speed["lecun"]["n"] == 18
    )  # the He pairs under α = 1/2 are left out
    # the same He runs predicted stable (ratio 0.7) but diverged: stability and the He speed test fail
    for i in np.flatnonzero((cols["model.init"] == "he") & (cols["model.alpha"] == 0.5)):
        cols["trace_lambda_max"][i] = np.full(len(STEPS), 0.7 * 100 / cols["train.lr"][i])
    got = outcomes(cols)
    assert got["stability"] == "fail" and got["speed-gamma"] == "fail" and got["converge"] == "fail"
