"""User-facing errors: the CLI prints the message and exits non-zero, never a traceback."""


class AttnlabError(Exception):
    """A user-facing error naming the field or file at fault."""
