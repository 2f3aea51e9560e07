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
IMPLEMENTATIONS = ("jacobian_contraction", "ntk_vector_products", "auto")
INITS = ("lecun", "he", "ntk")
_HI = jax.lax.Precision.HIGHEST  # no reduced-precision matmuls (TF32) in kernels


# ---------------------------------------------------------------- empirical NTK


def _path(keys) -> str:
    """A parameter's path as "a/b/0" (dict keys, attribute names, sequence indices)."""
    name = lambda k: str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k))))
    return "/".join(name(k) for k in keys)


def _selected(params, wrt) -> list[str]:
    """The paths of the leaves differentiated: all (``wrt`` None), those equal to or under one of
    the paths in ``wrt``, or those for which ``wrt(path)`` is true."""
    paths = [_path(k) for k, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
    if wrt is None:
        return paths
    if callable(wrt):
        return [q for q in paths if wrt(q)]
    wrt = (wrt,) if isinstance(wrt, str) else tuple(wrt)
    unknown = [w for w in wrt if not any(q == w or q.startswith(w + "/") for q in paths)]
    if unknown:
        raise AttnlabError(f"ntk.wrt: unknown parameter(s) {unknown}; valid: {', '.join(paths)}")
    return [q for q in paths if any(q == w or q.startswith(w + "/") for w in wrt)]


def _split(params, wrt):
    """(θ: path -> leaf of the differentiated parameters, rebuild(θ) -> the full pytree)."""
    flat, tree = jax.tree_util.tree_flatten_with_path(params)
    chosen = set(_selected(params, wrt))
    theta = {_path(k): v for k, v in flat if _path(k) in chosen}

    def rebuild(th):
        return jax.tree_util.tree_unflatten(tree, [th.get(_path(k), v) for k, v in flat])

    return theta, rebuild


def _n(X) -> int:
    return jax.tree.leaves(X)[0].shape[0]


def _one(x):
    return jax.tree.map(lambda a: a[None], x)


def _map(fn, xs, chunk):
    """fn over the leading axis of xs: vmap (chunk None) or lax.map over chunks of ``chunk``."""
    return jax.vmap(fn)(xs) if chunk is None else jax.lax.map(fn, xs, batch_size=chunk)


def _jacobians(g, theta, X, vmap_axes, chunk):
    """path -> ∂g(θ, X)/∂θ_path of shape (n, *out, *leaf): per sample (vmap_axes = 0: g treats
    the samples of a batch independently) or of the whole batch (vmap_axes = None)."""
    if vmap_axes is None:
        return jax.jacrev(g)(theta, X)
    return _map(lambda x: jax.tree.map(lambda j: j[0], jax.jacrev(g)(theta, _one(x))), X, chunk)


def _contract(J1, J2, k: int, trace, diagonal):
    """Σ over a leaf's axes of J1[i, o…, p…] J2[j, o'…, p…], with the output axes traced
    (averaged), diagonal (one axis) or kept (a pair of axes, x1's then x2's)."""
    letters = iter("abcdefghklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    o1, o2, out = [], [], ["i", "j"]
    for a in range(1, k + 1):
        u = next(letters)
        if a in trace:
            o1.append(u), o2.append(u)
        elif a in diagonal:
            o1.append(u), o2.append(u), out.append(u)
        else:
            v = next(letters)
            o1.append(u), o2.append(v), out.extend((u, v))
    leaf = "".join(next(letters) for _ in range(J1.ndim - 1 - k))
    spec = f"i{''.join(o1)}{leaf},j{''.join(o2)}{leaf}->{''.join(out)}"
    traced = int(np.prod([J1.shape[a] for a in trace]))
    return jnp.einsum(spec, J1, J2, precision=_HI) / traced


def _trace_diagonal(K, k: int, trace, diagonal):
    """A full kernel (n1, n2, o1_1, o2_1, …) reduced as :func:`_contract` reduces Jacobians."""
    eye = jnp.ones((), K.dtype)
    for a in range(k, 0, -1):  # innermost first: axes 2a and 2a + 1 of the remaining kernel
        i, j = 2 * a, 2 * a + 1
        if a in trace:
            K = jnp.trace(K, axis1=i, axis2=j) / K.shape[i]
        elif a in diagonal:
            K = jnp.moveaxis(jnp.diagonal(K, axis1=i, axis2=j), -1, i)
    return K * eye


def _vector_products(g, theta, x1, x2, k: int, blocks: bool, chunk):
    """K from NTK-vector products, J never held: for each output entry (j, o') of x2 the
    cotangent e gives J₂ᵀe (one vjp), pushed forward through x1 (one jvp): a column J₁J₂ᵀe."""
    y2, pull = jax.vjp(lambda th: g(th, x2), theta)
    basis = jnp.eye(y2.size, dtype=y2.dtype).reshape(y2.size, *y2.shape)

    def column(e, only=None):
        (t,) = pull(e)
        if only is not None:
            t = {b: (v if b == only else jnp.zeros_like(v)) for b, v in t.items()}
        return jax.jvp(lambda th: g(th, x1), (theta,), (t,))[1]  # (n1, *o1)

    def full(only=None):
        cols = jax.lax.map(lambda e: column(e, only), basis, batch_size=chunk)  # (n2·o2…, n1, *o1)
        n1, o1 = cols.shape[1], cols.shape[2:]
        K = cols.reshape(*y2.shape, n1, *o1)  # (n2, o2…, n1, o1…)
        K = jnp.moveaxis(K, k + 1, 0)  # (n1, n2, o2…, o1…)
        order = [0, 1] + [q for a in range(k) for q in (2 + k + a, 2 + a)]  # pairs (o1, o2)
        return jnp.transpose(K, order)

    return {b: full(b) for b in theta} if blocks else {"all": full()}


def empirical_ntk_fn(
    f: Callable,
    trace_axes: tuple[int, ...] = (-1,),
    diagonal_axes: tuple[int, ...] = (),
    vmap_axes: int | None = 0,
    implementation: str = "jacobian_contraction",
    wrt=None,
    blocks: bool = False,
    chunk: int | None = None,
    max_bytes: int = 2**30,
) -> Callable:
    """The empirical NTK as neural-tangents' ``empirical_ntk_fn`` computes it, returning
    ``ntk_fn(x1, x2, params)``. ``f(params, x)`` is applied to a batch (leading axis n) and
    returns (n, *out); ``params`` and ``x`` may be any pytrees (nested dicts, flax-style).

        Θ(x1, x2)[i, j, …] = Σ_θ ∂f(x1)_{i,…}/∂θ · ∂f(x2)_{j,…}/∂θ

    Output axes (of f's output; the batch axis 0 cannot be one): ``trace_axes`` are traced and
    **averaged** (the trace divided by the axis' size), ``diagonal_axes`` keep only their
    diagonal (one axis), every other axis appears twice, x1's then x2's. The kernel's shape is
    (n1, n2) followed by those axes in output order. ``x2 = None`` means x1 (and the kernel is
    made exactly symmetric). ``vmap_axes``: 0 when f treats the samples of a batch independently
    (per-sample Jacobians, vmapped; ``chunk`` samples at a time with lax.map), None to take the
    batch's Jacobian whole. ``implementation``: ``jacobian_contraction`` (the default:
    Jacobians held, one contraction per parameter), ``ntk_vector_products`` (never holds J:
    one vjp and one jvp per output entry of x2) or ``auto`` (the first when the Jacobians take
    at most ``max_bytes``). ``wrt``: the parameters differentiated — paths such as ``"W_Q"`` or
    ``"block/kernel"`` (a path selects every leaf under it) or a predicate on paths; the others
    are held fixed. ``blocks=True``: a dict path -> that parameter's kernel (they sum to Θ).
    Pure JAX: jittable, and vmappable over parameter sets."""
    if implementation not in IMPLEMENTATIONS:
        raise AttnlabError(f"ntk.implementation: unknown {implementation!r}; valid: {', '.join(IMPLEMENTATIONS)}")
    if vmap_axes not in (0, None):
        raise AttnlabError(f"ntk.vmap_axes: 0 (the batch axis) or None, not {vmap_axes!r}")

    def ntk_fn(x1, x2, params):
        theta, rebuild = _split(params, wrt)
        g = lambda th, x: f(rebuild(th), x)
        out = jax.eval_shape(g, theta, x1)
        k = len(out.shape) - 1
        norm = lambda axes: {a % (k + 1) for a in axes}
        trace, diagonal = norm(trace_axes), norm(diagonal_axes)
        if 0 in trace | diagonal or trace & diagonal:
            raise AttnlabError(
                "ntk: trace_axes and diagonal_axes are output axes other than the batch axis 0, and no axis is both"
            )
        how = implementation
        if how == "auto":
            n = _n(x1) + (0 if x2 is None else _n(x2))
            size = sum(int(np.prod(v.shape)) * v.dtype.itemsize for v in theta.values()) * max(1, out.size // _n(x1))
            how = "jacobian_contraction" if n * size <= max_bytes else "ntk_vector_products"
        if how == "jacobian_contraction":
            J1 = _jacobians(g, theta, x1, vmap_axes, chunk)
            J2 = J1 if x2 is None else _jacobians(g, theta, x2, vmap_axes, chunk)
            Kb = {b: _contract(J1[b], J2[b], k, trace, diagonal) for b in theta}
        else:
            full = _vector_products(g, theta, x1, x1 if x2 is None else x2, k, blocks, chunk)
            Kb = {b: _trace_diagonal(K, k, trace, diagonal) for b, K in full.items()}
        if not blocks and "all" not in Kb:
            Kb = {"all": sum(Kb.values())}
        if x2 is None:
            Kb = {b: (K + _swap(K, k, trace, diagonal)) / 2 for b, K in Kb.items()}
        return Kb if blocks else Kb["all"]

    return ntk_fn


def _swap(K, k: int, trace, diagonal):
    """Θ(x2, x1) from Θ(x1, x2): the sample axes and every kept pair exchanged."""
    order, pos = [1, 0], 2
    for a in range(1, k + 1):
        if a in trace:
            continue
        if a in diagonal:
            order.append(pos)
            pos += 1
        else:
            order += [pos + 1, pos]
            pos += 2
    return jnp.transpose(K, order)


def part_fn(model: str, fields: dict | None = None, shape: dict | None = None):
    """(f, wrt, hp) for a model part: ``f(params, X)`` its scalar output on a batch of samples,
    ``wrt`` the parameters it trains (fixed heads and frozen blocks excluded), ``hp`` its
    hparams; ``fields`` its ``model.*`` fields (validated, defaults filled), ``shape`` the data
    model's input shape (e.g. {"tokens": 3, "d": 8})."""
    from attnlab import problem

    part = problem.part("model", model)
    values = part.config(**dict(fields or {})).model_dump()
    hp = part.hparams({k: v for k, v in values.items() if k in part.static + part.batched}, dict(shape or {}))
    one = _scalar(lambda params, x: part.apply(params, x, hp))
    return (lambda params, X: jax.vmap(lambda x: one(params, x))(X)), part.trainable(hp), hp


def _scalar(apply_fn: Callable) -> Callable:
    """(params, x) -> f as a 0-d array; an (f, aux) output (the model convention) gives f."""

    def f(params, x):
        out = apply_fn(params, x)
        if isinstance(out, tuple):
            out = out[0]
        return jnp.reshape(out, ())

    return f


METHOD_NAMES = {"auto": "auto", "jacobian": "jacobian_contraction", "jvp": "ntk_vector_products"}


def empirical_ntk(
    apply_fn: Callable,
    params: dict,
    X1,
    X2=None,
    blocks: bool = False,
    *,
    wrt=None,
    method: str = "auto",
    chunk: int | None = None,
    max_bytes: int = 2**30,
):
    """The empirical NTK K = J₁ J₂ᵀ (n1, n2) of a per-sample model ``apply_fn(params, x)`` (the
    scalar output for one sample, or an (f, aux) pair) at ``params``, between the samples of X1
    and X2 (per-sample pytrees with a leading sample axis; X2 = None: X1, K symmetrised
    exactly): :func:`empirical_ntk_fn` of the batched model. ``blocks=True``: a dict parameter
    path -> its block K^b; ``wrt``: the parameters differentiated (default all);
    ``method``: ``jacobian`` | ``jvp`` | ``auto`` (see the module docstring)."""
    if method not in METHODS:
        raise AttnlabError(f"ntk.method: unknown {method!r}; valid: {', '.join(METHODS)}")
    one = _scalar(apply_fn)
    f = lambda params, X: jax.vmap(lambda x: one(params, x))(X)
    fn = empirical_ntk_fn(
        f, trace_axes=(), implementation=METHOD_NAMES[method], wrt=wrt, blocks=blocks, chunk=chunk, max_bytes=max_bytes
    )
    return fn(X1, X2, params)


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


def kernel_drift_op(K_t, K_0, mask=None):
    """‖K_t − K_0‖_op, the spectral norm (over the kept samples with a ``mask``): the proofs'
    criterion keeps it below λ_min(K_0)/2, so that λ_min(K_t) ≥ λ_min(K_0)/2 along the run."""
    return jnp.linalg.norm(_masked(K_t - K_0, mask), ord=2)


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
