"""Cells, ids, buckets and chunks.

A *cell* is a flat dict that fully specifies one run (data, model, training, seeds). Its id is a
hash of its canonical JSON, so a result can be found again and a rerun skips what is done. The
cell's PRNG key is derived from the id, so a cell's numbers depend on its config alone, never
on which other cells share its batch.

A *family* (model + data + loss plug-in) says which fields fix static shapes (the bucket) and
which are per-cell inputs; cells of one bucket are padded to the largest sample count
(``family.size_field``) and trained as one program, in chunks that fit a memory budget.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np

from attnlab.train import Problem, TrainConfig

SCHEMA_VERSION = 1  # bump when a change alters what a given cell computes


class Family(Protocol):
    name: str
    static_fields: tuple[str, ...]  # fix shapes / the compiled program
    dynamic_fields: tuple[str, ...]  # batched per-cell inputs
    size_field: str  # the sample count, padded within a bucket

    def problem(self, static: dict, n_pad: int) -> Problem: ...

    def train_config(self, static: dict) -> TrainConfig: ...

    def cell_bytes(self, static: dict, n_pad: int) -> int: ...


def canonical(cell: dict[str, Any]) -> str:
    """Sorted-key JSON; field types are fixed by the validated spec, so 1 vs 1.0 cannot vary."""
    return json.dumps(cell, sort_keys=True, separators=(",", ":"))


def cell_id(cell: dict[str, Any]) -> str:
    """16 hex digits of sha256 over the canonical config (plus the schema version)."""
    payload = f"v{SCHEMA_VERSION}:" + canonical(cell)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def cell_key(cid: str) -> np.ndarray:
    """The cell's raw PRNG key (uint32[2]), derived from its id."""
    return np.array([int(cid[:8], 16), int(cid[8:16], 16)], dtype=np.uint32)


def buckets(family: Family, cells: list[dict]) -> dict[tuple, list[dict]]:
    """Group cells by their static fields (order of first appearance is kept)."""
    out: dict[tuple, list[dict]] = defaultdict(list)
    for c in cells:
        out[tuple((f, c[f]) for f in family.static_fields)].append(c)
    return dict(out)


def chunks(
    family: Family, static: dict, cells: list[dict], memory_budget: float, max_cells: int = 200
) -> Iterator[list[dict]]:
    """Split a bucket into chunks whose estimated memory stays under ``memory_budget`` bytes and
    that hold at most ``max_cells`` cells (the unit of progress and of loss on interruption).
    Cells are sorted by sample count first, so a chunk pads as little as possible."""
    cells = sorted(cells, key=lambda c: c[family.size_field])
    n_pad = max(c[family.size_field] for c in cells)
    size = max(1, min(max_cells, int(memory_budget // max(1, family.cell_bytes(static, n_pad)))))
    for i in range(0, len(cells), size):
        yield cells[i : i + size]


def batch_inputs(family: Family, cells: list[dict], dtype: str = "float32") -> dict[str, np.ndarray]:
    """Per-cell inputs of a chunk: the dynamic fields (floats in ``dtype``) and each cell's key."""
    v = {f: np.asarray([c[f] for c in cells]) for f in family.dynamic_fields}
    v = {f: x.astype(dtype) if x.dtype.kind == "f" else x for f, x in v.items()}
    v["key"] = np.stack([cell_key(cell_id(c)) for c in cells])
    return v
