"""Where a result came from: attnlab version and commit, jax/jaxlib versions, backend, strategy.

Everything here is best effort and never raises: a missing git, a tarball install or a
timeout gives "unknown" rather than an error that would stop a run.
"""

from __future__ import annotations

import functools
import os
import subprocess
from importlib import metadata
from pathlib import Path

_GIT_TIMEOUT_S = 5.0
_PACKAGE_DIR = Path(__file__).resolve().parent


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except Exception:
        return "unknown"


def _git(*args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", *args],
            cwd=_PACKAGE_DIR,
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},  # status must not take the index lock
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None


@functools.cache
def git_sha() -> str:
    """HEAD of the checkout the attnlab source lives in, plus "+dirty" if tracked files have
    changes; "unknown" if the source is not a tracked file of a git checkout (e.g. an install
    into a site-packages that happens to lie inside some repository) or git is unavailable."""
    try:
        tracked = _git("ls-files", "--error-unmatch", "--", "__init__.py")
        if tracked is None or tracked.returncode != 0:
            return "unknown"
        head = _git("rev-parse", "--verify", "HEAD")
        if head is None or head.returncode != 0:
            return "unknown"
        sha = head.stdout.strip()
        status = _git("status", "--porcelain", "--untracked-files=no")
        if status is None or status.returncode != 0:
            return sha + "+dirty"  # cannot tell: do not claim clean
        return sha + ("+dirty" if status.stdout.strip() else "")
    except Exception:
        return "unknown"


def versions() -> dict[str, str]:
    """The jax and jaxlib versions, as recorded in a store manifest."""
    try:
        import jax

        jax_version = str(jax.__version__)
    except Exception:
        jax_version = _dist_version("jax")
    try:
        import jaxlib

        jaxlib_version = str(jaxlib.__version__)
    except Exception:
        jaxlib_version = _dist_version("jaxlib")
    return {"jax": jax_version, "jaxlib": jaxlib_version}


def _backend() -> str:
    try:
        import jax

        return str(jax.default_backend())
    except Exception:
        return "unknown"


def provenance(strategy: str, dtype: str) -> dict[str, str]:
    """Strings describing the code and machine that produced a result."""
    v = versions()
    return {
        "attnlab_version": _dist_version("attnlab"),
        "git_sha": git_sha(),
        "jax_version": v["jax"],
        "jaxlib_version": v["jaxlib"],
        "backend": _backend(),
        "strategy": str(strategy),
        "dtype": str(dtype),
    }
