"""A Problem is composed of three parts: a data model, a model and a training recipe.

Each part has its own fields, namespaced in a cell so that they cannot collide::

    data.name = "jiang2024"   data.mu = 20.0   data.N = 10   ...   (the data model's fields)
    model.name = "jiang2024"  model.d_h = 512  model.tau = 1.0 ...   (the model's fields)
    train.lr = 0.1   train.optimizer = "gd"   train.loss = "logistic" ... (the recipe's fields)
    seed, block, rep, and an experiment's tags (e.g. regime)          (key-only: they change the
                                                                       cell's id and key, nothing else)

Every field is classified: *static* (fixes shapes or the compiled program: a bucket shares
them), *batched* (a per-cell input of the compiled program) or *key-only*. An unclassified
field is an error, never silently folded into another cell's program.

A grid across papers is a composition of existing parts (jiang2024 data into another paper's
model), never a new family: the model takes its input shape (tokens, d) from the data model.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from pydantic import (
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_serializer,
    model_validator,
)

from attnlab import train as T
from attnlab.errors import AttnlabError
from attnlab.parts import DataModel, Model, PartConfig, batched, part

KEY_ONLY = ("seed", "block", "rep")
PART_KINDS = ("data", "model", "train")


class Recipe(PartConfig):
    """The training recipe (the trainer's own fields, shared by every paper).

    Warm start (any model): ``init_from`` names an .npz of parameters (e.g. a pretraining cell's
    saved ones, :func:`write_params`), loaded once per process and checked against the model's
    names and shapes; every cell then starts from them instead of the model's random init. Its
    ``init_sha256`` (:func:`params_sha256`) is part of the cell, so the id changes with the
    parameters; the path is part of the id but not of the cell's random draws
    (:data:`attnlab.engine.grid.HOW`), so the same parameters elsewhere draw the same data."""

    loss: Literal["logistic", "hinge", "squared"] = Field("logistic", description="per-sample loss")
    draws: Literal["cell", "common"] = Field(
        "cell",
        description="the random draws (data, init, batch order) of a cell: its own (from its whole config), or "
        "common — from its data fields, seed, block and rep only, so models and recipes compared in one grid see the "
        "same data, the same initial parameters where their shapes agree, and the same batches",
    )
    reduction: Literal[T.REDUCTIONS] = batched(
        "mean",
        description="the objective a step follows: the mean (1/n) Σ ℓ_i over the batch, or the sum Σ ℓ_i "
        "(with the squared loss ℓ = ½(f − y)², the ½·Σ of a paper that sums); recorded losses are means either way",
    )
    optimizer: Literal["gd", "momentum", "adam"] = Field("gd", description="optimiser")
    momentum: float = Field(0.9, ge=0, lt=1, description="momentum (optimizer = momentum)")
    lr: PositiveFloat = batched(0.1, description="learning rate")
    lr_mult: dict[str, PositiveFloat] = Field(
        default_factory=dict, description="learning-rate multiplier per parameter group, e.g. lr_mult.QK=3"
    )
    batch_size: NonNegativeInt = Field(0, description="mini-batch size b (0: full batch)")
    max_steps: NonNegativeInt = Field(1000, description="step cap")
    loss_threshold: float = Field(0.0, description="stop at the first judged step whose stop quantity is below this")
    stop_on: Literal["loss", "hinge", "error"] = Field(
        "loss",
        description="stop quantity on the full training set: the training loss, the hinge loss "
        "max(0, 1 − yf) (zero = every margin ≥ 1), or the 0-1 error",
    )
    stop_every: PositiveInt = Field(1, description="judge the stop rule on the full training set every this many steps")
    log_every: NonNegativeInt = Field(0, description="record probes every this many steps (0: none)")
    log_dense_until: NonNegativeInt = Field(0, description="record probes at every step before this one")
    array_log_every: NonNegativeInt = Field(0, description="record array-valued probes every this many steps")
    probes: str = Field("", description="the probe set recorded on the log schedule ('' or 'none': none)")
    dtype: Literal["float32", "float64"] = Field("float32", description="training precision")
    save_params: bool = Field(False, description="store each cell's final parameters")
    fast: bool = Field(
        True,
        description="use the model's exact fast paths (a cheaper apply; the dual Gram form under full-batch "
        "gd/momentum when N·L < d); false: the plain path",
    )
    compile: Literal["default", "fast"] = Field(
        "default",
        description="XLA's effort compiling the cell's programs: default, or fast (LLVM optimisation level 1; measured "
        "on 2 cores: li2023's and wu2023's programs compiled 15–47 % faster and ran 2–12 % slower, jiang2024's "
        "neither; the same numbers to float rounding), for a first run that is mostly compilation",
    )
    init_from: str = Field(
        "",
        description="start from the parameters in this .npz file (the model's own names and shapes; '': the "
        "model's init); like data paths it must be readable where the cell trains",
    )
    init_sha256: str = Field(
        "",
        description="params_sha256 of init_from's parameters: filled in from the file when empty, checked "
        "against it before training",
    )

    @field_validator("probes", mode="before")
    @classmethod
    def _no_probes(cls, v):
        return "" if v == "none" else v  # --set train.probes=none (an empty value is no value there)

    @model_validator(mode="after")
    def _init_file(self):
        if self.init_sha256 and not self.init_from:
            raise ValueError("train.init_sha256: given without train.init_from (the file it is the digest of)")
        if self.init_from and not self.init_sha256:
            self._resolve(init_sha256=read_params(self.init_from)[1])
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        """A cell without init_from has neither field, so every earlier cell keeps its id."""
        d = handler(self)
        for name, default in (("reduction", "mean"), ("draws", "cell"), ("compile", "default")):
            if d.get(name) == default:  # a default left out of a cell, so earlier cells keep their ids
                d.pop(name, None)
        if not self.init_from:
            d.pop("init_from", None)
            d.pop("init_sha256", None)
        return d


RECIPE_VERSION = 4
# XLA compiler options of a cell's programs per train.compile (per compile: other programs keep theirs)
COMPILE_OPTIONS = {"default": (), "fast": (("xla_backend_optimization_level", 1),)}


def params_sha256(params: dict) -> str:
    """sha256 over the parameters in name order: each name, dtype, shape and C-order bytes. It
    depends on the numbers only (not on how a file holding them was written)."""
    h = hashlib.sha256()
    for name in sorted(params):
        a = np.ascontiguousarray(params[name])
        h.update(f"{name}\0{a.dtype.str}{a.shape}\0".encode())
        h.update(a.data)
    return h.hexdigest()


@functools.lru_cache(maxsize=8)
def _read_params(path: str, mtime_ns: int, size: int) -> tuple[dict, str]:
    try:
        with np.load(path, allow_pickle=False) as z:
            params = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise AttnlabError(f"train.init_from: cannot read {path} as an .npz of parameter arrays ({e})") from None
    for a in params.values():
        a.setflags(write=False)
    return params, params_sha256(params)


def read_params(path: str) -> tuple[dict[str, np.ndarray], str]:
    """(parameters, params_sha256) of an .npz file; read once per process while the file is unchanged."""
    p = Path(path).expanduser()
    try:
        st = p.stat()
    except OSError as e:
        raise AttnlabError(f"train.init_from: no parameter file {path} ({e.strerror})") from None
    return _read_params(str(p), st.st_mtime_ns, st.st_size)


def write_params(params: dict, directory: str | Path | None = None) -> tuple[str, str]:
    """Store parameters for ``train.init_from``: (path, params_sha256) of ``<directory>/<sha256>.npz``
    (default directory: ``params`` in attnlab's cache, :func:`attnlab.datasets.common.cache_dir`).
    The name is the content's digest, so an existing file of that name is kept as it is."""
    from attnlab.datasets.common import cache_dir
    from attnlab.engine.store import atomic_write_bytes

    params = {k: np.asarray(v) for k, v in params.items()}
    digest = params_sha256(params)
    path = Path(directory).expanduser() if directory else cache_dir() / "params"
    path = path / f"{digest}.npz"
    if not (path.is_file() and read_params(str(path))[1] == digest):
        buf = io.BytesIO()
        np.savez(buf, **params)
        try:
            os.makedirs(path.parent, exist_ok=True)
            atomic_write_bytes(path, buf.getvalue())
        except OSError as e:
            raise AttnlabError(f"train.init_from: cannot write {path} ({e.strerror})") from None
    return str(path), digest


STOP_FNS = {
    "loss": None,  # the training loss itself
    "hinge": T.LOSSES["hinge"].fn,
    "error": lambda f, y: (jnp.sign(f) != y).astype(f.dtype),
}


@dataclass(frozen=True)
class Context:
    """What a probe set may use: the parts, their static fields, the model's Hparams."""

    data: DataModel
    model: Model
    data_static: dict
    hp: Any
    loss: T.Loss
    apply: Callable  # (params, x) -> (f, aux) for one sample


def part_config(kind: str, name: str | None) -> type[PartConfig]:
    """The typed config of a part (the recipe's for ``train``)."""
    return Recipe if kind == "train" else part(kind, name).config


def split(cell: dict, kind: str) -> dict:
    """The fields of one part of a cell, without their namespace and its name (lr_mult.* folded
    into a dict)."""
    pre = kind + "."
    out: dict[str, Any] = {}
    for k, v in cell.items():
        if k.startswith(pre) and k != pre + "name":
            name = k[len(pre) :]
            if name.startswith("lr_mult."):
                out.setdefault("lr_mult", {})[name[len("lr_mult.") :]] = v
            else:
                out[name] = v
    return out


# ---------------------------------------------------------------- composition


@dataclass(frozen=True)
class Composition:
    """data model + model + recipe: classifies a cell's fields and builds its Problem."""

    data: DataModel
    model: Model
    tags: tuple[str, ...] = ()

    @classmethod
    def of(cls, cell: dict, tags: tuple[str, ...] = ()) -> Composition:
        for k in ("data.name", "model.name"):
            if k not in cell:
                raise AttnlabError(f"cell: missing field {k!r}")
        return cls(part("data", cell["data.name"]), part("model", cell["model.name"]), tuple(tags))

    @property
    def name(self) -> str:
        return f"{self.data.name}+{self.model.name}"

    @property
    def schema(self) -> dict[str, int]:
        return {
            f"data/{self.data.name}": self.data.version,
            f"model/{self.model.name}": self.model.version,
            "train": RECIPE_VERSION,
        }

    def classify(self, key: str) -> str:
        """'static', 'batched' or 'key' for a cell field; an unclassified field is an error."""
        if key in ("data.name", "model.name"):
            return "static"
        if key in KEY_ONLY or key in self.tags:
            return "key"
        kind, _, name = key.partition(".")
        if kind == "train" and name.startswith("lr_mult."):
            return "static"
        config = self.configs.get(kind)
        if config is not None and name in config.with_role("static", "batched", "size"):
            return "static" if config.role(name) == "static" else "batched"
        raise AttnlabError(
            f"cell field {key!r} is not classified as static, batched or key-only for {self.name} "
            f"(an experiment's own labels must be declared as tags)"
        )

    @property
    def configs(self) -> dict[str, type[PartConfig]]:
        """The config of each field namespace: data, model, train (the recipe)."""
        return {"data": self.data.config, "model": self.model.config, "train": Recipe}

    def choices(self, key: str) -> tuple | None:
        """The choices of a cell field that is a ``Literal`` of the data, model or recipe config (None otherwise)."""
        kind, _, name = key.partition(".")
        config = self.configs.get(kind)
        return config.choices(name) if config and name in config.model_fields else None

    def size_fields(self) -> tuple[str, ...]:
        return tuple(f"data.{s}" for s in self.data.sizes)

    def hparams(self, static: dict):
        """The model's hyperparameters for a cell's (static) fields, bound to the data's input shape."""
        return self.model.hparams(split(static, "model"), self.data.input_shape(split(static, "data")))

    def check(self, static: dict) -> dict[str, str]:
        """Checks what only the composition can (the model's shape needs, lr_mult groups);
        returns parameter -> learning-rate group."""
        hp = self.hparams(static)
        groups = {p: g for g, ps in self.model.groups(hp).items() for p in ps}
        recipe = Recipe(**split(static, "train"))
        unknown = sorted(set(recipe.lr_mult) - set(groups.values()) - set(groups))
        if unknown:
            raise AttnlabError(
                f"train.lr_mult: unknown group(s) {unknown} for model {self.model.name!r}; "
                f"valid: {sorted(set(groups.values()))} or a parameter name"
            )
        if recipe.init_from:
            self._stored_init(recipe, hp, jnp.dtype(recipe.dtype))
        if self.data.shared:  # a missing data set stops the run here, before anything is written (cached)
            self.shared(static)
        return groups

    def _stored_init(self, recipe: Recipe, hp, dtype) -> dict[str, np.ndarray]:
        """The parameters of ``recipe.init_from`` checked against the model's own (names, shapes)
        and the cell's init_sha256, cast to the model's dtypes."""
        params, digest = read_params(recipe.init_from)
        if digest != recipe.init_sha256:
            raise AttnlabError(
                f"train.init_from: {recipe.init_from} holds parameters with sha256 {digest}, not the "
                f"cell's train.init_sha256 {recipe.init_sha256} (the file changed)"
            )
        with jax.enable_x64(jnp.dtype(dtype) == jnp.float64):
            want = jax.eval_shape(lambda: self.model.init(jax.random.PRNGKey(0), hp, dtype))
        missing, extra = sorted(set(want) - set(params)), sorted(set(params) - set(want))
        shapes = [
            f"{k} {params[k].shape} (model: {want[k].shape})"
            for k in sorted(set(want) & set(params))
            if params[k].shape != want[k].shape
        ]
        if missing or extra or shapes:
            what = "; ".join(
                f"{label}: {', '.join(v)}"
                for label, v in (("missing", missing), ("not the model's", extra), ("shapes differ", shapes))
                if v
            )
            raise AttnlabError(
                f"train.init_from: {recipe.init_from} does not fit model {self.model.name!r} of this cell: {what}"
            )
        return {k: np.asarray(params[k], np.dtype(want[k].dtype)) for k in want}  # numpy keeps float64 outside x64

    def problem(self, static: dict, pads: dict) -> T.Problem:
        """The trainer's Problem for a bucket's static fields and a chunk's padded sizes."""
        ds, recipe = split(static, "data"), Recipe(**split(static, "train"))
        dtype = jnp.dtype(recipe.dtype)
        hp = self.hparams(static)
        data_pads = {k.removeprefix("data."): n for k, n in pads.items()}
        loss = T.LOSSES[recipe.loss]
        model_apply = (
            self.model.fast_apply if recipe.fast and self.model.fast and self.model.fast_apply else self.model.apply
        )
        # The model's batched fields (e.g. wu2023's α) are per-cell inputs: each cell's values ride
        # in its fixed parameters under their cell names ("model.alpha"), so every function that
        # gets the parameters gets them, and the model sees hp with them in place (traced values).
        # (a batched choice that is in ``static`` — one value over the bucket: grid.constant_choices — is a constant)
        inputs = tuple(f"model.{n}" for n in self.model.config.with_role("batched") if f"model.{n}" not in static)

        def cell_hp(values: dict):
            return hp.model_copy(update={k[6:]: values[k] for k in inputs}) if inputs else hp

        def apply(params, x):
            return model_apply({k: p for k, p in params.items() if k not in inputs}, x, cell_hp(params))

        constants = {k: ds[k] for k in self.data.batched if k in ds}  # batched choices one value fills

        def make_data(key, v, shared):
            return self.data.make(key, split(v, "data") | constants, ds, data_pads, shared, dtype)

        groups = self.check(static)
        probes = array_probes = None
        if recipe.probes:
            probe_set = part("probes", recipe.probes)
            ctx = lambda h: Context(self.data, self.model, ds, h, loss, lambda params, x: model_apply(params, x, h))
            probes, array_probes = probe_set.build(ctx(hp))
            if inputs:  # built per cell at trace time, on hp with the cell's values (probes get no inputs)
                per_cell = lambda i: (
                    lambda params, data, v, aux: probe_set.build(ctx(cell_hp(v)))[i](params, data, v, aux)
                )
                probes, array_probes = (per_cell(0) if probes else None), (per_cell(1) if array_probes else None)
        init = lambda key, v: self.model.init(key, cell_hp(v), dtype) | {k: v[k] for k in inputs}
        if recipe.init_from:  # every cell of the bucket starts from the stored parameters (no random init)
            stored = self._stored_init(recipe, hp, dtype)
            init = lambda key, v: {k: jnp.asarray(a) for k, a in stored.items()} | {k: v[k] for k in inputs}
        return T.Problem(
            make_data=make_data,
            init=init,
            apply=apply,
            loss=loss,
            trainable=self.model.trainable(hp),
            groups=groups,
            lr_mult=tuple(sorted(recipe.lr_mult.items())),
            probes=probes,
            array_probes=array_probes,
            stop_fn=STOP_FNS[recipe.stop_on],
            dual=None if inputs else self.dual_form(recipe, hp, data_pads, ds),  # a dual form is built for one hp
            inputs=inputs,
        )

    def dual_form(self, recipe: Recipe, hp, data_pads: dict, ds: dict) -> T.Dual | None:
        """The model's dual form where it is exact (full-batch gd / momentum) and cheaper: a
        step costs (N·L)²·width against N·L·d·width in the plain form, so it needs N·L < d
        (N: the padded training set, the data part's ``n_train`` size; L: tokens per sample)."""
        if not (
            recipe.fast
            and self.model.fast
            and self.model.dual
            and recipe.batch_size == 0
            and recipe.optimizer in ("gd", "momentum")
        ):
            return None
        shape = self.data.input_shape(ds)
        N = data_pads.get(self.data.n_train)
        if N is None or N * shape["tokens"] >= shape["d"]:
            return None
        return self.model.dual(hp)

    def train_config(self, static: dict) -> T.TrainConfig:
        r = Recipe(**split(static, "train"))
        logs = T.log_schedule(r.max_steps, every=r.log_every, dense_until=r.log_dense_until) if r.log_every else ()
        arrays = T.log_schedule(r.max_steps, every=r.array_log_every) if r.array_log_every else ()
        return T.TrainConfig(
            max_steps=r.max_steps,
            loss_threshold=r.loss_threshold,
            optimizer=r.optimizer,
            momentum=r.momentum,
            batch_size=r.batch_size,
            stop_every=r.stop_every,
            log_steps=logs,
            array_log_steps=arrays,
            save_params=r.save_params,
            xla_options=COMPILE_OPTIONS[r.compile],
        )

    def shared(self, static: dict):
        return self.data.shared(split(static, "data")) if self.data.shared else None

    def n_params(self, static: dict) -> int:
        """The model's parameter count (trained and fixed) for a cell's static fields."""
        return int(self.model.sizes(self.hparams(static))[0])

    def cell_bytes(self, static: dict, pads: dict) -> int:
        """Rough peak memory of one cell: parameters ×4 (θ, gradient, update, optimiser
        state), its data, and the activations of the forward/backward pass ×3."""
        width = 4 if static.get("train.dtype", "float32") == "float32" else 8
        n_params, act = self.model.sizes(self.hparams(static))
        n, data = self.data.footprint(split(static, "data"), {k.removeprefix("data."): v for k, v in pads.items()})
        return width * (4 * n_params + 3 * n * act) + data
