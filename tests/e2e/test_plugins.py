"""Parts from outside the package: ``model.name = "module:ATTRIBUTE"`` in a sweep spec (or
--set) trains a model defined in the user's own file, on the CLI as in the API; a name that does
not import or is not a part is one clear error."""

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
'''
SPEC = '''
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
'''


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


@pytest.mark.parametrize("name, needle", [
    ("no_such_module:PART", "cannot load the plugin 'no_such_module:PART' (ModuleNotFoundError"),
    ("my_parts:MISSING", "cannot load the plugin 'my_parts:MISSING' (AttributeError"),
    ("my_parts:NOT_A_PART", "'my_parts:NOT_A_PART' is a int, not a model part"),
])  # fmt: skip
def test_a_plugin_that_does_not_load_is_one_clear_error(plugin, name, needle):
    r = run(plugin, name)
    assert r.exit_code == 2 and r.output.startswith("error: ") and "Traceback" not in r.output, r.output
    assert needle in r.output.replace("\n", " "), r.output
    assert not (plugin / "out").exists()
    with pytest.raises(AttnlabError, match="model.name"):
        part("model", name)


COMPARE = '''
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
'''


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
    same = [by["jiang2024", mu, b]["train_loss"] == by["my_parts:SAME", mu, b]["train_loss"]
            for mu in (2.0, 4.0) for b in (0, 1)]  # fmt: skip
    assert all(same) if draws == "common" else not any(same)
    assert all(by["jiang2024", mu, b]["train_loss"] != by["my_parts:SQUASHED", mu, b]["train_loss"]
               for mu in (2.0, 4.0) for b in (0, 1))  # fmt: skip
