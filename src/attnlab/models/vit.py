"""A deeper Vision Transformer (timm ``vision_transformer.py``, as pure functions) for images
already cut into patches by the data model, with a scalar output for ±1 labels.

For one sample with tokens x_1..x_L ∈ R^d (patches) and kept tokens S ⊆ [L] (S = [L] without a
token mask), D the width, H heads of width d_h = D/H:

    z_l   = x_l W_E + b_E + p_l                          ∈ R^D     (patch embedding + position)
    cls:    z_0 = c + p_0 is prepended (never masked): L' = L + 1 tokens; mean: L' = L
    for each of the ``depth`` blocks (pre-LN, residual):
        u     = LN₁(z)                                   ∈ R^{L'×D}
        Q, K, V = u W_Q + b_Q,  u W_K,  u W_V + b_V     (head h: columns h·d_h … (h+1)·d_h − 1)
        φ^h   = softmax over kept keys of τ₀ Q^h K^hᵀ,  τ₀ = d_h^(−α)  ∈ R^{L'×L'} (row = query;
                α = ½ is timm's 1/√d_h; α = 1 the d_m^(−1) scaling of Wu et al. 2023)
        z     = z + [φ^1 V^1, …, φ^H V^H] W_O + b_O
        z     = z + GELU(LN₂(z) W_1 + b_1) W_2 + b_2       (hidden width mlp_ratio·D, exact GELU)
    h     = LN_f(pool(z)),  pool = (1/|S|) Σ_{l∈S} z_l (mean)  or  z_0 (cls)
    f(X)  = w_headᵀ h + b_head                                                   (scalar)

LN(u) = γ ⊙ (u − ū)/√(var u + ε) + β over the D features, ε = 10⁻⁶ (timm's ViT). The final LN acts
on the pooled vector, as timm's ``fc_norm`` does for mean pooling (for cls it is the same as
normalising every token and taking z_0). Weights act on the right (x W, W ∈ R^{in×out}).

Parameters (a flat dict; the names are stable, so saved parameters of a pretrained cell load
into a fine-tuning cell of the same shapes). Per-block parameters are stacked along a leading
``depth`` axis, and the blocks run as one ``lax.scan``::

    name                  shape                     group   init (trunc_normal | lecun)
    W_E, b_E              (d, D), (D,)              embed   weight, 0
    pos  (pos = learned)  (L', D)                   embed   TN(0, 0.02²) in both schemes
    cls  (pool = cls)     (D,)                      embed   N(0, 10⁻¹²) (timm's std 1e-6)
    ln1_g, ln1_b          (depth, D)                norm    1, 0
    W_Q, W_K, W_V         (depth, D, D)             attn    weight
    b_Q, b_V              (depth, D)  (qkv_bias)    attn    0
    W_O, b_O              (depth, D, D), (depth, D) attn    weight, 0
    ln2_g, ln2_b          (depth, D)                norm    1, 0
    W_1, b_1              (depth, D, D_mlp), (depth, D_mlp)   mlp   weight, 0
    W_2, b_2              (depth, D_mlp, D), (depth, D)       mlp   weight, 0
    lnf_g, lnf_b          (D,)                      norm    1, 0
    w_head, b_head        (D,), ()                  head    weight, 0

There is no key bias: q·b_K adds one constant to all the logits of a query, which the softmax
removes, so its gradient is identically 0 (timm's fused qkv has one; only its rounding noise
would train).

Weight init schemes: ``trunc_normal`` is timm's rule for every Linear, TN(0, 0.02²) truncated at
±2σ, applied here to the patch embedding too (timm's convolutional embedding keeps PyTorch's
default there); ``lecun`` is N(0, 1/fan_in), ``he`` N(0, 2/fan_in); ``ntk`` (the NTK parametrisation, as in Wu et al.
2023) draws every weight N(0, 1) and multiplies it by 1/√fan_in in the forward pass
(x W/√fan_in), so the function at init is lecun's in distribution while the gradients see the
multipliers (biases, LayerNorm, ``pos`` and ``cls`` as in the other schemes).

Token mask: dropped tokens are zeroed first (inert, even NaN padding, zero gradient), are no key
of any query, have all-zero attention rows, and are left out of mean pooling, so dropping token
l equals deleting it from the input (with its positional row p_l).
"""

from __future__ import annotations

import functools
import math
from typing import Literal

import jax
import jax.numpy as jnp
from pydantic import Field, PositiveFloat, PositiveInt, model_serializer, model_validator

from attnlab.models.nn import kept, masked_mean, softmax_keys
from attnlab.models.wu2023 import attention_stats
from attnlab.parts import Model, PartConfig, batched, from_data, pick, register, switch

LN_EPS = 1e-6
TIMM_STD = 0.02

BLOCK_PARAMS = (
    "ln1_g",
    "ln1_b",
    "W_Q",
    "b_Q",
    "W_K",
    "W_V",
    "b_V",
    "W_O",
    "b_O",
    "ln2_g",
    "ln2_b",
    "W_1",
    "b_1",
    "W_2",
    "b_2",
)
GROUPS = {
    "embed": ("W_E", "b_E", "pos", "cls"),
    "attn": ("W_Q", "b_Q", "W_K", "W_V", "b_V", "W_O", "b_O"),
    "mlp": ("W_1", "b_1", "W_2", "b_2"),
    "norm": ("ln1_g", "ln1_b", "ln2_g", "ln2_b", "lnf_g", "lnf_b"),
    "head": ("w_head", "b_head"),
}


# ---------------------------------------------------------------- hyperparameters


class Hparams(PartConfig):
    """Fields of the ViT (``model.*``); the tokens L and their dimension d come from the data model."""

    L: int | None = from_data("tokens", "tokens (patches) per sample")
    d: int | None = from_data("d", "token dimension (pixels per patch × channels)")
    D: PositiveInt = Field(64, description="width D (patch embedding d → D)")
    depth: PositiveInt = Field(2, description="transformer blocks")
    heads: PositiveInt = Field(4, description="attention heads H (width D/H each)")
    mlp_ratio: PositiveFloat = Field(4.0, description="MLP hidden width int(mlp_ratio · D)")
    pool: Literal["mean", "cls"] = Field("mean", description="mean over kept tokens, or a prepended CLS token")
    pos: Literal["learned", "none"] = Field("learned", description="learned positional embedding, or none")
    init: Literal["trunc_normal", "lecun", "he", "ntk"] = batched(
        "trunc_normal",
        description="weights TN(0, 0.02²) (timm), N(0, 1/fan_in) (lecun), N(0, 2/fan_in) (he), or "
        "N(0, 1) with 1/√fan_in in the forward pass (ntk); biases 0, LayerNorm γ=1 β=0",
    )
    qkv_bias: bool = Field(True, description="biases on the queries and values (timm's default; no key bias)")
    alpha: PositiveFloat = batched(
        0.5,
        description="attention logits scaled by τ₀ = d_h^(−alpha): 0.5 is timm's "
        "1/√d_h, 1 the d_m^(−1) scaling of Wu et al. 2023",
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        """alpha at timm's ½ is left out of a cell's id, so earlier cells keep theirs."""
        d = handler(self)
        if self.alpha == 0.5:
            d.pop("alpha", None)
        return d

    @model_validator(mode="after")
    def _widths(self):
        if self.D % self.heads:
            raise ValueError(f"model.heads: must divide model.D = {self.D}, got {self.heads}")
        if int(self.mlp_ratio * self.D) < 1:
            raise ValueError(f"model.mlp_ratio: int(mlp_ratio · D) must be ≥ 1, got {self.mlp_ratio} · {self.D}")
        return self

    @property
    def d_h(self) -> int:
        """Width of one head."""
        return self.D // self.heads

    @property
    def d_mlp(self) -> int:
        """Hidden width of the MLP (timm: int(mlp_ratio · D))."""
        return int(self.mlp_ratio * self.D)

    @property
    def n_tokens(self) -> int:
        """L': the L patches, plus the CLS token with pool = cls."""
        return self.L + (self.pool == "cls")


# ---------------------------------------------------------------- init


def weight_shapes(hp: Hparams) -> dict[str, tuple[tuple[int, ...], int]]:
    """name -> (shape, fan_in) of every weight drawn by the init scheme (the same for all options)."""
    D, n, m = hp.D, hp.depth, hp.d_mlp
    return {
        "W_E": ((hp.d, D), hp.d),
        "W_Q": ((n, D, D), D),
        "W_K": ((n, D, D), D),
        "W_V": ((n, D, D), D),
        "W_O": ((n, D, D), D),
        "W_1": ((n, D, m), D),
        "W_2": ((n, m, D), m),
        "w_head": ((D,), D),
    }


def _split_flat(z, shapes):
    """Consecutive slices of one flat draw, reshaped: one draw for all the weights compiles one
    random-number program instead of one per weight (each adds its own to the compile time)."""
    out, i = [], 0
    for shape in shapes:
        size = math.prod(shape)
        out.append(z[i : i + size].reshape(shape))
        i += size
    return out


def trunc_normal(key, shapes, fan_ins, dtype, std=TIMM_STD):
    """TN(0, std²) truncated at ±2 std (timm's ``trunc_normal_(std=.02)``) for each shape; fan_ins unused."""
    z = jax.random.truncated_normal(key, -2.0, 2.0, (sum(map(math.prod, shapes)),), dtype)
    return [std * w for w in _split_flat(z, shapes)]


def lecun(key, shapes, fan_ins, dtype):
    """N(0, 1/fan_in) for each shape."""
    z = jax.random.normal(key, (sum(map(math.prod, shapes)),), dtype)
    return [w / f**0.5 for w, f in zip(_split_flat(z, shapes), fan_ins, strict=True)]


def he(key, shapes, fan_ins, dtype):
    """N(0, 2/fan_in) for each shape."""
    return [w * 2**0.5 for w in lecun(key, shapes, fan_ins, dtype)]


def standard(key, shapes, fan_ins, dtype):
    """N(0, 1) for each shape (the ntk scheme: 1/√fan_in is a forward-pass multiplier)."""
    z = jax.random.normal(key, (sum(map(math.prod, shapes)),), dtype)
    return _split_flat(z, shapes)


WEIGHT_INITS = {"trunc_normal": trunc_normal, "lecun": lecun, "he": he, "ntk": standard}


def multipliers(hp: Hparams, dtype=None) -> dict:
    """The forward-pass multiplier of each weight: 1/√fan_in under ntk, none otherwise (``init``
    a batched choice inside a program: every weight's, 1 unless ntk, as ``dtype`` scalars)."""
    ntk = {n: fan_in**-0.5 for n, (_, fan_in) in weight_shapes(hp).items()}
    if isinstance(hp.init, str):  # a constant: no products by 1 in the program
        return ntk if hp.init == "ntk" else {}
    inits = Hparams.choices("init")
    return {n: pick(hp.init, inits, {i: c if i == "ntk" else 1.0 for i in inits}, dtype) for n, c in ntk.items()}


def init(key, hp: Hparams, dtype=jnp.float32):
    """Every parameter of the table in the module docstring. The weights, ``pos`` and ``cls`` have
    their own keys, so an option's extra parameter does not change the other draws."""
    k_w, k_pos, k_cls = jax.random.split(key, 3)
    shapes, fan_ins = zip(*weight_shapes(hp).values(), strict=True)
    draws = {i: functools.partial(f, shapes=shapes, fan_ins=fan_ins, dtype=dtype) for i, f in WEIGHT_INITS.items()}
    w = dict(zip(weight_shapes(hp), switch(hp.init, Hparams.choices("init"), draws, k_w), strict=True))
    D, n, m = hp.D, hp.depth, hp.d_mlp
    ones, zeros = lambda *s: jnp.ones(s, dtype), lambda *s: jnp.zeros(s, dtype)
    p = {"W_E": w["W_E"], "b_E": zeros(D)}
    if hp.pos == "learned":
        p["pos"] = trunc_normal(k_pos, [(hp.n_tokens, D)], None, dtype)[0]
    if hp.pool == "cls":
        p["cls"] = 1e-6 * jax.random.normal(k_cls, (D,), dtype)
    p |= {"ln1_g": ones(n, D), "ln1_b": zeros(n, D)}
    for name in ("W_Q", "W_K", "W_V"):
        p[name] = w[name]
        if hp.qkv_bias and name != "W_K":  # no key bias (see the module docstring)
            p["b" + name[1:]] = zeros(n, D)
    p |= {"W_O": w["W_O"], "b_O": zeros(n, D), "ln2_g": ones(n, D), "ln2_b": zeros(n, D)}
    p |= {"W_1": w["W_1"], "b_1": zeros(n, m), "W_2": w["W_2"], "b_2": zeros(n, D)}
    p |= {"lnf_g": ones(D), "lnf_b": zeros(D), "w_head": w["w_head"], "b_head": zeros()}
    return p


def trainable(hp: Hparams) -> tuple[str, ...]:
    """Every parameter is trained."""
    return tuple(n for g in groups(hp).values() for n in g)


def groups(hp: Hparams) -> dict[str, tuple[str, ...]]:
    """Learning-rate groups: embed, attn, mlp, norm, head (the parameters the options create)."""
    absent = set()
    if hp.pos == "none":
        absent.add("pos")
    if hp.pool != "cls":
        absent.add("cls")
    if not hp.qkv_bias:
        absent |= {"b_Q", "b_V"}
    return {g: tuple(n for n in names if n not in absent) for g, names in GROUPS.items()}


# ---------------------------------------------------------------- forward pass


def layer_norm(u, g, b):
    """γ ⊙ (u − ū)/√(var u + ε) + β over the last axis."""
    mu = u.mean(-1, keepdims=True)
    var = jnp.mean((u - mu) ** 2, -1, keepdims=True)
    return g * (u - mu) / jnp.sqrt(var + LN_EPS) + b


def attention(blk, u, keep, hp: Hparams):
    """Multi-head attention of one block on u (L', D): (output (L', D), φ (H, L', L'), logits τ₀QKᵀ)."""
    split = lambda Z: Z.reshape(Z.shape[0], hp.heads, hp.d_h).transpose(1, 0, 2)  # (H, L', d_h)
    proj = lambda n: u @ blk["W_" + n] + blk.get("b_" + n, 0)
    Q, K, V = split(proj("Q")), split(proj("K")), split(proj("V"))
    S = Q @ K.transpose(0, 2, 1) / hp.d_h**hp.alpha  # (H, L', L')
    phi = softmax_keys(S, keep)  # 0 off the kept keys
    A = (phi @ V).transpose(1, 0, 2).reshape(u.shape)  # heads concatenated: (L', D)
    return A @ blk["W_O"] + blk["b_O"], phi, S


def block(blk, z, keep, hp: Hparams):
    """One pre-LN block: z + MHA(LN₁ z), then + MLP(LN₂ z); returns (z, (φ, logits))."""
    a, phi, S = attention(blk, layer_norm(z, blk["ln1_g"], blk["ln1_b"]), keep, hp)
    z = z + a
    u = layer_norm(z, blk["ln2_g"], blk["ln2_b"])
    z = z + jax.nn.gelu(u @ blk["W_1"] + blk["b_1"], approximate=False) @ blk["W_2"] + blk["b_2"]
    return z, (phi, S)


def apply(params, x, hp: Hparams):
    """f(X) for one sample (a token array (L, d), or a pytree with tokens and a token mask).
    aux: ``attn`` φ of every block (depth, H, L', L'), ``mask`` the kept tokens (L',) (the CLS
    token first with pool = cls), ``features`` h ∈ R^D, the head's input, and the attention
    statistics of :func:`attnlab.models.wu2023.attention_stats` over every block and head
    (``logit_std``, ``attn_tv`` from uniform, ``attn_entropy``)."""
    X, keep = kept(x)
    params = params | {n: params[n] * c for n, c in multipliers(hp, X.dtype).items()}  # ntk: W/√fan_in
    z = X @ params["W_E"] + params["b_E"]  # (L, D)
    if hp.pool == "cls":
        z = jnp.concatenate([params["cls"][None], z])  # (L', D)
        keep = jnp.concatenate([jnp.ones(1, bool), keep])
    if hp.pos == "learned":
        z = z + params["pos"]
    blocks = {n: params[n] for n in BLOCK_PARAMS if n in params}  # each with a leading depth axis
    z, (phi, S) = jax.lax.scan(lambda z, blk: block(blk, z, keep, hp), z, blocks)
    if hp.pool == "cls":
        pooled = z[0]
    else:
        pooled = masked_mean(z, keep)
    h = layer_norm(pooled, params["lnf_g"], params["lnf_b"])
    f = h @ params["w_head"] + params["b_head"]
    Lp = keep.shape[0]
    stats = attention_stats(phi.reshape(-1, Lp, Lp), S.reshape(-1, Lp, Lp), keep, jnp.maximum(keep.sum(), 1))
    return f, stats | {"attn": phi, "mask": keep, "features": h}


# ---------------------------------------------------------------- part


def sizes(hp: Hparams) -> tuple[int, int]:
    """(parameter count, activations per sample). Activations per block and token: LN₁, Q, K, V,
    the heads' output, its projection, LN₂ and the MLP's output (8 rows of width D), the MLP's
    hidden pre- and post-GELU (2 of width D_mlp); and the logits and softmax (2 H L'² per block)."""
    D, m, n, Lp = hp.D, hp.d_mlp, hp.depth, hp.n_tokens
    per_block = 4 * D + 4 * D * D + D + (2 * D if hp.qkv_bias else 0) + 2 * D * m + m + D  # LNs, attn, MLP
    params = (hp.d + 1) * D + (Lp * D if hp.pos == "learned" else 0) + (D if hp.pool == "cls" else 0)
    params += n * per_block + 2 * D + D + 1  # final LN, head
    act = 2 * Lp * D + n * (Lp * (8 * D + 2 * m) + 2 * hp.heads * Lp * Lp) + 2 * D
    return params, act


PART = register(
    Model(
        name="vit",
        version=1,
        config=Hparams,
        init=init,
        apply=apply,
        trainable=trainable,
        groups=groups,
        sizes=sizes,
    )
)
