"""The engine behind every grid: cells and buckets (grid), results on disk (store), executors.

The package is also callable: ``attnlab.sweep(spec, out, ...)`` runs a user grid
(:func:`attnlab.api.sweep`). Both share the name because importing any module of this package
binds the package to ``attnlab.sweep``, which would hide a plain function of that name.
"""

import sys
import types


class _Callable(types.ModuleType):
    def __call__(self, spec, out, sets=None, **kw) -> dict:
        """Run (or resume) a user grid into ``out``: see :func:`attnlab.api.sweep`."""
        from attnlab.api import sweep

        return sweep(spec, out, sets, **kw)


sys.modules[__name__].__class__ = _Callable
