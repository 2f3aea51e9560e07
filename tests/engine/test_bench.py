"""``attnlab bench``: the cell subset, the FLOP counts, the agreement statistics, the report, the
CLI, and the attnlab side on two smoke cells, without PyTorch (a benchmark-only extra, not installed
by ``make test``). The PyTorch side — each suite's PyTorch model against attnlab's apply on the same
parameters (outputs, loss, gradients, init law) and each suite end to end on smoke cells — is
checked by ``benchmarks/bench_suite.py --check`` (the first step of ``make bench``), which fails
rather than skips without PyTorch."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from attnlab import train as T
from attnlab.bench import baseline, flops, measure, report, runner, suites
from attnlab.cli import app
from attnlab.engine import grid
from attnlab.engine.grid import cell_parts
from attnlab.errors import AttnlabError
from attnlab.models import jiang2024 as jmodel
from attnlab.models import li2023 as lmodel
from attnlab.models import wu2023 as wmodel
from attnlab.train import step as per_cell


@pytest.fixture(scope="module")
def paper_cells():
    return suites.suite_cells("jiang2024", "paper")[2]


def test_subset_is_seeded_and_spread_over_the_grid(paper_cells):
    sel = suites.select_cells(paper_cells, 100, seed=0)
    ids = [grid.cell_id(c) for c in sel]
    assert len(sel) == 100 and len(set(ids)) == 100
    assert ids == [grid.cell_id(c) for c in suites.select_cells(paper_cells, 100, seed=0)]  # seeded
    assert set(ids) != {grid.cell_id(c) for c in suites.select_cells(paper_cells, 100, seed=1)}
    assert suites.grid_axes(paper_cells) == ["data.N", "data.mu"]
    N = np.array([c["data.N"] for c in sel])
    mu = np.array([c["data.mu"] for c in sel])
    assert sorted(set(N)) == list(range(2, 21, 2)) and all((N == n).sum() == 10 for n in set(N))
    for n in set(N):  # along ‖μ‖ within every N: from the bottom decile to the top one
        assert mu[N == n].min() <= 10 and mu[N == n].max() >= 91
    assert len({c["rep"] for c in sel}) > 3
    assert len(suites.select_cells(paper_cells[:5], 100)) == 5 and suites.select_cells(paper_cells, 0) == []


def test_flop_count_by_hand():
    s = flops.Shape(M=2, d=3, d_h=2, d_v=1)
    # forward: X W_Q, X W_K 2·2·3·2 = 24 each; X W_V 2·2·3·1 = 12; Q Kᵀ 2·2·2·2 = 16; (X W_V) w_O 2·2·1 = 4; ā·v 2·2 = 4
    # backward: W_Q, W_K, W_V 24 + 24 + 12; Q and K in S 2·16; X W_V in v 4; ā and v in f 2·4
    assert flops.flops_per_sample(s) == {"forward": 84, "backward": 104}
    assert flops.flops_update(s) == 2 * 3 * (2 + 2 + 1)
    per = flops.flops_per_sample(s) | {"update": flops.flops_update(s)}
    # attnlab: 3 passes of 4 samples, 2 updates, final forward of 4 + 6 samples
    loop = flops.Loop(N=4, n_test=6, max_steps=10)
    assert flops.cell_flops(per, loop, stop=2) == 3 * 4 * 188 + 2 * 30 + 10 * 84
    # paper loop: forward of 4 + 6 samples at 3 steps, backward of 4 samples and an update at 2
    paper = flops.Loop(N=4, n_test=6, max_steps=10, test_every_step=True)
    assert flops.cell_flops(per, paper, stop=2, protocol="paper") == 3 * 10 * 84 + 2 * (4 * 104 + 30)
    w = flops.Shape(M=2, d=3, d_h=2, d_v=1, train_w_O=True)
    assert flops.flops_per_sample(w)["backward"] == 104 + 4 and flops.flops_update(w) == 30 + 2
    with pytest.raises(ValueError, match="protocol"):
        flops.cell_flops(per, loop, 2, protocol="other")


def test_the_dual_forms_count_where_the_engine_trains_in_it():
    """jiang2024's dual form: every contraction with d becomes one with the N·M training tokens;
    the engine's form (dual where N·M < d on the fast full-batch path) is the counted one, and the
    floor takes the cheaper exact form."""
    _, _, cells = suites.suite_cells("jiang2024", "smoke")
    suite = suites.get_suite("jiang2024")
    cell = dict(cells[0], **{"data.N": 4, "data.d": 64})  # N·M = 12 tokens < d = 64: dual
    hp = suites.model_hparams(cell)
    plain, tokens = suite.flops(hp), 4 * cell["data.M"]
    dual = flops.flops_per_sample(flops.Shape(hp.M, tokens, hp.d_h, hp.d_v, hp.train_w_O))
    forms = suite.per_sample(cell, n_pad=4)
    assert forms["run"] == forms["least"] == dual | {"update": 2 * tokens * (2 * hp.d_h + hp.d_v)}
    assert forms["run"]["forward"] < plain["forward"]
    slow = dict(cell, **{"train.fast": False})  # the plain path: counted as it runs; the floor stays the dual's
    assert suite.per_sample(slow, 4)["run"] == plain and suite.per_sample(slow, 4)["least"] == forms["least"]
    wide = dict(cell, **{"data.N": 40})  # N·M = 120 > d: plain is both what runs and the cheaper
    assert suite.per_sample(wide)["run"] == suite.per_sample(wide)["least"] == plain
    padded = suite.per_sample(cell, n_pad=5)  # counted at N, run at the padded rows
    assert padded["run"] == forms["run"] and padded["run_padded"]["forward"] > padded["run"]["forward"]


def test_flop_counts_of_the_li2023_and_wu2023_models_by_hand():
    hp = lmodel.Hparams(L=2, d=3, m=2, m_a=1, m_b=1, init="gaussian")
    # forward: W_Q x, W_K x 2·2·3·1 = 12 each; W_V x 12; q kᵀ 2·4·1 = 8; A V 8; W_O h 2·2·1·2 = 8; aᵀ ReLU 2·2·2 = 8;
    # mean 4. backward: the projections 36 again; q, k 16; A, V 16; H, W_O 16; ReLU(·) 8; mean 4
    assert flops.flops_li2023(hp) == {"forward": 72, "backward": 96, "update": 2 * (2 * 3 + 3 + 2)}
    hp = wmodel.Hparams(d_s=2, d=3, d_m=2)
    # forward: 3 projections 2·2·3·2 = 24 each; S 2·4·2 = 16; φV 16; pooling 2·2·2 = 8; w_Oᵀh 4.
    # backward: projections 72; Q, K 32; φ, V 32; ReLU(A) 8; w_O, h 8
    assert flops.flops_wu2023(hp) == {"forward": 116, "backward": 152, "update": 2 * (3 * 2 * 3 + 2)}


def test_loop_passes_with_mini_batches_by_hand():
    # N = 5, b = 2: batches of 2, 2, 1 per epoch; judged at t = 0, 3 (stop_every 3); stopped at t = 4
    loop = flops.Loop(N=5, n_test=7, max_steps=20, batch=2, stop_every=3)
    assert [loop.rows(t) for t in range(5)] == [2, 2, 1, 2, 2]
    assert flops.loop_passes(loop, 4) == {"forward_backward": 9, "forward": 2 * 5 + 5 + 7, "updates": 4}
    # padded to 8 rows: every batch is b rows, every pass over the training set 8
    assert flops.loop_passes(loop, 4, n_pad=8) == {"forward_backward": 10, "forward": 2 * 8 + 8 + 7, "updates": 4}
    # paper loop: backward at t < 4, forward of the stop step's batch, the judged passes, the test set once
    assert flops.loop_passes(loop, 4, "paper") == {"forward_backward": 7, "forward": 2 + 2 * 5 + 7, "updates": 4}


def test_batch_order_is_the_engines():
    exp, _, cells = suites.suite_cells("li2023", "smoke")
    c = cells[0] | {"train.max_steps": 12, "train.batch_size": 3}
    N = c["data.N"]
    *_, v = cell_parts(c, exp.tags)
    cfg = T.TrainConfig(max_steps=12, batch_size=3)
    assert N % 3  # a short last batch in every epoch
    for n_pad in (N, N + 5):
        order = baseline.batch_order(c, exp.tags, n_pad)
        data = {"X": jnp.arange(n_pad), "y": jnp.zeros(n_pad), "mask": jnp.arange(n_pad) < N}
        for t in range(13):
            X, _, m = per_cell.batch(cfg, data, v, t)
            np.testing.assert_array_equal(np.asarray(X)[np.asarray(m)], order[t], err_msg=f"step {t}, n_pad {n_pad}")
    assert baseline.batch_order(cells[0] | {"train.batch_size": 0}, exp.tags) is None


def _xla_flops(fn, *args):
    ca = jax.jit(fn).lower(*args).compile().cost_analysis()
    ca = ca[0] if isinstance(ca, list | tuple) else ca
    assert ca and "flops" in ca, "the pinned jaxlib gives a cost analysis with a FLOP count"
    return ca["flops"]


@pytest.mark.parametrize("which", ["jiang2024", "li2023", "wu2023"])
def test_flop_count_agrees_with_xla_cost_analysis(which):
    part, hp, count = {
        "jiang2024": (jmodel.PART, jmodel.Hparams(M=4, d=64, d_h=32, d_v=32), flops.flops_jiang2024),
        "li2023": (
            lmodel.PART_VIT,
            lmodel.Hparams(L=12, d=24, m=16, m_a=8, m_b=8, init="gaussian"),
            flops.flops_li2023,
        ),
        "wu2023": (wmodel.PART, wmodel.Hparams(d_s=8, d=16, d_m=32), flops.flops_wu2023),
    }[which]
    p = part.init(jax.random.PRNGKey(0), hp)
    tokens = hp.M if which == "jiang2024" else hp.L if which == "li2023" else hp.d_s
    X = jax.random.normal(jax.random.PRNGKey(1), (6, tokens, hp.d))
    y = jnp.where(jnp.arange(6) % 2 == 0, 1.0, -1.0)
    names = part.trainable(hp)
    train = {k: p[k] for k in names}
    fixed = {k: v for k, v in p.items() if k not in names}

    def loss(tr, X, y):
        f, _ = jax.vmap(lambda x: part.apply(tr | fixed, x, hp))(X)
        return T.LOSSES["logistic"].fn(f, y).mean()

    per = count(hp)
    for fn, want in ((loss, 6 * per["forward"]), (jax.value_and_grad(loss), 6 * (per["forward"] + per["backward"]))):
        got = _xla_flops(fn, train, X, y)
        assert 0.8 < got / want < 1.25, (got, want)


def test_agreement_statistics():
    a = [0.1, 0.3, 0.15, np.nan, 0.5]
    b = [0.12, 0.1, 0.25, 0.2, 0.5]
    g = measure.agreement(a, b, level=0.2, a_stop=[3, 4, 5, 6, 7], b_stop=[3, 5, 5, 1, 9])
    assert g["cells"] == 4 and g["non_finite_pairs"] == 1
    assert g["mean_abs_diff"] == pytest.approx((0.02 + 0.2 + 0.1 + 0.0) / 4)
    assert g["max_abs_diff"] == pytest.approx(0.2)
    assert g["mean_diff_a_minus_b"] == pytest.approx((-0.02 + 0.2 - 0.1) / 4)
    assert g["different_side"] == 2 and g["different_side_share"] == 0.5  # 0.3 vs 0.1 and 0.15 vs 0.25
    assert g["a_below_level"] == 2 and g["b_below_level"] == 2
    assert g["same_stop_step"] == 2 and g["mean_abs_stop_diff"] == pytest.approx((0 + 1 + 0 + 2) / 4)
    lo, hi = g["mean_diff_ci95"]
    assert lo < g["mean_diff_a_minus_b"] < hi and g["wilcoxon_p"] is None  # too few nonzero pairs for a test
    assert measure.agreement([np.nan], [1.0])["mean_abs_diff"] is None
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, 40)
    assert measure.agreement(x, x + 0.1)["wilcoxon_p"] < 1e-6  # a systematic shift is detected
    assert measure.agreement(x, x + rng.normal(0, 0.01, 40))["wilcoxon_p"] > 0.01
    # li2023: success = zero test error (≤ 0); wu2023: a loss ratio ≤ 10⁻³, compared on log10
    g = measure.agreement([0.0, 0.01, 0.0], [0.0, 0.0, 0.02], level=0.0, op="<=")
    assert g["a_success"] == 2 and g["b_success"] == 2 and g["different_side"] == 2 and "a_below_level" not in g
    g = measure.agreement([1e-5, 1e-2, 0.0], [1e-4, 1e-3, 1e-6], level=1e-3, op="<=", log=True)
    assert g["cells"] == 2 and g["non_finite_pairs"] == 1  # log10 of 0 is left out
    assert g["mean_abs_diff"] == pytest.approx(1.0) and g["different_side"] == 1 and g["difference_of"] == "log10"
    g = measure.agreement([1e-5, 1e-2, 0.0], [1e-4, 1e-3, 1e-15], level=1e-3, op="<=", log=True, floor=1e-10)
    assert g["cells"] == 3 and g["mean_abs_diff"] == pytest.approx(2 / 3)  # 0 and 10⁻¹⁵ are both the floor
    with pytest.raises(ValueError, match="op"):
        measure.agreement(x, x, op=">")


def test_report_from_synthetic_measurements(monkeypatch, tmp_path):
    exp, _, cells = suites.suite_cells("jiang2024", "smoke")
    cells = cells[:4]
    stops = np.array([10, 20, 30, 40])
    attn = {
        "whole_s": 10.0,
        "steady_s": 2.0,
        "whole_cpu_s": 15.0,
        "steady_cpu_s": 4.0,
        "aot": {"programs": 1, "lower_s": 0.5, "compile_s": 7.0, "strategy": "sequential"},
        "chunks": 1,
        "chunk_sizes": [4],
        "strategy": "sequential",
        "test_loss": np.array([0.1, 0.3, 0.5, 0.05]),
        "stop_step": stops,
        "status": np.array(["converged"] * 4),
        "seconds": np.full(4, 0.5),
        "outcome": np.array([0.1, 0.3, 0.5, 0.05]),
        "N_pad": np.array([c["data.N"] for c in cells]),
        "cold_equals_warm": True,
        "peak_rss_mb": 500.0,
        "chunk_ids": [[grid.cell_id(c) for c in cells[:2]], [grid.cell_id(c) for c in cells[2:]]],
        "chunk_s": [0.5, 1.5],
    }
    base = {
        "torch_version": "x",
        "threads": 2,
        "gemm": {"best": 2e10},
        "warmup_s": 1.0,
        "test_loss": np.array([0.15, 0.06]),
        "outcome": np.array([0.15, 0.06]),
        "stop_step": np.array([20, 40]),
        "status": np.array(["converged"] * 2),
        "seconds": np.array([3.0, 5.0]),
        "draw_seconds": np.array([0.5, 0.5]),
        "cpu_s": np.array([6.0, 10.0]),
        "peak_rss_mb": 900.0,
    }
    r = report.build_report(
        suite="jiang2024",
        experiment=exp.id,
        scale="smoke",
        seed=0,
        grid_cells=8,
        cells=cells,
        attn=attn,
        base=base,
        base_idx=[1, 3],
        gemm={"n": 64, "best": 1e10, "median": 9e9},
        rss_start_mb=300.0,
        rng={"jax_threefry2x32": 2e-8, "numpy_pcg64": 5e-9, "best": "numpy_pcg64"},
        tags=exp.tags,
    )
    assert r["ratio"]["steady"] == pytest.approx(4.0 / 0.5)  # 4 s per baseline cell vs 2 s / 4 cells
    assert r["ratio"]["whole"] == pytest.approx(4.0 / 2.5)
    assert r["ratio"]["steady_with_baseline_draw"] == pytest.approx(4.5 / 0.5)  # its own data draw timed too
    assert r["baseline"]["seconds_per_cell_with_draw"] == pytest.approx(4.5)
    assert r["ratio"]["steady_cpu_time"] == pytest.approx(8.0 / 1.0)
    assert r["ratio"]["steady_by_chunk"] == pytest.approx(
        [3.0 / 0.25, 5.0 / 0.75], rel=1e-3
    )  # cell 1 in chunk 0, cell 3 in chunk 1
    assert r["baseline"]["extrapolated"] and "sub-subset of 2 of the 4" in r["notes"][0]
    assert r["agreement"]["cells"] == 2 and r["agreement"]["different_side"] == 1  # 0.3 vs 0.15
    assert r["agreement"]["mean_abs_diff"] == pytest.approx((0.15 + 0.01) / 2)
    s = flops.Shape.of(cells[0])
    per = flops.flops_per_sample(s) | {"update": flops.flops_update(s)}
    suite = suites.get_suite("jiang2024")
    run = [suite.per_sample(c)["run"] for c in cells]  # the form the engine trains each cell in
    loop = lambda c, paper=False: flops.Loop(c["data.N"], c["data.n_test"], c["train.max_steps"], test_every_step=paper)  # noqa: E731
    useful = sum(flops.cell_flops(p, loop(c), int(t)) for p, c, t in zip(run, cells, stops, strict=True))
    assert r["attnlab"]["flops_useful"] == useful
    assert r["attnlab"]["peak_fraction_steady"] == pytest.approx(useful / 2.0 / 1e10, rel=1e-3)
    assert r["attnlab"]["model_steps"] == 100 and r["baseline"]["model_steps"] == 60
    paper = sum(flops.cell_flops(per, loop(cells[i], True), t, "paper") for i, t in ((1, 20), (3, 40)))
    same = sum(flops.cell_flops(run[i], loop(cells[i]), t) for i, t in ((1, 20), (3, 40)))
    assert r["baseline"]["flops"] == paper
    assert r["ratio"]["work_baseline_over_attnlab"] == pytest.approx(paper / same, rel=1e-3)
    assert r["per_cell"][1]["baseline_test_loss"] == 0.15 and "baseline_test_loss" not in r["per_cell"][0]
    f = r["floor"]  # the protocol's floor: its draws at the fastest generator + the paper's loop (test once) at GEMM
    numbers = np.mean([flops.random_numbers(c, int(t), exp.tags) for c, t in zip(cells, stops, strict=True)])
    least = [suite.per_sample(c)["least"] for c in cells]
    work = np.mean([flops.cell_flops(p, loop(c), int(t), "paper") for p, c, t in zip(least, cells, stops, strict=True)])
    assert f["generator"] == "numpy_pcg64" and f["random_numbers_per_cell"] == int(numbers)
    assert f["seconds_per_cell"] == pytest.approx(numbers * 5e-9 + work / 1e10, rel=1e-3)
    assert f["multiple"] == pytest.approx(0.5 / f["seconds_per_cell"], rel=1e-3)
    json.dumps(r)  # JSON-ready
    console = Console(record=True, width=140)
    report.render(r, console)
    text = console.export_text()
    assert "s / cell (steady)" in text and "8.00×" in text and "different sides of 0.2" in text
    assert "protocol floor" in text and "× the floor" in text
    # the CLI prints the same report and writes it as JSON
    monkeypatch.setattr(runner, "run_suite", lambda *a, **kw: r)
    res = CliRunner().invoke(app, ["bench", "--scale", "smoke", "--json", str(tmp_path / "b.json")])
    assert res.exit_code == 0, res.output
    assert "s / cell (steady)" in res.output and json.loads((tmp_path / "b.json").read_text())["floor"] == f


def test_random_numbers_of_a_jiang2024_cell_by_hand():
    """Every element of the training and test inputs and of the initial parameters, plus one per
    sample drawn into a mini-batch."""
    _, _, cells = suites.suite_cells("jiang2024", "smoke")
    c = cells[0]
    M, d, N, n_test = c["data.M"], c["data.d"], c["data.N"], c["data.n_test"]
    params = d * (2 * c["model.d_h"] + c["model.d_v"]) + c["model.d_v"]  # W_Q, W_K, W_V and the fixed head w_O
    assert flops.random_numbers(c, 7) == (N + n_test) * M * d + params
    assert flops.random_numbers(c | {"train.batch_size": 2}, 7) == (N + n_test) * M * d + params + 7 * 2


def test_generator_rates_are_measured_for_each_candidate():
    rates = measure.rng_rates(n=1 << 12, repeats=2)
    assert {"jax_threefry2x32", "jax_rbg", "attnlab_philox", "numpy_pcg64", "numpy_philox"} <= set(rates)
    assert rates["best"] in rates and all(0 < v < 1e-5 for k, v in rates.items() if k != "best")


def test_attnlab_side_on_two_smoke_cells():
    r = runner.run_suite(
        "jiang2024", cells=2, baseline_cells=0, scale="smoke", progress=False, console=Console(quiet=True), gemm_n=128
    )
    a = r["attnlab"]
    assert r["cells"] == 2 and r["baseline"] is None and r["ratio"] is None
    assert a["steady_s"] > 0 and a["whole_s"] > 0 and a["compile_s_aot"] > 0 and a["programs_compiled"] >= 1
    assert a["cold_run_equals_warm_run"] and a["flops_useful"] > 0 and a["peak_rss_mb"] > 0
    assert all(np.isfinite(row["attnlab_test_loss"]) for row in r["per_cell"])
    json.dumps(r)


def test_missing_torch_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(runner, "torch_available", lambda: False)
    with pytest.raises(AttnlabError, match=r"make bench.*torch==2\.13\.0"):
        runner.run_suite("jiang2024", cells=2, scale="smoke")
    r = CliRunner().invoke(app, ["bench", "--scale", "smoke", "--cells", "2"])
    assert r.exit_code == 2 and "make bench" in r.output


def test_cli_bench_help_and_bad_input():
    runner = CliRunner()
    r = runner.invoke(app, ["bench", "--help"])
    assert r.exit_code == 0
    for opt in ("--suite", "--cells", "--baseline-cells", "--baseline-threads", "--scale", "--json"):
        assert opt in r.output
    r = runner.invoke(app, ["bench", "--suite", "nope", "--baseline-cells", "0"])
    assert r.exit_code == 2 and "--suite" in r.output
    r = runner.invoke(app, ["bench", "--cells", "2", "--baseline-cells", "3"])
    assert r.exit_code == 2 and "--baseline-cells" in r.output
    r = runner.invoke(app, ["bench", "--cells", "2", "--baseline-threads", "0"])
    assert r.exit_code == 2 and "--baseline-threads" in r.output


def test_a_recipe_the_baseline_does_not_implement_is_one_clear_error():
    _, _, cells = suites.suite_cells("li2023", "smoke")
    s = suites.SUITES["li2023"]
    s.check(cells[0])
    with pytest.raises(AttnlabError, match=r"li2023 serial baseline.*train\.optimizer"):
        s.check(cells[0] | {"train.optimizer": "adam"})
    s.check(cells[0] | {"train.optimizer": "adam"}, baseline=False)  # attnlab alone: only the model matters
    with pytest.raises(AttnlabError, match="know model 'wu2023'"):
        suites.SUITES["wu2023"].check(cells[0], baseline=False)
