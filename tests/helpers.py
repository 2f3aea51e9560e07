"""Shared by the training tests: build a bucket's Problem from cells and train it on either path.

Compiles dominate the suite's time, so programs are cached across tests: ``train_bucket`` and
``train_reference`` keep their compiled programs under ``cache_key`` (the bucket's static fields
and pads: the reference is compiled once per shape, not per cell), and reference results are kept
per cell id for the whole session.
"""

from __future__ import annotations

import struct
from pathlib import Path

import jax
import pyarrow as pa

from attnlab.engine import grid
from attnlab.engine.plan import Plan
from attnlab.problem import Composition
from attnlab.train import train_bucket, train_reference

ROOT = Path(__file__).resolve().parents[1]  # the repository
METRICS = ("train_loss", "train_error", "test_loss", "test_error", "stop_step", "status")


def plan(cells, done, budget, tags=()):
    """The chunks a run of ``cells`` trains when ``done`` are in its store (no fit check)."""
    return Plan.of(cells, tags, budget, check=False).todo(done)


def bucket_of(cells, tags=()):
    """(composition, static fields) of cells that must form exactly one bucket."""
    bks = grid.buckets(cells, tags)
    assert len(bks) == 1, f"cells span {len(bks)} buckets"
    (key,) = bks
    static = dict(key)
    return Composition.of(static, tags), static, key


def x64(cell):
    return jax.enable_x64(cell.get("train.dtype") == "float64")


def budget_for(cells, n):
    """A memory budget that makes chunks of n cells (the cells form one bucket)."""
    comp, static, _ = bucket_of(cells)
    top = {s: max(c[s] for c in cells) for s in comp.size_fields()}
    return (n + 0.5) * comp.cell_bytes(static, top)


def run_bucket(cells, tags=(), pads=None, **kw):
    """train_bucket on ``cells`` (one bucket), padded to the largest sizes (or ``pads``)."""
    comp, static, key = bucket_of(cells, tags)
    pads = pads or {f: max(c[f] for c in cells) for f in comp.size_fields()}
    v = grid.batch_inputs(comp, cells)
    with x64(cells[0]):
        return train_bucket(
            comp.problem(static, pads),
            comp.train_config(static),
            v,
            shared=comp.shared(static),
            cache_key=(key, tuple(sorted(pads.items()))),
            **kw,
        )


_REFERENCE: dict[str, dict] = {}


def run_reference(cell, tags=()):
    """The reference result of a cell, unpadded (computed once per session: the slow path)."""
    cid = grid.cell_id(cell)
    if cid not in _REFERENCE:
        comp, static, key = bucket_of([cell], tags)
        v = {k: x[0] for k, x in grid.batch_inputs(comp, [cell]).items()}
        pads = {f: cell[f] for f in comp.size_fields()}  # exactly N samples: no padding at all
        with x64(cell):
            _REFERENCE[cid] = train_reference(
                comp.problem(static, pads),
                comp.train_config(static),
                v,
                shared=comp.shared(static),
                cache_key=(key, tuple(tags), tuple(sorted(pads.items()))),
            )
    return _REFERENCE[cid]


def cell_of(out, i):
    """Cell i of a bucket result (the reference's layout)."""
    return jax.tree.map(lambda x: x[i], out)


def assert_same(a, b, rtol=1e-9, atol=1e-12, metrics=METRICS):
    """Two results of one cell agree: metrics, traces, arrays and params."""
    import numpy as np

    for k in metrics:
        np.testing.assert_allclose(a["metrics"][k], b["metrics"][k], rtol=rtol, atol=atol, err_msg=k)
    assert set(a["metrics"]) == set(b["metrics"])
    for part in ("traces", "arrays", "params"):
        assert (part in a) == (part in b), part
        if part in b:
            assert set(a[part]) == set(b[part]), part
            for k in b[part]:
                np.testing.assert_allclose(a[part][k], b[part][k], rtol=rtol, atol=atol, err_msg=f"{part}.{k}")


def bits(x):
    """A value with every float as its exact bytes (NaN == NaN, 0.0 != -0.0)."""
    if isinstance(x, float):
        return struct.pack("<d", x)
    if isinstance(x, list):
        return [bits(v) for v in x]
    return x


def assert_same_rows(a: pa.Table, b: pa.Table, skip=("seconds",)):
    """Same ids in the same order and every other column bit for bit (``seconds`` is wall time)."""
    assert a.column_names == b.column_names
    assert a.column("id").to_pylist() == b.column("id").to_pylist()
    for c in a.column_names:
        if c not in skip:
            assert bits(a.column(c).to_pylist()) == bits(b.column(c).to_pylist()), c


def use_part(monkeypatch, obj, name: str | None = None) -> None:
    """Register ``obj`` (a part) under ``name`` for one test (the registry is restored after)."""
    from attnlab import parts

    kind = parts.kind_of(obj)
    parts.registered(kind)  # attnlab's own first, so they do not collide with this one later
    monkeypatch.setitem(parts._REGISTRY[kind], name or obj.name, obj)
    monkeypatch.setattr(parts, "_ORIGIN", dict(parts._ORIGIN))


# the fields of every claim row of an audit (attnlab.audit)
AUDIT_ROW = {
    "id",
    "regime",
    "h1",
    "h1_source",
    "h0",
    "h0_source",
    "power",
    "false_pass",
    "false_fail",
    "inconclusive_h1",
    "inconclusive_h0",
    "flagged",
    "descriptive",
    "reason",
    "worlds",
    "kind",
}
