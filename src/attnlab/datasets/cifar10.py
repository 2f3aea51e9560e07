"""CIFAR-10 from a user-given ``cifar-10-batches-py`` directory."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnlab.datasets.common import CIFAR_FILES, HOW_TO_GET, INFO, ImageData, checked, restricted_load
from attnlab.errors import AttnlabError

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
    return checked(
        ImageData(
            "cifar10", x_train, np.concatenate([y for _, y in train]), np.ascontiguousarray(x_test), y_test, names
        )
    )
