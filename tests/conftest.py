"""Test-session setup.

JAX compiles dominate the suite's run time on a CPU, so XLA's backend (LLVM) optimisation is
turned down before JAX initialises its backend: compiles get 2-4x faster, and every comparison
in the suite is between paths compiled under the same flags. Set ATTNLAB_TEST_XLA_OPT=1 to test
with XLA's default flags instead.
"""

import os

import pytest

# In-process CLI runs would turn JAX's persistent compile cache on for the whole test process;
# the tests compare freshly compiled paths, so it stays off here (subprocesses get their own).
os.environ.setdefault("ATTNLAB_COMPILE_CACHE", "off")

if os.environ.get("ATTNLAB_TEST_XLA_OPT") != "1":
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_backend_optimization_level=0").strip()


@pytest.fixture(scope="module", autouse=True)
def _free_compiled_programs():
    """After each module, drop the compiled programs it kept (attnlab's and JAX's own caches):
    every XLA:CPU executable holds memory mappings, and the whole suite in one process would
    otherwise pass the kernel's limit of 65530 and crash inside an XLA compile."""
    yield
    import gc

    import jax

    from attnlab import train

    train._PROGRAMS.clear()
    jax.clear_caches()
    gc.collect()


@pytest.fixture(scope="session")
def jax_cache_env(tmp_path_factory) -> dict:
    """Environment variables that give a process (a CLI run, a Ray worker) a JAX compilation
    cache shared across this session's processes: a compile done once is loaded by the others.
    It saves compile time only; the executables, so the numbers, are the same. Not set in this
    process, whose tests time compiles."""
    return {
        "JAX_COMPILATION_CACHE_DIR": str(tmp_path_factory.mktemp("jax-cache")),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    }


@pytest.fixture(scope="session")
def ray_session(jax_cache_env):
    """One local Ray instance (2 CPUs) for the whole session, started by the first test that
    needs it (as ``--executor ray`` starts one) and shut down at the end. Its workers inherit the
    environment of the moment it starts: this process's XLA flags (so they compile what the
    tests' local runs compile) and the shared compilation cache."""
    import ray

    from attnlab.sweep import executors

    os.environ.pop("RAY_ADDRESS", None)  # never a cluster someone has set up
    saved = {k: os.environ.get(k) for k in jax_cache_env}
    os.environ.update(jax_cache_env)
    try:
        assert not executors._connect(ray, num_cpus=2)  # the executor's own start of a local instance
    finally:  # only the cache variables: ray.init sets some of its own (RAY_AUTH_MODE) that stay
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert ray.cluster_resources()["CPU"] == 2
    yield ray
    ray.shutdown()
