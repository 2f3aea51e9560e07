"""Operations (pure numpy; the image is the trailing (H, W) or (H, W, C) of an array, see
:func:`patchify` for how that is decided):

    patchify(x, p)        (H, W[, C]) -> (H/p · W/p, p·p·C) tokens, patches in row-major order,
                          pixels (row, column, channel) inside a token; unpatchify inverts it
    class_subset(x, y, c) the samples of classes c; a pair (a, b) -> labels +1 (a), −1 (b)
    to_unit, channel_stats, standardise, unit_tokens
                          pixels to [0, 1]; per-channel mean/std standardisation; per-token unit norm
    noise_canvas, noise_border
                          the image inside a larger canvas of N(0, σ²) noise (centred or at a
                          random offset per image), or a noise border of width w around it
"""

from __future__ import annotations

from typing import Literal

import numpy as np

# ---------------------------------------------------------------- operations (pure numpy)


def _layout(x: np.ndarray, channels: bool | None) -> tuple[tuple[int, ...], int, int, int, bool]:
    """(leading dims, H, W, C, has a channel axis) of an image array.

    ``channels=None`` reads the loaders' layout: ndim 2 = one (H, W) image, 3 = a batch
    (N, H, W), 4 = a batch (N, H, W, C). True: the trailing axes are (H, W, C); False: (H, W);
    with any leading dims."""
    if channels is None:
        if x.ndim not in (2, 3, 4):
            raise ValueError(f"images: expected (H, W), (N, H, W) or (N, H, W, C), got shape {x.shape}")
        channels = x.ndim == 4
    k = 3 if channels else 2
    if x.ndim < k:
        raise ValueError(f"images: shape {x.shape} has fewer than {k} image axes")
    H, W = x.shape[-k], x.shape[-k + 1]
    return x.shape[:-k], H, W, (x.shape[-1] if channels else 1), channels


def patchify(x, p: int, *, channels: bool | None = None) -> np.ndarray:
    """Images -> tokens: each p×p patch becomes one token of p·p·C values.

    (..., H, W[, C]) -> (..., H/p · W/p, p·p·C): patches in row-major order (token t covers rows
    p·(t // (W/p)) … and columns p·(t % (W/p)) …), and within a token the pixels in (row, column,
    channel) order. p must divide H and W. See :func:`_layout` for ``channels``."""
    x = np.asarray(x)
    lead, H, W, C, _ = _layout(x, channels)
    if p < 1 or H % p or W % p:
        raise ValueError(f"patch size {p} does not divide the image size {H}×{W}")
    t = x.reshape(*lead, H // p, p, W // p, p, C)
    n = len(lead)
    t = t.transpose(*range(n), n, n + 2, n + 1, n + 3, n + 4)  # (..., H/p, W/p, p, p, C)
    return t.reshape(*lead, (H // p) * (W // p), p * p * C)


def unpatchify(tokens, p: int, shape: tuple[int, ...]) -> np.ndarray:
    """The inverse of :func:`patchify`: (..., T, p·p·C) -> (..., *shape), shape = (H, W) or (H, W, C)."""
    tokens = np.asarray(tokens)
    H, W = shape[:2]
    C = shape[2] if len(shape) == 3 else 1
    lead = tokens.shape[:-2]
    if p < 1 or H % p or W % p or tokens.shape[-2:] != ((H // p) * (W // p), p * p * C):
        raise ValueError(f"tokens of shape {tokens.shape[-2:]} are not {shape} images in patches of {p}")
    n = len(lead)
    x = tokens.reshape(*lead, H // p, W // p, p, p, C).transpose(*range(n), n, n + 2, n + 1, n + 3, n + 4)
    return x.reshape(*lead, *shape)


def parse_classes(classes) -> tuple[int, ...]:
    """Classes as ints: a sequence, or a string "3,8" (also "3v8", "3-8", "3:8", "3 8": on the
    command line, where a comma separates grid values, write 3v8)."""
    if isinstance(classes, str):
        items = classes.replace("v", ",").replace("-", ",").replace(":", ",").replace(" ", ",").split(",")
        items = [i for i in items if i.strip()]
    else:
        try:
            items = list(classes)
        except TypeError:
            raise ValueError(f"classes {classes!r}: expected class numbers such as '3,8' (or 3v8)") from None
    try:
        out = tuple(int(i) for i in items)
    except (TypeError, ValueError):
        raise ValueError(f"classes {classes!r}: expected class numbers such as '3,8' (or 3v8)") from None
    if any(float(a) != b for a, b in zip(items, out, strict=True) if not isinstance(a, str)):
        raise ValueError(f"classes {classes!r}: expected whole class numbers")
    return out


def class_subset(x, y, classes) -> tuple[np.ndarray, np.ndarray]:
    """The samples whose label is in ``classes`` (in their original order), relabelled: a pair
    (a, b) -> +1 for a, −1 for b; otherwise the position of the label in ``classes`` (0, 1, …).
    Labels are int64."""
    classes = parse_classes(classes)
    if len(set(classes)) != len(classes) or not classes:
        raise ValueError(f"classes {classes}: expected distinct classes")
    y = np.asarray(y)
    keep = np.isin(y, classes)
    pos = {c: i for i, c in enumerate(classes)}
    new = np.array([pos[int(c)] for c in y[keep]], np.int64) if keep.any() else np.zeros(0, np.int64)
    if len(classes) == 2:
        new = 1 - 2 * new
    return np.asarray(x)[keep], new


def to_unit(x) -> np.ndarray:
    """uint8 pixels -> float32 in [0, 1] (x / 255)."""
    return np.asarray(x, np.float32) / np.float32(255.0)


def channel_stats(x, *, channels: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and std over every sample and pixel (shape (C,); C = 1 for grayscale)."""
    x = np.asarray(x, np.float64)
    lead, H, W, C, _ = _layout(x, channels)
    flat = x.reshape(-1, C)
    return flat.mean(0).astype(np.float32), flat.std(0).astype(np.float32)


def standardise(x, mean, std, *, channels: bool | None = None) -> np.ndarray:
    """(x − mean) / std per channel (mean, std: shape (C,) or scalars; a zero std is taken as 1)."""
    x = np.asarray(x, np.float32)
    _, _, _, C, has_c = _layout(x, channels)
    mean, std = np.asarray(mean, np.float32).reshape(-1), np.asarray(std, np.float32).reshape(-1)
    std = np.where(std > 0, std, np.float32(1.0))
    if not has_c:
        return (x - mean[0]) / std[0]
    return (x - mean) / std


def unit_tokens(tokens, eps: float = 1e-12) -> np.ndarray:
    """Each token (last axis) scaled to unit Euclidean norm; a token of norm ≤ eps stays as it is."""
    t = np.asarray(tokens, np.float32)
    n = np.linalg.norm(t, axis=-1, keepdims=True)
    return np.where(n > eps, t / np.maximum(n, eps), t).astype(np.float32)


def noise_canvas(
    x,
    size: int | tuple[int, int],
    sigma: float,
    rng: np.random.Generator,
    *,
    place: Literal["center", "random"] = "center",
    channels: bool | None = None,
    return_offsets: bool = False,
):
    """Each image inside a larger canvas of N(0, σ²) noise: (..., H, W[, C]) -> (..., S_h, S_w[, C])
    float32, S = ``size`` (an int for a square canvas). The image sits at the centre
    (offset ((S_h − H)//2, (S_w − W)//2)) or, with ``place="random"``, at a uniformly random
    offset per image. With ``return_offsets`` also returns the (row, col) offsets, shape (..., 2)."""
    x = np.asarray(x, np.float32)
    lead, H, W, C, has_c = _layout(x, channels)
    Sh, Sw = (size, size) if isinstance(size, int | np.integer) else tuple(size)
    if Sh < H or Sw < W:
        raise ValueError(f"canvas {Sh}×{Sw} is smaller than the image {H}×{W}")
    cshape = (*lead, Sh, Sw) + ((C,) if has_c else ())
    canvas = (np.float32(sigma) * rng.standard_normal(cshape, dtype=np.float32)).astype(np.float32)
    n = int(np.prod(lead, dtype=np.int64))
    if place == "center":
        offs = np.tile([(Sh - H) // 2, (Sw - W) // 2], (n, 1))
    elif place == "random":
        offs = np.stack([rng.integers(0, Sh - H + 1, n), rng.integers(0, Sw - W + 1, n)], axis=1)
    else:
        raise ValueError(f"place {place!r}: expected 'center' or 'random'")
    flat_c = canvas.reshape(n, Sh, Sw, *((C,) if has_c else ()))
    flat_x = x.reshape(n, H, W, *((C,) if has_c else ()))
    if place == "center":
        r, c = offs[0] if n else (0, 0)
        flat_c[:, r : r + H, c : c + W] = flat_x
    else:
        for i, (r, c) in enumerate(offs):
            flat_c[i, r : r + H, c : c + W] = flat_x[i]
    canvas = flat_c.reshape(cshape)
    return (canvas, offs.reshape(*lead, 2)) if return_offsets else canvas


def noise_border(x, width: int, sigma: float, rng: np.random.Generator, *, channels: bool | None = None) -> np.ndarray:
    """A border of ``width`` pixels of N(0, σ²) noise around each image: (..., H, W[, C]) ->
    (..., H + 2w, W + 2w[, C]) float32."""
    _, H, W, _, _ = _layout(np.asarray(x), channels)
    return noise_canvas(x, (H + 2 * width, W + 2 * width), sigma, rng, place="center", channels=channels)


def center_crop(x, size: int, *, channels: bool | None = None) -> np.ndarray:
    """The central size×size pixels of each image (offset (H − size)//2, (W − size)//2)."""
    x = np.asarray(x)
    _, H, W, _, has_c = _layout(x, channels)
    if not 0 < size <= min(H, W):
        raise ValueError(f"crop {size} does not fit in {H}×{W} images")
    r, c = (H - size) // 2, (W - size) // 2
    return x[..., r : r + size, c : c + size, :] if has_c else x[..., r : r + size, c : c + size]


def balanced_order(rng_or_perm, y) -> np.ndarray:
    """Indices of ``y`` (±1) in a random order, interleaved by class: +1, −1, +1, … while both last.
    ``rng_or_perm``: a numpy Generator (a permutation is drawn) or a permutation."""
    y = np.asarray(y)
    perm = rng_or_perm.permutation(len(y)) if isinstance(rng_or_perm, np.random.Generator) else np.asarray(rng_or_perm)
    pos = y[perm] > 0
    rank = np.where(pos, np.cumsum(pos) - 1, np.cumsum(~pos) - 1)
    return perm[np.argsort(2 * rank + (~pos), kind="stable")]
