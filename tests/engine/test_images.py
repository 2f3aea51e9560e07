"""The ``images`` data model (real images into any model): its spec's checks, the shared pool,
per-cell subsets, noise borders, signal and spurious patches, trained by the engine against the
reference path. The loaders and image operations: tests/unit/test_datasets.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.data import image_ops
from attnlab.data import images as I
from attnlab.engine import grid
from attnlab.errors import AttnlabError
from attnlab.experiments.config import ExperimentSpec, expand, merge, parse_sets
from helpers import assert_same, bucket_of, cell_of, run_bucket, run_reference, x64

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
        "data.n_test: 3000 exceeds the 2000 test images of classes 0,1 in cifar10": dict(
            dataset="cifar10", n_test=3000
        ),
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
    assert comp.data.input_shape({k[5:]: v for k, v in static.items() if k.startswith("data.")}) == {
        "tokens": 16,
        "d": 49,
    }
    sh = comp.shared(static)
    assert comp.shared(dict(static)) is sh  # cached per process on the static fields
    assert sh["X"].shape == (200, 16, 49) and sh["X_test"].shape == (20, 16, 49) and sh["X"].dtype == np.float32
    assert sh["y"].sum() == 0 and sh["y_test"].sum() == 0  # balanced pool and test split
    # every pool sample is an MNIST 3 (+1) or 8 (−1) training image, scaled to [0, 1] and patchified
    x38, y38 = image_ops.class_subset(mnist.x_train, mnist.y_train, "3,8")
    bank = {image_ops.patchify(image_ops.to_unit(im), 7).tobytes(): lab for im, lab in zip(x38, y38, strict=True)}
    for X, y in zip(sh["X"], sh["y"], strict=True):
        assert bank[X.tobytes()] == y
    xt, yt = image_ops.class_subset(mnist.x_test, mnist.y_test, "3,8")
    test_bank = {image_ops.patchify(image_ops.to_unit(im), 7).tobytes(): lab for im, lab in zip(xt, yt, strict=True)}
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
        I.order(key, y, True), image_ops.balanced_order(np.asarray(jax.random.permutation(key, len(y))), shared["y"])
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
    cells = expand(
        ExperimentSpec(
            data={
                "name": "images",
                "dataset": "cifar10",
                "cifar_dir": str(root),
                "classes": f"{a},{b}",
                "border": 4,
                "patch": 8,
                "place": "random",
                "sigma": 0.5,
                "norm": "token",
                "N": 4,
                "n_test": 2,
            },
            model={"name": "li2023-vit", "m": 4},
            train={"dtype": "float64", "lr": 0.5, "max_steps": 5},
        )
    )
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
        data={
            "name": "images",
            "classes": "3,8",
            "crop": 20,
            "border": 4,
            "sigma": 0.5,
            "patch": 7,
            "pool": 40,
            "N": 6,
            "n_test": 4,
            "signal": [1.0, 2.5],
        },
        model={"name": "jiang2024", "d_h": 4, "d_v": 4},
        train={"dtype": "float64", "max_steps": 2},
    )
    cells = expand(spec)
    assert [c["data.signal"] for c in cells] == [1.0, 2.5]
    comp, static, _ = bucket_of(cells)  # one bucket: signal is a per-cell input
    assert comp.classify("data.signal") == "batched" and "signal" not in I.PART.static
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
    data={
        "name": "images",
        "classes": "3,8",
        "patch": 7,
        "pool": 200,
        "N": [6, 10],
        "n_test": 200,
        "spurious": "fashion_mnist",
        "spurious_classes": "1,8",
        "spurious_pool": 30,
        "alpha_star": [0.5625, 0.75, 1.0],
        "sparsify": [False, True],
        "sparsify_test": [False, True],
    },
    model={"name": "li2023-vit", "m": 4, "init": "gaussian", "m_a": 3, "m_b": 3},
    train={"dtype": "float64", "lr": 0.5, "max_steps": 4},
)
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
    spec = ExperimentSpec(
        data={"name": "images", "patch": 7, "alpha_star": [0.5, 0.55], "spurious": "fashion_mnist"},
        model={"name": "vit"},
    )
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
    cells = expand(
        ExperimentSpec(
            data={
                "name": "images",
                "dataset": "cifar10",
                "cifar_dir": str(root),
                "classes": f"{a},{b}",
                "patch": 8,
                "N": 4,
                "n_test": 2,
                "spurious": "fashion_mnist",
                "spurious_classes": "1,8",
                "spurious_pool": 5,
                "alpha_star": 0.5625,
            },
            model={"name": "li2023-vit", "m": 4},
            train={"dtype": "float64", "lr": 0.5, "max_steps": 3},
        )
    )
    d, sh = _spur_data(cells, 0, pads=4)
    assert sh["S_a"].shape == (5, 16, 192) and d["X"]["tokens"].shape == (4, 16, 192)
    assert (d["X"]["spurious"].sum(1) == 7).all()
    # Fashion-MNIST's grey patches are the same in the three channels
    t = d["X"]["tokens"][d["X"]["spurious"]].reshape(-1, 64, 3)
    assert np.allclose(t[..., 0], t[..., 1]) and np.allclose(t[..., 0], t[..., 2])
