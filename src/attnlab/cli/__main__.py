"""``python -m attnlab.cli``: the same as ``attnlab``."""

from attnlab.cli import app

app()
