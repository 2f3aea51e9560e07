"""The experiments: each registers itself (:func:`attnlab.parts.register`); ``attnlab list``
prints their ids."""

from __future__ import annotations

from attnlab.errors import AttnlabError


def registry() -> dict:
    """Every registered experiment by id, in :func:`attnlab.parts.experiment_order`."""
    from attnlab.parts import registered

    return registered("experiment")


def get(exp_id: str):
    """The experiment ``exp_id``; ``sweep`` is the user grid, whose spec is its own (a TOML file
    or a results directory's spec.json), so it is not listed."""
    from attnlab.parts import did_you_mean

    if exp_id == "sweep":
        from attnlab.experiments.sweep import UserGrid

        return UserGrid()
    exps = registry()
    if exp_id not in exps:
        raise AttnlabError(f"experiment: unknown id {exp_id!r}{did_you_mean(exp_id, exps)}; valid: {', '.join(exps)}")
    return exps[exp_id]
