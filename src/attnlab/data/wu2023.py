"""Synthetic regression data for Wu et al. 2023 (arXiv 2311.01575), one sample at a time.

The paper does not specify its synthetic data; papers/wu2023.md assumes *(assumed)*:

    X ∈ R^{d_s×d}, tokens x_t i.i.d.:
        token_norm = "d"     x_t = s·g_t,            g_t ~ N(0, I_d)   (‖x_t‖² ≈ s²·d)
        token_norm = "unit"  x_t = s·g_t / ‖g_t‖                       (‖x_t‖ = s)
    y:
        target = "gaussian"  y ~ N(0, 1), independent of X
        target = "teacher"   y = (f*(X) − m*) / σ*: a fixed random teacher f*, the wu2023 model of
                             width ``teacher_width`` with LeCun init and τ₀ = width^{−1/2}; m*, σ*
                             are the mean and std of f* on 256 reference inputs of the same
                             distribution, so y has about unit variance like the Gaussian targets

with d_s = 8, d = 16, s = 1, N = 100 by default. The scale s is the knob for the normalisation
question of the sheet (with ‖x‖² ≈ d, γ = 1 diverges from d_m = 256 on).

Randomness: the training set is drawn from the cell's ``data`` stream and the test set from
its ``test`` stream (:data:`attnlab.train.STREAMS`). Sample i of a set is drawn from
``fold_in(key, i)`` (its tokens and its Gaussian target from the two halves of a split), so a
sample does not depend on how many samples are drawn beside it (padding-invariant buckets).
The teacher (its weights and its reference inputs) is drawn from ``fold_in(data stream,
TEACHER)``, an index no sample reaches, and is the same for a cell's training and test sets.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
from pydantic import Field, PositiveFloat, PositiveInt

from attnlab.models import wu2023 as wu_model
from attnlab.parts import DataModel, PartConfig, batched, pick, register, size
from attnlab.train import stream

TEACHER = 2**32 - 1  # fold_in index of the teacher's key in the data stream (samples use 0 … N − 1)
N_REFERENCE = 256  # reference inputs that standardise the teacher's outputs
TOKEN_NORMS = ("d", "unit")


def draw_tokens(key, d_s, d, *, scale=1.0, token_norm="d", dtype=jnp.float32):
    """X ∈ R^{d_s×d}: N(0, s²) entries ("d") or tokens of norm s ("unit"). ``token_norm`` is a
    batched choice: inside a program, its index in TOKEN_NORMS (both norms in one program)."""
    g = jax.random.normal(key, (d_s, d), dtype)
    unit = pick(token_norm, TOKEN_NORMS, {"d": False, "unit": True}, bool)
    if unit is not False:
        g = jnp.where(unit, g / jnp.linalg.norm(g, axis=-1, keepdims=True), g)
    return scale * g


def teacher(key, d_s, d, width, dtype=jnp.float32):
    """(params, Hparams) of the teacher f*: the wu2023 model, LeCun init, τ₀ = width^{−1/2}."""
    hp = wu_model.Hparams(d_s=d_s, d=d, d_m=width, alpha=0.5, init="lecun")
    return wu_model.init(jax.random.fold_in(key, 0), hp, dtype), hp


def teacher_fn(key, d_s, d, width, *, scale=1.0, token_norm="d", dtype=jnp.float32):
    """X -> (f*(X) − m*) / σ*, standardised on N_REFERENCE inputs drawn from fold_in(key, 1)."""
    params, hp = teacher(key, d_s, d, width, dtype)
    f = lambda X: wu_model.apply(params, X, hp)[0]
    ref_keys = jax.random.split(jax.random.fold_in(key, 1), N_REFERENCE)
    ref = jax.vmap(lambda k: f(draw_tokens(k, d_s, d, scale=scale, token_norm=token_norm, dtype=dtype)))(ref_keys)
    m, s = ref.mean(), ref.std()
    return lambda X: (f(X) - m) / s


def sample(key, i, *, d_s, d, scale=1.0, token_norm="d", target_fn=None, dtype=jnp.float32):
    """Draw sample i: (X ∈ R^{d_s×d}, y); y ~ N(0, 1) unless ``target_fn`` (X -> y) is given."""
    kx, ky = jax.random.split(jax.random.fold_in(key, i))
    X = draw_tokens(kx, d_s, d, scale=scale, token_norm=token_norm, dtype=dtype)
    y = jax.random.normal(ky, (), dtype) if target_fn is None else target_fn(X).astype(dtype)
    return X, y


def dataset(key, n, **kw):
    """Draw samples 0 … n−1: (X ∈ R^{n×d_s×d}, y ∈ R^n)."""
    return jax.vmap(lambda i: sample(key, i, **kw))(jnp.arange(n))


class Spec(PartConfig):
    """Fields of the wu2023 data model (``data.*``)."""

    d_s: PositiveInt = Field(8, description="tokens per sample")
    d: PositiveInt = Field(16, description="token dimension")
    token_norm: Literal[TOKEN_NORMS] = batched(
        "d", description="d: N(0, scale²) entries (‖x‖² ≈ scale²·d); unit: tokens of norm scale"
    )
    scale: PositiveFloat = batched(1.0, description="token scale s (entry std, or the norm under token_norm = unit)")
    target: Literal["gaussian", "teacher"] = Field(
        "gaussian", description="y ~ N(0, 1), or a fixed random wu2023 teacher's standardised output"
    )
    teacher_width: PositiveInt = Field(32, description="width of the teacher network (target = teacher)")
    N: PositiveInt = size(100, description="training samples")
    n_test: PositiveInt = Field(100, description="fresh test samples")


def make(key, v, s, pads, shared, dtype):
    """Training set (padded to ``pads['N']``, the first v['N'] real) and test set of one cell."""
    kw = dict(d_s=s["d_s"], d=s["d"], scale=v["scale"], token_norm=v["token_norm"], dtype=dtype)
    data_key = stream(key, "data")
    if s["target"] == "teacher":
        kw["target_fn"] = teacher_fn(jax.random.fold_in(data_key, TEACHER), width=s["teacher_width"], **kw)
    n_pad = pads["N"]
    X, y = dataset(data_key, n_pad, **kw)
    X_test, y_test = dataset(stream(key, "test"), s["n_test"], **kw)
    return {"X": X, "y": y, "mask": jnp.arange(n_pad) < v["N"], "X_test": X_test, "y_test": y_test}


def _footprint(s, pads):
    n = pads["N"] + s["n_test"]
    extra = N_REFERENCE if s["target"] == "teacher" else 0
    return n + extra, 4 * n * s["d_s"] * s["d"]


PART = register(
    DataModel(
        name="wu2023",
        version=1,
        config=Spec,
        input_shape=lambda s: {"tokens": s["d_s"], "d": s["d"]},
        make=make,
        footprint=_footprint,
    )
)
