"""``attnlab bench`` without PyTorch: the cell subset, the FLOP count, the agreement statistics,
the report, the CLI, and the attnlab side on two smoke cells. The PyTorch baseline end to end is
checked by ``benchmarks/bench_suite.py --check`` (``make bench``), not here."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from attnlab import bench
from attnlab.cli import app
from attnlab.errors import AttnlabError
from attnlab.models import jiang2024 as jmodel
from attnlab.sweep import grid


@pytest.fixture(scope="module")
def paper_cells():
    return bench.suite_cells("jiang2024", "paper")[2]


def test_subset_is_seeded_and_spread_over_the_grid(paper_cells):
    sel = bench.select_cells(paper_cells, 100, seed=0)
    ids = [grid.cell_id(c) for c in sel]
    assert len(sel) == 100 and len(set(ids)) == 100
    assert ids == [grid.cell_id(c) for c in bench.select_cells(paper_cells, 100, seed=0)]  # seeded
    assert set(ids) != {grid.cell_id(c) for c in bench.select_cells(paper_cells, 100, seed=1)}
    assert bench.grid_axes(paper_cells) == ["data.N", "data.mu"]
    N = np.array([c["data.N"] for c in sel])
    mu = np.array([c["data.mu"] for c in sel])
    assert sorted(set(N)) == list(range(2, 21, 2)) and all((N == n).sum() == 10 for n in set(N))
    for n in set(N):  # along ‖μ‖ within every N: from the bottom decile to the top one
        assert mu[N == n].min() <= 10 and mu[N == n].max() >= 91
    assert len({c["rep"] for c in sel}) > 3
    assert len(bench.select_cells(paper_cells[:5], 100)) == 5 and bench.select_cells(paper_cells, 0) == []


def test_flop_count_by_hand():
    s = bench.Shape(M=2, d=3, d_h=2, d_v=1)
    # forward: X W_Q, X W_K 2·2·3·2 = 24 each; X W_V 2·2·3·1 = 12; Q Kᵀ 2·2·2·2 = 16; (X W_V) w_O 2·2·1 = 4; ā·v 2·2 = 4
    # backward: W_Q, W_K, W_V 24 + 24 + 12; Q and K in S 2·16; X W_V in v 4; ā and v in f 2·4
    assert bench.flops_per_sample(s) == {"forward": 84, "backward": 104}
    assert bench.flops_update(s) == 2 * 3 * (2 + 2 + 1)
    # attnlab: 3 passes of 4 samples, 2 updates, final forward of 4 + 6 samples
    assert bench.cell_flops(s, N=4, n_test=6, stop_step=2) == 3 * 4 * 188 + 2 * 30 + 10 * 84
    # paper loop: forward of 4 + 6 samples at 3 steps, backward of 4 samples and an update at 2
    assert bench.cell_flops(s, N=4, n_test=6, stop_step=2, protocol="paper") == 3 * 10 * 84 + 2 * (4 * 104 + 30)
    w = bench.Shape(M=2, d=3, d_h=2, d_v=1, train_w_O=True)
    assert bench.flops_per_sample(w)["backward"] == 104 + 4 and bench.flops_update(w) == 30 + 2
    with pytest.raises(ValueError, match="protocol"):
        bench.cell_flops(s, 4, 6, 2, protocol="other")


def test_flop_count_agrees_with_xla_cost_analysis():
    s = bench.Shape(M=4, d=64, d_h=32, d_v=32)
    hp = jmodel.Hparams(M=s.M, d=s.d, d_h=s.d_h, d_v=s.d_v)
    p = jmodel.init(jax.random.PRNGKey(0), hp)
    X = jax.random.normal(jax.random.PRNGKey(1), (6, s.M, s.d))
    y = jnp.where(jnp.arange(6) % 2 == 0, 1.0, -1.0)
    train = {k: p[k] for k in jmodel.trainable(hp)}

    def loss(tr, X, y):
        f, _ = jax.vmap(lambda x: jmodel.apply(tr | {"w_O": p["w_O"]}, x, hp))(X)
        return jmodel.logistic_loss(f, y).mean()

    per = bench.flops_per_sample(s)
    for fn, want in ((loss, 6 * per["forward"]), (jax.value_and_grad(loss), 6 * (per["forward"] + per["backward"]))):
        ca = jax.jit(fn).lower(train, X, y).compile().cost_analysis()
        ca = ca[0] if isinstance(ca, list | tuple) else ca
        if not ca or "flops" not in ca:
            pytest.skip("this jaxlib gives no cost analysis")
        assert 0.8 < ca["flops"] / want < 1.25, (ca["flops"], want)


def test_agreement_statistics():
    a = [0.1, 0.3, 0.15, np.nan, 0.5]
    b = [0.12, 0.1, 0.25, 0.2, 0.5]
    g = bench.agreement(a, b, level=0.2, a_stop=[3, 4, 5, 6, 7], b_stop=[3, 5, 5, 1, 9])
    assert g["cells"] == 4 and g["non_finite_pairs"] == 1
    assert g["mean_abs_diff"] == pytest.approx((0.02 + 0.2 + 0.1 + 0.0) / 4)
    assert g["max_abs_diff"] == pytest.approx(0.2)
    assert g["mean_diff_a_minus_b"] == pytest.approx((-0.02 + 0.2 - 0.1) / 4)
    assert g["different_side"] == 2 and g["different_side_share"] == 0.5  # 0.3 vs 0.1 and 0.15 vs 0.25
    assert g["a_below_level"] == 2 and g["b_below_level"] == 2
    assert g["same_stop_step"] == 2 and g["mean_abs_stop_diff"] == pytest.approx((0 + 1 + 0 + 2) / 4)
    lo, hi = g["mean_diff_ci95"]
    assert lo < g["mean_diff_a_minus_b"] < hi and g["wilcoxon_p"] is None  # too few nonzero pairs for a test
    assert bench.agreement([np.nan], [1.0])["mean_abs_diff"] is None
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, 40)
    assert bench.agreement(x, x + 0.1)["wilcoxon_p"] < 1e-6  # a systematic shift is detected
    assert bench.agreement(x, x + rng.normal(0, 0.01, 40))["wilcoxon_p"] > 0.01


def test_report_from_synthetic_measurements():
    exp, _, cells = bench.suite_cells("jiang2024", "smoke")
    cells = cells[:4]
    stops = np.array([10, 20, 30, 40])
    attn = {
        "whole_s": 10.0, "steady_s": 2.0, "whole_cpu_s": 15.0, "steady_cpu_s": 4.0,
        "aot": {"programs": 1, "lower_s": 0.5, "compile_s": 7.0, "strategy": "sequential"},
        "chunks": 1, "chunk_sizes": [4], "strategy": "sequential", "test_loss": np.array([0.1, 0.3, 0.5, 0.05]),
        "stop_step": stops, "status": np.array(["converged"] * 4), "seconds": np.full(4, 0.5),
        "N_pad": np.array([c["data.N"] for c in cells]), "cold_equals_warm": True, "peak_rss_mb": 500.0,
        "chunk_ids": [[grid.cell_id(c) for c in cells[:2]], [grid.cell_id(c) for c in cells[2:]]], "chunk_s": [0.5, 1.5],
    }  # fmt: skip
    base = {
        "torch_version": "x", "threads": 2, "gemm": {"best": 2e10}, "warmup_s": 1.0,
        "test_loss": np.array([0.15, 0.06]), "stop_step": np.array([20, 40]), "status": np.array(["converged"] * 2),
        "seconds": np.array([3.0, 5.0]), "cpu_s": np.array([6.0, 10.0]), "peak_rss_mb": 900.0,
    }  # fmt: skip
    r = bench.build_report(suite="jiang2024", experiment=exp.id, scale="smoke", seed=0, grid_cells=8, cells=cells,
                           attn=attn, base=base, base_idx=[1, 3], gemm={"n": 64, "best": 1e10, "median": 9e9},
                           rss_start_mb=300.0)  # fmt: skip
    assert r["ratio"]["steady"] == pytest.approx(4.0 / 0.5)  # 4 s per baseline cell vs 2 s / 4 cells
    assert r["ratio"]["whole"] == pytest.approx(4.0 / 2.5)
    assert r["ratio"]["steady_cpu_time"] == pytest.approx(8.0 / 1.0)
    assert r["ratio"]["steady_by_chunk"] == pytest.approx([3.0 / 0.25, 5.0 / 0.75], rel=1e-3)  # cell 1 in chunk 0, cell 3 in chunk 1
    assert r["baseline"]["extrapolated"] and "sub-subset of 2 of the 4" in r["notes"][0]
    assert r["agreement"]["cells"] == 2 and r["agreement"]["different_side"] == 1  # 0.3 vs 0.15
    assert r["agreement"]["mean_abs_diff"] == pytest.approx((0.15 + 0.01) / 2)
    s = bench.Shape.of(cells[0])
    useful = sum(bench.cell_flops(s, c["data.N"], c["data.n_test"], int(t)) for c, t in zip(cells, stops, strict=True))
    assert r["attnlab"]["flops_useful"] == useful
    assert r["attnlab"]["peak_fraction_steady"] == pytest.approx(useful / 2.0 / 1e10, rel=1e-3)
    assert r["attnlab"]["model_steps"] == 100 and r["baseline"]["model_steps"] == 60
    paper = sum(bench.cell_flops(s, cells[i]["data.N"], cells[i]["data.n_test"], t, "paper") for i, t in ((1, 20), (3, 40)))
    same = sum(bench.cell_flops(s, cells[i]["data.N"], cells[i]["data.n_test"], t) for i, t in ((1, 20), (3, 40)))
    assert r["baseline"]["flops"] == paper
    assert r["ratio"]["work_baseline_over_attnlab"] == pytest.approx(paper / same, rel=1e-3)
    assert r["per_cell"][1]["baseline_test_loss"] == 0.15 and "baseline_test_loss" not in r["per_cell"][0]
    json.dumps(r)  # JSON-ready
    console = Console(record=True, width=140)
    bench.render(r, console)
    text = console.export_text()
    assert "s / cell (steady)" in text and "8.00×" in text and "different sides of 0.2" in text


def test_attnlab_side_on_two_smoke_cells():
    r = bench.run_suite("jiang2024", cells=2, baseline_cells=0, scale="smoke", progress=False,
                        console=Console(quiet=True), gemm_n=128)  # fmt: skip
    a = r["attnlab"]
    assert r["cells"] == 2 and r["baseline"] is None and r["ratio"] is None
    assert a["steady_s"] > 0 and a["whole_s"] > 0 and a["compile_s_aot"] > 0 and a["programs_compiled"] >= 1
    assert a["cold_run_equals_warm_run"] and a["flops_useful"] > 0 and a["peak_rss_mb"] > 0
    assert all(np.isfinite(row["attnlab_test_loss"]) for row in r["per_cell"])
    json.dumps(r)


def test_missing_torch_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(bench, "torch_available", lambda: False)
    with pytest.raises(AttnlabError, match=r"make bench.*torch==2\.13\.0"):
        bench.run_suite("jiang2024", cells=2, scale="smoke")
    r = CliRunner().invoke(app, ["bench", "--scale", "smoke", "--cells", "2"])
    assert r.exit_code == 2 and "make bench" in r.output


def test_cli_bench_help_and_bad_input():
    runner = CliRunner()
    r = runner.invoke(app, ["bench", "--help"])
    assert r.exit_code == 0
    for opt in ("--suite", "--cells", "--baseline-cells", "--json"):
        assert opt in r.output
    r = runner.invoke(app, ["bench", "--suite", "nope", "--baseline-cells", "0"])
    assert r.exit_code == 2 and "--suite" in r.output
    r = runner.invoke(app, ["bench", "--cells", "2", "--baseline-cells", "3"])
    assert r.exit_code == 2 and "--baseline-cells" in r.output
