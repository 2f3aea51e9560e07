"""jiang2024-fig3's audit design draws the run's design (cells, logged steps, regimes), its H0s
really lack the effect, and its negative control fails as declared on a real run."""

import dataclasses

import numpy as np

from attnlab import audit
from attnlab import train as T
from attnlab.experiments import get


def test_the_dynamics_simulator_draws_the_experiments_design():
    exp = get("jiang2024-fig3")
    spec = exp.spec("cpu")
    cells = exp.cells(spec)
    d = exp.audit
    cols = d.simulate(d.claims[0].h1.world, d.noise, spec, cells, np.random.default_rng(0))
    for k in ("regime", "rep", "block", "data.mu"):
        assert cols[k].tolist() == [c[k] for c in cells], k
    steps = T.log_schedule(500, every=5, dense_until=50)
    assert all(np.array_equal(t, steps) for t in cols["trace_step"]) and len(cols["trace_V_signal"]) == len(cells)
    claims = {c.id: c for c in exp.analyse(cols, spec).claims}
    assert {k: c.outcome for k, c in claims.items()} == dict.fromkeys(
        ("sparse-harmful", "stages-harmful", "sparse-benign", "stages-benign"), "pass"
    )
    # H0: attention concentrates on the other named token; a misspecified world: it stays uniform
    worlds = {c.claim: c for c in d.claims}
    other = d.simulate(worlds["sparse-benign"].h0.world, d.noise, spec, cells, np.random.default_rng(1))
    assert exp.analyse(other, spec).summary["benign"]["final attention on signal (mean)"] < 1 / 3
    uniform = worlds["sparse-benign"].misspecified[0]
    assert uniform.statement.startswith("attention stays uniform")
    flat = d.simulate(uniform.world, d.noise, spec, cells, np.random.default_rng(1))
    assert abs(exp.analyse(flat, spec).summary["benign"]["final attention on signal (mean)"] - 1 / 3) < 0.02


def test_the_dynamics_rules_have_power_and_no_false_passes():
    exp = get("jiang2024-fig3")
    rows = {r["id"]: r for r in audit.audit(exp, exp.spec("cpu"), "cpu", sims=20, seed=0)["claims"]}
    assert set(rows) == {"sparse-harmful", "stages-harmful", "sparse-benign", "stages-benign"}
    for r in rows.values():
        assert r["power"]["rate"] >= 0.9 and r["false_pass"]["rate"] == 0.0, r


def test_the_negative_control_fails_on_a_real_run(tmp_path):
    """Softmax temperature 10⁻⁶: attention cannot leave uniform, so sparse-* must fail (not be
    inconclusive); the mean-attention threshold decides it even at smoke scale."""
    exp = get("jiang2024-fig3")
    (negative,) = [c for c in exp.controls if c.kind == "negative"]
    result = audit.run_control(exp, dataclasses.replace(negative, scale="smoke"), tmp_path / "neg")
    assert result["held"], result
    assert result["got"] == {"sparse-benign": "fail", "sparse-harmful": "fail"}
