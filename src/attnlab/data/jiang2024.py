"""Data model of Jiang et al. 2024 (arXiv 2409.19345), one sample at a time.

A sample is (X, y) with y ∈ {+1, −1} and X ∈ R^{M×d}:

    x_1 = μ₊ = ‖μ‖·e₁  if y = +1,   μ₋ = ‖μ‖·e₂  if y = −1     (signal token)
    x_2 = ξ̃  ~ N(0, σ̃_p² I_d)                                   (strong noise token)
    x_l = ξ_l ~ N(0, σ_p² I_d),  l = 3..M                        (weak noise tokens)

    SNR = ‖μ‖ / (σ_p √d),  with σ_p the *weak* noise scale.

The class signals are orthogonal (e₁, e₂), not ±μ. The released scripts use isotropic noise;
the theory projects the noise orthogonal to the signals (``projected=True`` zeroes the noise
on e₁ and e₂).

The training set is drawn from the cell's ``data`` stream and the test set from its ``test``
stream (:data:`attnlab.train.STREAMS`), so they are independent. Sample i of a set is drawn
from ``fold_in(key, i)`` and has label +1 for even i and −1
for odd i, so the first N samples of any set are exactly class-balanced for even N, and a
sample does not depend on how many samples are drawn beside it (padding-invariant buckets). The
noise is drawn by :mod:`attnlab.philox` (version 3; threefry before).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from pydantic import Field, PositiveFloat, PositiveInt, field_validator

from attnlab import philox
from attnlab.parts import DataModel, PartConfig, batched, register, size
from attnlab.train import stream

SIGNAL, STRONG_NOISE, WEAK_NOISE = 0, 1, 2
"""Token roles; token l has role ``token_roles(M)[l]``."""


def token_roles(M: int) -> jnp.ndarray:
    """Role of each token position: signal, strong noise, then M−2 weak noise tokens."""
    return jnp.array([SIGNAL, STRONG_NOISE] + [WEAK_NOISE] * (M - 2), dtype=jnp.int32)


def snr(mu_norm, sigma_p, d):
    """SNR = ‖μ‖ / (σ_p √d)."""
    return mu_norm / (sigma_p * d**0.5)


def mu_for_snr(snr_value, sigma_p, d):
    """Inverse of :func:`snr`: the ‖μ‖ that gives ``snr_value``."""
    return snr_value * sigma_p * d**0.5


def label(i):
    """Label of sample i: +1 for even i, −1 for odd i (balanced prefixes)."""
    return jnp.where(i % 2 == 0, 1.0, -1.0)


def sample(key, i, *, mu_norm, sigma_p, sigma_tilde_p, M, d, projected=False, dtype=jnp.float32):
    """Draw sample i: returns (X ∈ R^{M×d}, y)."""
    y = label(i).astype(dtype)
    k = jax.random.fold_in(key, i)
    noise = philox.normal(k, (M - 1, d), dtype)
    scale = jnp.concatenate([jnp.array([sigma_tilde_p]), jnp.full((M - 2,), sigma_p)]).astype(dtype)
    noise = noise * scale[:, None]
    if projected:  # theory's variant: noise ⟂ span(μ₊, μ₋)
        noise = noise.at[:, :2].set(0.0)
    signal = jnp.where(y > 0, jnp.zeros(d, dtype).at[0].set(1.0), jnp.zeros(d, dtype).at[1].set(1.0))
    X = jnp.concatenate([(mu_norm * signal)[None, :].astype(dtype), noise], axis=0)
    return X, y


def dataset(key, n, **kw):
    """Draw samples 0..n−1: returns (X ∈ R^{n×M×d}, y ∈ R^n)."""
    return jax.vmap(lambda i: sample(key, i, **kw))(jnp.arange(n))


class Spec(PartConfig):
    """Fields of the jiang2024 data model (``data.*``)."""

    M: int = Field(16, ge=3, description="tokens per sample (signal, strong noise, M−2 weak noise)")
    d: int = Field(1024, ge=2, description="token dimension (≥ 2: two orthogonal class signals e₁, e₂)")
    mu: PositiveFloat = batched(1.0, description="signal norm ‖μ‖")
    sigma_p: PositiveFloat = batched(0.2, description="weak noise std σ_p (defines SNR)")
    sigma_tilde_p: PositiveFloat = batched(4.0, description="strong noise std σ̃_p")
    projected: bool = Field(False, description="project noise orthogonal to the signals")
    N: PositiveInt = size(10, description="training samples (even: class-balanced)")
    n_test: PositiveInt = Field(100, description="fresh test samples (even: half per class)")

    @field_validator("N", "n_test")
    @classmethod
    def _even(cls, v):
        if v % 2:
            raise ValueError("values must be even (class-balanced sets)")
        return v


def make(key, v, s, pads, shared, dtype):
    """Training set (padded to ``pads['N']``, first v['N'] real) and test set of one cell."""
    kw = dict(
        mu_norm=v["mu"],
        sigma_p=v["sigma_p"],
        sigma_tilde_p=v["sigma_tilde_p"],
        M=s["M"],
        d=s["d"],
        projected=s["projected"],
        dtype=dtype,
    )
    n_pad = pads["N"]
    X, y = dataset(stream(key, "data"), n_pad, **kw)
    X_test, y_test = dataset(stream(key, "test"), s["n_test"], **kw)
    return {"X": X, "y": y, "mask": jnp.arange(n_pad) < v["N"], "X_test": X_test, "y_test": y_test}


PART = register(
    DataModel(
        name="jiang2024",
        version=3,
        config=Spec,
        input_shape=lambda s: {"tokens": s["M"], "d": s["d"]},
        make=make,
        footprint=lambda s, pads: (pads["N"] + s["n_test"], 4 * (pads["N"] + s["n_test"]) * s["M"] * s["d"]),
    )
)
