"""attnlab: experiments on shallow transformers.

The notebook API (:mod:`attnlab.api`) is imported on first use, so ``import attnlab`` stays cheap
(no JAX until a run needs it)::

    attnlab.reproduce(exp_id, scale="cpu", out=None, sets=None, **kw) -> verdict
    attnlab.sweep(spec, out, sets=None, **kw)                          -> verdict
    attnlab.load(out, format="pandas" | "arrow" | "polars", traces="wide" | "long") -> results table
    attnlab.to_xarray(out)                                            -> xarray.Dataset over the grid
    attnlab.query(out, sql, format="pandas" | "arrow" | "polars")     -> query result
"""

__all__ = ["load", "query", "reproduce", "sweep", "to_xarray"]


def __getattr__(name: str):
    if name in ("reproduce", "sweep", "load", "query", "to_xarray"):
        from attnlab import api

        return getattr(api, name)
    raise AttributeError(f"module 'attnlab' has no attribute {name!r}")
