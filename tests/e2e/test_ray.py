"""The Ray executor on one real local Ray instance (2 CPUs, started once per session by the
``ray_session`` fixture): the same numbers as the local executor, progress, compile reuse on a
worker, a killed worker retried without duplicated rows, errors.

Cells are tiny jiang2024 cells in float64, so "the same" means bit for bit. The compile-reuse
test uses a max_steps of its own, so its programs are new to the session's workers and its
compile counts are its own."""

import os
import sys

import pytest
from typer.testing import CliRunner

from attnlab.cli import app
from attnlab.engine import executors, grid
from attnlab.engine.executors import RayExecutor, run_cells, train_chunk
from attnlab.engine.store import Store, part_name
from attnlab.errors import AttnlabError
from attnlab.experiments.jiang2024 import tiny_cell
from helpers import assert_same_rows, budget_for, plan


def cells_of(max_steps, mus=(1.0, 3.0, 5.0), Ns=(2, 4), reps=2):
    return [
        tiny_cell(mu=m, N=n, rep=r, max_steps=max_steps, log_every=10, dtype="float64")
        for m in mus
        for n in Ns
        for r in range(reps)
    ]


def test_ray_gives_the_local_numbers_bit_for_bit_with_progress(ray_session, tmp_path, capsys):
    cells = cells_of(31)
    ids = [grid.cell_id(c) for c in cells]
    budget = budget_for(cells, 2)
    local = Store(tmp_path / "local")
    assert run_cells(cells, local, memory_budget=budget, progress=False) == len(cells)

    remote, seen = Store(tmp_path / "ray"), []
    n = run_cells(cells, remote, memory_budget=budget, executor="ray", progress=True, on_chunk=seen.append)
    assert n == len(cells)
    assert seen == sorted(seen) and len(seen) == len(plan(cells, set(), budget)) and seen[-1] == len(cells)
    assert f"{len(cells)}/{len(cells)}" in capsys.readouterr().out  # the progress bar's final count

    a, b = local.assemble(ids), remote.assemble(ids)
    assert {"train_loss", "test_loss", "test_error", "stop_step", "status", "trace_train_loss"} <= set(a.column_names)
    assert_same_rows(a, b)
    assert sorted(p.name for p in local.parts.iterdir()) == sorted(p.name for p in remote.parts.iterdir())


def test_a_bucket_compiles_once_per_worker_and_later_chunks_reuse_it(ray_session):
    # two programs (pads N = 2 and N = 4), three chunks of two cells each
    cells = cells_of(32, mus=(1.0, 3.0, 5.0), Ns=(2, 4), reps=2)
    chunks = plan(cells, set(), budget_for(cells, 2))
    assert [dict(ch.pads)["data.N"] for ch in chunks] == [2, 2, 2, 4, 4, 4]
    ex = RayExecutor()
    tables = list(ex.map(train_chunk, chunks))
    assert sum(t.num_rows for t in tables) == len(cells)
    stats = ex.stats
    assert len(stats) == len(chunks)
    by_program = {}
    for s in stats:
        by_program.setdefault(s["program"], []).append(s)
    assert len(by_program) == 2
    for runs in by_program.values():
        # each bucket stays on the worker that started it: one compile, then two reuses
        assert len({s["pid"] for s in runs}) == 1
        assert [s["built"] for s in runs] == [True, False, False]
    cold = sorted(s["seconds"] for s in stats if s["built"])
    warm = sorted(s["seconds"] for s in stats if not s["built"])
    # measured: a reused program trains a chunk in milliseconds, a compile takes about a second
    assert max(warm) < 0.25 * min(cold), (cold, warm)


def test_a_killed_worker_is_retried_without_duplicated_rows(ray_session, tmp_path):
    cells = cells_of(31)
    ids = [grid.cell_id(c) for c in cells]
    budget = budget_for(cells, 2)
    chunks = plan(cells, set(), budget)
    victim = part_name(grid.cell_id(c) for c in chunks[1].cells)
    marker = tmp_path / "died-once"

    def die_once(chunk):
        # the worker process exits hard (as when killed) on its first attempt at one chunk
        if part_name(grid.cell_id(c) for c in chunk.cells) == victim and not marker.exists():
            marker.write_text(str(os.getpid()))
            os._exit(1)
        return train_chunk(chunk)

    ex = RayExecutor(max_retries=1)
    store = Store(tmp_path / "ray")
    assert run_cells(cells, store, memory_budget=budget, executor=ex, progress=False, train=die_once) == len(cells)
    assert len(ex.stats) == len(chunks) and len(ex.failures) == 1  # each chunk's result arrived once
    (redone,) = [s for s in ex.stats if s["chunk"] == 1]
    assert redone["attempts"] == 2 and redone["pid"] != int(marker.read_text())  # in a new process
    parts = sorted(p.name for p in store.parts.glob("part-*.parquet"))
    assert len(parts) == len(chunks) and victim in parts
    table = store.assemble(ids)
    assert table.num_rows == len(cells) and len(set(table.column("id").to_pylist())) == len(cells)

    local = Store(tmp_path / "local")
    run_cells(cells, local, memory_budget=budget, progress=False)
    assert_same_rows(local.assemble(ids), table)


def test_a_worker_that_keeps_dying_ends_the_run_with_one_clear_error(ray_session, tmp_path):
    cells = cells_of(34, mus=(1.0,), Ns=(2,), reps=1)
    attempts = tmp_path / "attempts"
    attempts.mkdir()

    def always_die(chunk):
        (attempts / str(os.getpid())).touch()
        os._exit(1)

    store = Store(tmp_path / "out")
    with pytest.raises(AttnlabError, match=r"a worker died 2 times training a chunk of 1 cells.*rerun") as e:
        run_cells(cells, store, executor=RayExecutor(max_retries=1), progress=False, train=always_die)
    assert "Traceback" not in str(e.value)
    assert len(list(attempts.iterdir())) == 2  # the first try and one retry, each in a new process
    assert store.done_ids() == set()


def test_an_exception_in_the_training_code_is_not_retried_and_keeps_its_message(ray_session, tmp_path):
    cells = cells_of(35, mus=(1.0,), Ns=(2,), reps=1)
    attempts = tmp_path / "attempts"
    attempts.mkdir()

    def bad_input(chunk):
        (attempts / f"{os.getpid()}-{len(list(attempts.iterdir()))}").touch()
        raise AttnlabError("data.mu: out of range in this chunk")

    with pytest.raises(AttnlabError) as e:
        run_cells(cells, Store(tmp_path / "out"), executor="ray", progress=False, train=bad_input)
    assert str(e.value) == "data.mu: out of range in this chunk"
    assert len(list(attempts.iterdir())) == 1


def test_without_ray_installed_the_ray_executor_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(AttnlabError, match=r'pip install -c constraints\.txt -e "\.\[ray\]"'):
        executors.make_executor("ray")
    with pytest.raises(AttnlabError, match="Ray is not installed"):
        run_cells(cells_of(36, reps=1), Store(tmp_path / "api"), executor="ray", progress=False)
    out = tmp_path / "cli"
    r = CliRunner().invoke(
        app, ["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", str(out), "--quiet", "--executor", "ray"]
    )
    assert r.exit_code == 2
    assert "Ray is not installed" in r.output and '".[ray]"' in r.output and "Traceback" not in r.output
    assert not out.exists()  # reported before anything is written


def test_an_unreachable_ray_address_is_one_clear_error_at_once(monkeypatch):
    """Ray would retry an address with nothing behind it for about ten minutes."""
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    class NotStarted:
        @staticmethod
        def is_initialized():
            return False

        @staticmethod
        def init(**kw):
            raise AssertionError("ray.init must not be reached")

    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    with pytest.raises(
        AttnlabError,
        match=rf"cannot join the Ray cluster at RAY_ADDRESS=127\.0\.0\.1:{port} "
        r"\(Connection refused\).*RAY_AUTH_MODE=token",
    ):
        executors._connect(NotStarted, None)


def test_a_model_of_ones_own_trains_on_ray_workers_that_never_saw_its_file(ray_session, tmp_path, monkeypatch):
    """The plugin's directory is on this process's sys.path only: its file goes to the workers
    with the chunks, and they give the local numbers bit for bit."""
    (tmp_path / "ray_parts.py").write_text(
        "import dataclasses\nimport jax.numpy as jnp\nfrom attnlab.models import jiang2024 as J\n\n"
        "def apply(params, x, hp):\n    f, aux = J.apply(params, x, hp)\n    return jnp.tanh(f), aux\n\n"
        "SQUASHED = dataclasses.replace(J.PART, name='squashed', apply=apply)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cells = [c | {"model.name": "ray_parts:SQUASHED"} for c in cells_of(17, mus=(2.0,), reps=1)]
    ids = [grid.cell_id(c) for c in cells]
    local, remote = Store(tmp_path / "local"), Store(tmp_path / "ray")
    assert run_cells(cells, local, memory_budget=budget_for(cells, 1), progress=False) == len(cells)
    assert run_cells(cells, remote, memory_budget=budget_for(cells, 1), executor="ray", progress=False) == len(cells)
    assert_same_rows(local.assemble(ids), remote.assemble(ids))
