"""Fashion-MNIST from the Debian package ``dataset-fashion-mnist`` (IDX files)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from attnlab.datasets.common import FASHION_DIR, FASHION_FILES, HOW_TO_GET, INFO, ImageData, checked
from attnlab.errors import AttnlabError

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
    return checked(
        ImageData(
            "fashion_mnist", a["x_train"], a["y_train"], a["x_test"], a["y_test"], INFO["fashion_mnist"].class_names
        )
    )
