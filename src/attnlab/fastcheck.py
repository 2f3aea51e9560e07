"""Fast paths that cannot lie: a model's declared fast paths checked against its plain ``apply``.

A model may declare ``fast_apply`` (the same function computed more cheaply) and ``dual`` (its
Gram form: f from the projections P_W = X W of the parameters it names). For each, on a few draws
of parameters (the model's init, perturbed so that no symmetry of the init hides a difference) and
of real samples from the cell's data model, in float64:

    f_fast(θ, x) = f(θ, x)          and          ∇_θ Σ_x f_fast(θ, x) = ∇_θ Σ_x f(θ, x)

to a relative error of :data:`RTOL` (of the largest value compared). attnlab's own fast paths are
checked in its tests; an outside part's (:func:`attnlab.parts.outside`) are checked at their first
use in a process, and a passed check is remembered on disk under the part's source digest and the
cell's model fields and shapes, so an edited file is checked again. A mismatch is one error naming
the part and the path. ``attnlab check-part NAME`` runs the check on demand.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.errors import AttnlabError

RTOL = 1e-7  # float64: exact paths agree to rounding (≈1e-13); a different function is off by far more
DRAWS = 3  # parameter draws
SAMPLES = 4  # samples per draw


def _perturbed(params: dict, key) -> dict:
    """θ + 0.1·scale·G per parameter (scale: its rms, or 1 for an all-zero init)."""
    out = {}
    for i, (k, p) in enumerate(sorted(params.items())):
        scale = jnp.sqrt(jnp.mean(p**2)) if p.size else 1.0
        scale = jnp.where(scale > 0, scale, 1.0)
        out[k] = p + 0.1 * scale * jax.random.normal(jax.random.fold_in(key, i), p.shape, p.dtype)
    return out


def _rel(a, b) -> float:
    a, b = (np.asarray(x, np.float64) for x in (a, b))
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _compare(comp, static: dict, v: dict, pads: dict) -> dict[str, float]:
    """Largest relative error of each declared fast path (value and gradient) over the draws."""
    from attnlab.problem import split
    from attnlab.train import Dual

    model = comp.model
    hp = comp.hparams(static)
    data_pads = {k.removeprefix("data."): n for k, n in pads.items()}
    data = comp.data.make(
        jax.random.PRNGKey(0), split(v, "data"), split(static, "data"), data_pads, comp.shared(static), jnp.float64
    )
    n = min(SAMPLES, int(np.sum(np.asarray(data["mask"]))))
    X = jax.tree_util.tree_map(lambda a: a[:n], data["X"])
    paths = {}
    if model.fast_apply is not None:
        paths["fast_apply"] = lambda params, x: model.fast_apply(params, x, hp)[0]
    if model.dual is not None:
        dual: Dual = model.dual(hp)

        def via_dual(params, x):
            P = {name: dual.tokens(x) @ params[name] for name in dual.projected}
            return dual.apply({k: p for k, p in params.items() if k not in dual.projected}, P, x)[0]

        paths["dual"] = via_dual
    plain = lambda params, x: model.apply(params, x, hp)[0]

    def value_and_grad(fn, params):
        """(f on every sample, ∇_θ Σ_x f)."""
        return jax.vmap(fn, in_axes=(None, 0))(params, X), jax.grad(lambda p: jnp.sum(jax.vmap(fn, (None, 0))(p, X)))(
            params
        )

    errors = dict.fromkeys(paths, 0.0)
    for i in range(DRAWS):
        key = jax.random.PRNGKey(1000 + i)
        params = _perturbed(model.init(key, hp, jnp.float64), jax.random.fold_in(key, 1))
        f, g = value_and_grad(plain, params)
        for name, fn in paths.items():
            f_fast, g_fast = value_and_grad(fn, params)
            errors[name] = max(errors[name], _rel(f_fast, f), *(_rel(g_fast[k], g[k]) for k in g))
    return errors


def check(comp, static: dict, v: dict, pads: dict) -> dict[str, float]:
    """Check every fast path the model declares for the plain ``apply`` (``fast_of``); returns the
    largest relative error of each. A model whose fast paths are for another apply has none to
    check (they are never used for it). Raises one AttnlabError on a mismatch."""
    model = comp.model
    if not model.fast or not (model.fast_apply or model.dual):
        return {}
    with jax.enable_x64(True):
        errors = _compare(comp, static, v, pads)
    bad = {k: e for k, e in errors.items() if not e <= RTOL}
    if bad:
        what = ", ".join(f"{k} (relative error {e:.3g})" for k, e in bad.items())
        raise AttnlabError(
            f"model {model.name!r}: its declared fast path differs from its apply: {what}, on "
            f"{DRAWS} parameter draws × {SAMPLES} samples in float64 (tolerance {RTOL:g}). Fix the "
            f"fast path, or declare none; `attnlab check-part` repeats the check"
        )
    return errors


_PASSED: set[str] = set()


def _record(kind_name: str, digest: str, static: dict, pads: dict) -> str:
    model = {k: x for k, x in sorted(static.items()) if k.startswith(("model.", "data."))}
    payload = json.dumps([kind_name, digest, model, sorted(pads.items())], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


def _cache() -> Path:
    from attnlab.datasets.common import cache_dir

    return cache_dir() / "fastcheck"


def ensure(comp, static: dict, v: dict, pads: dict) -> None:
    """At an outside model's first use: :func:`check`, unless passed before for the same source
    digest, model fields and shapes (remembered in this process and on disk)."""
    from attnlab.engine.store import atomic_write_bytes
    from attnlab.parts import source_digest

    name = static["model.name"]
    model = comp.model
    if not model.fast or not (model.fast_apply or model.dual) or not static.get("train.fast", True):
        return
    digest = source_digest("model", name)
    if digest is None:  # attnlab's own: checked by its tests
        return
    record = _record(name, digest, static, pads)
    path = _cache() / f"{record}.json"
    if record in _PASSED or path.is_file():
        _PASSED.add(record)
        return
    errors = check(comp, static, v, pads)
    _PASSED.add(record)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, json.dumps({"model": name, "source_sha256_16": digest, "errors": errors}).encode())
    except OSError:  # a read-only cache only costs a repeat of the check
        pass


def check_part(name: str, data: str = "jiang2024", fields: dict | None = None) -> dict[str, float]:
    """``attnlab check-part``: the check of model ``name`` on one cell of data model ``data``,
    ``fields`` ({"model.d_h": 8, "data.M": 4, …}) over the parts' defaults; nothing cached."""
    from attnlab.engine.grid import cell_parts
    from attnlab.experiments.config import ExperimentSpec, check_parts, expand

    tables: dict[str, dict] = {"data": {"name": data}, "model": {"name": name}, "train": {}}
    for key, value in (fields or {}).items():
        kind, dot, field = key.partition(".")
        if kind not in tables or not dot or field == "name":
            raise AttnlabError(f"--set {key}: name a field as data.FIELD, model.FIELD or train.FIELD")
        tables[kind][field] = value
    spec = ExperimentSpec(**tables)
    check_parts(spec)
    (cell,) = expand(spec)
    comp, static, pads, v = cell_parts(cell)
    if not (comp.model.fast_apply or comp.model.dual):
        raise AttnlabError(f"model {name!r} declares no fast path (fast_apply or dual): nothing to check")
    if not comp.model.fast:
        raise AttnlabError(
            f"model {name!r}: its fast paths were declared for another apply (fast_of), so they are "
            f"never used for it: nothing to check"
        )
    return check(comp, static, v, pads)
