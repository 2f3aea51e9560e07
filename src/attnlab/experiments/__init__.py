"""The experiment registry: ``attnlab list`` prints these ids."""

from __future__ import annotations

from attnlab.experiments.base import AttnlabError, Experiment


def registry() -> dict[str, Experiment]:
    from attnlab.experiments import jiang2024_fig1, jiang2024_fig3

    return {e.id: e for e in (jiang2024_fig1.EXPERIMENT, jiang2024_fig3.EXPERIMENT)}


def get(exp_id: str) -> Experiment:
    exps = registry()
    if exp_id not in exps:
        raise AttnlabError(f"experiment: unknown id {exp_id!r}; valid: {', '.join(exps)}")
    return exps[exp_id]
