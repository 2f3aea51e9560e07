"""Empirical neural tangent kernel, its per-block contributions, spectra and movement; the
closed-form infinite-width NTK of the wu2023 model under τ₀ = d_m^{−1}.

Empirical NTK (any model)
-------------------------
For a scalar model f(θ; x) and inputs x_1..x_{n1}, x'_1..x'_{n2}:

    K = J₁ J₂ᵀ,   J₁ = ∂f(θ; x_i)/∂θ ∈ R^{n1×P},   K_{ij} = ⟨∇_θ f(x_i), ∇_θ f(x'_j)⟩
      = Σ_b K^b,   K^b_{ij} = ⟨∇_{θ_b} f(x_i), ∇_{θ_b} f(x'_j)⟩    (one block b per parameter)

:func:`empirical_ntk` computes it along one of two paths (``method``):

* ``"jacobian"``: per-sample gradients ``vmap(grad f)`` (or ``lax.map`` over chunks of
  ``chunk`` samples), then one matrix product per block. Memory (n1 + n2)·P numbers plus the
  activations of the samples processed at once; the fast path whenever J fits.
* ``"jvp"``: never holds J. For each x'_j (``lax.map``, ``chunk`` at a time) the gradient
  g_j = ∇_θ f(x'_j) (P numbers) is pushed forward through every x_i: K_{:, j} = J₁ g_j is one
  ``jvp`` per sample (``vmap`` over X1), one per block when ``blocks=True``. Memory O(P + n1 ×
  activations); n2 gradients and n1·n2 (× blocks) forward-mode passes.
* ``"auto"`` (default): ``jacobian`` when the Jacobians take at most ``max_bytes`` (1 GiB),
  else ``jvp``. The choice depends on shapes only, so it is made at trace time.

Both paths are pure JAX: jittable, and vmappable over a batch of parameter sets (cells).

Infinite-width limit of wu2023 under τ₀ = d_m^{−1}
---------------------------------------------------
The wu2023 model (:mod:`attnlab.models.wu2023`), untied, no W_F, H fixed heads, writes

    f(X) = τ₁ Σ_j w_j (1/d_s) Σ_t ReLU(A_tj),   A_tj = Σ_s φ_ts v_sj,   v_sj = m (W_V,j · x_s),
    S_ts = τ₀ m² Σ_{j ∈ head} (W_Q,j · x_t)(W_K,j · x_s),

with the init scheme's draws W ~ N(0, σ²), w_j ~ N(0, σ_O²) and multipliers m, τ₁:

    init    m²σ² (=: s²)   σ_O²      τ₁²        m²
    lecun   1/d            1/d_m     1          1
    he      2/d            2/d_m     1          1
    ntk     1/d            1          1/d_m      1/d

*Attention becomes uniform.* S_ts is a sum of d_h independent products of mean 0 (W_Q ⟂ W_K)
and std s²‖x_t‖‖x_s‖, so S_ts = O(τ₀ √d_h s² ‖x‖²) = O(d_m^{−1/2} ‖x‖²/d) under τ₀ = d_h^{−1}:
φ_ts = 1/d_s + O(d_m^{−1/2}), A_tj → u_j := m W_V,j · x̄ for every token t, where
x̄ = (1/d_s) Σ_s x_s is the mean token, and

    f → f_∞(x̄) = τ₁ Σ_j w_j ReLU(u_j):   a two-layer ReLU net on the mean token.

*Its NTK.* With u_j ~ N(0, s²‖x̄‖²) and the arc-cosine kernels (θ = ∠(x̄, x̄'))

    κ₁(a, b) = E_g[ReLU(gᵀa) ReLU(gᵀb)] = (‖a‖‖b‖ / 2π) (sin θ + (π − θ) cos θ),
    κ₀(a, b) = E_g[1{gᵀa > 0} 1{gᵀb > 0}] = (π − θ) / 2π,                  g ~ N(0, I_d),

the law of large numbers over the d_m units gives

    K^{w_O} = τ₁² Σ_j ReLU(u_j) ReLU(u'_j)                ≈ τ₁² d_m s² κ₁(x̄, x̄')
    K^{W_V} = τ₁² m² x̄ᵀx̄' Σ_j w_j² 1{u_j>0} 1{u'_j>0}    ≈ τ₁² m² d_m σ_O² x̄ᵀx̄' κ₀(x̄, x̄')

*W_Q and W_K drop out.* They enter only through the logits, ∝ τ₀:
∂f/∂W_Q,j = Σ_ts (∂f/∂S_ts) τ₀ m² (W_K,j · x_s) x_t, where ∂f/∂S_ts =
(τ₁/d_s) φ_ts Σ_j w_j 1{A_tj>0}(v_sj − A_tj) is O(1) under every scheme (d_m mean-zero terms
of size τ₁|w_j| ~ d_m^{−1/2}). Each of the d_m rows of the gradient is O(τ₀) = O(d_m^{−1}), so
K^{W_Q}, K^{W_K} = O(d_m τ₀²) = O(d_m^{−1}), against K^{w_O} = Θ(d_m) (lecun, he) or Θ(1) (ntk).
(Under τ₀ = d_m^{−1/2} the same count gives O(1): the QK blocks do not vanish against the ntk
scale, and attention stays non-uniform.)

*Normalised limit* (:func:`normalised`: K/d_m under lecun and he, K under ntk):

    init    K^{w_O}           K^{W_V}                   K^{W_Q}, K^{W_K}
    lecun   κ₁ / d            x̄ᵀx̄' κ₀ / d_m   (→ 0)      O(d_m^{−2})
    he      2 κ₁ / d          2 x̄ᵀx̄' κ₀ / d_m (→ 0)      O(d_m^{−2})
    ntk     κ₁ / d            x̄ᵀx̄' κ₀ / d               O(d_m^{−1})

:func:`limit_ntk` returns this table (the W_V term at the given d_m; dropped for d_m = None
under lecun/he). The finite-width error is O(d_m^{−1/2}) relative: the Monte-Carlo error of the
sums over the d_m units and the O(d_m^{−1/2}) deviation of the attention from uniform.

Not covered by the limit: tied W_Q = W_K (then S_ts has mean τ₀ d_h s² x_tᵀx_s = O(x_tᵀx_s/d):
attention stays non-uniform), and the W_F option (another layer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.errors import AttnlabError

METHODS = ("auto", "jacobian", "jvp")
INITS = ("lecun", "he", "ntk")
_HI = jax.lax.Precision.HIGHEST  # no reduced-precision matmuls (TF32) in kernels


# ---------------------------------------------------------------- empirical NTK


def _scalar(apply_fn: Callable) -> Callable:
    """(params, x) -> f as a 0-d array; an (f, aux) output (the model convention) gives f."""

    def f(params, x):
        out = apply_fn(params, x)
        if isinstance(out, tuple):
            out = out[0]
        return jnp.reshape(out, ())

    return f


def _n(X) -> int:
    return jax.tree.leaves(X)[0].shape[0]


def _map(fn, xs, chunk):
    """fn over the leading axis of xs: vmap (chunk None) or lax.map over chunks of ``chunk``."""
    return jax.vmap(fn)(xs) if chunk is None else jax.lax.map(fn, xs, batch_size=chunk)


def _flat(x, n):
    return x.reshape(n, -1)


def _jacobian_kernel(f, params, X1, X2, chunk):
    """Per-block kernels from the materialised per-sample Jacobians."""
    J1 = _map(lambda x: jax.grad(f)(params, x), X1, chunk)
    J2 = J1 if X2 is None else _map(lambda x: jax.grad(f)(params, x), X2, chunk)
    n1, n2 = _n(X1), _n(X1 if X2 is None else X2)
    return {b: jnp.matmul(_flat(J1[b], n1), _flat(J2[b], n2).T, precision=_HI) for b in params}


def _jvp_kernel(f, params, X1, X2, blocks, chunk):
    """Columns K[:, j] = J₁ ∇f(x'_j) by forward-mode products; J is never held."""
    X2 = X1 if X2 is None else X2

    def column(x2):
        g = jax.grad(f)(params, x2)
        if not blocks:
            push = lambda x1: jax.jvp(lambda p: f(p, x1), (params,), (g,))[1]
            return {"all": jax.vmap(push)(X1)}
        out = {}
        for b in params:
            push = lambda x1, b=b: jax.jvp(lambda pb: f({**params, b: pb}, x1), (params[b],), (g[b],))[1]
            out[b] = jax.vmap(push)(X1)
        return out

    cols = jax.lax.map(column, X2, batch_size=chunk)  # (n2, n1) per block
    return {b: c.T for b, c in cols.items()}


def empirical_ntk(
    apply_fn: Callable,
    params: dict,
    X1,
    X2=None,
    blocks: bool = False,
    *,
    wrt: tuple[str, ...] | None = None,
    method: str = "auto",
    chunk: int | None = None,
    max_bytes: int = 2**30,
):
    """The empirical NTK K = J₁ J₂ᵀ (n1, n2) of ``apply_fn(params, x)`` (the scalar output for
    one sample, or an (f, aux) pair) at ``params``, between the samples of X1 and X2 (per-sample
    pytrees with a leading sample axis; X2 = None: X1, and K is symmetrised exactly). With
    ``blocks=True``: a dict parameter name -> its block K^b (they sum to K). ``wrt``: the
    parameters differentiated (default all; the others are held fixed). ``method``/``chunk``:
    see the module docstring."""
    if method not in METHODS:
        raise AttnlabError(f"ntk.method: unknown {method!r}; valid: {', '.join(METHODS)}")
    f0 = _scalar(apply_fn)
    names = tuple(params) if wrt is None else tuple(wrt)
    unknown = sorted(set(names) - set(params))
    if unknown:
        raise AttnlabError(f"ntk.wrt: unknown parameter(s) {unknown}; valid: {', '.join(params)}")
    theta = {k: params[k] for k in names}
    fixed = {k: v for k, v in params.items() if k not in theta}
    f = lambda th, x: f0({**fixed, **th}, x)
    if method == "auto":
        n = _n(X1) + (0 if X2 is None else _n(X2))
        size = sum(int(np.prod(v.shape)) * v.dtype.itemsize for v in theta.values())
        method = "jacobian" if n * size <= max_bytes else "jvp"
    if method == "jacobian":
        Kb = _jacobian_kernel(f, theta, X1, X2, chunk)
        if not blocks:
            Kb = {"all": sum(Kb.values())}
    else:
        Kb = _jvp_kernel(f, theta, X1, X2, blocks, chunk)
    if X2 is None:
        Kb = {b: (K + K.T) / 2 for b, K in Kb.items()}
    return Kb if blocks else Kb["all"]


# ---------------------------------------------------------------- spectra and movement


def _masked(K, mask):
    return K if mask is None else jnp.where(mask[:, None] & mask[None, :], K, 0)


def spectrum(K, mask=None) -> dict[str, jax.Array]:
    """Eigenvalues (ascending) of the symmetric part of K, with ``lambda_min`` and
    ``lambda_max``. With a sample ``mask`` (n,) bool: the spectrum of the kernel of the kept
    samples; the n − |kept| slots of the excluded ones come first and hold NaN (jittable: the
    excluded rows are replaced by a diagonal entry below every eigenvalue of the kept block)."""
    K = (K + K.T) / 2
    if mask is None:
        ev = jnp.linalg.eigvalsh(K)
        return {"eigvals": ev, "lambda_min": ev[0], "lambda_max": ev[-1]}
    Kk = _masked(K, mask)
    below = -2 * jnp.linalg.norm(Kk) - jnp.finfo(K.dtype).tiny
    ev = jnp.linalg.eigvalsh(Kk + jnp.diag(jnp.where(mask, 0, below)))
    n_out = jnp.sum(~mask)
    return {
        "eigvals": jnp.where(jnp.arange(K.shape[0]) < n_out, jnp.nan, ev),
        "lambda_min": ev[jnp.minimum(n_out, K.shape[0] - 1)],
        "lambda_max": ev[-1],
    }


def kernel_drift(K_t, K_0, mask=None):
    """‖K_t − K_0‖_F / ‖K_0‖_F (over the kept samples with a ``mask``)."""
    return jnp.linalg.norm(_masked(K_t - K_0, mask)) / jnp.linalg.norm(_masked(K_0, mask))


def weight_drift(theta_t: dict, theta_0: dict) -> dict[str, jax.Array]:
    """Per parameter block: ‖θ_t − θ_0‖_F / ‖θ_0‖_F."""
    return {k: jnp.linalg.norm(theta_t[k] - theta_0[k]) / jnp.linalg.norm(theta_0[k]) for k in theta_0}


# ---------------------------------------------------------------- wu2023: infinite-width limit


def _check_init(init):
    if init not in INITS:
        raise AttnlabError(f"model.init: unknown init {init!r}; valid: {', '.join(INITS)}")


def normalised(K: Any, init: str, d_m: int):
    """The wu2023 NTK on its O(1) scale: K/d_m under lecun and he (where it grows ∝ d_m), K
    under ntk. ``K`` may be a kernel or a dict of blocks."""
    _check_init(init)
    c = 1.0 if init == "ntk" else 1.0 / d_m
    return jax.tree.map(lambda k: c * k, K)


def arccos_kernels(A, B):
    """(κ₀, κ₁) between the rows of A (n1, d) and B (n2, d):
    κ₀ = (π − θ)/2π, κ₁ = (‖a‖‖b‖/2π)(sin θ + (π − θ) cos θ), θ = ∠(a, b)."""
    na, nb = jnp.linalg.norm(A, axis=-1), jnp.linalg.norm(B, axis=-1)
    norms = na[:, None] * nb[None, :]
    cos = jnp.clip(jnp.matmul(A, B.T, precision=_HI) / jnp.where(norms > 0, norms, 1), -1.0, 1.0)
    theta = jnp.arccos(cos)
    k0 = (jnp.pi - theta) / (2 * jnp.pi)
    k1 = norms / (2 * jnp.pi) * (jnp.sin(theta) + (jnp.pi - theta) * cos)
    return k0, k1


def limit_ntk(X1, X2=None, init: str = "lecun", d: int | None = None, d_m: int | None = None, blocks=False):
    """The infinite-width NTK of the wu2023 model (untied, no W_F) under τ₀ = d_m^{−1} between
    token arrays X1 (n1, d_s, d) and X2 (n2, d_s, d) (None: X1), normalised as :func:`normalised`
    (see the table in the module docstring): the two-layer ReLU NTK of the mean tokens. ``d``:
    the token dimension (default X1's); ``d_m``: the width at which the W_V block's leading term
    is evaluated under lecun/he (None: the strict limit, where it vanishes). ``blocks=True``: a
    dict {"W_Q", "W_K", "W_V", "w_O"} (W_Q, W_K zero)."""
    _check_init(init)
    X2 = X1 if X2 is None else X2
    d = X1.shape[-1] if d is None else d
    m1, m2 = X1.mean(axis=-2), X2.mean(axis=-2)  # mean tokens x̄
    k0, k1 = arccos_kernels(m1, m2)
    lin = jnp.matmul(m1, m2.T, precision=_HI) * k0  # x̄ᵀx̄' κ₀
    gain = 2.0 if init == "he" else 1.0
    K_O = gain * k1 / d
    if init == "ntk":
        K_V = lin / d
    else:
        K_V = gain * lin / d_m if d_m is not None else jnp.zeros_like(lin)
    out = {"W_Q": jnp.zeros_like(lin), "W_K": jnp.zeros_like(lin), "W_V": K_V, "w_O": K_O}
    return out if blocks else K_O + K_V
