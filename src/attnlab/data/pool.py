"""A fixed pool of samples shared by every cell of a bucket, each cell training on its own
index subset: the shape of real data sets (MNIST and the like), on a synthetic pool.

The pool (held once per bucket, never copied per cell) has P samples X_i ∈ R^{M×d}, drawn once
from ``pool_seed`` with numpy:

    y_i = +1 for even i, −1 for odd i
    X_i = σ G_i + y_i · s · e₁ e₁ᵀ      (G_i standard normal; the signal s sits on token 1, coordinate 1)

The last ``n_test`` samples are the held-out test split, the same for every cell; a cell's N
training samples are the first N of a permutation of the other P − n_test, drawn from the
cell's ``data`` stream.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, model_validator

from attnlab.parts import DataModel, PartConfig, register, size
from attnlab.train import stream


class Spec(PartConfig):
    """Fields of the pool data model (``data.*``)."""

    pool: int = Field(200, ge=4, description="samples in the shared pool P (train + test)")
    M: PositiveInt = Field(4, description="tokens per sample")
    d: PositiveInt = Field(8, description="token dimension")
    signal: PositiveFloat = Field(1.0, description="class signal s on token 1, coordinate 1")
    sigma: PositiveFloat = Field(1.0, description="noise std σ")
    pool_seed: NonNegativeInt = Field(0, description="seed of the pool (the same for every cell)")
    N: PositiveInt = size(20, description="training samples drawn from the pool")
    n_test: PositiveInt = Field(40, description="held-out test samples (the pool's last n_test)")

    @model_validator(mode="after")
    def _fits(self):
        if self.N + self.n_test > self.pool:
            raise ValueError(f"data.N: N + n_test = {self.N + self.n_test} exceeds the pool of {self.pool} samples")
        return self


def shared(s: dict) -> dict:
    """The pool, generated once per bucket."""
    rng = np.random.default_rng(s["pool_seed"])
    y = np.where(np.arange(s["pool"]) % 2 == 0, 1.0, -1.0).astype(np.float32)
    X = (s["sigma"] * rng.standard_normal((s["pool"], s["M"], s["d"]))).astype(np.float32)
    X[:, 0, 0] += y * s["signal"]
    return {"X": X, "y": y}


def make(key, v, s, pads, pool, dtype):
    """The cell's N training samples (padded to ``pads['N']``) and the shared test split."""
    n_train, n_pad = s["pool"] - s["n_test"], pads["N"]
    idx = jax.random.permutation(stream(key, "data"), n_train)[:n_pad]
    X, y = jnp.asarray(pool["X"], dtype), jnp.asarray(pool["y"], dtype)
    return {
        "X": jnp.take(X, idx, axis=0),
        "y": jnp.take(y, idx),
        "mask": jnp.arange(n_pad) < v["N"],
        "X_test": X[n_train:],
        "y_test": y[n_train:],
    }


PART = register(
    DataModel(
        name="pool",
        version=1,
        config=Spec,
        input_shape=lambda s: {"tokens": s["M"], "d": s["d"]},
        make=make,
        footprint=lambda s, pads: (pads["N"] + s["n_test"], 4 * (pads["N"] + s["n_test"]) * s["M"] * s["d"]),
        shared=shared,
    )
)
