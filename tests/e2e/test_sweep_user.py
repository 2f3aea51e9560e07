"""User-defined grids (``attnlab sweep``), ``attnlab query`` and the Python API, on the three
example specs in examples/.

Each example runs once per session (shrunk by --set overrides to 20 steps); resume, query and
load read those runs back. Bad specs fail before anything is trained or written, so they cost
no compile."""

import csv
import io
import json
import os
import runpy
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import attnlab
from attnlab import parts
from attnlab.cli import app
from attnlab.errors import AttnlabError
from attnlab.experiments import sweep as S
from attnlab.experiments import sweep_spec, sweep_tables
from helpers import ROOT, use_part

runner = CliRunner()
EXAMPLES = ROOT / "examples"
SMALL = ["--set", "train.max_steps=20"]
# example -> (extra overrides, grid points, seeds, axes, figures)
CASES = {
    "jiang2024_lr_init": (
        ["--set", "seeds=1"],
        8,
        1,
        ["model.init_scale", "train.lr"],
        {"sweep_metrics", "sweep_probes"},
    ),
    "jiang2024_data_li2023_vit": (
        ["--set", "data.mu=0.5,4.5", "--set", "data.N=4,8"],
        4,
        2,
        ["data.mu", "data.N"],
        {"sweep_metrics", "sweep_probes"},
    ),
    "li2023_data_wu2023_encoder": (
        ["--set", "data.alpha_star=0.2,0.6", "--set", "seeds=1"],
        4,
        1,
        ["data.alpha_star", "train.lr"],
        {"sweep_metrics", "sweep_probes"},
    ),
}


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def sweep_args(name, out, *extra):
    return ["sweep", EXAMPLES / f"{name}.toml", "--out", out, "--quiet", *SMALL, *CASES[name][0], *extra]


# the notebook's own grid directory under its output root: the notebook resumes that run
NOTEBOOK_DIRS = {"jiang2024_lr_init": "lr-init"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each example run once: name -> (out, CLI result). The directory names have brackets and a
    quote, which DuckDB must not read as a glob."""
    root = tmp_path_factory.mktemp("sweeps") / "it's [1]"
    done = {}
    for name in CASES:
        out = root / NOTEBOOK_DIRS.get(name, f"{name} [2]")
        done[name] = (out, invoke(*sweep_args(name, out)))
    return done


# ---------------------------------------------------------------- the examples


@pytest.mark.parametrize("name", list(CASES))
def test_each_example_runs_and_reports(runs, name):
    out, r = runs[name]
    assert r.exit_code == 0, r.output
    _, points, seeds, axes, figures = CASES[name]
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["experiment"] == "sweep" and verdict["claims"] == []  # a user grid states no claims
    assert verdict["cells"] == verdict["cells_trained_now"] == points * seeds
    assert verdict["command"].startswith("attnlab sweep ") and "train.max_steps=20" in verdict["command"]
    table = pq.read_table(out / "results.parquet").to_pydict()
    assert len(table["id"]) == points * seeds and len(set(table["id"])) == points * seeds
    assert len(set(zip(*(table[a] for a in axes), strict=True))) == points
    assert set(table["train.max_steps"]) == {20}
    assert {p.stem for p in out.glob("*.png")} == figures and {p.stem for p in out.glob("*.pdf")} == figures
    html = (out / "report.html").read_text()
    spec = sweep_spec.Spec.model_validate_json((out / "spec.json").read_text())
    assert spec.title in html and "Results per grid point" in html
    text = " ".join(r.output.split())  # the terminal table wraps
    assert f"{points * seeds} cells ({points * seeds} trained now)" in text and "report.html" in text


def test_composed_parts_are_the_ones_asked_for(runs):
    """Each example trains the composition it names, with that model's own parameters."""
    for name, data, model in (
        ("jiang2024_data_li2023_vit", "jiang2024", "li2023-vit"),
        ("li2023_data_wu2023_encoder", "li2023", "wu2023"),
    ):
        t = pq.read_table(runs[name][0] / "results.parquet").to_pydict()
        assert set(t["data.name"]) == {data} and set(t["model.name"]) == {model}
    t = pq.read_table(runs["li2023_data_wu2023_encoder"][0] / "results.parquet").to_pydict()
    assert "model.d_m" in t and "data.alpha_star" in t
    assert all(len(k) == len(s) == 3 for k, s in zip(t["trace_kernel_drift"], t["trace_step"], strict=True))


def test_grid_table_is_the_mean_and_std_over_seeds(runs):
    out = runs["jiang2024_data_li2023_vit"][0]
    title, columns, rows, _ = sweep_tables.table_of(out)
    t = pq.read_table(out / "results.parquet").to_pydict()
    assert columns[:3] == ["data.mu", "data.N", "cells"]
    for row in rows:
        got = dict(zip(columns, row, strict=True))
        sel = [i for i in range(len(t["id"])) if t["data.mu"][i] == got["data.mu"] and t["data.N"][i] == got["data.N"]]
        losses = [t["test_loss"][i] for i in sel if t["status"][i] != "diverged"]
        assert got["cells"] == len(sel) == 2
        assert got["test_loss mean"] == pytest.approx(np.mean(losses))
        assert got["test_loss std"] == pytest.approx(np.std(losses, ddof=1))
        assert got["converged"] + got["cap"] + got["diverged"] == 2


# ---------------------------------------------------------------- bad specs

GOOD = """title = "t"
[data]
name = "jiang2024"
M = 4
d = 8
N = [4, 8]
n_test = 10
[model]
name = "jiang2024"
d_h = 4
d_v = 4
[train]
max_steps = 5
"""


@pytest.mark.parametrize(
    "text, needle",
    [
        ("[data\nname = 1\n", "malformed TOML"),
        (b"title = 't'\xff\n", "malformed TOML"),
        (GOOD.replace('name = "jiang2024"\nM', 'name = "mnist"\nM'), "data.name: unknown data 'mnist'; valid: "),
        (GOOD.replace('name = "jiang2024"\nd_h', 'name = "gpt"\nd_h'), "model.name: unknown model 'gpt'"),
        (GOOD.replace("d_h = 4", "d_hh = 4"), "model.d_hh: unknown field (did you mean d_h?); valid: d_h"),
        (GOOD.replace("max_steps = 5", "lr = 'fast'"), "train.lr: Input should be a valid number"),
        (GOOD.replace("N = [4, 8]", "N = [4, -8]"), "data.N: Input should be greater than 0"),
        (GOOD.replace("n_test = 10", "n_test = -10"), "data.n_test: Input should be greater than 0"),
        (GOOD.replace("M = 4", "M = 'four'"), "data.M: Input should be a valid integer"),
        ("widths = 3\n" + GOOD, "unknown field(s) widths"),
        (GOOD + "widths = 3\n", "train.widths: unknown field; valid: loss"),
        ("lr = 0.1\n" + GOOD, "unknown field(s) lr"),  # part fields live in their table
        (GOOD.replace("[model]", "model = 3\n[modelx]"), "unknown field(s)"),
        ('data = "jiang2024"\n', "data must be a table ([data])"),
        ("[model]\nname = 'jiang2024'\n", "data.name: missing"),
        (
            GOOD.replace('name = "jiang2024"\nd_h', 'name = ["jiang2024", "wu2023"]\nd_h'),
            "model.d_h: not a field of every model of model.name (jiang2024, wu2023)",
        ),
        ("seeds = 0\n" + GOOD, "seeds: the number of seed blocks must be ≥ 1"),
        ("seeds = [0, -1]\n" + GOOD, "seeds: a list of seeds must hold distinct values ≥ 0"),
        ("seeds = [1, 2]\nseed = 3\n" + GOOD, "seed: a list of seeds gives the seed values itself"),
        (GOOD + "[report]\nx = 'lr'\n", "report.x: 'lr' is not a grid axis; grid axes: data.N"),
        (GOOD + "[report]\ny = 'N'\n", "report.y: needs another grid axis"),
        (GOOD + "[report]\nnope = 1\n", "report.nope: Extra inputs are not permitted"),
        (GOOD + "[report]\nmetrics = ['accuracy']\n", "report.metrics: unknown 'accuracy'; valid: train_loss"),
        (GOOD + "[report]\nprobes = ['train_loss']\n", "report.probes: nothing is recorded over time"),
        (
            GOOD.replace("max_steps = 5", "max_steps = 5\nlog_every = 1") + "[report]\nprobes = ['attn']\n",
            "report.probes: unknown 'attn'; recorded: train_loss",
        ),
        (
            GOOD.replace("max_steps = 5", "loss = 'squared'") + "[report]\nmetrics = ['test_error']\n",
            "report.metrics: unknown 'test_error'",
        ),
    ],
)
def test_bad_spec_gives_one_clear_error_and_writes_nothing(tmp_path, text, needle):
    spec = tmp_path / "bad.toml"
    spec.write_bytes(text if isinstance(text, bytes) else text.encode())
    r = invoke("sweep", spec, "--out", tmp_path / "res", "--quiet")
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error: ") and needle in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output
    assert isinstance(r.exception, SystemExit)
    assert not (tmp_path / "res").exists()


def test_missing_spec_file(tmp_path):
    r = invoke("sweep", tmp_path / "nope.toml", "--out", tmp_path / "res")
    assert r.exit_code == 2 and "nope.toml: cannot read" in r.output


def test_bad_set_and_executor(tmp_path):
    spec = tmp_path / "g.toml"
    spec.write_text(GOOD)
    for args, needle in (
        (["--set", "width=3"], "--set width: unknown field"),
        (["--set", "seeds=1,-2"], "seeds: a list of seeds must hold distinct values"),
        (["--executor", "spark"], "--executor: unknown 'spark'"),
    ):
        r = invoke("sweep", spec, "--out", tmp_path / "res", *args)
        assert r.exit_code == 2 and needle in r.output, r.output
    assert not (tmp_path / "res").exists()


def test_probe_set_that_does_not_fit_the_composition_is_caught_before_training(tmp_path):
    """The jiang2024 probes read the jiang2024 token layout; on li2023 data they cannot run."""
    spec = {
        "data": {"name": "li2023", "M": 6, "d": 8, "L": 10, "N": 4, "n_test": 10},
        "model": {"name": "wu2023", "d_m": 8},
        "train": {"log_every": 1, "probes": "jiang2024", "max_steps": 2},
    }
    with pytest.raises(
        AttnlabError, match="train.probes: the probe set 'jiang2024' does not fit data 'li2023' into model 'wu2023'"
    ):
        attnlab.sweep(spec, tmp_path / "res", progress=False)
    assert not (tmp_path / "res").exists()


def _fake_model(name, apply):
    """A model with its own fixed input width d_in (it ignores the data's d)."""

    class Hparams(parts.PartConfig):
        d_in: int = 5

    return parts.Model(
        name=name,
        version=1,
        config=Hparams,
        init=lambda key, hp, dtype: {"w": jnp.zeros(hp.d_in, dtype)},
        apply=apply,
        trainable=lambda hp: ("w",),
        groups=lambda hp: {"w": ("w",)},
        sizes=lambda hp: (hp.d_in, hp.d_in),
    )


@pytest.mark.parametrize(
    "apply, needle",
    [
        (
            lambda params, x, hp: ((parts.tokens(x)[0] @ params["w"]).mean(), {}),
            "data 'jiang2024' into model 'fixed': the shapes do not fit (TypeError: dot_general",
        ),
        (
            lambda params, x, hp: (parts.tokens(x)[0].mean(0)[: params["w"].shape[0]], {}),
            "data 'jiang2024' into model 'fixed': the model gives outputs of shape (4, 5) on the training set of "
            "shape (4,); the trainer needs one number per sample",
        ),
    ],
)
def test_a_shape_mismatch_between_data_and_model_is_one_clear_error(tmp_path, monkeypatch, apply, needle):
    use_part(monkeypatch, _fake_model("fixed", apply))
    spec = tmp_path / "g.toml"
    spec.write_text(
        GOOD.replace("N = [4, 8]", "N = 4").replace('name = "jiang2024"\nd_h = 4\nd_v = 4', 'name = "fixed"')
    )
    r = invoke("sweep", spec, "--out", tmp_path / "res", "--quiet")
    assert r.exit_code == 2, r.output
    assert needle in r.output, r.output
    assert not (tmp_path / "res").exists()


# ---------------------------------------------------------------- layout and analysis (no training)


def spec_of(**report):
    spec = S.UserGrid.of(GOOD.replace("max_steps = 5", "lr = [0.1, 1.0]")).spec()
    return spec.model_copy(update={"report": sweep_spec.ReportSpec(**report)})


def test_layout_defaults_and_short_names():
    lay = sweep_spec.layout(spec_of())
    assert (lay.x, lay.y, lay.hue, lay.panels) == ("data.N", None, "train.lr", ())
    lay = sweep_spec.layout(spec_of(x="lr", y="N"))
    assert (lay.x, lay.y, lay.hue, lay.panels) == ("train.lr", "data.N", None, ())
    with pytest.raises(AttnlabError, match="report.hue: heatmaps"):
        sweep_spec.layout(spec_of(y="N", hue="lr"))


def test_diverged_cells_are_counted_not_averaged():
    cols = {
        "id": np.array(["a", "b", "c", "d"], object),
        "data.N": np.array([4, 4, 8, 8]),
        "train.lr": np.array([0.1, 0.1, 0.1, 0.1]),
        "test_loss": np.array([1.0, 3.0, 2.0, np.inf]),
        "test_error": np.array([0.1, 0.3, 0.25, 0.5]),
        "status": np.array(["converged", "cap", "converged", "diverged"], object),
    }
    spec = S.UserGrid.of(GOOD.replace("max_steps = 5", "lr = [0.1]")).spec()
    analysis = S.UserGrid().analyse(cols, spec)
    assert analysis.claims == [] and analysis.summary["status"] == {"converged": 2, "cap": 1, "diverged": 1}
    ((_, columns, rows),) = analysis.tables
    by_n = {r[0]: dict(zip(columns, r, strict=True)) for r in rows}
    assert by_n[4]["test_loss mean"] == 2.0 and by_n[4]["test_loss std"] == pytest.approx(np.sqrt(2))
    assert by_n[8]["test_loss mean"] == 2.0 and by_n[8]["test_loss std"] is None  # one finite cell
    assert by_n[8]["diverged"] == 1 and "1 of 4 cells diverged" in analysis.notes[0]
    assert analysis.summary["lowest mean per metric"]["test_error"]["at"] == {"data.N": 4, "train.lr": 0.1}


def test_seed_lists_and_blocks_give_distinct_cells():
    exp = S.UserGrid.of(GOOD)
    blocks = [c for c in exp.cells(exp.spec(sets=["seeds=3"])) if c["data.N"] == 4]
    values = [c for c in exp.cells(exp.spec(sets=["seeds=0,5"])) if c["data.N"] == 4]
    assert [(c["seed"], c["block"]) for c in blocks] == [(0, 0), (0, 1), (0, 2)]
    assert [(c["seed"], c["block"]) for c in values] == [(0, 0), (5, 0)]
    assert blocks[0] == values[0]  # seeds = [0] is the first block of seeds = n


# ---------------------------------------------------------------- query


def query(out, *args):
    return invoke("query", out, *args)


def test_query_prints_a_table_and_csv(runs):
    out, _ = runs["jiang2024_lr_init"]
    r = query(out, 'SELECT count(*) AS n_cells, count(DISTINCT "train.lr") AS n_lr FROM results')
    assert r.exit_code == 0, r.output
    assert "n_cells" in r.output and "4" in r.output and "1 row(s)" in r.output

    sql = 'SELECT "train.lr" AS lr, avg(test_loss) AS loss, count(*) AS n FROM results GROUP BY 1 ORDER BY 1'
    r = query(out, sql, "--csv")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.output)))
    t = pq.read_table(out / "results.parquet").to_pydict()
    assert [float(x["lr"]) for x in rows] == [0.03, 0.1, 0.3, 1.0]
    for x in rows:
        want = np.mean([v for v, lr in zip(t["test_loss"], t["train.lr"], strict=True) if lr == float(x["lr"])])
        assert float(x["loss"]) == pytest.approx(want, rel=1e-12) and int(x["n"]) == 2


def test_query_parts_and_lists(runs):
    out, _ = runs["jiang2024_lr_init"]
    r = query(out, "SELECT count(DISTINCT id) AS n FROM parts", "--csv")
    assert r.exit_code == 0 and r.output.splitlines() == ["n", "8"]
    r = query(out, "SELECT trace_step FROM results LIMIT 1", "--csv")
    assert json.loads(next(csv.reader(io.StringIO(r.output.splitlines()[1])))[0]) == [0, 10, 20]


@pytest.mark.parametrize(
    "sql, needle",
    [
        ("SELEC 1", "SQL: Parser Error"),
        ("SELECT nope FROM results", 'SQL: Binder Error: Referenced column "nope"'),
        ("SELECT * FROM nothing", "SQL: Catalog Error"),
    ],
)
def test_a_sql_error_is_one_clear_message(runs, sql, needle):
    out, _ = runs["jiang2024_lr_init"]
    r = query(out, sql)
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error: SQL: ") and needle in r.output and "Traceback" not in r.output


def test_query_is_read_only(runs, tmp_path):
    """No statement can write or read a file: COPY … TO over the stored results, a read of another
    file and ATTACH are one clear error, and the results stay byte for byte what they were."""
    out, _ = runs["jiang2024_lr_init"]
    before = (out / "results.parquet").read_bytes()
    other = tmp_path / "x.csv"
    other.write_text("a\n1\n")
    for sql in (
        f"COPY (SELECT 1 AS a) TO '{out / 'results.parquet'}' (FORMAT parquet)",
        f"COPY results TO '{tmp_path / 'copy.parquet'}'",
        f"SELECT * FROM read_csv('{other}')",
        f"ATTACH '{tmp_path / 'db.duckdb'}'",
        "SET enable_external_access = true",
    ):
        r = query(out, sql)
        assert r.exit_code == 2 and r.output.startswith("error: SQL: ") and "Traceback" not in r.output, (sql, r.output)
    assert "read-only" in query(out, f"COPY results TO '{tmp_path / 'copy.parquet'}'").output
    assert (out / "results.parquet").read_bytes() == before and not (tmp_path / "copy.parquet").exists()
    assert not (tmp_path / "db.duckdb").exists()
    r = query(out, "CREATE TABLE t AS SELECT 1 AS a; SELECT a FROM t", "--csv")  # in memory: harmless
    assert r.exit_code == 0 and r.output.splitlines() == ["a", "1"]


def test_query_needs_a_results_directory(tmp_path):
    r = query(tmp_path / "nope", "SELECT 1")
    assert r.exit_code == 2 and "not a results directory (does not exist)" in r.output
    r = query(tmp_path, "SELECT 1")
    assert r.exit_code == 2 and "no results.parquet and no parts" in r.output


# ---------------------------------------------------------------- API


def test_load_gives_pandas_or_arrow(runs, monkeypatch):
    out, _ = runs["li2023_data_wu2023_encoder"]
    table = attnlab.load(out, format="arrow")
    assert isinstance(table, pa.Table) and table.equals(pq.read_table(out / "results.parquet"))
    df = attnlab.load(out)
    assert len(df) == table.num_rows and list(df.columns) == table.column_names
    with pytest.raises(AttnlabError, match="format: unknown 'excel'"):
        attnlab.load(out, format="excel")
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "pandas" else real(n, *a))
    with pytest.raises(AttnlabError, match="format='pandas' needs pandas"):
        attnlab.load(out)
    assert attnlab.load(out, format="arrow").num_rows == table.num_rows


def test_load_of_a_directory_without_results(tmp_path):
    with pytest.raises(AttnlabError, match="no results.parquet"):
        attnlab.load(tmp_path)


def test_a_spec_as_toml_text_or_dict_is_the_same_grid_as_the_file():
    import tomllib

    from attnlab.engine.grid import cell_id

    path = EXAMPLES / "jiang2024_lr_init.toml"
    ids = []
    for source in (path, str(path), path.read_text(), tomllib.loads(path.read_text())):
        exp = S.UserGrid.of(source)
        ids.append([cell_id(c) for c in exp.cells(exp.spec(sets=["train.max_steps=20"]))])
    assert len(ids[0]) == 16 and all(i == ids[0] for i in ids)


def test_import_attnlab_is_cheap_and_sweep_stays_callable():
    code = (
        "import sys, attnlab; assert 'jax' not in sys.modules and 'duckdb' not in sys.modules; "
        "import attnlab.engine.store; assert callable(attnlab.sweep); print(sorted(attnlab.__all__))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['load', 'query', 'reproduce', 'sweep', 'to_xarray']"


def test_notebook_resumes_the_example_grid_and_runs(runs, tmp_path, monkeypatch):
    """The notebook's first grid is the lr × init example with the same overrides, into the same
    directory: a second run of a finished grid trains nothing and gives the same table."""
    out, _ = runs["jiang2024_lr_init"]
    before = pq.read_table(out / "results.parquet")
    monkeypatch.setenv("ATTNLAB_NOTEBOOK_OUT", str(out.parent))
    monkeypatch.chdir(tmp_path)
    ns = runpy.run_path(str(EXAMPLES / "notebook.py"))
    assert ns["verdict"]["cells"] == 8 and ns["verdict"]["cells_trained_now"] == 0  # resumed
    assert pq.read_table(out / "results.parquet").equals(before) and len(ns["df"]) == 8
    assert len(ns["best"]) == 3 and (out.parent / "train_loss.png").is_file()
    assert ns["fig1"]["experiment"] == "jiang2024-fig1" and ns["fig1"]["claims"]
    assert os.path.isfile(out.parent / "fig1" / "report.html")


def test_tidy_results_long_traces_polars_and_xarray(runs):
    """load(traces="long"): one row per cell × logged step, traces as numbers; polars where pandas
    is; to_xarray: the grid's axes, block and rep (and step for traces) as dimensions, each value
    where the wide table has it."""
    import polars

    out, _ = runs["jiang2024_lr_init"]
    wide = attnlab.load(out)
    long = attnlab.load(out, traces="long")
    assert len(long) == sum(len(s) for s in wide["trace_step"]) and "step" in long and "trace_step" not in long
    first = wide.iloc[0]
    rows = long[long["id"] == first["id"]]
    assert rows["step"].tolist() == list(first["trace_step"])
    assert rows["trace_train_loss"].tolist() == pytest.approx(list(first["trace_train_loss"]), rel=0, abs=0)
    pl = attnlab.load(out, format="polars", traces="long")
    assert isinstance(pl, polars.DataFrame) and pl.shape == long.shape
    ds = attnlab.to_xarray(out)
    axes = [a for a in ds.attrs["dims"] if a not in ("block", "rep")]
    assert ds.attrs["layout"] == "grid" and {"train.lr", "model.init_scale"} <= set(axes)
    assert set(ds["trace_train_loss"].dims) == {*ds.attrs["dims"], "step"}
    for _, c in wide.iterrows():  # every cell's numbers are where its coordinates say
        at = {a: c[a] for a in ds.attrs["dims"]}
        assert float(ds["test_loss"].sel(at)) == c["test_loss"]
        assert ds["trace_train_loss"].sel(at).values.tolist() == list(c["trace_train_loss"])
    with pytest.raises(AttnlabError, match="traces: unknown 'tall'"):
        attnlab.load(out, traces="tall")


def test_a_binder_error_on_a_namespaced_column_says_how_to_quote_it(runs):
    out, _ = runs["jiang2024_lr_init"]
    r = query(out, "SELECT train.lr, avg(test_loss) FROM results GROUP BY 1")
    assert r.exit_code == 2 and 'namespaced columns need double quotes: "train.lr"' in r.output


def test_axes_are_labelled_with_the_fields_meanings():
    from attnlab.experiments.sweep_plots import axis_label

    cols = {"data.name": np.array(["jiang2024"]), "model.name": np.array(["jiang2024"])}
    assert axis_label(cols, "train.lr") == "learning rate (train.lr)"
    assert axis_label(cols, "data.mu") == "signal norm ‖μ‖ (data.mu)"
    assert axis_label(cols, "seed") == "seed" and axis_label(cols, "data.no_such_field") == "data.no_such_field"
    assert all(len(axis_label(cols, f"model.{f}")) <= 38 + len(f) + 9 for f in ("init_scale", "d_h", "tau"))


def _same(a, b) -> bool:
    """Equal, or both missing (NaN / None)."""
    missing = lambda x: x is None or (isinstance(x, float) and np.isnan(x))  # noqa: E731
    return (missing(a) and missing(b)) or a == b


@pytest.mark.parametrize("exp_id", ["jiang2024-fig3", "li2023-fig4", "wu2023-fig1"])
def test_tidy_forms_round_trip_each_papers_results(smoke, exp_id):
    """Every stored value is in to_xarray where its cell's coordinates (or its cell index, for a
    design that is not a full grid) say, and in traces="long" at its step; NaN only where the
    stored value is missing."""
    out = smoke(exp_id).out
    wide = attnlab.load(out)
    ds = attnlab.to_xarray(out)
    traces = [c for c in wide.columns if c.startswith("trace_") and c != "trace_step"]
    metrics = [v for v in ds.data_vars if not v.startswith("trace_") and v not in ("status", "id")]
    assert metrics
    for i, row in wide.iterrows():
        at = {d: row[d] for d in ds.attrs["dims"]} if ds.attrs["layout"] == "grid" else {"cell": i}
        cell = ds.sel(at)
        assert all(_same(cell[m].item(), row[m]) for m in metrics), (exp_id, i)
        for t in traces:
            got = cell[t].sel(step=list(row["trace_step"])).values.tolist()
            assert all(_same(a, b) for a, b in zip(got, row[t], strict=True)), (exp_id, t)
    if traces:
        long = attnlab.load(out, traces="long")
        assert len(long) == sum(len(s) for s in wide["trace_step"])
        for _, row in wide.iloc[[0, -1]].iterrows():
            mine = long[long["id"] == row["id"]]
            assert mine["step"].tolist() == list(row["trace_step"])
            assert all(all(_same(a, b) for a, b in zip(mine[t], row[t], strict=True)) for t in traces)
