"""The screened stop rule: a judged step of a mini-batch run reads the training set in blocks and
skips the full pass where the stop quantity is shown above the threshold
(``train.step.surely_above``). It must stop every cell where the plain rule (a full pass at every
judged step) does, with the same results and probe records: stop steps and statuses equal, float64
numbers equal bit for bit, float32 ones within a few ulps (the screened and plain programs are two
programs, which XLA may round differently: the test suite's -O0 flags moved a float32 loss by one ulp
where the default flags give equal bits)."""

import jax.numpy as jnp
import numpy as np
import pytest

from attnlab import problem as P
from attnlab import train as T
from attnlab.bench import suites
from attnlab.train import bucket
from helpers import run_bucket

EXP, _, CELLS = suites.suite_cells("li2023", "smoke")


def _li2023_cells(**fields):
    cells = CELLS
    cells = [c for c in cells if c["data.N"] == max(x["data.N"] for x in cells)][:3]
    return [c | {"train.stop_every": 3, "train.max_steps": 300, **fields} for c in cells]


def _same(got, want, name):
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, err_msg=name)
    else:
        np.testing.assert_array_equal(got, want, err_msg=name)


def _both(cells, monkeypatch):
    out = {}
    for screen in (False, True):
        monkeypatch.setattr(bucket, "SCREEN", screen)
        bucket.PROGRAMS.clear()
        out[screen] = run_bucket(cells, EXP.tags)
    bucket.PROGRAMS.clear()
    return out[False], out[True]


@pytest.mark.parametrize(
    "fields",
    [  # a stop quantity of its own (float64) and the loss itself (float32); hinge in float32 below, with probes
        {"train.stop_on": "hinge", "train.dtype": "float64"},
        {"train.stop_on": "loss", "train.loss_threshold": 0.3},
    ],
    ids=["hinge-float64", "loss"],
)
def test_the_screened_rule_stops_where_the_plain_rule_does(fields, monkeypatch):
    cells = _li2023_cells(**fields)
    plain, screened = _both(cells, monkeypatch)
    assert (plain["metrics"]["status"] == T.CONVERGED).any()  # the rule stops some cells early
    for name in plain["metrics"]:
        _same(screened["metrics"][name], plain["metrics"][name], name)
    for kind in ("traces", "arrays"):
        for name, x in plain.get(kind, {}).items():
            _same(screened[kind][name], x, f"{kind}.{name}")


def test_probes_recorded_at_judged_steps_are_the_plain_rules(monkeypatch):
    """With probes due at judged steps the full pass still runs there (its aux feeds them)."""
    cells = [c | {"train.log_every": 3, "train.probes": "li2023"} for c in _li2023_cells(**{"train.stop_on": "hinge"})]
    plain, screened = _both(cells, monkeypatch)
    assert plain["traces"] and (plain["metrics"]["status"] == T.CONVERGED).any()
    for name, x in plain["traces"].items():
        _same(screened["traces"][name], x, name)
    for name, x in plain["metrics"].items():
        _same(screened["metrics"][name], x, name)


def test_the_screen_is_read_by_the_rule(monkeypatch):
    """Mutation check: a screen that always says "above" keeps every cell from stopping."""
    cells = _li2023_cells(**{"train.stop_on": "hinge"})
    monkeypatch.setattr(T.step, "surely_above", lambda problem, cfg, tr, f, d: jnp.ones((), bool))
    bucket.PROGRAMS.clear()
    res = run_bucket(cells, EXP.tags)
    bucket.PROGRAMS.clear()
    assert (res["metrics"]["status"] != T.CONVERGED).all()


def test_the_screen_shows_above_only_what_the_full_pass_confirms():
    """On a cell's own data and initial parameters: above ⇒ J ≥ threshold, and at a threshold of 0
    (J < 0 is impossible) it reads no block and says above."""
    (cell,) = _li2023_cells(**{"train.stop_on": "hinge"})[:1]
    comp = P.Composition.of(cell, EXP.tags)
    static = {k: v for k, v in cell.items() if comp.classify(k) == "static"}
    problem = comp.problem(static, {"data.N": cell["data.N"]})
    from attnlab.engine import grid

    v = {k: jnp.asarray(x[0]) for k, x in grid.batch_inputs(comp, [cell]).items()}
    data, train, fixed, _ = T.step.start(problem, comp.train_config(static), v, None)
    J = float(T.step.full_loss(problem, train, fixed, data)[1][1])
    for thr in (0.0, J / 3, J / 2.5, J * 0.99, J, 2 * J):
        cfg = comp.train_config(static | {"train.loss_threshold": thr})
        above = bool(T.step.surely_above(problem, cfg, train, fixed, data))
        assert not above or J >= thr, thr
        assert above == (thr <= J / 2 or thr == 0.0), thr  # the whole set read: S = N·J against 2·thr·N


def test_every_loss_and_stop_quantity_is_non_negative():
    """The screen's premise: a partial sum of per-sample values never exceeds the whole sum."""
    f = jnp.linspace(-30.0, 30.0, 601)
    for y in (-1.0, 1.0, 0.3):
        for name, loss in T.LOSSES.items():
            assert (loss.fn(f, jnp.full_like(f, y)) >= 0).all(), name
        for name, fn in P.STOP_FNS.items():
            if fn is not None:
                assert (fn(f, jnp.full_like(f, y)) >= 0).all(), name
