"""Test-session setup: the XLA flags, a compile cache shared by every process of the session,
the smoke runs every tier shares, the Ray instance, and a measure of the memory mappings.

Tiers (folders): ``unit`` (pure functions, no trainer compiled), ``engine`` (trainer, store,
executors, fast paths against the reference path), ``papers/<paper>`` (a paper's data, models
against their loop equations, probes, claims on synthetic data), ``e2e`` (CLI, resume, report,
browser, Ray, faults). ``make test`` runs them all, ``make test-fast`` the first two.

Compiles dominate the suite's run time on a CPU, so before JAX initialises its backend, XLA's
LLVM optimisation is turned down and its newer fusion emitters are turned off (the older ones
compile about twice as fast): every comparison in the suite is between paths compiled under the
same flags. ``ATTNLAB_TEST_XLA_OPT=1`` runs the suite under XLA's default flags instead.
"""

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

TEST_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")
if os.environ.get("ATTNLAB_TEST_XLA_OPT") != "1":
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = " ".join([flags, *(f for f in TEST_FLAGS if f.split("=")[0] not in flags)]).strip()

# One persistent compile cache for the session, in a temporary directory made by the first
# process (pytest, or xdist's controller) and inherited by its workers, CLI subprocesses and Ray
# workers: a program compiled once is loaded by the others, and after each module's caches are
# dropped. Every compile is kept (threshold 0 s): under the test flags most take < 0.5 s.
# ATTNLAB_TEST_COMPILE_CACHE=off runs the session without it.
_OWN_CACHE = "ATTNLAB_TEST_COMPILE_CACHE" not in os.environ
if _OWN_CACHE:
    os.environ["ATTNLAB_TEST_COMPILE_CACHE"] = tempfile.mkdtemp(prefix="attnlab-test-jax-")
os.environ["ATTNLAB_COMPILE_CACHE"] = os.environ["ATTNLAB_TEST_COMPILE_CACHE"]
os.environ["ATTNLAB_COMPILE_CACHE_MIN_SECONDS"] = "0"
# The suite's workers already keep every core busy, so compiling the next chunk ahead only adds
# contention there (measured: tests/papers/li2023 on 2 workers, 117 s without, 126 s with); the
# tests of compiling ahead turn it on explicitly.
os.environ.setdefault("ATTNLAB_COMPILE_AHEAD", "0")
# For the same reason each worker trains one chunk at a time; the tests of concurrent chunks
# ask for two workers explicitly.
os.environ.setdefault("ATTNLAB_WORKERS", "1")

from attnlab.train import compile_cache_dir, enable_compile_cache  # noqa: E402  (JAX reads the flags at import)

if enable_compile_cache():
    # processes that run JAX without attnlab's CLI (Ray workers) find it through JAX's own variables
    os.environ["JAX_COMPILATION_CACHE_DIR"] = compile_cache_dir()
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "ray: uses the session's local Ray instance (run in a pytest process of its own)"
    )


def pytest_collection_modifyitems(items):
    """Tests that start Ray get the ``ray`` mark: Ray leaves threads and environment behind in
    its process, so ``make test`` runs them apart (``-m ray``) from the rest (``-m "not ray"``)."""
    for item in items:
        if "ray_session" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)


def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):  # an xdist worker reports to the controller
        session.config.workeroutput["peak_mappings"] = _PEAK["mappings"]
    elif _OWN_CACHE:
        shutil.rmtree(os.environ["ATTNLAB_TEST_COMPILE_CACHE"], ignore_errors=True)  # a directory it made


def pytest_testnodedown(node, error):
    _PEAK["mappings"] = max(_PEAK["mappings"], getattr(node, "workeroutput", {}).get("peak_mappings", 0))


def pytest_terminal_summary(terminalreporter):
    limit = Path("/proc/sys/vm/max_map_count")
    limit = int(limit.read_text()) if limit.exists() else None
    if _PEAK["mappings"]:
        terminalreporter.write_line(
            f"peak memory mappings of a test process: {_PEAK['mappings']} (the kernel's limit: {limit})"
        )


# ---------------------------------------------------------------- compiled programs and mappings

_PEAK = {"mappings": 0}


def _mappings() -> int:
    try:
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


# A worker drops its compiled programs after a module once it holds this many memory mappings (the
# kernel's limit is 65530; keeping every program, this suite's workers peaked at 26 640)
FREE_AT_MAPPINGS = 30_000


@pytest.fixture(scope="module", autouse=True)
def _free_compiled_programs():
    """After a module, once the process holds ``FREE_AT_MAPPINGS`` memory mappings, drop the
    compiled programs kept so far (attnlab's and JAX's own caches): every XLA:CPU executable holds
    mappings, and the whole suite in one process would otherwise pass the kernel's limit of 65530
    and crash inside an XLA compile. Below that, later modules reuse them (a program several
    modules compile is traced and loaded once). The peak count is reported at the end of the
    session."""
    yield
    import gc

    import jax

    from attnlab.train import bucket

    held = _mappings()
    _PEAK["mappings"] = max(_PEAK["mappings"], held)
    if held < FREE_AT_MAPPINGS:
        return
    bucket.PROGRAMS.clear()
    jax.clear_caches()
    gc.collect()


@pytest.fixture(scope="session")
def jax_cache_env() -> dict:
    """Environment variables that give a process (a CLI run, a Ray worker) this session's
    compile cache: a compile done once is loaded by the others. It saves compile time only; the
    executables, so the numbers, are the same."""
    names = (
        "ATTNLAB_COMPILE_CACHE",
        "ATTNLAB_COMPILE_CACHE_MIN_SECONDS",
        "JAX_COMPILATION_CACHE_DIR",
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
        "XLA_FLAGS",
    )
    return {k: os.environ[k] for k in names if k in os.environ}


# ---------------------------------------------------------------- real data sets (make datasets)


@pytest.fixture(scope="module")
def mnist():
    from attnlab.datasets import mnist as dmnist

    return dmnist.load_mnist()


@pytest.fixture(scope="module")
def fashion():
    from attnlab.datasets import fashion_mnist as dfashion

    return dfashion.load_fashion_mnist()


@pytest.fixture(scope="module")
def cifar(tmp_path_factory):
    """A tiny CIFAR-10 (6 images per training batch, 8 test images) and its arrays."""
    from fixtures.cifar import make_cifar10

    return make_cifar10(tmp_path_factory.mktemp("cifar"), per_batch=6, n_test=8, seed=1)


# ---------------------------------------------------------------- shared smoke runs


class SmokeRun:
    """A finished ``attnlab reproduce ID --scale smoke`` run: its directory (read only: copy it
    to change it), verdict and CLI output."""

    def __init__(self, out: Path, output: str):
        self.out, self.output = out, output
        self.verdict = json.loads((out / "verdict.json").read_text())


def user_data(exp: str, root: Path) -> list[str]:
    """The --set lines that give ``exp`` the data only a user can give (a data set attnlab cannot
    download), as a small fixture written under ``root`` in the real layout; none for the others."""
    if exp != "wu2023-imdb-gram":
        return []
    from filelock import FileLock

    from fixtures.imdb import make_imdb

    with FileLock(root / "imdb-fixture.lock"):
        if not (root / "imdb-fixture" / "aclImdb").exists():
            make_imdb(root / "imdb-fixture")
    return ["--set", f"data.imdb_dir={root / 'imdb-fixture' / 'aclImdb'}"]


@pytest.fixture(scope="session")
def smoke(tmp_path_factory):
    """``smoke(ID)``: the session's one smoke run of an experiment, made through the CLI by the
    first test that asks for it. Shared by every test that reads a smoke run (the contract,
    resume, report, browser and per-paper claims tests) and by every xdist worker: a file lock
    makes a second worker wait for the run instead of repeating it."""
    from filelock import FileLock
    from typer.testing import CliRunner

    from attnlab.cli import app

    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "smoke-runs"
    root.mkdir(exist_ok=True)

    def run(exp: str) -> SmokeRun:
        out, done = root / exp, root / f"{exp}.output"
        with FileLock(root / f"{exp}.lock"):
            if not done.exists():
                shutil.rmtree(out, ignore_errors=True)
                args = ["reproduce", exp, "--scale", "smoke", "--out", str(out), "--quiet", *user_data(exp, root)]
                r = CliRunner().invoke(app, args)
                assert r.exit_code == 0, r.output
                done.write_text(r.output)
        return SmokeRun(out, done.read_text())

    return run


# ---------------------------------------------------------------- Ray


@pytest.fixture(scope="session")
def ray_session(jax_cache_env):
    """One local Ray instance (2 CPUs) for the whole session, started by the first test that
    needs it (as ``--executor ray`` starts one) and shut down at the end. Its workers inherit the
    environment of the moment it starts: this process's XLA flags (so they compile what the
    tests' local runs compile) and the session's compile cache."""
    import ray

    from attnlab.engine import executors

    os.environ.pop("RAY_ADDRESS", None)  # never a cluster someone has set up
    assert not executors._connect(ray, num_cpus=2)  # the executor's own start of a local instance
    assert ray.cluster_resources()["CPU"] == 2
    yield ray
    ray.shutdown()
