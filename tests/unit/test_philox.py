"""attnlab.philox: Philox4x32-10 in the program, against Random123's known answers, a plain NumPy
implementation, and the distributions it claims."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from attnlab import philox

MASK = 0xFFFFFFFF


def reference(k0: int, k1: int, c: tuple[int, int, int, int], rounds: int = 10) -> list[int]:
    """Philox4x32 in Python integers, one block, written from the paper's round function."""
    c0, c1, c2, c3 = c
    for _ in range(rounds):
        p0, p1 = philox.M0 * c0, philox.M1 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK, (p0 >> 32) ^ c3 ^ k1, p0 & MASK
        k0, k1 = (k0 + philox.W0) & MASK, (k1 + philox.W1) & MASK
    return [c0, c1, c2, c3]


# Random123's kat_vectors for philox4x32 with 10 rounds: (counter, key, output)
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK,) * 4, (MASK, MASK), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize(("ctr", "key", "want"), KAT)
def test_known_answers_in_either_precision_mode(ctr, key, want, x64):
    with jax.enable_x64(x64):
        words = jax.jit(philox.rounds)(*(jnp.uint32(k) for k in key), *(jnp.full(3, c, jnp.uint32) for c in ctr))
    assert all(w.dtype == jnp.uint32 for w in words)
    assert [int(w[1]) for w in words] == list(want)
    assert reference(*key, ctr) == list(want)


def test_a_draw_is_the_blocks_of_its_counters_in_order():
    key = jax.random.fold_in(jax.random.key(7), 3)
    k0, k1 = (int(x) for x in jax.random.key_data(key))
    got = np.asarray(philox.bits(key, (3, 5)))  # 15 numbers: blocks 0..3, the last cut to 3 words
    want = [w for b in range(4) for w in reference(k0, k1, (b, 0, 0, 0))][:15]
    assert got.ravel().tolist() == want
    # the first n numbers of a draw do not depend on its size, nor on a raw (legacy) key
    assert np.array_equal(np.asarray(philox.bits(key, (7,))), got.ravel()[:7])
    assert np.array_equal(np.asarray(philox.bits(jax.random.key_data(key), (15,))), got.ravel())


def test_vmapped_draws_equal_one_at_a_time_and_keys_give_distinct_streams():
    keys = jax.random.split(jax.random.key(0), 5)
    bits = jax.jit(jax.vmap(lambda k: philox.bits(k, (4, 6))))(keys)
    batched = jax.jit(jax.vmap(lambda k: philox.normal(k, (4, 6))))(keys)
    for i in range(5):
        assert np.array_equal(np.asarray(bits[i]), np.asarray(philox.bits(keys[i], (4, 6))))
        # the same bits; the erf⁻¹ of two programs may round apart by an ulp
        np.testing.assert_allclose(batched[i], philox.normal(keys[i], (4, 6)), rtol=1e-6)
    flat = np.asarray(bits).reshape(5, -1)
    assert len({row.tobytes() for row in flat}) == 5
    # independent streams: the correlation between two keys' draws is that of independent samples
    a, b = (np.asarray(philox.normal(k, (200_000,))) for k in keys[:2])
    assert abs(np.corrcoef(a, b)[0, 1]) < 5 / np.sqrt(a.size)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_normal_and_uniform_have_their_distributions(dtype):
    n = 200_000
    with jax.enable_x64(dtype == "float64"):
        z = np.asarray(jax.jit(lambda k: philox.normal(k, (n,), dtype))(jax.random.key(1)))
        u = np.asarray(jax.jit(lambda k: philox.uniform(k, (n,), dtype, -2.0, 3.0))(jax.random.key(2)))
    assert z.dtype == u.dtype == np.dtype(dtype)
    # Kolmogorov–Smirnov at the 10⁻⁴ level, and the moments within 5 standard errors
    assert stats.kstest(z, "norm").pvalue > 1e-4
    assert stats.kstest(u, "uniform", args=(-2.0, 5.0)).pvalue > 1e-4
    assert abs(z.mean()) < 5 / np.sqrt(n) and abs(z.var() - 1) < 5 * np.sqrt(2 / n)
    assert -2.0 < u.min() and u.max() < 3.0
    # no two uniforms collide beyond what a grid of 2^b values allows (b = 23 or 52)
    assert len(np.unique(u)) > n - (5 if dtype == "float64" else 5_000)


def test_the_grids_are_exact_and_symmetric():
    """The float32 normal is √2·erf⁻¹ on the 2²⁴ odd multiples of 2⁻²⁴ in (−1, 1) (checked on the
    grid: the reference erf⁻¹ below runs in float32 too): its extremes
    are ±√2·erf⁻¹(1 − 2⁻²⁴), reached by the all-zero and all-one words, and mirror each other."""
    ends = philox.normal_from_bits(jnp.array([0, MASK, 2**31, 2**31 - 256], jnp.uint32))
    top = float(np.sqrt(2) * jax.scipy.special.erfinv(np.float64(1 - 2.0**-24)))
    assert float(ends[1]) == pytest.approx(top, rel=1e-5) and float(ends[0]) == -float(ends[1])
    assert float(ends[2]) == -float(ends[3]) > 0


def test_floats_take_the_top_bits_of_their_words():
    """float32 uniforms from the top 23 bits of one word, float64 from the top 52 of two (the first
    word high), float64 normals from the top 53: checked against the words themselves."""
    key = jax.random.key(11)
    w = np.asarray(philox.bits(key, (6, 2))).astype(np.uint64)
    u32 = np.asarray(philox.uniform(key, (12,), "float32"))
    assert np.array_equal(u32, ((w.ravel() >> 9).astype(np.float64) + 0.5) * 2.0**-23)
    with jax.enable_x64(True):
        u64 = np.asarray(philox.uniform(key, (6,), "float64"))
        z64 = np.asarray(philox.normal(key, (6,), "float64"))
    v52 = (w[:, 0] << 20) | (w[:, 1] >> 12)
    assert np.array_equal(u64, (v52.astype(np.float64) + 0.5) * 2.0**-52)
    v53 = (w[:, 0] << 21) | (w[:, 1] >> 11)
    w53 = (2 * v53.astype(np.int64) + 1 - 2**53).astype(np.float64) * 2.0**-53  # exact: |·| < 2⁵³
    np.testing.assert_allclose(z64, stats.norm.ppf((w53 + 1) / 2), rtol=1e-12)  # √2·erf⁻¹(w) = Φ⁻¹((w + 1)/2)


def test_bad_requests_are_refused():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="x64"):
        philox.normal(key, (3,), "float64")  # x64 off here: a float64 draw would silently be float32
    for dtype in ("float16", "bfloat16"):
        with pytest.raises(ValueError, match="float32 or float64"):
            philox.uniform(key, (3,), dtype)
    with pytest.raises(ValueError, match="one key"):
        philox.bits(jax.random.split(key, 2), (3,))
    with pytest.raises(ValueError, match="two uint32 words"):
        philox.bits(jnp.zeros(4, jnp.uint32), (3,))
    with pytest.raises(ValueError, match="more than one stream"):
        jax.eval_shape(lambda: philox.bits(key, (2**34 + 1,)))
    rbg = jax.random.key(0, impl="rbg")  # four words, hashed to two
    assert philox.bits(rbg, (5,)).shape == (5,)
