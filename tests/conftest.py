"""Test-session setup.

JAX compiles dominate the suite's run time on a CPU, so XLA's backend (LLVM) optimisation is
turned down before JAX initialises its backend: compiles get 2-4x faster, and every comparison
in the suite is between paths compiled under the same flags. Set ATTNLAB_TEST_XLA_OPT=1 to test
with XLA's default flags instead.
"""

import os

if os.environ.get("ATTNLAB_TEST_XLA_OPT") != "1":
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_backend_optimization_level=0").strip()
