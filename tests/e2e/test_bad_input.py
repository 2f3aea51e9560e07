"""Bad input across every command, table-driven: one clear message naming what is wrong, exit
status 2, no traceback, and nothing on disk lost or written. Plus fuzzing of the --set and spec
parsers: any input either parses or raises AttnlabError, never another exception.

(More cases live beside their commands: tests/e2e/test_cli.py for reproduce's fields and TOML configs,
tests/e2e/test_sweep_user.py for sweep specs, tests/e2e/test_report.py for report directories.)"""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from attnlab.cli import app
from attnlab.errors import AttnlabError
from attnlab.experiments import get
from attnlab.experiments.config import parse_sets
from attnlab.experiments.sweep import UserGrid

runner = CliRunner()
SWEEP_OK = '[data]\nname = "jiang2024"\nM = 4\nd = 8\nN = 4\n[model]\nname = "jiang2024"\nd_h = 4\nd_v = 4\n'


def _setup(tmp: Path, kind: str) -> Path:
    """A prepared situation; returns the path the command is pointed at."""
    if kind == "foreign":  # someone else's non-empty directory
        d = tmp / "mine"
        d.mkdir()
        (d / "thesis.tex").write_text("precious")
        return d
    if kind == "under-a-file":  # an output directory that cannot be created
        (tmp / "a-file").write_text("x")
        return tmp / "a-file" / "out"
    if kind == "empty-dir":
        (tmp / "empty").mkdir()
        return tmp / "empty"
    return tmp / "res"


CASES = [
    # (args with {out}/{spec}, setup, expected text)
    (
        ["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}"],
        "foreign",
        "not an attnlab results directory",
    ),
    (["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}"], "under-a-file", "cannot create"),
    (
        [
            "reproduce",
            "jiang2024-fig2",
            "--scale",
            "smoke",
            "--out",
            "{out}",
            "--set",
            "data.mnist_path=/nonexistent/mnist.pkl.gz",
        ],
        None,
        "MNIST not found",
    ),
    (
        [
            "reproduce",
            "li2023-fig5",
            "--scale",
            "smoke",
            "--out",
            "{out}",
            "--set",
            "data.dataset=cifar10",
            "--set",
            "data.cifar_dir=/nonexistent/cifar-10-batches-py",
        ],
        None,
        "CIFAR-10 not found",
    ),
    (
        ["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}", "--set", "train.fast=maybe"],
        None,
        "train.fast",
    ),
    (["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}", "--set", "seeds=0"], None, "seeds"),
    (
        ["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}", "--set", "train.max_steps=-1"],
        None,
        "train.max_steps",
    ),
    (["query", "{out}", "SELECT 1"], "empty-dir", "no results"),
    (["query", "{out}", "SELEC * FROM results"], "results", "SQL"),
    (["query", "{out}", "SELECT nope FROM results"], "results", "SQL"),
    (["report", "{out}"], "empty-dir", "verdict.json"),
    (["sweep", "{spec}", "--out", "{out}"], "spec:[data\nname=", "malformed TOML"),
    (
        ["sweep", "{spec}", "--out", "{out}"],
        "spec:" + SWEEP_OK.replace('"jiang2024"\nM', '"nope"\nM'),
        "data.name: unknown data 'nope'",
    ),
    (["sweep", "{spec}", "--out", "{out}"], "spec:" + SWEEP_OK.replace("N = 4", "N = -4"), "data.N"),
    (["sweep", "{spec}", "--out", "{out}"], "spec:" + SWEEP_OK.replace("d_h = 4", 'd_h = "wide"'), "model.d_h"),
    (["sweep", "{spec}", "--out", "{out}"], "spec:" + SWEEP_OK + "[train]\nlr = [0.1, -0.1]\n", "train.lr"),
    (["sweep", "{spec}", "--out", "{out}"], "spec:" + SWEEP_OK + "[train]\nwarp = 9\n", "train.warp"),
    (["sweep", "{spec}", "--out", "{out}"], "spec:" + SWEEP_OK + '[report]\nx = "data.nope"\n', "data.nope"),
    (["sweep", "/nonexistent/spec.toml", "--out", "{out}"], None, "spec.toml"),
    # one case per field class: zero, NaN, inf, wrong type, unknown name, unknown part, a list where one value goes
    (["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}", "--set", "model.d_h=0"], None, "model.d_h"),
    (["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}", "--set", "data.mu=nan"], None, "data.mu"),
    (["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}", "--set", "train.lr=inf"], None, "train.lr"),
    (["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}", "--set", "data.N=many"], None, "data.N"),
    (["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}", "--set", "model.d_hh=4"], None, "d_hh"),
    (
        ["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}", "--set", "model.name=nope"],
        None,
        "unknown model 'nope'",
    ),
    (["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}", "--set", "seed=1,2"], None, "seed"),
    (["reproduce", "nope", "--out", "{out}"], None, "unknown id 'nope'"),
    (["reproduce", "jiang2024-fig1", "--scale", "huge", "--out", "{out}"], None, "--scale: unknown 'huge'"),
    (["bench", "--suite", "nope"], None, "--suite: unknown 'nope'"),
    (["bench", "--cells", "0"], None, "--cells: must be ≥ 1"),
    (["bench", "--scale", "huge"], None, "--scale: unknown 'huge'"),
    (["audit", "jiang2024-fig1", "--sims", "0", "--out", "{out}"], None, "--sims: must be 1 to 10,000"),
    (["audit", "jiang2024-fig1", "--from", "{out}"], "empty-dir", "verdict.json"),
    (
        ["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}", "--set", "init_scal=16"],
        None,
        "--set init_scal: unknown field (did you mean init_scale?)",
    ),
    (
        ["sweep", "{spec}", "--out", "{out}"],
        "spec:" + SWEEP_OK + '[train]\nlr = "fast"\n[report]\nx = "train.lr"\n',
        "train.lr: Input should be a valid number",
    ),  # the value's own error, not [report]'s
    # sizes, before anything runs: empty axes, int32 range, the cell count, one cell's memory
    (
        ["sweep", "{spec}", "--out", "{out}"],
        "spec:" + SWEEP_OK.replace("N = 4", "N = []"),
        "data.N: an empty list; a grid axis needs at least one value",
    ),
    (
        [
            "reproduce",
            "jiang2024-fig1",
            "--scale",
            "smoke",
            "--out",
            "{out}",
            "--set",
            "train.max_steps=100000000000000",
        ],
        None,
        "max_steps: 100000000000000 does not fit an int32",
    ),
    (
        ["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}", "--set", "data.N=3000000000"],
        None,
        "N: 3000000000 does not fit an int32",
    ),
    (
        ["sweep", "{spec}", "--out", "{out}"],
        "spec:seeds = 1000000000\n" + SWEEP_OK,
        "the grid has 1,000,000,000 cells (1 points × 1,000,000,000 seed blocks × 1 reps), more than max_cells",
    ),
    (
        ["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}", "--set", "reps=100000000"],
        None,
        "--set max_cells=400000000",
    ),
    (
        ["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{out}", "--set", "data.N=1000000000"],
        None,
        "one cell needs ≈ 1.79e+03 GB (estimated from its shapes at data.N = 1,000,000,000), more than "
        "memory_budget_gb = 2",
    ),
]


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("ok") / "res"
    r = runner.invoke(
        app,
        [
            "reproduce",
            "jiang2024-fig1",
            "--scale",
            "smoke",
            "--out",
            str(out),
            "--quiet",
            "--set",
            "N=2",
            "--set",
            "mu=1.0",
            "--set",
            "reps=1",
        ],
    )
    assert r.exit_code == 0, r.output
    return out


@pytest.mark.parametrize("args, setup, needle", CASES)
def test_bad_input(tmp_path, results_dir, args, setup, needle):
    out, spec = tmp_path / "res", tmp_path / "spec.toml"
    if setup == "results":
        out = results_dir
    elif setup and setup.startswith("spec:"):
        spec.write_text(setup[len("spec:") :])
    elif setup:
        out = _setup(tmp_path, setup)
    before = {p: p.read_bytes() for p in [*tmp_path.rglob("*"), *Path(out).rglob("*")] if p.is_file()}
    r = runner.invoke(app, [a.format(out=out, spec=spec) for a in args])
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error: ") and "Traceback" not in r.output, r.output
    assert needle in r.output, r.output
    after = {p: p.read_bytes() for p in [*tmp_path.rglob("*"), *Path(out).rglob("*")] if p.is_file()}
    assert after == before  # nothing lost, nothing written
    if setup not in ("results", "foreign", "empty-dir"):
        assert not (tmp_path / "res").exists()


NAMES = st.sampled_from(
    [
        "N",
        "mu",
        "lr",
        "data.N",
        "model.d_h",
        "train.lr",
        "reps",
        "seeds",
        "data.name",
        "d",
        "nope",
        "train.lr_mult.QK",
        "",
        "=",
        "train.fast",
    ]
)
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(NAMES | TEXT, st.booleans(), TEXT), max_size=4))
def test_set_parser_fuzz(items):
    """Any --set list parses or raises AttnlabError; building the spec from it likewise."""
    exp = get("jiang2024-fig1")
    sets = [f"{n}={v}" if eq else f"{n}{v}" for n, eq, v in items]
    try:
        parse_sets(exp.Spec, sets, exp.defaults())
        exp.spec("smoke", sets)
    except AttnlabError:
        pass


VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 10**6)
    | st.integers(-(10**15), 10**15)
    | st.floats(allow_nan=True)
    | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
KEYS = st.sampled_from(["title", "seeds", "reps", "seed", "data", "model", "train", "report", "x"]) | TEXT


PARTS = st.fixed_dictionaries({"name": st.sampled_from(["jiang2024", "li2023"])}, optional={"N": VALUES, "d": VALUES})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(KEYS, VALUES | PARTS, max_size=5))
def test_sweep_spec_fuzz(source):
    """Any spec dict validates or raises AttnlabError, never another exception; a valid one
    expands to its cells or is refused by its size (counted first: no hang)."""
    try:
        grid = UserGrid.of(source)
        spec = grid.spec()
        grid.cells(spec.model_copy(update={"max_cells": 2000}))
    except AttnlabError:
        pass
