"""Parts from outside the package: ``model.name = "module:ATTRIBUTE"`` in a sweep spec (or
--set) trains a model defined in the user's own file, on the CLI as in the API; a name that does
not import or is not a part is one clear error; an edited file gives new cell ids; a declared fast
path that is not the model's function is caught before training; installed packages register
parts through entry points; the worked example in examples/ runs."""

import dataclasses
import json
import textwrap

import pytest
from typer.testing import CliRunner

from attnlab.cli import app
from attnlab.errors import AttnlabError
from attnlab.problem import part

PLUGIN = '''
import dataclasses
import jax.numpy as jnp
from attnlab.models import jiang2024 as J

def apply(params, x, hp):
    """The jiang2024 model with its output passed through tanh: a variant of one's own."""
    f, aux = J.apply(params, x, hp)
    return jnp.tanh(f), aux

SQUASHED = dataclasses.replace(J.PART, name="squashed", apply=apply)
SAME = dataclasses.replace(J.PART, name="same")  # the same model under another name
NOT_A_PART = 42
# declares the parent's value-path shortcut as exact for its own apply: a lie the check must catch
LIAR = dataclasses.replace(J.PART, name="liar", apply=apply, fast_apply=J.apply_fast, dual=None, fast_of=apply)


def apply_fast(params, x, hp):
    f, aux = J.apply_fast(params, x, hp)
    return jnp.tanh(f), aux


HONEST = dataclasses.replace(J.PART, name="honest", apply=apply, fast_apply=apply_fast, dual=None, fast_of=apply)

from attnlab.data import jiang2024 as JD


def make(key, v, s, pads, shared, dtype):
    """jiang2024 data with every token shifted by 0.5: a data model of one's own."""
    d = JD.make(key, v, s, pads, shared, dtype)
    return d | {"X": d["X"] + 0.5, "X_test": d["X_test"] + 0.5}


SHIFTED = dataclasses.replace(JD.PART, name="shifted", make=make)
'''
SPEC = """
title = "plugin"
[data]
name = "jiang2024"
M = 4
d = 8
N = [4, 8]
mu = 3.0
[model]
name = "{name}"
d_h = 4
d_v = 4
[train]
max_steps = 20
fast = {fast}
"""


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    (tmp_path / "my_parts.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def run(tmp_path, name, fast=True, out="out"):
    spec = tmp_path / f"spec-{out}.toml"
    spec.write_text(SPEC.format(name=name, fast=str(fast).lower()))
    return CliRunner().invoke(app, ["sweep", str(spec), "--out", str(tmp_path / out), "--quiet"])


def test_a_model_of_ones_own_trains_from_a_sweep_spec(plugin):
    import pyarrow.parquet as pq

    r = run(plugin, "my_parts:SQUASHED")
    assert r.exit_code == 0, r.output
    t = pq.read_table(plugin / "out" / "results.parquet").to_pydict()
    assert set(t["model.name"]) == {"my_parts:SQUASHED"} and len(t["test_loss"]) == 2
    # its own function, fast paths or not (the parent's fast paths are not exact for it)
    r = run(plugin, "my_parts:SQUASHED", fast=False, out="plain")
    assert r.exit_code == 0, r.output
    plain = pq.read_table(plugin / "plain" / "results.parquet").to_pydict()
    assert sorted(plain["train_loss"]) == pytest.approx(sorted(t["train_loss"]), rel=1e-5)
    assert json.loads((plugin / "out" / "verdict.json").read_text())["cells"] == 2


@pytest.mark.parametrize(
    "name, needle",
    [
        ("no_such_module:PART", "cannot load the plugin 'no_such_module:PART': no module named 'no_such_module'"),
        ("my_parts:MISSING", "the module 'my_parts' has no attribute 'MISSING'"),
        ("my_parts:NOT_A_PART", "'my_parts:NOT_A_PART' is a int, not a model part"),
    ],
)
def test_a_plugin_that_does_not_load_is_one_clear_error(plugin, name, needle):
    r = run(plugin, name)
    assert r.exit_code == 2 and r.output.startswith("error: ") and "Traceback" not in r.output, r.output
    assert needle in r.output.replace("\n", " "), r.output
    assert not (plugin / "out").exists()
    with pytest.raises(AttnlabError, match="model.name"):
        part("model", name)


COMPARE = """
title = "side by side"
seeds = 2
[data]
name = "jiang2024"
M = 4
d = 8
N = 6
mu = [2.0, 4.0]
[model]
name = ["jiang2024", "my_parts:SAME", "my_parts:SQUASHED"]
d_h = 4
d_v = 4
[train]
max_steps = 20
draws = "{draws}"
"""


@pytest.mark.parametrize("draws", ["common", "cell"])
def test_models_side_by_side_in_one_grid_on_common_draws(plugin, draws):
    """model.name as a grid axis. With train.draws = "common" a cell's draws come from its data
    fields, seed, block and rep alone: the same model under another name gives the same numbers
    bit for bit (same data, init and batches), so a comparison with a variant is paired; with the
    default, every cell draws its own."""
    import pyarrow.parquet as pq

    spec = plugin / "compare.toml"
    spec.write_text(COMPARE.format(draws=draws))
    r = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(plugin / draws), "--quiet"])
    assert r.exit_code == 0, r.output
    t = pq.read_table(plugin / draws / "results.parquet").to_pylist()
    assert len(t) == 3 * 2 * 2
    by = {(c["model.name"], c["data.mu"], c["block"]): c for c in t}
    same = [
        by["jiang2024", mu, b]["train_loss"] == by["my_parts:SAME", mu, b]["train_loss"]
        for mu in (2.0, 4.0)
        for b in (0, 1)
    ]
    assert all(same) if draws == "common" else not any(same)
    assert all(
        by["jiang2024", mu, b]["train_loss"] != by["my_parts:SQUASHED", mu, b]["train_loss"]
        for mu in (2.0, 4.0)
        for b in (0, 1)
    )


def _forget(module="my_parts"):
    """What a new process would not have: the imported module and the ids computed from it."""
    import sys

    from attnlab import parts
    from attnlab.engine import grid

    sys.modules.pop(module, None)
    parts._plugin.cache_clear()
    grid._schema.cache_clear()


def test_an_edited_plugin_file_gives_new_cells(plugin):
    import pyarrow.parquet as pq

    assert run(plugin, "my_parts:SQUASHED").exit_code == 0
    before = set(pq.read_table(plugin / "out" / "results.parquet").to_pydict()["id"])
    with open(plugin / "my_parts.py", "a") as f:
        f.write("\n# an edit: the file's digest changes\n")
    _forget()
    try:
        r = run(plugin, "my_parts:SQUASHED")
        assert r.exit_code == 0, r.output
        after = set(pq.read_table(plugin / "out" / "results.parquet").to_pydict()["id"])
        assert json.loads((plugin / "out" / "verdict.json").read_text())["cells_trained_now"] == 2
        assert len(after) == 2 and not before & after
    finally:
        _forget()


def test_a_fast_path_that_is_not_the_models_function_is_caught_before_training(plugin, monkeypatch):
    """Declared exact (fast_of = its apply) but computing another function: one error naming the
    part and the path, before anything is written; the plain path (fast = false) trains; an honest
    fast path passes and is remembered on disk; check-part repeats the check on demand."""
    monkeypatch.setenv("ATTNLAB_CACHE", str(plugin / "cache"))
    r = run(plugin, "my_parts:LIAR")
    assert (
        r.exit_code == 2
        and "model 'liar': its declared fast path differs from its apply: fast_apply" in r.output.replace("\n", " ")
    ), r.output
    assert not (plugin / "out" / "results.parquet").exists()
    assert run(plugin, "my_parts:LIAR", fast=False, out="plain").exit_code == 0
    r = CliRunner().invoke(
        app,
        [
            "check-part",
            "my_parts:LIAR",
            "--set",
            "data.M=4",
            "--set",
            "data.d=8",
            "--set",
            "model.d_h=4",
            "--set",
            "model.d_v=4",
        ],
    )
    assert r.exit_code == 1 and "fast_apply (relative error" in r.output.replace("\n", " "), r.output
    r = run(plugin, "my_parts:HONEST", out="honest")
    assert r.exit_code == 0, r.output
    assert len(list((plugin / "cache" / "fastcheck").glob("*.json"))) == 1
    r = CliRunner().invoke(app, ["check-part", "my_parts:HONEST", "--set", "data.M=4", "--set", "data.d=8"])
    assert r.exit_code == 0 and "fast_apply = apply" in r.output, r.output
    r = CliRunner().invoke(app, ["check-part", "my_parts:SQUASHED"])  # the parent's fast paths are not its
    assert r.exit_code == 2 and "declared for another apply" in r.output.replace("\n", " "), r.output


def test_a_data_model_of_ones_own_through_reproduce_and_the_api(plugin, tmp_path):
    import attnlab

    r = CliRunner().invoke(
        app,
        [
            "reproduce",
            "jiang2024-fig3",
            "--scale",
            "smoke",
            "--out",
            str(tmp_path / "fig3"),
            "--quiet",
            "--set",
            "data.name=my_parts:SHIFTED",
        ],
    )
    assert r.exit_code == 0, r.output
    t = attnlab.load(tmp_path / "fig3")
    assert set(t["data.name"]) == {"my_parts:SHIFTED"}
    spec = {
        "data": {"name": "my_parts:SHIFTED", "M": 4, "d": 8, "N": 4},
        "model": {"name": "my_parts:SQUASHED", "d_h": 4, "d_v": 4},
        "train": {"max_steps": 10},
    }
    v = attnlab.sweep(spec, tmp_path / "api", progress=False)
    assert v["cells"] == 1 and set(attnlab.load(tmp_path / "api")["model.name"]) == {"my_parts:SQUASHED"}


def test_an_installed_packages_entry_point_registers_its_part(plugin, monkeypatch):
    from importlib.metadata import EntryPoint

    from attnlab import parts

    parts.registered("model")
    monkeypatch.setattr(parts, "_REGISTRY", {k: dict(v) for k, v in parts._REGISTRY.items()})
    monkeypatch.setattr(parts, "_ORIGIN", dict(parts._ORIGIN))
    parts.load_entry_point(EntryPoint("squashed", "my_parts:SQUASHED", "attnlab.parts"))
    assert part("model", "squashed").name == "squashed" and parts.outside("model", "squashed") == "my_parts"
    assert parts.source_digest("model", "squashed") is not None  # its cells' ids name its source
    with pytest.raises(AttnlabError, match="'nope' .* does not load: no module named 'no_such_package'"):
        parts.load_entry_point(EntryPoint("nope", "no_such_package:PART", "attnlab.parts"))
    with pytest.raises(AttnlabError, match="is a int, not a part or an experiment"):
        parts.load_entry_point(EntryPoint("bad", "my_parts:NOT_A_PART", "attnlab.parts"))
    with pytest.raises(AttnlabError, match="the model name 'jiang2024' is taken"):
        parts.register(dataclasses.replace(part("model", "squashed"), name="jiang2024"))


def test_the_worked_example_compares_two_models_on_common_draws(tmp_path, monkeypatch):
    """examples/linear_attention.py (a model in a file of its own, found in its spec's directory)
    against the softmax model: one sweep, a paired table in the report."""
    from attnlab import cli
    from helpers import ROOT

    monkeypatch.setattr(cli.out, "width", 250)
    out = tmp_path / "lvs"
    r = CliRunner().invoke(
        app,
        [
            "sweep",
            str(ROOT / "examples" / "linear_vs_softmax.toml"),
            "--out",
            str(out),
            "--quiet",
            "--set",
            "seeds=2",
            "--set",
            "data.N=8,16",
            "--set",
            "train.max_steps=40",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "Each model against jiang2024, cell by cell (paired on common draws)" in r.output
    html = (out / "report.html").read_text()
    assert "paired on common draws" in html and "linear_attention:PART" in html
    assert json.loads((out / "verdict.json").read_text())["cells"] == 8


def test_a_misspelt_part_name_gets_a_suggestion():
    with pytest.raises(AttnlabError, match=r"unknown model 'jiang2042' \(did you mean jiang2024\?\)"):
        part("model", "jiang2042")
