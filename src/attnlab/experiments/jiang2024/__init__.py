"""Jiang et al. 2024 (arXiv 2409.19345): what Fig. 1 and Fig. 3 share.

The problem is composed of the ``jiang2024`` data model (:mod:`attnlab.data.jiang2024`), the
``jiang2024`` model (:mod:`attnlab.models.jiang2024`) and the generic recipe with the paper's
protocol: logistic loss, full-batch GD. The assumptions below are not in any released source;
each is a parameter or a documented convention, listed in every report.
"""

from __future__ import annotations

from attnlab.data import jiang2024 as data
from attnlab.experiments.config import ExperimentSpec, expand

ASSUMPTIONS = (
    "Sample i has label +1 for even i and −1 for odd i (exactly balanced sets for even N); sample 0 is the "
    "y = +1 sample probed in Fig. 3.",
    "Each cell's training set, test set and init come from separate streams of a key derived from the hash of its "
    "config: repeats, seed blocks and grid cells are independent draws; a cell's numbers do not depend on the other "
    "cells in its batch (beyond float rounding when the chunking pads it to another N).",
    "Noise is isotropic as in the released scripts (data.projected = true gives the theory's variant).",
)

# The paper's protocol (the released scripts): Fig. 1's values; Fig. 3 overrides some.
DEFAULTS = {
    "data": {"name": "jiang2024", "M": 16, "d": 1024, "sigma_p": 0.2, "sigma_tilde_p": 4.0, "n_test": 100},
    "model": {"name": "jiang2024", "d_h": 512, "d_v": 512, "init_scale": 16.0},
    "train": {"loss": "logistic", "optimizer": "gd", "lr": 0.1, "max_steps": 1000, "loss_threshold": 0.01},
}


def tiny_cell(**kw) -> dict:
    """A complete cell small enough to train in well under a second (tests, examples). Keyword
    names may be short (``mu``, ``lr``) wherever one part has the field, or namespaced."""
    spec = ExperimentSpec(
        data=DEFAULTS["data"] | {"M": 4, "d": 12, "n_test": 10, "mu": 3.0, "N": 6},
        model=DEFAULTS["model"] | {"d_h": 6, "d_v": 5},
        train=DEFAULTS["train"] | {"max_steps": 40},
    )
    cell = expand(spec)[0]
    for k, v in kw.items():
        full = [c for c in cell if c == k or c.endswith("." + k)]
        if len(full) != 1:
            raise KeyError(f"tiny_cell: {k!r} matches {full or 'no field'}")
        cell[full[0]] = v
    return cell


__all__ = ["ASSUMPTIONS", "DEFAULTS", "data", "tiny_cell"]
