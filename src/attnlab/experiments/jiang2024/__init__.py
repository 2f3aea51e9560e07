"""Jiang et al. 2024: the model family shared by Fig. 1 and Fig. 3, and their common spec.

The assumptions below are not in any released source; each is a parameter or a documented
convention, listed in every report.
"""

from __future__ import annotations

from functools import partial
from typing import Literal

import jax
import jax.numpy as jnp
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from attnlab import probes
from attnlab.data import jiang2024 as data
from attnlab.models import jiang2024 as model
from attnlab.train import Problem, TrainConfig, log_schedule

ASSUMPTIONS = (
    "Sample i has label +1 for even i and −1 for odd i (exactly balanced sets for even N); sample 0 is the "
    "y = +1 sample probed in Fig. 3.",
    "Each cell's data, test set and init come from a key derived from the hash of its config: repeats and grid "
    "cells are independent draws; a cell's numbers do not depend on the other cells in its batch (beyond float "
    "rounding when the chunking pads it to another N).",
    "Noise is isotropic as in the released scripts (projected = true gives the theory's variant).",
)


class ModelSpec(BaseModel):
    """Data, model and training fields shared by the Jiang et al. experiments."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    M: int = Field(16, ge=3, description="tokens per sample (signal, strong noise, M−2 weak noise)")
    d: PositiveInt = Field(1024, description="token dimension")
    d_h: PositiveInt = Field(512, description="query/key width")
    d_v: PositiveInt = Field(512, description="value width")
    sigma_p: PositiveFloat = Field(0.2, description="weak noise std σ_p (defines SNR)")
    sigma_tilde_p: PositiveFloat = Field(4.0, description="strong noise std σ̃_p")
    projected: bool = Field(False, description="project noise orthogonal to the signals")
    init_scale: PositiveFloat = Field(16.0, description="W_Q, W_K, W_V = Linear init / init_scale")
    tau: PositiveFloat = Field(1.0, description="softmax temperature multiplier")
    train_w_O: bool = Field(False, description="train the head w_O too")
    lr: PositiveFloat = Field(0.1, description="learning rate")
    optimizer: Literal["gd", "momentum", "adam"] = Field("gd", description="full-batch optimiser")
    max_steps: int = Field(1000, ge=0, description="step cap")
    loss_threshold: float = Field(0.01, description="stop at the first step with training loss below this")
    n_test: PositiveInt = Field(100, description="fresh test samples (half per class)")
    dtype: Literal["float32", "float64"] = "float32"
    seed: int = Field(0, ge=0, description="base seed (part of every cell's id)")
    memory_budget_gb: PositiveFloat = Field(2.0, description="memory per chunk of cells")

    @model_validator(mode="after")
    def _check(self):
        if self.d < 2:
            raise ValueError("d: must be >= 2 (two orthogonal class signals e₁, e₂)")
        if self.n_test % 2:
            raise ValueError("n_test: must be even (half per class)")
        return self

    def cell_fields(self) -> dict:
        return {k: getattr(self, k) for k in CELL_FIELDS}


CELL_FIELDS = (
    "M", "d", "d_h", "d_v", "sigma_p", "sigma_tilde_p", "projected", "init_scale", "tau",
    "train_w_O", "lr", "optimizer", "max_steps", "loss_threshold", "n_test", "dtype", "seed",
)  # fmt: skip


class Family:
    """The sweep plug-in: which cell fields fix shapes, which are batched, and the Problem."""

    name = "jiang2024"
    static_fields = (
        "M", "d", "d_h", "d_v", "projected", "init_scale", "tau", "train_w_O", "optimizer",
        "max_steps", "loss_threshold", "n_test", "dtype", "log_every", "log_dense_until",
    )  # fmt: skip
    dynamic_fields = ("mu", "sigma_p", "sigma_tilde_p", "N", "lr")
    size_field = "N"

    def hparams(self, s: dict) -> model.Hparams:
        return model.Hparams(
            M=s["M"], d=s["d"], d_h=s["d_h"], d_v=s["d_v"], init_scale=s["init_scale"], tau=s["tau"],
            train_w_O=s["train_w_O"],
        )  # fmt: skip

    def problem(self, s: dict, n_pad: int) -> Problem:
        hp = self.hparams(s)
        dtype = jnp.dtype(s["dtype"])

        def make_data(key, v):
            k_train, k_test = jax.random.split(key)
            kw = dict(
                mu_norm=v["mu"], sigma_p=v["sigma_p"], sigma_tilde_p=v["sigma_tilde_p"], M=hp.M, d=hp.d,
                projected=s["projected"], dtype=dtype,
            )  # fmt: skip
            X, y = data.dataset(k_train, n_pad, **kw)
            X_test, y_test = data.dataset(k_test, s["n_test"], **kw)
            return {"X": X, "y": y, "mask": jnp.arange(n_pad) < v["N"], "X_test": X_test, "y_test": y_test}

        return Problem(
            make_data=make_data,
            init=lambda key, v: model.init(key, hp, dtype),
            apply=partial(model.apply, hp=hp),
            loss=model.logistic_loss,
            trainable=model.trainable(hp),
            probes=partial(probes.jiang2024, hp=hp) if s["log_every"] else None,
        )

    def train_config(self, s: dict) -> TrainConfig:
        logs = (
            log_schedule(s["max_steps"], every=s["log_every"], dense_until=s["log_dense_until"])
            if s["log_every"]
            else ()
        )
        return TrainConfig(
            max_steps=s["max_steps"], loss_threshold=s["loss_threshold"], optimizer=s["optimizer"], log_steps=logs
        )

    def cell_bytes(self, s: dict, n_pad: int) -> int:
        """Rough peak memory of one cell: parameters ×4 (θ, grad, update, optimiser state),
        data, and the activations of the forward/backward pass ×3."""
        width = 4 if s["dtype"] == "float32" else 8
        n_params = s["d"] * (2 * s["d_h"] + s["d_v"]) + s["d_v"]
        n_data = (n_pad + s["n_test"]) * s["M"] * s["d"]
        n_act = (n_pad + s["n_test"]) * s["M"] * (2 * s["d_h"] + s["d_v"] + 2 * s["M"])
        return width * (4 * n_params + n_data + 3 * n_act)


FAMILY = Family()


def tiny_cell(**kw) -> dict:
    """A complete cell small enough to train in well under a second (tests, examples)."""
    base = ModelSpec(M=4, d=12, d_h=6, d_v=5, n_test=10, max_steps=40, lr=0.1).cell_fields()
    return base | {"log_every": 0, "log_dense_until": 0, "mu": 3.0, "N": 6, "rep": 0} | kw
