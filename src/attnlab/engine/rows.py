"""The results-row format, both ways. A row is one trained cell:

    id, the cell's fields       its namespaced part fields, seed, block, rep and the experiment's tags
    metrics                     the loss's metrics (train_loss, test_loss, …), stop_step, status, seconds
    trace_step, trace_<name>    scalar probes on the log schedule (lists)
    array_step, array_<name>,   array probes on theirs: per logged step the array flattened, and
    array_<name>_shape          its shape
    params_npz                  the final parameters as an .npz (with train.save_params)
    provenance                  attnlab_version, git_sha, jax_version, backend, strategy, dtype, …

:func:`rows` writes them from the trainer's result; :func:`cell_of` and :func:`params_of` read a
cell and its parameters back.
"""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa

from attnlab.engine.grid import cell_id
from attnlab.problem import KEY_ONLY, PART_KINDS
from attnlab.train import STATUS_NAMES

PARAMS = "params_npz"


def params_bytes(params: dict) -> bytes:
    """Parameters as the bytes of an .npz (the ``params_npz`` column)."""
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(p) for k, p in params.items()})
    return buf.getvalue()


def params_of(blob: bytes) -> dict[str, np.ndarray]:
    """The parameters a ``params_npz`` value holds."""
    return dict(np.load(io.BytesIO(blob)))


def rows(cells: list[dict], res: dict, cfg, seconds: float, provenance: dict) -> list[dict]:
    """One row per cell of a chunk from the trainer's result ``res`` (metrics, and traces, arrays
    and params where recorded); ``seconds``: the chunk's wall time shared out evenly."""
    out = []
    for i, c in enumerate(cells):
        row = {"id": cell_id(c), **c}
        for k, x in res["metrics"].items():
            row[k] = x[i].item()
        row["status"] = STATUS_NAMES[int(res["metrics"]["status"][i])]
        row["seconds"] = seconds
        if "traces" in res:
            row["trace_step"] = list(cfg.log_steps)
            for k, x in res["traces"].items():
                row[f"trace_{k}"] = np.asarray(x[i], dtype=np.float64).tolist()
        if "arrays" in res:
            row["array_step"] = list(cfg.array_log_steps)
            for k, x in res["arrays"].items():
                a = np.asarray(x[i], dtype=np.float64)
                row[f"array_{k}"] = a.reshape(len(cfg.array_log_steps), -1).tolist()
                row[f"array_{k}_shape"] = list(a.shape[1:])
        if "params" in res:
            row[PARAMS] = params_bytes({k: p[i] for k, p in res["params"].items()})
        out.append(row | provenance)
    return out


def table(rows: list[dict]) -> pa.Table:
    """Rows as a table with the union of their keys (in order of first appearance), null where a
    row has none: a cell may leave a field at its default out (the ViT's α = ½), and pyarrow
    would otherwise take the columns of the first row alone, dropping the field of every cell."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    return pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows])


def cell_of(row: dict, tags: tuple[str, ...] = ()) -> dict:
    """The cell a row was trained from: its part fields, seed, block, rep and tags. A field left
    out of this cell (at a default kept out of its id) is null in a table whose other cells have
    it, so nulls are dropped."""
    parts = tuple(f"{k}." for k in PART_KINDS)
    return {k: v for k, v in row.items() if (k.startswith(parts) or k in KEY_ONLY or k in tags) and v is not None}
