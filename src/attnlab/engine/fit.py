"""The fit check: before anything compiles, one cell of every bucket is traced abstractly
(``jax.eval_shape``: no compile, no training) through its data, model, loss and probes, so a data
model that does not fit a model, or a probe set that fits neither, is one clear error naming the
parts instead of a trace deep inside the compiled program."""

from __future__ import annotations

from attnlab import problem as P
from attnlab.engine.grid import cell_parts
from attnlab.errors import AttnlabError


def _why(e: Exception) -> str:
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first[:300]}"


def _forward(problem, shared, recipe: P.Recipe, failed: dict, where: str):
    """One cell's data, init, outputs on both splits, loss and probes: traced, never run. A
    probe set that fails is recorded in ``failed`` (its kind -> the exception)."""
    import jax

    def forward(v):
        data = problem.make_data(v["key"], v, shared)
        params = problem.init(v["key"], v)
        f, aux = jax.vmap(lambda x: problem.apply(params, x))(data["X"])
        f_test, _ = jax.vmap(lambda x: problem.apply(params, x))(data["X_test"])
        for got, want, split in ((f, data["y"], "training"), (f_test, data["y_test"], "test")):
            if got.shape != want.shape:
                raise AttnlabError(
                    f"{where}: the model gives outputs of shape {tuple(got.shape)} on the {split} set of "
                    f"shape {tuple(want.shape)}; the trainer needs one number per sample"
                )
        problem.loss.fn(f, data["y"])
        out = {}
        for kind, fn, on in (
            ("probes", problem.probes, recipe.log_every),
            ("array_probes", problem.array_probes, recipe.array_log_every),
        ):
            if fn is None or not on:
                continue
            try:
                out[kind] = fn(problem.parameters(params), data, v, aux)
            except AttnlabError:
                raise
            except Exception as e:  # any failure here means the probe set does not fit
                failed[kind] = e
        return out

    return forward


def check(cells: list[dict], tags: tuple[str, ...] = ()) -> list[str]:
    """Trace one cell of every bucket abstractly (no compile, no training): the data must fit
    the model (one output per sample) and the probe set must fit both. Returns the names of the
    numbers recorded over time (the loss, then the probes). Buckets that differ only in float
    fields (which set values, not shapes) are traced once."""
    from attnlab.engine import grid

    names: dict[str, None] = {}
    for bucket in grid.buckets(cells, tags).values():
        cell = bucket[0]
        shape = (tuple(tags), *sorted((k, v) for k, v in cell.items() if not isinstance(v, float)))
        if shape not in _CHECKED:
            _CHECKED[shape] = _check_cell(cell, tuple(tags))
        names |= dict.fromkeys(_CHECKED[shape])
    return list(names)


_CHECKED: dict[tuple, tuple[str, ...]] = {}  # per process: a passed check by its cells' non-float fields


def _check_cell(cell: dict, tags: tuple[str, ...]) -> tuple[str, ...]:
    import jax

    comp, static, pads, v = cell_parts(cell, tags)
    where = f"data {comp.data.name!r} into model {comp.model.name!r}"
    recipe = P.Recipe(**P.split(static, "train"))
    misfit = lambda e: AttnlabError(f"train.probes: the probe set {recipe.probes!r} does not fit {where} ({_why(e)})")
    try:
        problem = comp.problem(static, pads)
    except AttnlabError:
        raise
    except Exception as e:
        try:  # the probe set is built with the problem: is it the culprit?
            comp.problem({**static, "train.probes": ""}, pads)
        except Exception:
            raise AttnlabError(f"{where}: the model cannot be built for this data ({_why(e)})") from None
        raise misfit(e) from None
    failed: dict[str, Exception] = {}
    forward = _forward(problem, comp.shared(static), recipe, failed, where)
    with jax.enable_x64(recipe.dtype == "float64"):
        try:
            out = jax.eval_shape(forward, v)
        except AttnlabError:
            raise
        except Exception as e:
            raise AttnlabError(f"{where}: the shapes do not fit ({_why(e)})") from None
    for exc in failed.values():
        raise misfit(exc)
    return ("train_loss", *out.get("probes", {})) if recipe.log_every else ()
