"""The command line, ``attnlab``: one module per group of commands, all on one Typer app.

run       list, reproduce ID|all, sweep SPEC.toml
parts     fields, check-part
audit     audit ID|all
results   report DIR..., query DIR SQL
bench     bench
"""

from attnlab.cli import audit, bench, parts, results, run  # noqa: F401  (each registers its commands)
from attnlab.cli.common import app, err, out

__all__ = ["app", "err", "out"]
