"""Data model of Li et al. 2023 (ICLR 2023, arXiv 2302.06015), one sample at a time.

A sample is (X, y) with y ∈ {+1, −1} and L tokens x_1..x_L ∈ R^d, each one of M patterns plus
noise:

    x_l = μ_{j(l)} + z_l,        μ_j = (κ/√2)·e_j,  j = 1..M        (d ≥ M; e_j the j-th unit vector)

so ‖μ_j − μ_k‖ = κ for j ≠ k (κ = √2, the default, gives orthonormal μ_j = e_j *(assumed)*). With
d > M the patterns sit in the first M coordinates and the other d − M carry noise only.

Roles of the tokens (``role``):

    relevant   (RELEVANT = 0):   j(l) = 1 if y = +1, 2 if y = −1    (the own class's pattern)
    confusion  (CONFUSION = 1):  j(l) = 2 if y = +1, 1 if y = −1    (the other class's pattern)
    irrelevant (IRRELEVANT = 2): j(l) ~ Uniform{3..M}               (label-irrelevant patterns)

α_* is the fraction of relevant tokens, α_# the fraction of confusion tokens (default α_# = α_*/6
*(assumed)*). The theory needs α_* comfortably above α_# (α_* ≥ α_#/c, c < 1/(2e)); the spec
only rejects α_* ≤ α_#.

Token counts (``counts``):
- ``"fixed"`` (default) *(assumed)*: exactly n_* relevant and n_# confusion tokens, the rest
  irrelevant, at positions shuffled by a uniform random permutation. The counts are integers:
  given as ``n_star``, ``n_hash``, or resolved from α_*, α_# as [α·L] (rounding to the nearest
  integer with ties rounded *down*, :func:`n_tokens`; a 10⁻³ tolerance makes it agree between
  Python and float32 inside jit). Without α_# or n_#, n_# = ⌊n_*/6⌋ (the sheet's α_# = α_*/6,
  rounded so that n_#/n_* ≤ 1/6 < 1/(2e), the theory's condition). The spec then *stores the
  realised fractions* α_* = n_*/L, α_# = n_#/L, so every α on a grid axis, in a cell and in a fit
  is a realised count (rounding α_*·L and α_#·L independently made two columns of a grid the same
  distribution). The spec requires n_* > n_#, so y is the majority vote sign(#μ₁ − #μ₂), as the
  paper states.
- ``"binomial"``: each token independently relevant w.p. α_*, confusion w.p. α_#, else
  irrelevant. The label stays the generating class, so a sample can have n_* ≤ n_# (its majority
  vote then disagrees with y): an irreducible error that :func:`oracle_error` shows.

Noise z_l (``noise``), at level τ:
- ``"ball"`` (default): uniform in the ball ‖z‖ ≤ τ (the paper's bounded noise) *(assumed
  distribution)*;
- ``"gaussian"``: z ~ N(0, τ²/d · I_d), so E‖z‖² = τ²;
- ``"coord"``: z ~ N(0, τ² I_d), a per-coordinate std τ (E‖z‖² = dτ²).

Variants (the sheet's (a) and (b)):
- noisy tokens: a uniformly random subset of [noisy_frac·L] positions (independent of the roles)
  uses the level ``noisy_tau`` (default 1.0 *(assumed)*) instead of τ.
- spurious pattern *(assumed construction)*: μ₃ becomes correlated with y in the *training* set
  only. An irrelevant token is an "extra" μ₃ with probability p_y, and otherwise drawn uniformly
  from μ₃..μ_M as above, with

      training: p_{+1} = spurious,  p_{−1} = 0;        test: p_{+1} = p_{−1} = spurious/2.

  Both sets have the same marginal frequency of μ₃; only its correlation with y differs. At
  spurious = 0 this is the plain model (continuous in ``spurious``), and μ₃ still occurs
  (at rate 1/(M−2)) in both classes: the indicator is the *extra* rate in class +1.

Token sparsification at training time (``sparsify``, ``sparsify_k``): every training sample
loses k tokens from its mask S, chosen by one of the oracles of :mod:`attnlab.data.sparsify`
(label-irrelevant first, noisiest first, random), from the cell's ``sparsify`` stream; with
``sparsify_test`` the test samples too. (The attention scorer needs a trained model: it acts at
test time only, in li2023-fig4.)

Each sample is a pytree of per-token arrays::

    {"tokens": (L, d), "mask": (L,) bool (all True: the token set S, sparsification sets it),
     "pattern": (L,) int32 (0-based j − 1), "role": (L,) int32, "noise": (L,) ‖z_l‖}

The training set is drawn from the cell's ``data`` stream, the test set from its ``test``
stream (:data:`attnlab.train.STREAMS`). Sample i is drawn from ``fold_in(key, i)`` with label +1
for even i and −1 for odd i, so even prefixes are class-balanced and a sample does not depend on
how many are drawn beside it. A sample's random bits are one draw of :mod:`attnlab.philox`
(version 3; threefry before). Every numeric field that does not change a shape (α_*, α_#, κ, τ,
noisy_frac, noisy_tau, spurious, N) may be a traced per-cell value: counts are applied with
position masks, never Python integers.
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Literal

import jax
import jax.numpy as jnp
from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt, field_validator, model_validator

from attnlab import philox
from attnlab.parts import DataModel, PartConfig, batched, register, size
from attnlab.train import stream

RELEVANT, CONFUSION, IRRELEVANT = 0, 1, 2
"""Token roles (``role`` in a sample)."""

SQRT2 = math.sqrt(2.0)
_TIE = 1e-3  # ties of α·L at k + 1/2 round down, robustly under float32 error


def n_tokens(frac, L: int):
    """[frac·L]: the nearest integer, ties rounded down (Python floats or traced arrays)."""
    if isinstance(frac, int | float):
        return max(0, math.floor(frac * L + 0.5 - _TIE))
    return jnp.maximum(jnp.floor(frac * L + 0.5 - _TIE), 0).astype(jnp.int32)


def patterns(M: int, d: int, kappa=SQRT2, dtype=jnp.float32) -> jnp.ndarray:
    """μ_1..μ_M as rows of an (M, d) array: μ_j = (κ/√2)·e_j, pairwise distance κ."""
    return (kappa / SQRT2) * jnp.eye(M, d, dtype=dtype)


def label(i):
    """Label of sample i: +1 for even i, −1 for odd i (balanced prefixes)."""
    return jnp.where(i % 2 == 0, 1.0, -1.0)


def _noise(g, u, level, kind, dtype):
    """z_l at per-token level ``level`` from standard normals g (L, d); ``u`` ∈ [0, 1)^L is spare
    randomness (the ball's radius)."""
    d = g.shape[-1]
    if kind == "ball":  # uniform in the ball: direction × level·U^{1/d}
        return g / jnp.linalg.norm(g, axis=-1, keepdims=True) * (level * u.astype(dtype) ** (1.0 / d))[:, None]
    if kind == "gaussian":  # E‖z‖² = level²
        return g * (level[:, None] / math.sqrt(d))
    if kind == "coord":  # per-coordinate std = level
        return g * level[:, None]
    raise ValueError(f"noise: unknown kind {kind!r}")


def _ranks(bits):
    """Ranks of random keys: a uniformly random permutation of 0..L−1."""
    return jnp.zeros(bits.shape, jnp.int32).at[jnp.argsort(bits)].set(jnp.arange(bits.shape[0], dtype=jnp.int32))


def sample(
    key,
    i,
    *,
    alpha_star,
    alpha_hash,
    tau,
    M,
    d,
    L,
    kappa=SQRT2,
    noise="ball",
    noisy_frac=0.0,
    noisy_tau=1.0,
    spurious=0.0,
    counts="fixed",
    train=True,
    dtype=jnp.float32,
):
    """Draw sample i: returns ({"tokens", "mask", "pattern", "role", "noise"}, y).

    ``train`` selects the spurious rule (training set: μ₃ correlated with y; test: not)."""
    y = label(i).astype(dtype)
    # one draw of random bits per sample, for everything (one Philox draw: fast, one trace):
    # per token 5 keys/uniforms (role rank, irrelevant pattern, spurious, noisy rank, ball radius)
    # and d bits for the normals of its noise
    raw = philox.bits(jax.random.fold_in(key, i), (L, 5 + d))
    bits, g = raw[:, :5].T, philox.normal_from_bits(raw[:, 5:], dtype)
    u = (bits >> 8).astype(jnp.float32) * 2.0**-24  # uniform on [0, 1), exact in float32

    # roles: fixed counts by rank of a random permutation (rank < n_* relevant, then n_# confusion)
    if counts == "fixed":
        rank = _ranks(bits[0])
        n_rel, n_conf = n_tokens(alpha_star, L), n_tokens(alpha_hash, L)
        role = jnp.where(rank < n_rel, RELEVANT, jnp.where(rank < n_rel + n_conf, CONFUSION, IRRELEVANT))
    elif counts == "binomial":
        role = jnp.where(u[0] < alpha_star, RELEVANT, jnp.where(u[0] < alpha_star + alpha_hash, CONFUSION, IRRELEVANT))
    else:
        raise ValueError(f"counts: unknown mode {counts!r}")
    role = role.astype(jnp.int32)

    # patterns (0-based): own class 0 (μ₁) for y = +1, 1 (μ₂) for y = −1
    own, other = jnp.where(y > 0, 0, 1), jnp.where(y > 0, 1, 0)
    p_extra = jnp.where(y > 0, spurious, 0.0) if train else spurious / 2
    uniform_irr = jnp.minimum(2 + jnp.floor(u[1] * (M - 2)).astype(jnp.int32), M - 1)  # Uniform{μ₃..μ_M}
    irr = jnp.where(u[2] < p_extra, 2, uniform_irr)
    pattern = jnp.where(role == RELEVANT, own, jnp.where(role == CONFUSION, other, irr)).astype(jnp.int32)

    # noise: level τ, or noisy_tau on a random subset of [noisy_frac·L] positions
    noisy = _ranks(bits[3]) < n_tokens(noisy_frac, L)
    level = jnp.where(noisy, noisy_tau, tau).astype(dtype)
    z = _noise(g, u[4], level, noise, dtype)

    x = patterns(M, d, kappa, dtype)[pattern] + z
    meta = {
        "tokens": x,
        "mask": jnp.ones(L, bool),
        "pattern": pattern,
        "role": role,
        "noise": jnp.linalg.norm(z, axis=-1),
    }
    return meta, y


_STATIC_ARGS = ("n", "M", "d", "L", "noise", "counts", "train", "dtype")


@functools.partial(jax.jit, static_argnames=_STATIC_ARGS)
def _dataset(key, n, **kw):
    return jax.vmap(lambda i: sample(key, i, **kw))(jnp.arange(n))


def dataset(key, n, **kw):
    """Draw samples 0..n−1 (``kw``: the fields of :func:`sample`, its defaults where not given):
    returns (X, y) with X a dict of arrays with leading axis n, y ∈ R^n.

    Compiled once per shape (n, M, d, L) and mode (noise, counts, train, dtype); the numeric
    fields are traced inputs (cast to ``dtype``, so Python floats and arrays share a compile)."""
    kw = _SAMPLE_DEFAULTS | kw
    dtype = jnp.dtype(kw.pop("dtype"))
    num = {k: jnp.asarray(kw.pop(k), dtype) for k in _NUMERIC}
    return _dataset(key, n, dtype=dtype, **kw, **num)


_NUMERIC = ("alpha_star", "alpha_hash", "tau", "kappa", "noisy_frac", "noisy_tau", "spurious")
_SAMPLE_DEFAULTS = {
    k: p.default for k, p in inspect.signature(sample).parameters.items() if p.default is not inspect.Parameter.empty
}


NOISE_SD = {
    "coord": lambda tau, d: tau,
    "gaussian": lambda tau, d: tau / math.sqrt(d),
    "ball": lambda tau, d: tau / math.sqrt(d + 2),
}
"""Per-coordinate standard deviation of the noise z_l at level τ in R^d, per noise law (uniform
in the τ-ball: E z_i² = τ²/(d + 2))."""


def mean_token_margin(n_star, n_hash, *, tau, d, L, kappa=SQRT2, noise="ball", noisy_frac=0.0, noisy_tau=1.0):
    """The margin z of the best linear rule on the mean token x̄ = (1/L) Σ_l x_l, per sample:

        z = (n_* − n_#)·κ/√2 / √(2·Σ_l σ_l²)

    with σ_l the per-coordinate noise sd of token l (:data:`NOISE_SD`; [noisy_frac·L] tokens at
    noisy_tau). Why: with orthogonal patterns μ_j = (κ/√2)e_j the irrelevant patterns and the
    coordinates beyond μ₁, μ₂ are independent of y, so the best rule is y·(x̄₁ − x̄₂), whose mean
    is (n_* − n_#)κ/(√2·L) and whose sd is √(2Σ_l σ_l²)/L (exactly normal for Gaussian noise, by
    the central limit for ball noise). Its error per sample is Φ(−z)."""
    k = n_tokens(noisy_frac, L)
    sd = NOISE_SD[noise]
    var = (L - k) * sd(tau, d) ** 2 + k * sd(noisy_tau, d) ** 2
    return (n_star - n_hash) * kappa / SQRT2 / math.sqrt(2 * var) if var > 0 else math.inf


def floor_success(z: float, n_test: int) -> float:
    """P(zero errors on n_test fresh samples) of the best mean-token rule of margin z: Φ(z)^n_test."""
    from scipy.stats import norm

    return float(norm.cdf(z) ** n_test)


def margin_of(fields: dict) -> float:
    """:func:`mean_token_margin` of a validated spec's fields (realised counts)."""
    L = fields["L"]
    return mean_token_margin(
        n_tokens(fields["alpha_star"], L),
        n_tokens(fields["alpha_hash"], L),
        tau=fields["tau"],
        d=fields["d"],
        L=L,
        kappa=fields["kappa"],
        noise=fields["noise"],
        noisy_frac=fields["noisy_frac"],
        noisy_tau=fields["noisy_tau"],
    )


@functools.partial(jax.jit, static_argnames=("M",))
def oracle_votes(X, *, M: int, kappa=SQRT2, mask=None):
    """#tokens nearest to μ₁ − #tokens nearest to μ₂ per sample (nearest of all M patterns,
    counting only tokens in the mask S). X: a dataset's dict or its tokens (n, L, d)."""
    if isinstance(X, dict):
        X, mask = X["tokens"], X.get("mask") if mask is None else mask
    mu = patterns(M, X.shape[-1], kappa, X.dtype)
    score = X @ mu.T - 0.5 * jnp.sum(mu**2, axis=-1)  # argmax = argmin ‖x − μ_j‖
    nearest = jnp.argmax(score, axis=-1)
    keep = jnp.ones(nearest.shape, bool) if mask is None else mask
    return jnp.sum((nearest == 0) & keep, axis=-1) - jnp.sum((nearest == 1) & keep, axis=-1)


@functools.partial(jax.jit, static_argnames=("M", "per_sample"))
def oracle_error(X, y, *, M: int, kappa=SQRT2, mask=None, per_sample=False):
    """Test error of the oracle that knows the patterns: predict sign(#near μ₁ − #near μ₂), a tie
    counting as error 1/2. The floor beside a phase diagram: separates a sample-size boundary
    (learning failure) from Bayes error (noise or confusion tokens)."""
    v = oracle_votes(X, M=M, kappa=kappa, mask=mask)
    err = jnp.where(v == 0, 0.5, (jnp.sign(v) != jnp.sign(y)).astype(jnp.float32))
    return err if per_sample else jnp.mean(err)


class Spec(PartConfig):
    """Fields of the li2023 data model (``data.*``)."""

    M: int = Field(20, description="number of patterns M (μ₁, μ₂ discriminative, μ₃..μ_M irrelevant)")
    d: PositiveInt = Field(20, description="token dimension d (≥ M; patterns in the first M coordinates)")
    L: PositiveInt = Field(50, description="tokens per sample L")
    alpha_star: float = batched(
        0.3, ge=0, le=1, description="fraction of label-relevant tokens α_* (fixed counts: n_*/L)"
    )
    alpha_hash: float | None = batched(
        None, ge=0, le=1, description="fraction of confusion tokens α_# (default: ⌊n_*/6⌋/L, or α_*/6 for binomial)"
    )
    n_star: PositiveInt | None = Field(
        None, exclude=True, description="label-relevant tokens per sample n_* (sets α_* = n_*/L; fixed counts)"
    )
    n_hash: int | None = Field(
        None, ge=0, exclude=True, description="confusion tokens per sample n_# (sets α_# = n_#/L; default ⌊n_*/6⌋)"
    )
    kappa: PositiveFloat = batched(SQRT2, description="pattern distance κ (√2: orthonormal patterns)")
    tau: NonNegativeFloat = batched(0.2, description="token noise level τ")
    noise: Literal["ball", "gaussian", "coord"] = Field(
        "ball", description="noise law: uniform in the τ-ball, N(0, τ²/d I) or per-coordinate std τ"
    )
    noisy_frac: float = batched(0.0, ge=0, le=1, description="fraction of tokens at the larger noise level noisy_tau")
    noisy_tau: NonNegativeFloat = batched(1.0, description="noise level of the noisy tokens")
    spurious: float = batched(0.0, ge=0, le=1, description="extra rate of μ₃ in class +1, training set only")
    counts: Literal["fixed", "binomial"] = Field(
        "fixed", description="token roles: exact counts [α·L] or independent per token"
    )
    sparsify: Literal["none", "irrelevant", "noisiest", "random"] = Field(
        "none", description="token removal at training time (attnlab.data.sparsify): which tokens go first"
    )
    sparsify_k: int = batched(0, ge=0, description="tokens removed from every training sample (sparsify)")
    sparsify_test: bool = Field(False, description="remove the same way from the test samples too")
    N: PositiveInt = size(100, description="training samples N (sample i has y = +1 for even i)")
    n_test: PositiveInt = Field(1000, description="fresh test samples")

    @field_validator("M")
    @classmethod
    def _m(cls, M):
        if M < 3:
            raise ValueError(f"need M ≥ 3 patterns (μ₁, μ₂ and at least one label-irrelevant), got {M}")
        return M

    @model_validator(mode="after")
    def _consistent(self):
        if self.counts == "fixed":
            self._resolve_counts()
        elif self.n_star is not None or self.n_hash is not None:
            raise ValueError("data.n_star: token counts need counts = 'fixed' (binomial draws them per token)")
        if self.alpha_hash is None:
            self._resolve(alpha_hash=self.alpha_star / 6)
        if self.d < self.M:
            raise ValueError(f"data.d: the M = {self.M} patterns are orthogonal, so d ≥ M is needed, got d = {self.d}")
        _check_fractions(self.alpha_star, self.alpha_hash)
        if self.sparsify_k > self.L - 1:
            raise ValueError(f"data.sparsify_k: removing {self.sparsify_k} of L = {self.L} tokens leaves none")
        if self.sparsify_k and self.sparsify == "none":
            raise ValueError("data.sparsify_k: set data.sparsify to the strategy that picks the tokens")
        if self.spurious > 0 and self.M < 4:
            raise ValueError(
                f"data.spurious: a spurious pattern μ₃ needs M ≥ 4 (another irrelevant pattern), got M = {self.M}"
            )
        return self

    def _resolve_counts(self):
        """n_*, n_# from the counts or the fractions; α_*, α_# set to the realised n/L."""
        given = self.model_fields_set
        if self.n_star is not None and "alpha_star" in given:
            raise ValueError("data.n_star: give the relevant tokens as n_star or as alpha_star, not both")
        if self.n_hash is not None and self.alpha_hash is not None:
            raise ValueError("data.n_hash: give the confusion tokens as n_hash or as alpha_hash, not both")
        L = self.L
        n_s = self.n_star if self.n_star is not None else n_tokens(self.alpha_star, L)
        if self.n_hash is not None:
            n_h = self.n_hash
        else:
            n_h = n_tokens(self.alpha_hash, L) if self.alpha_hash is not None else n_s // 6
        if n_s > L:
            raise ValueError(f"data.n_star: {n_s} relevant tokens exceed L = {L}")
        # the given fractions are checked as given (the message names them), then the realised counts
        a, h = self.alpha_star, self.alpha_hash
        if h is not None and "alpha_star" in given:
            _check_fractions(a, h)
        if n_s <= n_h:
            what = f"[α_*·L] = {n_s}" if self.n_star is None else f"n_* = {n_s}"
            raise ValueError(
                f"data.alpha_star: with counts = 'fixed', {what} relevant tokens must exceed n_# = {n_h} "
                "confusion tokens (the label is the majority vote)"
            )
        if n_s + n_h > L:
            raise ValueError(f"data.alpha_hash: n_* + n_# = {n_s} + {n_h} tokens exceed L = {L}")
        self._resolve(alpha_star=n_s / L, alpha_hash=n_h / L)


def _check_fractions(a: float, h: float) -> None:
    if a + h > 1 + 1e-12:
        raise ValueError(f"data.alpha_hash: α_* + α_# = {a:g} + {h:g} exceeds 1")
    if a <= h:
        raise ValueError(f"data.alpha_star: α_* = {a:g} must exceed α_# = {h:g} (the theory needs α_* ≫ α_#)")


def _sparsified(X, strategy, k, key):
    """X with k tokens of every sample removed from its mask by ``strategy`` (one key per sample)."""
    from attnlab.data import sparsify  # it reads this module's token roles

    keys = jax.random.split(key, X["mask"].shape[0])
    return jax.vmap(lambda x, kk: sparsify.remove(x, k, sparsify.priority(x, strategy, kk)))(X, keys)


def make(key, v, s, pads, shared, dtype):
    """Training set (padded to ``pads['N']``, first v['N'] real) and test set of one cell; with
    ``sparsify`` the training samples (and with ``sparsify_test`` the test samples) lose
    ``sparsify_k`` tokens each, chosen from the cell's ``sparsify`` stream."""
    kw = {k: v[k] for k in Spec.with_role("batched") if k != "sparsify_k"} | {
        k: s[k] for k in ("M", "d", "L", "noise", "counts")
    }
    n_pad = pads["N"]
    X, y = dataset(stream(key, "data"), n_pad, train=True, dtype=dtype, **kw)
    X_test, y_test = dataset(stream(key, "test"), s["n_test"], train=False, dtype=dtype, **kw)
    if s["sparsify"] != "none":
        k_sp = stream(key, "sparsify")
        X = _sparsified(X, s["sparsify"], v["sparsify_k"], jax.random.fold_in(k_sp, 0))
        if s["sparsify_test"]:
            X_test = _sparsified(X_test, s["sparsify"], v["sparsify_k"], jax.random.fold_in(k_sp, 1))
    return {"X": X, "y": y, "mask": jnp.arange(n_pad) < v["N"], "X_test": X_test, "y_test": y_test}


def _footprint(s, pads):
    n = pads["N"] + s["n_test"]
    return n, n * s["L"] * (4 * s["d"] + 1 + 4 + 4 + 4)  # tokens, mask, pattern, role, noise


PART = register(
    DataModel(
        name="li2023",
        version=3,
        config=Spec,
        input_shape=lambda s: {"tokens": s["L"], "d": s["d"]},
        make=make,
        footprint=_footprint,
    )
)
