"""The command line contract: list, reproduce, --set, --config, resume, and one clear error for
bad input. Every id's smoke run and its resume: test_smoke.py.

Most runs here are the same two-cell fig1 grid (N ≤ 4, one chunk), so they share one compiled
program."""

import dataclasses
import json
import shutil

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from attnlab.cli import app
from attnlab.errors import AttnlabError
from attnlab.experiments import get
from attnlab.experiments.config import resolve_name
from attnlab.models import jiang2024 as jmodel
from helpers import use_part

runner = CliRunner()

# two fig1 cells: N = 2 and 4 at ‖μ‖ = 5, lr 0.05
SMALL = ["--set", "N=2,4", "--set", "mu=5", "--set", "reps=1", "--set", "lr=0.05"]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def reproduce(out, *args, exp="jiang2024-fig1"):
    return invoke("reproduce", exp, "--scale", "smoke", "--out", out, "--quiet", *args)


def verdict_of(out):
    return json.loads((out / "verdict.json").read_text())


def test_list_prints_every_experiment():
    from attnlab.experiments import registry

    r = invoke("list")
    assert r.exit_code == 0
    assert all(e in r.output for e in registry()) and "jiang2024-fig1" in r.output


def test_li2023_fig1_with_an_empty_tune_lr_runs_the_grid_only(tmp_path):
    out = tmp_path / "res"
    # the linear learner on the mean token (the floor) has its own tuning: off here too
    r = reproduce(out, "--set", "tune_lr=", "--set", "floor=false", exp="li2023-fig1")
    assert r.exit_code == 0, r.output
    spec = json.loads((out / "spec.json").read_text())
    assert spec["tune_lr"] == []
    t = pq.read_table(out / "results.parquet").to_pydict()
    assert set(t["stage"]) == {"grid"} and len(t["id"]) == verdict_of(out)["cells"] == 8
    assert set(t["train.lr"]) == {get("li2023-fig1").spec("smoke").train["lr"]}  # the recipe's lr, untuned
    assert "lr tuning (validation runs)" not in (out / "report.html").read_text()


def test_li2023_bad_grid_value_is_caught_before_the_tune_stage_runs(tmp_path):
    out = tmp_path / "res"
    r = reproduce(out, "--set", "alpha_star=0.5,0.02", exp="li2023-fig1")  # [0.02·12] = 0 relevant tokens
    assert r.exit_code == 2, r.output
    assert "data.alpha_star: with counts = 'fixed', [α_*·L] = 0 relevant tokens" in r.output
    assert not out.exists()


def test_set_overrides_axes_and_fields(tmp_path):
    out = tmp_path / "res"
    r = reproduce(out, *SMALL)
    assert r.exit_code == 0, r.output
    t = pq.read_table(out / "results.parquet").to_pydict()
    assert sorted(t["data.N"]) == [2, 4] and set(t["data.mu"]) == {5.0} and set(t["train.lr"]) == {0.05}
    assert set(t["rep"]) == {0}
    spec = json.loads((out / "spec.json").read_text())
    assert spec["data"]["N"] == ["2", "4"] or spec["data"]["N"] == [2, 4]
    assert spec["reps"] == 1
    assert "--set N=2,4" in verdict_of(out)["command"]


def test_a_multi_valued_part_field_is_a_grid_axis(tmp_path):
    out = tmp_path / "res"
    r = reproduce(out, "--set", "N=4", "--set", "mu=5", "--set", "reps=1", "--set", "lr=0.05,0.1")
    assert r.exit_code == 0, r.output
    t = pq.read_table(out / "results.parquet").to_pydict()
    assert sorted(t["train.lr"]) == [0.05, 0.1] and t["data.N"] == [4, 4]


def test_probes_none_turns_the_probes_off():
    exp = get("wu2023-init")
    (cell, *_) = exp.cells(exp.spec("smoke", ["train.probes=none"]))
    assert cell["train.probes"] == ""  # the cell a TOML's probes = "" gives


def test_namespaced_and_short_names_resolve_the_same():
    exp = get("jiang2024-fig1")
    a = exp.spec("smoke", ["lr=0.2", "d_h=4", "mu=5,6"])
    b = exp.spec("smoke", ["train.lr=0.2", "model.d_h=4", "data.mu=5,6"])
    assert a == b
    cells = exp.cells(a)
    assert {c["data.mu"] for c in cells} == {5.0, 6.0} and {c["model.d_h"] for c in cells} == {4}
    assert {c["train.lr"] for c in cells} == {0.2}
    assert {c["train.lr_mult.QK"] for c in exp.cells(exp.spec("smoke", ["lr_mult.QK=3"]))} == {3.0}


def test_an_ambiguous_short_name_is_an_error(tmp_path, monkeypatch):
    """No two current parts share a field name, so give the model one that the data has."""

    class HparamsN(jmodel.Hparams):
        N: int = 0

    use_part(monkeypatch, dataclasses.replace(jmodel.PART, config=HparamsN))
    r = reproduce(tmp_path / "res", "--set", "N=4")
    assert r.exit_code == 2, r.output
    assert "--set N: ambiguous; use one of data.N, model.N" in r.output
    values = get("jiang2024-fig1").defaults()
    assert resolve_name(get("jiang2024-fig1").Spec, "data.N", values) == "data.N"
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["reproduce", "no-such-exp"], "experiment: unknown id 'no-such-exp'"),
        (["reproduce", "jiang2024-fig1", "--scale", "huge"], "--scale: unknown 'huge'"),
        (["reproduce", "jiang2024-fig1", "--set", "width=3"], "--set width: unknown field; valid:"),
        (["reproduce", "jiang2024-fig1", "--set", "N=-2"], "invalid spec: data.N: Input should be greater than 0"),
        (["reproduce", "jiang2024-fig1", "--set", "N=3"], "data.N: values must be even"),
        (["reproduce", "jiang2024-fig1", "--set", "d=ten"], "invalid spec: data.d: Input should be a valid integer"),
        (["reproduce", "jiang2024-fig1", "--set", "lr=-1"], "invalid spec: train.lr: Input should be greater than 0"),
        (["reproduce", "jiang2024-fig1", "--set", "mu"], "expected name=value"),
        (["reproduce", "jiang2024-fig1", "--set", "mu="], "--set mu: no value given"),
        (["reproduce", "jiang2024-fig3", "--set", "regime=neutral"], "regime: unknown regime"),
        (["reproduce", "jiang2024-fig1", "--executor", "spark"], "--executor: unknown 'spark'"),
        (["reproduce", "jiang2024-fig1", "--set", "mu=inf"], "data.mu: Input should be a finite number"),
        (
            ["reproduce", "jiang2024-fig1", "--set", "loss_threshold=nan"],
            "train.loss_threshold: Input should be a finite number",
        ),
        (["reproduce", "jiang2024-fig3", "--set", "N_benign=5"], "N_benign: must be even"),
        (["reproduce", "jiang2024-fig1", "--set", "data.name=mnist"], "data.name: unknown data 'mnist'"),
        (["reproduce", "jiang2024-fig1", "--set", "data.nope=1"], "--set data.nope: unknown field of data"),
        (["reproduce", "jiang2024-fig1", "--set", "reps=1,2"], "--set reps: takes one value"),
        (["reproduce", "jiang2024-fig1", "--set", "model.name=a,b"], "model.name: unknown model 'a'"),
        (["reproduce", "jiang2024-fig1", "--set", "optimizer=lbfgs"], "train.optimizer: Input should be 'gd'"),
        (["reproduce", "jiang2024-fig1", "--set", "d_h=0"], "model.d_h: Input should be greater than 0"),
        (["reproduce", "li2023-fig1", "--set", "alpha_hash=0.6"], "invalid spec: data: data.alpha"),
        (
            ["reproduce", "li2023-fig1", "--set", "alpha_star=0.5", "--set", "alpha_hash=0.6"],
            "data.alpha_hash: α_* + α_# = 0.5 + 0.6 exceeds 1",
        ),
        (
            ["reproduce", "li2023-fig1", "--set", "alpha_star=0.3", "--set", "alpha_hash=0.4"],
            "data.alpha_star: α_* = 0.3 must exceed α_# = 0.4",
        ),
        (["reproduce", "li2023-fig1", "--set", "tune_lr=0.1,-1"], "tune_lr.1: Input should be greater than 0"),
        (["reproduce", "li2023-fig1", "--set", "d=4"], "data.d: the M = 6 patterns are orthogonal"),
        (["reproduce", "li2023-fig4", "--set", "stop_on=margin"], "train.stop_on: Input should be 'loss'"),
    ],
)
def test_bad_input_gives_one_clear_error(tmp_path, args, needle):
    extra = [] if "--scale" in args else ["--scale", "smoke"]
    r = invoke(*args, "--out", tmp_path / "res", *extra)
    assert r.exit_code == 2, r.output
    assert needle in r.output
    assert r.output.startswith("error: ") and "Traceback" not in r.output
    assert isinstance(r.exception, SystemExit)  # a clean exit, not an escaped exception
    assert not (tmp_path / "res").exists()  # checked before anything is written


def test_bad_input_leaves_existing_results_untouched(tmp_path):
    out = tmp_path / "res"
    assert reproduce(out, *SMALL).exit_code == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    for bad in (["--set", "N=-4"], ["--set", "train.lr_mult.XY=2"]):
        r = reproduce(out, *SMALL, *bad)
        assert r.exit_code == 2, r.output
        assert "N" in r.output or "XY" in r.output
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert before == after


def test_toml_config_sets_fields(tmp_path):
    cfg = tmp_path / "grid.toml"
    cfg.write_text(
        "reps = 2\n[data]\nN = [2, 4]\nmu = [5.0]\nsigma_tilde_p = 2.0\n[model]\nd_h = 8\n[train]\nlr = 0.05\n"
    )
    out = tmp_path / "res"
    r = reproduce(out, "--config", cfg, "--set", "reps=1")  # --set applies after the config
    assert r.exit_code == 0, r.output
    t = pq.read_table(out / "results.parquet").to_pydict()
    assert sorted(set(t["data.N"])) == [2, 4] and set(t["data.sigma_tilde_p"]) == {2.0}
    assert set(t["train.lr"]) == {0.05} and set(t["rep"]) == {0} and set(t["model.d_h"]) == {8}


def test_toml_tables_merge_into_the_scale(tmp_path):
    cfg = tmp_path / "grid.toml"
    cfg.write_text("seeds = 2\n[model]\nd_h = 4\n[train]\noptimizer = 'adam'\n")
    spec = get("jiang2024-fig1").spec("smoke", ["model.d_v=3"], cfg)
    assert spec.seeds == 2
    assert spec.model == {"name": "jiang2024", "d_h": 4, "d_v": "3", "init_scale": 16.0}
    assert spec.train["optimizer"] == "adam" and spec.train["max_steps"] == 300  # the rest kept
    assert spec.data["d"] == 16


@pytest.mark.parametrize(
    "text, needle",
    [
        ("[data]\nN = [2, 4\n", "malformed TOML"),
        ("width = 3\n", "unknown field(s) width"),
        ("N = [2, 4]\n", "unknown field(s) N"),  # part fields live in their table
        ("data = 3\n", "data must be a table ([data])"),
        ("[data]\nnope = 1\n", "data.nope: unknown field"),
        ("[data]\nN = [2, -4]\n", "data.N: Input should be greater than 0"),
        ("[data]\nsigma_p = -0.2\n", "data.sigma_p: Input should be greater than 0"),
        ("[train]\nlr = 'fast'\n", "train.lr: Input should be a valid number"),
        (b"reps = 2\xff\n", "malformed TOML"),
    ],
)
def test_bad_toml_config(tmp_path, text, needle):
    cfg = tmp_path / "bad.toml"
    cfg.write_bytes(text if isinstance(text, bytes) else text.encode())
    r = invoke("reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", tmp_path / "res", "--config", cfg)
    assert r.exit_code == 2, r.output
    assert needle in r.output and isinstance(r.exception, SystemExit)


def test_missing_toml_config(tmp_path):
    r = invoke(
        "reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", tmp_path / "res", "--config", tmp_path / "nope.toml"
    )
    assert r.exit_code == 2 and "cannot read" in r.output


def test_out_must_be_a_directory(tmp_path):
    f = tmp_path / "file"
    f.write_text("keep me")
    r = invoke("reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", f)
    assert r.exit_code == 2 and "exists and is not a directory" in r.output
    assert f.read_text() == "keep me"


def test_results_of_another_jax_version_need_force(tmp_path):
    out = tmp_path / "res"
    assert reproduce(out, *SMALL).exit_code == 0
    manifest = json.loads((out / "store.json").read_text())
    manifest["jax"] = "0.0.1"
    (out / "store.json").write_text(json.dumps(manifest))
    table = pq.read_table(out / "results.parquet")

    r = reproduce(out, *SMALL)
    assert r.exit_code == 2, r.output
    assert "jax 0.0.1" in r.output and "--force" in r.output
    assert json.loads((out / "store.json").read_text())["jax"] == "0.0.1"  # untouched

    r = reproduce(out, *SMALL, "--force")
    assert r.exit_code == 0, r.output
    assert verdict_of(out)["cells_trained_now"] == 0
    assert pq.read_table(out / "results.parquet").equals(table)
    manifest = json.loads((out / "store.json").read_text())
    assert manifest["jax"] != "0.0.1" and manifest["history"][-1]["jax"] == "0.0.1"


@pytest.mark.parametrize("name", ["it's here", "runs [abc] 1"])
def test_a_path_with_a_quote_or_brackets_works_end_to_end(tmp_path, name):
    out = tmp_path / name
    r = reproduce(out, *SMALL)
    assert r.exit_code == 0, r.output
    assert pq.read_table(out / "results.parquet").num_rows == 2
    r = reproduce(out, *SMALL)  # resume reads the parts back through DuckDB
    assert r.exit_code == 0, r.output
    assert verdict_of(out)["cells_trained_now"] == 0
    assert f"{name}/report.html" in r.output.replace("\n", "")  # printed as is, not as rich markup


def test_reproduce_checks_the_experiment_id_first():
    with pytest.raises(AttnlabError, match="unknown id"):
        get("nope")


def test_fields_lists_the_fields_before_a_run(monkeypatch):
    from attnlab import cli

    monkeypatch.setattr(cli.out, "width", 250)
    r = runner.invoke(app, ["fields", "jiang2024-fig1", "--scale", "smoke"])
    assert r.exit_code == 0, r.output
    assert "data.mu" in r.output and "axis" in r.output and "signal norm" in r.output and "max_cells" in r.output
    r = runner.invoke(app, ["fields", "model.vit"])
    assert r.exit_code == 0 and "model.alpha" in r.output and "0.5" in r.output, r.output
    assert "'mean', 'cls'" in r.output and "> 0" in r.output and "static" in r.output  # allowed values, role
    assert "model.L " not in r.output  # the data's shape is not a field one sets
    r = runner.invoke(app, ["fields", "data.jiang2024"])
    assert r.exit_code == 0 and "batched" in r.output and "size" in r.output
    r = runner.invoke(app, ["fields", "train"])
    assert r.exit_code == 0 and "train.lr" in r.output and "'gd', 'momentum', 'adam'" in r.output
    for bad, needle in (
        (["fields", "nope"], "unknown id 'nope'"),
        (["fields", "model.nope"], "unknown model 'nope'"),
        (["fields", "jiang2024-fg1"], "did you mean jiang2024-fig1"),
    ):
        r = runner.invoke(app, bad)
        assert r.exit_code == 2 and r.output.startswith("error: ") and needle in r.output, r.output


def test_dry_run_plans_without_training_or_writing(tmp_path, monkeypatch):
    from attnlab import cli

    monkeypatch.setattr(cli.out, "width", 300)
    out = tmp_path / "res"
    r = runner.invoke(app, ["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", str(out), "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "8 cells in 1 buckets" in r.output and "dry run" in r.output and "MB" in r.output
    assert "[data] name=jiang2024" in r.output  # the resolved spec
    assert "estimated wall time: ≈ " in r.output and "compile ≈ " in r.output  # from a calibration
    assert not out.exists()
    r = runner.invoke(app, ["reproduce", "jiang2024-fig1", "--scale", "smoke", "--dry-run", "--set", "reps=100000000"])
    assert r.exit_code == 2 and "more than max_cells" in r.output
    spec = tmp_path / "g.toml"
    spec.write_text(
        '[data]\nname = "jiang2024"\nM = 4\nd = 8\nN = [4, 8]\n[model]\nname = "jiang2024"\nd_h = 4\nd_v = 4\n'
    )
    r = runner.invoke(app, ["sweep", str(spec), "--out", str(out), "--dry-run", "--no-estimate"])
    assert r.exit_code == 0 and "2 cells in 1 buckets" in r.output and not out.exists(), r.output
    assert "estimated wall time" not in r.output


def test_a_narrow_terminal_lists_claims_without_breaking_words(smoke, monkeypatch):
    """At 80 columns each claim is a block whose lines wrap at spaces: no identifier is cut."""
    run = smoke("jiang2024-fig3")
    assert max(map(len, run.output.splitlines())) <= 80
    assert "median_onset_attention: " in run.output and "threshold_1.25/M: " in run.output  # whole words
    assert "measured: " in run.output and "rule: " in run.output


def test_reproduce_all_plans_every_id_and_refuses_sets():
    r = runner.invoke(app, ["reproduce", "all", "--scale", "smoke", "--dry-run", "--no-estimate"])
    assert r.exit_code == 0, r.output
    from attnlab.experiments import registry

    # every id but the one whose data only a user can give (IMDB), which is skipped, saying how to get it
    assert r.output.count("dry run") == len(registry()) - 1
    assert "wu2023-imdb-gram: skipped — IMDB not found" in r.output and "data.imdb_dir" in r.output
    r = runner.invoke(app, ["reproduce", "all", "--set", "reps=2"])
    assert r.exit_code == 2 and "--set: applies to one experiment's fields" in r.output
    r = runner.invoke(
        app, ["reproduce", "all", "--scale", "smoke", "--only", "jiang2024", "--dry-run", "--no-estimate"]
    )
    assert r.exit_code == 0 and r.output.count("dry run") == sum(i.startswith("jiang2024-") for i in registry())
    r = runner.invoke(app, ["reproduce", "all", "--only", "li2024"])
    assert r.exit_code == 2 and "--only: no experiment of 'li2024'; papers: jiang2024, li2023, wu2023" in r.output
    r = runner.invoke(app, ["reproduce", "jiang2024-fig1", "--only", "jiang2024"])
    assert r.exit_code == 2 and "give all as the id" in r.output


def test_reproduce_all_resumes_each_id_and_writes_an_index_and_a_summary(smoke, tmp_path):
    """The shared smoke runs copied in as a previous ``reproduce all`` left them: the rerun
    trains nothing, rebuilds every verdict and writes one index and one summary over them."""
    from attnlab.experiments import registry

    ids = [i for i in registry() if i.startswith("jiang2024-")]
    for i in ids:
        shutil.copytree(smoke(i).out, tmp_path / i)
    r = runner.invoke(
        app, ["reproduce", "all", "--scale", "smoke", "--only", "jiang2024", "--out", str(tmp_path), "--quiet"]
    )
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [row["id"] for row in summary["ids"]] == ids and summary["failed"] == []
    assert all(row["trained_now"] == 0 and row["cells"] == smoke(row["id"]).verdict["cells"] for row in summary["ids"])
    for row in summary["ids"]:
        claims = smoke(row["id"]).verdict["claims"]
        assert sum(row[o] for o in ("pass", "fail", "inconclusive", "descriptive")) == len(claims)
    index = (tmp_path / "index.html").read_text()
    assert all(f'href="{i}/report.html"' in index for i in ids)
    assert f"all (smoke): {len(ids)} experiments" in r.output


def test_reproduce_all_runs_ids_in_processes_and_reports_the_one_that_failed(smoke, tmp_path, monkeypatch):
    """``--jobs 2``: each id in a child process; one whose store was written by other code fails
    there, is named with its error and log, and the others still land in the summary and index.
    Each child gets half the chunk workers this process would have."""
    from attnlab.engine.executors import default_workers
    from attnlab.experiments import registry

    monkeypatch.delenv("ATTNLAB_WORKERS")
    workers = max(1, default_workers() // 2)

    ids = [i for i in registry() if i.startswith("jiang2024-")]
    for i in ids:
        shutil.copytree(smoke(i).out, tmp_path / i)
    manifest = tmp_path / ids[1] / "store.json"
    manifest.write_text(manifest.read_text().replace('"jax": "', '"jax": "0.0.1-'))
    r = runner.invoke(
        app,
        ["reproduce", "all", "--scale", "smoke", "--only", "jiang2024", "--out", str(tmp_path), "--jobs", "2"],
    )
    assert r.exit_code == 1, r.output
    assert f"error: {ids[1]}: exit 2: " in r.output and "jax" in r.output and f"logs/{ids[1]}.log" in r.output
    assert f"1 experiment(s) did not run: {ids[1]}" in r.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [row["id"] for row in summary["ids"]] == [ids[0], ids[2]] and summary["failed"] == [ids[1]]
    assert summary["jobs"] == 2 and all(row["trained_now"] == 0 for row in summary["ids"])
    assert json.loads((tmp_path / ids[0] / "verdict.json").read_text())["workers"] == workers
    index = (tmp_path / "index.html").read_text()
    assert f'href="{ids[0]}/report.html"' in index and f'href="{ids[1]}/report.html"' not in index
    for args, message in [
        (["--jobs", "0"], "--jobs: must be at least 1, got 0"),
        (["--jobs", "2", "--executor", "ray"], "the ids' processes share one Ray cluster, named by RAY_ADDRESS"),
    ]:
        r = runner.invoke(app, ["reproduce", "all", "--scale", "smoke", "--out", str(tmp_path / "x"), *args])
        assert r.exit_code == 2 and message in r.output, r.output
    r = runner.invoke(app, ["reproduce", "jiang2024-fig3", "--jobs", "2"])
    assert r.exit_code == 2 and "--jobs: applies to `reproduce all`" in r.output
