"""A part's batched fields (wu2023's α, init and token norm, the ViT's α and init):
cells that differ in them share one compiled program, each cell's value reaching the model as an
input. Checked against the same
model with the field static (one program per value, the value a Python constant), cell by cell:
float64 to the last bits (XLA simplifies a product with a constant τ₀ differently from one with
an input: 1e-15 relative after 15 steps), float32 within the suite's tolerance; probes and saved
parameters never see the input. A batched choice reaches the program as its index among the
field's choices, or as a constant where one value fills the bucket."""

import dataclasses
from typing import Literal

import numpy as np
import pytest
from pydantic import Field, PositiveFloat

from attnlab.data import wu2023 as wu_data
from attnlab.engine import executors, grid, rows
from attnlab.engine.plan import Plan
from attnlab.errors import AttnlabError
from attnlab.experiments.config import ExperimentSpec, expand
from attnlab.models import vit, wu2023
from attnlab.train import bucket
from helpers import assert_same, assert_same_rows, bucket_of, cell_of, run_bucket, use_part


class StaticAlpha(wu2023.Hparams):
    alpha: PositiveFloat = Field(0.5, description="τ₀ = d_m^(−alpha), a static field")


class StaticInit(wu2023.Hparams):
    init: Literal["lecun", "he", "ntk"] = Field("lecun", description="a static field")


class StaticVitInit(vit.Hparams):
    init: Literal["trunc_normal", "lecun", "he", "ntk"] = Field("trunc_normal", description="a static field")


class StaticTokenNorm(wu_data.Spec):
    token_norm: Literal["d", "unit"] = Field("d", description="a static field")


STATIC = dataclasses.replace(wu2023.PART, name="wu2023-static-alpha", config=StaticAlpha)
STATIC_INIT = dataclasses.replace(wu2023.PART, name="wu2023-static-init", config=StaticInit)
STATIC_VIT_INIT = dataclasses.replace(vit.PART, name="vit-static-init", config=StaticVitInit)
STATIC_NORM = dataclasses.replace(
    wu_data.PART,
    name="wu2023-static-norm",
    config=StaticTokenNorm,
    make=lambda key, v, s, *a: wu_data.make(key, v | {"token_norm": s["token_norm"]}, s, *a),  # the value a constant
)


def cells(model: str, dtype: str, probes: str, model_fields: dict | None = None):
    spec = ExperimentSpec(
        data={"name": "wu2023", "d_s": 3, "d": 5, "N": 6, "n_test": 5},
        model={"name": model, "d_m": 12, **(model_fields or {"alpha": [0.75, 1.0], "init": "lecun"})},
        train={
            "loss": "squared",
            "optimizer": "gd",
            "lr": 0.3,
            "max_steps": 15,
            "loss_threshold": 0.0,
            "dtype": dtype,
            "log_every": 5,
            "probes": probes,
            "save_params": True,
            "draws": "common",  # both models' cells draw the same data and init
        },
        seeds=1,
    )
    return expand(spec)


@pytest.mark.parametrize(("dtype", "probes"), [("float64", "wu2023"), ("float32", "")])
def test_batched_alpha_equals_static_alpha_cell_by_cell(monkeypatch, dtype, probes):
    use_part(monkeypatch, STATIC)
    batched = cells("wu2023", dtype, probes)
    comp, _, _ = bucket_of(batched)  # every α in one bucket: one program
    assert comp.model.config.role("alpha") == "batched"
    v = grid.batch_inputs(comp, batched)
    assert list(v["model.alpha"]) == [0.75, 1.0]
    out = run_bucket(batched)
    assert set(out["params"]) == {"W_Q", "W_K", "W_V", "w_O"}  # α is no parameter
    for i, cell in enumerate(cells("wu2023-static-alpha", dtype, probes)):
        ref = cell_of(run_bucket([cell]), 0)  # its own program, α a constant
        got = cell_of(out, i)
        tol = {"rtol": 1e-12, "atol": 1e-15} if dtype == "float64" else {"rtol": 2e-5, "atol": 1e-6}
        assert_same(got, ref, metrics=("train_loss", "test_loss", "stop_step", "status"), **tol)
    # the values differ by α: the input reached the model (and, in float64, the NTK probes)
    assert len({float(x) for x in out["metrics"]["train_loss"]}) == 2
    if probes:
        assert np.all(np.isfinite(out["traces"]["lambda_min"]))


def grid_of(data: dict, model: dict, loss: str, lr: float, max_steps: int) -> list[dict]:
    train = {"loss": loss, "optimizer": "gd", "lr": lr, "max_steps": max_steps, "dtype": "float64", "save_params": True}
    return expand(ExperimentSpec(data=data, model=model, train=train, seeds=1))


def vit_cells(model: str, choice: list[str]):
    data = {"name": "pool", "pool": 40, "M": 4, "d": 6, "N": 8, "n_test": 8}
    return grid_of(data, {"name": model, "D": 8, "depth": 1, "heads": 2, "init": choice}, "logistic", 0.5, 5)


def norm_cells(data: str, choice: list[str]):
    fields = {"d_s": 3, "d": 5, "N": 6, "n_test": 5, "target": "teacher", "teacher_width": 4, "token_norm": choice}
    return grid_of({"name": data, **fields}, {"name": "wu2023", "d_m": 12}, "squared", 0.3, 8)


CHOICES = {  # a batched choice: (field, its values, its part, the part with the field static, cells of a part name)
    "wu2023 init": (
        "model.init",
        wu2023.INITS,
        wu2023.PART,
        STATIC_INIT,
        lambda name, values: cells(name, "float64", "", {"alpha": 0.5, "init": values}),  # probes: the α test's
    ),
    "vit init": ("model.init", vit.Hparams.choices("init"), vit.PART, STATIC_VIT_INIT, vit_cells),
    "wu2023 token_norm": ("data.token_norm", wu_data.TOKEN_NORMS, wu_data.PART, STATIC_NORM, norm_cells),
}


@pytest.mark.parametrize("choice", list(CHOICES))
def test_a_batched_choice_equals_the_static_choice_cell_by_cell(monkeypatch, choice):
    """Every value of a choice in one program, each cell's value an index into the choices,
    against each value's own program (the value a Python constant): float64 to the last bits
    (XLA folds products of constants, such as ntk's 1/√fan_in multipliers, that an input cannot
    be folded into). Each value reached the program: the cells' losses differ."""
    field, values, part, static_part, make = CHOICES[choice]
    batched = make(part.name, list(values))
    comp, _, _ = bucket_of(batched)  # one program for every value
    assert comp.choices(field) == tuple(values)
    assert grid.batch_inputs(comp, batched)[field].tolist() == list(range(len(values)))
    out = run_bucket(batched)
    assert not any(k.startswith("model.") for k in out["params"])  # inputs are no parameters
    use_part(monkeypatch, static_part, part.name)  # under the part's own name: the cells' draws are the same
    for i, cell in enumerate(make(part.name, list(values))):
        assert bucket_of([cell])[1][field] == values[i]  # the value is static there
        ref, got = cell_of(run_bucket([cell]), 0), cell_of(out, i)
        assert_same(got, ref, metrics=("train_loss", "test_loss", "stop_step", "status"), rtol=1e-12, atol=1e-15)
    assert len({float(x) for x in out["metrics"]["train_loss"]}) == len(values)


def test_a_chunk_that_mixes_a_defaulted_field_keeps_each_cells_value():
    """The ViT leaves α = ½ (its default) out of a cell; a chunk holding such a cell first and an
    α = 1 cell stores α = 1 for the second (null, read as ½, for the first), and the two trained
    differently: the field reached the model."""
    spec = ExperimentSpec(
        data={"name": "pool", "pool": 40, "M": 4, "d": 6, "N": 8, "n_test": 8},
        model={"name": "vit", "D": 8, "depth": 1, "heads": 2, "alpha": [0.5, 1.0]},
        train={"loss": "logistic", "optimizer": "gd", "lr": 0.5, "max_steps": 5, "dtype": "float64"},
        seeds=1,
    )
    cells = expand(spec)
    assert "model.alpha" not in cells[0] and cells[1]["model.alpha"] == 1.0
    (chunk,) = Plan.of(cells, memory_budget=2e9).chunks  # one program for both α
    table = executors.train_chunk(chunk)
    assert table.column("model.alpha").to_pylist() == [None, 1.0]
    assert [rows.cell_of(r) for r in table.to_pylist()] == cells
    a, b = table.column("train_loss").to_pylist()
    assert a != b


def test_pick_reads_a_choice_by_name_or_by_index():
    from attnlab.parts import pick

    table = {"lecun": 1.0, "he": 2.0**0.5, "ntk": 0.25}
    assert pick("he", wu2023.INITS, table) == 2.0**0.5  # outside a program: the number as it is
    assert [float(pick(i, wu2023.INITS, table, "float32")) for i in range(3)] == [1.0, np.float32(2.0**0.5), 0.25]
    assert wu2023.Hparams.choices("d_m") is None  # not a choice
    with pytest.raises(AttnlabError, match="choices are"):
        pick(0, wu2023.INITS, {"lecun": 1.0, "he": 2.0})  # a table missing a choice


def test_a_choice_one_value_fills_is_a_constant_of_the_program(monkeypatch):
    """A bucket whose cells all take one value of a batched choice compiles it as a constant (its
    chunks' static fields hold it), so such a grid runs the program of the static field, bit for
    bit; a bucket mixing values keeps it an input."""
    one = cells("wu2023", "float64", "", {"alpha": 0.5, "init": "ntk"})
    (chunk,) = Plan.of(one).chunks
    assert {("model.init", "ntk"), ("data.token_norm", "d")} <= set(chunk.static)
    assert "train.reduction" not in dict(chunk.static)  # the recipe's choice stays an input
    (mixed,) = Plan.of(cells("wu2023", "float64", "", {"alpha": 0.5, "init": ["lecun", "ntk"]})).chunks
    assert "model.init" not in dict(mixed.static)
    table = executors.train_chunk(chunk)
    use_part(monkeypatch, STATIC_INIT, "wu2023")  # the field static, under the part's own name: the same draws
    monkeypatch.setattr(bucket, "PROGRAMS", type(bucket.PROGRAMS)())  # nothing compiled above is reused
    (static,) = Plan.of(one).chunks
    assert_same_rows(table, executors.train_chunk(static), skip=("seconds", "git_sha"))
