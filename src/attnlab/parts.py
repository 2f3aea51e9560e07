"""The parts of a problem and where they are found.

A *part* is a data model (:class:`DataModel`), a model (:class:`Model`) or a probe set
(:class:`ProbeSet`). Each has one typed config (:class:`PartConfig`): its fields with types,
defaults, constraints, meanings and roles, from which the static/batched split and a model's
hyperparameters are derived.

Parts and experiments register themselves::

    PART = register(Model(name="mine", ...))            # a data model, model or probe set
    EXPERIMENT = register(MyExperiment())               # an experiment, under its id

An object is registered when its module is imported. attnlab's own modules are imported on the
first look-up — every module of ``attnlab.data`` and ``attnlab.models``, and of each paper's
package under ``attnlab.experiments`` — so there is no central list to keep. From elsewhere:

- ``package.module:ATTRIBUTE`` wherever a part name goes (TOML, ``--set``, the API): the module
  is imported from ``sys.path``, the directory of the spec's TOML file (:func:`search`) and the
  current directory;
- installed packages: entry points in the groups ``attnlab.parts`` and ``attnlab.experiments``,
  each naming an object to register or a module that registers its own when imported.

A part from outside attnlab is *outside*: its cells' ids include a digest of its module's source
(:func:`source_digest`), so an edited file gives new cells instead of resuming stale ones, and its
declared fast paths are checked on first use (:mod:`attnlab.fastcheck`). :func:`bundle` and
:func:`install` carry outside modules' files to Ray workers.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import pkgutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from attnlab.errors import AttnlabError

if TYPE_CHECKING:
    from attnlab.problem import Context
    from attnlab.train import Dual

INT32_MAX = 2**31 - 1  # integer fields become int32 in the compiled programs


# ---------------------------------------------------------------- a part's typed config


def batched(default: Any = ..., **kw) -> Any:
    """A field that is a per-cell input of the compiled program (cells differing in it share one).
    A model's reaches ``init`` and ``apply`` as a traced value in ``hp``: arithmetic on it must be
    ``jnp``'s, never a Python branch. A batched choice (a ``Literal`` field of strings) reaches
    the program as the int32 index of its value among the choices: read it with :func:`pick` or
    :func:`switch`. A data or model choice that one value fills over a bucket reaches it as that
    value, a constant (:func:`attnlab.engine.grid.constant_choices`)."""
    return Field(default, json_schema_extra={"role": "batched"}, **kw)


def pick(value, choices: tuple, table: dict, dtype=None):
    """``table[value]`` for a batched choice ``value``: the choice itself (a constant: outside a
    compiled program, or one value over the bucket; the table's number as it is), or its index
    among ``choices`` (the field's ``Literal`` values, in order: :meth:`PartConfig.choices`) as a
    ``dtype`` scalar. Both give the same number in ``dtype``; XLA may fold a constant into
    neighbouring constants, so results agree to the last bits."""
    _check_table(choices, table)
    if isinstance(value, str):
        return table[value]
    import jax.numpy as jnp

    return jnp.asarray([table[c] for c in choices], dtype)[value]


def switch(value, choices: tuple, fns: dict, *args):
    """``fns[value](*args)`` for a batched choice ``value`` (see :func:`pick`): ``lax.switch``
    over the choices' functions for an index (under ``vmap`` a select over every branch)."""
    _check_table(choices, fns)
    if isinstance(value, str):
        return fns[value](*args)
    import jax

    return jax.lax.switch(value, [fns[c] for c in choices], *args)


def _check_table(choices: tuple, table: dict) -> None:
    if set(table) != set(choices):
        raise AttnlabError(f"a batched choice's table has {sorted(table)}; the field's choices are {list(choices)}")


def size(default: Any = ..., **kw) -> Any:
    """A batched size field (a sample count): a chunk pads it to its largest value."""
    return Field(default, json_schema_extra={"role": "size"}, **kw)


def from_data(key: str, description: str) -> Any:
    """A model field set from the data model's input shape (``key``: "tokens" or "d"), never by
    the user and never part of a cell; None until the model is bound to a data model."""
    return Field(None, exclude=True, json_schema_extra={"role": "shape", "key": key}, description=description)


class PartConfig(BaseModel):
    """A part's one typed config: its fields with types, defaults, constraints and meanings, and
    each field's role, marked inline: plain ``Field`` (static: fixes shapes or the compiled
    program, so a bucket shares it), :func:`batched`, :func:`size` or :func:`from_data`. The
    static/batched split and a model's hyperparameters (``bind``) are derived from it, and it
    is validated here only. Unknown fields, NaN and inf are errors; an integer must fit the int32
    it becomes in the compiled programs. Frozen (hashable) once validated: a validator that
    resolves a value (e.g. a width 0 meaning d) does so with :meth:`_resolve`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    @model_validator(mode="after")
    def _int32(self):
        for name in type(self).model_fields:
            v = getattr(self, name)
            if isinstance(v, int) and not isinstance(v, bool) and abs(v) > INT32_MAX:
                raise ValueError(f"{name}: {v} does not fit an int32 (|value| ≤ {INT32_MAX:,})")
        return self

    def _resolve(self, **values) -> None:
        """Set resolved values while validating (the instance is frozen afterwards)."""
        self.__dict__.update(values)

    @classmethod
    def role(cls, name: str) -> str:
        extra = cls.model_fields[name].json_schema_extra
        return extra.get("role", "static") if isinstance(extra, dict) else "static"

    @classmethod
    def choices(cls, name: str) -> tuple | None:
        """The values of a ``Literal`` field of strings, in order (None for any other type)."""
        import typing

        annotation = cls.model_fields[name].annotation
        args = typing.get_args(annotation) if typing.get_origin(annotation) is Literal else ()
        return args if args and all(isinstance(a, str) for a in args) else None

    @classmethod
    def fields(cls) -> dict[str, Any]:
        """The fields a user may set (name -> pydantic FieldInfo): all but those from the data."""
        return {k: f for k, f in cls.model_fields.items() if cls.role(k) != "shape"}

    @classmethod
    def with_role(cls, *roles: str) -> tuple[str, ...]:
        """The stored fields (those a cell holds) of the given roles, in declaration order."""
        return tuple(k for k, f in cls.model_fields.items() if not f.exclude and cls.role(k) in roles)

    @classmethod
    def describe(cls) -> list[dict[str, Any]]:
        """One row per field a user may set: name, type, default, allowed values, role (static,
        batched, size, or resolved: it sets other fields and is not stored), meaning."""
        return [
            {
                "field": k,
                "type": _type_name(f.annotation),
                "default": f.get_default(call_default_factory=True),
                "allowed": _allowed(f),
                "role": "resolved" if f.exclude else cls.role(k),
                "description": f.description or "",
            }
            for k, f in cls.fields().items()
        ]

    @classmethod
    def bind(cls, s: dict, shape: dict):
        """The config of a cell's static fields ``s`` bound to the data model's input ``shape``
        ({"tokens": …, "d": …}): a model's hyperparameters, every from_data field set."""
        keys = {k: f.json_schema_extra["key"] for k, f in cls.model_fields.items() if cls.role(k) == "shape"}
        return cls(**s, **{k: shape[key] for k, key in keys.items()})


def _type_name(annotation) -> str:
    import typing

    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is Literal:
        return "choice"
    if typing.get_origin(annotation) is typing.Annotated:
        return _type_name(args[0])
    if args and typing.get_origin(annotation) is not dict:
        return " | ".join(_type_name(a) for a in args) + (
            " | none" if type(None) in typing.get_args(annotation) else ""
        )
    return getattr(annotation, "__name__", str(annotation))


def _allowed(info) -> str:
    """The values a field accepts beyond its type: a Literal's choices, or its bounds."""
    import typing

    def walk(annotation, metadata):
        if typing.get_origin(annotation) is Literal:
            return ", ".join(repr(a) for a in typing.get_args(annotation))
        bounds = [
            f"{op} {getattr(m, attr)}"
            for m in metadata
            for attr, op in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤"))
            if hasattr(m, attr)
        ]
        if bounds:
            return " and ".join(bounds)
        for a in typing.get_args(annotation):
            inner = walk(a, getattr(a, "__metadata__", ()))
            if inner:
                return inner
        return ""

    return walk(info.annotation, info.metadata)


class _Fields:
    """A part's fields by role, from its config: static ones fix the compiled program, batched
    ones (sizes included) are per-cell inputs."""

    config: type[PartConfig]

    @property
    def static(self) -> tuple[str, ...]:
        return self.config.with_role("static")

    @property
    def batched(self) -> tuple[str, ...]:
        return self.config.with_role("batched", "size")


@dataclass(frozen=True)
class DataModel(_Fields):
    """A data model. ``make(key, v, s, pads, shared, dtype)`` returns the training set padded to
    ``pads`` (X: a per-sample pytree with leading axis n_pad, y, mask) and the test set; ``v``
    holds its batched fields, ``s`` its static ones (both as named by ``config``). Samples are
    either generated inside the compiled program (``shared`` is None) or indexed out of arrays
    held once per bucket (``shared(s)`` returns them; ``make`` takes a per-cell index subset)."""

    name: str
    version: int  # bump when a change alters what a given cell computes
    config: type[PartConfig]
    input_shape: Callable[[dict], dict]  # static fields -> {"tokens": M, "d": d}
    make: Callable[..., dict]
    footprint: Callable[[dict, dict], tuple[int, int]]  # (static, pads) -> (samples evaluated, bytes of data)
    shared: Callable[[dict], Any] | None = None
    n_train: str = "N"  # the size field that counts the training samples (X's leading axis, padded)

    @property
    def sizes(self) -> tuple[str, ...]:
        """The padded size fields (⊂ batched): a chunk pads each to its largest value."""
        return self.config.with_role("size")


@dataclass(frozen=True)
class Model(_Fields):
    """A model: ``config`` its hyperparameters (:class:`PartConfig`, the input shape's fields
    :func:`from_data`); ``init(key, hp, dtype)``; ``apply(params, x, hp) -> (f, aux)`` for one
    sample; ``trainable(hp)``; ``groups(hp)``: learning-rate group -> parameter names;
    ``sizes(hp)``: (parameter count, activations per sample) for memory estimates.

    Fast paths (used when ``train.fast``, each exact and checked against the plain path):
    ``fast_apply(params, x, hp)``, the same function computed more cheaply; ``dual(hp)``, the
    model's :class:`attnlab.train.Dual` form for full-batch gd / momentum. ``fast_of`` is the
    plain ``apply`` they are exact for (set to ``apply`` when omitted): a part derived with
    ``dataclasses.replace(part, apply=mine)`` keeps the parent's fast paths, which compute the
    parent's function, so they are used only while ``fast_of is apply`` — the derived part trains
    its own ``apply`` (on the plain path) unless it gives fast paths and ``fast_of=mine`` too."""

    name: str
    version: int
    config: type[PartConfig]
    init: Callable[..., dict]
    apply: Callable[..., tuple]
    trainable: Callable[[Any], tuple[str, ...]]
    groups: Callable[[Any], dict[str, tuple[str, ...]]]
    sizes: Callable[[Any], tuple[int, int]]
    fast_apply: Callable[..., tuple] | None = None
    dual: Callable[[Any], Dual] | None = None
    fast_of: Callable[..., tuple] | None = None

    def __post_init__(self):
        if self.fast_of is None and (self.fast_apply or self.dual):
            object.__setattr__(self, "fast_of", self.apply)

    @property
    def fast(self) -> bool:
        """Are the fast paths exact for this part's ``apply``?"""
        return self.fast_of is self.apply

    def hparams(self, s: dict, shape: dict):
        """The model's hyperparameters: its static fields ``s`` bound to the input ``shape``."""
        return self.config.bind(s, shape)


@dataclass(frozen=True)
class ProbeSet:
    """Probes a paper defines: ``build(ctx) -> (probes, array_probes)`` where ``ctx`` is the
    :class:`Context` of a composed problem and each returned function takes
    (params, data, v, aux)."""

    name: str
    build: Callable[[Context], tuple[Callable | None, Callable | None]]


def tokens(x) -> tuple[Any, Any]:
    """(tokens (L, d), token mask (L,) bool or None) of a per-sample input: a plain token array,
    or a pytree {"tokens": …, "mask": … (optional), metadata …}. Models read their input through
    this, so any data model feeds any model whose shapes fit."""
    if isinstance(x, dict):
        return x["tokens"], x.get("mask")
    return x, None


# ---------------------------------------------------------------- the registry


KINDS = ("data", "model", "probes", "experiment", "paper")
_REGISTRY: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
_ORIGIN: dict[tuple[str, str], str] = {}  # (kind, name) -> module of an outside object
OWN_PACKAGES = ("attnlab.data", "attnlab.models")  # every module imported on the first look-up
OWN_EXPERIMENTS = "attnlab.experiments"  # each paper's subpackage: all its modules


def kind_of(obj) -> str | None:
    from attnlab.experiments.base import Experiment
    from attnlab.ledger import Paper

    types = {"data": DataModel, "model": Model, "probes": ProbeSet, "experiment": Experiment, "paper": Paper}
    return next((k for k, t in types.items() if isinstance(obj, t)), None)


def register(obj, name: str | None = None):
    """Register a part or a paper (under ``obj.name``) or an experiment (under ``obj.id``); returns
    ``obj``. A name already taken by another object is an error."""
    kind = kind_of(obj)
    if kind is None:
        raise AttnlabError(f"register: {type(obj).__name__} is not a data model, model, probe set or experiment")
    name = name or (obj.id if kind == "experiment" else obj.name)
    table = _REGISTRY[kind]
    if name in table and table[name] is not obj:
        raise AttnlabError(f"register: the {kind} name {name!r} is taken (by {_origin_of(kind, name)})")
    table[name] = obj
    caller = sys._getframe(1).f_globals.get("__name__", "")
    if caller != "attnlab" and not caller.startswith("attnlab."):
        _ORIGIN[(kind, name)] = caller
    return obj


def _origin_of(kind: str, name: str) -> str:
    return _ORIGIN.get((kind, name), "attnlab")


@functools.cache
def _discover() -> None:
    """Import attnlab's own modules (they register themselves), then installed packages' entry points."""
    from importlib.metadata import entry_points

    for pkg in OWN_PACKAGES:
        for m in pkgutil.iter_modules(importlib.import_module(pkg).__path__):
            importlib.import_module(f"{pkg}.{m.name}")
    experiments = importlib.import_module(OWN_EXPERIMENTS)
    for paper in pkgutil.iter_modules(experiments.__path__):
        if paper.ispkg:
            sub = importlib.import_module(f"{OWN_EXPERIMENTS}.{paper.name}")
            for m in pkgutil.iter_modules(sub.__path__):
                importlib.import_module(f"{sub.__name__}.{m.name}")
    for group in ("attnlab.parts", "attnlab.experiments"):
        for ep in entry_points(group=group):
            load_entry_point(ep)


def load_entry_point(ep) -> None:
    """Register what an installed package's entry point names: a part or an experiment, or a
    module that registers its own when imported. A broken one is one error naming it."""
    try:
        obj = ep.load()
    except (Exception, SystemExit) as e:  # noqa: BLE001 — a broken package must name itself, not crash every command
        raise AttnlabError(
            f"entry point {ep.group} {ep.name!r} ({ep.value}) does not load: {import_failure(ep.module, e)}"
        ) from None
    if isinstance(obj, type(sys)):
        return
    kind = kind_of(obj)
    if kind is None:
        raise AttnlabError(
            f"entry point {ep.group} {ep.name!r} ({ep.value}) is a {type(obj).__name__}, not a part or an experiment"
        )
    name = obj.id if kind == "experiment" else obj.name
    if _REGISTRY[kind].get(name) is not obj:
        register(obj)
        _ORIGIN[(kind, name)] = ep.module


def registered(kind: str) -> dict[str, Any]:
    """Every registered object of ``kind`` by name (experiments: in :func:`experiment_order`)."""
    _discover()
    table = _REGISTRY[kind]
    if kind == "experiment":
        return {k: table[k] for k in sorted(table, key=experiment_order)}
    return dict(table)


def experiment_order(exp_id: str) -> tuple:
    """attnlab's own first, by paper; within a paper its figures first, then the rest by id."""
    paper = exp_id.split("-")[0]
    return (_origin_of("experiment", exp_id) != "attnlab", paper, not exp_id.startswith(f"{paper}-fig"), exp_id)


def did_you_mean(name: str, valid) -> str:
    """ " (did you mean X?)" for the closest valid names, or ""."""
    import difflib

    close = difflib.get_close_matches(name, list(valid), n=2, cutoff=0.75)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def part(kind: str, name: str):
    """The part ``name`` of ``kind`` ("data", "model", "probes"): a registered one, or
    ``package.module:ATTRIBUTE`` of a module of one's own."""
    table = registered(kind)
    if name in table:
        return table[name]
    if isinstance(name, str) and ":" in name:
        return _plugin(kind, name)
    raise AttnlabError(
        f"{kind}.name: unknown {kind} {name!r}{did_you_mean(str(name), table)}; valid: "
        f"{', '.join(table)}, or package.module:ATTRIBUTE of a part in your own module"
    )


_SEARCH: list[str] = []  # directories searched after sys.path: the specs' own, then the current one


def search(directory: str | os.PathLike) -> None:
    """Also import outside modules from ``directory`` (a spec's TOML file's), after sys.path."""
    d = str(Path(directory).resolve())
    if d not in _SEARCH:
        _SEARCH.append(d)


def _import(module: str):
    sys.path.extend(d for d in (*_SEARCH, os.getcwd()) if d not in sys.path)  # kept: the module may import more
    return importlib.import_module(module)


def import_failure(module: str, e: BaseException) -> str:
    """What went wrong importing a user's ``module``, in one line: the exception and where it was
    raised in the user's own code (file:line, the deepest frame outside Python's import machinery
    and attnlab), or where Python could not parse it."""
    import traceback

    where = ""
    if isinstance(e, SyntaxError) and e.filename:
        where = f"{e.filename}:{e.lineno}"
    else:
        machinery = (str(Path(__file__).resolve().parent), str(Path(importlib.__file__).resolve().parent))
        frames = [
            f
            for f in traceback.extract_tb(e.__traceback__)
            if not f.filename.startswith("<") and not str(Path(f.filename).resolve()).startswith(machinery)
        ]
        if frames:
            where = f"{frames[-1].filename}:{frames[-1].lineno}" + (f" ({frames[-1].line})" if frames[-1].line else "")
    if isinstance(e, ModuleNotFoundError) and e.name == module.partition(".")[0] and not where:
        return f"no module named {module!r} on sys.path, in the spec's directory or in {os.getcwd()}"
    return f"importing {module!r} raised {type(e).__name__}: {e}" + (f", at {where}" if where else "")


@functools.cache
def _plugin(kind: str, name: str):
    module, _, attr = name.partition(":")
    try:
        loaded = _import(module)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - any error in a user's module is theirs to see, in one line
        raise AttnlabError(f"{kind}.name: cannot load the plugin {name!r}: {import_failure(module, e)}") from None
    try:
        obj = getattr(loaded, attr)
    except AttributeError:
        raise AttnlabError(f"{kind}.name: the module {module!r} has no attribute {attr!r} (plugin {name!r})") from None
    if kind_of(obj) != kind:
        raise AttnlabError(f"{kind}.name: {name!r} is a {type(obj).__name__}, not a {kind} part")
    _ORIGIN[(kind, name)] = module
    return obj


def outside(kind: str, name: str) -> str | None:
    """The module an outside part comes from (None for attnlab's own)."""
    part(kind, name)
    return _ORIGIN.get((kind, name))


def _module_file(module: str) -> Path | None:
    spec = importlib.util.find_spec(module) if module not in sys.modules else sys.modules[module].__spec__
    origin = getattr(spec, "origin", None)
    return Path(origin) if origin and origin.endswith(".py") else None


def source_digest(kind: str, name: str) -> str | None:
    """16 hex digits of sha256 over the source file of an outside part's module (None for
    attnlab's own parts, whose ``version`` says when their numbers change)."""
    module = outside(kind, name)
    if module is None:
        return None
    path = _module_file(module)
    if path is None:
        raise AttnlabError(
            f"{kind}.name: the module {module!r} of {name!r} has no Python source file to identify its cells by"
        )
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


# ---------------------------------------------------------------- shipping outside modules


def bundle(parts: list[tuple[str, str]]) -> tuple[tuple[str, bytes], ...]:
    """The files that make the outside parts' modules importable elsewhere: for a module of its
    own, its file; for one in a package, the package's .py files (relative paths, contents)."""
    files: dict[str, bytes] = {}
    for kind, name in parts:
        module = outside(kind, name)
        if module is None:
            continue
        top = module.partition(".")[0]
        path = _module_file(top)
        if path is None:
            raise AttnlabError(
                f"{kind}.name: cannot ship the module {module!r} of {name!r} to Ray workers (no source file)"
            )
        if path.name == "__init__.py":
            root = path.parent.parent
            for f in sorted(path.parent.rglob("*.py")):
                files[str(f.relative_to(root))] = f.read_bytes()
        else:
            files[path.name] = path.read_bytes()
    return tuple(sorted(files.items()))


def install(files: tuple[tuple[str, bytes], ...]) -> None:
    """Make shipped modules importable in this process: written once under a directory named by
    their digest, put first on sys.path; a module already imported from another version of the
    files is dropped so that it is imported again."""
    if not files:
        return
    digest = hashlib.sha256(repr(files).encode()).hexdigest()[:16]
    root = Path(tempfile.gettempdir()) / f"attnlab-modules-{digest}"
    if not root.is_dir():
        tmp = Path(tempfile.mkdtemp(prefix=f"{root.name}-"))
        for rel, data in files:
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_bytes(data)
        try:
            tmp.rename(root)
        except OSError:  # another process installed it first
            pass
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
        tops = {rel.partition("/")[0].removesuffix(".py") for rel, _ in files}
        for m in [m for m in sys.modules if m.partition(".")[0] in tops]:
            del sys.modules[m]
        _plugin.cache_clear()
        importlib.invalidate_caches()
