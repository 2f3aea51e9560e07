"""Cell ids, buckets, the Parquet store and resume."""

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlab.experiments.jiang2024 import tiny_cell
from attnlab.sweep import grid
from attnlab.sweep.executors import run_cells
from attnlab.sweep.store import Store, atomic_write_bytes


@given(
    st.dictionaries(st.text(min_size=1, max_size=5), st.integers() | st.floats(allow_nan=False) | st.text(max_size=5))
)
def test_cell_id_ignores_key_order(cell):
    assert grid.cell_id(cell) == grid.cell_id(dict(reversed(list(cell.items()))))


def test_cell_ids_and_keys_differ_between_cells():
    a, b = tiny_cell(rep=0), tiny_cell(rep=1)
    assert grid.cell_id(a) != grid.cell_id(b)
    assert len(grid.cell_id(a)) == 16
    assert not np.array_equal(grid.cell_key(grid.cell_id(a)), grid.cell_key(grid.cell_id(b)))


def test_buckets_and_chunks(family):
    cells = [tiny_cell(N=n, rep=r) for n in (2, 4, 6) for r in range(3)] + [tiny_cell(d=14, rep=9)]
    bks = grid.buckets(family, cells)
    assert sorted(len(b) for b in bks.values()) == [1, 9]
    static, cells9 = next((dict(k), b) for k, b in bks.items() if len(b) == 9)
    one = family.cell_bytes(static, 6)
    chunks = list(grid.chunks(family, static, cells9, memory_budget=4 * one))
    assert [len(c) for c in chunks] == [4, 4, 1]
    assert [c["N"] for ch in chunks for c in ch] == sorted(c["N"] for c in cells9)


def test_atomic_write_leaves_no_partial_file(tmp_path):
    path = tmp_path / "x.bin"
    atomic_write_bytes(path, b"old")

    with pytest.raises(TypeError):
        atomic_write_bytes(path, object())  # fails mid-write
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]


def test_a_part_that_fails_mid_write_leaves_nothing(tmp_path, family, monkeypatch):
    import pyarrow.parquet

    def half_then_crash(table, where, **kw):
        where.write(b"PAR1 half a file")
        raise OSError("disk full")

    store = Store(tmp_path)
    monkeypatch.setattr(pyarrow.parquet, "write_table", half_then_crash)
    with pytest.raises(OSError, match="disk full"):
        run_cells(family, [tiny_cell()], store, progress=False)
    monkeypatch.undo()
    assert list(store.parts.iterdir()) == []  # neither a part nor a temporary file
    assert store.done_ids() == set()
    assert run_cells(family, [tiny_cell()], store, progress=False) == 1


def test_store_resume_skips_done_cells_and_gives_the_same_table(tmp_path, family):
    cells = [tiny_cell(mu=mu, N=n, rep=r) for mu in (1.0, 5.0) for n in (2, 4) for r in range(2)]
    store = Store(tmp_path)
    assert run_cells(family, cells, store, memory_budget=3 * family.cell_bytes({**cells[0], "log_every": 0}, 4),
                     progress=False) == len(cells)  # fmt: skip
    first = store.assemble([grid.cell_id(c) for c in cells])
    assert first.num_rows == len(cells)
    assert {"id", "N", "mu", "rep", "train_loss", "test_loss", "stop_step", "status"} <= set(first.column_names)
    assert run_cells(family, cells, store, progress=False) == 0
    again = store.assemble([grid.cell_id(c) for c in cells])
    assert again.equals(first)
    assert pq.read_table(tmp_path / "results.parquet").equals(first)


def test_interrupted_run_resumes_to_the_same_results(tmp_path, family):
    cells = [tiny_cell(mu=mu, N=n) for mu in (1.0, 5.0, 9.0) for n in (2, 4)]
    budget = 2 * family.cell_bytes(cells[0], 4)
    ref = Store(tmp_path / "ref")
    run_cells(family, cells, ref, memory_budget=budget, progress=False)

    class Crash(Exception):
        pass

    def crash(n):
        raise Crash

    broken = Store(tmp_path / "broken")
    with pytest.raises(Crash):
        run_cells(family, cells, broken, memory_budget=budget, progress=False, on_chunk=crash)
    assert len(broken.done_ids()) == 2  # the first chunk landed whole
    assert run_cells(family, cells, broken, memory_budget=budget, progress=False) == len(cells) - 2
    ids = [grid.cell_id(c) for c in cells]
    a, b = ref.assemble(ids), broken.assemble(ids)
    for col in ("id", "train_loss", "test_loss", "stop_step", "status"):
        assert a.column(col).equals(b.column(col)), col


def test_unknown_executor(tmp_path, family):
    with pytest.raises(ValueError, match="executor"):
        run_cells(family, [tiny_cell()], Store(tmp_path), executor="spark", progress=False)
