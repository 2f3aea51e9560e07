"""The experiment registry: ``attnlab list`` prints these ids."""

from __future__ import annotations

from attnlab.errors import AttnlabError
from attnlab.experiments.base import Experiment


def registry() -> dict[str, Experiment]:
    from attnlab.experiments.jiang2024 import fig1, fig2, fig3
    from attnlab.experiments.li2023 import diagrams, regimes, settle
    from attnlab.experiments.li2023 import fig3 as li_fig3
    from attnlab.experiments.li2023 import fig4 as li_fig4
    from attnlab.experiments.li2023 import fig5 as li_fig5
    from attnlab.experiments.wu2023 import (
        data_gram,
        dynamics,
        encoder_mnist,
        limit,
        protocol,
        scaling,
        vit_mnist,
        width,
    )

    li = (diagrams.EXPERIMENTS[0], *regimes.EXPERIMENTS, diagrams.EXPERIMENTS[1], li_fig3.EXPERIMENT, li_fig4.EXPERIMENT,
          li_fig5.EXPERIMENT, *diagrams.EXPERIMENTS[2:], *settle.EXPERIMENTS)
    return {
        e.id: e
        for e in (fig1.EXPERIMENT, fig2.EXPERIMENT, fig3.EXPERIMENT, *li, *dynamics.EXPERIMENTS[:2],
                  *protocol.EXPERIMENTS, *scaling.EXPERIMENTS, *dynamics.EXPERIMENTS[2:], *width.EXPERIMENTS,
                  *limit.EXPERIMENTS, *encoder_mnist.EXPERIMENTS, *vit_mnist.EXPERIMENTS,
                  *data_gram.EXPERIMENTS)
    }


def get(exp_id: str) -> Experiment:
    """The experiment ``exp_id``; ``sweep`` is the user grid, whose spec is its own (a TOML file
    or a results directory's spec.json), so it is not listed."""
    if exp_id == "sweep":
        from attnlab.experiments.sweep import UserGrid

        return UserGrid()
    exps = registry()
    if exp_id not in exps:
        raise AttnlabError(f"experiment: unknown id {exp_id!r}; valid: {', '.join(exps)}")
    return exps[exp_id]
