"""Every experiment end to end at smoke scale, through the CLI: the contract files, the verdict's
fields, the experiment's own rows and columns in results.parquet, and resume (once per paper).

Each id's smoke run is made once per test session (the ``smoke`` fixture) and shared with the
report, browser and per-paper tests. Smoke verdicts are a pipeline check, not evidence: only
their form is tested here. One class per paper, so that pytest-xdist can run the papers' runs
on different workers."""

import json
import shutil

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from attnlab.cli import app
from attnlab.experiments import get, registry
from attnlab.rules import REGIMES

PAPERS = ("jiang2024", "li2023", "wu2023")
RESUMED = {"jiang2024": "jiang2024-fig1", "li2023": "li2023-fig1", "wu2023": "wu2023-fig1"}  # li2023-fig1 is staged


def ids_of(paper):
    return sorted(e for e in registry() if e.startswith(paper + "-"))


def test_every_experiment_belongs_to_a_paper_class():
    assert sorted(e for p in PAPERS for e in ids_of(p)) == sorted(registry())


def check_results_table(exp, table, v):
    """The experiment's own rows and columns in results.parquet."""
    spec = get(exp).spec("smoke")
    names = set(table.column_names)
    assert {"id", "data.N", "train.lr", "train.loss", "test_loss", "status"} <= names
    if set(table.column("train.loss").to_pylist()) != {"squared"}:  # a sign error only where the loss is a margin's
        assert "test_error" in names
    if exp.startswith("jiang2024"):
        assert table.num_rows == v["cells"]
        assert ({"data.signal", "snr"} if exp == "jiang2024-fig2" else {"data.mu"}) | {"model.d_h"} <= names
    if exp == "jiang2024-fig3":
        assert set(table.column("regime").to_pylist()) == {"harmful", "benign"}
        assert {"trace_attn_weak_max_mean", "trace_qk_strong_strong", "trace_V_signal"} <= names
    if exp == "li2023-fig1":  # the lr tuning stage, the grid at the chosen lr, the linear learner's tuning and grid
        n_tune = len(spec.tune_lr) * spec.tune_reps
        n_grid = len(spec.data["alpha_star"]) * len(spec.data["N"]) * spec.reps
        n_floor = len(spec.floor_lr) * spec.tune_reps + n_grid
        assert table.num_rows == v["cells"] == n_tune + n_grid + n_floor
        t = table.to_pydict()
        tune = [i for i, s in enumerate(t["stage"]) if s == "tune"]
        grid = [i for i, s in enumerate(t["stage"]) if s == "grid"]
        floor = [i for i, s in enumerate(t["stage"]) if s == "floor"]
        assert len(tune) == n_tune and len(grid) == n_grid and len(floor) == n_grid
        assert {t["model.name"][i] for i in floor} == {"li2023-linear"}
        assert sorted(t["train.lr"][i] for i in tune) == sorted(spec.tune_lr)
        (chosen,) = {t["train.lr"][i] for i in grid}
        assert chosen in spec.tune_lr
        assert {"data.alpha_star", "data.alpha_hash", "model.m_b", "train.stop_on"} <= names
        assert set(t["train.stop_on"]) == {"hinge"}
        assert [c["id"] for c in v["claims"]] == ["line", "exponent", "likelihood", "iterations"]
    if exp == "li2023-fig3":
        hinge = spec.hinge and spec.train.get("loss") != "hinge"  # the design again under the hinge loss
        assert table.num_rows == v["cells"] == spec.reps * (2 if hinge else 1)
        assert {"trace_step", "trace_attn_relevant", "trace_attn_entropy", "train.lr_mult.QK"} <= names
        steps = table.column("trace_step").to_pylist()
        assert all(len(a) == len(steps[0]) for a in table.column("trace_attn_relevant").to_pylist())
    if exp == "li2023-fig4":  # derived rows: one per (cell trained on all tokens, strategy, k), one per retrained cell
        ks = list(range(0, spec.k_max + 1, spec.k_step))
        retrained = 3 * len(spec.train_ks) * spec.reps
        assert table.num_rows == (v["cells"] - retrained) * 4 * len(ks) + retrained
        assert {"removal", "strategy", "k_removed", "test_loss", "test_hinge", "test_error"} <= names
        assert "params_npz" not in names
        t = table.to_pydict()
        keys = list(zip(t["id"], t["strategy"], t["k_removed"], strict=True))
        assert len(set(keys)) == len(keys) and len(set(t["id"])) == v["cells"]
        assert t["removal"].count("train") == retrained
        assert set(t["strategy"]) == {"irrelevant", "noisiest", "random", "attention"}
        assert sorted(set(t["k_removed"])) == ks


class Contract:
    def test_smoke_run_writes_the_contract_files(self, smoke, exp):
        run = smoke(exp)
        out, v = run.out, run.verdict
        for name in ("results.parquet", "verdict.json", "report.html", "spec.json", "store.json"):
            assert (out / name).is_file(), name
        assert list(out.glob("*.png")) and list(out.glob("*.pdf"))
        assert {"experiment", "scale", "cells", "cells_trained_now", "runtime_s", "provenance", "claims"} <= set(v)
        assert v["experiment"] == exp and v["scale"] == "smoke" and v["cells_trained_now"] == v["cells"]
        assert {"attnlab_version", "git_sha", "jax_version", "backend", "strategy", "dtype"} <= set(v["provenance"])
        assert v["claims"]
        for c in v["claims"]:
            assert {"id", "statement", "measured", "expected", "outcome", "pass"} <= set(c)
            assert c["outcome"] in {"pass", "fail", "inconclusive", "descriptive"}
            assert c["pass"] is (None if c["outcome"] == "descriptive" else c["outcome"] == "pass")
            assert c["regime"] in REGIMES
        table = pq.read_table(out / "results.parquet")
        assert set(table.column("status").to_pylist()) <= {"converged", "cap", "diverged"}
        check_results_table(exp, table, v)
        report = (out / "report.html").read_text()
        assert exp in report and "predictions pass" in report


@pytest.mark.parametrize("exp", ids_of("jiang2024"))
class TestJiang2024(Contract):
    pass


@pytest.mark.parametrize("exp", ids_of("li2023"))
class TestLi2023(Contract):
    pass


@pytest.mark.parametrize("exp", ids_of("wu2023"))
class TestWu2023(Contract):
    pass


@pytest.mark.parametrize("exp", RESUMED.values())
def test_a_rerun_into_the_same_directory_resumes(smoke, exp, tmp_path):
    """Nothing is trained again and the table is the same (one id per paper)."""
    out = tmp_path / "run"
    shutil.copytree(smoke(exp).out, out)
    table = pq.read_table(out / "results.parquet")
    r = CliRunner().invoke(app, ["reproduce", exp, "--scale", "smoke", "--out", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    assert json.loads((out / "verdict.json").read_text())["cells_trained_now"] == 0
    assert pq.read_table(out / "results.parquet").equals(table)
