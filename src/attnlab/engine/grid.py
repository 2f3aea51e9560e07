"""Cells, ids, buckets and chunks.

A *cell* is a flat dict of namespaced fields that fully specifies one run (see
:mod:`attnlab.problem`). Its id is a hash of its canonical JSON and of the schema versions of its
parts, so a result can be found again and a rerun skips what is done. The cell's PRNG key is
derived from the id, so a cell's random draws depend on its config alone, never on which other
cells share its batch. Its numbers can move in the last bits with the program it runs in (its
chunk's padding; a batched choice that is a constant of its bucket, :func:`constant_choices`).

Cells whose static fields agree form a *bucket*, trained as one compiled program; a bucket is
split into *chunks* that fit a memory budget, each padded to its largest value of every size
field (``data.N``, …).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import numpy as np
from pydantic_core import PydanticUndefined

from attnlab.errors import AttnlabError
from attnlab.parts import source_digest
from attnlab.problem import KEY_ONLY, Composition


def canonical(cell: dict[str, Any]) -> str:
    """Sorted-key JSON; field types are fixed by the validated spec, so 1 vs 1.0 cannot vary."""
    return json.dumps(cell, sort_keys=True, separators=(",", ":"))


@functools.cache
def _schema(data: str, model: str) -> str:
    """The parts' schema versions; an outside part's with its source digest (an edited file: new ids)."""
    comp = Composition.of({"data.name": data, "model.name": model})
    versions = {k: str(v) for k, v in comp.schema.items()}
    for kind, name, part in (("data", data, comp.data), ("model", model, comp.model)):
        digest = source_digest(kind, name)
        if digest:
            versions[f"{kind}/{part.name}"] += f"+{digest}"
    return ",".join(f"{k}:{v}" for k, v in sorted(versions.items()))


def cell_id(cell: dict[str, Any]) -> str:
    """16 hex digits of sha256 over the parts' schema versions (and outside parts' source
    digests) and the canonical config."""
    schema = _schema(cell["data.name"], cell["model.name"]) if "data.name" in cell and "model.name" in cell else ""
    payload = f"{schema}|" + canonical(cell)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


# Fields that choose how a cell is computed, not what: they change its id (the numbers may differ
# in rounding) but not its random draws, which are those of the cell at the default value (None:
# a cell leaves the field out at its default). ``train.init_from`` is where the starting
# parameters are read; what they are is init_sha256.
HOW = {"train.fast": True, "train.init_from": "", "train.compile": None}


def seed_id(cell: dict[str, Any]) -> str:
    """The id the cell's PRNG key comes from: that of the cell with every :data:`HOW` field at
    its default, so ``train.fast = false`` draws the same data and init as the fast path. Under
    ``train.draws = "common"``: that of its data fields, seed, block and rep alone, so cells that
    differ only in their model or recipe share every draw (common random numbers)."""
    if cell.get("train.draws") == "common":
        return cell_id({k: v for k, v in cell.items() if k.startswith("data.") or k in KEY_ONLY})
    at_default = {k: v for k, v in HOW.items() if k in cell}
    return cell_id({k: v for k, v in {**cell, **at_default}.items() if v is not None or k not in HOW})


def cell_key(cid: str) -> np.ndarray:
    """The cell's raw PRNG key (uint32[2]), derived from its id."""
    return np.array([int(cid[:8], 16), int(cid[8:16], 16)], dtype=np.uint32)


def buckets(cells: list[dict], tags: tuple[str, ...] = ()) -> dict[tuple, list[dict]]:
    """Group cells by their static fields (order of first appearance is kept). Every field must
    be classified as static, batched or key-only: an unclassified one is an error."""
    out: dict[tuple, list[dict]] = defaultdict(list)
    seen: dict[tuple, tuple[str, ...]] = {}
    for c in cells:
        sig = (c.get("data.name"), c.get("model.name"), tuple(sorted(c)))
        if sig not in seen:
            comp = Composition.of(c, tags)
            seen[sig] = tuple(k for k in sorted(c) if comp.classify(k) == "static")
        out[tuple((f, c[f]) for f in seen[sig])].append(c)
    return dict(out)


def cell_memory(comp: Composition, static: dict, cells: list[dict], memory_budget: float) -> int:
    """The estimated bytes of the bucket's largest cell (from its shapes, before anything is
    compiled); refused when one cell alone exceeds ``memory_budget``: it could not run."""
    sizes = comp.size_fields()
    top = {s: max(c[s] for c in cells) for s in sizes}
    one = comp.cell_bytes(static, top)
    if one > memory_budget:
        at = ", ".join(f"{s} = {top[s]:,}" for s in sizes)
        raise AttnlabError(
            f"one cell needs ≈ {one / 1e9:.3g} GB (estimated from its shapes at {at}), more than "
            f"memory_budget_gb = {memory_budget / 1e9:.3g}; lower the sizes, or raise memory_budget_gb "
            f"if the machine has the memory"
        )
    return one


def chunks(
    comp: Composition, static: dict, cells: list[dict], memory_budget: float, max_cells: int = 200
) -> Iterator[tuple[list[dict], dict[str, int]]]:
    """Split a bucket into chunks whose estimated memory stays under ``memory_budget`` bytes and
    that hold at most ``max_cells`` cells (the unit of progress and of loss on interruption);
    yields (cells, pads). Cells are sorted by their sizes first, so a chunk pads little."""
    sizes = comp.size_fields()
    cells = sorted(cells, key=lambda c: tuple(c[s] for s in sizes))
    one = cell_memory(comp, static, cells, memory_budget)
    size = max(1, min(max_cells, int(memory_budget // max(1, one))))
    for i in range(0, len(cells), size):
        chunk = cells[i : i + size]
        yield chunk, {s: max(c[s] for c in chunk) for s in sizes}


def constant_choices(comp: Composition, cells: list[dict]) -> tuple:
    """((field, value), ...) of the data's and the model's batched choices that take one value
    over ``cells`` (a cell leaving one out has its default): a bucket's program takes them as
    constants, as if static (XLA folds the choice away; the index in ``v`` goes unused). The
    recipe's (``train.reduction``) stays a per-cell input: it costs one product per gradient."""
    defaults = _batched_defaults(comp)
    out = []
    for f in sorted({k for c in cells for k in c} | set(defaults)):
        if f.startswith(("data.", "model.")) and comp.choices(f) is not None and comp.classify(f) == "batched":
            values = {c.get(f, defaults.get(f)) for c in cells}
            if len(values) == 1:
                out.append((f, values.pop()))
    return tuple(out)


def _batched_defaults(comp: Composition) -> dict[str, Any]:
    """The defaults of the parts' and the recipe's batched fields (a cell may leave one out)."""
    return {
        f"{kind}.{n}": config.model_fields[n].get_default()
        for kind, config in comp.configs.items()
        for n in config.with_role("batched")
        if config.model_fields[n].get_default() is not PydanticUndefined
    }


def batch_inputs(comp: Composition, cells: list[dict]) -> dict[str, np.ndarray]:
    """Per-cell inputs of a chunk: the batched fields (floats in the cell's training dtype, a
    choice as its index among the field's choices) and each cell's key."""
    dtype = cells[0].get("train.dtype", "float32")
    names = {k for k in cells[0] if comp.classify(k) == "batched"}
    # the model's and the recipe's batched fields always (a cell may leave a field at its default out: vit's α = ½,
    # the mean reduction)
    defaults = _batched_defaults(comp)
    names = sorted(names | set(defaults))
    v = {f: np.asarray([c.get(f, defaults.get(f)) for c in cells]) for f in names}
    for f in names:  # a batched choice: the index of each cell's value among the field's choices
        if (options := comp.choices(f)) is not None:
            v[f] = np.asarray([options.index(x) for x in v[f]], np.int32)
    v = {f: x.astype(dtype) if x.dtype.kind == "f" else x for f, x in v.items()}
    v["lr"], v["reduction"] = v.pop("train.lr"), v.pop("train.reduction")
    v["key"] = np.stack([cell_key(seed_id(c)) for c in cells])
    return v


def cell_parts(cell: dict, tags: tuple[str, ...] = ()):
    """(composition, static fields, its own padded sizes, per-cell inputs v) of one cell: what
    rebuilding its Problem and drawing its data again from its key take."""
    import jax.numpy as jnp

    comp = Composition.of(cell, tuple(tags))
    static = {k: v for k, v in cell.items() if comp.classify(k) == "static"}
    pads = {f: cell[f] for f in comp.size_fields()}
    v = {k: jnp.asarray(x[0]) for k, x in batch_inputs(comp, [cell]).items()}
    return comp, static, pads, v
