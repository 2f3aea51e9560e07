"""Bulk random numbers in the program from Philox4x32-10, keyed by a JAX key.

Where a protocol draws millions of numbers a cell (jiang2024's noise tokens and initial weights,
li2023's token noise), JAX's threefry was most of the cell's time on XLA:CPU; Philox4x32-10
written here in ``jnp`` draws the same bits several times faster (measured in
``docs/performance.md``). Keys still come from ``jax.random`` (``fold_in``/``split``); only the
bulk draw changes.

Philox4x32-10 (Salmon, Moraes, Dror & Shaw, SC 2011; one of cuRAND's generators and
Random123's): a 128-bit counter (c₀, c₁, c₂, c₃) and a 64-bit key (k₀, k₁); each of
10 rounds is

    (hi₀, lo₀) = M₀·c₀,  (hi₁, lo₁) = M₁·c₂   (32×32 → 64-bit products)
    (c₀, c₁, c₂, c₃) ← (hi₁ ⊕ c₁ ⊕ k₀, lo₁, hi₀ ⊕ c₃ ⊕ k₁, lo₀)
    (k₀, k₁) ← (k₀ + W₀, k₁ + W₁)

and the four words after the last round are four random 32-bit numbers. Number j of a draw is
word j mod 4 of the block with counter (⌊j/4⌋, 0, 0, 0), so the first n numbers of a draw do not
depend on its size. The key is the JAX key's own two words (for threefry keys, which
``fold_in``/``split`` already make pseudo-random), so distinct keys give independent streams and
equal keys (common draws) the same one. It passes BigCrush (the paper above); the known-answer
vectors of Random123 are in the tests. (numpy's ``Philox`` is the 4×64 member of the family.)
Floats are float32 or float64 only, and float64 needs the caller's x64 mode (the engine's float64
cells run with it on).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

M0, M1 = 0xD2511F53, 0xCD9E8D57  # the round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85  # the key schedule's increments (golden ratio, √3 − 1)
ROUNDS = 10


def rounds(k0, k1, c0, c1, c2, c3, n_rounds: int = ROUNDS):
    """The Philox4x32 bijection of counter (c₀..c₃) under key (k₀, k₁): four uint32 arrays.

    The 64-bit products need 64-bit integers, which JAX has only with x64 on: they are traced
    with x64 on locally (the arrays in and out stay uint32, whatever the caller's mode)."""
    u32 = jnp.uint32
    with jax.enable_x64(True):
        k0, k1, c0, c1, c2, c3 = (jnp.asarray(x, u32) for x in (k0, k1, c0, c1, c2, c3))
        for _ in range(n_rounds):
            p0 = c0.astype(jnp.uint64) * np.uint64(M0)
            p1 = c2.astype(jnp.uint64) * np.uint64(M1)
            c0, c1, c2, c3 = (
                (p1 >> 32).astype(u32) ^ c1 ^ k0,
                p1.astype(u32),
                (p0 >> 32).astype(u32) ^ c3 ^ k1,
                p0.astype(u32),
            )
            k0, k1 = k0 + u32(W0), k1 + u32(W1)
    return c0, c1, c2, c3


def _key_words(key):
    """The Philox key (k₀, k₁) of one JAX key: its two words (a typed key of another generator,
    e.g. rbg's four words, is hashed to two by ``jax.random.bits``)."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise ValueError(f"philox: one key expected, got a batch of shape {key.shape} (vmap over keys)")
        data = jax.random.key_data(key)
        if data.shape != (2,):
            data = jax.random.bits(key, (2,), jnp.uint32)
    else:
        data = key
        if data.shape != (2,):
            raise ValueError(f"philox: a raw key is two uint32 words, got shape {data.shape}")
    return data[0].astype(jnp.uint32), data[1].astype(jnp.uint32)


def bits(key, shape=()) -> jax.Array:
    """``prod(shape)`` random uint32 numbers of the stream of ``key``, in ``shape``."""
    shape = tuple(shape)
    n = math.prod(shape)
    blocks = -(-n // 4)
    if blocks > 2**32:
        raise ValueError(f"philox.bits: {n} numbers is more than one stream holds (2^34)")
    k0, k1 = _key_words(key)
    c0 = jnp.arange(blocks, dtype=jnp.uint32)
    zero = jnp.zeros_like(c0)
    words = jnp.stack(rounds(k0, k1, c0, zero, zero, zero), axis=-1)  # (blocks, 4): block-major
    return words.reshape(-1)[:n].reshape(shape)


def _top(key, shape, b: int):
    """The top ``b`` ≤ 64 bits of one (b ≤ 32) or two words per number: uint32, or uint64 (b > 32,
    under the caller's x64 mode)."""
    if b <= 32:
        return bits(key, shape) >> (32 - b)
    w = bits(key, (*shape, 2))
    return (w[..., 0].astype(jnp.uint64) << (b - 32)) | (w[..., 1] >> (64 - b)).astype(jnp.uint64)


def _float(dtype) -> jnp.dtype:
    """``dtype`` if float32, or float64 under the caller's x64 mode; anything else is refused."""
    dtype = jnp.dtype(dtype)
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError("philox: float64 draws need x64 mode on (jax.enable_x64)")
    if dtype not in (jnp.float32, jnp.float64):
        raise ValueError(f"philox: floats are float32 or float64, not {dtype}")
    return dtype


def uniform(key, shape=(), dtype=jnp.float32, minval=0.0, maxval=1.0) -> jax.Array:
    """Uniform on (minval, maxval): minval + (maxval − minval)·u, with u = (v + ½)/2^b on a grid of
    2^b midpoints in (0, 1), exact in ``dtype`` (b = 23 in float32, 52 in float64)."""
    dtype = _float(dtype)
    b = 52 if dtype == jnp.float64 else 23
    u = (_top(key, tuple(shape), b).astype(dtype) + 0.5) * 2.0**-b
    return (minval + (maxval - minval) * u).astype(dtype)


def _erf_normal(v, b: int, dtype):
    """√2·erf⁻¹(w), w = (2v + 1)/2^b − 1: the 2^b midpoints of (−1, 1), exact in ``dtype`` for
    b ≤ 24 (float32) or b ≤ 53 (float64)."""
    w = (2 * v.astype(jnp.int64 if b > 32 else jnp.int32) + 1 - 2**b).astype(dtype) * 2.0**-b
    return math.sqrt(2.0) * jax.lax.erf_inv(w)


def normal_from_bits(raw, dtype=jnp.float32) -> jax.Array:
    """Standard normals from one uint32 word each, by the inverse CDF from its top 24 bits; tails
    cut at ≈ 5.4σ, like ``jax.random.normal``'s float32 23 bits."""
    return _erf_normal(raw >> 8, 24, _float(dtype))


def normal(key, shape=(), dtype=jnp.float32) -> jax.Array:
    """Standard normals by the inverse CDF from b random bits each: b = 24 in float32 (one word,
    tails at ≈ 5.4σ), 53 in float64 (two words, ≈ 8.3σ)."""
    dtype = _float(dtype)
    b = 53 if dtype == jnp.float64 else 24
    return _erf_normal(_top(key, tuple(shape), b), b, dtype)
