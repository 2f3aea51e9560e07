"""A run's wall time, estimated before it runs from a short measured calibration.

The run's chunks are those of its plan (:class:`attnlab.engine.plan.Plan`): each
distinct (static fields, padded sizes) is one compiled program. Up to :data:`PROGRAMS` of them —
the chunk with the most work and the first — are calibrated: :data:`CELLS` of the chunk's cells
with ``train.max_steps`` cut to :data:`STEPS` are trained twice in this process; the first call
minus the second is the compile time, the second gives the seconds per cell-step per unit of work.
A chunk's work per cell-step is its training samples × (parameters + activations per sample), from
the parts' own size estimates. Then

    compile ≈ mean measured compile × programs
    train   ≈ Σ_chunks cells × max_steps × work × (seconds per cell-step per unit of work)

Where a stop rule ends cells early (``train.loss_threshold`` > 0), up to :data:`SAMPLE` cells spread
over the heaviest chunk are also trained to their own stop, when that costs at most
:data:`SAMPLE_SECONDS` by the measured rate: max_steps above becomes their mean stop step. Otherwise
the estimate is an upper bound (and says so). Compile times are a cold cache's (programs already in
the persistent compile cache load faster). The figures and the report add a few seconds that are
not counted. Nothing is written: the calibration results are thrown away.
"""

from __future__ import annotations

import time

from attnlab.engine.plan import Chunk, Plan
from attnlab.problem import Composition, split

PROGRAMS = 2  # calibrated programs
CELLS = 4  # cells per calibration chunk
STEPS = 20  # steps per calibration run
SAMPLE = 8  # cells trained to their stop, for the mean stop step
SAMPLE_SECONDS = 20.0  # at most this long (by the measured rate)


def _work(comp: Composition, static: dict, pads: dict) -> float:
    """Training samples × (parameters + activations per sample): the cost of one cell-step, up to
    a factor the calibration measures."""
    n_params, act = comp.model.sizes(comp.hparams(static))
    n_train = pads.get(f"data.{comp.data.n_train}", 1)
    return float(n_train * (n_params + act))


def _calibrate(chunk) -> tuple[float, float]:
    """(compile seconds, seconds per cell-step) of a cut-down copy of ``chunk``."""
    from attnlab.engine.executors import train_chunk

    static = dict(chunk.static)
    steps = max(1, min(STEPS, static.get("train.max_steps", STEPS)))
    cut = {"train.max_steps": steps}
    cells = tuple(c | cut for c in chunk.cells[:CELLS])
    small = Chunk(tuple((k, cut.get(k, v)) for k, v in chunk.static), cells, chunk.pads, chunk.tags)
    t0 = time.perf_counter()
    train_chunk(small)
    t1 = time.perf_counter()
    train_chunk(small)
    t2 = time.perf_counter()
    return max(0.0, (t1 - t0) - (t2 - t1)), (t2 - t1) / (len(cells) * steps)


def _stop_fraction(chunk, per_step: float) -> tuple[float, int] | None:
    """(mean stop step / max_steps, cells sampled) of cells spread over ``chunk``, trained to their
    own stop; None where that would take longer than :data:`SAMPLE_SECONDS`."""
    import numpy as np

    from attnlab.engine.executors import train_chunk

    max_steps = dict(chunk.static).get("train.max_steps", 1)
    picks = sorted(set(np.linspace(0, len(chunk.cells) - 1, min(SAMPLE, len(chunk.cells))).round().astype(int)))
    if len(picks) * max_steps * per_step > SAMPLE_SECONDS:
        return None
    sample = Chunk(chunk.static, tuple(chunk.cells[i] for i in picks), chunk.pads, chunk.tags)
    stops = train_chunk(sample).column("stop_step").to_pylist()
    return float(np.mean(stops)) / max_steps, len(stops)


def estimate(plan: Plan) -> dict:
    """The estimated compile and training seconds of a run's plan (see the module)."""
    chunks = plan.chunks
    if not chunks:
        return {"seconds": 0.0, "compile_seconds": 0.0, "train_seconds": 0.0, "programs": 0, "upper_bound": False}
    rows = []
    for ch in chunks:
        static, pads = dict(ch.static), dict(ch.pads)
        comp = Composition.of(static, ch.tags)
        steps = static.get("train.max_steps", 1)
        rows.append((ch, _work(comp, static, pads), len(ch.cells) * steps))
    heaviest = max(rows, key=lambda r: r[1] * r[2])
    picked = list({(r[0].static, r[0].pads): r for r in (heaviest, rows[0])}.values())[:PROGRAMS]
    compiles, rates = [], []
    for ch, work, _ in picked:
        c, per_step = _calibrate(ch)
        compiles.append(c)
        rates.append(per_step / work)
    rate = sum(rates) / len(rates)
    programs = len({(ch.static, ch.pads) for ch in chunks})
    compile_s = sum(compiles) / len(compiles) * programs
    stops = any(split(dict(ch.static), "train").get("loss_threshold", 0) > 0 for ch in chunks)
    fraction, sampled = 1.0, 0
    if stops:
        found = _stop_fraction(heaviest[0], heaviest[1] * rate)
        if found is not None:
            (fraction, sampled), stops = found, False
    train_s = fraction * sum(work * cell_steps * rate for _, work, cell_steps in rows)
    return {
        "seconds": compile_s + train_s,
        "compile_seconds": compile_s,
        "train_seconds": train_s,
        "programs": programs,
        "calibrated": len(picked),
        "stop_fraction": fraction,
        "stop_sample": sampled,
        "upper_bound": stops,
    }
