"""The plan of a run: its cells grouped into buckets (one compiled program per set of static
fields), every bucket checked before anything is written (fields classified, valid, a cell that
fits the memory budget, data that fits the model and probes: :mod:`attnlab.engine.fit`) and cut
into chunks, each padded to its largest sizes.

A run plans once per stage and passes the plan on: the dry run shows it, the executors train its
chunks, the time estimate calibrates on them and the store's damage report counts their cells.
Chunks (and so each cell's padding) are planned over *all* cells, finished or not, so a resumed
run trains every remaining cell exactly as an uninterrupted run would. Pure and deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnlab.engine import fit, grid
from attnlab.problem import Composition


@dataclass(frozen=True)
class Chunk:
    """One bucket's cells, trained together, padded to ``pads``."""

    static: tuple  # the bucket key ((field, value), ...) and the batched choices one value fills (constants)
    cells: tuple[dict, ...]
    pads: tuple  # ((size field, padded value), ...)
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Bucket:
    """Cells with the same static fields: one composition, one compiled program per padded size."""

    static: tuple  # ((field, value), ...)
    comp: Composition
    cells: tuple[dict, ...]
    cell_bytes: int  # the estimated memory of its largest cell
    chunks: tuple[Chunk, ...]


@dataclass(frozen=True)
class Plan:
    buckets: tuple[Bucket, ...]
    memory_budget: float
    recorded: tuple[str, ...]  # the numbers recorded over time (loss, probes); empty unless checked

    @classmethod
    def of(cls, cells: list[dict], tags: tuple[str, ...] = (), memory_budget: float = 2e9, check: bool = True) -> Plan:
        """The plan of ``cells``; ``check``: the fit check too (a run's plan always has it)."""
        tags = tuple(tags)
        buckets = []
        for key, members in grid.buckets(cells, tags).items():
            static = dict(key)
            comp = Composition.of(static, tags)
            comp.check(static)
            one = grid.cell_memory(comp, static, members, memory_budget)
            program = key + grid.constant_choices(comp, members)  # over all the bucket's cells: stable on resume
            chunks = tuple(
                Chunk(program, tuple(chunk), tuple(sorted(pads.items())), tags)
                for chunk, pads in grid.chunks(comp, static, members, memory_budget)
            )
            buckets.append(Bucket(key, comp, tuple(members), one, chunks))
        recorded = tuple(fit.check(cells, tags)) if check and cells else ()
        return cls(tuple(buckets), memory_budget, recorded)

    @property
    def chunks(self) -> list[Chunk]:
        return [ch for b in self.buckets for ch in b.chunks]

    @property
    def cells(self) -> int:
        return sum(len(b.cells) for b in self.buckets)

    @property
    def schema(self) -> dict[str, int]:
        """The parts' schema versions of every bucket (what a store checks compatibility on)."""
        out: dict[str, int] = {}
        for b in self.buckets:
            out |= b.comp.schema
        return out

    def todo(self, done: set[str]) -> list[Chunk]:
        """The chunks with their cells not in ``done`` (chunks with none left are dropped)."""
        out = []
        for ch in self.chunks:
            left = tuple(c for c in ch.cells if grid.cell_id(c) not in done)
            if left:
                out.append(Chunk(ch.static, left, ch.pads, ch.tags))
        return out
