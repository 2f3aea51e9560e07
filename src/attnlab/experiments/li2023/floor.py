"""The error floors beside a li2023 phase diagram, per column: the data fields of each column, the
error of the oracle per-token rule that knows the patterns (:func:`attnlab.data.li2023.oracle_error`;
where it is not ~0 a column's failures are Bayes error, not a sample-size boundary) and the
analytic margin z of the best mean-token rule."""

from __future__ import annotations

import json

import jax
import numpy as np

from attnlab.data import li2023 as ldata

_FIELDS = (
    "alpha_star",
    "alpha_hash",
    "tau",
    "M",
    "d",
    "L",
    "kappa",
    "noise",
    "noisy_frac",
    "noisy_tau",
    "spurious",
    "counts",
)


_FLOORS: dict = {}  # oracle_floor's answers: they depend on the fields only, and the audit analyses one spec many times


def column_fields(cols: dict, axis: str, rows: np.ndarray) -> list[dict]:
    """The data fields (without the ``data.`` prefix) of each column of ``axis`` over ``rows``:
    those of the column's first row (a column's runs differ only in N, seed, block and rep),
    validated by the data model (absent fields at their defaults)."""
    x = cols[axis][rows].astype(float)
    data = [k for k in cols if k.removeprefix("data.") in ldata.Spec.model_fields]
    out = []
    for v in np.unique(x):
        i = np.flatnonzero(rows)[np.flatnonzero(x == v)[0]]
        row = {k.removeprefix("data."): cols[k][i].item() if hasattr(cols[k][i], "item") else cols[k][i] for k in data}
        out.append(ldata.Spec(**row).model_dump())  # the fields a run's table lacks at their defaults
    return out


def oracle_floor(fields: list[dict], n: int = 4000, seed: int = 0) -> list[float]:
    """Error of the oracle per-token rule on ``n`` fresh test-set samples of each column (its data
    fields, :func:`column_fields`)."""
    out = []
    for f in fields:
        kw = {k: f[k] for k in _FIELDS}
        key = (json.dumps(kw, sort_keys=True, default=repr), n, seed)
        if key not in _FLOORS:
            X, y = ldata.dataset(jax.random.PRNGKey(seed), n, train=False, **kw)
            _FLOORS[key] = float(ldata.oracle_error(X, y, M=f["M"], kappa=f["kappa"]))
        out.append(_FLOORS[key])
    return out


def margins(fields: list[dict]) -> np.ndarray:
    """The analytic margin z of the best mean-token rule per column (:func:`attnlab.data.li2023.mean_token_margin`)."""
    return np.array([ldata.margin_of(f) for f in fields])
