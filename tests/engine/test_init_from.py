"""Starting a cell from stored parameters (``train.init_from``): the recipe fields, the check
against the model, the content-addressed parameter files, and training from them on the
vectorised path against the reference path."""

import io

import jax
import numpy as np
import pytest

from attnlab import problem as P
from attnlab.engine import executors, grid
from attnlab.engine.plan import Plan
from attnlab.errors import AttnlabError
from attnlab.experiments.config import ExperimentSpec, expand
from attnlab.experiments.jiang2024 import tiny_cell
from helpers import bucket_of, run_reference


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A tiny cell's initial parameters, moved off the init and written with write_params:
    (params, path, digest)."""
    cell = tiny_cell(dtype="float64")
    comp, static, _ = bucket_of([cell])
    v = {k: x[0] for k, x in grid.batch_inputs(comp, [cell]).items()}
    with jax.enable_x64(True):
        params = comp.problem(static, {"data.N": 6}).init(jax.random.PRNGKey(7), v)
        params = {k: np.asarray(x) + 0.01 for k, x in params.items()}
    path, digest = P.write_params(params, tmp_path_factory.mktemp("params"))
    return params, path, digest


def test_cells_without_init_from_keep_their_fields():
    """The two fields are absent from a cell that does not use them, so earlier ids stand."""
    cell = tiny_cell()
    assert not any(k.startswith("train.init_") for k in cell)
    assert P.Recipe().model_dump().keys().isdisjoint({"init_from", "init_sha256"})
    assert {"init_from", "init_sha256"} <= set(P.Recipe.model_fields)


def test_params_files_are_content_addressed(stored, tmp_path):
    params, path, digest = stored
    assert path.endswith(f"{digest}.npz") and P.params_sha256(params) == digest
    assert P.write_params(params, tmp_path) == (str(tmp_path / f"{digest}.npz"), digest)
    assert P.write_params(params, tmp_path)[1] == digest  # rewriting an existing file is a no-op
    loaded, d2 = P.read_params(path)
    assert d2 == digest and set(loaded) == set(params)
    changed = dict(params, W_V=params["W_V"] + 1e-12)
    assert P.params_sha256(changed) != digest
    # the digest is of the numbers, not of a file's bytes (np.savez stamps the time)
    assert P.params_sha256({k: params[k] for k in reversed(list(params))}) == digest


def test_recipe_fills_and_checks_the_digest(stored, tmp_path):
    _, path, digest = stored
    r = P.Recipe(init_from=path)
    assert r.init_sha256 == digest and r.model_dump()["init_sha256"] == digest
    spec = ExperimentSpec(data={"name": "jiang2024", "N": 6}, model={"name": "jiang2024"}, train={"init_from": path})
    cell = expand(spec)[0]
    assert cell["train.init_from"] == path and cell["train.init_sha256"] == digest
    assert grid.cell_id(cell) != grid.cell_id(expand(spec.model_copy(update={"train": {}}))[0])
    # the same parameters elsewhere: another id (the path is part of the cell), the same draws
    copy = P.write_params(P.read_params(path)[0], tmp_path / "elsewhere")[0]
    moved = expand(spec.model_copy(update={"train": {"init_from": copy}}))[0]
    assert grid.cell_id(moved) != grid.cell_id(cell) and grid.seed_id(moved) == grid.seed_id(cell)
    with pytest.raises(ValueError, match="init_sha256: given without train.init_from"):
        P.Recipe(init_sha256=digest)
    with pytest.raises(AttnlabError, match="train.init_from: no parameter file"):
        P.Recipe(init_from=str(tmp_path / "none.npz"))
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(AttnlabError, match="cannot read .* as an .npz"):
        P.Recipe(init_from=str(tmp_path / "bad.npz"))


def test_a_file_that_does_not_fit_the_model_is_named(stored, tmp_path):
    params, path, digest = stored
    cell = tiny_cell(dtype="float64") | {"train.init_from": path, "train.init_sha256": "0" * 64}
    comp, static, _ = bucket_of([cell])
    with pytest.raises(AttnlabError, match="holds parameters with sha256 .* not the cell's"):
        comp.check(static)
    wrong = {k: v for k, v in params.items() if k != "W_V"} | {"extra": np.zeros(2), "W_K": np.zeros((3, 3))}
    wpath, wdigest = P.write_params(wrong, tmp_path)
    cell |= {"train.init_from": wpath, "train.init_sha256": wdigest}
    comp, static, _ = bucket_of([cell])
    with pytest.raises(
        AttnlabError,
        match=r"does not fit model 'jiang2024'.*missing: W_V; not the model's: extra; "
        r"shapes differ: W_K \(3, 3\)",
    ):
        comp.check(static)


def test_training_from_stored_parameters_vectorised_equals_reference(stored):
    """Through the executor (its Problem is built outside float64 mode), against the reference."""
    params, path, digest = stored
    base = {"train.init_from": path, "train.init_sha256": digest}
    cells = [tiny_cell(dtype="float64", lr=lr, max_steps=8, save_params=True) | base for lr in (0.5, 1.0)]
    (chunk,) = Plan.of(cells, memory_budget=2e9).chunks
    rows = executors.train_chunk(chunk).to_pylist()
    ref = run_reference(cells[1])
    row = next(r for r in rows if r["id"] == grid.cell_id(cells[1]))
    for k in ("train_loss", "test_loss", "stop_step"):
        assert row[k] == pytest.approx(float(ref["metrics"][k]), rel=1e-9, abs=1e-12), k
    saved = dict(np.load(io.BytesIO(row["params_npz"])))
    for k, x in ref["params"].items():
        assert saved[k].dtype == np.float64
        np.testing.assert_allclose(saved[k], x, rtol=1e-9, atol=1e-12, err_msg=k)
    # every cell starts from the stored model (no random init), whatever its key
    comp, static, _ = bucket_of(cells)
    v = {k: x[0] for k, x in grid.batch_inputs(comp, cells).items()}
    with jax.enable_x64(True):
        start = comp.problem(static, {"data.N": 6}).init(jax.random.PRNGKey(1), v)
    for k, x in params.items():
        assert start[k].dtype == np.float64
        np.testing.assert_array_equal(start[k], x)
