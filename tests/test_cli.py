"""The command line contract: list, reproduce, --set, and one clear error for bad input."""

import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from attnlab.cli import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_list_prints_every_experiment():
    r = invoke("list")
    assert r.exit_code == 0
    assert "jiang2024-fig1" in r.output and "jiang2024-fig3" in r.output


@pytest.mark.parametrize("exp", ["jiang2024-fig1", "jiang2024-fig3"])
def test_reproduce_smoke_writes_the_contract_files(tmp_path, exp):
    out = tmp_path / "res"
    r = invoke("reproduce", exp, "--scale", "smoke", "--out", out, "--quiet")
    assert r.exit_code == 0, r.output
    for name in ("results.parquet", "verdict.json", "report.html"):
        assert (out / name).is_file()
    assert list(out.glob("*.png")) and list(out.glob("*.pdf"))
    v = json.loads((out / "verdict.json").read_text())
    assert {"experiment", "scale", "cells", "runtime_s", "claims"} <= set(v)
    assert v["experiment"] == exp and v["scale"] == "smoke"
    for c in v["claims"]:
        assert {"id", "statement", "measured", "expected", "pass"} <= set(c)
        assert isinstance(c["pass"], bool)
    table = pq.read_table(out / "results.parquet")
    assert table.num_rows == v["cells"]
    assert set(table.column("status").to_pylist()) <= {"converged", "cap", "diverged"}

    # a rerun into the same directory resumes: nothing is trained again, same table
    r2 = invoke("reproduce", exp, "--scale", "smoke", "--out", out, "--quiet")
    assert r2.exit_code == 0, r2.output
    assert json.loads((out / "verdict.json").read_text())["cells_trained_now"] == 0
    assert pq.read_table(out / "results.parquet").equals(table)


def test_set_overrides_axes_and_fields(tmp_path):
    out = tmp_path / "res"
    r = invoke("reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", out, "--quiet",
               "--set", "N=2,4", "--set", "mu=5", "--set", "reps=1", "--set", "lr=0.05")  # fmt: skip
    assert r.exit_code == 0, r.output
    t = pq.read_table(out / "results.parquet").to_pydict()
    assert sorted(t["N"]) == [2, 4] and set(t["mu"]) == {5.0} and set(t["lr"]) == {0.05}


@pytest.mark.parametrize(
    "args, needle",
    [
        (["reproduce", "no-such-exp"], "experiment: unknown id 'no-such-exp'"),
        (["reproduce", "jiang2024-fig1", "--scale", "huge"], "--scale: unknown 'huge'"),
        (["reproduce", "jiang2024-fig1", "--set", "width=3"], "--set width: unknown field; valid:"),
        (["reproduce", "jiang2024-fig1", "--set", "N=-2"], "N.0: Input should be greater than 0"),
        (["reproduce", "jiang2024-fig1", "--set", "N=3"], "N: values must be even"),
        (["reproduce", "jiang2024-fig1", "--set", "d=ten"], "d: Input should be a valid integer"),
        (["reproduce", "jiang2024-fig1", "--set", "lr=0.1,0.2"], "--set lr: takes one value"),
        (["reproduce", "jiang2024-fig1", "--set", "mu"], "expected name=value"),
        (["reproduce", "jiang2024-fig3", "--set", "regime=neutral"], "regime: unknown regime"),
        (["reproduce", "jiang2024-fig1", "--executor", "spark"], "--executor: unknown 'spark'"),
        (["reproduce", "jiang2024-fig1", "--set", "mu=inf"], "mu.0: Input should be a finite number"),
        (["reproduce", "jiang2024-fig1", "--set", "loss_threshold=nan"], "loss_threshold: Input should be a finite"),
        (["reproduce", "jiang2024-fig3", "--set", "N_benign=5"], "N_benign: must be even"),
    ],
)
def test_bad_input_gives_one_clear_error(tmp_path, args, needle):
    extra = [] if "--scale" in args else ["--scale", "smoke"]
    r = invoke(*args, "--out", tmp_path / "res", *extra)
    assert r.exit_code == 2, r.output
    assert needle in r.output
    assert isinstance(r.exception, SystemExit)  # a clean exit, not an escaped exception


def test_bad_input_leaves_existing_results_untouched(tmp_path):
    out = tmp_path / "res"
    assert invoke("reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", out, "--quiet").exit_code == 0
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    r = invoke("reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", out, "--set", "N=-4")
    assert r.exit_code == 2
    after = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert before == after


def test_toml_config_sets_fields(tmp_path):
    cfg = tmp_path / "grid.toml"
    cfg.write_text("N = [2, 4]\nmu = [5.0]\nreps = 1\nsigma_tilde_p = 2.0\n")
    out = tmp_path / "res"
    r = invoke("reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", out, "--quiet", "--config", cfg,
               "--set", "reps=2")  # fmt: skip
    assert r.exit_code == 0, r.output
    t = pq.read_table(out / "results.parquet").to_pydict()
    assert sorted(set(t["N"])) == [2, 4] and set(t["sigma_tilde_p"]) == {2.0} and sorted(set(t["rep"])) == [0, 1]


@pytest.mark.parametrize(
    "text, needle",
    [
        ("N = [2, 4\n", "malformed TOML"),
        ("width = 3\n", "unknown field(s) width"),
        ("N = [2, -4]\n", "N.1: Input should be greater than 0"),
        ("sigma_p = -0.2\n", "sigma_p: Input should be greater than 0"),
        (b"N = [2]\xff\n", "malformed TOML"),
    ],
)
def test_bad_toml_config(tmp_path, text, needle):
    cfg = tmp_path / "bad.toml"
    cfg.write_bytes(text if isinstance(text, bytes) else text.encode())
    r = invoke("reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", tmp_path / "res", "--config", cfg)
    assert r.exit_code == 2, r.output
    assert needle in r.output and isinstance(r.exception, SystemExit)


def test_out_must_be_a_directory(tmp_path):
    f = tmp_path / "file"
    f.write_text("keep me")
    r = invoke("reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", f)
    assert r.exit_code == 2 and "exists and is not a directory" in r.output
    assert f.read_text() == "keep me"
