"""Cell ids, buckets, chunks, the classification guard, planning, and runs into a store (resume).

The runs here share one static config and chunks of two cells padded to N = 2 or 4, so their
compiled programs are built once and reused."""

import dataclasses
import json
import os
import threading

import jax
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlab import problem as P
from attnlab.engine import executors, grid
from attnlab.engine.executors import run_cells, train_chunk
from attnlab.engine.store import Store, atomic_write_bytes
from attnlab.errors import AttnlabError
from attnlab.experiments.jiang2024 import tiny_cell
from attnlab.parts import part
from helpers import plan, use_part


def cell(**kw):
    return tiny_cell(max_steps=20, log_every=10, **kw)


def budget_for(cells, n):
    """A memory budget that makes chunks of n cells in the cells' (single) bucket."""
    (key,) = grid.buckets(cells)
    static = dict(key)
    comp = P.Composition.of(static)
    top = {s: max(c[s] for c in cells) for s in comp.size_fields()}
    return (n + 0.5) * comp.cell_bytes(static, top)


# ---------------------------------------------------------------- ids


KEYS = st.text(min_size=1, max_size=5)
VALUES = st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)


@given(st.dictionaries(KEYS, VALUES))
def test_cell_id_ignores_key_order(c):
    assert grid.cell_id(c) == grid.cell_id(dict(reversed(list(c.items()))))


def test_cell_id_ignores_key_order_of_a_real_cell():
    c = cell()
    assert grid.cell_id(c) == grid.cell_id(dict(reversed(list(c.items()))))


def test_key_order_independence_is_not_true_by_construction(monkeypatch):
    """Mutation check: without sorted keys the ids of a reordered cell differ, so the property
    above tests something."""
    c = cell()
    monkeypatch.setattr(grid, "canonical", lambda d: json.dumps(d, separators=(",", ":")))
    assert grid.cell_id(c) != grid.cell_id(dict(reversed(list(c.items()))))


def test_cell_ids_and_keys_differ_between_cells():
    a, b = cell(rep=0), cell(rep=1)
    assert grid.cell_id(a) != grid.cell_id(b)
    assert len(grid.cell_id(a)) == 16
    assert not np.array_equal(grid.cell_key(grid.cell_id(a)), grid.cell_key(grid.cell_id(b)))
    ids = {grid.cell_id(cell(mu=m, N=n)) for m in (1.0, 2.0) for n in (2, 4)}
    assert len(ids) == 4
    assert grid.cell_id(cell(lr=0.1)) != grid.cell_id(cell(lr=0.1000001))


def test_ids_change_when_a_parts_schema_version_changes(monkeypatch):
    c = cell()
    before = grid.cell_id(c)
    data = part("data", "jiang2024")
    bumped = dataclasses.replace(data, version=data.version + 1)
    grid._schema.cache_clear()
    try:
        use_part(monkeypatch, bumped)
        assert f"data/jiang2024:{bumped.version}" in grid._schema("jiang2024", "jiang2024")
        assert grid.cell_id(c) != before
        monkeypatch.undo()
    finally:
        grid._schema.cache_clear()
    assert grid.cell_id(c) == before


def test_schema_names_every_part():
    assert grid._schema("jiang2024", "jiang2024") == (
        f"data/jiang2024:{part('data', 'jiang2024').version},"
        f"model/jiang2024:{part('model', 'jiang2024').version},train:{P.RECIPE_VERSION}"
    )


# ---------------------------------------------------------------- buckets, chunks, classification


def test_buckets_and_chunks():
    cells = [cell(N=n, rep=r) for n in (2, 4, 6) for r in range(3)] + [cell(d=14, rep=9)]
    bks = grid.buckets(cells)
    assert sorted(len(b) for b in bks.values()) == [1, 9]
    key, cells9 = next((k, b) for k, b in bks.items() if len(b) == 9)
    static = dict(key)
    assert "data.N" not in static and "data.mu" not in static and "rep" not in static  # batched / key-only
    assert static["data.d"] == 12 and static["train.max_steps"] == 20
    comp = P.Composition.of(static)
    one = comp.cell_bytes(static, {"data.N": 6})
    assert comp.cell_bytes(static, {"data.N": 2}) < one
    chunks = list(grid.chunks(comp, static, cells9, memory_budget=4 * one))
    assert [len(c) for c, _ in chunks] == [4, 4, 1]
    assert [c["data.N"] for ch, _ in chunks for c in ch] == sorted(c["data.N"] for c in cells9)
    assert [pads for _, pads in chunks] == [{"data.N": 4}, {"data.N": 6}, {"data.N": 6}]  # each its own largest N
    assert [len(c) for c, _ in grid.chunks(comp, static, cells9, memory_budget=1e12, max_cells=5)] == [5, 4]


def test_batch_inputs():
    cells = [cell(mu=1.0, N=2, lr=0.2), cell(mu=5.0, N=4, lr=0.3)]
    comp = P.Composition.of(cells[0])
    v = grid.batch_inputs(comp, cells)
    assert set(v) == {"data.mu", "data.sigma_p", "data.sigma_tilde_p", "data.N", "lr", "reduction", "key"}
    assert v["reduction"].tolist() == [0, 0]  # the mean (the cells leave it out at its default): a choice's index
    assert v["lr"].dtype == np.float32 and v["lr"].tolist() == pytest.approx([0.2, 0.3])
    assert v["data.N"].tolist() == [2, 4] and v["key"].shape == (2, 2) and v["key"].dtype == np.uint32
    np.testing.assert_array_equal(v["key"][1], grid.cell_key(grid.cell_id(cells[1])))
    assert grid.batch_inputs(comp, [cell(dtype="float64")])["data.mu"].dtype == np.float64


def test_an_unclassified_field_is_an_error():
    with pytest.raises(AttnlabError, match="'foo'"):
        grid.buckets([cell() | {"foo": 1}])
    with pytest.raises(AttnlabError, match="'regime'"):
        grid.buckets([cell() | {"regime": "benign"}])  # an experiment label not declared as a tag
    bks = grid.buckets([cell() | {"regime": "benign"}, cell() | {"regime": "harmful"}], tags=("regime",))
    assert len(bks) == 1 and len(next(iter(bks.values()))) == 2  # a tag is key-only
    comp = P.Composition.of(cell(), ("regime",))
    assert comp.classify("regime") == "key" and comp.classify("seed") == "key"
    assert comp.classify("data.mu") == "batched" and comp.classify("train.lr") == "batched"
    assert comp.classify("data.d") == "static" and comp.classify("train.lr_mult.QK") == "static"
    with pytest.raises(AttnlabError, match="data.nope"):
        comp.classify("data.nope")
    with pytest.raises(AttnlabError, match="data.name"):
        P.Composition.of(cell() | {"data.name": "mnist"})


# ---------------------------------------------------------------- planning


def test_plan_is_deterministic_pure_and_skips_done_cells():
    cells = [cell(mu=mu, N=n) for mu in (1.0, 5.0, 9.0) for n in (2, 4)]
    before = json.dumps(cells)
    budget = budget_for(cells, 2)
    a, b = plan(cells, set(), budget), plan(cells, set(), budget)
    assert a == b and json.dumps(cells) == before  # same output twice, input untouched
    assert [len(ch.cells) for ch in a] == [2, 2, 2]
    assert [dict(ch.pads) for ch in a] == [{"data.N": 2}, {"data.N": 4}, {"data.N": 4}]
    assert sorted(grid.cell_id(c) for ch in a for c in ch.cells) == sorted(grid.cell_id(c) for c in cells)
    done = {grid.cell_id(a[0].cells[0]), grid.cell_id(a[1].cells[1])}
    rest = plan(cells, done, budget)
    assert [len(ch.cells) for ch in rest] == [1, 1, 2]
    assert [ch.pads for ch in rest] == [ch.pads for ch in a]  # padding planned over all cells
    assert not done & {grid.cell_id(c) for ch in rest for c in ch.cells}
    assert plan(cells, {grid.cell_id(c) for c in cells}, budget) == []


def test_train_chunk_returns_a_table_with_provenance_and_traces():
    cells = [cell(mu=1.0, N=2), cell(mu=5.0, N=2)]
    (chunk,) = plan(cells, set(), budget_for(cells, 2))
    table = train_chunk(chunk)
    assert isinstance(table, pa.Table) and table.num_rows == 2
    prov = {"attnlab_version", "git_sha", "jax_version", "jaxlib_version", "backend", "strategy", "dtype"}
    assert prov <= set(table.column_names)
    rows = table.to_pylist()
    assert [r["id"] for r in rows] == [grid.cell_id(c) for c in cells]
    for r, c in zip(rows, cells, strict=True):
        assert {k: r[k] for k in c} == c  # every cell field, namespaced
        assert r["dtype"] == "float32" and r["strategy"] in ("sequential", "vmap")
        assert r["status"] in ("converged", "cap", "diverged") and r["seconds"] > 0
        assert r["trace_step"] == [0, 10, 20]
        traces = [k for k in r if k.startswith("trace_") and k != "trace_step"]
        assert traces == ["trace_train_loss"]
        assert all(len(r[k]) == len(r["trace_step"]) for k in traces)


# ---------------------------------------------------------------- runs into a store


def test_atomic_write_leaves_no_partial_file(tmp_path):
    path = tmp_path / "x.bin"
    atomic_write_bytes(path, b"old")
    with pytest.raises(TypeError):
        atomic_write_bytes(path, object())  # fails mid-write
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]


def test_a_part_that_fails_mid_write_leaves_nothing(tmp_path, monkeypatch):
    cells = [cell(mu=1.0, N=2), cell(mu=5.0, N=2)]
    budget = budget_for(cells, 2)

    def half_then_crash(table, where, **kw):
        where.write(b"PAR1 half a file")
        raise OSError("disk full")

    store = Store(tmp_path)
    monkeypatch.setattr(pq, "write_table", half_then_crash)
    with pytest.raises(OSError, match="disk full"):
        run_cells(cells, store, memory_budget=budget, progress=False)
    monkeypatch.undo()
    assert list(store.parts.iterdir()) == []  # neither a part nor a temporary file
    assert store.done_ids() == set()
    assert run_cells(cells, store, memory_budget=budget, progress=False) == 2


def test_store_resume_skips_done_cells_and_gives_the_same_table(tmp_path):
    cells = [cell(mu=mu, N=n, rep=r) for mu in (1.0, 5.0) for n in (2, 4) for r in range(2)]
    store = Store(tmp_path)
    assert run_cells(cells, store, memory_budget=budget_for(cells, 2), progress=False) == len(cells)
    ids = [grid.cell_id(c) for c in cells]
    first = store.assemble(ids)
    assert first.num_rows == len(cells) and first.column("id").to_pylist() == ids
    assert {
        "id",
        "data.N",
        "data.mu",
        "train.lr",
        "rep",
        "train_loss",
        "test_loss",
        "stop_step",
        "status",
        "trace_step",
        "trace_train_loss",
        "git_sha",
    } <= set(first.column_names)
    assert run_cells(cells, store, progress=False) == 0
    again = store.assemble(ids)
    assert again.equals(first)
    assert pq.read_table(tmp_path / "results.parquet").equals(first)
    with pytest.raises(AttnlabError, match="1 of 9 requested cells is missing"):
        store.assemble([*ids, grid.cell_id(cell(rep=99))])


def test_interrupted_run_resumes_to_the_same_results(tmp_path):
    cells = [cell(mu=mu, N=n) for mu in (1.0, 5.0, 9.0) for n in (2, 4)]
    budget = budget_for(cells, 2)
    ref = Store(tmp_path / "ref")
    run_cells(cells, ref, memory_budget=budget, progress=False)

    class Crash(Exception):
        pass

    def crash(n):
        raise Crash

    broken = Store(tmp_path / "broken")
    with pytest.raises(Crash):
        run_cells(cells, broken, memory_budget=budget, progress=False, on_chunk=crash)
    assert len(broken.done_ids()) == 2  # the first chunk landed whole
    assert run_cells(cells, broken, memory_budget=budget, progress=False) == len(cells) - 2
    ids = [grid.cell_id(c) for c in cells]
    a, b = ref.assemble(ids), broken.assemble(ids)
    for col in ("id", "train_loss", "test_loss", "stop_step", "status", "trace_train_loss"):
        assert a.column(col).equals(b.column(col)), col


def test_compile_ahead_gives_the_same_results_as_compiling_each_chunk_when_it_trains(tmp_path, monkeypatch):
    """The local executor compiles chunk i+1's program in a background thread while chunk i
    trains; the rows are the ones of chunks compiled one by one, value for value."""
    from attnlab import train as T

    cells = [cell(mu=mu, N=n) for mu in (1.0, 5.0) for n in (2, 3, 4)]
    budget = budget_for(cells, 2)  # three chunks, three padded sizes: three programs
    stores = {ahead: Store(tmp_path / str(ahead)) for ahead in (False, True)}
    compiled_in = {False: [], True: []}
    compile = jax.stages.Lowered.compile

    def recorded(self, *a, **k):
        compiled_in[ahead].append(threading.current_thread().name)
        return compile(self, *a, **k)

    monkeypatch.setattr(jax.stages.Lowered, "compile", recorded)
    for ahead, store in stores.items():
        T.bucket.PROGRAMS.clear()
        ex = executors.LocalExecutor(ahead, workers=1)
        run_cells(cells, store, memory_budget=budget, progress=False, executor=ex)
    # each program compiled once; ahead, the second and third in the background thread
    assert compiled_in[False] == ["MainThread"] * 3
    assert sorted(compiled_in[True]) == ["MainThread", "attnlab-compile_0", "attnlab-compile_0"]
    ids = [grid.cell_id(c) for c in cells]
    a, b = (s.assemble(ids) for s in stores.values())
    for col in ("id", "train_loss", "test_loss", "stop_step", "status", "trace_train_loss"):
        assert a.column(col).equals(b.column(col)), col


def test_chunks_trained_two_at_a_time_give_the_rows_of_one_at_a_time(tmp_path, monkeypatch):
    """Two workers train two chunks at once in two threads, with or without compiling the next
    chunk's program ahead; every program compiles once and every row is the one the single
    worker gives, value for value."""
    from attnlab import train as T

    cells = [cell(mu=mu, N=n) for mu in (1.0, 5.0) for n in (2, 3, 4)]
    budget = budget_for(cells, 2)  # three chunks, three programs
    trained_in, compiled_in = [], []
    compile = jax.stages.Lowered.compile

    def recorded(self, *a, **k):
        compiled_in.append(threading.current_thread().name)
        return compile(self, *a, **k)

    def traced(ch):
        trained_in.append(threading.current_thread().name)
        return train_chunk(ch)

    monkeypatch.setattr(jax.stages.Lowered, "compile", recorded)
    stores = {}
    for workers, ahead in ((1, False), (2, False), (2, True)):
        T.bucket.PROGRAMS.clear()
        trained_in.clear(), compiled_in.clear()
        stores[workers, ahead] = store = Store(tmp_path / f"{workers}-{ahead}")
        ex = executors.LocalExecutor(ahead=ahead, workers=workers)
        assert run_cells(cells, store, memory_budget=budget, progress=False, executor=ex, train=traced) == 6
        assert len(compiled_in) == 3
        if workers == 1:
            assert trained_in == compiled_in == ["MainThread"] * 3
        else:
            assert len(trained_in) == 3 and all(t.startswith("attnlab-chunk") for t in trained_in)
            assert len(set(trained_in)) == 2  # both workers trained
            # which thread compiles a program (a worker, or the one compiling ahead) is a race
            assert all(t.startswith(("attnlab-chunk", "attnlab-compile")) for t in compiled_in)
    ids = [grid.cell_id(c) for c in cells]
    a, *others = (s.assemble(ids) for s in stores.values())
    for b in others:
        for col in a.column_names:
            if col != "seconds":
                assert a.column(col).equals(b.column(col)), col


def test_a_chunk_that_fails_beside_others_loses_none_of_their_rows(tmp_path):
    """With two workers, a chunk that raises stops new chunks from starting; the chunk running
    beside it finishes and is written, then the error is raised; a rerun trains only the rest."""
    cells = [cell(mu=mu, N=n) for mu in (1.0, 5.0) for n in (2, 3, 4)]
    chunks = plan(cells, set(), budget_for(cells, 2))
    assert len(chunks) == 3
    bad = grid.cell_id(chunks[0].cells[0])
    started = []

    def flaky(ch):
        started.append(ch)
        if any(grid.cell_id(c) == bad for c in ch.cells):
            raise RuntimeError("chunk failed")
        return train_chunk(ch)

    store = Store(tmp_path)
    ex = executors.LocalExecutor(ahead=False, workers=2)
    with pytest.raises(RuntimeError, match="chunk failed"):
        run_cells(cells, store, memory_budget=budget_for(cells, 2), progress=False, executor=ex, train=flaky)
    assert len(started) == 2  # the third never started
    assert store.done_ids() == {grid.cell_id(c) for c in chunks[1].cells}
    assert run_cells(cells, store, memory_budget=budget_for(cells, 2), progress=False, executor=ex) == 4


@pytest.mark.parametrize("value, workers", [("1", 1), ("3", 3)])
def test_workers_follow_their_environment_variable(value, workers, monkeypatch):
    monkeypatch.setenv("ATTNLAB_WORKERS", value)
    assert executors.LocalExecutor().workers == workers == executors.default_workers()
    assert executors.LocalExecutor(workers=2).workers == 2


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_bad_worker_count_is_refused_naming_its_variable(value, monkeypatch):
    monkeypatch.setenv("ATTNLAB_WORKERS", value)
    with pytest.raises(AttnlabError, match=f"ATTNLAB_WORKERS: must be a whole number ≥ 1, got '{value}'"):
        executors.LocalExecutor()


def test_workers_are_fewer_where_their_chunks_would_not_fit_in_memory(monkeypatch, tmp_path):
    """Four workers of 1 GB chunks need 4 GB: with 2.5 GB available two train at once; with no
    reading of the memory the count stands; never fewer than one."""
    ex = executors.LocalExecutor(ahead=False, workers=4)
    monkeypatch.setattr(executors, "memory_available", lambda: 2.5e9)
    assert ex.within(1e9).workers == 2 and ex.within(1e10).workers == 1 and ex.within(1e8) is ex
    seen = []
    monkeypatch.setattr(executors.LocalExecutor, "_concurrent", lambda self, *a: seen.append(self.workers) or iter(()))
    cells = [cell(mu=mu, N=n) for mu in (1.0, 5.0) for n in (2, 3, 4)]
    budget = budget_for(cells, 2)  # three chunks
    monkeypatch.setattr(executors, "memory_available", lambda: 2.5 * budget)
    run_cells(cells, Store(tmp_path), memory_budget=budget, executor=ex, progress=False)
    assert seen == [2]  # run_cells fitted the executor to the plan's budget
    monkeypatch.setattr(executors, "memory_available", lambda: None)
    assert ex.within(1e12) is ex


def test_without_the_variable_the_cpu_gets_a_worker_per_core_up_to_four(monkeypatch):
    monkeypatch.delenv("ATTNLAB_WORKERS")
    cores = len(os.sched_getaffinity(0))
    assert executors.default_workers() == max(1, min(cores, 4))
    monkeypatch.setattr(executors.os, "sched_getaffinity", lambda pid: set(range(16)))
    assert executors.default_workers() == 4
    monkeypatch.setattr(executors.jax, "default_backend", lambda: "gpu")
    assert executors.default_workers() == 1


def test_a_chunk_compiled_ahead_trains_without_compiling_again():
    from attnlab import train as T

    cells = [cell(mu=mu) for mu in (1.0, 5.0)]
    (ch,) = plan(cells, set(), 1e9)
    T.bucket.PROGRAMS.clear()
    before = dict(T.COMPILE_TIME)
    executors.compile_chunk(ch)
    (progs,) = T.bucket.PROGRAMS.values()
    (done,) = progs.executables.values()
    assert done.done() and done.exception() is None
    assert T.COMPILE_TIME["executables"] == before["executables"] + 1
    assert T.COMPILE_TIME["compiled_s"] > before["compiled_s"] and T.COMPILE_TIME["waited_s"] == before["waited_s"]
    built, compiled = T.PROGRAMS_BUILT["count"], dict(T.COMPILE_TIME)
    executors.train_chunk(ch)
    assert T.PROGRAMS_BUILT["count"] == built and list(progs.executables.values()) == [done]
    # nothing compiled again: the chunk's wait was its lookup
    assert (
        T.COMPILE_TIME["compiled_s"] == compiled["compiled_s"]
        and T.COMPILE_TIME["executables"] == compiled["executables"]
    )


def test_a_compile_ahead_that_fails_is_raised_by_the_chunk_itself(monkeypatch):
    """The background compile's error is not lost or raised there: the chunk's own call raises it."""
    from attnlab import train as T

    (ch,) = plan([cell()], set(), 1e9)
    T.bucket.PROGRAMS.clear()

    def broken(self, *a, **k):
        raise RuntimeError("lowering failed")

    monkeypatch.setattr(jax.stages.Lowered, "compile", broken)
    executors._quietly(executors.compile_chunk, ch)  # swallowed: nothing is kept
    (progs,) = T.bucket.PROGRAMS.values()
    assert progs.executables == {}
    with pytest.raises(RuntimeError, match="lowering failed"):
        executors.train_chunk(ch)


def test_unknown_executor(tmp_path):
    with pytest.raises(ValueError, match="executor: unknown 'spark'"):
        run_cells([cell()], Store(tmp_path), executor="spark", progress=False)
    assert executors.EXECUTORS == ("local", "ray")


@pytest.mark.parametrize("value, ahead", [("1", True), ("0", False), ("off", False)])
def test_compile_ahead_follows_its_environment_variable(value, ahead, monkeypatch):
    monkeypatch.setenv("ATTNLAB_COMPILE_AHEAD", value)
    assert executors.LocalExecutor().ahead is ahead and executors.LocalExecutor(not ahead).ahead is not ahead
